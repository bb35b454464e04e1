"""The Keras (tf_keras, Keras 2) model over a dataset's transformed features, per task."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import tf_keras as keras

from trainer_module import dropout, features, optimizers
from trainer_module.accumulation import AccumulatingModel
from trainer_module.features import FeatureSpec
from trainer_module.layers import MeanOfWords, OneHots, StackedColumns
from trainer_module.periodic import PeriodicEmbedding


@dataclasses.dataclass(frozen=True)
class Shape:
    """What the model is beyond its widths: the same for training and the serving copy."""

    dropout: float = 0.0
    numeric_encoding: str = "zscore"  # config.NUMERIC_ENCODINGS
    linear: bool = False  # the output layer reads the features beside the last hidden layer


PLAIN = Shape()


def build_model(
    spec: FeatureSpec,
    vocab_sizes: Mapping[str, int],
    num_classes: int,
    hidden_units: Sequence[int] = (32, 16),
    learning_rate: float = 0.01,
    shape: Shape = PLAIN,
    weight_decay: float = 0.0,
    jit_compile: bool = False,
    steps_per_execution: int = 1,
    accumulation_steps: int = 1,
    optimizer: str = "adam",
    label_mean: float = 0.0,
    label_std: float = 1.0,
    blessing_metric: str | None = None,
    compiled: bool = True,
) -> keras.Model:
    """An MLP: z-scored numerics and encoded categoricals in; per task, class probabilities
    (softmax, multiclass), the positive class's probability (sigmoid, binary) or the value
    (linear, regression) out.

    Small vocabularies are one-hot encoded, large ones embedded (a one-hot of 100,000
    products would dwarf the rest of the model).
    vocab_sizes maps each categorical feature key to its vocabulary size (without OOV).
    label_mean and label_std (regression) scale the output, so the hidden layers learn a
    z-scored target whatever the label's units.
    Layers compute in the global Keras precision policy; the output is always float32.
    jit_compile XLA-compiles the training step only, never the exported serving graph.
    accumulation_steps > 1 splits each batch into that many micro-batches per update.
    optimizer is a resolved name from optimizer_choice.OPTIMIZERS (not auto).
    blessing_metric (the dataset file's: accuracy, auc, rmse or mae) is compiled beside the
    task's training_metric, so fit() and evaluate() report the number the Evaluator blesses on.
    weight_decay is decoupled (AdamW) and spares biases and embedding tables (decaying every
    row of a table on every step would undo the sparse optimizers' savings).
    compiled False: no optimizer, loss or metrics (a member of a bagged ensemble, which
    average() compiles; each compiled member would add its objects to the SavedModel).
    """
    inputs, deep, linear = _columns(spec, vocab_sizes, shape)
    x = keras.layers.Concatenate(name="features")(deep)
    for i, units in enumerate(hidden_units):
        x = keras.layers.Dense(units, activation="relu", name=f"hidden_{i}")(x)
        if shape.dropout > 0:
            x = dropout.Dropout(shape.dropout, name=f"dropout_{i}")(x)
    if shape.linear:
        # The output layer sees the features too: a linear model plus the MLP's correction.
        x = keras.layers.Concatenate(name="hidden_and_features")([x, *linear])
    # float32 outputs whatever the training precision policy.
    if spec.task == features.MULTICLASS:
        outputs = keras.layers.Dense(num_classes, activation="softmax", dtype="float32", name="probabilities")(x)
    elif spec.task == features.BINARY:
        outputs = keras.layers.Dense(1, activation="sigmoid", dtype="float32", name="probability")(x)
    else:
        z_score = keras.layers.Dense(1, dtype="float32", name="z_score")(x)
        outputs = keras.layers.Rescaling(label_std, offset=label_mean, dtype="float32", name="prediction")(z_score)
    loss, metric = _loss_and_metric(spec.task)
    if accumulation_steps > 1:
        model = AccumulatingModel(inputs=inputs, outputs=outputs, accumulation_steps=accumulation_steps)
    else:
        model = keras.Model(inputs=inputs, outputs=outputs)
    if not compiled:
        return model
    model.compile(
        optimizer=optimizers.build(optimizer, learning_rate, weight_decay),
        loss=loss,
        metrics=compiled_metrics(spec.task, metric, blessing_metric),
        jit_compile=jit_compile,
        steps_per_execution=steps_per_execution,
    )
    return model


def average(members: Sequence[keras.Model], task: str, blessing_metric: str | None = None) -> keras.Model:
    """One model whose output is the mean of the members' (class probabilities, or values):
    the bagged ensemble that is evaluated and served. Compiled for evaluate() only."""
    inputs = {name: keras.Input(shape=tensor.shape[1:], name=name, dtype=tensor.dtype)
              for name, tensor in members[0].input.items()}
    outputs = keras.layers.Average(name="bagged", dtype="float32")([member(inputs) for member in members])
    ensemble = keras.Model(inputs=inputs, outputs=outputs)
    loss, metric = _loss_and_metric(task)
    ensemble.compile(loss=loss, metrics=compiled_metrics(task, metric, blessing_metric))
    return ensemble


def _loss_and_metric(task: str) -> tuple[keras.losses.Loss, type]:
    """The training loss of a task's output, and the Keras metric class of its training metric."""
    if task == features.MULTICLASS:
        return keras.losses.SparseCategoricalCrossentropy(), keras.metrics.SparseCategoricalAccuracy
    if task == features.BINARY:
        return keras.losses.BinaryCrossentropy(), keras.metrics.BinaryAccuracy
    return keras.losses.MeanSquaredError(), keras.metrics.RootMeanSquaredError


def _columns(spec: FeatureSpec, vocab_sizes: Mapping[str, int], shape: Shape) -> tuple[dict, list, list]:
    """The model's inputs, the columns the hidden layers read and the plain columns
    (z-scored numbers, encoded categoricals, averaged words) a linear term reads. Numbers
    and small vocabularies go through one layer each, whatever their count (layers.py)."""
    inputs: dict = {}
    plain = []
    for name in spec.numeric_inputs:
        inputs[name] = keras.Input(shape=(), name=name, dtype="float32")
    numbers = [StackedColumns(name="numbers")([inputs[name] for name in spec.numeric_inputs])] \
        if spec.numeric_inputs else []
    one_hot_ids, one_hot_depths = [], []
    for categorical in spec.categoricals:
        name = features.transformed_name(categorical.key)
        inputs[name] = keras.Input(shape=(), name=name, dtype="int64")
        num_ids = vocab_sizes[categorical.key] + spec.num_oov_buckets
        if _embedded(num_ids, categorical.embedding_dim):
            width = categorical.embedding_dim or features.embedding_dim(num_ids)
            plain.append(keras.layers.Embedding(num_ids, width, name=f"{name}_embedding")(inputs[name]))
        else:
            one_hot_ids.append(inputs[name])
            one_hot_depths.append(num_ids)
    if one_hot_ids:
        plain.insert(0, OneHots(one_hot_depths, name="one_hots")(one_hot_ids))
    for key in spec.text_keys:
        name = features.transformed_name(key)
        inputs[name] = keras.Input(shape=(features.TEXT_MAX_WORDS,), name=name, dtype="int64")
        # Ids 1..size are words, size + 1 is out of vocabulary, 0 pads (preprocessing.py).
        words = keras.layers.Embedding(vocab_sizes[key] + 2, features.TEXT_EMBEDDING_DIM, name=f"{name}_embedding")(
            inputs[name])
        plain.append(MeanOfWords(name=f"{name}_mean")([words, inputs[name]]))
    deep_numbers = numbers
    if numbers and shape.numeric_encoding == "plr":
        deep_numbers = [PeriodicEmbedding(name="periodic_numbers")(numbers[0])]
    return inputs, [*deep_numbers, *plain], [*numbers, *plain]


def compiled_metrics(task: str, task_metric: type, blessing_metric: str | None) -> list[keras.metrics.Metric]:
    """The task's training metric, and the blessing metric under its own name when it differs."""
    metrics = [task_metric(name=training_metric(task))]
    if blessing_metric is None or blessing_metric == training_metric(task):
        return metrics
    if blessing_metric == "auc" and task == features.BINARY:
        # The output is the positive class's probability, shape [batch, 1]: ROC AUC over it,
        # as TFMA computes auc[classId:1].
        return [*metrics, keras.metrics.AUC(name="auc")]
    if blessing_metric == "mae" and task == features.REGRESSION:
        return [*metrics, keras.metrics.MeanAbsoluteError(name="mae")]
    raise ValueError(f"the blessing metric {blessing_metric!r} does not fit a {task} model; "
                     "use accuracy or auc (binary), accuracy (multiclass), rmse or mae (regression)")


def training_metric(task: str) -> str:
    """The metric fit() and evaluate() report, and the training report records."""
    return "rmse" if task == features.REGRESSION else "accuracy"


def has_embeddings(spec: FeatureSpec, vocab_sizes: Mapping[str, int]) -> bool:
    """Whether the model embeds any categorical or text feature (else all are one-hot)."""
    return bool(spec.text_keys) or any(
        _embedded(vocab_sizes[c.key] + spec.num_oov_buckets, c.embedding_dim) for c in spec.categoricals
    )


def _embedded(num_ids: int, embedding_dim: int | None) -> bool:
    return embedding_dim is not None or num_ids > features.ONE_HOT_MAX_IDS
