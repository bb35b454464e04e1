"""Names the Evaluator's records in MLMD go by: written by the executor and the pipeline
definition, read by the provenance queries and the run summary. No TFX import: the CLI
reads these."""

from __future__ import annotations

import re

# Custom properties of the ModelEvaluation artifact: metric_<name> holds the candidate's
# value on the whole eval split, diff_<name> its change against the baseline model, and
# slice_metrics a JSON object {"feature=value": {name: value}} per slice. A per-class
# metric's name ends with the class's label value: "precision[Chinstrap]" (see class_key);
# evaluations recorded before class names were known say "precision[classId:1]".
METRIC_PREFIX = "metric_"
DIFF_PREFIX = "diff_"
SLICE_METRICS = "slice_metrics"
# Metrics TFMA could not compute, with the reason, as JSON {"overall": {name: reason},
# "slices": {"feature=value": {name: reason}}}: a float property cannot say why (and MySQL
# stores no NaN). E.g. {"overall": {"precision[3]": "never predicted"}}.
UNDEFINED_METRICS = "undefined_metrics"
# The eval split's confusion matrix with class names, as JSON {"classes": [label, ...],
# "counts": [[n, ...], ...], "left_out": k}: rows are true labels, columns predictions, in
# the order of "classes" (the most frequent true labels first, at most
# CONFUSION_MATRIX_CLASSES); when k classes are left out, one more row and column ("other")
# count them, so the counts always sum to the eval split's rows.
CONFUSION_MATRIX = "confusion_matrix"
CONFUSION_MATRIX_CLASSES = 10
# The metric the blessing thresholds sit on, as recorded (e.g. "auc[yes]").
BLESSING_METRIC = "blessing_metric"
# Top-level exec property (a runtime parameter in a compiled pipeline) that replaces the
# bound of the blessing metric's threshold in eval_config: runtime parameters cannot live
# inside a proto property.
THRESHOLD_KEY = "blessing_threshold"
# The blessing metrics a dataset file may name: the TFMA metric class computing each, and
# the name TFMA records it under (binarized metrics add a class suffix: class_key).
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
# What the run report shows beyond TFMA's metrics (insights.py): a JSON file in the
# evaluation's folder with ROC and PR curves and calibration (classifiers) or residuals
# (regression), and permutation importance; the importance also as a JSON property, a list
# of {"feature": name, "drop": how much worse the blessing metric got with it shuffled},
# most important first; and, when they could not be computed, why.
INSIGHTS_FILE = "insights.json"
PERMUTATION_IMPORTANCE = "permutation_importance"
INSIGHTS_ERROR = "insights_error"
# Which way each blessing metric is better (errors lower, scores higher), and the TFMA metric
# classes where lower is better.
HIGHER_IS_BETTER = {"accuracy": True, "auc": True, "rmse": False, "mae": False}
LOWER_IS_BETTER_CLASSES = tuple(METRIC_CLASS_NAMES[m] for m, higher in HIGHER_IS_BETTER.items() if not higher)
# A change threshold lets a candidate trail the baseline by max_drop plus this, so that an
# exact tie passes (pipeline.blessing_threshold); the verdict takes it off again.
CHANGE_TIE_MARGIN = 1e-10


# TFMA's own sub-key spellings, which a label value must not be mistaken for.
_TFMA_SUB_KEY = re.compile(r"(classId|topK|k):-?[0-9]+")
# Inside a quoted label: the quote doubled; these (and any character that is not printable)
# percent-encoded, as UTF-8 bytes. No backslash escapes: MLMD's PostgreSQL store fails on a
# backslash in a property name.
_PERCENT_ENCODED = frozenset("%\\")


def class_text(label: str) -> str:
    """A label value as metric names and the run summary show it: as it is where that is
    unambiguous (Chinstrap, big cat, x=1, é), else in double quotes, a quote inside
    doubled, a backslash or unprintable character percent-encoded (tests/test_class_names.py
    lists cases: the empty label, edge spaces, brackets, quotes, TFMA's own classId:N)."""
    if (label and label == label.strip() and label.isprintable() and not any(c in label for c in '[]"\\')
            and not _TFMA_SUB_KEY.fullmatch(label)):
        return label
    body = "".join(
        '""' if char == '"' else
        "".join(f"%{byte:02X}" for byte in char.encode()) if char in _PERCENT_ENCODED or not char.isprintable()
        else char
        for char in label)
    return f'"{body}"'


def class_key(metric: str, label: str) -> str:
    """The recorded name of a per-class metric: 'precision[Chinstrap]'."""
    return f"{metric}[{class_text(label)}]"
