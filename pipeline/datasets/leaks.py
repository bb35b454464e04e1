"""Columns that give the label away: init sets them to `ignore` with the reason `leak?` and
the evidence, so a restatement of the label (Wage's logwage, a loan's `paid_*` after the
fact) is never blessed and pushed as a model.

The test is one column alone, scored on rows it did not see: a random half of the labelled
rows fits, the other half is predicted from the fitting rows with the same value (text), or
with the nearest value (numbers: one nearest neighbour, which follows any function of the
column, monotone or not). A leak scores nearly perfectly: AUC (binary), the share of
always-the-majority's errors removed (multiclass), R² (regression). An honest feature,
however strong, stops short: its noise is doubled by the neighbour's.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from components.csv_example_gen.dialect import BYTES
from trainer_module.features import BINARY, REGRESSION

if TYPE_CHECKING:
    import pyarrow as pa

# Held-out scores at or above these mark a leak.
LEAK_MIN_AUC = 0.995
LEAK_MIN_ERROR_CUT = 0.98  # multiclass: share of always-the-majority's errors removed
LEAK_MIN_R2 = 0.98
# Fewer labelled rows than this are too few to call anything a leak.
MIN_ROWS = 40
# The fitting half is drawn with this seed: the same table gets the same verdict.
SPLIT_SEED = 0


@dataclasses.dataclass(frozen=True)
class Target:
    """The label as every column's test reads it, prepared once per table: which rows are
    labelled, which of those fit, and the label as a matrix (the value, the positive class's
    indicator, or one column per class)."""

    task: str
    labelled: pa.ChunkedArray  # boolean, one per row of the table
    fit: np.ndarray  # over the labelled rows
    matrix: np.ndarray  # labelled rows x columns


def target(label: pa.ChunkedArray, task: str) -> Target | None:
    """The label ready for evidence(); None when too few rows are labelled to judge."""
    import pyarrow.compute as pc

    labelled = pc.is_valid(label)
    values = pc.filter(label, labelled).to_numpy()
    fit = np.random.default_rng(SPLIT_SEED).random(len(values)) < 0.5
    if len(values) < MIN_ROWS or fit.all() or not fit.any():
        return None
    if task == REGRESSION:
        matrix = values.astype(np.float64)[:, None]
    else:
        classes = np.unique(values.astype(str), return_inverse=True)[1]
        matrix = (classes == 1).astype(np.float64)[:, None] if task == BINARY else np.eye(int(classes.max()) + 1)[classes]
    return Target(task, labelled, fit, matrix)


def evidence(feature: pa.ChunkedArray, feature_type: str | None, label: Target) -> str | None:
    """Why this column alone gives the label away, or None when it does not."""
    import pyarrow.compute as pc

    feature = pc.filter(feature, label.labelled)
    numeric = feature_type is not None and feature_type != BYTES
    missing = pc.is_null(feature, nan_is_null=True).to_numpy()
    values = pc.fill_null(feature, 0 if numeric else "").to_numpy()
    values = values.astype(np.float64) if numeric else values.astype(str)
    fit, held_out = label.fit, ~label.fit
    predicted = _held_out_means(values, missing, numeric, label.matrix, fit)
    seen = "on rows it did not see"
    if label.task == REGRESSION:
        r2 = _r2(label.matrix[held_out, 0], predicted[:, 0])
        return f"alone it predicts the label with R² {r2:.4f} {seen}" if r2 >= LEAK_MIN_R2 else None
    if label.task == BINARY:
        auc = _auc(predicted[:, 0], label.matrix[held_out, 0] == 1.0)
        return f"alone it predicts the label with AUC {auc:.4f} {seen}" if auc >= LEAK_MIN_AUC else None
    classes = label.matrix.argmax(axis=1)
    majority = int(label.matrix[fit].sum(axis=0).argmax())
    accuracy = float(np.mean(predicted.argmax(axis=1) == classes[held_out]))
    trivial = float(np.mean(classes[held_out] == majority))
    if trivial < 1.0 and (accuracy - trivial) / (1.0 - trivial) >= LEAK_MIN_ERROR_CUT:
        return f"alone it predicts the label with accuracy {accuracy:.4f} {seen} (always the majority: {trivial:.4f})"
    return None


def _held_out_means(values: np.ndarray, missing: np.ndarray, numeric: bool, target: np.ndarray,
                    fit: np.ndarray) -> np.ndarray:
    """For each held-out row, the mean target (rows x columns) of the fitting rows with its
    value (text) or its nearest value (numbers); missing values are one group; a value the
    fitting rows lack, or a group they never saw, gets their overall mean."""
    held_out = ~fit
    predicted = np.tile(target[fit].mean(axis=0), (int(held_out.sum()), 1))
    held_missing = missing[held_out]
    if (fit & missing).any():
        predicted[held_missing] = target[fit & missing].mean(axis=0)
    fitting = fit & ~missing
    if not fitting.any() or held_missing.all():
        return predicted
    keys, inverse = np.unique(values[fitting], return_inverse=True)
    sums = np.zeros((len(keys), target.shape[1]))
    np.add.at(sums, inverse, target[fitting])
    means = sums / np.bincount(inverse, minlength=len(keys))[:, None]
    query = values[held_out & ~missing]
    right = np.clip(np.searchsorted(keys, query), 0, len(keys) - 1)
    if numeric:
        left = np.clip(right - 1, 0, len(keys) - 1)
        nearest = np.where(np.abs(query - keys[left]) <= np.abs(keys[right] - query), left, right)
        predicted[~held_missing] = means[nearest]
    else:
        found = keys[right] == query
        rows = np.flatnonzero(~held_missing)
        predicted[rows[found]] = means[right[found]]
    return predicted


def _r2(actual: np.ndarray, predicted: np.ndarray) -> float:
    total = float(((actual - actual.mean()) ** 2).sum())
    return 1.0 - float(((actual - predicted) ** 2).sum()) / total if total else 0.0


def _auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Mann-Whitney U (ties count half): the chance a positive outscores a negative."""
    positives, negatives = int(positive.sum()), int((~positive).sum())
    if not positives or not negatives:
        return 0.0
    return float((_ranks(scores)[positive].sum() - positives * (positives + 1) / 2.0) / (positives * negatives))


def _ranks(numbers: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their mean rank."""
    _, inverse, counts = np.unique(numbers, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse]
