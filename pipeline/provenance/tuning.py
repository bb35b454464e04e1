"""Tuning results in MLMD (components/tuner/keys.py): the latest one, or the one a model trained
with, and its trials, for `turbotfx tune show`."""

from __future__ import annotations

from typing import Any

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.tuner import keys as tuner_keys
from pipeline.provenance.graph import (
    INPUT,
    RUN_CONTEXT,
    Graph,
    LineageError,
    TypeNames,
    decoded_json,
    event_key,
    property_of,
    subgraph,
)

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


def result_of_model(store: metadata_store.MetadataStore, model: mlmd_pb.Artifact) -> mlmd_pb.Artifact:
    """The tuning result a model trained with."""
    trainer_ids = [e.execution_id for e in store.get_events_by_artifact_ids([model.id])
                   if e.type == mlmd_pb.Event.OUTPUT]
    used = [e.artifact_id for e in store.get_events_by_execution_ids(trainer_ids)
            if e.type == INPUT and event_key(e) == "hyperparameters"]
    if not used:
        raise LineageError(f"model {model.id} trained with its knobs as given: no tuning result")
    return store.get_artifacts_by_id(used[:1])[0]


def tuning_of(store: metadata_store.MetadataStore, types: TypeNames, graph: Graph, tuned: mlmd_pb.Artifact,
              run: mlmd_pb.Context | None) -> dict[str, Any]:
    """The tuning result a Trainer trained with: how many trials produced it, the best one, and
    whether this run's Tuner made it or it was reused from an earlier run."""
    tuner = graph.producer(tuned.id)
    tuner_run = _run_context(store, types, tuner.id) if tuner else None
    best = property_of(tuned, tuner_keys.BEST_TRIAL)
    return {
        "id": tuned.id,
        "uri": tuned.uri,
        "tuner_execution_id": tuner.id if tuner else None,
        "run_id": tuner_run.name if tuner_run else None,
        "reused": bool(run and tuner_run and tuner_run.id != run.id),
        "trials": property_of(tuned, tuner_keys.TRIAL_COUNT),
        "pruned": property_of(tuned, tuner_keys.PRUNED_COUNT),
        "failed": property_of(tuned, tuner_keys.FAILED_COUNT),
        "best_trial": None if best is None else int(best),
        "best_score": property_of(tuned, tuner_keys.BEST_SCORE),
        "objective": property_of(tuned, tuner_keys.OBJECTIVE),
        "values": decoded_json(property_of(tuned, tuner_keys.BEST_VALUES)) or {},
        "study": property_of(tuned, tuner_keys.STUDY),
        "search_space": property_of(tuned, tuner_keys.SEARCH_SPACE),
        "wall_s": property_of(tuned, tuner_keys.WALL_S),
    }


def tuning_trials(tuned: mlmd_pb.Artifact) -> list[dict[str, Any]]:
    """Every trial recorded on a tuning result: number, state, score, duration_s, values, steps,
    the process that ran it, a failed one's error, a bagged one's fold losses."""
    return decoded_json(property_of(tuned, tuner_keys.TRIALS_PROPERTY)) or []


def _run_context(store: metadata_store.MetadataStore, types: TypeNames, execution_id: int) -> mlmd_pb.Context | None:
    return next((c for c in store.get_contexts_by_execution(execution_id) if types.context(c.type_id) == RUN_CONTEXT),
                None)


def study(store: metadata_store.MetadataStore, result: mlmd_pb.Artifact) -> dict[str, Any]:
    """A tuning result's summary and every trial of it, best first among the complete ones."""
    graph = Graph(TypeNames(store))
    upstream = subgraph(store, result.id, mlmd_pb.LineageSubgraphQueryOptions.UPSTREAM, 1)
    graph.add(upstream.artifacts, upstream.executions, upstream.events)
    summary = tuning_of(store, graph.types, graph, result, None)
    return {**summary, "trial_list": tuning_trials(result)}
