"""The trivial baseline a model must beat: a constant prediction learned from the training
labels alone, scored on the eval labels with the blessing metric (numpy only).

  accuracy  the train split's majority class; its share of the eval rows
  auc       a constant scores 0.5 (undefined when the eval split has one class)
  rmse      the train split's mean;   the root mean squared error of it on the eval labels
  mae       the train split's median; the mean absolute error of it on the eval labels

Classification labels are class ids (the Transform output), class_names maps id -> the
label value as it appears in the data.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

# Entries of the training report (components/reporting_trainer/keys.py names the Model
# artifact's properties they become: training_<entry>): the model's blessing metric on the
# whole train split and on the eval split, and the trivial baseline's.
TRAIN_METRIC = "train_metric"
EVAL_METRIC = "eval_metric"
TRIVIAL_METRIC = "trivial_metric"
TRIVIAL_PREDICTION = "trivial_prediction"
TRIVIAL_NOTE = "trivial_note"  # why trivial_metric is absent, when it is


def trivial_baseline(metric: str, train_labels: np.ndarray, eval_labels: np.ndarray,
                     class_names: Sequence[str] = ()) -> dict[str, float | str]:
    """trivial_metric (absent when undefined, with trivial_note saying why) and
    trivial_prediction (the constant, as text)."""
    train_labels, eval_labels = np.asarray(train_labels).ravel(), np.asarray(eval_labels).ravel()
    if train_labels.size == 0:
        return {TRIVIAL_NOTE: "the train split has no rows"}
    if metric in ("accuracy", "auc"):
        found = trivial_class(train_labels, class_names)
    elif metric == "rmse":
        constant = float(np.mean(train_labels, dtype=np.float64))
        found = {TRIVIAL_PREDICTION: f"{constant:.4g}"}
    elif metric == "mae":
        constant = float(np.median(train_labels.astype(np.float64)))
        found = {TRIVIAL_PREDICTION: f"{constant:.4g}"}
    else:
        raise ValueError(f"no trivial baseline for the metric {metric!r}; choose accuracy, auc, rmse or mae")
    if eval_labels.size == 0:
        return {**found, TRIVIAL_NOTE: "the eval split has no rows"}
    if metric == "accuracy":
        value = float(np.mean(eval_labels == majority_class(train_labels)))
    elif metric == "auc":
        if np.unique(eval_labels).size < 2:
            return {**found, TRIVIAL_NOTE: "AUC is undefined: the eval split holds one class only"}
        value = 0.5  # a constant ranks every pair as a tie
    elif metric == "rmse":
        value = float(np.sqrt(np.mean((eval_labels.astype(np.float64) - constant) ** 2)))
    else:
        value = float(np.mean(np.abs(eval_labels.astype(np.float64) - constant)))
    return {TRIVIAL_METRIC: value, **found}


def majority_class(train_labels: np.ndarray) -> int:
    """The commonest class id of the train split; on a tie, the smallest id."""
    ids, counts = np.unique(train_labels, return_counts=True)
    return int(ids[np.argmax(counts)])


def trivial_class(train_labels: np.ndarray, class_names: Sequence[str]) -> dict[str, str]:
    majority = majority_class(train_labels)
    name = class_names[majority] if 0 <= majority < len(class_names) else str(majority)
    return {TRIVIAL_PREDICTION: name}
