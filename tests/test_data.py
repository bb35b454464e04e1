import csv

from pipeline import data, datasets
from pipeline.config import PipelineConfig


def test_penguins_csv_keeps_categoricals_and_missing_values(tmp_path):
    path = tmp_path / "penguins.csv"
    rows_written = data.write_penguins_csv(path, datasets.load("penguins"))
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
    root = data.prepare_data(config)
    csv_file = root / data.PENGUINS_FILE
    mtime = csv_file.stat().st_mtime_ns
    assert data.prepare_data(config) == root
    assert csv_file.stat().st_mtime_ns == mtime
