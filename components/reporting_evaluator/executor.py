"""Evaluator executor that copies the overall metrics onto the ModelEvaluation artifact.

TFX's Evaluator writes its metrics only to files under the artifact's URI. Recorded as
custom properties (metric_<name>), they answer "how good was this model?" from MLMD
alone: lineage and run listings need no file reads and no TFMA import.
"""

from __future__ import annotations

import math
from typing import Any

import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.types import artifact_utils

PROPERTY_PREFIX = "metric_"
# Top-level exec property (a runtime parameter in a compiled pipeline) that replaces the
# lower bound of the accuracy threshold in eval_config: runtime parameters cannot live
# inside a proto property.
MIN_ACCURACY_KEY = "min_accuracy"
ACCURACY_CLASS_NAME = "SparseCategoricalAccuracy"
# TFMA names the models only when there is a baseline to compare with.
CANDIDATE_NAMES = ("", "candidate")


class Executor(evaluator_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        super().Do(input_dict, output_dict, with_runtime_threshold(exec_properties))
        evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
        record_metrics(evaluation, overall_metrics(evaluation.uri))


def with_runtime_threshold(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """exec_properties whose accuracy thresholds take the `min_accuracy` property, if set."""
    min_accuracy = exec_properties.get(MIN_ACCURACY_KEY)
    if min_accuracy is None:
        return exec_properties
    min_accuracy = float(min_accuracy)
    if not 0.0 <= min_accuracy <= 1.0:
        raise ValueError(f"min_accuracy must be in [0, 1], got {min_accuracy}; "
                         "set the 'min_accuracy' pipeline parameter to a fraction")
    eval_config = tfma.EvalConfig()
    json_format.Parse(exec_properties["eval_config"], eval_config)
    for metrics_spec in eval_config.metrics_specs:
        for metric in metrics_spec.metrics:
            if metric.class_name != ACCURACY_CLASS_NAME:
                continue
            for per_slice in metric.per_slice_thresholds:
                per_slice.threshold.value_threshold.lower_bound.value = min_accuracy
    return {**exec_properties, "eval_config": json_format.MessageToJson(eval_config, sort_keys=True)}


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
