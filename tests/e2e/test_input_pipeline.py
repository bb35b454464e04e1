"""The Trainer's input pipeline against tfxio's (the way TFX's examples read), on the
first run's real Transform output."""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from pipeline import datasets
from trainer_module import input

pytestmark = pytest.mark.e2e

SPEC = datasets.load("penguins").feature_spec()
LABEL = SPEC.transformed_label_key


def _transform_outputs(first_run):
    root = first_run.config.pipeline_root / "Transform"
    examples = sorted((root / "transformed_examples").iterdir())[-1]
    graph = sorted((root / "transform_graph").iterdir())[-1]
    return examples, tft.TFTransformOutput(str(graph))


def _rows(dataset: tf.data.Dataset) -> np.ndarray:
    """Every example of an epoch as one row (label last), sorted: order-free comparison."""
    columns: dict[str, list] = {}
    for features, label in dataset:
        for name in sorted(features):
            columns.setdefault(name, []).append(features[name].numpy().astype("float64"))
        columns.setdefault("~label", []).append(label.numpy().astype("float64"))
    table = np.stack([np.concatenate(columns[name]) for name in sorted(columns)], axis=1)
    return table[np.lexsort(table.T[::-1])]


def _tfxio_rows(split_dir, tf_transform_output) -> np.ndarray:
    from tfx_bsl.public import tfxio

    source = tfxio.TFExampleRecord(
        file_pattern=[str(split_dir / "*")], schema=tf_transform_output.transformed_metadata.schema)
    dataset = source.TensorFlowDataset(tfxio.TensorFlowDatasetOptions(batch_size=50, num_epochs=1, shuffle=False,
                                                                      label_key=LABEL))
    return _rows(dataset)


@pytest.mark.parametrize("split", ["train", "eval"])
def test_every_example_is_read_once_per_epoch_as_tfxio_reads_it(first_run, split):
    examples, tf_transform_output = _transform_outputs(first_run)
    split_dir = examples / f"Split-{split}"
    expected = _tfxio_rows(split_dir, tf_transform_output)
    pattern = [str(split_dir / "*")]
    for shuffle in (False, True):
        dataset = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=32, shuffle=shuffle)
        np.testing.assert_array_equal(_rows(dataset), expected)
        # The second epoch (from the cache) holds the same examples.
        np.testing.assert_array_equal(_rows(dataset), expected)
    assert input.batches_per_epoch(dataset, pattern, 32) == math.ceil(len(expected) / 32)
    dropping = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=32, shuffle=True,
                                   drop_remainder=True)
    assert input.batches_per_epoch(dropping, pattern, 32) == len(expected) // 32


def test_data_too_large_to_cache_is_counted_from_its_records(first_run, monkeypatch):
    examples, tf_transform_output = _transform_outputs(first_run)
    split_dir = examples / "Split-train"
    expected = len(_tfxio_rows(split_dir, tf_transform_output))
    monkeypatch.setattr(input, "CACHE_LIMIT_BYTES", 0)
    pattern = [str(split_dir / "*")]
    dataset = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=32, shuffle=True)
    assert input.batches_per_epoch(dataset, pattern, 32) == math.ceil(expected / 32)
    dropping = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=32, shuffle=True,
                                   drop_remainder=True)
    assert input.batches_per_epoch(dropping, pattern, 32) == expected // 32
    assert len(_rows(dataset)) == expected
    # Nothing was cached: every epoch reads the files.
    assert len(_rows(dataset)) == expected


def test_shuffled_epochs_differ_in_order_and_full_batches_keep_their_shape(first_run):
    examples, tf_transform_output = _transform_outputs(first_run)
    pattern = [str(examples / "Split-train" / "*")]
    dataset = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=32, shuffle=True,
                                  drop_remainder=True)
    epochs = [np.concatenate([label.numpy() for _, label in dataset]) for _ in range(3)]
    assert all(len(epoch) == len(epochs[0]) for epoch in epochs)
    assert any(not np.array_equal(epochs[0], other) for other in epochs[1:])
    assert dataset.element_spec[1].shape.as_list() == [32]


