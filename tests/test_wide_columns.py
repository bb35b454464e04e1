"""Wide tables at a cost that does not grow with a Beam stage or a layer per column: one
packed vocabulary for every plain categorical (ids as each column's own vocabulary gives
them), and one layer for all the numbers and one for all the one-hots."""

from __future__ import annotations

import collections
import functools
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, metadata_io, schema_utils

from trainer_module import features, layers, model, preprocessing

SPEC = features.FeatureSpec(
    dataset="w", task=features.BINARY, label_key="y", numeric_keys=(),
    categoricals=(features.Categorical("colour"), features.Categorical("grade"), features.Categorical("size"),
                  features.Categorical("shop code"),
                  features.Categorical("rare", max_tokens=2)))
# grade is always present (dense) among columns that may be missing (sparse), of two dtypes.
RAW_SPEC = {"colour": tf.io.VarLenFeature(tf.string), "grade": tf.io.FixedLenFeature([1], tf.int64),
            "size": tf.io.VarLenFeature(tf.string),
            "shop code": tf.io.VarLenFeature(tf.int64), "rare": tf.io.VarLenFeature(tf.string),
            "y": tf.io.FixedLenFeature([1], tf.string)}


def _rows(seed: int, count: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(count):
        row = {"colour": [rng.choice([b"red", b"blue", b"green"], p=[0.5, 0.3, 0.2])],
               # The same texts as colour, at other frequencies: a value is its column's.
               "size": [rng.choice([b"S", b"M", b"red"], p=[0.2, 0.5, 0.3])],
               "shop code": [int(rng.choice([7, 3, 11, 5]))],
               "grade": [int(rng.choice([1, 2, 3], p=[0.2, 0.3, 0.5]))],
               "rare": [rng.choice([b"a", b"b", b"c"])], "y": [b"yes"]}
        if rng.random() < 0.1:
            row["colour"] = []  # missing: its own id, as in a column's own vocabulary
        rows.append(row)
    return rows


TRAIN, NEW = _rows(0, 400), _rows(1, 50)
NEW[0] = {**NEW[0], "colour": [b"purple"], "shop code": [99]}  # unseen in training


@pytest.mark.parametrize("compat_v1", [True, False])
def test_packed_ids_are_each_columns_own_vocabulary_ids(tmp_path, compat_v1):
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(RAW_SPEC))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=compat_v1):
        transform_fn = (TRAIN, metadata) | tft_beam.AnalyzeDataset(
            functools.partial(preprocessing.preprocessing_fn, custom_config={features.CONFIG_KEY: SPEC.to_config()}))
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp_path))
    metadata_io.write_metadata(metadata, str(tmp_path / "metadata"))  # the raw schema, as Transform writes it
    # Served as the Trainer's SavedModel serves it: the graph loaded from disk.
    output = tft.TFTransformOutput(str(tmp_path))
    layer = output.transform_features_layer()
    parsed = tf.io.parse_example([_example(row) for row in NEW], output.raw_feature_spec())
    got = {key: value.numpy() for key, value in layer(parsed).items()}
    for key, missing in (("colour", b""), ("grade", -1), ("size", b""), ("shop code", -1)):
        counts = collections.Counter(row[key][0] if row[key] else missing for row in TRAIN)
        # TFT's order: by count, then by value, both descending.
        order = sorted(counts, key=lambda value: (counts[value], str(value).encode()
                                                  if not isinstance(value, bytes) else value), reverse=True)
        ids = {value: index for index, value in enumerate(order)}
        expected = [ids.get(row[key][0] if row[key] else missing, len(order)) for row in NEW]
        assert got[features.transformed_name(key)].tolist() == expected, key
    # Unseen: the column's size (colour: red, blue, green and missing; four shop codes).
    assert got["colour_xf"][0] == 4 and got["shop_code_xf"][0] == 4
    # The Trainer's sizes, from the packed file; a column with settings keeps its own file.
    tokens = output.vocabulary_by_name(features.PACKED_VOCABULARY)
    assert features.packed_sizes(tokens, 4) == [4, 3, 3, 4]
    assert output.vocabulary_size_by_name(features.vocabulary_name("rare")) == 2


def _example(row: dict) -> bytes:
    feature = {}
    for key, values in row.items():
        if values and isinstance(values[0], (int, np.integer)):
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))
        else:
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=list(values)))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_one_layer_for_every_number_and_every_one_hot():
    spec = features.FeatureSpec(dataset="w", task=features.BINARY, label_key="y",
                                numeric_keys=tuple(f"x{i}" for i in range(40)),
                                categoricals=tuple(features.Categorical(f"c{i}") for i in range(40)))
    built = model.build_model(spec, {f"c{i}": 5 for i in range(40)}, num_classes=2, compiled=False)
    kinds = collections.Counter(type(layer).__name__ for layer in built.layers)
    assert kinds["StackedColumns"] == 1 and kinds["OneHots"] == 1
    assert sum(kinds.values()) - kinds["InputLayer"] < 10


def test_the_stacked_layers_compute_what_a_layer_per_column_does():
    numbers = layers.StackedColumns()([tf.constant([1.0, 2.0]), tf.constant([[3.0], [4.0]])]).numpy()
    np.testing.assert_array_equal(numbers, [[1.0, 3.0], [2.0, 4.0]])
    one_hots = layers.OneHots([2, 3])([tf.constant([1, 0], tf.int64), tf.constant([2, 5], tf.int64)]).numpy()
    np.testing.assert_array_equal(one_hots, [[0, 1, 0, 0, 1], [1, 0, 0, 0, 0]])


@pytest.mark.parametrize("compat_v1", [True, False])
def test_numbers_are_z_scored_together_as_each_alone(compat_v1):
    spec = features.FeatureSpec(dataset="w", task=features.REGRESSION, label_key="y",
                                numeric_keys=("a", "b b", "c"), categoricals=())
    raw_spec = {"a": tf.io.VarLenFeature(tf.float32), "b b": tf.io.FixedLenFeature([1], tf.int64),
                "c": tf.io.VarLenFeature(tf.float32), "y": tf.io.FixedLenFeature([1], tf.float32)}
    rng = np.random.default_rng(0)
    a = rng.normal(5, 2, 30)
    b = rng.integers(0, 100, 30)
    a_present = rng.random(30) > 0.3
    rows = [{"a": [a[i]] if a_present[i] else [], "b b": [int(b[i])], "c": [7.0] if i % 2 else [], "y": [0.0]}
            for i in range(30)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=compat_v1):
        (out, _), _ = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            functools.partial(preprocessing.preprocessing_fn, custom_config={features.CONFIG_KEY: spec.to_config()}))
    got = {key: np.array([row[features.transformed_name(key)] for row in out]) for key in ("a", "b b", "c")}
    present = a[a_present]
    np.testing.assert_allclose(got["a"][a_present], (present - present.mean()) / present.std(), rtol=1e-4)
    np.testing.assert_allclose(got["a"][~a_present], 0.0, atol=1e-6)  # missing: the mean
    np.testing.assert_allclose(got["b b"], (b - b.mean()) / b.std(), rtol=1e-4, atol=1e-5)
    # A constant column (and its missing rows) is 0, not a division by zero.
    np.testing.assert_allclose(got["c"], 0.0, atol=1e-6)
