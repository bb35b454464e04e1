"""Rows that break the curated schema stop the run at the AnomalyGate, before Transform,
with one line per anomaly and nothing pushed."""

from __future__ import annotations

import csv

import pytest

from pipeline import datasets
from pipeline.datasets import prepare
from tests.conftest import cli

pytestmark = pytest.mark.e2e


def test_rows_breaking_the_schema_stop_the_run_before_transform(tmp_path):
    root = tmp_path / "data"
    prepare.write_penguins_csv(root / "penguins.csv", datasets.load("penguins"))
    with open(root / "penguins.csv", "a", newline="") as handle:
        csv.writer(handle).writerow(["Adelie", "Atlantis", "male", "39.1", "18.7", "181.0", "3750.0"])
    home = tmp_path / "ws"
    result = cli("run", "--data-root", str(root), home=home)
    assert result.exit_code == 1, result.output
    assert "AnomalyGate failed" in result.output
    assert "island" in result.output and "Atlantis" in result.output
    assert "Transform" not in result.output, "the run stopped before Transform"
    serving = home / "serving"
    assert not serving.exists() or not any(serving.iterdir())
