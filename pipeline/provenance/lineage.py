"""Provenance of a model, read from MLMD: what it was trained on, how, and where it went.

Everything comes from the metadata store through the ml_metadata API (lineage
subgraphs, events, contexts), never from folders, so the same answer comes from a
SQLite, MySQL or PostgreSQL store, and from a store whose pipeline ran elsewhere.
"""

from __future__ import annotations

import base64
import collections
import json
from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.atomic_pusher import keys as pusher_keys
from components.reporting_evaluator import keys as evaluator_keys
from components.reporting_trainer import keys as trainer_keys
from components.serving_check import keys as check_keys
from components.tuner import keys as tuner_keys
from pipeline.provenance.graph import (
    INPUT,
    OUTPUT,
    PIPELINE_CONTEXT,
    PUSHED_FILTER,
    RUN_CONTEXT,
    STATE_NAMES,
    Graph,
    LineageError,
    TypeNames,
    decoded_json,
    event_key,
    first,
    json_property,
    last,
    prefixed_properties,
    property_of,
    subgraph,
)
from pipeline.provenance.tuning import tuning_of
from trainer_module.config import RUNTIME_KNOB
from trainer_module.features import CONFIG_KEY as FEATURES_KEY

# model <- Trainer <- transform graph <- Transform <- examples <- ExampleGen: five hops,
# one more reaches ImportSchemaGen's output's producer.
UPSTREAM_HOPS = 6
# model -> Evaluator, Pusher -> evaluation, blessing, pushed model.
DOWNSTREAM_HOPS = 2
# Training-report entries that resolve an `auto` or derived setting.
EFFECTIVE_KEYS = ("strategy", "replicas", "precision", "xla", "optimizer", "global_batch_size",
                  "effective_learning_rate")
# What the serving check records on its InfraBlessing, shown as is.
SERVING_CHECK_KEYS = (*check_keys.LATENCY_KEYS, check_keys.PROBLEMS)


# --- which model -------------------------------------------------------------------


def find_model(
    store: metadata_store.MetadataStore,
    *,
    latest: bool = False,
    model_version: str | None = None,
    artifact_id: int | None = None,
    uri: str | None = None,
    types: TypeNames | None = None,
    model_name: str | None = None,
) -> mlmd_pb.Artifact:
    """The Model artifact named by exactly one of the selectors, or a LineageError.
    model_name narrows --latest to the pushes of one model (a dataset's serving directory)."""
    types = types or TypeNames(store)
    if artifact_id is not None:
        return _model_from_artifact(store, types, _artifact_by_id(store, artifact_id))
    if model_version is not None:
        return _model_from_artifact(store, types, _pushed_model_by_version(store, model_version))
    if uri is not None:
        return _model_from_artifact(store, types, _artifact_by_uri(store, uri))
    if latest:
        pushed = latest_push(store, model_name)
        if pushed is None:
            of = f" of model {model_name!r}" if model_name else ""
            raise LineageError(
                f"no model{of} has been pushed yet in this metadata store; run the pipeline until a "
                "model is blessed (`turbotfx run`), or name a model with --artifact-id"
            )
        return _model_from_artifact(store, types, pushed)
    raise LineageError("say which model: --latest, --model-version V, --artifact-id N or --uri PATH")


def unrecorded_push(version: int) -> LineageError:
    """The error for scores made by a version whose push this store does not hold."""
    return LineageError(f"these scores were made by model version {version}, whose push this metadata store does "
                       "not record (pushed before it existed, or by another store); `turbotfx runs` lists the "
                       "pushes it has")


def latest_push(store: metadata_store.MetadataStore, model_name: str | None = None) -> mlmd_pb.Artifact | None:
    """The newest PushedModel that pushed (of one model, by its serving directory's name)."""
    for pushed in _artifacts(store, PUSHED_FILTER, limit=None if model_name else 1):
        if model_name is None or pushed_model_name(pushed) == model_name:
            return pushed
    return None


def dataset_file_of_latest_push(store: metadata_store.MetadataStore, model_name: str) -> tuple[int, str] | None:
    """(when, the dataset file's path) of the model's newest push, as its Trainer recorded it."""
    pushed = latest_push(store, model_name)
    if pushed is None:
        return None
    model = _model_from_artifact(store, TypeNames(store), pushed)
    producers = [e.execution_id for e in store.get_events_by_artifact_ids([model.id]) if e.type == OUTPUT]
    trainers = store.get_executions_by_id(producers[:1]) if producers else []
    path = dataset_of(trainers[0])["file"] if trainers else None
    return (pushed.create_time_since_epoch, path) if path else None


