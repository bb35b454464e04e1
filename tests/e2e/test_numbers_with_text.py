"""A number column with a text value, as weather records have it ("T": a trace of rain), no
code edited: init makes it numeric with "T" read as missing, the run blesses and pushes a
model that tells a trace from a dry day, and serving takes numbers and "T" alike."""

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
RAIN, HUMIDITY, WET = "rain (mm)", "humidity", "wet roads"


def weather(seed: int = 0) -> pd.DataFrame:
    """Wet roads after more than about 2.5 mm of rain, or a trace ("T", which this table's
    recorders wrote for rain too little to measure, on roads that stay wet). The mean of
    the measured rain is below 2.5: a trace imputed as the mean alone looks dry."""
    rng = np.random.default_rng(seed)
    rain = np.round(rng.exponential(1.5, ROWS), 1)
    trace = rng.random(ROWS) < 0.15
    # Some noise: a label that is an exact function of one column is a leak to init.
    wet = (rain + rng.normal(0, 0.4, ROWS) > 2.5) | trace
    return pd.DataFrame({
        RAIN: np.where(trace, "T", rain.astype(str)),
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
    feature = next(f for f in datasets.load(str(dataset_file)).features if f.name == RAIN)
    assert (feature.role, feature.missing_values) == ("numeric", ("T",))

    raw = tf.saved_model.load(str(model_dir)).signatures["serving_raw"]
    out = raw(rain_mm=tf.constant(frame[RAIN].tolist()), humidity=tf.constant(frame[HUMIDITY], tf.float32))
    labels = np.array([label.decode() for label in out["label"].numpy()])
    for cls in ("yes", "no"):
        rows = frame[WET].to_numpy() == cls
        assert (labels[rows] == cls).mean() > 0.8, cls
    # A trace is wet; the same row with its rain unknown is not (the mean is dry).
    trace, unknown, heavy = raw(rain_mm=tf.constant(["T", "", "6.0"]),
                                humidity=tf.constant([50.0, 50.0, 50.0]))["label"].numpy()
    assert (trace, unknown, heavy) == (b"yes", b"no", b"yes")

    # predict: numbers as numbers, the named text as text; other text is named before sending.
    answered = cli("predict", "--dataset", str(dataset_file), "--format", "json", "--json",
                        json.dumps([{RAIN: 0.2, HUMIDITY: 50}, {RAIN: "T", HUMIDITY: 50}]), home=home)
    assert answered.exit_code == 0, answered.output
    assert [p["label"] for p in json.loads(answered.stdout)["predictions"]] == ["no", "yes"]
    refused = cli("predict", "--dataset", str(dataset_file), "--json",
                       json.dumps({RAIN: "lots", HUMIDITY: 50}), home=home)
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert "is 'lots', neither a finite number nor one of the values read as missing ('T')" in refused.output
