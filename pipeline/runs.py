"""Pipeline runs as MLMD records them, and what differs between two models."""

from __future__ import annotations

import datetime
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline import lineage

_UNFINISHED = (mlmd_pb.Execution.NEW, mlmd_pb.Execution.RUNNING, mlmd_pb.Execution.UNKNOWN)


def list_runs(
    store: metadata_store.MetadataStore, pipeline_name: str | None = None, limit: int | None = None
) -> list[dict[str, Any]]:
    """The pipeline runs, newest first: status, timing, key metric, blessing, pushed version."""
    types = lineage.TypeNames(store)
    runs = sorted(store.get_contexts_by_type(lineage.RUN_CONTEXT), key=lambda c: c.id, reverse=True)
    listed = []
    for run in runs:
        pipeline = _pipeline_of(store, types, run)
        if pipeline_name and pipeline != pipeline_name:
            continue
        listed.append(_summarize(store, types, run, pipeline))
        if limit and len(listed) >= limit:
            break
    return listed


def _pipeline_of(store, types: lineage.TypeNames, run: mlmd_pb.Context) -> str | None:
    parents = store.get_parent_contexts_by_context(run.id)
    names = [p.name for p in parents if types.context(p.type_id) == lineage.PIPELINE_CONTEXT]
    return names[0] if names else None


def _summarize(store, types: lineage.TypeNames, run: mlmd_pb.Context, pipeline: str | None) -> dict[str, Any]:
    executions = store.get_executions_by_context(run.id)
    states = {e.last_known_state for e in executions}
    if mlmd_pb.Execution.FAILED in states:
        status = "FAILED"
    elif states & set(_UNFINISHED) or not executions:
        status = "RUNNING"
    else:
        status = "COMPLETE"
    outputs = store.get_events_by_execution_ids([e.id for e in executions]) if executions else []
    artifact_ids = sorted({e.artifact_id for e in outputs if e.type == lineage.OUTPUT})
    by_type: dict[str, list[mlmd_pb.Artifact]] = {}
    for artifact in store.get_artifacts_by_id(artifact_ids) if artifact_ids else []:
        by_type.setdefault(types.artifact(artifact.type_id), []).append(artifact)
    model = _first(by_type.get("Model"))
    evaluation = _first(by_type.get("ModelEvaluation"))
    blessing = _first(by_type.get("ModelBlessing"))
    pushed = [a for a in by_type.get("PushedModel", []) if a.custom_properties["pushed"].int_value]
    start = min((e.create_time_since_epoch for e in executions), default=run.create_time_since_epoch)
    end = max((e.last_update_time_since_epoch for e in executions), default=start)
    metric_property = lineage.METRIC_PREFIX + lineage.KEY_METRIC
    return {
        "run_id": run.name,
        "pipeline": pipeline,
        "start": _iso(start),
        "duration_s": round((end - start) / 1000, 1),
        "status": status,
        "model_id": model.id if model else None,
        "metric": lineage.KEY_METRIC,
        "metric_value": (evaluation.custom_properties[metric_property].double_value
                         if evaluation and metric_property in evaluation.custom_properties else None),
        "blessed": bool(blessing.custom_properties["blessed"].int_value) if blessing else None,
        "pushed_version": pushed[0].custom_properties["pushed_version"].string_value if pushed else None,
    }


def _first(items):
    return items[0] if items else None


def _iso(milliseconds: int) -> str:
    moment = datetime.datetime.fromtimestamp(milliseconds / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="seconds")


# --- diff ---------------------------------------------------------------------------

def diff_models(first: dict[str, Any], second: dict[str, Any]) -> dict[str, Any]:
    """What differs between two models' lineages, section by section: {name: {"a": .., "b": ..}}."""
    trainer_a, trainer_b = first["trainer"], second["trainer"]
    sections = {
        "hyperparameters": (_flat(trainer_a["hyperparameters"]), _flat(trainer_b["hyperparameters"])),
        "effective": (trainer_a["effective"], trainer_b["effective"]),
        "code": ({"code_fingerprint": trainer_a["code_fingerprint"]},
                 {"code_fingerprint": trainer_b["code_fingerprint"]}),
        "data": (_data(first), _data(second)),
        "schema": (first["schema"] or {}, second["schema"] or {}),
        "metrics": ((first["evaluation"] or {}).get("metrics", {}),
                    (second["evaluation"] or {}).get("metrics", {})),
        "evaluation": (_verdict(first), _verdict(second)),
    }
    result: dict[str, Any] = {
        "a": {"model_id": first["model"]["id"], "run_id": first["pipeline"]["run_id"]},
        "b": {"model_id": second["model"]["id"], "run_id": second["pipeline"]["run_id"]},
    }
    for name, (values_a, values_b) in sections.items():
        result[name] = {
            key: {"a": values_a.get(key), "b": values_b.get(key)}
            for key in sorted(set(values_a) | set(values_b))
            if values_a.get(key) != values_b.get(key)
        }
    return result


def _flat(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested settings (train_args, eval_args) as dotted keys, so a diff names the leaf."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, dict) and value:
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def _data(lineage_json: dict[str, Any]) -> dict[str, Any]:
    examples = lineage_json["examples"] or {}
    return {f"examples.{key}": examples.get(key) for key in ("id", "uri", "span", "version", "fingerprint")}


def _verdict(lineage_json: dict[str, Any]) -> dict[str, Any]:
    evaluation = lineage_json["evaluation"] or {}
    pushed = lineage_json["pushed_model"] or {}
    return {"blessed": evaluation.get("blessed"), "baseline_model_id": evaluation.get("baseline_model_id"),
            "pushed_version": pushed.get("version")}
