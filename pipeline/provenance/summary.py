"""A pipeline run as MLMD records it: each component's state and time, the evaluation, the
blessing, the serving check and the push. The one reader behind the end-of-run summary
and `turbotfx runs`; everything comes from MLMD properties, no file is opened.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import math
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.atomic_pusher import keys as pusher_keys
from components.reporting_evaluator import keys as evaluator_keys
from components.reporting_trainer import keys as trainer_keys
from components.reporting_trainer.keys import from_json_property
from components.serving_check import keys as check_keys
from components.tuner import keys as tuner_keys
from pipeline.provenance import run_state
from pipeline.provenance.graph import (
    NODE_CONTEXT,
    OUTPUT,
    PIPELINE_CONTEXT,
    RUN_CONTEXT,
    STATE_NAMES,
    TypeNames,
    prefixed_properties,
    value_of,
)
from pipeline.provenance.run_state import UNFINISHED_STATES
from pipeline.provenance.verdict import Verdict
from serving.contract import LATENCY_BATCH_SIZES, latency_key


@dataclasses.dataclass
class ComponentRun:
    node_id: str
    state: str
    seconds: float


@dataclasses.dataclass
class RunSummary:
    run_id: str
    pipeline: str | None
    status: str  # COMPLETE, FAILED, ABORTED or RUNNING
    start_ms: int
    end_ms: int
    components: list[ComponentRun]  # empty unless asked for (one query per execution)
    model_id: int | None = None
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)  # whole eval split
    metric_changes: dict[str, float] = dataclasses.field(default_factory=dict)  # against the baseline
    slice_metrics: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    # Metrics without a value and why ({name: reason}), on the eval split and per slice.
    undefined_metrics: dict[str, str] = dataclasses.field(default_factory=dict)
    slice_undefined: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # The eval split's confusion matrix with class names (evaluator_keys.CONFUSION_MATRIX).
    confusion_matrix: dict[str, Any] | None = None
    # The metric blessing looked at (the dataset file's), as recorded.
    blessing_metric: str | None = None
    blessed: bool | None = None
    serving_check: dict[str, Any] | None = None  # passed, problems and latencies
    pushed_version: str | None = None
    pushed_path: str | None = None
    # The model (serving directory; a dataset's name unless --model-name) the run was for.
    model_name: str | None = None
    verdict: Verdict = dataclasses.field(default_factory=Verdict)  # why blessed or not; yardsticks
    # The tuning result the Trainer trained with: made by this run's Tuner, or reused.
    tuning: dict[str, Any] | None = None

    @property
    def blessing_value(self) -> float | None:
        return self.metrics.get(self.blessing_metric) if self.blessing_metric else None

    def as_json(self) -> dict[str, Any]:
        """The whole summary for scripts and CI (`turbotfx run --json`)."""
        return {
            **self.as_row(),
            "components": [dataclasses.asdict(c) for c in self.components],
            "metrics": self.metrics,
            "metric_changes": self.metric_changes,
            "slice_metrics": self.slice_metrics,
            "undefined_metrics": self.undefined_metrics,
            "slice_undefined": self.slice_undefined,
            "confusion_matrix": self.confusion_matrix,
            "verdict": self.verdict.as_dict(self.blessing_value, self.blessed),
            "serving_check": self.serving_check,
            "pushed_path": self.pushed_path,
            "tuning": self.tuning,
        }

    def failed_component(self) -> str | None:
        return next((c.node_id for c in self.components if c.state == "FAILED"), None)

    def as_row(self) -> dict[str, Any]:
        """One line of `turbotfx runs`."""
        return {
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "model_name": self.model_name,
            "start": _iso(self.start_ms),
            "duration_s": round((self.end_ms - self.start_ms) / 1000, 1),
            "status": self.status,
            "model_id": self.model_id,
            "metric": self.blessing_metric,
            "metric_value": self.metrics.get(self.blessing_metric) if self.blessing_metric else None,
            "blessed": self.blessed,
            "pushed_version": self.pushed_version,
        }

    def format(self) -> str:
        """The end-of-run summary."""
        lines = [f"run {self.run_id}"]
        for component in self.components:
            lines.append(f"  {component.node_id:<32} {component.state:<9} {component.seconds:6.1f}s")
        if self.tuning:
            lines.append(_tuning_line(self.tuning))
        shown = {**{name: f"{value:.4f}" for name, value in self.metrics.items()},
                 **{_change_label(name): f"{value:.4f}" for name, value in self.metric_changes.items()},
                 **{name: _not_available(reason) for name, reason in self.undefined_metrics.items()}}
        if shown:
            lines.append("evaluation (eval split):")
            for name, value in sorted(shown.items()):
                lines.append(f"  {name:<32} {value}")
        metric = self.blessing_metric
        per_slice = []
        for name in sorted({*self.slice_metrics, *self.slice_undefined}):
            values, reasons = self.slice_metrics.get(name, {}), self.slice_undefined.get(name, {})
            if metric in values:
                per_slice.append((name, f"{values[metric]:.4f}"))
            elif metric in reasons:
                per_slice.append((name, _not_available(reasons[metric])))
        if per_slice:
            lines.append(f"  per slice ({metric}):")
            lines += [f"    {name:<30} {value}" for name, value in per_slice]
        if self.confusion_matrix:
            lines += _confusion_lines(self.confusion_matrix)
        if self.blessed is not None:
            lines += self.verdict.yardstick_lines(self.blessing_value, self.metric_changes.get(metric or ""))
        if self.blessed is None:
            lines.append("blessed: not evaluated")
        elif self.blessed:
            lines.append("blessed: yes")
        else:
            broken = self.verdict.reasons(self.blessing_value)
            lines.append("blessed: no" + (f" — {broken[0]}" if broken else ""))
            lines += [f"         and {reason}" for reason in broken[1:]]
        if self.serving_check:
            lines.append(f"serving check: {_serving_check_line(self.serving_check)}")
        if self.pushed_path:
            lines.append(f"pushed: {self.pushed_path}")
        else:
            lines.append("pushed: nothing (the model was not blessed)" if self.blessed is False
                         else "pushed: nothing")
        return "\n".join(lines)


def latest_run(store: metadata_store.MetadataStore, pipeline_name: str,
               live_runs_possible: bool = True) -> RunSummary | None:
    """The newest run of the pipeline, with its components."""
    types = TypeNames(store)
    # A run context without a pipeline parent is taken as this pipeline's.
    runs = [c for c in store.get_contexts_by_type(RUN_CONTEXT) if pipeline_of(store, types, c) in (None, pipeline_name)]
    if not runs:
        return None
    run = max(runs, key=lambda c: (c.create_time_since_epoch, c.id))
    return summarize(store, run, types, pipeline=pipeline_name, with_components=True,
                     live_runs_possible=live_runs_possible)


def pipeline_of(store: metadata_store.MetadataStore, types: TypeNames, run: mlmd_pb.Context) -> str | None:
    parents = store.get_parent_contexts_by_context(run.id)
    names = [p.name for p in parents if types.context(p.type_id) == PIPELINE_CONTEXT]
    return names[0] if names else None


def summarize(
    store: metadata_store.MetadataStore,
    run: mlmd_pb.Context,
    types: TypeNames,
    pipeline: str | None = None,
    with_components: bool = False,
    live_runs_possible: bool = True,
) -> RunSummary:
    """What one pipeline run did: three queries, plus one per execution with_components.
    live_runs_possible: False when no run can be executing (the SQLite store's run lock is
    free), so an unfinished run is one that was killed."""
    executions = sorted(store.get_executions_by_context(run.id), key=lambda e: (e.create_time_since_epoch, e.id))
    states = {e.last_known_state for e in executions}
    recorded = run_state.recorded_state(run)
    if mlmd_pb.Execution.FAILED in states or (recorded == run_state.FINISHED and not executions):
        status = "FAILED"  # ended on its own before any component ran: it failed to start
    elif mlmd_pb.Execution.CANCELED in states or recorded == run_state.ABORTED:
        status = "ABORTED"  # pipeline/provenance/run_state.py
    elif states & set(UNFINISHED_STATES) or not executions or recorded == run_state.RUNNING:
        status = "RUNNING" if live_runs_possible else "ABORTED"
    else:
        status = "COMPLETE"
    start = min((e.create_time_since_epoch for e in executions), default=run.create_time_since_epoch)
    end = max((e.last_update_time_since_epoch for e in executions), default=start)
    summary = RunSummary(run_id=run.name, pipeline=pipeline, status=status, start_ms=start, end_ms=end,
                         components=[_component(store, types, e) for e in executions] if with_components else [],
                         model_name=run_state.recorded_model_name(run))
    events = store.get_events_by_execution_ids([e.id for e in executions]) if executions else []
    artifact_ids = sorted({e.artifact_id for e in events if e.type == OUTPUT})
    read: set[str] = set()
    for artifact in store.get_artifacts_by_id(artifact_ids) if artifact_ids else []:
        type_name = types.artifact(artifact.type_id)
        if type_name not in read and _read_output(summary, type_name, artifact):
            # The first of each type counts (the lowest id), as `runs` always took: a run has
            # one of each, except with a second Pusher (a Vertex endpoint) after the first.
            read.add(type_name)
    if summary.tuning is None:
        # A reused tuning result is what the run's resolver handed on (an internal output).
        resolved = sorted({e.artifact_id for e in events if e.type == mlmd_pb.Event.INTERNAL_OUTPUT})
        for artifact in store.get_artifacts_by_id(resolved) if resolved else []:
            if types.artifact(artifact.type_id) == HYPERPARAMETERS_TYPE:
                summary.tuning = _tuning(artifact, reused=True)
    return summary


HYPERPARAMETERS_TYPE = "HyperParameters"


def _tuning(artifact: mlmd_pb.Artifact, reused: bool) -> dict[str, Any]:
    properties = artifact.custom_properties
    return {"id": artifact.id, "reused": reused,
            **{name: value_of(properties[key]) for name, key in _TUNING_FIELDS.items() if key in properties}}


_TUNING_FIELDS = {"trials": tuner_keys.TRIAL_COUNT, "pruned": tuner_keys.PRUNED_COUNT,
                  "failed": tuner_keys.FAILED_COUNT, "best_trial": tuner_keys.BEST_TRIAL,
                  "best_score": tuner_keys.BEST_SCORE, "objective": tuner_keys.OBJECTIVE,
                  "wall_s": tuner_keys.WALL_S}


def _tuning_line(tuning: dict[str, Any]) -> str:
    best = f"best trial {tuning['best_trial'] + 1}, {tuning['objective']} {tuning['best_score']:.4f}"
    if tuning["reused"]:
        return f"tuning: reused result {tuning['id']} ({tuning['trials']} trials; {best})"
    return (f"tuning: {tuning['trials']} trials ({tuning['pruned']} pruned, {tuning['failed']} failed) in "
            f"{tuning['wall_s']:.1f}s; {best}")


def _read_output(summary: RunSummary, type_name: str, artifact: mlmd_pb.Artifact) -> bool:
    """Fills in what one output artifact of the run says; False if it says nothing."""
    properties = artifact.custom_properties
    if type_name == "Model":
        summary.model_id = artifact.id
        summary.verdict.read_model(artifact)
        if summary.model_name is None and trainer_keys.MODEL_NAME_KEY in properties:
            summary.model_name = properties[trainer_keys.MODEL_NAME_KEY].string_value
    elif type_name == "ModelEvaluation":
        summary.metrics = prefixed_properties(artifact, evaluator_keys.METRIC_PREFIX)
        summary.metric_changes = prefixed_properties(artifact, evaluator_keys.DIFF_PREFIX)
        summary.verdict.read_evaluation(artifact)
        if evaluator_keys.BLESSING_METRIC in properties:
            summary.blessing_metric = properties[evaluator_keys.BLESSING_METRIC].string_value
        if evaluator_keys.SLICE_METRICS in properties:
            summary.slice_metrics = from_json_property(properties[evaluator_keys.SLICE_METRICS].string_value)
        if evaluator_keys.UNDEFINED_METRICS in properties:
            undefined = from_json_property(properties[evaluator_keys.UNDEFINED_METRICS].string_value)
            summary.undefined_metrics, summary.slice_undefined = undefined["overall"], undefined["slices"]
        if evaluator_keys.CONFUSION_MATRIX in properties:
            summary.confusion_matrix = from_json_property(properties[evaluator_keys.CONFUSION_MATRIX].string_value)
    elif type_name == "ModelBlessing":
        summary.blessed = bool(properties[evaluator_keys.BLESSED].int_value)
        summary.verdict.read_blessing(artifact)
    elif type_name == "InfraBlessing":
        summary.serving_check = {
            "passed": bool(properties[check_keys.BLESSED].int_value),
            "problems": json.loads(properties[check_keys.PROBLEMS].string_value or "[]")
            if check_keys.PROBLEMS in properties else [],
            **{key: properties[key].double_value for key in check_keys.LATENCY_KEYS if key in properties},
        }
    elif type_name == HYPERPARAMETERS_TYPE:
        summary.tuning = _tuning(artifact, reused=False)
    elif type_name == "PushedModel" and properties[pusher_keys.PUSHED].int_value:
        summary.pushed_version = properties[pusher_keys.PUSHED_VERSION].string_value
        summary.pushed_path = properties[pusher_keys.PUSHED_DESTINATION].string_value
        # A run recorded before runs named their model: the serving directory it pushed to.
        summary.model_name = summary.model_name or pusher_keys.model_name_of(summary.pushed_path)
    else:
        return False
    return True


def _component(store: metadata_store.MetadataStore, types: TypeNames, execution: mlmd_pb.Execution) -> ComponentRun:
    node_id = str(execution.id)
    for context in store.get_contexts_by_execution(execution.id):
        if types.context(context.type_id) == NODE_CONTEXT:
            node_id = context.name.split(".", 1)[-1]
            break
    seconds = max(0, execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000
    return ComponentRun(node_id, STATE_NAMES.get(execution.last_known_state, "UNKNOWN"), seconds)


def _change_label(name: str) -> str:
    """'precision[Adelie]' -> 'precision_diff[Adelie]', as TFMA names a change."""
    base, bracket, sub_key = name.partition("[")
    return f"{base}_diff{bracket}{sub_key}"


def _not_available(reason: str) -> str:
    return f"n/a ({reason})"


# The widest a class name gets in the confusion matrix; longer ones are cut with "~".
CONFUSION_NAME_WIDTH = 16


def _confusion_lines(matrix: dict[str, Any]) -> list[str]:
    """The confusion matrix as a table: a row per true label, a column per prediction."""
    names = [_cut(evaluator_keys.class_text(name)) for name in matrix["classes"]]
    if len(matrix["counts"]) > len(names):
        # Classes left out, or labels outside the vocabulary (an eval value train never had).
        names.append("(other)")
    counts = matrix["counts"]
    width = max(len(name) for name in [*names, *(str(n) for row in counts for n in row)])
    label_width = max(len(name) for name in names)
    total = sum(sum(row) for row in counts)
    lines = [f"  confusion matrix (rows: true label, columns: predicted; {total} rows):",
             f"    {'':<{label_width}}  " + "  ".join(f"{name:>{width}}" for name in names)]
    lines += [f"    {name:<{label_width}}  " + "  ".join(f"{n:>{width}}" for n in row)
              for name, row in zip(names, counts)]
    if matrix["left_out"]:
        lines.append(f"    (other): {matrix['left_out']} classes left out, with fewer rows; their counts together")
    return lines


def finite_or_none(value: Any) -> Any:
    """value with every NaN or infinity (a diverged model's metric) as None: JSON has neither."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(item) for item in value]
    return value


def _cut(name: str) -> str:
    return name if len(name) <= CONFUSION_NAME_WIDTH else name[:CONFUSION_NAME_WIDTH - 1] + "~"


def _serving_check_line(check: dict[str, Any]) -> str:
    """Latencies when the serving check passed, its problems when not."""
    if check["passed"]:
        latency = ", ".join(f"{check[latency_key(50, b)]:.2f} ms p50 / {check[latency_key(99, b)]:.2f} ms p99 "
                            f"at batch {b}" for b in LATENCY_BATCH_SIZES if latency_key(50, b) in check)
        return f"passed ({latency})"
    return "FAILED: " + "; ".join(check["problems"] or ["see the log"])


def _iso(milliseconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(milliseconds / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="seconds")
