"""AnomalyGate on real TFDV anomalies computed against the curated schema."""

from __future__ import annotations

import csv
import os

import pytest
import tensorflow_data_validation as tfdv
from tfx.types import artifact_utils, standard_artifacts

from components.anomaly_gate import executor
from pipeline import datasets
from pipeline.datasets import prepare

GOOD_ROW = {
    "species": "Adelie", "island": "Dream", "sex": "male", "bill_length_mm": "39.5",
    "bill_depth_mm": "17.4", "flipper_length_mm": "186.0", "body_mass_g": "3800.0",
}


@pytest.fixture(scope="module")
def penguin_rows(tmp_path_factory) -> list[dict]:
    path = tmp_path_factory.mktemp("penguins") / "penguins.csv"
    prepare.write_penguins_csv(path, datasets.load("penguins"))
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _anomalies_artifact(tmp_path, rows: list[dict]) -> standard_artifacts.ExampleAnomalies:
    """What ExampleValidator writes: one SchemaDiff.pb per split."""
    csv_path = tmp_path / "rows.csv"
    with open(csv_path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    stats = tfdv.generate_statistics_from_csv(str(csv_path))
    anomalies = tfdv.validate_statistics(stats, tfdv.load_schema_text(str(datasets.load("penguins").schema)))
    artifact = standard_artifacts.ExampleAnomalies()
    artifact.uri = str(tmp_path / "anomalies")
    artifact.split_names = artifact_utils.encode_split_names(["train"])
    split_dir = tmp_path / "anomalies" / "Split-train"
    os.makedirs(split_dir)
    (split_dir / executor.BINARY_FILE).write_bytes(anomalies.SerializeToString())
    return artifact


def _run_gate(artifact) -> None:
    executor.Executor().Do({"anomalies": [artifact]}, {}, {})


def test_clean_penguins_pass(tmp_path, penguin_rows):
    _run_gate(_anomalies_artifact(tmp_path, penguin_rows))


@pytest.mark.parametrize(
    "bad_value, feature, shown",
    [
        ({"island": "Atlantis"}, "island", "Atlantis"),
        ({"body_mass_g": "99999.0"}, "body_mass_g", "99999"),
        ({"bill_length_mm": "long"}, "bill_length_mm", '"long"'),
    ],
)
def test_bad_rows_stop_the_run_naming_feature_and_value(tmp_path, penguin_rows, bad_value, feature, shown):
    rows = penguin_rows[:50] + [{**GOOD_ROW, **bad_value}]
    with pytest.raises(executor.AnomaliesFoundError) as err:
        _run_gate(_anomalies_artifact(tmp_path, rows))
    report = str(err.value)
    lines = [line for line in report.splitlines() if f"] {feature}:" in line]
    assert lines, report
    assert shown in lines[0], report
    assert "turbotfx schema infer" in report


def test_missing_label_column_is_an_anomaly(tmp_path, penguin_rows):
    rows = [{k: v for k, v in row.items() if k != "species"} for row in penguin_rows[:20]]
    with pytest.raises(executor.AnomaliesFoundError, match=r"\] species: "):
        _run_gate(_anomalies_artifact(tmp_path, rows))


def _split_artifact(tmp_path, rows_by_split: dict[str, list[dict]], schema=None) -> standard_artifacts.ExampleAnomalies:
    """ExampleValidator's output for several splits, each validated on its own rows."""
    schema = schema or tfdv.load_schema_text(str(datasets.load("penguins").schema))
    artifact = standard_artifacts.ExampleAnomalies()
    artifact.uri = str(tmp_path / "anomalies")
    artifact.split_names = artifact_utils.encode_split_names(list(rows_by_split))
    for split, rows in rows_by_split.items():
        csv_path = tmp_path / f"{split}.csv"
        with open(csv_path, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        anomalies = tfdv.validate_statistics(tfdv.generate_statistics_from_csv(str(csv_path)), schema)
        split_dir = tmp_path / "anomalies" / f"Split-{split}"
        os.makedirs(split_dir)
        (split_dir / executor.BINARY_FILE).write_bytes(anomalies.SerializeToString())
    return artifact


def test_a_bad_row_in_the_second_split_stops_the_run(tmp_path, penguin_rows):
    rows = {"train": penguin_rows[:50], "eval": penguin_rows[50:80] + [{**GOOD_ROW, "island": "Atlantis"}]}
    with pytest.raises(executor.AnomaliesFoundError) as err:
        _run_gate(_split_artifact(tmp_path, rows))
    assert "[eval] island:" in str(err.value) and "[train]" not in str(err.value)


def test_an_anomaly_of_the_whole_split_stops_the_run(tmp_path, penguin_rows):
    """Too few rows for the schema's dataset constraint: no feature is wrong, the split is."""
    schema = tfdv.load_schema_text(str(datasets.load("penguins").schema))
    schema.dataset_constraints.min_examples_count = 1000
    artifact = _split_artifact(tmp_path, {"train": penguin_rows[:50]}, schema)
    with pytest.raises(executor.AnomaliesFoundError, match=r"\[train\] \(dataset\): "):
        _run_gate(artifact)
