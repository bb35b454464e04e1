"""The scoring half of benchmarks/quality_bench.py: a run's own splits read back from
ExampleGen's output, the scikit-learn baselines fitted on its train split, the metrics, and
how a table's result compares with the best baseline.

Kept apart from the runs so that tests/test_quality_bench.py can hold these pieces to
hand-computed numbers without running a pipeline.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
# The metric a table is judged on, per task (issue 26), and whether more is better.
PRIMARY = {BINARY: "auc", MULTICLASS: "accuracy", REGRESSION: "rmse"}
HIGHER_IS_BETTER = {"auc": True, "accuracy": True, "rmse": False}
# "Within reach" of the best baseline (issue 26's targets): AUC/accuracy at most 0.01 below
# it, RMSE at most 5 % above it.
SCORE_SLACK = 0.01
RMSE_FACTOR = 1.05
BASELINES = ("hgb", "linear")  # the fitted ones; "trivial" is reported beside them


# --- a run's splits, as ExampleGen wrote them --------------------------------------------

def split_files(examples_uri: Path, split: str) -> list[str]:
    """The gzipped TFRecord files of one split of an Examples artifact."""
    files = sorted(str(path) for path in (Path(examples_uri) / f"Split-{split}").glob("*.gz"))
    if not files:
        raise FileNotFoundError(f"no Split-{split}/*.gz under {examples_uri}")
    return files


def _value(feature: Any) -> Any:
    """A feature's one value (ExampleGen writes at most one per cell), None when empty."""
    kind = feature.WhichOneof("kind")
    values = getattr(feature, kind).value if kind else []
    if not values:
        return None
    value = values[0]
    return value.decode("utf-8") if isinstance(value, bytes) else value


def read_split(examples_uri: Path, split: str) -> tuple[pd.DataFrame, list[bytes]]:
    """One split's rows as a DataFrame (a column per feature, None where the cell was empty)
    and the serialized tf.Examples in the same order, for the model's serving_default."""
    import tensorflow as tf

    records = [r.numpy() for r in tf.data.TFRecordDataset(split_files(examples_uri, split),
                                                          compression_type="GZIP")]
    rows = []
    for record in records:
        example = tf.train.Example.FromString(record)
        rows.append({name: _value(feature) for name, feature in example.features.feature.items()})
    return pd.DataFrame(rows), records


def is_numeric(column: pd.Series) -> bool:
    """Whether a column read back from the Examples holds numbers (ints or floats, the
    empty cells None) rather than text: the baselines take numbers as numbers."""
    if pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_numeric_dtype(column):
        return True
    values = column.dropna()
    return bool(len(values)) and all(isinstance(v, (int, float, np.number)) for v in values)


def minority(label: pd.Series) -> str:
    """The rarer class, as text: the positive class when the dataset file names none."""
    return str(label.astype(str).value_counts().index[-1])


# --- metrics ---------------------------------------------------------------------------

def rmse(truth: Sequence[float], predicted: Sequence[float]) -> float:
    errors = np.asarray(truth, dtype=float) - np.asarray(predicted, dtype=float)
    return float(math.sqrt(np.mean(errors ** 2)))


def accuracy(truth: Sequence[Any], predicted: Sequence[Any]) -> float:
    return float(np.mean([str(t) == str(p) for t, p in zip(truth, predicted)]))


def auc(truth: Sequence[Any], positive_score: Sequence[float], positive: str) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score([str(t) == positive for t in truth], positive_score))


def scores(task: str, truth: Sequence[Any], predicted: Sequence[Any],
           positive_score: Sequence[float] | None = None, positive: str | None = None) -> dict[str, float]:
    """The task's metrics: binary auc + accuracy, multiclass accuracy, regression rmse.
    Class labels compare as text (a label read as 1 and a class named "1" are one class)."""
    if task == REGRESSION:
        return {"rmse": rmse(truth, predicted)}
    found = {"accuracy": accuracy(truth, predicted)}
    if task == BINARY:
        assert positive_score is not None and positive is not None
        found["auc"] = auc(truth, positive_score, positive)
    return found


def trivial_scores(task: str, train_label: Sequence[Any], eval_label: Sequence[Any]) -> dict[str, float]:
    """What a model that ignores the features scores: the train mean (regression), the
    train's majority class (accuracy), a constant score (AUC 0.5)."""
    if task == REGRESSION:
        return {"rmse": rmse(eval_label, [float(np.mean(np.asarray(train_label, dtype=float)))] * len(eval_label))}
    majority = pd.Series([str(v) for v in train_label]).value_counts().index[0]
    found = {"accuracy": accuracy(eval_label, [majority] * len(eval_label))}
    if task == BINARY:
        found["auc"] = 0.5
    return found


# --- how a table's result compares -----------------------------------------------------

