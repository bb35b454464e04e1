import csv

import pytest

from pipeline import datasets, workspace
from pipeline.config import PipelineConfig
from pipeline.datasets import prepare
from pipeline.errors import ConfigError


def test_penguins_csv_keeps_categoricals_and_missing_values(tmp_path):
    path = tmp_path / "penguins.csv"
    rows_written = prepare.write_penguins_csv(path, datasets.load("penguins"))
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows_written == len(rows) == 344
    assert tuple(rows[0]) == ("species", "island", "sex", "bill_length_mm", "bill_depth_mm",
                              "flipper_length_mm", "body_mass_g")
    assert {r["island"] for r in rows} == {"Biscoe", "Dream", "Torgersen"}
    assert {r["species"] for r in rows} == {"Adelie", "Chinstrap", "Gentoo"}
    # Missing measurements stay empty cells, for Transform to impute.
    assert sum(1 for r in rows if r["sex"] == "") == 11
    assert sum(1 for r in rows if r["body_mass_g"] == "") == 2
    assert not list(tmp_path.glob(".penguins-*")), "no temporary file left behind"


def test_prepare_data_writes_the_embedded_dataset_once(tmp_path):
    config = PipelineConfig(home=str(tmp_path))
    root = workspace.prepare_input(config)
    csv_file = root / prepare.PENGUINS_FILE
    mtime = csv_file.stat().st_mtime_ns
    assert workspace.prepare_input(config) == root
    assert csv_file.stat().st_mtime_ns == mtime


def test_a_multiclass_file_whose_class_count_disagrees_with_the_data(tmp_path):
    root = tmp_path / "data"
    prepare.write_penguins_csv(root / "penguins.csv", datasets.load("penguins"))
    with open(root / "penguins.csv") as handle:
        lines = handle.read().splitlines()
    # A fourth species in the data; the built-in file says three.
    extra = [line.replace("Adelie", "Emperor", 1) for line in lines[1:30] if line.startswith("Adelie")]
    (root / "penguins.csv").write_text("\n".join(lines + extra) + "\n")
    with pytest.raises(ConfigError, match="classes: 3, but label 'species' has 4 values .*; set classes = 4"):
        prepare.check_data_root(root, datasets.load("penguins"))
