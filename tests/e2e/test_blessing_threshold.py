"""The change threshold on its own: a candidate that clears the absolute bound on accuracy
but trails the last blessed model by more than the allowed drop is neither blessed nor pushed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline import datasets
from pipeline.cli.run import NOT_BLESSED_EXIT
from tests.conftest import CliResult, cli, turbotfx

pytestmark = pytest.mark.e2e

# Penguins' own [blessing] bounds, given as flags so the test does not lean on the file's defaults.
MIN_ACCURACY = 0.6
MAX_DROP = 0.02
METRIC = "sparse_categorical_accuracy"

# Penguins with island as the only feature: a worse model by construction, not by chance.
# Island alone cannot tell the species apart (Biscoe holds Adelie and Gentoo, Dream Adelie
# and Chinstrap; only Torgersen is all Adelie), so the best any island-only model can do is
# the majority species of each island: 244 of the 344 rows (0.71), 48 of the 67 eval rows
# (0.72; Dream's eval rows are half Adelie, half Chinstrap, so either answer there scores
# the same). That is above MIN_ACCURACY once the model has learned Biscoe -> Gentoo (3 to 1
# in the data, 20 epochs are plenty) and far below the all-feature baseline (1.0 measured).
# Same name and built-in data as penguins: the same serving dir, CSV and eval split.
ISLAND_ONLY = """\
name = "penguins"
generate = "penguins"
format = "csv"
label = "species"
task = "multiclass"
classes = 3
schema = "{schema}"
slices = ["island"]

[features]
island = "categorical"
sex = "ignore"
bill_length_mm = "ignore"
bill_depth_mm = "ignore"
flipper_length_mm = "ignore"
body_mass_g = "ignore"
"""


def test_only_the_drop_against_the_baseline_blocks_the_push(first_run_copy: CliResult, tmp_path: Path):
    home = first_run_copy.home
    config = first_run_copy.config
    dataset_file = tmp_path / "island-only.toml"
    dataset_file.write_text(ISLAND_ONLY.format(schema=datasets.BUILTIN_DIR / "penguins.schema.pbtxt"))
    # The first run's model, blessed and pushed: the baseline the candidate must not trail.
    [baseline] = _runs(home)
    assert baseline["blessed"] and baseline["pushed_version"], baseline
    serving_before = _serving_state(config)

    candidate_args = ("run", "--dataset", str(dataset_file), "--epochs", "20",
                      "--min-accuracy", str(MIN_ACCURACY))
    blocked = cli(*candidate_args, "--max-accuracy-drop", str(MAX_DROP), home=home)
    # The run completed; not blessing is its verdict, with its own exit code.
    assert blocked.exit_code == NOT_BLESSED_EXIT, blocked.output
    candidate = _new_run(home, known=[baseline])
    assert candidate["metric"] == METRIC
    evaluation = _lineage(home, candidate["model_id"])["evaluation"]
    # Compared against the first run's model: not the candidate itself, not nothing.
    assert evaluation["baseline_model_id"] == baseline["model_id"], (evaluation, baseline)
    # The value threshold passes...
    assert candidate["metric_value"] >= MIN_ACCURACY, candidate
    # ... and the drop is larger than allowed. The baseline's accuracy is the one its own run
    # measured on the same eval split (same CSV, same hash split); the Evaluator's own
    # comparison, printed as the diff, must say the same.
    assert baseline["metric_value"] - candidate["metric_value"] > MAX_DROP, (baseline, candidate)
    diff = _printed_diff(blocked.output)
    assert diff == pytest.approx(candidate["metric_value"] - baseline["metric_value"], abs=1e-3), diff
    # Not blessed, so nothing new is served.
    assert (candidate["blessed"], candidate["pushed_version"]) == (False, None), candidate
    assert evaluation["blessed"] is False
    assert "blessed: no" in blocked.output and "nothing was pushed" in blocked.output
    # The reason names the bound that failed, both numbers and its flag.
    drop = baseline["metric_value"] - candidate["metric_value"]
    assert (f"accuracy dropped {drop:.4f} > {MAX_DROP:.4f} against model {baseline['model_id']} "
            "(--max-metric-drop)") in blocked.output, blocked.output
    assert _serving_state(config) == serving_before

    # The control: the same candidate (the Trainer is cached) with the drop allowed is blessed
    # and pushed, so the change threshold was all that stopped it.
    allowed = cli(*candidate_args, "--max-accuracy-drop", "1.0", home=home)
    assert allowed.exit_code == 0, allowed.output
    control = _new_run(home, known=[baseline, candidate])
    assert control["model_id"] == candidate["model_id"], "the Trainer reran: not the same candidate"
    assert control["metric_value"] == pytest.approx(candidate["metric_value"])
    assert control["blessed"] and control["pushed_version"], control
    assert (config.serving_dir / control["pushed_version"]).is_dir()
    assert _serving_state(config) != serving_before


def _runs(home: Path) -> list[dict]:
    """Every run in the workspace's MLMD store, as `turbotfx runs` reads them."""
    result = turbotfx("runs", "--format", "json", home=home)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _new_run(home: Path, known: list[dict]) -> dict:
    [run] = [r for r in _runs(home) if r["run_id"] not in {k["run_id"] for k in known}]
    return run


def _lineage(home: Path, model_id: int) -> dict:
    result = turbotfx("lineage", "--artifact-id", str(model_id), "--format", "json", home=home)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _printed_diff(output: str) -> float:
    """The change against the baseline that the run summary prints (TFMA's <metric>_diff)."""
    match = re.search(rf"^\s*{METRIC}_diff\s+(-?\d+\.\d+)\s*$", output, re.MULTILINE)
    assert match, output
    return float(match.group(1))


def _serving_state(config) -> tuple[list[str], bytes]:
    """The model's serving dir entries (hidden ones too) and TF Serving's models.config."""
    entries = sorted(p.name for p in config.serving_dir.iterdir())
    return entries, (config.serving_dir.parent / "models.config").read_bytes()