def best_baseline(metric: str, baselines: Mapping[str, float]) -> tuple[str, float]:
    """The best of the fitted baselines (HGB, linear) on the metric: (name, value)."""
    pick = max if HIGHER_IS_BETTER[metric] else min
    name = pick(BASELINES, key=lambda n: baselines[n])
    return name, baselines[name]


def compare(metric: str, ours: float, best: float) -> dict[str, Any]:
    """ratio ours / best; gap: how far ours is short of best in the metric's terms (score:
    best − ours; RMSE: ours / best − 1), negative when ours is better; within: issue 26's
    target."""
    if HIGHER_IS_BETTER[metric]:
        gap = best - ours
        within = ours >= best - SCORE_SLACK - 1e-12
    else:
        gap = ours / best - 1
        within = ours <= RMSE_FACTOR * best + 1e-12
    return {"ratio": ours / best, "gap": gap, "within": bool(within)}


def below_trivial(ours: Mapping[str, float], trivial: Mapping[str, float]) -> list[str]:
    """The metrics on which ours is worse than the trivial baseline (for a binary table,
    accuracy as well as AUC: issue 26's Caravan scored below always-"No")."""
    return [m for m in ours if (ours[m] < trivial[m] if HIGHER_IS_BETTER[m] else ours[m] > trivial[m])]


def slack(metric: str) -> float:
    """The gap the target allows on a metric (0.01 of a score, 5 % of an RMSE)."""
    return SCORE_SLACK if HIGHER_IS_BETTER[metric] else RMSE_FACTOR - 1


def summarize(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Over tables (each with metric, gap, within, below_trivial): how many are within reach,
    how many score below their trivial baseline, and the
    worst gap measured in multiples of what its metric allows (so an AUC gap of 0.03 and an
    RMSE gap of 15 % both count as three allowances)."""
    worst = max(results, key=lambda t: results[t]["gap"] / slack(results[t]["metric"]), default=None)
    return {
        "tables_within": sum(1 for r in results.values() if r["within"]),
        "tables_scored": len(results),
        "tables_below_trivial": sum(1 for r in results.values() if r["below_trivial"]),
        "worst_gap": None if worst is None else {
            "table": worst, "metric": results[worst]["metric"], "gap": round(results[worst]["gap"], 4),
            "allowances": round(results[worst]["gap"] / slack(results[worst]["metric"]), 2)},
    }


# --- the scikit-learn baselines --------------------------------------------------------

def _features(numeric: Sequence[str], categorical: Sequence[str], scale: bool) -> Any:
    """Imputation for both; numbers standard-scaled (linear) or as they are (trees);
    categories one-hot (linear) or ordinal codes marked categorical (trees)."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer, OneHotEncoder, OrdinalEncoder, StandardScaler

    as_text = FunctionTransformer(lambda frame: frame.astype(object).where(frame.notna(), "").astype(str))
    if scale:
        numbers = make_pipeline(SimpleImputer(strategy="median"), StandardScaler())
        categories = make_pipeline(as_text, OneHotEncoder(handle_unknown="ignore"))
    else:
        numbers = "passthrough"  # HGB handles missing values itself
        # An unseen category becomes missing; at most 255 codes, the rarest pooled (HGB's bins).
        categories = make_pipeline(as_text, OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan,
                                                           max_categories=255))
    return ColumnTransformer([("num", numbers, list(numeric)), ("cat", categories, list(categorical))])


def fit_baselines(task: str, train: pd.DataFrame, label: str, numeric: Sequence[str],
                  categorical: Sequence[str]) -> dict[str, Any]:
    """HistGradientBoosting and a linear model (logistic regression / ridge), each with its
    preprocessing, fitted on the train split with scikit-learn's defaults."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline

    x = train[list(numeric) + list(categorical)].astype({c: float for c in numeric})
    mask = [False] * len(numeric) + [True] * len(categorical)
    if task == REGRESSION:
        y = train[label].astype(float)
        models = {"hgb": make_pipeline(_features(numeric, categorical, False),
                                       HistGradientBoostingRegressor(categorical_features=mask, random_state=0)),
                  "linear": make_pipeline(_features(numeric, categorical, True), Ridge())}
    else:
        y = train[label].astype(str)
        models = {"hgb": make_pipeline(_features(numeric, categorical, False),
                                       HistGradientBoostingClassifier(categorical_features=mask, random_state=0)),
                  "linear": make_pipeline(_features(numeric, categorical, True), LogisticRegression(max_iter=2000))}
    return {name: model.fit(x, y) for name, model in models.items()}


def baseline_scores(task: str, model: Any, frame: pd.DataFrame, label: str, numeric: Sequence[str],
                    categorical: Sequence[str], positive: str | None) -> dict[str, float]:
    x = frame[list(numeric) + list(categorical)].astype({c: float for c in numeric})
    predicted = model.predict(x)
    positive_score = None
    if task == BINARY:
        positive_score = model.predict_proba(x)[:, list(model.classes_).index(positive)]
    return scores(task, frame[label].tolist(), predicted.tolist(), positive_score, positive)
