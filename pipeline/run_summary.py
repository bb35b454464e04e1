"""What the latest pipeline run did, read back from MLMD: states, durations, metrics, push."""

from __future__ import annotations

import dataclasses
import json

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

PIPELINE_RUN_CONTEXT = "pipeline_run"
NODE_CONTEXT = "node"
_STATE_NAMES = {
    value: name for name, value in metadata_store_pb2.Execution.State.items()
}


@dataclasses.dataclass
class ComponentRun:
    node_id: str
    state: str
    seconds: float


@dataclasses.dataclass
class RunSummary:
    run_id: str
    components: list[ComponentRun]
    metrics: dict[str, float]
    slice_accuracy: dict[str, float]
    blessed: bool | None
    pushed_path: str | None
    serving_check: str | None = None

    def format(self) -> str:
        lines = [f"run {self.run_id}"]
        for component in self.components:
            lines.append(f"  {component.node_id:<32} {component.state:<9} {component.seconds:6.1f}s")
        if self.metrics:
            lines.append("evaluation (eval split):")
            for name, value in sorted(self.metrics.items()):
                lines.append(f"  {name:<32} {value:.4f}")
        for slice_name, value in sorted(self.slice_accuracy.items()):
            lines.append(f"  accuracy[{slice_name}]{'':<{max(0, 22 - len(slice_name))}} {value:.4f}")
        if self.blessed is None:
            lines.append("blessed: not evaluated")
        else:
            lines.append(f"blessed: {'yes' if self.blessed else 'no'}")
        if self.serving_check:
            lines.append(f"serving check: {self.serving_check}")
        if self.pushed_path:
            lines.append(f"pushed: {self.pushed_path}")
        else:
            lines.append("pushed: nothing (the model was not blessed)" if self.blessed is False
                         else "pushed: nothing")
        return "\n".join(lines)


def latest_run(store: metadata_store.MetadataStore, pipeline_name: str) -> RunSummary | None:
    runs = [
        c for c in store.get_contexts_by_type(PIPELINE_RUN_CONTEXT)
        if _belongs_to(store, c, pipeline_name)
    ]
    if not runs:
        return None
    run = max(runs, key=lambda c: (c.create_time_since_epoch, c.id))
    return summarize(store, run)


def _belongs_to(store: metadata_store.MetadataStore, run_context, pipeline_name: str) -> bool:
    parents = store.get_parent_contexts_by_context(run_context.id)
    return any(p.name == pipeline_name for p in parents) if parents else True


def summarize(store: metadata_store.MetadataStore, run_context) -> RunSummary:
    executions = sorted(
        store.get_executions_by_context(run_context.id), key=lambda e: (e.create_time_since_epoch, e.id)
    )
    components = []
    blessed = None
    pushed_path = None
    metrics: dict[str, float] = {}
    slice_accuracy: dict[str, float] = {}
    serving_check = None
    for execution in executions:
        node_id = node_id_of(store, execution)
        components.append(
            ComponentRun(
                node_id=node_id,
                state=_STATE_NAMES.get(execution.last_known_state, "UNKNOWN"),
                seconds=max(0, execution.last_update_time_since_epoch - execution.create_time_since_epoch) / 1000,
            )
        )
        for artifact in output_artifacts(store, execution.id):
            type_name = store.get_artifact_types_by_id([artifact.type_id])[0].name
            if type_name == "ModelBlessing":
                blessed = bool(artifact.custom_properties["blessed"].int_value)
            elif type_name == "ModelEvaluation" and artifact.uri:
                metrics, slice_accuracy = evaluation_metrics(artifact.uri)
            elif type_name == "InfraBlessing":
                serving_check = _serving_check_line(artifact)
            elif type_name == "PushedModel" and artifact.custom_properties["pushed"].int_value:
                pushed_path = artifact.custom_properties["pushed_destination"].string_value
    return RunSummary(run_context.name, components, metrics, slice_accuracy, blessed, pushed_path, serving_check)


def _serving_check_line(blessing) -> str:
    """One line on the serving check: latencies when it passed, its problems when not."""
    properties = blessing.custom_properties
    if properties["blessed"].int_value:
        latency = ", ".join(f"{properties[f'p50_ms_b{b}'].double_value:.2f} ms p50 / "
                            f"{properties[f'p99_ms_b{b}'].double_value:.2f} ms p99 at batch {b}"
                            for b in (1, 64) if f"p50_ms_b{b}" in properties)
        return f"passed ({latency})"
    problems = json.loads(properties["problems"].string_value or "[]") if "problems" in properties else []
    return "FAILED: " + "; ".join(problems or ["see the log"])


def node_id_of(store: metadata_store.MetadataStore, execution) -> str:
    for context in store.get_contexts_by_execution(execution.id):
        if store.get_context_types_by_id([context.type_id])[0].name == NODE_CONTEXT:
            return context.name.split(".", 1)[-1]
    return str(execution.id)


def output_artifacts(store: metadata_store.MetadataStore, execution_id: int) -> list:
    events = store.get_events_by_execution_ids([execution_id])
    ids = [e.artifact_id for e in events if e.type == metadata_store_pb2.Event.OUTPUT]
    return store.get_artifacts_by_id(ids) if ids else []


def evaluation_metrics(evaluation_uri: str) -> tuple[dict[str, float], dict[str, float]]:
    """Overall metrics and accuracy per slice from a TFMA evaluation output."""
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(evaluation_uri)
    overall: dict[str, float] = {}
    by_slice: dict[str, float] = {}
    for slice_key, output_metrics in result.slicing_metrics:
        for sub_key, values in output_metrics.get("", {}).items():
            for name, value in values.items():
                number = _number(value)
                if number is None:
                    continue
                label = name if not sub_key else f"{name}[{sub_key}]"
                if not slice_key:
                    overall[label] = number
                elif name == "sparse_categorical_accuracy" and not sub_key:
                    by_slice["/".join(f"{k}={_text(v)}" for k, v in slice_key)] = number
    return overall, by_slice


def _number(value) -> float | None:
    if isinstance(value, dict) and "doubleValue" in value:
        return float(value["doubleValue"])
    return None


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
