"""`turbotfx drift` on the first run's served model (in a copy of its workspace: a check is
recorded in the store): batches drawn from the penguins table itself, one with a planted
shift, one with a category training never had. Expected values come from the table (its
rows, the planted changes) and from the served model fed tf.Examples built here.

The statistics themselves (false alarms over 20 held-out slices, shifts, TFDV's own
numbers, the estimate under covariate shift) are tested on generated tables in
tests/test_drift_stats.py and tests/test_performance_estimate.py."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from pipeline import datasets
from serving import push
from tests.conftest import cli, module_copy_of_first_run, turbotfx
from tests.penguin_examples import example

pytestmark = pytest.mark.e2e

SPEC = datasets.load("penguins").feature_spec()
ROWS = 1000
# The feature the penguins run report ranks first (permutation importance: accuracy 0.24 lower
# with it shuffled, the next 0.04).
SHIFTED = "bill_length_mm"


@pytest.fixture(scope="module")
def home(first_run, tmp_path_factory) -> Path:
    return module_copy_of_first_run(first_run, tmp_path_factory, "drift-home")


@pytest.fixture(scope="module")
def penguins(first_run) -> list[dict[str, str]]:
    with open(first_run.config.data_path / "penguins.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _resampled(rows: list[dict[str, str]], seed: int) -> list[dict[str, str]]:
    """ROWS rows drawn with replacement from the table: the training split's distribution."""
    picks = np.random.default_rng(seed).integers(0, len(rows), ROWS)
    return [dict(rows[i]) for i in picks]


def _drift(home: Path, path: Path, *extra: str) -> dict:
    result = cli("drift", "--data", str(path), "--format", "json", *extra, home=home)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_rows_like_the_training_data_drift_nowhere(home, penguins, tmp_path):
    found = _drift(home, _write(tmp_path / "same.csv", _resampled(penguins, seed=1)))
    assert found["rows"] == ROWS and found["drifted"] == []
    assert {f["feature"] for f in found["features"]} == set(SPEC.numeric_keys) | set(SPEC.categorical_keys)
    for feature in found["features"]:
        assert feature["distance"] <= feature["null_high"], feature
        # The table holds the eval split too: a few of its values may lie outside training's.
        assert (feature["out_of_range_share"] or 0) < 0.02 and not feature["oov_share"], feature


def test_a_half_sigma_shift_in_the_feature_the_model_leans_on_is_flagged(first_run, home, penguins, tmp_path):
    rows = _resampled(penguins, seed=2)
    values = np.array([float(r[SHIFTED]) for r in penguins if r[SHIFTED]])
    for row in rows:
        if row[SHIFTED]:
            row[SHIFTED] = str(float(row[SHIFTED]) + 0.5 * values.std())
    path = _write(tmp_path / "shifted.csv", rows)
    found = _drift(home, path)
    assert found["drifted"] == [SHIFTED]
    [shifted] = [f for f in found["features"] if f["feature"] == SHIFTED]
    assert shifted["distance"] > shifted["null_high"] and shifted["out_of_range_share"] > 0
    # --fail-on-drift: the status a scheduled check acts on, the same report printed.
    failed = cli("drift", "--data", str(path), "--fail-on-drift", home=home)
    assert failed.exit_code == 1 and f"drift: {SHIFTED} beyond the null band" in failed.output
    # Both checks are in the store: `runs` lists them with what drifted and the version compared with.
    [version] = push.versions(first_run.config.serving_dir)
    checks = [r for r in json.loads(cli("runs", "--format", "json", home=home).stdout) if r["kind"] == "drift"]
    assert [(r["drifted"], r["rows"], r["scored_version"]) for r in checks if r["drifted"]] == [
        ([SHIFTED], ROWS, found["model_version"])] * 2
    assert found["model_version"] == version


def test_a_category_training_never_had_is_out_of_vocabulary_not_drift(home, penguins, tmp_path):
    rows = _resampled(penguins, seed=3)
    for row in rows[::10]:
        row["island"] = "Atlantis"
    found = _drift(home, _write(tmp_path / "new_island.csv", rows))
    [island] = [f for f in found["features"] if f["feature"] == "island"]
    assert not island["flagged"] and found["drifted"] == []
    assert island["oov_share"] == pytest.approx(0.1, abs=1e-9)
    # The share the model's own vocabulary (Transform's, in the served version) sees.
    assert found["vocabulary_oov"]["island"] == pytest.approx(0.1, abs=1e-9)
    assert found["vocabulary_oov"]["sex"] == 0


def test_the_accuracy_estimate_is_near_the_true_accuracy_of_the_served_model(first_run, home, penguins, tmp_path):
    rows = _resampled(penguins, seed=4)
    found = _drift(home, _write(tmp_path / "batch.csv", rows))
    estimate = found["estimate"]
    # The truth: the served model's answers for these rows against their species.
    [version] = push.versions(first_run.config.serving_dir)
    model = tf.saved_model.load(str(first_run.config.serving_dir / str(version)))
    outputs = model.signatures["serving_default"](examples=tf.constant([example(r) for r in rows]))
    predicted = [label.decode() for label in outputs["label"].numpy()]
    labelled = [(p, r["species"]) for p, r in zip(predicted, rows) if r["species"]]
    truth = sum(p == s for p, s in labelled) / len(labelled)
    assert abs(estimate["estimate"] - truth) <= 0.03, (estimate, truth)
    assert estimate["bound"] == 0.6 and "still passes" in estimate["verdict"]


def test_the_text_report_and_a_missing_column(home, penguins, tmp_path):
    path = _write(tmp_path / "batch.csv", _resampled(penguins, seed=5))
    text = turbotfx("drift", "--data", str(path), home=home)
    assert text.exit_code == 0, text.output
    lines = text.output.strip().splitlines()
    assert lines[0].startswith(f"batch.csv: {ROWS} rows against the training split of model version")
    assert any(line.split()[:2] == ["island", "categorical"] for line in lines)
    assert "drift: none;" in text.output and "estimate: accuracy estimated" in text.output

    lacking = tmp_path / "no_island.csv"
    _write(lacking, [{k: v for k, v in r.items() if k != "island"} for r in penguins[:5]])
    missing = cli("drift", "--data", str(lacking), home=home)
    assert missing.exit_code == 2 and missing.output.strip().splitlines()[-1].startswith(
        f"turbotfx: error: {lacking} has no column 'island', which the model needs")
