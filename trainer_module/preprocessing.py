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
        value = tf.cast(inputs[key], tf.float32)
        # Impute with the training mean so a missing measurement carries no signal.
        imputed = _to_dense(value, default=tft.mean(value))
        outputs[features.transformed_name(key)] = tft.scale_to_z_score(imputed)
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


def _to_dense(value: tf.Tensor | tf.SparseTensor, default) -> tf.Tensor:
    """A [batch] tensor from a feature that may be missing in some rows."""
    if isinstance(value, tf.SparseTensor):
        batch_size = value.dense_shape[0]
        value = tf.sparse.to_dense(
            tf.SparseTensor(value.indices, value.values, [batch_size, 1]),
            default_value=tf.cast(default, value.dtype),
        )
    return tf.reshape(value, [-1])
