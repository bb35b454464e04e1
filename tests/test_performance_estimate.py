"""pipeline/scoring/performance_estimate (CBPE): on a model that is over-confident by design,
the calibrated estimate lands on the accuracy the labels give, the raw probabilities do not,
and the one-line verdict reads the estimate against the blessing bound."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.scoring import performance_estimate
from pipeline.scoring.performance_estimate import Estimate

# Three classes in the plane; the true chance of each is the softmax of these logits.
WEIGHTS = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])


def softmax(logits: np.ndarray) -> np.ndarray:
    weights = np.exp(logits - logits.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


def sample(rng: np.random.Generator, rows: int, spread: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Rows' labels, drawn from the true chances, and the model's probabilities: the true
    logits doubled, so the model is over-confident but ranks the classes right."""
    logits = rng.normal(0.0, spread, (rows, 2)) @ WEIGHTS.T
    labels = (rng.random(rows)[:, None] > softmax(logits).cumsum(axis=1)).sum(axis=1)
    return softmax(2 * logits), labels


def expected_accuracy(probabilities: np.ndarray) -> float:
    """The rows' accuracy without the labels' own noise: the true chance of the predicted
    class (the model's logits are the true ones doubled), what CBPE estimates."""
    return float(softmax(np.log(probabilities) / 2).max(axis=1).mean())


def accuracy(probabilities: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(probabilities.argmax(axis=1) == labels))


@pytest.fixture(scope="module")
def calibration():
    return performance_estimate.fit(*sample(np.random.default_rng(1), 5000))  # the eval split


def test_the_estimate_lands_on_a_held_out_slices_accuracy(calibration):
    probabilities, labels = sample(np.random.default_rng(2), 1000)
    estimate = performance_estimate.estimate(calibration, probabilities)
    true = accuracy(probabilities, labels)
    # Measured: 0.788 against 0.773 (12 other seeds: within 0.025, most of it the labels' own
    # Bernoulli noise on 1,000 rows, sd 0.013); the raw top probability says 0.882.
    assert abs(estimate.accuracy - true) < 0.03
    assert abs(estimate.accuracy - expected_accuracy(probabilities)) < 0.015  # measured 0.008
    assert abs(float(probabilities.max(axis=1).mean()) - true) > 0.08  # calibration is what does it
    assert estimate.rows == 1000
    # The margin (measured 0.025) holds the truth; mostly the Bernoulli spread of 1,000 rows.
    assert abs(estimate.accuracy - true) <= estimate.margin < 0.04


def test_the_estimate_follows_a_shift_to_where_the_model_is_less_sure(calibration):
    """A covariate shift towards the middle, where all three classes are close: the model
    is less confident and less accurate there, and the estimate follows."""
    rng = np.random.default_rng(3)
    eval_probabilities, eval_labels = sample(rng, 5000)
    probabilities, labels = sample(rng, 2000, spread=0.5)
    estimate = performance_estimate.estimate(calibration, probabilities)
    true = accuracy(probabilities, labels)
    # Measured: 0.638 against 0.631 (12 other seeds: within 0.028), the eval split's 0.78;
    # raw top probability 0.775.
    assert probabilities.max(axis=1).mean() < eval_probabilities.max(axis=1).mean() - 0.05
    assert true < accuracy(eval_probabilities, eval_labels) - 0.1
    assert abs(estimate.accuracy - true) < 0.03
    # Without the labels' noise: 0.006 off (12 other seeds: 0.013 at most). Isotonic alone on
    # the raw top probability: 0.025 off here, 0.019 on average, as the middle's three-way
    # ties are rarer in the eval split than its two-way ones at the same confidence.
    assert abs(estimate.accuracy - expected_accuracy(probabilities)) < 0.015
    assert abs(float(probabilities.max(axis=1).mean()) - true) > 0.08


def test_a_small_eval_split_widens_the_margin():
    rng = np.random.default_rng(4)
    probabilities, _ = sample(rng, 1000)
    small = performance_estimate.estimate(performance_estimate.fit(*sample(rng, 300)), probabilities)
    large = performance_estimate.estimate(performance_estimate.fit(*sample(rng, 20000)), probabilities)
    assert small.margin > 1.2 * large.margin


def test_two_classes_may_come_as_the_positive_class_probability():
    """A miscalibration no temperature fixes (the positive class's chance raised to the
    power 0.4: over-confident one way only); the isotonic step takes the rest."""
    rng = np.random.default_rng(5)
    truth = 1 / (1 + np.exp(-rng.normal(0.0, 2.0, 4000)))
    labels = (rng.random(4000) < truth).astype(int)
    positive = truth**0.4
    calibration = performance_estimate.fit(positive[:3000], labels[:3000])
    estimate = performance_estimate.estimate(calibration, positive[3000:])
    predicted = positive[3000:] > 0.5
    assert abs(estimate.accuracy - float(np.mean(predicted == labels[3000:]))) < 0.03
    # Measured: 0.697 against 0.689 (12 seeds: 0.015 at most); the temperature alone: 0.711.
    expected = float(np.mean(np.where(predicted, truth[3000:], 1 - truth[3000:])))
    assert abs(estimate.accuracy - expected) < 0.015


@pytest.mark.parametrize("estimate, bound, line", [
    (Estimate(0.81, 0.02, 1000), 0.70, "accuracy estimated 0.81 ± 0.02; blessing bound 0.70: still passes"),
    (Estimate(0.64, 0.03, 1000), 0.70, "accuracy estimated 0.64 ± 0.03; blessing bound 0.70: below the bound"),
    (Estimate(0.71, 0.03, 1000), 0.70,
     "accuracy estimated 0.71 ± 0.03; blessing bound 0.70: the bound is within the margin"),
    (Estimate(0.9212, 0.0031, 90000), 0.9, "accuracy estimated 0.921 ± 0.003; blessing bound 0.900: still passes"),
])
def test_the_verdict_line(estimate, bound, line):
    assert performance_estimate.verdict(estimate, bound) == line


def test_no_margin_is_narrower_than_its_row_counts_allow():
    """Every eval row right at near certainty: both variances are 0, yet 67 rows cannot pin
    accuracy to 1.000, nor can a batch of 2. The floors are the 95 % Wilson half-widths at
    accuracy 1: z^2 / (2n) / (1 + z^2 / n) with z = 1.96 (0.0271 at 67 rows, 0.329 at 2)."""
    certain = np.tile([[0.999, 0.001]], (67, 1))
    calibration = performance_estimate.fit(certain, np.zeros(67, dtype=int))
    many = performance_estimate.estimate(calibration, np.tile([[0.999, 0.001]], (5000, 1)))
    assert many.accuracy == 1.0 and many.margin == pytest.approx(0.0271, abs=5e-4)
    two = performance_estimate.estimate(calibration, certain[:2])
    assert two.margin == pytest.approx(0.329, abs=5e-4)
