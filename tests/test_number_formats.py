"""Numbers with digit grouping ("12,000", "1,234.56", "1.234,56"), as spreadsheets and
locales export them: init reads such a column as numbers and says how they are written, the
dataset file carries its number_format, Transform drops the grouping, and predict's row
checks take numbers in that format only."""

from __future__ import annotations

import functools
import tempfile
from typing import Any

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform.beam as tft_beam
from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from pipeline import datasets
from pipeline.errors import ConfigError
from pipeline.pipeline import TRANSFORM_FORCE_TF_COMPAT_V1
from serving.errors import RowError
from serving.rows import RowSchema
from tests import one_column
from trainer_module import features, preprocessing

US, EU = "1,234.56", "1.234,56"
SPEC = features.FeatureSpec(dataset="p", task=features.REGRESSION, label_key="y", numeric_keys=("price", "preis"),
                            categoricals=(), number_formats=(("price", US), ("preis", EU)))
# Each cell with the number a person reads in it (None: no number).
PRICES = [(b"12,000", 12000.0), (b"1,234.56", 1234.56), (b" 7 ", 7.0), (b"-3,000.5", -3000.5),
          (b"1.234,56", None), (b"12,00", None), (None, None)]
PREISE = [(b"1.234,56", 1234.56), (b"7,5", 7.5), (b"12", 12.0), (b"-1.000.000", -1e6),
          (b"1,234.56", None), (b"1.5", None), (None, None)]


@pytest.fixture(scope="module")
def transformed():
    raw_spec = {"price": tf.io.VarLenFeature(tf.string), "preis": tf.io.VarLenFeature(tf.string),
                "y": tf.io.FixedLenFeature([1], tf.float32)}
    rows = [{"price": [price] if price is not None else [], "preis": [preis] if preis is not None else [],
             "y": [0.0]} for (price, _), (preis, _) in zip(PRICES, PREISE)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (out, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            functools.partial(preprocessing.preprocessing_fn, custom_config={features.CONFIG_KEY: SPEC.to_config()}))
    return out


@pytest.mark.parametrize("key, cells", [("price", PRICES), ("preis", PREISE)])
def test_transform_reads_each_column_in_its_format(transformed, key, cells):
    scaled = np.array([row[features.transformed_name(key)] for row in transformed])
    readable = np.array([number for _, number in cells if number is not None])
    present = [number is not None for _, number in cells]
    np.testing.assert_allclose(scaled[present], (readable - readable.mean()) / readable.std(), rtol=1e-4)
    # Another format's number, a malformed grouping, an empty cell: missing (the mean).
    np.testing.assert_allclose(scaled[np.logical_not(present)], 0.0, atol=1e-6)


def test_the_spec_keeps_the_formats():
    assert features.FeatureSpec.from_config(SPEC.to_config()) == SPEC


def test_init_reads_grouped_numbers_as_numbers():
    rng = np.random.default_rng(0)
    amounts = rng.uniform(0, 2_000_000, 300)
    us = [f"{v:,.2f}" for v in amounts]
    whole = [f"{round(v):,}" for v in amounts]
    eu = [f"{v:,.2f}".replace(",", " ").replace(".", ",").replace(" ", ".") for v in amounts]
    # A trace ("T") in as many rows as are empty: the empty cells are missing, not a text.
    with_text = whole[:280] + ["T"] * 10 + [None] * 10
    decisions = one_column.decisions({"price": us, "salary": whole, "preis": eu, "rain": with_text})
    assert (decisions["price"].role, decisions["price"].number_format) == ("numeric", US)
    assert "numbers written 1,234.56" in decisions["price"].reason
    # "12,000" alone could be twelve (a decimal comma) or twelve thousand: grouping first.
    assert (decisions["salary"].role, decisions["salary"].number_format) == ("numeric", US)
    assert (decisions["preis"].role, decisions["preis"].number_format) == ("numeric", EU)
    rain = decisions["rain"]
    assert (rain.role, rain.number_format, rain.missing_values) == ("numeric", US, ("T",))
    assert "numbers written 1,234.56, and 'T' in 10 rows: read as missing" in rain.reason


def test_plain_numbers_and_few_grouped_values_keep_their_roles():
    decisions = one_column.decisions({
        "plain": [f"{v:.1f}" if i % 10 else "T" for i, v in enumerate(np.linspace(0, 5, 300))],
        "thousands": [f"{(i % 5 + 1) * 1000:,}" for i in range(300)],  # five values: categories
    })
    assert (decisions["plain"].role, decisions["plain"].number_format) == ("numeric", None)
    assert decisions["thousands"].role == "categorical"


def test_the_dataset_file_carries_the_format_to_transform(tmp_path):
    spec = datasets.load(one_column.dataset_file(tmp_path, "price", f'{{role = "numeric", number_format = "{EU}"}}'))
    assert spec.feature_spec().number_formats == (("price", EU),)
    assert spec.feature_spec().missing_values == ()


@pytest.mark.parametrize("price, message", [
    ('"numeric"', 'or the way its numbers are written: {role = "numeric", number_format = "1,234.56"}'),
    ('{role = "numeric", number_format = "1 234,56"}', "number_format: '1 234,56' is not one of 1,234.56, 1.234,56"),
    (f'{{role = "categorical", number_format = "{US}"}}', "number_format: applies to numeric features only"),
])
def test_a_wrong_format_is_one_error(tmp_path, price, message):
    with pytest.raises(ConfigError, match="price") as raised:
        datasets.load(one_column.dataset_file(tmp_path, "price", price))
    assert message in str(raised.value)


def test_predict_takes_numbers_in_the_columns_format():
    schema = schema_pb2.Schema()
    schema.feature.add(name="price", type=schema_pb2.BYTES)
    schema.feature.add(name="preis", type=schema_pb2.BYTES)
    schema.feature.add(name="y", type=schema_pb2.FLOAT)
    rows = RowSchema(schema, "y", number_formats={"price": US, "preis": EU})
    good: list[dict[str, Any]] = [{"price": "12,000", "preis": "1.234,5"}, {"price": 1234.5, "preis": 1234.5},
                                  {"price": 3, "preis": 1e20}]
    rows.check(good)
    # A number sent as a number reaches the model as text its graph reads in that format.
    assert [(rows.to_instance(row)["price"], rows.to_instance(row)["preis"]) for row in good] == [
        ("12,000", "1.234,5"), ("1234.5", "1234,5"), ("3", "100000000000000000000")]
    example = tf.train.Example.FromString(rows.to_example({"preis": 0.25}))
    assert example.features.feature["preis"].bytes_list.value == [b"0,25"]
    with pytest.raises(RowError) as raised:
        rows.check([{"price": "1.234,5"}, {"preis": "1,234.5"}, {"price": "T"}])
    assert [problem.split(": ", 1)[1] for problem in raised.value.problems] == [
        "feature 'price' is '1.234,5', not a finite number (as text, written 1,234.56); give a number, or null "
        "(None) where it is missing",
        "feature 'preis' is '1,234.5', not a finite number (as text, written 1.234,56); give a number, or null "
        "(None) where it is missing",
        "feature 'price' is 'T', not a finite number (as text, written 1,234.56); give a number, or null "
        "(None) where it is missing"]
