"""preprocessing_fn for Transform: impute and z-score numerics, vocabularies for categoricals."""

from __future__ import annotations

import tensorflow as tf
import tensorflow_transform as tft

from trainer_module import autograph, features

autograph.skip_library_conversion()


def preprocessing_fn(inputs: dict) -> dict:
    """Maps raw penguin features to model-ready ones.

    Analyzers (means, variances, vocabularies) run over the train split only; the same
    graph then serves, so training and serving cannot skew.
    """
    outputs = {}
    for key in features.NUMERIC_FEATURE_KEYS:
        outputs[features.transformed_name(key)] = _impute_and_z_score(tf.cast(inputs[key], tf.float32))
    for key in features.CATEGORICAL_FEATURE_KEYS:
        outputs[features.transformed_name(key)] = tft.compute_and_apply_vocabulary(
            _to_dense(inputs[key], default=""),
            num_oov_buckets=features.NUM_OOV_BUCKETS,
            vocab_filename=features.vocabulary_name(key),
        )
    outputs[features.TRANSFORMED_LABEL_KEY] = tft.compute_and_apply_vocabulary(
        _to_dense(inputs[features.LABEL_KEY], default=""),
        vocab_filename=features.vocabulary_name(features.LABEL_KEY),
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
