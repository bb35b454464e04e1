"""Confidence-based performance estimation (CBPE) for `turbotfx drift`: the accuracy a
classifier should have on an unlabelled batch, read off the served model's probabilities once
they are calibrated on the eval split (where the labels are known). It holds while the
batch's shift is in the inputs only (the chance of a label given the inputs unchanged); a
shift in that chance itself shows in no probability and needs labels to see."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Refits of the calibration on resamples of the eval split: their spread over the batch is
# the calibration's own uncertainty, which grows where the batch sits in confidences that
# the eval split has few rows of.
CALIBRATION_DRAWS = 100
# Two-sided 95 % of a normal: the estimate is a mean of many rows.
Z_95 = 1.96


@dataclass(frozen=True)
class Calibration:
    """A temperature for the whole probability vector, then P(the top class is right) against
    the tempered top probability: isotonic, as points joined linearly and flat beyond the
    ends (how scikit-learn's IsotonicRegression predicts), the first curve fitted on the
    whole eval split, the others on resamples of it."""

    temperature: float
    curves: tuple[tuple[np.ndarray, np.ndarray], ...]
    rows: int  # the eval split's


@dataclass(frozen=True)
class Estimate:
    accuracy: float
    margin: float  # about 95 %: accuracy +- margin
    rows: int


def fit(probabilities: np.ndarray, labels: np.ndarray, seed: int = 0,
        draws: int = CALIBRATION_DRAWS) -> Calibration:
    """Calibrate on the eval split: probabilities [rows, classes] (or [rows], the positive
    class's of two), labels the true class indices. First a temperature (Guo et al. 2017):
    one parameter over the whole probability vector, pinned down by thousands of rows, so
    the tempered confidence stays right in regions where the classes compete differently
    than on average (isotonic on the raw top probability alone was 0.02 off under the
    covariate shift of tests/test_performance_estimate.py); then isotonic regression of
    correctness on the tempered top probability for what one parameter cannot bend."""
    from sklearn.isotonic import IsotonicRegression

    probabilities, labels = _two_dimensional(probabilities), np.asarray(labels)
    temperature = _temperature(probabilities, labels)
    confidence = _tempered(probabilities, temperature).max(axis=1)
    correct = (probabilities.argmax(axis=1) == labels).astype(float)
    rng = np.random.default_rng(seed)
    curves = []
    for draw in range(draws + 1):
        rows = np.arange(confidence.size) if draw == 0 else rng.integers(0, confidence.size, confidence.size)
        model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(confidence[rows], correct[rows])
        curves.append((np.asarray(model.X_thresholds_, dtype=float), np.asarray(model.y_thresholds_, dtype=float)))
    return Calibration(temperature=temperature, curves=tuple(curves), rows=int(confidence.size))


def estimate(calibration: Calibration, probabilities: np.ndarray) -> Estimate:
    """The batch's expected accuracy: the mean calibrated chance that each row's top class is right."""
    confidence = _tempered(_two_dimensional(probabilities), calibration.temperature).max(axis=1)
    rows = int(confidence.size)
    if not rows:
        return Estimate(accuracy=float("nan"), margin=float("nan"), rows=0)
    chance = np.interp(confidence, *calibration.curves[0])
    # Two sources of error, independent, their variances added: even a perfect calibration
    # leaves the batch's realized accuracy a sum of Bernoulli trials (variance
    # sum c(1 - c) / n^2), and the calibration itself was fitted on a finite eval split (the
    # variance of the batch's mean over the refits on its resamples).
    sampling = float(np.sum(chance * (1 - chance))) / rows**2
    refits = [float(np.mean(np.interp(confidence, x, y))) for x, y in calibration.curves[1:]]
    fitting = float(np.var(refits)) if refits else 0.0
    accuracy = float(np.mean(chance))
    # Where every calibrating row (or every batch row) sits at certainty, both variances are
    # 0, yet 67 eval rows all right or a batch of 2 rows cannot pin accuracy to 1.000: no
    # margin is narrower than the Wilson interval's at that accuracy and row count.
    floor = max(_wilson_half_width(accuracy, rows), _wilson_half_width(accuracy, calibration.rows))
    return Estimate(accuracy=accuracy, margin=max(Z_95 * float(np.sqrt(sampling + fitting)), floor), rows=rows)


def _wilson_half_width(share: float, rows: int) -> float:
    """Half the width of the 95 % Wilson score interval of a proportion seen in `rows` rows."""
    z2 = Z_95**2
    return float(Z_95 * np.sqrt(share * (1 - share) / rows + z2 / (4 * rows**2)) / (1 + z2 / rows))


def verdict(result: Estimate, bound: float, metric_name: str = "accuracy") -> str:
    """One line: the estimate, the blessing bound, and whether the batch still passes it."""
    low, high = result.accuracy - result.margin, result.accuracy + result.margin
    if low >= bound:
        outcome = "still passes"
    elif high < bound:
        outcome = "below the bound"
    else:
        outcome = "the bound is within the margin"
    digits = 2 if result.margin >= 0.005 else 3  # so that a narrow margin does not print as 0.00
    return (f"{metric_name} estimated {result.accuracy:.{digits}f} ± {result.margin:.{digits}f}; "
            f"blessing bound {bound:.{digits}f}: {outcome}")


def _two_dimensional(probabilities: np.ndarray) -> np.ndarray:
    array = np.asarray(probabilities, dtype=float)
    return np.column_stack([1 - array, array]) if array.ndim == 1 else array


def _tempered(probabilities: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log p / T): the argmax kept, the confidence flattened (T > 1) or sharpened."""
    logits = np.log(np.clip(probabilities, 1e-12, 1.0)) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    weights = np.exp(logits)
    return weights / weights.sum(axis=1, keepdims=True)


def _temperature(probabilities: np.ndarray, labels: np.ndarray) -> float:
    """The temperature of least log loss on the eval split (Guo et al. 2017, temperature scaling)."""
    from scipy.optimize import minimize_scalar

    def log_loss(log_temperature: float) -> float:
        tempered = _tempered(probabilities, float(np.exp(log_temperature)))
        return -float(np.mean(np.log(np.clip(tempered[np.arange(labels.size), labels], 1e-12, None))))

    return float(np.exp(minimize_scalar(log_loss, bounds=(-3.0, 3.0), method="bounded").x))
