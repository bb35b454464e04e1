"""A number column with a text value, as weather records have it ("T": a trace of rain), and
one with digit grouping ("12,000"), no code edited: init makes both numeric, "T" read as
missing and the grouping dropped, the run blesses and pushes a model that tells a trace from a
dry day and reads the drainage's thousands, and serving takes numbers and "T" alike."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from pipeline import datasets
from tests import conftest
from tests.conftest import cli

pytestmark = pytest.mark.e2e

ROWS = 600
RAIN, DRAINAGE, HUMIDITY, WET = "rain (mm)", "drainage (l/h)", "humidity", "wet roads"


def weather(seed: int = 0) -> pd.DataFrame:
    """Wet roads when the rain less what the drains take (1 mm per 5,000 l/h, written "12,000"
    as a spreadsheet exports it) is over 0.5 mm, or after a trace ("T", which this table's recorders
    wrote for rain too little to measure, on roads that stay wet). The mean of the measured
    rain is 1.5 and of the drains 2 mm: a trace imputed as the mean alone looks dry."""
    rng = np.random.default_rng(seed)
    rain = np.round(rng.exponential(1.5, ROWS), 1)
    drainage = rng.integers(0, 20, ROWS) * 1000 + rng.integers(0, 1000, ROWS)
    trace = rng.random(ROWS) < 0.15
    # Some noise: a label that is an exact function of one column is a leak to init.
    wet = (rain - drainage / 5000 + rng.normal(0, 0.4, ROWS) > 0.5) | trace
    return pd.DataFrame({
        RAIN: np.where(trace, "T", rain.astype(str)),
        DRAINAGE: [f"{liters:,}" for liters in drainage],
        HUMIDITY: np.round(rng.uniform(30, 90, ROWS), 1),
        WET: np.where(wet, "yes", "no"),
    })


def test_a_trace_of_rain_is_missing_with_an_indicator(tmp_path):
    frame = weather()
    data_root = tmp_path / "data"
    data_root.mkdir()
    frame.to_csv(data_root / "part-0.csv", index=False)
    home = tmp_path / "ws"
    dataset_file = tmp_path / "weather.toml"
    init, model_dir = conftest.init_and_run(data_root, WET, dataset_file, home, "--epochs", "40")
    traces = int((frame[RAIN] == "T").sum())
    assert f"'T' in {traces} rows: read as missing, with an indicator" in init.output
    assert "numbers written 1,234.56" in init.output
    spec = datasets.load(str(dataset_file))
    rain, drainage = (next(f for f in spec.features if f.name == name) for name in (RAIN, DRAINAGE))
    assert (rain.role, rain.missing_values, rain.number_format) == ("numeric", ("T",), None)
    assert (drainage.role, drainage.missing_values, drainage.number_format) == ("numeric", (), "1,234.56")

    raw = tf.saved_model.load(str(model_dir)).signatures["serving_raw"]

    def labels(**columns) -> list[str]:
        inputs = {name: tf.constant(values, tf.float32 if name == "humidity" else tf.string)
                  for name, values in columns.items()}
        return [label.decode() for label in raw(**inputs)["label"].numpy()]

    # Rows the model never saw (80 % of `frame` trained it), every class among them.
    unseen = weather(seed=1)
    predicted = np.array(labels(rain_mm=unseen[RAIN].tolist(), drainage_l_h=unseen[DRAINAGE].tolist(),
                                humidity=unseen[HUMIDITY].tolist()))
    for cls in ("yes", "no"):
        rows = unseen[WET].to_numpy() == cls
        assert rows.sum() > 50 and (predicted[rows] == cls).mean() > 0.8, cls
    # A trace is wet; the same row with its rain unknown is not (the mean is dry).
    assert labels(rain_mm=["T", "", "6.0"], drainage_l_h=["10,000"] * 3, humidity=[50.0] * 3) == ["yes", "no", "yes"]
    # Thousands read as thousands: the same rain is wet over slow drains, dry over fast ones
    # (read as 1 and 19 l/h, or as missing, both would look the same).
    assert labels(rain_mm=["3.0", "3.0"], drainage_l_h=["1,000", "19,000"], humidity=[50.0] * 2) == ["yes", "no"]

    # predict: numbers as numbers, the named text as text, grouped or plain thousands; other
    # text is named before sending.
    answered = cli("predict", "--dataset", str(dataset_file), "--format", "json", "--json",
                   json.dumps([{RAIN: 0.2, HUMIDITY: 50}, {RAIN: "T", HUMIDITY: 50},
                               {RAIN: 3.0, DRAINAGE: "1,000", HUMIDITY: 50}, {RAIN: 3.0, DRAINAGE: 19000, HUMIDITY: 50}]),
                   home=home)
    assert answered.exit_code == 0, answered.output
    assert [p["label"] for p in json.loads(answered.stdout)["predictions"]] == ["no", "yes", "yes", "no"]
    refused = cli("predict", "--dataset", str(dataset_file), "--json",
                  json.dumps([{RAIN: "lots", HUMIDITY: 50}, {RAIN: 1.0, DRAINAGE: "1.000,5", HUMIDITY: 50}]),
                  home=home)
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert "is 'lots', neither a finite number nor one of the values read as missing ('T')" in refused.output
    assert "is '1.000,5', not a finite number (as text, written 1,234.56)" in refused.output
