"""A number column with a few text values ("T" for a trace of rain): Transform parses the
numbers and reads the named texts as missing with an indicator; init names them; the dataset
file and predict's row checks know them."""

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

SPEC = features.FeatureSpec(dataset="w", task=features.REGRESSION, label_key="y", numeric_keys=("rain mm",),
                            categoricals=(), missing_values=(("rain mm", ("T",)),))
RAIN = [b"0.5", b"T", None, b" 1.5 ", b"lots", b"2.5e0"]


@pytest.fixture(scope="module")
def transformed():
    raw_spec = {"rain mm": tf.io.VarLenFeature(tf.string), "y": tf.io.FixedLenFeature([1], tf.float32)}
    rows = [{"rain mm": [value] if value is not None else [], "y": [0.0]} for value in RAIN]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (out, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            functools.partial(preprocessing.preprocessing_fn, custom_config={features.CONFIG_KEY: SPEC.to_config()}))
    return out


def test_numbers_in_text_are_parsed_the_rest_missing(transformed):
    scaled = np.array([row[features.transformed_name("rain mm")] for row in transformed])
    readable = np.array([0.5, 1.5, 2.5])  # z-scored over the three numbers only
    expected = (readable - readable.mean()) / readable.std()
    np.testing.assert_allclose(scaled[[0, 3, 5]], expected, atol=1e-5)
    # "T", an empty value and text that is no number: imputed with the mean.
    np.testing.assert_allclose(scaled[[1, 2, 4]], 0.0, atol=1e-6)


def test_the_indicator_marks_the_named_values_only(transformed):
    marked = [row[features.indicator_name("rain mm")] for row in transformed]
    assert marked == [0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert features.indicator_name("rain mm") in SPEC.numeric_inputs
    assert features.FeatureSpec.from_config(SPEC.to_config()) == SPEC


def test_init_names_the_text_values_of_a_number_column():
    rng = np.random.default_rng(0)
    rain = [f"{v:.1f}" for v in rng.exponential(2.0, 300)]
    rain[::10] = ["T"] * 30
    rain[5::50] = ["M"] * 6
    counts = [str(v) for v in rng.integers(0, 200, 300)]
    counts[::25] = ["none"] * 12
    decisions = one_column.decisions({
        "rain": rain,
        "visitors": counts,
        "stars": [str(v) if i % 9 else "none" for i, v in enumerate(rng.integers(1, 6, 300))],
        "mixed": [str(v) if i % 3 else ["a", "b", "c", "d"][i % 4] for i, v in enumerate(rng.random(300))],
    })
    rain_decision = decisions["rain"]
    assert (rain_decision.role, rain_decision.missing_values) == ("numeric", ("T", "M"))
    assert "numbers, and 'T' in 30 rows, 'M' in 6 rows: read as missing, with an indicator" in rain_decision.reason
    # Many whole numbers and one text: a quantity.
    assert (decisions["visitors"].role, decisions["visitors"].missing_values) == ("numeric", ("none",))
    # Five whole numbers and a text: still categories, as five whole numbers alone are.
    assert decisions["stars"].role == "categorical" and decisions["stars"].missing_values == ()
    # Four different texts among the numbers: more than a few, so not numbers with gaps.
    assert decisions["mixed"].role != "numeric"


def test_empty_cells_are_missing_not_one_of_the_texts():
    # As many empty cells as "T"s: the texts' counts tie with the empty cells' (init crashed).
    rain = [f"{tenths / 10:.1f}" for tenths in range(280)] + ["T"] * 10 + [None] * 10
    decision = one_column.decisions({"rain": rain})["rain"]
    assert (decision.role, decision.missing_values) == ("numeric", ("T",))
    assert decision.reason == ("numbers, and 'T' in 10 rows: read as missing, with an indicator; "
                               "10 of 300 rows empty (imputed)")


def test_the_dataset_file_carries_the_values_to_transform(tmp_path):
    spec = datasets.load(one_column.dataset_file(tmp_path, "rain mm", '{role = "numeric", missing_values = ["T", " n/a "]}'))
    assert spec.feature_spec().missing_values == (("rain mm", ("T", "n/a")),)


@pytest.mark.parametrize("rain, message", [
    ('"numeric"', "numeric, but the schema types it BYTES; make it categorical or ignore (text cannot be "
                  "scaled), name the text values that stand for no number"),
    ('{role = "categorical", missing_values = ["T"]}', "missing_values: applies to numeric features only"),
    ('{role = "numeric", missing_values = "T"}', "missing_values: 'T' is not a list"),
    ('{role = "numeric", missing_values = [""]}', "missing_values: [''] is not a list of texts"),
])
def test_a_wrong_setting_is_one_error(tmp_path, rain, message):
    with pytest.raises(ConfigError, match="rain mm") as raised:
        datasets.load(one_column.dataset_file(tmp_path, "rain mm", rain))
    assert message in str(raised.value)


def test_predict_takes_numbers_and_the_named_values_only():
    schema = schema_pb2.Schema()
    schema.feature.add(name="rain mm", type=schema_pb2.BYTES)
    schema.feature.add(name="y", type=schema_pb2.FLOAT)
    rows = RowSchema(schema, "y", missing_values={"rain mm": ["T"]})
    good: list[dict[str, Any]] = [{"rain mm": 0.25}, {"rain mm": "T"}, {"rain mm": "1.5"}, {"rain mm": 3}]
    rows.check(good)
    assert [rows.to_instance(row)["rain_mm"] for row in good] == ["0.25", "T", "1.5", "3"]
    example = tf.train.Example.FromString(rows.to_example({"rain mm": 0.25}))
    assert example.features.feature["rain mm"].bytes_list.value == [b"0.25"]
    with pytest.raises(RowError) as raised:
        rows.check([{"rain mm": "lots"}, {"rain mm": float("inf")}, {"rain mm": True}])
    assert len(raised.value.problems) == 3
    assert "is 'lots', neither a finite number nor one of the values read as missing ('T')" in \
        raised.value.problems[0]
