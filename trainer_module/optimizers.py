"""The training optimizers (names and the `auto` rule: optimizer_choice).

tf_keras Adam decays every row of an embedding table on every step, even the rows the
batch never touched: with a 100,000-row table that is most of a step's time on a CPU. The
sparse-aware optimizers here update only the rows a batch touched (their gradients arrive
as IndexedSlices, deduplicated by the base class) and treat dense gradients as Adam does:

- lazy_adam: Adam's moments and update for the touched rows only (as TF Addons' LazyAdam;
  an untouched row's moments do not decay, so it converges somewhat differently);
- adagrad_adam: Adagrad for embedding rows (naturally row-sparse), Adam for the rest.

The optimizer shapes training only: the exported model is the same layers and weights.
"""

from __future__ import annotations

import tensorflow as tf
import tf_keras as keras

from trainer_module.optimizer_choice import OPTIMIZERS

# Adagrad's steps shrink as squared gradients accumulate from this start. tf_keras' 0.1
# dwarfs a batch-mean loss's gradients (rows barely moved); from zero (Duchi et al.'s
# Adagrad), a row's first step is about the learning rate, as Adam's is.
ADAGRAD_INITIAL_ACCUMULATOR = 0.0


def build(name: str, learning_rate: float, weight_decay: float = 0.0) -> keras.optimizers.Optimizer:
    """The optimizer for a resolved (non-auto) name; weight_decay > 0 decays the dense
    layers' kernels (decoupled, as AdamW), never biases or embedding tables."""
    decay = weight_decay if weight_decay > 0 else None
    if name == "adam":
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate, weight_decay=decay)
    elif name == "lazy_adam":
        optimizer = LazyAdam(learning_rate=learning_rate, weight_decay=decay)
    elif name == "adagrad_adam":
        optimizer = AdagradAdam(learning_rate=learning_rate, weight_decay=decay)
    else:
        raise ValueError(f"unknown optimizer {name!r}; choose one of: {', '.join(OPTIMIZERS[1:])}")
    if weight_decay > 0:
        optimizer.exclude_from_weight_decay(var_names=list(WEIGHT_DECAY_SPARED))
    return optimizer


# Variable-name parts weight decay skips: biases (decaying them only shifts outputs) and
# embedding tables (a dense decay of every row each step; sparse rows get no gradient).
WEIGHT_DECAY_SPARED = ("bias", "embeddings")


class LazyAdam(keras.optimizers.Adam):
    """Adam whose sparse updates read and write only the rows in the gradient."""

    def __init__(self, learning_rate: float = 0.001, name: str = "LazyAdam", **kwargs) -> None:
        # An XLA-compiled update would be recompiled for every count of touched rows (and
        # from_config passes the saved jit_compile back).
        kwargs.pop("jit_compile", None)
        super().__init__(learning_rate=learning_rate, name=name, jit_compile=False, **kwargs)

    def update_step(self, gradient, variable):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable)
        key = self._var_key(variable)
        m = self._momentums[self._index_dict[key]]
        v = self._velocities[self._index_dict[key]]
        rows, values = gradient.indices, gradient.values
        m_rows = self.beta_1 * tf.gather(m, rows) + (1 - self.beta_1) * values
        v_rows = self.beta_2 * tf.gather(v, rows) + (1 - self.beta_2) * tf.square(values)
        m.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.scatter_update(tf.IndexedSlices(v_rows, rows))
        step = self._adam_step_size(variable.dtype)
        epsilon = tf.cast(self.epsilon, variable.dtype)
        variable.scatter_sub(tf.IndexedSlices(step * m_rows / (tf.sqrt(v_rows) + epsilon), rows))

    def _adam_step_size(self, dtype: tf.DType) -> tf.Tensor:
        """Adam's bias-corrected learning rate at this step."""
        local_step = tf.cast(self.iterations + 1, dtype)
        beta_1_power = tf.pow(tf.cast(self.beta_1, dtype), local_step)
        beta_2_power = tf.pow(tf.cast(self.beta_2, dtype), local_step)
        return tf.cast(self.learning_rate, dtype) * tf.sqrt(1 - beta_2_power) / (1 - beta_1_power)


class AdagradAdam(keras.optimizers.Adam):
    """Adagrad for variables with sparse gradients (embeddings), Adam for the others."""

    def __init__(self, learning_rate: float = 0.001, name: str = "AdagradAdam", **kwargs) -> None:
        kwargs.pop("jit_compile", None)  # as LazyAdam
        super().__init__(learning_rate=learning_rate, name=name, jit_compile=False, **kwargs)

    def build(self, var_list):
        already_built = getattr(self, "_built", False)
        super().build(var_list)
        if already_built:
            return
        # Which variables get sparse gradients shows only when they arrive: every variable
        # gets an accumulator (the dense ones' stay unused; the MLP is small).
        self._accumulators = [
            self.add_variable_from_reference(
                var, "accumulator", initial_value=tf.fill(var.shape, tf.constant(ADAGRAD_INITIAL_ACCUMULATOR, var.dtype))
            )
            for var in var_list
        ]

    def update_step(self, gradient, variable):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable)
        accumulator = self._accumulators[self._index_dict[self._var_key(variable)]]
        rows, values = gradient.indices, gradient.values
        squares = tf.gather(accumulator, rows) + tf.square(values)
        accumulator.scatter_update(tf.IndexedSlices(squares, rows))
        lr = tf.cast(self.learning_rate, variable.dtype)
        epsilon = tf.cast(self.epsilon, variable.dtype)
        variable.scatter_sub(tf.IndexedSlices(lr * values / (tf.sqrt(squares) + epsilon), rows))
