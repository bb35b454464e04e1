"""What the metadata store records of each `turbotfx score` and `turbotfx drift` (writes
and reads): the files read (path, SHA-256, size), the served version used (its PushedModel
artifact, so lineage goes on to the model and its training data), and the folder of scores
written or the drift found.

`runs` lists a line per scoring and drift check beside the pipeline runs; `lineage --uri
OUTPUT` answers which model scored a folder of scores (or one file in it).
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.atomic_pusher import keys as pusher_keys
from pipeline.provenance.graph import INPUT, OUTPUT, PIPELINE_CONTEXT, PUSHED_FILTER, TypeNames

SCORING_TYPE = "turbotfx.Scoring"
DRIFT_TYPE = "turbotfx.DriftCheck"
INPUT_TYPE = "turbotfx.ScoringInput"
OUTPUT_TYPE = "turbotfx.ScoredTable"
# Custom property names, on the execution unless said.
MODEL_NAME, MODEL_VERSION = "model_name", "model_version"
ROWS_SCORED, ROWS_REFUSED = "rows_scored", "rows_refused"
OUTPUT_FORMAT, ID_COLUMNS, BEAM = "output_format", "id_columns", "beam"
SHA256, SIZE_BYTES = "sha256", "size_bytes"  # on an input artifact
ROWS, DRIFTED, RESULT = "rows", "drifted", "result"  # on a drift check
# The event keys (TFX's own executions key their events the same way).
MODEL_KEY, DATA_KEY, SCORES_KEY = "model", "data", "scores"


@dataclasses.dataclass(frozen=True)
class ScoredInput:
    path: Path
    sha256: str
    size_bytes: int


@dataclasses.dataclass(frozen=True)
class Scoring:
    model_name: str
    model_version: int
    inputs: tuple[ScoredInput, ...]
    output: Path
    rows_scored: int
    rows_refused: int
    output_format: str
    ids: tuple[str, ...]
    beam: str
    started_ms: int
    ended_ms: int


def record(store: metadata_store.MetadataStore, scoring: Scoring, pipeline_name: str | None = None) -> int:
    """Writes one scoring in one transaction (execution, artifacts, events, context); its id."""
    output_type = store.put_artifact_type(mlmd_pb.ArtifactType(name=OUTPUT_TYPE))
    execution = _execution(store, SCORING_TYPE, f"score-{scoring.started_ms}-{scoring.output.name}",
                           scoring.model_name, scoring.model_version, scoring.started_ms, scoring.ended_ms)
    properties = execution.custom_properties
    properties[ROWS_SCORED].int_value = scoring.rows_scored
    properties[ROWS_REFUSED].int_value = scoring.rows_refused
    properties[OUTPUT_FORMAT].string_value = scoring.output_format
    properties[ID_COLUMNS].string_value = ",".join(scoring.ids)
    properties[BEAM].string_value = scoring.beam
    linked = _inputs(store, scoring.model_name, scoring.model_version, scoring.inputs)
    output = mlmd_pb.Artifact(type_id=output_type, uri=str(scoring.output), state=mlmd_pb.Artifact.LIVE)
    output.custom_properties[ROWS_SCORED].int_value = scoring.rows_scored
    linked.append((output, _event(OUTPUT, SCORES_KEY, 0)))
    return _put(store, execution, linked, pipeline_name)


def record_drift(store: metadata_store.MetadataStore, *, model_name: str, model_version: int,
                 inputs: tuple[ScoredInput, ...], rows: int, drifted: list[str], result: str, started_ms: int,
                 ended_ms: int, pipeline_name: str | None = None) -> int:
    """Writes one drift check (result: its JSON, as `drift --format json` prints it); its id."""
    execution = _execution(store, DRIFT_TYPE, f"drift-{started_ms}", model_name, model_version, started_ms, ended_ms)
    properties = execution.custom_properties
    properties[ROWS].int_value = rows
    properties[DRIFTED].string_value = ",".join(drifted)
    properties[RESULT].string_value = result
    return _put(store, execution, _inputs(store, model_name, model_version, inputs), pipeline_name)


def _execution(store: metadata_store.MetadataStore, type_name: str, name: str, model_name: str, version: int,
               started_ms: int, ended_ms: int) -> mlmd_pb.Execution:
    """A completed execution of the model's version; MLMD sets create/update times itself,
    the job's own start and end are kept too."""
    execution = mlmd_pb.Execution(type_id=store.put_execution_type(mlmd_pb.ExecutionType(name=type_name)),
                                  last_known_state=mlmd_pb.Execution.COMPLETE, name=name)
    properties = execution.custom_properties
    properties[MODEL_NAME].string_value = model_name
    properties[MODEL_VERSION].int_value = version
    properties["started_ms"].int_value = started_ms
    properties["ended_ms"].int_value = ended_ms
    return execution


