"""A table whose label follows its dates, no code edited: `turbotfx init` calls the date
columns dates (ISO dates and datetimes in CSV, timestamps in Parquet), `turbotfx run`
blesses and pushes a model that learned from them, and serving takes the raw date text."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from pipeline import datasets
from tests import conftest
from tests.conftest import cli

pytestmark = pytest.mark.e2e

ROWS = 600
DAY, BOOKED, GUESTS, BUSY = "day", "booked at", "guests", "busy"


def bookings(seed: int = 0) -> pd.DataFrame:
    """Busy or not from the day of the week (weekends are busy) and the hour booked (evenings
    are busy): cycles no count of days shows, so a model that cannot read dates cannot tell."""
    rng = np.random.default_rng(seed)
    days = pd.Timestamp("2019-01-01") + pd.to_timedelta(rng.integers(0, 731, ROWS), unit="D")
    booked = days - pd.to_timedelta(rng.integers(1, 60 * 24 * 30, ROWS), unit="min")
    weekend = np.cos(2 * np.pi * (days.dayofweek.to_numpy() - 5.5) / 7)
    evening = np.cos(2 * np.pi * (booked.hour.to_numpy() + booked.minute.to_numpy() / 60 - 21) / 24)
    score = weekend + evening + rng.normal(0, 0.2, ROWS)
    return pd.DataFrame({DAY: days, BOOKED: booked, GUESTS: rng.integers(1, 5, ROWS),
                         BUSY: np.where(score > 0, "yes", "no")})


def init_and_run(tmp_path: Path, frame: pd.DataFrame, fmt: str) -> tuple[Path, Path, str]:
    data_root = tmp_path / "data"
    data_root.mkdir()
    if fmt == "csv":
        # Two ways people write dates: a day, and a datetime with a T.
        frame.assign(**{DAY: frame[DAY].dt.strftime("%Y-%m-%d"),
                        BOOKED: frame[BOOKED].dt.strftime("%Y-%m-%dT%H:%M")}).to_csv(
            data_root / "part-0.csv", index=False)
    else:
        frame.assign(**{DAY: frame[DAY].dt.date}).to_parquet(data_root / "part-0.parquet", index=False)
    dataset_file = tmp_path / "bookings.toml"
    init, model_dir = conftest.init_and_run(data_root, BUSY, dataset_file, tmp_path / "ws", "--epochs", "40")
    return dataset_file, model_dir, init.output


def raw_predictions(model_dir: Path, days: list[str], booked: list[str], guests: list[int]) -> np.ndarray:
    """The busy class's probability through serving_raw, the dates as text."""
    raw = tf.saved_model.load(str(model_dir)).signatures["serving_raw"]
    out = raw(day=tf.constant(days), booked_at=tf.constant(booked), guests=tf.constant(guests, tf.float32))
    labels = [label.decode() for label in out["classes"].numpy()[0]]
    return out["probabilities"].numpy()[:, labels.index("yes")]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_dates_in_blessed_and_served(tmp_path, fmt):
    frame = bookings()
    dataset_file, model_dir, init_output = init_and_run(tmp_path, frame, fmt)
    roles = {feature.name: feature.role for feature in datasets.load(str(dataset_file)).features}
    assert (roles[DAY], roles[BOOKED]) == ("date", "date"), init_output
    assert f"ISO dates from {frame[DAY].min():%Y-%m-%d}" in init_output

    # Rows the model never saw (80 % of `frame` trained it), of each class, as text the way
    # the user wrote them, through serving_raw.
    unseen = bookings(seed=1)
    text_format = "%Y-%m-%d %H:%M:%S" if fmt == "parquet" else "%Y-%m-%dT%H:%M"
    busy = raw_predictions(model_dir, unseen[DAY].dt.strftime("%Y-%m-%d").tolist(),
                           unseen[BOOKED].dt.strftime(text_format).tolist(), unseen[GUESTS].tolist())
    for cls, chosen in (("yes", busy > 0.5), ("no", busy <= 0.5)):
        rows = unseen[BUSY].to_numpy() == cls
        assert rows.sum() > 100 and (chosen[rows]).mean() > 0.75, (cls, chosen[rows].mean())
    # The weekday and the hour move the answer: a Saturday booked for the evening is busy,
    # a Tuesday booked in the morning is not.
    saturday_evening, tuesday_morning = raw_predictions(model_dir, ["2020-01-04", "2020-01-07"],
                                                        ["2019-12-20T21:00", "2019-12-20T09:00"], [2, 2])
    assert saturday_evening > 0.8 and tuesday_morning < 0.2, (saturday_evening, tuesday_morning)

    # `turbotfx predict` takes the date as text; a date that is no day is named before sending.
    home = tmp_path / "ws"
    predicted = cli("predict", "--dataset", str(dataset_file), "--format", "json", "--json",
                         json.dumps({DAY: "2020-01-04", BOOKED: "2019-12-20 21:00", GUESTS: 2}), home=home)
    assert predicted.exit_code == 0, predicted.output
    assert json.loads(predicted.stdout)["predictions"][0]["label"] == "yes"
    refused = cli("predict", "--dataset", str(dataset_file), "--json",
                       json.dumps({DAY: "2020-02-30", BOOKED: "2019-12-20 21:00", GUESTS: 2}), home=home)
    assert refused.exit_code != 0
    assert "feature 'day' is '2020-02-30', not a date" in refused.output, refused.output
    assert "Traceback" not in refused.output
