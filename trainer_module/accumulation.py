"""Gradient accumulation: one optimizer step per global batch, computed in micro-batches.

For large global batches on few devices: each batch from the input pipeline is split into
`accumulation_steps` equal micro-batches; their gradients are averaged and applied once,
so the update equals that of the whole batch while activations are held for one
micro-batch at a time. Embedding gradients stay sparse (IndexedSlices): the micro-batches'
rows are concatenated, never added into a dense table-sized tensor, so a sparse-aware
optimizer still touches only the rows the batch used.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras


class AccumulatingModel(keras.Model):
    """A functional Keras model whose train_step accumulates micro-batch gradients."""

    def __init__(self, *args, accumulation_steps: int = 1, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if accumulation_steps < 1:
            raise ValueError(f"accumulation_steps must be at least 1, got {accumulation_steps}")
        self.accumulation_steps = accumulation_steps

    def train_step(self, data):
        if self.accumulation_steps == 1:
            return super().train_step(data)
        x, y = data[0], data[1]
        steps = self.accumulation_steps
        micro = tf.shape(y)[0] // steps
        variables = self.trainable_variables
        scaled_optimizer = isinstance(self.optimizer, keras.mixed_precision.LossScaleOptimizer)
        parts: list[list] = [[] for _ in variables]
        for i in range(steps):  # unrolled: steps is small and known when tracing
            part = slice(i * micro, (i + 1) * micro)
            x_part = tf.nest.map_structure(lambda t, part=part: t[part], x)
            y_part = y[part]
            with tf.GradientTape() as tape:
                predictions = self(x_part, training=True)
                loss = self.compute_loss(x_part, y_part, predictions)
                if scaled_optimizer:
                    loss = self.optimizer.get_scaled_loss(loss)
            gradients = tape.gradient(loss, variables)
            if scaled_optimizer:
                gradients = self.optimizer.get_unscaled_gradients(gradients)
            for collected, gradient in zip(parts, gradients):
                if gradient is not None:
                    collected.append(gradient)
            self.compiled_metrics.update_state(y_part, predictions)
        averaged = [mean_gradient(collected, steps) for collected in parts]
        self.optimizer.apply_gradients(
            (gradient, variable) for gradient, variable in zip(averaged, variables) if gradient is not None
        )
        return {m.name: m.result() for m in self.metrics}


def mean_gradient(parts: list, steps: int):
    """The mean of micro-batch gradients; sparse ones stay sparse (rows concatenated, the
    optimizer sums repeated rows). None when no micro-batch reached the variable."""
    if not parts:
        return None
    if all(isinstance(part, tf.IndexedSlices) for part in parts):
        return tf.IndexedSlices(
            tf.concat([part.values for part in parts], axis=0) / steps,
            tf.concat([part.indices for part in parts], axis=0),
            parts[0].dense_shape,
        )
    return tf.add_n([tf.convert_to_tensor(part) for part in parts]) / steps
