"""Evaluator executor that copies the metrics onto the ModelEvaluation artifact.

TFX's Evaluator writes its metrics only to files under the artifact's URI. Recorded as
custom properties (see keys.py), they answer "how good was this model?" from MLMD
alone: lineage, run listings and the run summary need no file reads and no TFMA import.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from typing import Any

import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx import types
from tfx.components.evaluator import executor as evaluator_executor
from tfx.dsl.io import fileio
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.reporting_evaluator import insights
from components.reporting_evaluator.confusion import (
    ARGMAX_RATES,
    CANDIDATE_NAMES,
    UNDEFINED,
    argmax_rate,
    confusion_matrix,
    read_confusion_counts,
    slice_of,
    undefined_reason,
)
from components.reporting_evaluator.keys import (
    BLESSING_METRIC,
    BOUND_FROM_THRESHOLD,
    BOUND_FROM_TRIVIAL,
    CONFUSION_MATRIX,
    DIFF_PREFIX,
    INSIGHTS_ERROR,
    INSIGHTS_FILE,
    LOWER_IS_BETTER_CLASSES,
    METRIC_CLASS_NAMES,
    METRIC_NAMES,
    METRIC_PREFIX,
    PERMUTATION_IMPORTANCE,
    SLICE_METRICS,
    THRESHOLD_KEY,
    TRIVIAL_METRIC,
    TRIVIAL_PREDICTION,
    UNDEFINED_METRICS,
    VALIDATION_FAILURES,
    VALUE_BOUND,
    VALUE_BOUND_SOURCE,
    class_key,
)
from components.reporting_trainer import keys as trainer_keys
from components.reporting_trainer.keys import (
    CLASS_NAMES_KEY,
    TRAINING_PREFIX,
    from_json_property,
    json_property,
)


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
        names = class_names(input_dict["model"][0]) if input_dict.get("model") else None
        metrics = read_metrics(evaluation.uri, names)
        baselines = input_dict.get("baseline_model") or []
        if baselines:
            metrics.diff = comparable_changes(metrics.diff, names, class_names(baselines[0]))
        record_metrics(evaluation, metrics, blessing_metric_name(exec_properties["eval_config"], names))
        record_verdict(evaluation, trivial, bound, validation_failures(evaluation.uri))
        record_insights(evaluation, input_dict, exec_properties, names)


def record_insights(evaluation: types.Artifact, input_dict: dict[str, list[types.Artifact]],
                    exec_properties: dict[str, Any], names: list[str] | None) -> None:
    """The report's curves, residuals and permutation importance (insights.py), on the eval
    split through the served signature. They serve the report, not the blessing: a failure
    here is logged and recorded, and the evaluation stands."""
    model = input_dict["model"][0]
    task = _model_text(model, "task")
    metric = _model_text(model, "blessing_metric")
    if task is None or metric is None:
        evaluation.set_string_custom_property(INSIGHTS_ERROR, "the model records no task or blessing metric")
        return
    eval_config = tfma.EvalConfig()
    json_format.Parse(exec_properties["eval_config"], eval_config)
    splits = json.loads(exec_properties.get("example_splits") or "null") or ["eval"]
    examples_dir = artifact_utils.get_split_uri(input_dict["examples"], splits[0])
    try:
        found = insights.compute(path_utils.serving_model_path(model.uri), examples_dir,
                                 eval_config.model_specs[0].label_key, task, metric, names)
    except Exception as err:  # noqa: BLE001 (recorded with its cause; the blessing is unaffected)
        logging.exception("the report's insights could not be computed")
        evaluation.set_string_custom_property(INSIGHTS_ERROR, f"{type(err).__name__}: {err}"[:500])
        return
    fileio.makedirs(evaluation.uri)
    with fileio.open(os.path.join(evaluation.uri, INSIGHTS_FILE), "w") as out:
        out.write(json.dumps(found, allow_nan=False))
    evaluation.set_string_custom_property(PERMUTATION_IMPORTANCE, json_property(found["importance"]))


def _model_text(model: types.Artifact, key: str) -> str | None:
    name = TRAINING_PREFIX + key
    return model.get_string_custom_property(name) or None if model.has_custom_property(name) else None


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


def record_verdict(evaluation: types.Artifact, trivial: Trivial | None, bound: Bound | None,
                   failures: list[dict[str, Any]]) -> None:
    if trivial is not None:
        evaluation.set_float_custom_property(TRIVIAL_METRIC, trivial.value)
        evaluation.set_string_custom_property(TRIVIAL_PREDICTION, trivial.prediction)
    if bound is not None:
        evaluation.set_float_custom_property(VALUE_BOUND, bound.value)
        evaluation.set_string_custom_property(VALUE_BOUND_SOURCE, bound.source)
    # A NaN value (a diverged model) still broke its bound: kept, as null (MySQL takes no NaN).
    failures = [{key: value if not isinstance(value, float) or math.isfinite(value) else None
                 for key, value in failure.items()} for failure in failures]
    evaluation.set_string_custom_property(VALIDATION_FAILURES, json_property(failures))


def class_names(model: types.Artifact) -> list[str] | None:
    """The model's label values in class id order, from its training report; None for a
    model trained before the report named them."""
    name = TRAINING_PREFIX + CLASS_NAMES_KEY
    if not model.has_custom_property(name):
        return None
    return from_json_property(model.get_string_custom_property(name)) or None


def comparable_changes(diff: dict[str, float], names: list[str] | None,
                       baseline_names: list[str] | None) -> dict[str, float]:
    """The changes against the baseline that compare like with like. TFMA pairs classes by
    id: where the baseline's ids name other labels (its label frequencies differed), a
    per-class change would compare two different classes, and is left out."""
    if names is None or baseline_names is None or names == baseline_names:
        return diff
    return {name: value for name, value in diff.items() if "[" not in name}


def blessing_metric_name(eval_config_json: str, names: list[str] | None = None) -> str | None:
    """The recorded name of the metric that carries thresholds, e.g. 'auc[yes]'."""
    eval_config = tfma.EvalConfig()
    json_format.Parse(eval_config_json, eval_config)
    metric_names = {class_name: METRIC_NAMES[metric] for metric, class_name in METRIC_CLASS_NAMES.items()}
    for metrics_spec in eval_config.metrics_specs:
        class_ids = list(metrics_spec.binarize.class_ids.values)
        for metric in metrics_spec.metrics:
            if metric.per_slice_thresholds and metric.class_name in metric_names:
                name = metric_names[metric.class_name]
                return _class_metric_name(name, class_ids[0], names) if len(class_ids) == 1 else name
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
    """Scalar metrics keyed like `name` or `name[label]` (see keys.class_key)."""

    overall: dict[str, float] = dataclasses.field(default_factory=dict)  # the whole eval split
    diff: dict[str, float] = dataclasses.field(default_factory=dict)  # candidate minus baseline
    slices: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # "island=Dream": ...
    # Metrics without a value, with the reason: {name: reason}, overall and per slice.
    undefined: dict[str, str] = dataclasses.field(default_factory=dict)
    slice_undefined: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # The eval split's confusion matrix as recorded (keys.CONFUSION_MATRIX); None: not computed.
    confusion: dict[str, Any] | None = None


def read_metrics(evaluation_uri: str, names: list[str] | None = None) -> Metrics:
    """The candidate's scalar metrics from TFMA's output, overall, per slice and as changes,
    per-class ones named by the label values `names` (class id order; None: by class id).

    A metric TFMA could not compute goes to `undefined` with the reason, told from the
    slice's confusion counts; so does an AUC on rows of one class, which TFMA gives as 0.
    """
    counts = read_confusion_counts(evaluation_uri)
    binary = names is not None and len(names) == 2
    metrics = Metrics()
    for metrics_for_slice in tfma.load_metrics(evaluation_uri):
        slice_name = slice_of(metrics_for_slice.slice_key)
        for key_and_value in metrics_for_slice.metric_keys_and_values:
            key, value = key_and_value.key, key_and_value.value
            if key.model_name not in CANDIDATE_NAMES:
                continue  # the baseline's own values
            if not value.HasField("double_value"):
                continue  # confusion matrices and other structured metrics
            class_id = key.sub_key.class_id.value if key.sub_key.HasField("class_id") else None
            name = (_class_metric_name(key.name, class_id, names) if class_id is not None
                    else key.name + _sub_key_suffix(key.sub_key))
            number = value.double_value.value
            if not binary and class_id is not None and key.name in ARGMAX_RATES and slice_name in counts:
                if key.is_diff:
                    continue  # TFMA's change is at its threshold; the baseline's counts are not read here
                number = argmax_rate(key.name, class_id, counts[slice_name])
            if key.is_diff:
                if not slice_name:
                    metrics.diff[name] = number
                continue
            where = "slice" if slice_name else "eval split"
            reason = undefined_reason(key.name, class_id, number, counts.get(slice_name), binary, where)
            if reason:
                (metrics.slice_undefined.setdefault(slice_name, {}) if slice_name else metrics.undefined)[
                    name] = reason
            elif slice_name:
                metrics.slices.setdefault(slice_name, {})[name] = number
            else:
                metrics.overall[name] = number
    # A change of a metric without a value is no change.
    metrics.diff = {name: value for name, value in metrics.diff.items() if name not in metrics.undefined}
    if names is not None and "" in counts:
        metrics.confusion = confusion_matrix(counts[""], names)
    return metrics


def _class_metric_name(metric: str, class_id: int, names: list[str] | None) -> str:
    if names is not None and 0 <= class_id < len(names):
        return class_key(metric, names[class_id])
    return f"{metric}[classId:{class_id}]"  # TFMA's own name: the label values are unknown


def _sub_key_suffix(sub_key) -> str:
    if sub_key.HasField("top_k"):
        return f"[topK:{sub_key.top_k.value}]"
    return ""


def record_metrics(evaluation: types.Artifact, metrics: Metrics, blessing_metric: str | None = None) -> None:
    if blessing_metric:
        evaluation.set_string_custom_property(BLESSING_METRIC, blessing_metric)
    # An undefined value is recorded with its reason, never as a number: MySQL stores no
    # NaN, and a made-up 0 would read as a real score.
    undefined = {**{name: UNDEFINED for name, value in metrics.overall.items() if not math.isfinite(value)},
                 **metrics.undefined}
    for prefix, values in ((METRIC_PREFIX, metrics.overall), (DIFF_PREFIX, metrics.diff)):
        for name, value in values.items():
            if math.isfinite(value):
                evaluation.set_float_custom_property(prefix + name, value)
    slices = {slice_name: {name: value for name, value in values.items() if math.isfinite(value)}
              for slice_name, values in sorted(metrics.slices.items())}
    slice_undefined = {slice_name: {**{name: UNDEFINED for name, value in metrics.slices.get(slice_name, {}).items()
                                       if not math.isfinite(value)}, **metrics.slice_undefined.get(slice_name, {})}
                       for slice_name in sorted({*metrics.slices, *metrics.slice_undefined})}
    slice_undefined = {slice_name: reasons for slice_name, reasons in slice_undefined.items() if reasons}
    if slices:
        evaluation.set_string_custom_property(SLICE_METRICS, json_property(slices))
    if undefined or slice_undefined:
        evaluation.set_string_custom_property(UNDEFINED_METRICS, json_property(
            {"overall": undefined, "slices": slice_undefined}))
    if metrics.confusion is not None:
        evaluation.set_string_custom_property(CONFUSION_MATRIX, json_property(metrics.confusion))
