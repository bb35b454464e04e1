"""The trivial baseline on hand-built label sets, against numpy and scikit-learn: a constant
learned from the train labels, scored on the eval labels."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.metrics import accuracy_score, mean_absolute_error, mean_squared_error, roc_auc_score

from components.reporting_trainer import keys
from trainer_module import features, yardsticks

NAMES = ["Adelie", "Gentoo", "Chinstrap"]
# Class 1 is the commonest in train, class 0 in eval: the baseline must take train's.
TRAIN_CLASSES = np.array([1, 1, 1, 0, 0, 2, 1, 2])
EVAL_CLASSES = np.array([0, 0, 0, 1, 2, 0])


def dummy_classifier_accuracy(train_labels, eval_labels) -> tuple[float, int]:
    dummy = DummyClassifier(strategy="most_frequent").fit(np.zeros((len(train_labels), 1)), train_labels)
    predicted = dummy.predict(np.zeros((len(eval_labels), 1)))
    return accuracy_score(eval_labels, predicted), int(predicted[0])


def test_accuracy_is_the_train_majority_class_scored_on_eval():
    expected, majority = dummy_classifier_accuracy(TRAIN_CLASSES, EVAL_CLASSES)
    found = yardsticks.trivial_baseline("accuracy", TRAIN_CLASSES, EVAL_CLASSES, NAMES)
    assert found == {"trivial_metric": pytest.approx(expected), "trivial_prediction": NAMES[majority]}
    assert found["trivial_prediction"] == "Gentoo" and expected == pytest.approx(1 / 6)


def test_auc_of_a_constant_is_one_half():
    train_labels, eval_labels = np.array([0, 0, 0, 1]), np.array([1, 0, 1, 1, 0])
    constant = np.full(len(eval_labels), 0.25)  # any constant score
    found = yardsticks.trivial_baseline("auc", train_labels, eval_labels, ["no", "yes"])
    assert found == {"trivial_metric": pytest.approx(roc_auc_score(eval_labels, constant)),
                     "trivial_prediction": "no"}


def test_auc_on_a_one_class_eval_split_is_left_out_with_a_note():
    eval_labels = np.array([1, 1, 1])
    with pytest.raises(ValueError):  # scikit-learn agrees it is undefined
        roc_auc_score(eval_labels, np.full(3, 0.5))
    found = yardsticks.trivial_baseline("auc", np.array([0, 1, 1]), eval_labels, ["no", "yes"])
    assert "trivial_metric" not in found
    assert "one class" in found["trivial_note"] and found["trivial_prediction"] == "yes"


def test_accuracy_on_a_one_class_eval_split_is_still_defined():
    found = yardsticks.trivial_baseline("accuracy", np.array([0, 1, 1]), np.array([0, 0]), ["no", "yes"])
    assert found["trivial_metric"] == 0.0


def test_rmse_is_the_train_mean_scored_on_eval():
    rng = np.random.default_rng(3)
    train_labels, eval_labels = rng.gamma(2.0, 300.0, 97).astype(np.float32), rng.gamma(2.0, 330.0, 31)
    dummy = DummyRegressor(strategy="mean").fit(np.zeros((97, 1)), train_labels)
    expected = np.sqrt(mean_squared_error(eval_labels, dummy.predict(np.zeros((31, 1)))))
    found = yardsticks.trivial_baseline("rmse", train_labels, eval_labels)
    assert found["trivial_metric"] == pytest.approx(expected, rel=1e-5)
    # The mean with 4 significant digits, as text.
    prediction = found["trivial_prediction"]
    assert float(prediction) == pytest.approx(np.mean(train_labels), rel=5e-4)
    assert len(prediction.replace(".", "").lstrip("0")) <= 4


def test_mae_is_the_train_median_scored_on_eval():
    train_labels, eval_labels = np.array([1.0, 2.0, 10.0, 40.0, 3.0]), np.array([0.0, 5.0, 100.0])
    dummy = DummyRegressor(strategy="median").fit(np.zeros((5, 1)), train_labels)
    expected = mean_absolute_error(eval_labels, dummy.predict(np.zeros((3, 1))))
    assert yardsticks.trivial_baseline("mae", train_labels, eval_labels) == {
        "trivial_metric": pytest.approx(expected), "trivial_prediction": "3"}


def test_an_empty_eval_split_has_a_note_not_a_number():
    found = yardsticks.trivial_baseline("rmse", np.array([1.0, 2.0]), np.array([]))
    assert "trivial_metric" not in found and "no rows" in found["trivial_note"]


def test_the_report_entries_are_the_names_the_model_artifact_holds():
    # trainer_module spells its report entries itself (it imports nothing of ours); the
    # executor prefixes each with training_.
    entries = {features.BLESSING_METRIC_KEY: keys.BLESSING_METRIC_NAME, yardsticks.TRAIN_METRIC: keys.TRAIN_METRIC,
               yardsticks.EVAL_METRIC: keys.EVAL_METRIC, yardsticks.TRIVIAL_METRIC: keys.TRIVIAL_METRIC,
               yardsticks.TRIVIAL_PREDICTION: keys.TRIVIAL_PREDICTION, yardsticks.TRIVIAL_NOTE: keys.TRIVIAL_NOTE}
    assert {keys.TRAINING_PREFIX + entry: name for entry, name in entries.items()} == {
        name: name for name in entries.values()}
