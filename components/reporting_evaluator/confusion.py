"""A model's confusion counts from TFMA's MultiClassConfusionMatrixPlot, and what is read
from them: the matrix recorded, multiclass per-class precision and recall by the top class,
and why a per-class metric has no value."""

from __future__ import annotations

import math
from typing import Any

import tensorflow_model_analysis as tfma

from components.reporting_evaluator.keys import CONFUSION_MATRIX_CLASSES, METRIC_NAMES

# TFMA names the models only when there is a baseline to compare with.
CANDIDATE_NAMES = ("", "candidate")
CONFUSION_PLOT_NAME = "multi_class_confusion_matrix_plot"
# Why a metric has no value (the run summary prints "n/a (<reason>)").
NEVER_PREDICTED = "never predicted"
NO_POSITIVE_ROWS = "no positive rows"
NO_NEGATIVE_ROWS = "no negative rows"
UNDEFINED = "undefined"


# (true class id, predicted class id) -> rows, of one slice.
Counts = dict[tuple[int, int], float]


# A multiclass model's per-class precision and recall as the confusion matrix and accuracy
# decide: the top class is the prediction. TFMA's one-against-the-rest Precision and Recall
# count a class as predicted only above 0.5, which a top class of three or more often is not
# (Seattle weather: one drizzle day predicted and right, shown as never predicted).
ARGMAX_RATES = ("precision", "recall")


def argmax_rate(metric: str, class_id: int, counts: Counts) -> float:
    """Precision (of the rows predicted as the class, the share that are) or recall (of the
    rows of the class, the share predicted as it), from one slice's confusion counts; NaN
    where no row is predicted as the class (precision) or belongs to it (recall)."""
    hits = counts.get((class_id, class_id), 0.0)
    if metric == "precision":
        total = sum(n for (_, guess), n in counts.items() if guess == class_id)
    else:
        total = sum(n for (actual, _), n in counts.items() if actual == class_id)
    return hits / total if total else math.nan


def read_confusion_counts(evaluation_uri: str) -> dict[str, Counts]:
    """The candidate's (true, predicted) class counts per slice ('' overall), from TFMA's
    MultiClassConfusionMatrixPlot (top class, threshold 0: every row has a prediction)."""
    counts: dict[str, Counts] = {}
    for plots_for_slice in tfma.load_plots(evaluation_uri):
        for key_and_value in plots_for_slice.plot_keys_and_values:
            key, value = key_and_value.key, key_and_value.value
            if key.name != CONFUSION_PLOT_NAME or key.model_name not in CANDIDATE_NAMES:
                continue
            matrices = value.multi_class_confusion_matrix_at_thresholds.matrices
            if matrices:
                counts[slice_of(plots_for_slice.slice_key)] = {
                    (entry.actual_class_id, entry.predicted_class_id): entry.num_weighted_examples
                    for entry in matrices[0].entries}
    return counts


def undefined_reason(metric: str, class_id: int | None, value: float, counts: Counts | None, binary: bool,
                     where: str = "eval split") -> str | None:
    """Why a metric has no value on a slice (`where`: "eval split" or "slice"); None: it has one.

    Per-class metrics are about one class against the rest: precision needs rows predicted
    as the class, recall and calibration rows of it, AUC rows of it and of the rest.
    """
    if class_id is None or counts is None:
        return None if math.isfinite(value) else UNDEFINED
    rows = sum(n for (actual, _), n in counts.items() if actual == class_id)
    predicted = sum(n for (_, guess), n in counts.items() if guess == class_id)
    total = sum(counts.values())
    absent = NO_POSITIVE_ROWS if binary else f"absent from the {where}"
    if metric == METRIC_NAMES["auc"]:
        if rows == 0:
            return absent
        if rows == total:
            return NO_NEGATIVE_ROWS if binary else f"no other class in the {where}"
    if math.isfinite(value):
        return None
    if metric == "precision" and predicted == 0:
        return NEVER_PREDICTED
    return absent if rows == 0 else UNDEFINED


def confusion_matrix(counts: Counts, names: list[str], limit: int = CONFUSION_MATRIX_CLASSES) -> dict[str, Any]:
    """The recorded matrix (keys.CONFUSION_MATRIX): the `limit` most frequent true labels,
    every other class in one "other" row and column."""
    rows = [sum(n for (actual, _), n in counts.items() if actual == class_id) for class_id in range(len(names))]
    order = sorted(range(len(names)), key=lambda class_id: (-rows[class_id], class_id))
    shown, left_out = order[:limit], order[limit:]
    position = {class_id: index for index, class_id in enumerate(shown)}
    # Anything else (a left-out class; TFMA's -1, no prediction, never at threshold 0) is other.
    other = bool(left_out) or any(a not in position or p not in position for a, p in counts)
    size = len(shown) + int(other)
    matrix = [[0] * size for _ in range(size)]
    for (actual, predicted), n in counts.items():
        matrix[position.get(actual, len(shown))][position.get(predicted, len(shown))] += int(round(n))
    return {"classes": [names[class_id] for class_id in shown], "counts": matrix, "left_out": len(left_out)}


def slice_of(slice_key) -> str:
    return "/".join(f"{key.column}={_slice_value(key)}" for key in slice_key.single_slice_keys)


def _slice_value(key) -> str:
    kind = key.WhichOneof("kind")
    value = getattr(key, kind) if kind else ""
    return value.decode() if isinstance(value, bytes) else str(value)
