"""Periodic embeddings of numbers (PLR: Gorishniy et al., "On Embeddings for Numerical
Features in Tabular Deep Learning", NeurIPS 2022): each number x of feature j becomes
ReLU(W_j [cos(2π c_j x), sin(2π c_j x)] + b_j), with frequencies c_j learned per feature.
An MLP over these fits sharp and periodic effects that it cannot fit from x alone (the
trees' advantage on tables); plain TF ops, so XLA and TF Serving run them as they are."""

from __future__ import annotations

import math

import tensorflow as tf
import tf_keras as keras

# The paper's package defaults ("lite" off): 48 frequencies per feature, a 24-wide output,
# frequencies initialised from N(0, 0.1) on z-scored inputs.
FREQUENCIES = 48
WIDTH = 24
FREQUENCY_SCALE = 0.1


class PeriodicEmbedding(keras.layers.Layer):
    """[batch, features] numbers in, [batch, features x WIDTH] embeddings out."""

    def __init__(self, frequencies: int = FREQUENCIES, width: int = WIDTH,
                 frequency_scale: float = FREQUENCY_SCALE, **kwargs) -> None:
        super().__init__(**kwargs)
        self.frequencies = frequencies
        self.width = width
        self.frequency_scale = frequency_scale

    def build(self, input_shape: tf.TensorShape) -> None:
        features = int(input_shape[-1])
        self.coefficients = self.add_weight(
            name="coefficients", shape=(features, self.frequencies),
            initializer=keras.initializers.RandomNormal(stddev=self.frequency_scale))
        self.kernel = self.add_weight(name="kernel", shape=(features, 2 * self.frequencies, self.width),
                                      initializer="glorot_uniform")
        self.bias = self.add_weight(name="bias", shape=(features, self.width), initializer="zeros")
        super().build(input_shape)

    def call(self, numbers: tf.Tensor) -> tf.Tensor:
        angles = 2 * math.pi * numbers[..., tf.newaxis] * tf.cast(self.coefficients, numbers.dtype)
        periodic = tf.concat([tf.cos(angles), tf.sin(angles)], axis=-1)
        embedded = tf.nn.relu(tf.einsum("bfp,fpw->bfw", periodic, tf.cast(self.kernel, numbers.dtype))
                              + tf.cast(self.bias, numbers.dtype))
        return tf.reshape(embedded, [-1, embedded.shape[1] * self.width])

    def get_config(self) -> dict:
        return {**super().get_config(), "frequencies": self.frequencies, "width": self.width,
                "frequency_scale": self.frequency_scale}
