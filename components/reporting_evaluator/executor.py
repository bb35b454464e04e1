"""Evaluator executor that copies the metrics onto the ModelEvaluation artifact.

TFX's Evaluator writes its metrics only to files under the artifact's URI. Recorded as
custom properties (see keys.py), they answer "how good was this model?" from MLMD
alone: lineage, run listings and the run summary need no file reads and no TFMA import.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.types import artifact_utils

from components.reporting_evaluator.keys import (
    BLESSING_METRIC,
    BOUND_FROM_THRESHOLD,
    BOUND_FROM_TRIVIAL,
    DIFF_PREFIX,
    LOWER_IS_BETTER_CLASSES,
    METRIC_CLASS_NAMES,
    METRIC_NAMES,
    METRIC_PREFIX,
    SLICE_METRICS,
    THRESHOLD_KEY,
    TRIVIAL_METRIC,
    TRIVIAL_PREDICTION,
    VALIDATION_FAILURES,
    VALUE_BOUND,
    VALUE_BOUND_SOURCE,
)
from components.reporting_trainer import keys as trainer_keys

# TFMA names the models only when there is a baseline to compare with.
CANDIDATE_NAMES = ("", "candidate")


class Executor(evaluator_executor.Executor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        exec_properties = with_runtime_threshold(exec_properties)
        trivial = trivial_baseline(input_dict["model"][0])
        exec_properties, bound = with_trivial_floor(exec_properties, trivial)
        super().Do(input_dict, output_dict, exec_properties)
        evaluation = artifact_utils.get_single_instance(output_dict["evaluation"])
        record_metrics(evaluation, read_metrics(evaluation.uri), blessing_metric_name(exec_properties["eval_config"]))
        record_verdict(evaluation, trivial, bound)


@dataclasses.dataclass(frozen=True)
class Trivial:
    value: float
    prediction: str


@dataclasses.dataclass(frozen=True)
class Bound:
    value: float
    source: str  # BOUND_FROM_THRESHOLD or BOUND_FROM_TRIVIAL


def trivial_baseline(model: types.Artifact) -> Trivial | None:
    """The trivial baseline the Trainer measured on the eval split; None if it recorded none
    (a model trained before it did, or AUC on an eval split of one class)."""
    if not model.has_custom_property(trainer_keys.TRIVIAL_METRIC):
        return None
    prediction = (model.get_string_custom_property(trainer_keys.TRIVIAL_PREDICTION)
                  if model.has_custom_property(trainer_keys.TRIVIAL_PREDICTION) else "")
    return Trivial(float(model.get_float_custom_property(trainer_keys.TRIVIAL_METRIC)), prediction)


def with_trivial_floor(exec_properties: dict[str, Any], trivial: Trivial | None) -> tuple[dict[str, Any], Bound | None]:
    """exec_properties whose value bound on the blessing metric is never looser than the
    trivial baseline: a model no better than a constant is never blessed. Returns the bound
    in force and where it came from (None: no value bound)."""
    eval_config = tfma.EvalConfig()
    json_format.Parse(exec_properties["eval_config"], eval_config)
    bound = None
    for metrics_spec in eval_config.metrics_specs:
        for metric in metrics_spec.metrics:
            for per_slice in metric.per_slice_thresholds:
                lower = metric.class_name in LOWER_IS_BETTER_CLASSES
                value_threshold = per_slice.threshold.value_threshold
                side = value_threshold.upper_bound if lower else value_threshold.lower_bound
                configured = side.value if value_threshold.HasField("upper_bound" if lower else "lower_bound") else None
                bound = None if configured is None else Bound(configured, BOUND_FROM_THRESHOLD)
                if trivial is None:
                    continue
                # Strictly better than the constant: an exact tie is no better.
                floor = trivial.value - TIE_MARGIN if lower else trivial.value + TIE_MARGIN
                if configured is None or (floor < configured if lower else floor > configured):
                    side.value = floor
                    bound = Bound(floor, BOUND_FROM_TRIVIAL)
    properties = {**exec_properties, "eval_config": json_format.MessageToJson(eval_config, sort_keys=True)}
    return properties, bound


# How much better than the trivial baseline a model must be to count as better at all.
TIE_MARGIN = 1e-6


def validation_failures(evaluation_uri: str) -> list[dict[str, Any]]:
    """Each threshold TFMA found broken on the whole eval split: a value or a change bound."""
    result = tfma.load_validation_result(evaluation_uri)
    failures = []
    for per_slice in result.metric_validations_per_slice:
        for failure in per_slice.failures:
            threshold = failure.metric_threshold
            if failure.metric_key.is_diff and threshold.HasField("change_threshold"):
                bound = threshold.change_threshold.absolute.value
                kind = "change"
            else:
                value_threshold = threshold.value_threshold
                bound = (value_threshold.upper_bound.value if value_threshold.HasField("upper_bound")
                         else value_threshold.lower_bound.value)
                kind = "value"
            value = failure.metric_value.double_value.value
            failures.append({"kind": kind, "value": value, "bound": bound})
    return failures


def record_verdict(evaluation: types.Artifact, trivial: Trivial | None, bound: Bound | None) -> None:
    if trivial is not None:
        evaluation.set_float_custom_property(TRIVIAL_METRIC, trivial.value)
        evaluation.set_string_custom_property(TRIVIAL_PREDICTION, trivial.prediction)
    if bound is not None:
        evaluation.set_float_custom_property(VALUE_BOUND, bound.value)
        evaluation.set_string_custom_property(VALUE_BOUND_SOURCE, bound.source)
    failures = [f for f in validation_failures(evaluation.uri)
                if all(math.isfinite(f[key]) for key in ("value", "bound"))]
    evaluation.set_string_custom_property(VALIDATION_FAILURES, json.dumps(failures))


def blessing_metric_name(eval_config_json: str) -> str | None:
    """The recorded name of the metric that carries thresholds, e.g. 'auc[classId:1]'."""
    eval_config = tfma.EvalConfig()
    json_format.Parse(eval_config_json, eval_config)
    names = {class_name: METRIC_NAMES[metric] for metric, class_name in METRIC_CLASS_NAMES.items()}
    for metrics_spec in eval_config.metrics_specs:
        class_ids = list(metrics_spec.binarize.class_ids.values)
        for metric in metrics_spec.metrics:
            if metric.per_slice_thresholds and metric.class_name in names:
                suffix = f"[classId:{class_ids[0]}]" if len(class_ids) == 1 else ""
                return names[metric.class_name] + suffix
    return None


def with_runtime_threshold(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """exec_properties whose blessing threshold takes the `blessing_threshold` property, if set.

    The pipeline puts a value threshold on one metric (the dataset file's blessing metric);
    its bound (lower, or upper for an error metric) is the one replaced.
    """
    bound = exec_properties.get(THRESHOLD_KEY)
    if bound is None:
        return exec_properties
    bound = float(bound)
    eval_config = tfma.EvalConfig()
    json_format.Parse(exec_properties["eval_config"], eval_config)
    for metrics_spec in eval_config.metrics_specs:
        for metric in metrics_spec.metrics:
            for per_slice in metric.per_slice_thresholds:
                value_threshold = per_slice.threshold.value_threshold
                if value_threshold.HasField("upper_bound"):
                    value_threshold.upper_bound.value = bound
                elif value_threshold.HasField("lower_bound"):
                    if not 0.0 <= bound <= 1.0:
                        raise ValueError(f"blessing_threshold must be in [0, 1] for {metric.class_name}, "
                                         f"got {bound}; set the 'blessing_threshold' pipeline parameter "
                                         "to a fraction")
                    value_threshold.lower_bound.value = bound
    return {**exec_properties, "eval_config": json_format.MessageToJson(eval_config, sort_keys=True)}


@dataclasses.dataclass
class Metrics:
    """Scalar metrics keyed like `name` or `name[classId:1]`."""

    overall: dict[str, float] = dataclasses.field(default_factory=dict)  # the whole eval split
    diff: dict[str, float] = dataclasses.field(default_factory=dict)  # candidate minus baseline
    slices: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # "island=Dream": ...


def read_metrics(evaluation_uri: str) -> Metrics:
    """The candidate's scalar metrics from TFMA's output, overall, per slice and as changes."""
    metrics = Metrics()
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        slice_keys = metrics_for_slice.slice_key.single_slice_keys
        slice_name = "/".join(f"{key.column}={_slice_value(key)}" for key in slice_keys)
        for key_and_value in metrics_for_slice.metric_keys_and_values:
            key, value = key_and_value.key, key_and_value.value
            if key.model_name not in CANDIDATE_NAMES:
                continue  # the baseline's own values
            if not value.HasField("double_value"):
                continue  # confusion matrices and other structured metrics
            name = key.name + _sub_key_suffix(key.sub_key)
            if slice_name:
                if not key.is_diff:
                    metrics.slices.setdefault(slice_name, {})[name] = value.double_value.value
            elif key.is_diff:
                metrics.diff[name] = value.double_value.value
            else:
                metrics.overall[name] = value.double_value.value
    return metrics


def _sub_key_suffix(sub_key) -> str:
    if sub_key.HasField("class_id"):
        return f"[classId:{sub_key.class_id.value}]"
    if sub_key.HasField("top_k"):
        return f"[topK:{sub_key.top_k.value}]"
    return ""


def _slice_value(key) -> str:
    kind = key.WhichOneof("kind")
    value = getattr(key, kind) if kind else ""
    return value.decode() if isinstance(value, bytes) else str(value)


def record_metrics(evaluation: types.Artifact, metrics: Metrics, blessing_metric: str | None = None) -> None:
    if blessing_metric:
        evaluation.set_string_custom_property(BLESSING_METRIC, blessing_metric)
    # An undefined value (e.g. precision of a class never predicted) is left out: MySQL
    # stores no NaN.
    for prefix, values in ((METRIC_PREFIX, metrics.overall), (DIFF_PREFIX, metrics.diff)):
        for name, value in values.items():
            if math.isfinite(value):
                evaluation.set_float_custom_property(prefix + name, value)
    slices = {slice_name: {name: value for name, value in values.items() if math.isfinite(value)}
              for slice_name, values in sorted(metrics.slices.items())}
    if slices:
        evaluation.set_string_custom_property(SLICE_METRICS, json.dumps(slices, sort_keys=True))
