"""Layers that take many feature columns at once.

A wide table's model with a layer per column (a reshape per number, a one-hot per category)
had 184 layers for 90 columns; exporting a bagged ensemble of five traced and saved every
one of them, 76 of the Trainer's 141 s (trace 18 s, save 58 s, measured on this 2-core
Xeon). One layer for all the numbers and one for all the small vocabularies do the same
arithmetic with a handful of layers.
"""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf
import tf_keras as keras


class StackedColumns(keras.layers.Layer):
    """[batch] float columns side by side: [batch, columns]."""

    def call(self, columns: Sequence[tf.Tensor]) -> tf.Tensor:
        return tf.stack([tf.reshape(column, [-1]) for column in columns], axis=1)


class OneHots(keras.layers.Layer):
    """[batch] id columns, each one-hot over its own number of ids, side by side:
    [batch, sum of the numbers of ids]. An id outside [0, ids) is all zeros."""

    def __init__(self, ids_per_column: Sequence[int], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ids_per_column = list(ids_per_column)

    def call(self, columns: Sequence[tf.Tensor]) -> tf.Tensor:
        return tf.concat([tf.one_hot(tf.reshape(ids, [-1]), depth, dtype=self.compute_dtype)
                          for ids, depth in zip(columns, self.ids_per_column)], axis=1)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "ids_per_column": self.ids_per_column}


class MeanOfWords(keras.layers.Layer):
    """The mean of a text's word embeddings, padding (id 0) left out; zeros for a text with no
    word (Keras' masked average pooling divides by zero there)."""

    def call(self, inputs: list) -> tf.Tensor:
        embedded, ids = inputs
        present = tf.cast(tf.not_equal(ids, 0), embedded.dtype)[:, :, tf.newaxis]
        count = tf.reduce_sum(present, axis=1)
        return tf.reduce_sum(embedded * present, axis=1) / tf.maximum(count, tf.ones_like(count))
