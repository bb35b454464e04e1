"""The `date` role: the graph's calendar against Python's datetime, Transform's parts of a
date column, init's decision on ISO text and Parquet timestamps, and predict's row check."""

from __future__ import annotations

import datetime
import functools
import random
import tempfile

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import tensorflow as tf
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from pipeline.datasets import infer
from pipeline.pipeline import TRANSFORM_FORCE_TF_COMPAT_V1
from serving.errors import RowError
from serving.rows import RowSchema
from trainer_module import dates, features, preprocessing


def _random_dates(count: int, seed: int = 0) -> list[tuple[str, datetime.datetime, bool]]:
    """(text, the datetime it names, whether it has a time) in every format the role reads."""
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        day = datetime.date(1890, 1, 1) + datetime.timedelta(days=rng.randrange(0, 250 * 365))
        moment = datetime.datetime(day.year, day.month, day.day, rng.randrange(24), rng.randrange(60))
        style = rng.choice(["date", "T", "space", "zone"])
        if style == "date":
            found.append((day.isoformat(), datetime.datetime(day.year, day.month, day.day), False))
        else:
            text = moment.isoformat(sep="T" if style == "T" else " ", timespec="seconds")
            found.append((text + ("+02:00" if style == "zone" else ""), moment, True))
    return found


def test_the_graph_reads_dates_as_pythons_calendar_does():
    cases = _random_dates(3000) + [(t, datetime.datetime.fromisoformat(t), False)
                                   for t in ("2000-02-29", "1900-03-01", "2024-12-31", "1970-01-01")]
    parsed = dates.parse(tf.constant([text for text, _, _ in cases]))
    assert parsed.valid.numpy().all()
    epoch = datetime.datetime(1970, 1, 1)
    expected = np.array([[(moment.date() - epoch.date()).days, moment.year, moment.month - 1, moment.weekday(),
                          moment.timetuple().tm_yday - 1, moment.hour + moment.minute / 60]
                         for _, moment, _ in cases])
    got = np.stack([parsed.days, parsed.year, parsed.month, parsed.weekday, parsed.yearday, parsed.hour], axis=1)
    np.testing.assert_allclose(got, expected, atol=1e-4)


@pytest.mark.parametrize("text", ["2021-02-29", "1900-02-29", "2020-13-01", "2020-00-10", "2020-04-31",
                                  "2020-01-05T24:00", "2020-01-05 10:60", "2020-1-5", "05/01/2020", "", "soon"])
def test_what_is_not_a_date_is_not_valid(text):
    parsed = dates.parse(tf.constant([text, "2020-01-05"]))
    assert parsed.valid.numpy().tolist() == [False, True]
    sine, cosine = dates.cyclic(parsed, "month")
    assert (sine.numpy()[0], cosine.numpy()[0]) == (0.0, 0.0)


DATE_SPEC = features.FeatureSpec(dataset="d", task=features.REGRESSION, label_key="y", numeric_keys=(),
                                 categoricals=(), date_keys=("sold on",))
DAYS = ["2020-01-01", "2020-04-01", "2020-07-01 18:00", "2020-10-01T06:00:00"]


@pytest.fixture(scope="module")
def date_parts():
    raw_spec = {"sold on": tf.io.VarLenFeature(tf.string), "y": tf.io.FixedLenFeature([1], tf.float32)}
    rows = [{"sold on": [day.encode()], "y": [1.0]} for day in DAYS] + [{"sold on": [], "y": [0.0]},
                                                                        {"sold on": [b"n/a"], "y": [0.0]}]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (transformed, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            functools.partial(preprocessing.preprocessing_fn,
                              custom_config={features.CONFIG_KEY: DATE_SPEC.to_config()}))
    return transformed


def test_a_date_column_becomes_its_parts(date_parts):
    part = {name: np.array([row[features.date_part_name("sold on", name)] for row in date_parts])
            for name in features.DATE_PARTS}
    assert set(DATE_SPEC.numeric_inputs) <= set(date_parts[0])
    # Days: z-scored over the four dates that parse; the missing and the unparsable one are
    # imputed with the mean (0). Expected from Python's calendar.
    days = np.array([(datetime.date.fromisoformat(d[:10]) - datetime.date(1970, 1, 1)).days for d in DAYS])
    np.testing.assert_allclose(part["days"][:4], (days - days.mean()) / days.std(), atol=1e-4)
    np.testing.assert_allclose(part["days"][4:], 0.0, atol=1e-5)
    # One year: the year carries nothing (z-scored constant: 0).
    np.testing.assert_allclose(part["year"], 0.0, atol=1e-5)
    months = np.array([0, 3, 6, 9])
    np.testing.assert_allclose(part["month_sin"][:4], np.sin(2 * np.pi * months / 12), atol=1e-5)
    np.testing.assert_allclose(part["month_cos"][:4], np.cos(2 * np.pi * months / 12), atol=1e-5)
    hours = np.array([0, 0, 18, 6])
    np.testing.assert_allclose(part["hour_sin"][:4], np.sin(2 * np.pi * hours / 24), atol=1e-5)
    weekdays = np.array([datetime.date.fromisoformat(d[:10]).weekday() for d in DAYS])
    np.testing.assert_allclose(part["weekday_cos"][:4], np.cos(2 * np.pi * weekdays / 7), atol=1e-5)
    # A missing or unreadable date sits at the centre of every cycle: no false season.
    for name in features.DATE_PARTS[2:]:
        np.testing.assert_allclose(part[name][4:], 0.0, atol=1e-6, err_msg=name)


