"""What the run report shows of a model beyond TFMA's metrics, computed once per run by the
Evaluator on the eval split through the model's served signature: ROC and PR curves and a
calibration table (classifiers), residuals (regression), and permutation importance (how
much worse the blessing metric gets when one feature's values are shuffled across rows).

The labels come from the model's own transform_features signature, as TFMA reads them, so
class ids mean what the model's outputs mean."""

from __future__ import annotations

import glob
import math
import os
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from components.reporting_evaluator.keys import HIGHER_IS_BETTER
from serving import forest_ops
from serving.contract import (
    EXAMPLES_INPUT,
    OUTPUT_PREDICTION,
    OUTPUT_PROBABILITIES,
    SERVING_DEFAULT,
    TRANSFORM_FEATURES,
)
from trainer_module.features import identifier

# Rows of the eval split used: all up to this, for the curves and the importance.
MAX_ROWS = 5000
# The importance predicts the rows once per feature: with many features, fewer rows.
IMPORTANCE_PREDICTIONS = 400_000
MIN_IMPORTANCE_ROWS = 200
# Points kept per curve, and bins of the calibration table and the residual histogram.
CURVE_POINTS = 101
CALIBRATION_BINS = 10
RESIDUAL_BINS = 20
SCATTER_POINTS = 400
# The most classes a multiclass model gets a one-against-the-rest ROC and PR curve for.
CURVE_CLASSES = 10
PREDICT_BATCH = 1024
SEED = 0


def compute(model_dir: str, examples_dir: str, label_key: str, task: str, metric: str,
            class_names: list[str] | None) -> dict[str, Any]:
    """The insights of one model on one split's examples (gzipped TFRecords of tf.Example).
    label_key: the transformed label (the eval config's); task: binary, multiclass or
    regression; metric: the blessing metric (accuracy, auc, rmse or mae)."""
    rows = _read_examples(examples_dir, MAX_ROWS)
    model = forest_ops.load(model_dir)
    labels = _labels(model, rows, label_key)
    predict = _predictor(model, task)
    outputs = predict(rows)
    found: dict[str, Any] = {"rows": len(rows), "task": task, "metric": metric}
    if task == "regression":
        found.update(residuals(labels, outputs))
    else:
        found.update(classifier_curves(labels, outputs, class_names or [str(i) for i in range(outputs.shape[1])]))
    found["importance"] = permutation_importance(rows, labels, predict, metric, label_key, outputs)
    return found


def _read_examples(examples_dir: str, limit: int) -> list[bytes]:
    files = sorted(glob.glob(os.path.join(examples_dir, "*")))
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)
    return [record.numpy() for record in dataset]


def _labels(model: Any, rows: list[bytes], label_key: str) -> np.ndarray:
    transform = model.signatures[TRANSFORM_FEATURES]
    parts = [transform(**{EXAMPLES_INPUT: tf.constant(rows[i:i + PREDICT_BATCH])})[label_key].numpy()
             for i in range(0, len(rows), PREDICT_BATCH)]
    return np.concatenate(parts).reshape(-1)


def _predictor(model: Any, task: str) -> Callable[[list[bytes]], np.ndarray]:
    serve = model.signatures[SERVING_DEFAULT]
    output = OUTPUT_PREDICTION if task == "regression" else OUTPUT_PROBABILITIES

    def predict(rows: list[bytes]) -> np.ndarray:
        parts = [serve(**{EXAMPLES_INPUT: tf.constant(rows[i:i + PREDICT_BATCH])})[output].numpy()
                 for i in range(0, len(rows), PREDICT_BATCH)]
        values = np.concatenate(parts).astype(np.float64)
        if task == "regression":
            return values.reshape(-1)
        # A one-column binary output is the positive class's probability.
        return np.column_stack([1 - values[:, 0], values[:, 0]]) if values.shape[1] == 1 else values

    return predict


# --- classifiers --------------------------------------------------------------------------


def classifier_curves(labels: np.ndarray, probabilities: np.ndarray, class_names: list[str]) -> dict[str, Any]:
    """ROC and PR curves (binary: of the positive class, id 1; multiclass: each class against
    the rest, the most frequent first) and the calibration of the top class's probability."""
    labels = labels.astype(np.int64)
    classes = [1] if probabilities.shape[1] == 2 else [int(c) for c in np.argsort(-np.bincount(
        labels, minlength=probabilities.shape[1]))[:CURVE_CLASSES]]
    roc, pr = {}, {}
    for class_id in classes:
        positive = labels == class_id
        if positive.all() or not positive.any():
            continue  # a curve needs rows of both kinds
        name = class_names[class_id] if class_id < len(class_names) else str(class_id)
        roc[name], pr[name] = _roc_pr(positive, probabilities[:, class_id])
    return {"roc": roc, "pr": pr, "calibration": calibration(labels, probabilities)}


def _roc_pr(positive: np.ndarray, score_: np.ndarray) -> tuple[dict[str, Any], dict[str, Any]]:
    fpr, tpr, tp, fp = _roc_points(positive, score_)
    precision, recall = tp / (tp + fp), tp / positive.sum()
    keep = _thin(len(tpr))
    roc = {"fpr": _rounded(fpr[keep]), "tpr": _rounded(tpr[keep]), "auc": float(np.trapz(tpr, fpr))}
    keep_pr = _thin(len(recall))
    pr = {"recall": _rounded(recall[keep_pr]), "precision": _rounded(precision[keep_pr]),
          "average_precision": float(np.sum(np.diff(np.r_[0.0, recall]) * precision)),
          "positive_share": float(positive.mean())}
    return roc, pr


