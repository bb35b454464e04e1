"""A user's own table, no code edited: `turbotfx init` then `turbotfx run --dataset FILE`, for
a binary label in CSV and a regression label in Parquet, each with awkward column names, an
ID column, a constant column, an integer categorical (named as a code), a whole-number
quantity, a string categorical and missing
values. Predictions are checked through serving_default with tf.Examples built here from
the data rows, not with the project's client."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from pipeline import datasets
from pipeline.scoring.inputs import row_schema
from serving.client import ServingClient
from tests import conftest
from tests.conftest import cli, turbotfx
from tests.doubles.tf_serving import FakeTfServing

pytestmark = pytest.mark.e2e

ROWS = 500
# Columns as people name them: a space, a slash, parentheses, a dot, mixed case.
ID, CHARGES, TENURE, PLAN, SEATS, REGION = ("customer id", "Monthly Charges", "tenure (months)",
                                            "plan/type", "Seat type", "region")
CHURNED, SPEND = "churned", "annual spend.usd"


def customers(seed: int) -> pd.DataFrame:
    """Customers whose churn and spend follow known rules (little noise: learnable in a few
    epochs)."""
    rng = np.random.default_rng(seed)
    tenure = rng.integers(0, 73, ROWS)
    charges = np.round(rng.normal(70, 20, ROWS), 2)
    plan = rng.choice(["basic", "plus", "pro"], ROWS)
    seats = rng.choice([1, 2, 5], ROWS)
    # "yes" is the commoner value: the file's positive class ("yes") is not the rarer one.
    churn_score = (charges - 70) / 20 - (tenure - 36) / 18 + np.where(plan == "basic", 1.0, -0.5) + 0.6
    frame = pd.DataFrame({
        ID: [f"C{i:05d}" for i in range(ROWS)],
        CHARGES: charges,
        TENURE: tenure,
        PLAN: plan,
        SEATS: seats,
        REGION: "EU",
        CHURNED: np.where(churn_score + rng.normal(0, 0.3, ROWS) > 0, "yes", "no"),
        SPEND: np.round(12 * charges + 20 * tenure + 300 * seats + rng.normal(0, 40, ROWS), 2),
    })
    missing = rng.random(ROWS) < 0.04
    frame.loc[missing, CHARGES] = np.nan
    frame.loc[rng.random(ROWS) < 0.04, PLAN] = None
    return frame


def example(row: pd.Series, types: dict[str, str]) -> bytes:
    """A tf.Example typed as ExampleGen parses the data: integers int64, decimals float,
    text bytes; a missing value is an absent feature."""
    features = {}
    for name, kind in types.items():
        value = row[name]
        if value is None or (isinstance(value, float) and np.isnan(value)):
            continue
        if kind == "int":
            features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(value)]))
        elif kind == "float":
            features[name] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            features[name] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[str(value).encode()]))
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


FEATURE_TYPES = {ID: "bytes", CHARGES: "float", TENURE: "int", PLAN: "bytes", SEATS: "int", REGION: "bytes"}


def init_and_run(tmp_path: Path, frame: pd.DataFrame, label: str, fmt: str, run_args: tuple[str, ...] = (),
                 **to_csv: Any) -> tuple[Path, Path, str]:
    """`turbotfx init` on the table (a CSV written with pandas' to_csv and these options),
    then `turbotfx run` on the file it wrote; returns the dataset file, the pushed model and
    init's output."""
    data_root = tmp_path / "data"
    data_root.mkdir()
    table = frame.drop(columns=[CHURNED if label == SPEND else SPEND])
    if fmt == "csv":
        table.to_csv(data_root / "part-0.csv", index=False, **to_csv)
    else:
        table.to_parquet(data_root / "part-0.parquet", index=False)
    # Private rows: no copy of them may be readable by other users (conftest.open_to_others).
    for written in data_root.iterdir():
        written.chmod(0o600)
    data_root.chmod(0o700)
    dataset_file = tmp_path / "mine.toml"
    init, model_dir = conftest.init_and_run(data_root, label, dataset_file, tmp_path / "ws", "--epochs", "20",
                                            *run_args)
    return dataset_file, model_dir, init.output


def _latest_model(home: Path):
    from pipeline.config import PipelineConfig
    from pipeline.store.connection import open_store
    from pipeline.store.url import sqlite_url

    store = open_store(sqlite_url(PipelineConfig(home=str(home)).metadata_path), create=False)
    return max(store.get_artifacts_by_type("Model"), key=lambda artifact: artifact.id)


def serving_default(model_dir: Path, frame: pd.DataFrame) -> dict[str, np.ndarray]:
    signature = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    examples = [example(row, FEATURE_TYPES) for _, row in frame.iterrows()]
    return {key: value.numpy() for key, value in signature(examples=tf.constant(examples)).items()}


def test_binary_csv_table(tmp_path):
    frame = customers(seed=1)
    dataset_file, model_dir, init_output = init_and_run(tmp_path, frame, CHURNED, "csv",
                                                        run_args=("--class-weight", "balanced"))
    # init said what it decided and why, column by column.
    assert "binary" in init_output
    assert 'positive = "yes"' in dataset_file.read_text()
    assert (frame[CHURNED] == "yes").mean() > 0.55
    for column in (ID, REGION, PLAN, SEATS, CHARGES, TENURE):
        assert column in init_output
    # Whole numbers: a code by its name (an integer vocabulary), a count (numeric).
    roles = {feature.name: feature.role for feature in datasets.load(str(dataset_file)).features}
    assert (roles[SEATS], roles[TENURE]) == ("categorical", "numeric"), roles

    # Balanced class weights reached the Trainer's fit: each class n / (2 n_class) over the
    # train split's rows as ExampleGen wrote them ("yes", the positive class, is id 1).
    train_labels = [tf.train.Example.FromString(record.numpy()).features.feature[CHURNED].bytes_list.value[0]
                    for record in tf.data.TFRecordDataset(
                        [str(p) for p in (tmp_path / "ws" / "pipelines").rglob("CsvExampleGen/**/Split-train/*.gz")],
                        compression_type="GZIP")]
    counts = {class_id: train_labels.count(value) for class_id, value in ((0, b"no"), (1, b"yes"))}
    expected = {str(class_id): len(train_labels) / (2 * count) for class_id, count in counts.items()}
    recorded = json.loads(_latest_model(tmp_path / "ws").custom_properties["training_class_weights"].string_value)
    assert recorded == pytest.approx(expected, abs=1e-4) and recorded["0"] > 1 > recorded["1"], recorded

    # The run's copies of the rows, its store, serving config and report: the owner's alone.
    assert conftest.open_to_others(tmp_path / "ws") == []
    assert list((tmp_path / "ws" / "pipelines").rglob("Split-train/*.gz"))  # ExampleGen's copy is there
    outputs = serving_default(model_dir, frame)
    assert outputs["probabilities"].dtype == np.float32 and outputs["probabilities"].shape == (ROWS, 2)
    labels = np.array([label.decode() for label in outputs["label"]])
    assert set(labels) <= {"yes", "no"}
    # Rows of each class are mostly predicted as that class (a constant model fails one).
    for cls in ("yes", "no"):
        rows = frame[CHURNED].to_numpy() == cls
        assert (labels[rows] == cls).mean() > 0.7, cls

    # serving_raw takes the features by their TF identifiers (a signature argument cannot
    # hold a space); integers as floats, NaN or "" where missing.
    raw = tf.saved_model.load(str(model_dir)).signatures["serving_raw"]
    first = frame.iloc[:5]
    raw_out = raw(**{
        "Monthly_Charges": tf.constant(first[CHARGES].astype("float32").to_numpy()),
        "tenure_months": tf.constant(first[TENURE].astype("float32").to_numpy()),
        "plan_type": tf.constant(first[PLAN].fillna("").astype(str).to_numpy()),
        "Seat_type": tf.constant(first[SEATS].astype("float32").to_numpy()),
    })
    np.testing.assert_allclose(raw_out["probabilities"].numpy(), outputs["probabilities"][:5], atol=1e-5)

    # `turbotfx predict` takes the original column names.
    predicted = cli("predict", "--dataset", str(dataset_file), "--format", "json", "--json",
                         json.dumps({CHARGES: 95.0, TENURE: 2, PLAN: "basic", SEATS: 1}), home=tmp_path / "ws")
    assert predicted.exit_code == 0, predicted.output
    assert json.loads(predicted.stdout)["predictions"][0]["label"] == "yes"

    # Lineage names the dataset file; a changed file shows in diff.
    lineage = turbotfx("lineage", "--latest", "--format", "json", home=tmp_path / "ws")
    assert lineage.exit_code == 0, lineage.output
    recorded = json.loads(lineage.stdout)["dataset"]
    assert recorded["file"] == str(dataset_file) and recorded["task"] == "binary"
    assert recorded["text"] == dataset_file.read_text()
    # A changed knob in the file (the run's --epochs keeps the training itself alike).
    written = dataset_file.read_text()
    epochs = int(re.search(r"^epochs = (\d+)$", written, re.M)[1])
    dataset_file.write_text(written.replace(f"epochs = {epochs}", f"epochs = {epochs + 1}"))
    assert f"epochs = {epochs + 1}" in dataset_file.read_text()
    rerun = cli("run", "--dataset", str(dataset_file), "--epochs", "20", *conftest.ONE_MODEL_ARGS,
                     home=tmp_path / "ws")
    assert rerun.exit_code == 0, rerun.output
    runs = json.loads(turbotfx("runs", "--format", "json", home=tmp_path / "ws").stdout)
    newer, older = runs[0]["model_id"], runs[1]["model_id"]
    assert runs[0]["metric"] == "auc[yes]"  # the binary task's blessing metric, named by its positive class
    diff = turbotfx("diff", str(older), str(newer), "--format", "json", home=tmp_path / "ws")
    assert diff.exit_code == 0, diff.output
    assert set(json.loads(diff.stdout)["dataset"]) == {"fingerprint"}


def test_a_csv_with_a_byte_order_mark_and_every_field_quoted(tmp_path):
    # Excel's "CSV UTF-8" starts with a byte-order mark; R's write.csv and other RFC 4180
    # writers quote every field, names too; a value may hold a comma and quotes.
    frame = customers(seed=1)
    frame[PLAN] = frame[PLAN].replace({"pro": 'pro, "annual"'})
    _, model_dir, init_output = init_and_run(tmp_path, frame, CHURNED, "csv",
                                             encoding="utf-8-sig", quoting=csv.QUOTE_ALL)
    written = (tmp_path / "data" / "part-0.csv").read_bytes()
    assert written.startswith(b'\xef\xbb\xbf"customer id","Monthly Charges"') and b'"pro, ""annual"""' in written
    assert "binary" in init_output
    # The model takes the columns by their names as written, without the mark or quotes,
    # and the quoted values as they were: rows of each class are mostly predicted as it.
    labels = np.array([label.decode() for label in serving_default(model_dir, frame)["label"]])
    for cls in ("yes", "no"):
        rows = frame[CHURNED].to_numpy() == cls
        assert (labels[rows] == cls).mean() > 0.7, cls


def test_regression_parquet_table(tmp_path):
    frame = customers(seed=2)
    # The label restated in thousands, as a spreadsheet's derived column would: init must set
    # it aside as a leak, and the model must do well without it.
    frame["spend k"] = (frame[SPEND] / 1000).round(4)
    dataset_file, model_dir, init_output = init_and_run(tmp_path, frame, SPEND, "parquet")
    assert "regression" in init_output
    [leak_line] = [line for line in init_output.splitlines() if line.split()[:2] == ["spend", "k"]]
    assert leak_line.split()[2] == "ignore" and "leak? alone it predicts the label with R² " in leak_line
    assert "spend k" not in [f.name for f in datasets.load(str(dataset_file)).model_features]

    outputs = serving_default(model_dir, frame)
    assert set(outputs) == {"prediction"}
    prediction = outputs["prediction"]
    assert prediction.dtype == np.float32 and prediction.shape == (ROWS,)
    truth = frame[SPEND].to_numpy()
    rmse = float(np.sqrt(np.mean((prediction - truth) ** 2)))
    # Far better than predicting the mean (whose error is the standard deviation).
    assert rmse < 0.5 * truth.std(), (rmse, truth.std())

    # The client takes the original column names over gRPC (serving_default) and REST
    # (serving_raw, whose arguments are TF identifiers); both give the in-process values.
    rows = [{CHARGES: None if np.isnan(r[CHARGES]) else float(r[CHARGES]), TENURE: int(r[TENURE]),
             PLAN: r[PLAN], SEATS: int(r[SEATS])} for _, r in frame.iloc[:4].iterrows()]
    schema = row_schema(datasets.load(str(dataset_file)))
    with FakeTfServing("mine", {1: str(model_dir)}) as server:
        for where in ({"grpc_target": server.grpc_target}, {"rest_url": server.rest_url}):
            client = ServingClient(**where, schema=schema, model_name="mine", backoff_s=0.01)
            values = [p.value for p in client.predict(rows)]
            np.testing.assert_allclose(values, prediction[:4], rtol=1e-4, err_msg=str(where))
