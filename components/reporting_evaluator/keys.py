"""Names the Evaluator's records in MLMD go by: written by the executor and the pipeline
definition, read by the provenance queries and the run summary. No TFX import: the CLI
reads these."""

from __future__ import annotations

# Custom properties of the ModelEvaluation artifact: metric_<name> holds the candidate's
# value on the whole eval split, diff_<name> its change against the baseline model, and
# slice_metrics a JSON object {"feature=value": {name: value}} per slice.
METRIC_PREFIX = "metric_"
DIFF_PREFIX = "diff_"
SLICE_METRICS = "slice_metrics"
# The metric the blessing thresholds sit on, as recorded (e.g. "auc[classId:1]").
BLESSING_METRIC = "blessing_metric"
# Top-level exec property (a runtime parameter in a compiled pipeline) that replaces the
# bound of the blessing metric's threshold in eval_config: runtime parameters cannot live
# inside a proto property.
THRESHOLD_KEY = "blessing_threshold"
# The blessing metrics a dataset file may name: the TFMA metric class computing each, and
# the name TFMA records it under (binarized metrics add a [classId:N] suffix).
METRIC_CLASS_NAMES = {
    "accuracy": "SparseCategoricalAccuracy",
    "auc": "AUC",
    "rmse": "RootMeanSquaredError",
    "mae": "MeanAbsoluteError",
}
METRIC_NAMES = {
    "accuracy": "sparse_categorical_accuracy",
    "auc": "auc",
    "rmse": "root_mean_squared_error",
    "mae": "mean_absolute_error",
}
# TFX's own names on the ModelBlessing (tfx.components.evaluator.constants).
BLESSED = "blessed"
BASELINE_MODEL_ID = "baseline_model_id"
# On the ModelEvaluation: the trivial baseline on the eval split (the train split's majority
# class, or its mean / median, scored on the eval split) and what it predicts, copied from
# the candidate Model's training report; the value bound the blessing metric was held to
# (the configured threshold, or the trivial baseline where that is stricter or unset) and
# where it came from; and why blessing failed: a JSON list of {"kind": "value" | "change",
# "value": the metric or its change, "bound": the bound it broke}.
TRIVIAL_METRIC = "trivial_metric"
TRIVIAL_PREDICTION = "trivial_prediction"
VALUE_BOUND = "value_bound"
VALUE_BOUND_SOURCE = "value_bound_source"
BOUND_FROM_THRESHOLD, BOUND_FROM_TRIVIAL = "threshold", "trivial baseline"
VALIDATION_FAILURES = "validation_failures"
# TFMA metric classes where lower is better (errors); the others are scores.
LOWER_IS_BETTER_CLASSES = ("RootMeanSquaredError", "MeanAbsoluteError")
