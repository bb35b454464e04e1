"""The Evaluator's baseline: the latest model that was blessed *and pushed*, other than the
candidate.

TFX's LatestBlessedModelStrategy takes the latest blessed model. After a push that failed,
a rerun reuses the cached Trainer, so the latest blessed model is the candidate itself:
it is compared with itself and a change threshold (--max-accuracy-drop) checks nothing.
A pushed model is what serves, so it is what a candidate must not fall behind.

A workspace holds any number of datasets: the baseline is only ever a model pushed under the
candidate's model name (the serving directory it was pushed to) with the candidate's feature
contract (components/reporting_trainer/keys.py). Another dataset's model would score rows it
was never built for, or fail inside TFMA. A model recorded before models carried a contract
is matched on its name alone.
"""

from __future__ import annotations

import ml_metadata as mlmd
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb
from tfx import types
from tfx.dsl.components.common import resolver

from components.atomic_pusher import keys as pusher_keys
from components.reporting_trainer.keys import FEATURE_CONTRACT_KEY, MODEL_NAME_KEY

# The Resolver's input keys (pipeline/pipeline.py): every Model, every PushedModel, and
# the run's candidate (the Trainer's output, which orders the Resolver after the Trainer).
MODEL_KEY, PUSHED_MODEL_KEY, CANDIDATE_KEY = "model", "pushed_model", "candidate"


class LatestPushedModelStrategy(resolver.ResolverStrategy):
    """Resolves `model` to [the latest pushed model other than the candidate], or []."""

    def resolve_artifacts(
        self, store: mlmd.MetadataStore, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        candidates = input_dict.get(CANDIDATE_KEY, [])
        candidate_ids = {artifact.id for artifact in candidates}
        name = _string_property(candidates[0], MODEL_NAME_KEY) if candidates else None
        contract = _string_property(candidates[0], FEATURE_CONTRACT_KEY) if candidates else None
        pushed = [a for a in input_dict.get(PUSHED_MODEL_KEY, [])
                  if a.has_custom_property(pusher_keys.PUSHED)
                  and a.get_int_custom_property(pusher_keys.PUSHED) == 1
                  and (name is None or pushed_model_name(a) == name)]
        pushed_model_ids = _models_pushed(store, [a.id for a in pushed])
        models = sorted((m for m in input_dict.get(MODEL_KEY, [])
                         if m.id in pushed_model_ids and m.id not in candidate_ids
                         and _same_contract(m, contract)),
                        key=lambda m: m.id, reverse=True)
        return {MODEL_KEY: models[:1], PUSHED_MODEL_KEY: [], CANDIDATE_KEY: []}


def pushed_model_name(pushed: types.Artifact) -> str:
    """The model a push served: its version directory's parent (<serving>/<model>/<version>),
    as serving/push.py lays it out and pipeline/provenance/pushes.py reads it."""
    return pusher_keys.model_name_of(pushed.get_string_custom_property(pusher_keys.PUSHED_DESTINATION))


def _same_contract(model: types.Artifact, contract: str | None) -> bool:
    recorded = _string_property(model, FEATURE_CONTRACT_KEY)
    return contract is None or recorded is None or recorded == contract


def _string_property(artifact: types.Artifact, key: str) -> str | None:
    return artifact.get_string_custom_property(key) or None if artifact.has_custom_property(key) else None


def _models_pushed(store: mlmd.MetadataStore, pushed_ids: list[int]) -> set[int]:
    """The Model each PushedModel came from: the `model` input of the Pusher that made it."""
    if not pushed_ids:
        return set()
    pushers = {e.execution_id for e in store.get_events_by_artifact_ids(pushed_ids)
               if e.type == mlmd_pb.Event.OUTPUT}
    return {e.artifact_id for e in store.get_events_by_execution_ids(sorted(pushers))
            if e.type == mlmd_pb.Event.INPUT and _event_key(e) == "model"}


def _event_key(event: mlmd_pb.Event) -> str:
    """The input key an event's artifact was given under ("model", "model_blessing", ...)."""
    steps = event.path.steps
    return steps[0].key if steps and steps[0].HasField("key") else ""
