"""Tuning results in MLMD (components/tuner/keys.py): the latest one, or the one a model trained
with, and its trials, for `turbotfx tune show`."""

from __future__ import annotations

from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.tuner import keys as tuner_keys
from pipeline.provenance.graph import INPUT, Graph, TypeNames, event_key, property_of, subgraph
from pipeline.provenance.lineage import LineageError, find_model, tuning_of, tuning_trials

HYPERPARAMETERS_TYPE = "HyperParameters"


def latest_result(store: metadata_store.MetadataStore, model_name: str | None = None) -> mlmd_pb.Artifact:
    """The newest tuning result (of model_name's dataset, if given)."""
    results = [a for a in store.get_artifacts_by_type(HYPERPARAMETERS_TYPE)
               if a.state == mlmd_pb.Artifact.LIVE
               and (model_name is None or property_of(a, tuner_keys.MODEL_NAME) == model_name)]
    if not results:
        which = f" of model {model_name!r}" if model_name else ""
        raise LineageError(f"no tuning result{which} in this metadata store: tune first "
                           "(`turbotfx run --tune-trials N`)")
    return max(results, key=lambda a: a.id)


def result_of_model(store: metadata_store.MetadataStore, model_version: str) -> mlmd_pb.Artifact:
    """The tuning result the model pushed as model_version trained with."""
    model = find_model(store, model_version=model_version)
    trainer_ids = [e.execution_id for e in store.get_events_by_artifact_ids([model.id])
                   if e.type == mlmd_pb.Event.OUTPUT]
    used = [e.artifact_id for e in store.get_events_by_execution_ids(trainer_ids)
            if e.type == INPUT and event_key(e) == "hyperparameters"]
    if not used:
        raise LineageError(f"model version {model_version} trained with its knobs as given: no tuning result")
    return store.get_artifacts_by_id(used[:1])[0]


def study(store: metadata_store.MetadataStore, result: mlmd_pb.Artifact) -> dict[str, Any]:
    """A tuning result's summary and every trial of it, best first among the complete ones."""
    graph = Graph(TypeNames(store))
    upstream = subgraph(store, result.id, mlmd_pb.LineageSubgraphQueryOptions.UPSTREAM, 1)
    graph.add(upstream.artifacts, upstream.executions, upstream.events)
    summary = tuning_of(store, graph.types, graph, result, None)
    return {**summary, "trial_list": tuning_trials(result)}
