"""Gradient accumulation: one optimizer step per global batch, computed in micro-batches.

For large global batches on few devices: each batch from the input pipeline is split into
`accumulation_steps` equal micro-batches; their gradients are averaged and applied once,
so the update equals that of the whole batch while activations are held for one
micro-batch at a time.
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
        total = [tf.zeros_like(v) for v in variables]
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
            total = [t + g for t, g in zip(total, gradients)]
            self.compiled_metrics.update_state(y_part, predictions)
        self.optimizer.apply_gradients(zip([t / steps for t in total], variables))
        return {m.name: m.result() for m in self.metrics}
