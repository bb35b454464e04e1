"""The pieces of benchmarks/quality_bench.py that can be wrong without a pipeline failing:
the split reader returns the rows our ExampleGen wrote, and the metrics and the comparison
with the best baseline give the numbers worked out by hand here."""

from __future__ import annotations

import math
import sys

import pandas as pd
import pytest
from tfx.types import standard_artifacts, standard_component_specs

from components.csv_example_gen import executor
from tests import REPO
from tests.example_gen import csv_properties

sys.path.insert(0, str(REPO / "benchmarks"))
import _quality_score as score  # noqa: E402

CSV = """id,length,island,count
1,39.5,Biscoe,3
2,,Dream,4
3,46.25,,5
4,50.0,Biscoe,
5,41.0,Torgersen,7
6,38.5,Dream,8
"""
# What ExampleGen writes for each row of CSV (floats as float32; these are exact in it).
ROWS = {1: (39.5, "Biscoe", 3), 2: (None, "Dream", 4), 3: (46.25, None, 5), 4: (50.0, "Biscoe", None),
        5: (41.0, "Torgersen", 7), 6: (38.5, "Dream", 8)}


def test_the_split_reader_returns_the_rows_example_gen_wrote(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.csv").write_text(CSV)
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    executor.Executor().Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, csv_properties(data, (2, 1)))
    read, frames = {}, []
    for split in ("train", "eval"):
        frame, records = score.read_split(examples.uri, split)
        assert len(records) == len(frame)
        frames.append(frame)
        for row in frame.to_dict("records"):
            values = tuple(None if isinstance(v, float) and math.isnan(v) else v
                           for v in (row["length"], row["island"], row["count"]))
            read[(split, row["id"])] = values
    assert sorted(key[1] for key in read) == [1, 2, 3, 4, 5, 6]  # each row once, in one split
    assert {key[1]: values for key, values in read.items()} == ROWS
    both = pd.concat(frames)
    assert score.is_numeric(both["id"]) and score.is_numeric(both["length"]) and score.is_numeric(both["count"])
    assert not score.is_numeric(both["island"])


def test_metrics_on_hand_computed_numbers():
    # errors 1, -1, 3, -3: mean square (1 + 1 + 9 + 9) / 4 = 5
    assert score.rmse([1, 2, 3, 4], [0, 3, 0, 7]) == pytest.approx(math.sqrt(5))
    # Of the 2 x 2 (positive, negative) pairs, 3 are ordered right: (0.9 > 0.2), (0.9 > 0.6),
    # (0.4 > 0.2); (0.4 < 0.6) is not: AUC 3 / 4.
    assert score.auc(["y", "n", "y", "n"], [0.9, 0.2, 0.4, 0.6], "y") == pytest.approx(0.75)
    # A label read back as 1 and a class named "1" are one class: 3 of 4 right.
    assert score.accuracy([1, 0, 1, 1], ["1", "0", "0", "1"]) == pytest.approx(0.75)
    # Train majority "a" is right on 2 of 5 eval rows; the train mean 2 misses 1, 2, 3 (mean square 14 / 3).
    assert score.trivial_scores("multiclass", ["a", "a", "b"], ["a", "b", "c", "a", "b"]) == {"accuracy": 0.4}
    assert score.trivial_scores("binary", ["a", "a", "b"], ["b", "a"]) == {"accuracy": 0.5, "auc": 0.5}
    assert score.trivial_scores("regression", [1, 2, 3], [3, 4, 5])["rmse"] == pytest.approx(math.sqrt(14 / 3))


def test_ratio_gap_and_within_on_hand_computed_numbers():
    assert score.best_baseline("auc", {"hgb": 0.80, "linear": 0.82}) == ("linear", 0.82)
    assert score.best_baseline("rmse", {"hgb": 3.0, "linear": 3.5}) == ("hgb", 3.0)
    # AUC 0.805 against 0.82: 0.015 short, more than the 0.01 allowed.
    auc = score.compare("auc", 0.805, 0.82)
    assert auc["gap"] == pytest.approx(0.015) and auc["ratio"] == pytest.approx(0.805 / 0.82)
    assert not auc["within"]
    assert score.compare("auc", 0.811, 0.82)["within"]  # 0.009 short
    # RMSE 3.12 against 3.0: 4 % worse, within 5 %; 3.3 is 10 % worse, not within.
    assert score.compare("rmse", 3.12, 3.0)["gap"] == pytest.approx(0.04)
    assert score.compare("rmse", 3.12, 3.0)["within"]
    assert not score.compare("rmse", 3.3, 3.0)["within"]
    # AUC 0.64 above 0.5, accuracy 0.877 below always-"No" at 0.940 (Caravan in issue 26).
    assert score.below_trivial({"auc": 0.64, "accuracy": 0.877}, {"auc": 0.5, "accuracy": 0.94}) == ["accuracy"]
    assert score.below_trivial({"rmse": 5.5}, {"rmse": 5.0}) == ["rmse"]
    assert score.below_trivial({"rmse": 4.5}, {"rmse": 5.0}) == []
    # Worst gap in allowances: AUC 0.015 short is 1.5 of 0.01; RMSE 10 % is 2 of 5 %.
    results = {"a": {"metric": "auc", "gap": 0.015, "within": False, "below_trivial": ["accuracy"]},
               "b": {"metric": "rmse", "gap": 0.10, "within": False, "below_trivial": []},
               "c": {"metric": "accuracy", "gap": -0.02, "within": True, "below_trivial": []}}
    summary = score.summarize(results)
    assert summary["tables_within"] == 1 and summary["tables_scored"] == 3
    assert summary["tables_below_trivial"] == 1
    assert summary["worst_gap"] == {"table": "b", "metric": "rmse", "gap": 0.1, "allowances": 2.0}
