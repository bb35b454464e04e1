"""The Trainer's knobs without a Tuner: the latest tuning result recorded for the same model,
feature contract and search space (components/tuner/keys.py), or none.

A result tuned over another search space (other knobs, other ranges, another model family)
answers another question, and one tuned on another table's columns fits another dataset:
neither is reused. The Trainer then trains with its knobs as given.
"""

from __future__ import annotations

import ml_metadata as mlmd
from tfx import types
from tfx.dsl.components.common import resolver

from components.tuner import keys

# The Resolver's input and output key: every HyperParameters artifact.
HYPERPARAMETERS_KEY = "hyperparameters"


class LatestTuningStrategy(resolver.ResolverStrategy):
    """Resolves `hyperparameters` to [the latest matching tuning result], or []."""

    def __init__(self, **config: str) -> None:
        # The config the pipeline definition gives: the values a result must have recorded.
        self.wanted = {key: config[key] for key in (keys.SEARCH_SPACE, keys.FEATURE_CONTRACT, keys.MODEL_NAME)}

    def resolve_artifacts(
        self, store: mlmd.MetadataStore, input_dict: dict[str, list[types.Artifact]]
    ) -> dict[str, list[types.Artifact]] | None:
        matching = [artifact for artifact in input_dict.get(HYPERPARAMETERS_KEY, [])
                    if all(_string_property(artifact, key) == value for key, value in self.wanted.items())]
        return {HYPERPARAMETERS_KEY: sorted(matching, key=lambda artifact: artifact.id)[-1:]}


def _string_property(artifact: types.Artifact, key: str) -> str | None:
    return artifact.get_string_custom_property(key) if artifact.has_custom_property(key) else None