def _put(store: metadata_store.MetadataStore, execution: mlmd_pb.Execution, linked: list,
         pipeline_name: str | None) -> int:
    """Execution, artifacts and events in one transaction, attributed to the pipeline's context."""
    contexts = [c for c in store.get_contexts_by_type(PIPELINE_CONTEXT) if c.name == pipeline_name]
    execution_id, _, _ = store.put_execution(execution, linked, contexts)
    return execution_id


def scoring_of_output(store: metadata_store.MetadataStore, uri: str) -> dict[str, Any] | None:
    """The newest scoring that wrote this folder (or the folder of this file), else None."""
    path, types = Path(uri).expanduser().resolve(), TypeNames(store)
    for candidate in (path, path.parent):
        outputs = [a for a in store.get_artifacts_by_uri(str(candidate)) if types.artifact(a.type_id) == OUTPUT_TYPE]
        if outputs:
            newest = max(outputs, key=lambda a: a.id)
            producers = [e.execution_id for e in store.get_events_by_artifact_ids([newest.id]) if e.type == OUTPUT]
            return as_dict(store, store.get_executions_by_id(producers[:1])[0])
    return None


def as_run_row(scoring: dict[str, Any]) -> dict[str, Any]:
    """A scoring as a line of `turbotfx runs`: the metric column holds the rows it scored
    and the version column the version that scored them."""
    return {"kind": "score", "run_id": scoring["name"], "pipeline": scoring.get("pipeline"),
            "model_name": scoring["model_name"], "start": scoring["start"], "duration_s": scoring["duration_s"],
            "status": "COMPLETE", "model_id": None, "metric": ROWS_SCORED, "metric_value": scoring["rows_scored"],
            "blessed": None, "pushed_version": None, "scored_version": scoring["model_version"],
            "output": scoring["output"]}


def drift_run_rows(store: metadata_store.MetadataStore, pipeline_name: str | None = None) -> list[dict[str, Any]]:
    """Every drift check as a line of `turbotfx runs`: the metric column holds the number of
    features that drifted, the version column the version whose training data it compared."""
    rows = []
    for execution, pipeline in _executions(store, DRIFT_TYPE, pipeline_name):
        properties = execution.custom_properties
        started, ended = properties["started_ms"].int_value, properties["ended_ms"].int_value
        drifted = [f for f in properties[DRIFTED].string_value.split(",") if f]
        rows.append({"kind": "drift", "run_id": execution.name, "pipeline": pipeline,
                     "model_name": properties[MODEL_NAME].string_value, "start": _iso(started),
                     "duration_s": round((ended - started) / 1000, 1), "status": "COMPLETE", "model_id": None,
                     "metric": "features_drifted", "metric_value": len(drifted), "blessed": None,
                     "pushed_version": None, "scored_version": properties[MODEL_VERSION].int_value,
                     "drifted": drifted, "rows": properties[ROWS].int_value})
    return rows


def _executions(store: metadata_store.MetadataStore, type_name: str,
                pipeline_name: str | None) -> list[tuple[mlmd_pb.Execution, str | None]]:
    """The executions of one of these types, newest first, with their pipeline's name."""
    if not any(t.name == type_name for t in store.get_execution_types()):
        return []
    types = TypeNames(store)
    found = []
    for execution in sorted(store.get_executions_by_type(type_name), key=lambda e: e.id, reverse=True):
        pipelines = [c.name for c in store.get_contexts_by_execution(execution.id)
                     if types.context(c.type_id) == PIPELINE_CONTEXT]
        if pipeline_name and pipeline_name not in pipelines:
            continue
        found.append((execution, pipelines[0] if pipelines else None))
    return found


