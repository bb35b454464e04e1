"""The Keras (tf_keras, Keras 2) classifier over transformed penguin features."""

from __future__ import annotations

from typing import Mapping, Sequence

import tf_keras as keras

from trainer_module import features
from trainer_module.accumulation import AccumulatingModel


def build_model(
    vocab_sizes: Mapping[str, int],
    num_classes: int,
    hidden_units: Sequence[int] = (32, 16),
    learning_rate: float = 0.01,
    jit_compile: bool = False,
    steps_per_execution: int = 1,
    accumulation_steps: int = 1,
) -> keras.Model:
    """A small MLP: z-scored numerics plus one-hot categoricals in, class probabilities out.

    vocab_sizes maps each categorical feature key to its vocabulary size (without OOV).
    Layers compute in the global Keras precision policy; the output is always float32.
    jit_compile XLA-compiles the training step only, never the exported serving graph.
    accumulation_steps > 1 splits each batch into that many micro-batches per update.
    """
    inputs = {}
    columns = []
    for key in features.NUMERIC_FEATURE_KEYS:
        name = features.transformed_name(key)
        inputs[name] = keras.Input(shape=(), name=name, dtype="float32")
        columns.append(keras.layers.Reshape((1,), name=f"{name}_column")(inputs[name]))
    for key in features.CATEGORICAL_FEATURE_KEYS:
        name = features.transformed_name(key)
        inputs[name] = keras.Input(shape=(), name=name, dtype="int64")
        columns.append(
            keras.layers.CategoryEncoding(
                num_tokens=vocab_sizes[key] + features.NUM_OOV_BUCKETS,
                output_mode="one_hot",
                name=f"{name}_one_hot",
            )(inputs[name])
        )
    x = keras.layers.Concatenate(name="features")(columns)
    for i, units in enumerate(hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=f"hidden_{i}")(x)
    # float32 probabilities whatever the training precision policy.
    outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32", name="probabilities")(x)
    if accumulation_steps > 1:
        model = AccumulatingModel(inputs=inputs, outputs=outputs, accumulation_steps=accumulation_steps)
    else:
        model = keras.Model(inputs=inputs, outputs=outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(),
        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    return model
