"""Evaluator executor that copies the overall metrics onto the ModelEvaluation artifact.

TFX's Evaluator writes its metrics only to files under the artifact's URI. Recorded as
custom properties (metric_<name>), they answer "how good was this model?" from MLMD
alone: lineage and run listings need no file reads and no TFMA import.
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow_model_analysis as tfma
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.types import artifact_utils

PROPERTY_PREFIX = "metric_"
# TFMA names the models only when there is a baseline to compare with.
CANDIDATE_NAMES = ("", "candidate")


class Executor(evaluator_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        super().Do(input_dict, output_dict, exec_properties)
        evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
        record_metrics(evaluation, overall_metrics(evaluation.uri))


def overall_metrics(evaluation_uri: str) -> dict[str, float]:
    """The whole eval split's scalar metrics, keyed like `name` or `name[classId:1]`."""
    metrics: dict[str, float] = {}
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        if metrics_for_slice.slice_key.single_slice_keys:
            continue  # a slice, not the overall split
        for key_and_value in metrics_for_slice.metric_keys_and_values:
            key, value = key_and_value.key, key_and_value.value
            if key.is_diff or key.model_name not in CANDIDATE_NAMES:
                continue  # the baseline's values, or candidate minus baseline
            if not value.HasField("double_value"):
                continue  # confusion matrices and other structured metrics
            sub_key = key.sub_key
            suffix = ""
            if sub_key.HasField("class_id"):
                suffix = f"[classId:{sub_key.class_id.value}]"
            elif sub_key.HasField("top_k"):
                suffix = f"[topK:{sub_key.top_k.value}]"
            metrics[key.name + suffix] = value.double_value.value
    return metrics


def record_metrics(evaluation: types.Artifact, metrics: dict[str, float]) -> None:
    for name, value in metrics.items():
        if not math.isfinite(value):
            continue  # undefined (e.g. precision of a class never predicted); MySQL has no NaN
        evaluation.set_float_custom_property(PROPERTY_PREFIX + name, value)
