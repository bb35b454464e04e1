import csv

import pytest

from pipeline import data
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from trainer_module import features


def _write_csv(path, header, rows=()):
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def test_penguins_csv_keeps_categoricals_and_missing_values(tmp_path):
    path = tmp_path / "penguins.csv"
    rows_written = data.write_penguins_csv(path)
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows_written == len(rows) == 344
    assert tuple(rows[0]) == features.PENGUINS.csv_columns
    assert {r["island"] for r in rows} == {"Biscoe", "Dream", "Torgersen"}
    assert {r["species"] for r in rows} == {"Adelie", "Chinstrap", "Gentoo"}
    # Missing measurements stay empty cells, for Transform to impute.
    assert sum(1 for r in rows if r["sex"] == "") == 11
    assert sum(1 for r in rows if r["body_mass_g"] == "") == 2
    assert not list(tmp_path.glob(".penguins-*")), "no temporary file left behind"


def test_prepare_data_writes_the_embedded_dataset_once(tmp_path):
    config = PipelineConfig(home=str(tmp_path))
    root = data.prepare_data(config)
    csv_file = root / data.PENGUINS_FILE
    mtime = csv_file.stat().st_mtime_ns
    assert data.prepare_data(config) == root
    assert csv_file.stat().st_mtime_ns == mtime


def test_missing_data_root(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        data.check_data_root(tmp_path / "nope")


def test_data_root_without_csv(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ConfigError, match="holds no .csv file"):
        data.check_data_root(tmp_path)


def test_csv_without_label_column(tmp_path):
    _write_csv(tmp_path / "a.csv", ["island", "sex", "bill_length_mm"], [["Dream", "male", "40.1"]])
    with pytest.raises(ConfigError) as err:
        data.check_data_root(tmp_path)
    assert "no label column 'species'" in str(err.value)


def test_csv_files_with_different_headers(tmp_path):
    _write_csv(tmp_path / "a.csv", features.PENGUINS.csv_columns)
    _write_csv(tmp_path / "b.csv", list(reversed(features.PENGUINS.csv_columns)))
    with pytest.raises(ConfigError, match="same header"):
        data.check_data_root(tmp_path)


def test_empty_csv(tmp_path):
    (tmp_path / "a.csv").write_text("")
    with pytest.raises(ConfigError, match="is empty"):
        data.check_data_root(tmp_path)
