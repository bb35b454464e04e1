"""`turbotfx init` sets a column that gives the label away to `ignore`, with the reason
`leak?` and the evidence (pipeline/datasets/leaks.py). Each table is built so that one column
restates the label (a logarithm of it, a text code written after the fact, ranges that
separate the classes) beside honest features that predict it well but not perfectly; the
built-in penguins table, whose features are all honest, must keep every column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.datasets import draft as draft_file
from pipeline.datasets import infer, leaks
from tests.test_init import write

ROWS = 600


def roles(frame: pd.DataFrame, label: str, tmp_path, fmt: str = "csv") -> dict[str, infer.Decision]:
    draft = infer.draft(write(frame, tmp_path / "data", fmt), label, tmp_path / "out.toml")
    return {decision.column.name: decision for decision in draft.decisions}


def test_a_logarithm_of_a_regression_label_is_a_leak(tmp_path):
    rng = np.random.default_rng(1)
    age = rng.integers(18, 80, ROWS)
    education = rng.choice(["school", "college", "degree"], ROWS)
    wage = np.exp(3.5 + 0.01 * age + np.where(education == "degree", 0.4, 0.0) + rng.normal(0, 0.3, ROWS))
    # A strong honest feature: the wage seen a year earlier, with noise (R² about 0.8).
    last_year = wage * np.exp(rng.normal(0, 0.15, ROWS))
    frame = pd.DataFrame({"age": age, "education": education, "last_year": last_year.round(2),
                          "logwage": np.log(wage).round(6), "wage": wage.round(2)})
    found = roles(frame, "wage", tmp_path)
    assert found["logwage"].role == "ignore" and found["logwage"].reason.startswith("leak? "), found["logwage"]
    assert "alone it predicts the label with R² " in found["logwage"].reason, found["logwage"]
    assert {name: found[name].role for name in ("age", "education", "last_year")} == \
        {"age": "numeric", "education": "categorical", "last_year": "numeric"}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_status_written_after_the_fact_leaks_a_rare_binary_label(tmp_path, fmt):
    """10 % defaults; `status` is "charged off" for every default (text), `paid_total` is low
    for every default (a number); `income` predicts well (AUC about 0.9) and stays."""
    rng = np.random.default_rng(2)
    default = rng.random(ROWS) < 0.10
    income = np.where(default, rng.normal(30, 8, ROWS), rng.normal(50, 10, ROWS)).round(1)
    frame = pd.DataFrame({
        "income": income,
        "purpose": rng.choice(["car", "home", "study"], ROWS),
        "status": np.where(default, "charged off", rng.choice(["current", "paid"], ROWS)),
        "paid_total": np.where(default, rng.uniform(0, 900, ROWS), rng.uniform(1000, 5000, ROWS)).round(2),
        "default": np.where(default, "yes", "no"),
    })
    found = roles(frame, "default", tmp_path, fmt)
    for leak in ("status", "paid_total"):
        assert found[leak].role == "ignore" and "leak? alone it predicts the label with AUC" in found[leak].reason
    assert (found["income"].role, found["purpose"].role) == ("numeric", "categorical")


def test_ranges_that_separate_the_classes_leak_a_multiclass_label(tmp_path):
    rng = np.random.default_rng(3)
    species = rng.choice(["a", "b", "c"], ROWS)
    centre = {"a": 0.0, "b": 1.0, "c": 2.0}
    frame = pd.DataFrame({
        "length": [centre[s] + rng.normal(0, 0.6) for s in species],  # overlapping: honest
        "code": [centre[s] * 10 + rng.uniform(0, 5) for s in species],  # disjoint ranges: a leak
        "species": species,
    })
    found = roles(frame, "species", tmp_path)
    assert found["code"].role == "ignore" and "accuracy 1.0000" in found["code"].reason, found["code"]
    assert found["length"].role == "numeric"


def test_the_leak_is_written_to_the_dataset_file_and_printed(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, ROWS)
    y = (2 * x + rng.normal(0, 1, ROWS)).round(4)
    frame = pd.DataFrame({"x": x.round(4), "y_copy": (y * 100).round(2), "y": y})
    draft = infer.draft(write(frame, tmp_path / "data", "csv"), "y", tmp_path / "out.toml")
    written = draft_file.dataset_toml(draft)
    [line] = [line for line in written.splitlines() if line.startswith("y_copy")]
    assert '"ignore"' in line and "# leak? alone it predicts the label with R² 0.99" in line
    from pipeline.cli.init import report

    [printed] = [line for line in report(draft) if line.split()[:1] == ["y_copy"]]
    assert printed.split()[1] == "ignore" and "leak?" in printed
    assert not any(d.reason.startswith("leak?") for d in draft.decisions if d.column.name == "x")


def test_no_honest_penguin_column_is_called_a_leak(tmp_path):
    import palmerpenguins

    frame = palmerpenguins.load_penguins()
    for label in ("species", "body_mass_g", "sex"):
        data = frame.dropna(subset=[label])
        found = roles(data, label, tmp_path / label)
        assert not [d for d in found.values() if d.reason.startswith("leak?")], label


def test_an_only_labelled_handful_is_too_few_to_judge(tmp_path):
    """Below leaks.MIN_ROWS labelled rows nothing is called a leak, even a copy of the label."""
    rows = leaks.MIN_ROWS - 1
    frame = pd.DataFrame({"x": np.arange(rows) % 5 + 0.5, "copy": [f"c{i % 2}" for i in range(rows)],
                          "y": [f"k{i % 2}" for i in range(rows)]})
    assert roles(frame, "y", tmp_path)["copy"].role == "categorical"
    bigger = pd.concat([frame] * 2, ignore_index=True)
    assert roles(bigger, "y", tmp_path / "bigger")["copy"].role == "ignore"