def test_no_transformed_examples_is_one_clear_error(tmp_path, first_run):
    _, tf_transform_output = _transform_outputs(first_run)
    with pytest.raises(ValueError, match="rerun Transform"):
        input.input_dataset([str(tmp_path / "*")], tf_transform_output, LABEL, batch_size=32, shuffle=False)


def test_shards_mixing_compressions_are_one_clear_error(tmp_path, first_run):
    examples, tf_transform_output = _transform_outputs(first_run)
    [shard] = sorted((examples / "Split-eval").iterdir())
    (tmp_path / "a.gz").write_bytes(shard.read_bytes())
    with tf.io.TFRecordWriter(str(tmp_path / "b")) as writer:
        for record in tf.data.TFRecordDataset(str(shard), compression_type="GZIP").take(3):
            writer.write(record.numpy())
    with pytest.raises(ValueError, match="mix gzip"):
        input.input_dataset([str(tmp_path / "*")], tf_transform_output, LABEL, batch_size=32, shuffle=False)


@pytest.mark.parametrize("cached", [True, False])
def test_the_validation_slice_and_the_rest_split_the_train_rows_the_same_way_every_epoch(
        first_run, monkeypatch, cached):
    examples, tf_transform_output = _transform_outputs(first_run)
    split_dir = examples / "Split-train"
    everything = _tfxio_rows(split_dir, tf_transform_output)
    if not cached:
        monkeypatch.setattr(input, "CACHE_LIMIT_BYTES", 0)
    pattern = [str(split_dir / "*")]
    fit_part, validation_part = input.Part(input.FIT, 0.2), input.Part(input.VALIDATION, 0.2)
    fit = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=16, shuffle=True, part=fit_part)
    validation = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=16, shuffle=False,
                                     part=validation_part)
    fit_rows, validation_rows = _rows(fit), _rows(validation)
    # Together the train split, each row on one side; about the share asked for.
    together = np.concatenate([fit_rows, validation_rows])
    np.testing.assert_array_equal(together[np.lexsort(together.T[::-1])], everything)
    assert 0.1 * len(everything) < len(validation_rows) < 0.3 * len(everything)
    # A later epoch (shuffled, from the cache or the files) puts every row on the same side.
    np.testing.assert_array_equal(_rows(fit), fit_rows)
    np.testing.assert_array_equal(_rows(validation), validation_rows)
    assert input.batches_per_epoch(fit, pattern, 16, fit_part) == math.ceil(len(fit_rows) / 16)
    assert input.batches_per_epoch(validation, pattern, 16, validation_part) == math.ceil(len(validation_rows) / 16)


def test_bagging_folds_tile_the_train_split_and_each_member_fits_on_the_rest(first_run):
    """k-fold bagging: the k validation folds are disjoint and together the whole split, and
    each member's fit part is exactly the split less its fold."""
    examples, tf_transform_output = _transform_outputs(first_run)
    split_dir = examples / "Split-train"
    everything = _tfxio_rows(split_dir, tf_transform_output)
    pattern = [str(split_dir / "*")]
    folds = 4

    def rows_of(part: input.Part) -> np.ndarray:
        dataset = input.input_dataset(pattern, tf_transform_output, LABEL, batch_size=16, shuffle=False, part=part)
        return _rows(dataset)

    def sorted_rows(rows: np.ndarray) -> np.ndarray:
        return rows[np.lexsort(rows.T[::-1])]

    validation = [rows_of(input.Part(input.VALIDATION, 1 / folds, fold)) for fold in range(folds)]
    np.testing.assert_array_equal(sorted_rows(np.concatenate(validation)), everything)
    for fold, held_out in enumerate(validation):
        assert 0.1 * len(everything) < len(held_out) < 0.4 * len(everything)
        fit = rows_of(input.Part(input.FIT, 1 / folds, fold))
        np.testing.assert_array_equal(sorted_rows(np.concatenate([fit, held_out])), everything)