def _roc_points(positive: np.ndarray, score_: np.ndarray) -> tuple[np.ndarray, ...]:
    """False and true positive rates (from 0) and counts at each distinct score, highest
    first: rows tied on a score are decided together, so the area counts a tie as half."""
    order = np.argsort(-score_, kind="stable")
    hits = positive[order]
    last_of_score = np.r_[np.diff(score_[order]) != 0, True]
    tp, fp = np.cumsum(hits)[last_of_score], np.cumsum(~hits)[last_of_score]
    return np.r_[0.0, fp / (~positive).sum()], np.r_[0.0, tp / positive.sum()], tp, fp


def calibration(labels: np.ndarray, probabilities: np.ndarray) -> list[dict[str, float]]:
    """Equal-width bins of the predicted probability (binary: of the positive class;
    multiclass: of the predicted class), each with the mean prediction, how often it came
    true, and its rows."""
    if probabilities.shape[1] == 2:
        predicted, happened = probabilities[:, 1], labels == 1
    else:
        predicted, happened = probabilities.max(axis=1), probabilities.argmax(axis=1) == labels
    bins = np.minimum((predicted * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
    table = []
    for number in range(CALIBRATION_BINS):
        inside = bins == number
        if inside.any():
            table.append({"low": number / CALIBRATION_BINS, "high": (number + 1) / CALIBRATION_BINS,
                          "predicted": float(predicted[inside].mean()), "observed": float(happened[inside].mean()),
                          "rows": int(inside.sum())})
    return table


# --- regression ---------------------------------------------------------------------------


def residuals(labels: np.ndarray, predictions: np.ndarray) -> dict[str, Any]:
    """The residuals (prediction - label) as a histogram, and label against prediction for
    up to SCATTER_POINTS rows."""
    errors = predictions - labels
    counts, edges = np.histogram(errors, bins=RESIDUAL_BINS)
    chosen = np.random.default_rng(SEED).permutation(len(labels))[:SCATTER_POINTS]
    return {"residuals": {"edges": _rounded(edges), "counts": [int(c) for c in counts],
                          "mean": float(errors.mean()), "std": float(errors.std())},
            "scatter": {"label": _rounded(labels[chosen]), "prediction": _rounded(predictions[chosen])}}


# --- permutation importance ---------------------------------------------------------------


def permutation_importance(rows: list[bytes], labels: np.ndarray, predict: Callable[[list[bytes]], np.ndarray],
                           metric: str, label_key: str, outputs: np.ndarray) -> list[dict[str, Any]]:
    """Per raw feature, how much worse the metric gets with that feature's values shuffled
    across the rows (one seeded shuffle; positive: the model leans on it), most important first."""
    parsed = [tf.train.Example.FromString(row) for row in rows]
    names = sorted({name for example in parsed for name in example.features.feature})
    label_raw = [name for name in names if f"{identifier(name)}_xf" == label_key]
    features = [name for name in names if name not in label_raw]
    count = max(MIN_IMPORTANCE_ROWS, IMPORTANCE_PREDICTIONS // max(len(features), 1))
    parsed, labels, outputs = parsed[:count], labels[:count], outputs[:count]
    base = score(metric, labels, outputs)
    if not math.isfinite(base):  # e.g. an AUC on rows of one class: no drop to measure
        return []
    rng = np.random.default_rng(SEED)
    found = []
    for name in features:
        order = rng.permutation(len(parsed))
        values = [_feature_or_none(example, name) for example in parsed]
        shuffled = []
        for example, source in zip(parsed, order):
            copy = tf.train.Example()
            copy.CopyFrom(example)
            if values[source] is None:
                if name in copy.features.feature:  # a row without it stays without it
                    del copy.features.feature[name]
            else:
                copy.features.feature[name].CopyFrom(values[source])
            shuffled.append(copy.SerializeToString())
        worse = score(metric, labels, predict(shuffled))
        drop = base - worse if HIGHER_IS_BETTER[metric] else worse - base
        found.append({"feature": name, "drop": round(float(drop), 6)})
    found.sort(key=lambda item: -item["drop"])
    return found


def _feature_or_none(example: tf.train.Example, name: str) -> tf.train.Feature | None:
    return example.features.feature[name] if name in example.features.feature else None


def score(metric: str, labels: np.ndarray, outputs: np.ndarray) -> float:
    """The blessing metric of outputs (probabilities, or predictions) against labels."""
    if metric == "rmse":
        return float(np.sqrt(np.mean((outputs - labels) ** 2)))
    if metric == "mae":
        return float(np.mean(np.abs(outputs - labels)))
    labels = labels.astype(np.int64)
    if metric == "accuracy":
        return float(np.mean(outputs.argmax(axis=1) == labels))
    return _auc(labels == 1, outputs[:, 1])


def _auc(positive: np.ndarray, score_: np.ndarray) -> float:
    if positive.all() or not positive.any():
        return float("nan")
    fpr, tpr, _, _ = _roc_points(positive, score_)
    return float(np.trapz(tpr, fpr))


def _thin(length: int) -> np.ndarray:
    """Indices of at most CURVE_POINTS points along a curve, its ends kept."""
    if length <= CURVE_POINTS:
        return np.arange(length)
    return np.unique(np.linspace(0, length - 1, CURVE_POINTS).round().astype(int))


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 6) for v in values]
