"""The report's insights (components/reporting_evaluator/insights.py) on hand-made inputs.

Pinned down, with expectations from hand arithmetic or scikit-learn, never from the module:
- permutation importance: its sign follows the metric's direction (HIGHER_IS_BETTER), so a
  feature the model needs gets a positive drop and ranks first, a feature it ignores gets 0,
  and a feature that misleads it gets a negative drop and ranks last; the drop is the
  metric of what the model answered on the shuffled rows; a shuffle moves whole values
  (absent ones too) between rows; the raw label column is not a feature; the row cap cuts
  labels and outputs alike;
- ROC and PR curves with tied scores: a tie is one point, the AUC counts a tied pair as 1/2,
  and the curves equal scikit-learn's; thinning keeps the ends;
- calibration: equal-width bins [low, high), the last one closed, so p = 1.0 lands in it;
- residuals: prediction - label, population standard deviation, scatter pairs kept together;
- score: each blessing metric;
- compute: examples read from gzipped TFRecords (in file order, up to MAX_ROWS), labels and
  outputs through the two signatures in batches, a one-column binary output as P(class 1).
The fake models read one feature of the serialized tf.Examples, so which feature matters is
known exactly."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest
import tensorflow as tf
from sklearn import metrics as skm

from components.reporting_evaluator import insights
from components.reporting_evaluator.keys import HIGHER_IS_BETTER
from serving.contract import (
    EXAMPLES_INPUT,
    OUTPUT_PREDICTION,
    OUTPUT_PROBABILITIES,
    SERVING_DEFAULT,
    TRANSFORM_FEATURES,
)


def _example(**values):
    """A serialized tf.Example of float features; None leaves the feature out."""
    example = tf.train.Example()
    for name, value in values.items():
        if value is not None:
            example.features.feature[name].float_list.value.append(value)
    return example.SerializeToString()


def _feature(row, name, default=0.0):
    feature = tf.train.Example.FromString(row).features.feature
    return feature[name].float_list.value[0] if name in feature and feature[name].float_list.value else default


class Recorder:
    """A fake model whose answer is f(the row's "x"); it keeps the rows of each call, so a
    test can score the shuffled rows itself."""

    def __init__(self, answer):
        self.answer, self.calls = answer, []

    def __call__(self, rows):
        self.calls.append(list(rows))
        return self.answer(np.array([_feature(row, "x") for row in rows]))

    def shuffled_call(self, name, original):
        """The call whose rows had `name` shuffled: the one where it differs from the original."""
        found = [call for call in self.calls if len(call) == len(original)
                 and [_feature(r, name) for r in call] != [_feature(r, name) for r in original]]
        assert len(found) == 1, f"expected one call with {name} shuffled, got {len(found)}"
        return found[0]


def _regression_rows(n=60, seed=1):
    rng = np.random.default_rng(seed)
    x = np.arange(n, dtype=np.float64)
    noise = rng.normal(size=n)
    # "sale price" is the raw label: label_key "sale_price_xf" (identifier() + "_xf") names it.
    rows = [_example(x=float(a), noise=float(b), **{"sale price": float(a)}) for a, b in zip(x, noise)]
    return rows, x


def _by_feature(found):
    return {item["feature"]: item["drop"] for item in found}


# --- permutation importance ---------------------------------------------------------------


@pytest.mark.parametrize("metric", ["rmse", "mae"])
def test_importance_lower_is_better_metric_ranks_the_used_feature_first(metric):
    assert HIGHER_IS_BETTER[metric] is False
    rows, labels = _regression_rows()
    model = Recorder(lambda x: x)  # predicts the label exactly from "x"; "noise" is ignored
    outputs = model(rows)
    found = insights.permutation_importance(rows, labels, model, metric, "sale_price_xf", outputs)

    assert [item["feature"] for item in found] == ["x", "noise"]  # the label column is no feature
    drops = _by_feature(found)
    # Shuffling x raises the error from 0: the metric got worse, so the drop is positive.
    shuffled = np.array([_feature(r, "x") for r in model.shuffled_call("x", rows)])
    errors = shuffled - labels
    worse = math.sqrt(np.mean(errors ** 2)) if metric == "rmse" else np.mean(np.abs(errors))
    assert worse > 1.0
    assert drops["x"] == pytest.approx(worse - 0.0, abs=1e-6)
    assert drops["noise"] == 0.0
    # The shuffle permutes x's values across rows: none lost, none made up.
    assert sorted(shuffled) == sorted(labels)


@pytest.mark.parametrize("metric", ["rmse", "mae"])
def test_importance_of_a_misleading_feature_is_negative_and_last(metric):
    rows, labels = _regression_rows()
    # Predictions in reverse order of the labels: the worst arrangement of these values
    # (rearrangement inequality), so any other order of x's values makes the error smaller.
    model = Recorder(lambda x: labels.max() - x)
    outputs = model(rows)
    base = insights.score(metric, labels, outputs)
    found = insights.permutation_importance(rows, labels, model, metric, "sale_price_xf", outputs)

    assert [item["feature"] for item in found] == ["noise", "x"]
    shuffled = labels.max() - np.array([_feature(r, "x") for r in model.shuffled_call("x", rows)])
    errors = shuffled - labels
    better = math.sqrt(np.mean(errors ** 2)) if metric == "rmse" else np.mean(np.abs(errors))
    assert better < base
    assert _by_feature(found)["x"] == pytest.approx(better - base, abs=1e-6)
    assert _by_feature(found)["x"] < 0


def _binary_rows(n=60, seed=2):
    rng = np.random.default_rng(seed)
    x = np.round(rng.uniform(0.02, 0.98, size=n), 3)
    labels = (x > 0.5).astype(np.int64)
    rows = [_example(x=float(a), noise=float(b), species=float(c))
            for a, b, c in zip(x, rng.normal(size=n), labels)]
    return rows, labels


def _two_columns(p):
    return np.column_stack([1 - p, p])


@pytest.mark.parametrize("metric", ["accuracy", "auc"])
def test_importance_higher_is_better_metric_ranks_the_used_feature_first(metric):
    assert HIGHER_IS_BETTER[metric] is True
    rows, labels = _binary_rows()
    model = Recorder(_two_columns)  # P(class 1) = x: right on every row
    outputs = model(rows)
    found = insights.permutation_importance(rows, labels, model, metric, "species_xf", outputs)

    assert [item["feature"] for item in found] == ["x", "noise"]
    p = np.array([_feature(r, "x") for r in model.shuffled_call("x", rows)])
    # The score falls from 1 with x shuffled: the drop is what was lost, positive.
    if metric == "accuracy":
        worse = skm.accuracy_score(labels, (p > 0.5).astype(int))
    else:
        worse = skm.roc_auc_score(labels, p)
    assert worse < 0.9
    drops = _by_feature(found)
    assert drops["x"] == pytest.approx(1.0 - worse, abs=1e-6)
    assert drops["noise"] == 0.0


def test_importance_shuffle_moves_absent_values_too(monkeypatch):
    # A fixed shuffle (the two rows swapped) instead of the seeded one, to know where each
    # value goes: row 0 gets row 1's absent x (x removed), row 1 gets row 0's x.
    class Swap:
        def __init__(self, seed):
            pass

        def permutation(self, n):
            return np.arange(n)[::-1]

    monkeypatch.setattr(insights.np.random, "default_rng", Swap)
    rows = [_example(x=0.25, noise=1.0), _example(x=None, noise=2.0)]
    labels = np.array([0.25, 0.0])
    model = Recorder(lambda x: x)
    found = insights.permutation_importance(rows, labels, model, "mae", "y_xf", model(rows))

    swapped = model.shuffled_call("x", rows)
    parsed = [tf.train.Example.FromString(r).features.feature for r in swapped]
    assert "x" not in parsed[0] and parsed[1]["x"].float_list.value == [0.25]
    assert [f["noise"].float_list.value[0] for f in parsed] == [1.0, 2.0]  # the other feature stays
    # Predictions (0, 0.25) against labels (0.25, 0): mae from 0 to 0.25.
    assert _by_feature(found) == {"x": 0.25, "noise": 0.0}


def test_importance_feature_absent_in_most_rows():
    # x is absent from 4 of 5 rows: every shuffle gives some row without x the absent
    # value of another (or its own), which must leave the row as it is.
    rows = [_example(x=1.0 if i == 0 else None, noise=float(i)) for i in range(5)]
    labels = np.array([1.0, 0, 0, 0, 0])
    model = Recorder(lambda x: x)
    found = insights.permutation_importance(rows, labels, model, "mae", "y_xf", model(rows))
    assert _by_feature(found)["noise"] == 0.0


def test_importance_of_an_undefined_metric_is_left_out():
    # An AUC on rows of one class has no value, so neither has any drop: no importance, and
    # the rest of the insights (curves, calibration) can still be recorded as JSON.
    rows = [_example(x=float(i), noise=1.0) for i in range(6)]
    model = Recorder(lambda x: np.stack([1 - x / 10, x / 10], axis=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = insights.permutation_importance(rows, np.ones(6), model, "auc", "y_xf", model(rows))
    assert found == []
    assert len(model.calls) == 1  # nothing predicted for a shuffle


def test_importance_row_cap_cuts_labels_and_outputs_alike(monkeypatch):
    # 2 features and room for 20 predictions: 10 rows each, however many are given.
    monkeypatch.setattr(insights, "IMPORTANCE_PREDICTIONS", 20)
    monkeypatch.setattr(insights, "MIN_IMPORTANCE_ROWS", 4)
    rows, labels = _regression_rows(n=30)
    model = Recorder(lambda x: x)
    outputs = model(rows)
    # A model wrong on the rows past the cap only: the base error counts the first 10 rows.
    outputs[10:] += 100.0
    found = insights.permutation_importance(rows, labels, model, "mae", "sale_price_xf", outputs)

    assert [len(call) for call in model.calls[1:]] == [10, 10]
    shuffled = np.array([_feature(r, "x") for r in model.shuffled_call("x", rows[:10])])
    assert _by_feature(found)["x"] == pytest.approx(np.mean(np.abs(shuffled - labels[:10])), abs=1e-6)


# --- ROC and PR curves --------------------------------------------------------------------


def test_roc_with_tied_scores_by_hand():
    # Scores 0.9 (positive), 0.5 (negative), 0.5 (positive), 0.1 (negative). Thresholds at
    # the distinct scores: >= 0.9 one positive; >= 0.5 two positives and one negative (the
    # tie decided together); >= 0.1 all. Pairs: 3 won, 1 tied (0.5 vs 0.5), 0 lost:
    # AUC = (3 + 1/2) / 4.
    positive = np.array([True, False, True, False])
    scores = np.array([0.9, 0.5, 0.5, 0.1])
    fpr, tpr, tp, fp = insights._roc_points(positive, scores)
    assert list(fpr) == [0.0, 0.0, 0.5, 1.0]
    assert list(tpr) == [0.0, 0.5, 1.0, 1.0]
    assert list(tp) == [1, 2, 2] and list(fp) == [0, 1, 2]
    assert insights._auc(positive, scores) == pytest.approx(0.875)
    assert insights.score("auc", positive.astype(float), _two_columns(scores)) == pytest.approx(0.875)

    found = insights.classifier_curves(positive.astype(np.int64), _two_columns(scores), ["no", "yes"])
    assert set(found["roc"]) == {"yes"}  # binary: the positive class only
    roc, pr = found["roc"]["yes"], found["pr"]["yes"]
    assert roc == {"fpr": [0.0, 0.0, 0.5, 1.0], "tpr": [0.0, 0.5, 1.0, 1.0], "auc": pytest.approx(0.875)}
    # PR at the same thresholds: precision 1/1, 2/3, 2/4 at recall 1/2, 1, 1;
    # average precision = 1/2 * 1 + 1/2 * 2/3.
    assert pr["recall"] == [0.5, 1.0, 1.0]
    assert pr["precision"] == [1.0, round(2 / 3, 6), 0.5]
    assert pr["average_precision"] == pytest.approx(0.5 + 1 / 3)
    assert pr["positive_share"] == 0.5


def test_all_scores_tied_is_the_diagonal():
    positive = np.array([True, False, True, False, False])
    scores = np.full(5, 0.3)
    fpr, tpr, _, _ = insights._roc_points(positive, scores)
    assert list(fpr) == [0.0, 1.0] and list(tpr) == [0.0, 1.0]
    assert insights._auc(positive, scores) == 0.5


def test_curves_match_sklearn_on_many_ties():
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, size=300)
    # Scores on a grid of 0.05 leaning towards the label: many ties within and across classes.
    p = np.clip(np.round((rng.uniform(size=300) + 0.4 * labels) / 1.4 * 20) / 20, 0, 1)
    fpr, tpr, _, _ = insights._roc_points(labels == 1, p)
    sk_fpr, sk_tpr, _ = skm.roc_curve(labels, p, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr)
    np.testing.assert_allclose(tpr, sk_tpr)
    assert len(fpr) == len(np.unique(p)) + 1  # one point per distinct score, plus (0, 0)

    found = insights.classifier_curves(labels, _two_columns(p), ["a", "b"])
    roc, pr = found["roc"]["b"], found["pr"]["b"]
    assert roc["auc"] == pytest.approx(skm.roc_auc_score(labels, p), abs=1e-12)
    assert insights.score("auc", labels, _two_columns(p)) == pytest.approx(skm.roc_auc_score(labels, p), abs=1e-12)
    assert pr["average_precision"] == pytest.approx(skm.average_precision_score(labels, p), abs=1e-12)
    sk_precision, sk_recall, _ = skm.precision_recall_curve(labels, p)
    # sklearn lists thresholds lowest first and ends on (recall 0, precision 1): reversed, without it.
    np.testing.assert_allclose(pr["precision"], sk_precision[::-1][1:], atol=1e-6)
    np.testing.assert_allclose(pr["recall"], sk_recall[::-1][1:], atol=1e-6)


def test_long_curves_are_thinned_keeping_their_ends():
    rng = np.random.default_rng(4)
    labels = rng.integers(0, 2, size=1000)
    p = rng.uniform(size=1000)  # distinct scores: 1001 points
    roc = insights.classifier_curves(labels, _two_columns(p), ["a", "b"])["roc"]["b"]
    assert len(roc["fpr"]) <= insights.CURVE_POINTS
    assert (roc["fpr"][0], roc["tpr"][0]) == (0.0, 0.0) and (roc["fpr"][-1], roc["tpr"][-1]) == (1.0, 1.0)
    # The area is of the whole curve, not the thinned one.
    assert roc["auc"] == pytest.approx(skm.roc_auc_score(labels, p), abs=1e-12)


def test_multiclass_curves_each_class_against_the_rest_most_frequent_first():
    rng = np.random.default_rng(5)
    # Class 2 most frequent, then 0; class 1 never occurs (no curve); 3 classes of outputs.
    labels = np.array([2] * 30 + [0] * 20)
    probabilities = rng.dirichlet(np.ones(3), size=50)
    probabilities[labels == 2, 2] += 0.3
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    found = insights.classifier_curves(labels.astype(np.float32), probabilities, ["Adelie", "Chinstrap", "Gentoo"])
    assert list(found["roc"]) == ["Gentoo", "Adelie"]
    for class_id, name in [(2, "Gentoo"), (0, "Adelie")]:
        expected = skm.roc_auc_score(labels == class_id, probabilities[:, class_id])
        assert found["roc"][name]["auc"] == pytest.approx(expected, abs=1e-12)
        assert found["pr"][name]["positive_share"] == pytest.approx(np.mean(labels == class_id))


@pytest.mark.parametrize("label", [0, 1])
def test_one_class_only_has_no_curve_and_no_auc(label):
    labels = np.full(4, label, dtype=np.int64)
    p = np.array([0.2, 0.4, 0.6, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # undefined, not computed as 0 / 0
        found = insights.classifier_curves(labels, _two_columns(p), ["no", "yes"])
        assert math.isnan(insights.score("auc", labels, _two_columns(p)))
    assert found["roc"] == {} and found["pr"] == {}
    assert sum(row["rows"] for row in found["calibration"]) == 4


# --- calibration --------------------------------------------------------------------------


def test_calibration_bins_include_zero_and_one():
    # Bins [0, .1), [.1, .2), ..., [.9, 1.0]: 0.0 and 0.08 in the first (floor, not
    # nearest), 0.1 (its low edge) and 0.18 in the second, 0.95 and both 1.0 in the last.
    p = np.array([0.0, 0.08, 0.1, 0.18, 0.95, 1.0, 1.0])
    labels = np.array([0, 0, 1, 0, 1, 1, 0])
    table = insights.calibration(labels, _two_columns(p))
    assert [(row["low"], row["high"], row["rows"]) for row in table] == [(0.0, 0.1, 2), (0.1, 0.2, 2), (0.9, 1.0, 3)]
    assert [row["predicted"] for row in table] == pytest.approx([0.04, 0.14, (0.95 + 1 + 1) / 3])
    assert [row["observed"] for row in table] == pytest.approx([0.0, 0.5, 2 / 3])
    assert sum(row["rows"] for row in table) == len(p)  # no row dropped


def test_calibration_every_row_lands_in_its_bin():
    # Probabilities on each bin's edges: k/10 belongs to bin k (bin 9 for 1.0).
    p = np.linspace(0, 1, 11)
    table = insights.calibration(np.zeros(11, dtype=np.int64), _two_columns(p))
    assert [row["rows"] for row in table] == [1] * 9 + [2]
    assert table[-1]["predicted"] == pytest.approx(0.95)


def test_calibration_multiclass_uses_the_predicted_class():
    probabilities = np.array([[1.0, 0.0, 0.0],  # predicts 0 at 1.0, right
                              [0.1, 0.2, 0.7],  # predicts 2 at 0.7, wrong
                              [0.35, 0.45, 0.2]])  # predicts 1 at 0.45, right
    table = insights.calibration(np.array([0, 1, 1]), probabilities)
    assert [(row["low"], row["rows"], row["observed"]) for row in table] == [(0.4, 1, 1.0), (0.7, 1, 0.0), (0.9, 1, 1.0)]
    assert [row["predicted"] for row in table] == pytest.approx([0.45, 0.7, 1.0])


# --- residuals ----------------------------------------------------------------------------


def test_residuals_by_hand():
    labels = np.array([1.0, 2.0, 3.0, 4.0])
    predictions = np.array([1.5, 1.5, 3.0, 6.0])
    found = insights.residuals(labels, predictions)
    hist = found["residuals"]
    # Errors (prediction - label): 0.5, -0.5, 0, 2; mean 0.5; deviations 0, -1, -0.5, 1.5:
    # population variance (0 + 1 + 0.25 + 2.25) / 4.
    assert hist["mean"] == pytest.approx(0.5)
    assert hist["std"] == pytest.approx(math.sqrt(3.5 / 4))
    # 20 bins from -0.5 to 2 of 0.125: -0.5 in bin 0, 0 in bin 4, 0.5 in bin 8, 2 in the last.
    assert len(hist["edges"]) == 21 and hist["edges"][0] == -0.5 and hist["edges"][-1] == 2.0
    expected = [0] * 20
    for b in (0, 4, 8, 19):
        expected[b] = 1
    assert hist["counts"] == expected
    scatter = found["scatter"]
    assert sorted(zip(scatter["label"], scatter["prediction"])) == sorted(zip(labels, predictions))


def test_residual_scatter_keeps_pairs_of_distinct_rows():
    labels = np.arange(1000, dtype=np.float64)
    predictions = labels * 2 + 0.5  # a row's prediction is known from its label
    scatter = insights.residuals(labels, predictions)["scatter"]
    assert len(scatter["label"]) == insights.SCATTER_POINTS == len(set(scatter["label"]))
    assert all(p == 2 * a + 0.5 for a, p in zip(scatter["label"], scatter["prediction"]))


# --- score --------------------------------------------------------------------------------


def test_score_each_metric():
    assert set(HIGHER_IS_BETTER) == {"accuracy", "auc", "rmse", "mae"}
    labels = np.array([1.0, 2.0, 4.0])
    predictions = np.array([2.0, 2.0, 1.0])  # errors 1, 0, -3
    assert insights.score("rmse", labels, predictions) == pytest.approx(math.sqrt(10 / 3))
    assert insights.score("mae", labels, predictions) == pytest.approx(4 / 3)
    assert insights.score("rmse", labels, predictions) == pytest.approx(
        math.sqrt(skm.mean_squared_error(labels, predictions)))
    assert insights.score("mae", labels, predictions) == pytest.approx(skm.mean_absolute_error(labels, predictions))

    # Accuracy: the argmax against the label (float labels, as transform_features gives them).
    probabilities = np.array([[0.2, 0.5, 0.3], [0.6, 0.3, 0.1], [0.1, 0.1, 0.8], [0.4, 0.35, 0.25]])
    assert insights.score("accuracy", np.array([1.0, 0.0, 1.0, 1.0]), probabilities) == 0.5

    # AUC of the positive class's column: positives 0.8, 0.4; negatives 0.6, 0.4, 0.1.
    # Pairs: 0.8 beats all 3, 0.4 beats 0.1, ties 0.4, loses to 0.6: (3 + 1 + 0.5) / 6.
    p = np.array([0.8, 0.4, 0.6, 0.4, 0.1])
    binary = np.array([1, 1, 0, 0, 0])
    assert insights.score("auc", binary, _two_columns(p)) == pytest.approx(4.5 / 6)
    assert insights.score("auc", binary, _two_columns(p)) == pytest.approx(skm.roc_auc_score(binary, p))


# --- compute: examples on disk, a fake saved model ----------------------------------------


class FakeModel:
    """The two signatures compute() calls: transform_features gives the label (the raw
    "target" column), serving_default answers from "x" as `answer` says."""

    def __init__(self, label_key, output, answer):
        def transform(**inputs):
            rows = list(inputs[EXAMPLES_INPUT].numpy())
            return {label_key: tf.constant([[_feature(r, "target")] for r in rows])}

        def serve(**inputs):
            x = np.array([_feature(r, "x") for r in inputs[EXAMPLES_INPUT].numpy()], dtype=np.float32)
            return {output: tf.constant(answer(x))}

        self.signatures = {TRANSFORM_FEATURES: transform, SERVING_DEFAULT: serve}


def _write_examples(folder, rows):
    # Two gzipped files, as ExampleGen writes a split.
    folder.mkdir()
    for number, part in enumerate((rows[:len(rows) // 2], rows[len(rows) // 2:])):
        with tf.io.TFRecordWriter(str(folder / f"data_tfrecord-0000{number}-of-00002.gz"), options="GZIP") as out:
            for row in part:
                out.write(row)
    return str(folder)


def _compute(monkeypatch, tmp_path, rows, model, *args):
    monkeypatch.setattr(insights.forest_ops, "load", lambda model_dir: model)
    monkeypatch.setattr(insights, "PREDICT_BATCH", 7)  # several batches, the last one short
    return insights.compute(str(tmp_path / "model"), _write_examples(tmp_path / "eval", rows), *args)


def test_compute_binary_with_one_probability_column(monkeypatch, tmp_path):
    rng = np.random.default_rng(6)
    x = np.round(rng.uniform(size=40), 2)
    labels = (rng.uniform(size=40) < x).astype(np.int64)  # x predicts the label, not perfectly
    rows = [_example(x=float(a), noise=float(b), target=float(c)) for a, b, c in zip(x, rng.normal(size=40), labels)]
    monkeypatch.setattr(insights, "MAX_ROWS", 30)
    # A one-column binary output is P(class 1).
    model = FakeModel("target_xf", OUTPUT_PROBABILITIES, lambda p: p.reshape(-1, 1))
    found = _compute(monkeypatch, tmp_path, rows, model, "target_xf", "binary", "auc", ["no", "yes"])

    labels, x = labels[:30], x[:30].astype(np.float32).astype(np.float64)  # the first 30 rows, in order
    assert (found["rows"], found["task"], found["metric"]) == (30, "binary", "auc")
    assert list(found["roc"]) == ["yes"]
    assert found["roc"]["yes"]["auc"] == pytest.approx(skm.roc_auc_score(labels, x), abs=1e-12)
    assert sum(row["rows"] for row in found["calibration"]) == 30
    assert [item["feature"] for item in found["importance"]] == ["x", "noise"]
    assert found["importance"][0]["drop"] > 0 and found["importance"][1]["drop"] == 0.0
    json.dumps(found, allow_nan=False)  # as record_insights writes it


def test_compute_regression(monkeypatch, tmp_path):
    x = np.arange(20, dtype=np.float64)
    rows = [_example(x=float(a), noise=float(-a), target=float(a + 1)) for a in x]
    model = FakeModel("target_xf", OUTPUT_PREDICTION, lambda v: v.reshape(-1, 1))  # one column
    found = _compute(monkeypatch, tmp_path, rows, model, "target_xf", "regression", "rmse", None)

    # Every prediction is 1 below its label.
    assert (found["rows"], found["task"]) == (20, "regression")
    assert (found["residuals"]["mean"], found["residuals"]["std"]) == (-1.0, 0.0)
    assert found["scatter"]["prediction"] == [a - 1 for a in found["scatter"]["label"]]
    assert "roc" not in found
    assert found["importance"][0]["feature"] == "x" and found["importance"][0]["drop"] > 0
    json.dumps(found, allow_nan=False)


def test_compute_multiclass_names_classes_by_id_without_names(monkeypatch, tmp_path):
    labels = np.array([0, 0, 1, 2, 2, 2] * 4)  # counts 8, 4, 12
    rows = [_example(x=float(c), target=float(c)) for c in labels]
    model = FakeModel("target_xf", OUTPUT_PROBABILITIES,
                      lambda x: np.eye(3, dtype=np.float32)[x.astype(int)] * 0.8 + 0.2 / 3)
    found = _compute(monkeypatch, tmp_path, rows, model, "target_xf", "multiclass", "accuracy", None)

    assert list(found["roc"]) == ["2", "0", "1"]  # most frequent first
    assert all(curve["auc"] == 1.0 for curve in found["roc"].values())
    # Every row predicted right at 0.8 + 0.2 / 3: one bin.
    assert found["calibration"] == [{"low": 0.8, "high": 0.9, "predicted": pytest.approx(0.8 + 0.2 / 3),
                                     "observed": 1.0, "rows": 24}]
    # The raw label is no feature; accuracy falls from 1 with x shuffled.
    [importance] = found["importance"]
    assert importance["feature"] == "x" and 0 < importance["drop"] <= 1
