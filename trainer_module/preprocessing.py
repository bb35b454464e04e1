"""preprocessing_fn for Transform: impute and z-score numerics, vocabularies for categoricals."""

from __future__ import annotations

from typing import Any, Mapping

import tensorflow as tf
import tensorflow_transform as tft

from trainer_module import autograph, features

autograph.skip_library_conversion()

DATASET_CONFIG_KEY = "dataset"


def preprocessing_fn(inputs: dict, custom_config: Mapping[str, Any] | None = None) -> dict:
    """Maps raw features to model-ready ones; Transform's custom_config names the dataset.

    Analyzers (means, variances, vocabularies) run over the train split only; the same
    graph then serves, so training and serving cannot skew.
    """
    spec = features.for_dataset((custom_config or {}).get(DATASET_CONFIG_KEY, features.PENGUINS.dataset))
    outputs = {}
    for key in spec.numeric_keys:
        outputs[features.transformed_name(key)] = _impute_and_z_score(tf.cast(inputs[key], tf.float32))
    for key in spec.categorical_keys:
        outputs[features.transformed_name(key)] = tft.compute_and_apply_vocabulary(
            _to_dense(inputs[key], default=""),
            num_oov_buckets=spec.num_oov_buckets,
            vocab_filename=features.vocabulary_name(key),
        )
    label = inputs[spec.label_key]
    outputs[spec.transformed_label_key] = tft.compute_and_apply_vocabulary(
        _to_dense(label, default="" if label.dtype == tf.string else -1),
        vocab_filename=features.vocabulary_name(spec.label_key),
    )
    return outputs


def _impute_and_z_score(value: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """z-scores with the mean and variance of the present training values; missing -> 0.

    A missing value becomes the mean, so it carries no signal. Both statistics come from
    one analysis pass: imputing first and then calling tft.scale_to_z_score would need a
    second pass over the data (an extra Beam phase) for the same result.
    """
    mean, variance = tft.mean(value), tft.var(value)
    std = tf.sqrt(variance)
    centered = _to_dense(value, default=mean) - mean
    return tf.where(std > 0, centered / tf.where(std > 0, std, 1.0), centered)


def _to_dense(value: tf.Tensor | tf.SparseTensor, default) -> tf.Tensor:
    """A [batch] tensor from a feature that may be missing in some rows."""
    if isinstance(value, tf.SparseTensor):
        batch_size = value.dense_shape[0]
        value = tf.sparse.to_dense(
            tf.SparseTensor(value.indices, value.values, [batch_size, 1]),
            default_value=tf.cast(default, value.dtype),
        )
    return tf.reshape(value, [-1])