def _decisions(rows: pa.Table) -> dict[str, infer.Decision]:
    """init's role for each column of a table as datasets.table.load_table reads it."""
    from pipeline.datasets import table as tables

    return {column.name: infer.role_of(column) for column in infer.profile(rows, tables.statistics(rows))}


def test_init_reads_iso_dates_and_datetimes_as_dates():
    rng = np.random.default_rng(0)
    days = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 731, 400), unit="D")
    odd = days.strftime("%Y-%m-%d").to_numpy().astype(object)
    odd[:8] = "unknown"  # 2 %: still a date column; the odd values are named as missing
    table = pa.table({
        "day": days.strftime("%Y-%m-%d").tolist(),
        "booked at": (days + pd.to_timedelta(rng.integers(0, 1440, 400), unit="min")).strftime(
            "%Y-%m-%dT%H:%M").tolist(),
        "mostly dates": odd.tolist(),
        "some dates": ["2020-01-01" if i % 4 else "later" for i in range(400)],
    })
    decisions = _decisions(table)
    assert decisions["day"].role == "date"
    assert f"ISO dates from {min(days):%Y-%m-%d} to {max(days):%Y-%m-%d}" in decisions["day"].reason
    assert decisions["booked at"].role == "date"
    assert decisions["mostly dates"].role == "date"
    assert "8 values that are not dates are treated as missing" in decisions["mostly dates"].reason
    # A quarter of the values are no date: text, not a date.
    assert decisions["some dates"].role == "categorical"


def test_init_reads_parquet_timestamps_and_dates_as_dates(tmp_path):
    from pipeline.datasets import table as tables

    stamps = pd.to_datetime(["2021-03-04 05:06:07.5", "2021-03-05 23:59:59", None] * 20)
    frame = pd.DataFrame({
        "stamp": stamps, "zoned": stamps.tz_localize("Europe/Paris"),
        "day": [datetime.date(2021, 3, 4), datetime.date(2022, 1, 2), None] * 20,
        "y": range(60),
    })
    frame.to_parquet(tmp_path / "part-0.parquet", index=False)
    loaded = tables.load_table(tmp_path, "parquet")
    # Whole seconds, wall-clock time, as components/parquet_example_gen writes them.
    assert loaded.column("stamp").to_pylist()[:3] == ["2021-03-04 05:06:07", "2021-03-05 23:59:59", None]
    assert loaded.column("zoned").to_pylist()[:2] == ["2021-03-04 05:06:07", "2021-03-05 23:59:59"]
    assert loaded.column("day").to_pylist()[:2] == ["2021-03-04", "2022-01-02"]
    decisions = _decisions(loaded)
    assert {decisions[c].role for c in ("stamp", "zoned", "day")} == {"date"}
    assert "20 of 60 rows empty" in decisions["stamp"].reason


def test_the_parquet_executor_writes_timestamps_as_init_reads_them():
    from components.parquet_example_gen.executor import row_to_example

    example = row_to_example({"stamp": pd.Timestamp("2021-03-04 05:06:07.5", tz="Europe/Paris"),
                              "day": datetime.date(2021, 3, 4), "when": datetime.datetime(2021, 3, 4, 5, 6)})
    values = {key: feature.bytes_list.value[0] for key, feature in example.features.feature.items()}
    assert values == {"stamp": b"2021-03-04 05:06:07", "day": b"2021-03-04", "when": b"2021-03-04 05:06:00"}


def test_predict_checks_a_date_before_sending_it(tmp_path):
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    schema.feature.add(name="sold on", type=schema_pb2.BYTES)
    schema.feature.add(name="rooms", type=schema_pb2.INT)
    schema.feature.add(name="y", type=schema_pb2.FLOAT)
    rows = RowSchema(schema, "y", dates=["sold on"])
    rows.check([{"sold on": "2024-02-29"}, {"sold on": "2024-03-15 14:30"}, {"sold on": None, "rooms": 3}])
    with pytest.raises(RowError) as raised:
        rows.check([{"sold on": "2023-02-29"}, {"sold on": "15/03/2024"}, {"sold on": 20240315}])
    problems = raised.value.problems
    assert [p.split(":")[0] for p in problems] == ["row 0", "row 1", "row 2"]
    assert "'2023-02-29', not a date; give an ISO date such as 2024-03-15" in problems[0]
    assert "must be text" in problems[2]
    # Without the role the same text is any string.
    RowSchema(schema, "y").check([{"sold on": "15/03/2024"}])