def has_push_version(store: metadata_store.MetadataStore, version: str) -> bool:
    try:
        _pushed_model_by_version(store, version)
    except LineageError:
        return False
    return True


def pushed_model_name(pushed: mlmd_pb.Artifact) -> str:
    """The model a push served: <serving>/<model>/<version> (serving/push.py)."""
    return pusher_keys.model_name_of(pushed.custom_properties[pusher_keys.PUSHED_DESTINATION].string_value)


def _artifacts(store, filter_query: str, limit: int | None = None) -> list[mlmd_pb.Artifact]:
    options = metadata_store.ListOptions(
        limit=limit, order_by=metadata_store.OrderByField.ID, is_asc=False, filter_query=filter_query
    )
    return store.get_artifacts(list_options=options)


def _quoted(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _artifact_by_id(store, artifact_id: int) -> mlmd_pb.Artifact:
    found = store.get_artifacts_by_id([int(artifact_id)])
    if not found:
        raise LineageError(f"artifact {artifact_id} does not exist in this metadata store; "
                           "`turbotfx runs` lists the models")
    return found[0]


def _pushed_model_by_version(store, version: str) -> mlmd_pb.Artifact:
    version = str(version).strip()
    if not version.isdigit():
        raise LineageError(f"model version {version!r} is not a serving version: versions are the "
                           "integer directory names under the serving directory")
    found = _artifacts(store, f"type = 'PushedModel' AND custom_properties.{pusher_keys.PUSHED_VERSION}"
                              f".string_value = {_quoted(version)}", limit=1)
    if not found:
        known = [a.custom_properties[pusher_keys.PUSHED_VERSION].string_value
                 for a in _artifacts(store, PUSHED_FILTER, limit=5)]
        hint = f"latest pushed versions: {', '.join(known)}" if known else "no model has been pushed yet"
        raise LineageError(f"no pushed model has version {version} in this metadata store ({hint}); "
                           "`turbotfx runs` lists the pushed versions")
    return found[0]


def _artifact_by_uri(store, uri: str) -> mlmd_pb.Artifact:
    uri = uri.rstrip("/") or uri
    found = store.get_artifacts_by_uri(uri) or _artifacts(
        store, f"type = 'PushedModel' AND custom_properties.{pusher_keys.PUSHED_DESTINATION}.string_value = "
               f"{_quoted(uri)}", limit=1)
    if not found:
        raise LineageError(f"no artifact in this metadata store has the URI {uri!r}; give a model's URI, "
                           "a pushed model's URI or its serving directory")
    return max(found, key=lambda a: a.id)


def _model_from_artifact(store, types: TypeNames, artifact: mlmd_pb.Artifact) -> mlmd_pb.Artifact:
    """A Model as is; a PushedModel or ModelBlessing leads back to the model it is about."""
    type_name = types.artifact(artifact.type_id)
    if type_name == "Model":
        return artifact
    if type_name in ("PushedModel", "ModelBlessing"):
        events = store.get_events_by_artifact_ids([artifact.id])
        producers = [e.execution_id for e in events if e.type == OUTPUT]
        inputs = store.get_events_by_execution_ids(producers[:1])
        model_ids = [e.artifact_id for e in inputs if e.type == INPUT and event_key(e) == "model"]
        if model_ids:
            return store.get_artifacts_by_id(model_ids[:1])[0]
    raise LineageError(f"artifact {artifact.id} is of type {type_name}, not a model; lineage starts at a Model, "
                       "a PushedModel or a ModelBlessing")


def pushed_origins(store: metadata_store.MetadataStore, versions: list[int]) -> dict[int, dict[str, Any]]:
    """Model artifact and pipeline run of each serving version this store knows."""
    types = TypeNames(store)
    origins = {}
    for version in versions:
        try:
            model = find_model(store, model_version=str(version), types=types)
        except LineageError:
            continue  # pushed by another store, or before MLMD kept it
        run_ids = [c.name for c in store.get_contexts_by_artifact(model.id)
                   if types.context(c.type_id) == RUN_CONTEXT]
        origins[version] = {"model_id": model.id, "run_id": run_ids[0] if run_ids else None}
    return origins


# --- the lineage of one model ----------------------------------------------------------


def model_lineage(
    store: metadata_store.MetadataStore, model: mlmd_pb.Artifact, types: TypeNames | None = None
) -> dict[str, Any]:
    """Everything MLMD knows about where a model came from and where it went, as JSON data."""
    types = types or TypeNames(store)
    graph = Graph(types)
    upstream = subgraph(store, model.id, mlmd_pb.LineageSubgraphQueryOptions.UPSTREAM, UPSTREAM_HOPS)
    graph.add(upstream.artifacts, upstream.executions, upstream.events)
    downstream = subgraph(store, model.id, mlmd_pb.LineageSubgraphQueryOptions.DOWNSTREAM, DOWNSTREAM_HOPS)
    # What used this model as the model, not as a later run's baseline.
    users = {e.execution_id for e in downstream.events
             if e.artifact_id == model.id and e.type == INPUT and event_key(e) == "model"}
    made = {e.artifact_id for e in downstream.events if e.execution_id in users and e.type == OUTPUT}
    graph.add([a for a in downstream.artifacts if a.id in made],
              [e for e in downstream.executions if e.id in users],
              [e for e in downstream.events if e.execution_id in users])

    trainer = graph.producer(model.id)
    if trainer is None:
        raise LineageError(f"model {model.id} has no recorded Trainer execution in this metadata store")
    transform_graph = first(graph.inputs(trainer.id, "transform_graph"))
    transform = graph.producer(transform_graph.id) if transform_graph else None
    raw_examples = first(graph.inputs(transform.id, "examples")) if transform else None
    if raw_examples is None:  # a pipeline without Transform trains on ExampleGen's output
        raw_examples = first(graph.inputs(trainer.id, "examples"))
    schema = first(graph.inputs(trainer.id, "schema"))
    contexts = _contexts_of(store, types, trainer.id)
    _add_data_checks(store, graph, contexts.get(RUN_CONTEXT), raw_examples)
    statistics = _latest_of_type(graph, "ExampleStatistics")
    anomalies = _latest_of_type(graph, "ExampleAnomalies")

    evaluator = last(_finished(graph.consumers(model.id, "model"), graph, has_output="evaluation"))
    evaluation = first(graph.outputs(evaluator.id, "evaluation")) if evaluator else None
    blessing = first(graph.outputs(evaluator.id, "blessing")) if evaluator else None
    baseline = first(graph.inputs(evaluator.id, "baseline_model")) if evaluator else None
    infra_blessings = [a for e in _finished(graph.consumers(model.id, "model"), graph, has_output="blessing")
                       for a in graph.outputs(e.id, "blessing") if graph.artifact_type(a) == "InfraBlessing"]
    infra_blessing = max(infra_blessings, key=lambda a: a.id) if infra_blessings else None
    pushers = _finished(graph.consumers(model.id, "model"), graph, has_output="pushed_model")
    pushed = [a for p in pushers for a in graph.outputs(p.id, "pushed_model")
              if a.custom_properties[pusher_keys.PUSHED].int_value]
    pushed_model = max(pushed, key=lambda a: a.id) if pushed else None

    report = prefixed_properties(model, trainer_keys.TRAINING_PREFIX)
    tuned = first(graph.inputs(trainer.id, "hyperparameters"))
    return {
        "model": {"id": model.id, "uri": model.uri},
        "pushed_model": None if pushed_model is None else {
            "id": pushed_model.id,
            "uri": pushed_model.uri,
            "version": pushed_model.custom_properties[pusher_keys.PUSHED_VERSION].string_value,
            "destination": pushed_model.custom_properties[pusher_keys.PUSHED_DESTINATION].string_value,
        },
        "trainer": {
            "execution_id": trainer.id,
            "state": STATE_NAMES.get(trainer.last_known_state, "UNKNOWN"),
            "hyperparameters": hyperparameters(trainer, tuned),
            "effective": {key: report[key] for key in EFFECTIVE_KEYS if key in report},
            "code_fingerprint": json_property(trainer, "custom_config").get(trainer_keys.CODE_FINGERPRINT_KEY),
            "training_report": report,
        },
        "dataset": dataset_of(trainer),
        "tuning": None if tuned is None else tuning_of(store, types, graph, tuned, contexts.get(RUN_CONTEXT)),
        "transform": None if transform is None or transform_graph is None else {
            "execution_id": transform.id,
            "state": STATE_NAMES.get(transform.last_known_state, "UNKNOWN"),
            "transform_graph_uri": transform_graph.uri,
        },
        "schema": None if schema is None else {"id": schema.id, "uri": schema.uri},
        "examples": None if raw_examples is None else {
            "id": raw_examples.id,
            "uri": raw_examples.uri,
            "span": property_of(raw_examples, "span"),
            "version": property_of(raw_examples, "version"),
            "splits": json.loads(property_of(raw_examples, "split_names") or "[]"),
            "fingerprint": property_of(raw_examples, "input_fingerprint"),
        },
        "statistics": None if statistics is None else {"id": statistics.id, "uri": statistics.uri},
        "anomalies": None if anomalies is None else {
            "id": anomalies.id, "uri": anomalies.uri, "found": anomalies_found(anomalies)
        },
        "evaluation": None if evaluation is None else {
            "id": evaluation.id,
            "uri": evaluation.uri,
            "metrics": prefixed_properties(evaluation, evaluator_keys.METRIC_PREFIX),
            "blessing_metric": property_of(evaluation, evaluator_keys.BLESSING_METRIC),
            "undefined_metrics": decoded_json(property_of(evaluation, evaluator_keys.UNDEFINED_METRICS)),
            "confusion_matrix": decoded_json(property_of(evaluation, evaluator_keys.CONFUSION_MATRIX)),
            "blessed": bool(blessing.custom_properties[evaluator_keys.BLESSED].int_value) if blessing else None,
            "baseline_model_id": _baseline_id(blessing, baseline),
        },
        "serving_check": None if infra_blessing is None else {
            "id": infra_blessing.id,
            "uri": infra_blessing.uri,
            "passed": bool(infra_blessing.custom_properties[check_keys.BLESSED].int_value),
            **{key: property_of(infra_blessing, key) for key in SERVING_CHECK_KEYS},
        },
        "pipeline": {
            "name": contexts[PIPELINE_CONTEXT].name if PIPELINE_CONTEXT in contexts else None,
            "run_id": contexts[RUN_CONTEXT].name if RUN_CONTEXT in contexts else None,
        },
        "graph": graph_json(graph),
    }


def _baseline_id(blessing: mlmd_pb.Artifact | None, baseline: mlmd_pb.Artifact | None) -> int | None:
    # The Evaluator records the baseline it compared against on the blessing.
    if blessing is not None and evaluator_keys.BASELINE_MODEL_ID in blessing.custom_properties:
        return blessing.custom_properties[evaluator_keys.BASELINE_MODEL_ID].int_value
    return baseline.id if baseline else None


# Trainer custom_config entries that describe the data (see dataset_of), not the training.
_DATASET_ENTRIES = (FEATURES_KEY, trainer_keys.DATASET_FILE_KEY, trainer_keys.DATASET_TEXT_KEY,
                    trainer_keys.DATASET_FINGERPRINT_KEY, trainer_keys.MODEL_NAME_KEY,
                    trainer_keys.FEATURE_CONTRACT_KEY)


def dataset_of(trainer: mlmd_pb.Execution) -> dict[str, Any]:
    """The dataset file a model was trained from: its path, content and content hash, the
    name, task, label and features it declared."""
    config = json_property(trainer, "custom_config")
    features = config.get(FEATURES_KEY) or {}
    return {
        "file": config.get(trainer_keys.DATASET_FILE_KEY),
        "fingerprint": config.get(trainer_keys.DATASET_FINGERPRINT_KEY),
        "text": _decoded(config.get(trainer_keys.DATASET_TEXT_KEY)),
        "name": features.get("dataset"),
        "model_name": config.get(trainer_keys.MODEL_NAME_KEY),
        "feature_contract": config.get(trainer_keys.FEATURE_CONTRACT_KEY),
        "task": features.get("task"),
        "label": features.get("label"),
        "numeric": features.get("numeric", []),
        "categorical": features.get("categorical", []),
    }


def _decoded(base64_text: str | None) -> str | None:
    return None if base64_text is None else base64.b64decode(base64_text).decode("utf-8", errors="replace")


def hyperparameters(trainer: mlmd_pb.Execution, tuned: mlmd_pb.Artifact | None = None) -> dict[str, Any]:
    """What the Trainer was configured with: its custom config with the tuning result's values
    over it (what run_fn trains with: trainer_module/config.py training_of), train args and
    eval args."""
    values = {key: value for key, value in json_property(trainer, "custom_config").items()
              if key != trainer_keys.CODE_FINGERPRINT_KEY and key not in _DATASET_ENTRIES}
    if tuned is not None:
        values.update(decoded_json(property_of(tuned, tuner_keys.BEST_VALUES)) or {})
    for name in ("train_args", "eval_args"):
        values[name] = json_property(trainer, name)
    # A compiled pipeline's runtime parameter overrides its knob in custom_config.
    epochs = property_of(trainer, trainer_keys.EPOCHS_KEY)
    if epochs is not None:
        values[RUNTIME_KNOB] = int(epochs)
    return values


def anomalies_found(anomalies: mlmd_pb.Artifact) -> bool:
    """ExampleValidator marks each split 1 (no anomalies) or 0 in the 'blessed' property."""
    if "blessed" not in anomalies.custom_properties:
        return False
    splits = anomalies.custom_properties["blessed"].struct_value.fields
    return any(value.number_value != 1 for value in splits.values())


def _add_data_checks(store, graph: Graph, run: mlmd_pb.Context | None, examples) -> None:
    """StatisticsGen and ExampleValidator sit beside the model's lineage, not upstream of it:
    they are found among the executions of the model's own pipeline run."""
    if run is None or examples is None:
        return
    checks = [e for e in store.get_executions_by_context(run.id)
              if graph.types.execution(e.type_id).rsplit(".", 1)[-1] in ("StatisticsGen", "ExampleValidator")]
    if not checks:
        return
    events = store.get_events_by_execution_ids([e.id for e in checks])
    graph.add(store.get_artifacts_by_id(sorted({e.artifact_id for e in events})), checks, events)


def _contexts_of(store, types: TypeNames, execution_id: int) -> dict[str, mlmd_pb.Context]:
    return {types.context(c.type_id): c for c in store.get_contexts_by_execution(execution_id)}


def _finished(executions, graph: Graph, has_output: str) -> list[mlmd_pb.Execution]:
    done = (mlmd_pb.Execution.COMPLETE, mlmd_pb.Execution.CACHED)
    return [e for e in executions if e.last_known_state in done and graph.outputs(e.id, has_output)]


def _latest_of_type(graph: Graph, type_name: str) -> mlmd_pb.Artifact | None:
    found = [a for a in graph.artifacts.values() if graph.artifact_type(a) == type_name]
    return max(found, key=lambda a: a.id) if found else None


def graph_json(graph: Graph) -> dict[str, list[dict[str, Any]]]:
    """Nodes and edges for drawing: artifacts ('a<id>') and executions ('e<id>').

    Cached executions are left out where the graph holds the execution that really made
    their outputs: after many reruns on unchanged data they would bury the graph.
    """
    shown = {e.id: e for e in graph.executions.values() if e.last_known_state != mlmd_pb.Execution.CACHED}
    events = graph.events
    producers: dict[int, list[int]] = collections.defaultdict(list)
    for artifact_id, execution_id, event_type, _ in events:
        if event_type == OUTPUT:
            producers[artifact_id].append(execution_id)
    for made_by in producers.values():
        if not any(execution_id in shown for execution_id in made_by):
            shown[min(made_by)] = graph.executions[min(made_by)]
    nodes = [{"id": f"a{a.id}", "kind": "artifact", "type": graph.artifact_type(a), "uri": a.uri}
             for a in sorted(graph.artifacts.values(), key=lambda a: a.id)]
    nodes += [{"id": f"e{e.id}", "kind": "execution", "type": graph.execution_type(e).rsplit(".", 1)[-1],
               "state": STATE_NAMES.get(e.last_known_state, "UNKNOWN")}
              for e in sorted(shown.values(), key=lambda e: e.id)]
    edges = []
    for artifact_id, execution_id, event_type, key in events:
        if execution_id not in shown:
            continue
        if event_type == INPUT:
            edges.append({"from": f"a{artifact_id}", "to": f"e{execution_id}", "key": key})
        elif event_type == OUTPUT:
            edges.append({"from": f"e{execution_id}", "to": f"a{artifact_id}", "key": key})
    return {"nodes": nodes, "edges": edges}