def list_scorings(store: metadata_store.MetadataStore, pipeline_name: str | None = None) -> list[dict[str, Any]]:
    """Every scoring of the store (of one pipeline), newest first."""
    return [{**as_dict(store, execution), "pipeline": pipeline}
            for execution, pipeline in _executions(store, SCORING_TYPE, pipeline_name)]


def as_dict(store: metadata_store.MetadataStore, execution: mlmd_pb.Execution) -> dict[str, Any]:
    """One scoring as JSON data: what scored what into where, and the model artifact it used."""
    properties = execution.custom_properties
    events = store.get_events_by_execution_ids([execution.id])
    artifacts = {a.id: a for a in store.get_artifacts_by_id([e.artifact_id for e in events])}
    by_key: dict[str, list[mlmd_pb.Artifact]] = {}
    for event in sorted(events, key=lambda e: e.path.steps[-1].index if e.path.steps else 0):
        key = event.path.steps[0].key if event.path.steps else ""
        by_key.setdefault(key, []).append(artifacts[event.artifact_id])
    pushed = by_key.get(MODEL_KEY, [])
    started, ended = properties["started_ms"].int_value, properties["ended_ms"].int_value
    return {
        "scoring_id": execution.id,
        "name": execution.name,
        "model_name": properties[MODEL_NAME].string_value,
        "model_version": properties[MODEL_VERSION].int_value,
        "pushed_model_id": pushed[0].id if pushed else None,
        "inputs": [{"path": a.uri, "sha256": a.custom_properties[SHA256].string_value,
                    "size_bytes": a.custom_properties[SIZE_BYTES].int_value} for a in by_key.get(DATA_KEY, [])],
        "output": by_key[SCORES_KEY][0].uri if by_key.get(SCORES_KEY) else None,
        "rows_scored": properties[ROWS_SCORED].int_value,
        "rows_refused": properties[ROWS_REFUSED].int_value,
        "output_format": properties[OUTPUT_FORMAT].string_value,
        "ids": [c for c in properties[ID_COLUMNS].string_value.split(",") if c],
        "beam": properties[BEAM].string_value,
        "start": _iso(started),
        "duration_s": round((ended - started) / 1000, 1),
    }


def _pushed_model(store: metadata_store.MetadataStore, model_name: str, version: int) -> mlmd_pb.Artifact | None:
    """The PushedModel of this model's version, if this store recorded its push (two
    datasets' models in one store can share a version number: the destination tells them apart)."""
    query = f"{PUSHED_FILTER} AND custom_properties.{pusher_keys.PUSHED_VERSION}.string_value = '{version}'"
    for pushed in store.get_artifacts(list_options=metadata_store.ListOptions(filter_query=query)):
        destination = pushed.custom_properties[pusher_keys.PUSHED_DESTINATION].string_value
        if pusher_keys.model_name_of(destination) == model_name:
            return pushed
    return None


def _inputs(store: metadata_store.MetadataStore, model_name: str, version: int,
            files: tuple[ScoredInput, ...]) -> list[tuple[mlmd_pb.Artifact, mlmd_pb.Event]]:
    """The version's PushedModel (where this store has it) and one artifact a file read."""
    input_type = store.put_artifact_type(mlmd_pb.ArtifactType(name=INPUT_TYPE))
    linked = []
    pushed = _pushed_model(store, model_name, version)
    if pushed is not None:
        linked.append((pushed, _event(INPUT, MODEL_KEY, 0)))
    for index, scored in enumerate(files):
        artifact = mlmd_pb.Artifact(type_id=input_type, uri=str(scored.path), state=mlmd_pb.Artifact.LIVE)
        artifact.custom_properties[SHA256].string_value = scored.sha256
        artifact.custom_properties[SIZE_BYTES].int_value = scored.size_bytes
        linked.append((artifact, _event(INPUT, DATA_KEY, index)))
    return linked


def _iso(milliseconds: int) -> str:
    return datetime.datetime.fromtimestamp(milliseconds / 1000, datetime.timezone.utc).isoformat(timespec="seconds")


def _event(kind: int, key: str, index: int) -> mlmd_pb.Event:
    event = mlmd_pb.Event(type=kind)
    event.path.steps.add().key = key
    event.path.steps.add().index = index
    return event
