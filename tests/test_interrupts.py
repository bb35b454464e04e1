"""Ctrl-C (or SIGTERM, raised as KeyboardInterrupt) that lands inside a Beam step comes back
from Beam wrapped in a RuntimeError, and TFX records the component FAILED: the run must still
end as an interrupted one (pipeline/workspace.py), its stopped component CANCELED."""

from __future__ import annotations

import apache_beam as beam
import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline import workspace
from pipeline.provenance import run_state
from pipeline.provenance.graph import RUN_CONTEXT


def _beam_error(step) -> BaseException:
    """What a real DirectRunner pipeline raises when one of its steps raises."""
    with pytest.raises(BaseException) as raised:
        with beam.Pipeline() as pipeline:
            _ = pipeline | beam.Create([1, 2]) | beam.Map(step)
    return raised.value


def _interrupted(_):
    raise KeyboardInterrupt


def _broken(_):
    raise ValueError("a real failure")


def test_an_interrupt_inside_a_beam_step_is_told_from_a_failure():
    interrupted = _beam_error(_interrupted)
    assert not isinstance(interrupted, KeyboardInterrupt)  # Beam wrapped it: the case to catch
    assert workspace._caused_by_interrupt(interrupted)
    # TFX re-raises an executor's error from its launcher: still an interrupt underneath.
    try:
        raise RuntimeError("Evaluator failed") from interrupted
    except RuntimeError as wrapped:
        assert workspace._caused_by_interrupt(wrapped)
    assert not workspace._caused_by_interrupt(_beam_error(_broken))


def _store_with_a_failed_execution(tmp_path) -> tuple[metadata_store.MetadataStore, int]:
    tmp_path.mkdir()
    config = mlmd_pb.ConnectionConfig()
    config.sqlite.filename_uri = str(tmp_path / "store.sqlite")
    store = metadata_store.MetadataStore(config)
    run_state.begin(store, "turbotfx", "run-1")
    run = store.get_context_by_type_and_name(RUN_CONTEXT, "run-1")
    type_id = store.put_execution_type(mlmd_pb.ExecutionType(name="Evaluator"))
    failed = mlmd_pb.Execution(type_id=type_id, last_known_state=mlmd_pb.Execution.FAILED)
    done = mlmd_pb.Execution(type_id=type_id, last_known_state=mlmd_pb.Execution.COMPLETE)
    ids = store.put_executions([failed, done])
    store.put_attributions_and_associations([], [mlmd_pb.Association(context_id=run.id, execution_id=i) for i in ids])
    return store, ids[0]


def test_an_interrupted_runs_failed_component_becomes_canceled_only_when_asked(tmp_path):
    store, failed_id = _store_with_a_failed_execution(tmp_path / "a")
    run_state.abort_unfinished(store, "run-1")
    assert store.get_executions_by_id([failed_id])[0].last_known_state == mlmd_pb.Execution.FAILED

    store, failed_id = _store_with_a_failed_execution(tmp_path / "b")
    run_state.abort_unfinished(store, "run-1", failed_too=True)
    states = {e.id: e.last_known_state for e in store.get_executions()}
    assert states == {failed_id: mlmd_pb.Execution.CANCELED, failed_id + 1: mlmd_pb.Execution.COMPLETE}
    run = store.get_context_by_type_and_name(RUN_CONTEXT, "run-1")
    assert run_state.recorded_state(run) == run_state.ABORTED
