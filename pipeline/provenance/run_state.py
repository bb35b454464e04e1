"""Runs that ended without completing (a kill, Ctrl-C, a crash) are shown so, not left
RUNNING. `turbotfx run` registers the run's context itself before TFX does (TFX reuses a
context of that name), marked running, and marks it finished or aborted at the end; a kill
leaves it marked running with no process alive, which `runs` shows as ABORTED and the next
run records so. Unfinished executions of an aborted run become CANCELED with a mark."""

from __future__ import annotations

from ml_metadata import errors as mlmd_errors
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline.provenance.graph import PIPELINE_CONTEXT, RUN_CONTEXT

UNFINISHED_STATES = (mlmd_pb.Execution.NEW, mlmd_pb.Execution.RUNNING, mlmd_pb.Execution.UNKNOWN)
ABORTED_MARK = "turbotfx_aborted"
# On the run's context: where a `turbotfx run` got to.
RUN_STATE = "turbotfx_run_state"
RUNNING, FINISHED, ABORTED = "running", "finished", "aborted"
# On the run's context: the model (serving directory) it ran for, so `runs` places a run even
# when it failed before the Trainer.
RUN_MODEL_NAME = "turbotfx_model_name"


def begin(store: metadata_store.MetadataStore, pipeline_name: str, run_id: str,
          model_name: str | None = None) -> None:
    """Registers the run's context, marked running and under its pipeline's (as TFX links
    them), with the model it is for, before its first component starts."""
    pipeline_id = _context_id(store, PIPELINE_CONTEXT, pipeline_name)
    run = mlmd_pb.Context(type_id=_context_type_id(store, RUN_CONTEXT), name=run_id)
    run.custom_properties[RUN_STATE].string_value = RUNNING
    if model_name:
        run.custom_properties[RUN_MODEL_NAME].string_value = model_name
    [run_context_id] = store.put_contexts([run])
    store.put_parent_contexts([mlmd_pb.ParentContext(child_id=run_context_id, parent_id=pipeline_id)])


def _context_type_id(store: metadata_store.MetadataStore, type_name: str) -> int:
    try:
        return store.get_context_type(type_name).id
    except mlmd_errors.NotFoundError:
        return store.put_context_type(mlmd_pb.ContextType(name=type_name))


def _context_id(store: metadata_store.MetadataStore, type_name: str, name: str) -> int:
    """The context's id, registered first if TFX has not yet (it reuses one of that name)."""
    found = store.get_context_by_type_and_name(type_name, name)
    if found is not None:
        return found.id
    [context_id] = store.put_contexts([mlmd_pb.Context(type_id=_context_type_id(store, type_name), name=name)])
    return context_id


def finish(store: metadata_store.MetadataStore, run_id: str) -> None:
    """The run ended on its own (completed, or a component failed)."""
    _set_state(store, run_id, FINISHED)


def recorded_model_name(run: mlmd_pb.Context) -> str | None:
    """The model a run was for; None for a run recorded before turbotfx kept it."""
    return run.custom_properties[RUN_MODEL_NAME].string_value if RUN_MODEL_NAME in run.custom_properties else None


def recorded_state(run: mlmd_pb.Context) -> str | None:
    """running, finished or aborted; None for a run turbotfx did not start (e.g. Kubeflow)."""
    return run.custom_properties[RUN_STATE].string_value if RUN_STATE in run.custom_properties else None


def abort_unfinished(store: metadata_store.MetadataStore, run_id: str | None = None,
                     failed_too: bool = False) -> list[str]:
    """Marks one run aborted (an interrupted one), or every run still marked running or with
    unfinished executions (only when no run can be alive, e.g. under the SQLite store's run
    lock); returns the runs marked. failed_too: the run's FAILED executions were stopped by
    the interrupt (TFX records a component it interrupted as failed), so they are CANCELED too."""
    stopped = (*UNFINISHED_STATES, mlmd_pb.Execution.FAILED) if failed_too else UNFINISHED_STATES
    if run_id is None:
        runs = store.get_contexts_by_type(RUN_CONTEXT)
    else:
        found = store.get_context_by_type_and_name(RUN_CONTEXT, run_id)
        runs = [found] if found is not None else []
    touched = []
    for run in runs:
        unfinished = [e for e in store.get_executions_by_context(run.id) if e.last_known_state in stopped]
        for execution in unfinished:
            execution.last_known_state = mlmd_pb.Execution.CANCELED
            execution.custom_properties[ABORTED_MARK].int_value = 1
        if unfinished:
            store.put_executions(unfinished)
        if unfinished or run_id is not None or recorded_state(run) == RUNNING:
            _set_state(store, run.name, ABORTED)
            touched.append(run.name)
    return touched


def _set_state(store: metadata_store.MetadataStore, run_id: str, state: str) -> None:
    run = store.get_context_by_type_and_name(RUN_CONTEXT, run_id)
    if run is not None:
        run.custom_properties[RUN_STATE].string_value = state
        store.put_contexts([run])
