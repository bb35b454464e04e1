"""The Keras (tf_keras, Keras 2) classifier over a dataset's transformed features."""

from __future__ import annotations

from typing import Mapping, Sequence

import tf_keras as keras

from trainer_module import features
from trainer_module.accumulation import AccumulatingModel
from trainer_module.features import FeatureSpec


def build_model(
    spec: FeatureSpec,
    vocab_sizes: Mapping[str, int],
    num_classes: int,
    hidden_units: Sequence[int] = (32, 16),
    learning_rate: float = 0.01,
    jit_compile: bool = False,
    steps_per_execution: int = 1,
    accumulation_steps: int = 1,
) -> keras.Model:
    """An MLP: z-scored numerics and encoded categoricals in, class probabilities out.

    Small vocabularies are one-hot encoded, large ones embedded (a one-hot of 100,000
    products would dwarf the rest of the model).
    vocab_sizes maps each categorical feature key to its vocabulary size (without OOV).
    Layers compute in the global Keras precision policy; the output is always float32.
    jit_compile XLA-compiles the training step only, never the exported serving graph.
    accumulation_steps > 1 splits each batch into that many micro-batches per update.
    """
    inputs = {}
    columns = []
    for key in spec.numeric_keys:
        name = features.transformed_name(key)
        inputs[name] = keras.Input(shape=(), name=name, dtype="float32")
        columns.append(keras.layers.Reshape((1,), name=f"{name}_column")(inputs[name]))
    for key in spec.categorical_keys:
        name = features.transformed_name(key)
        inputs[name] = keras.Input(shape=(), name=name, dtype="int64")
        columns.append(_encode_categorical(inputs[name], name, vocab_sizes[key] + spec.num_oov_buckets))
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


def _encode_categorical(ids, name: str, num_ids: int):
    if num_ids <= features.ONE_HOT_MAX_IDS:
        return keras.layers.CategoryEncoding(num_tokens=num_ids, output_mode="one_hot", name=f"{name}_one_hot")(ids)
    return keras.layers.Embedding(num_ids, features.embedding_dim(num_ids), name=f"{name}_embedding")(ids)
