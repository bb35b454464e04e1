"""Sparse-aware optimizers against tf_keras' own Adam and Adagrad, and the `auto` rules."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from pipeline import datasets
from trainer_module import hardware, model, optimizer_choice, optimizers

ROWS, WIDTH = 6, 4
# Two steps: row 1 is touched by the first only, row 2 by both (twice in the first: the
# optimizer must sum repeated rows), row 3 by the second only; rows 0, 4, 5 never.
STEPS = ([1, 2, 2], [2, 3])
DENSE_GRADIENTS = ([0.1, -0.2, 0.3], [-0.3, 0.1, 0.2])


def _train(optimizer: keras.optimizers.Optimizer) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    """Two sparse updates of a table and two dense updates of a vector; returns the table,
    the vector, and the table after each step."""
    table = tf.Variable(np.arange(ROWS * WIDTH, dtype=np.float32).reshape(ROWS, WIDTH) / 10)
    vector = tf.Variable(np.ones(3, np.float32))
    snapshots = []
    for step, rows in enumerate(STEPS):
        values = np.random.default_rng(step).normal(size=(len(rows), WIDTH)).astype(np.float32)
        sparse = tf.IndexedSlices(tf.constant(values), tf.constant(rows), tf.constant([ROWS, WIDTH]))
        optimizer.apply_gradients([(sparse, table), (tf.constant(DENSE_GRADIENTS[step]), vector)])
        snapshots.append(table.numpy().copy())
    return table.numpy(), vector.numpy(), snapshots


def test_lazy_adam_is_adam_on_the_rows_touched_and_leaves_the_others_alone():
    start = np.arange(ROWS * WIDTH, dtype=np.float32).reshape(ROWS, WIDTH) / 10
    adam_table, adam_vector, _ = _train(keras.optimizers.Adam(0.1))
    lazy_table, lazy_vector, lazy_steps = _train(optimizers.LazyAdam(0.1))
    # Rows 2 and 3 were touched by the last step: their moments agree with Adam's (row 2's
    # history was touched at every step, row 3's starts at zero in both).
    np.testing.assert_allclose(lazy_table[[2, 3]], adam_table[[2, 3]], rtol=1e-6)
    # Row 1 was untouched by the last step: Adam keeps moving it with its decayed momentum;
    # the lazy update leaves it where the first step put it.
    np.testing.assert_array_equal(lazy_table[1], lazy_steps[0][1])
    assert not np.allclose(adam_table[1], lazy_steps[0][1])
    assert not np.allclose(lazy_table[1], start[1])
    # Never-touched rows keep their values.
    np.testing.assert_array_equal(lazy_table[[0, 4, 5]], start[[0, 4, 5]])
    # Dense gradients: exactly Adam.
    np.testing.assert_allclose(lazy_vector, adam_vector, rtol=1e-6)


def test_adagrad_adam_is_adagrad_on_embedding_rows_and_adam_elsewhere():
    start = np.arange(ROWS * WIDTH, dtype=np.float32).reshape(ROWS, WIDTH) / 10
    adagrad_table, _, _ = _train(keras.optimizers.Adagrad(
        0.1, initial_accumulator_value=optimizers.ADAGRAD_INITIAL_ACCUMULATOR, epsilon=1e-7))
    _, adam_vector, _ = _train(keras.optimizers.Adam(0.1))
    table, vector, _ = _train(optimizers.AdagradAdam(0.1))
    np.testing.assert_allclose(table, adagrad_table, rtol=1e-6)
    np.testing.assert_array_equal(table[[0, 4, 5]], start[[0, 4, 5]])
    assert not np.allclose(table[[1, 2, 3]], start[[1, 2, 3]])
    np.testing.assert_allclose(vector, adam_vector, rtol=1e-6)


def test_a_model_with_embeddings_gets_sparse_gradients_and_the_sparse_update():
    """The synthetic dataset's model embeds its large vocabularies: their gradients arrive
    as IndexedSlices, which is what makes the lazy update cheap."""
    spec = datasets.load("synthetic").feature_spec()
    vocab_sizes = {key: 1000 for key in spec.categorical_keys}
    classifier = model.build_model(spec, vocab_sizes, num_classes=2, hidden_units=(8,), optimizer="lazy_adam")
    embeddings = [layer for layer in classifier.layers if isinstance(layer, keras.layers.Embedding)]
    assert embeddings and model.has_embeddings(spec, vocab_sizes)
    assert isinstance(classifier.optimizer, optimizers.LazyAdam)
    batch = {name: tf.zeros([4], dtype=tensor.dtype) for name, tensor in classifier.input.items()}
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(classifier(batch, training=True))
    gradients = dict(zip((v.name for v in classifier.trainable_variables),
                         tape.gradient(loss, classifier.trainable_variables)))
    sparse = {name for name, gradient in gradients.items() if isinstance(gradient, tf.IndexedSlices)}
    assert sparse == {layer.embeddings.name for layer in embeddings}


def test_penguins_model_is_all_one_hot():
    spec = datasets.load("penguins").feature_spec()
    vocab_sizes = {"island": 3, "sex": 2}
    classifier = model.build_model(spec, vocab_sizes, num_classes=3)
    assert not any(isinstance(layer, keras.layers.Embedding) for layer in classifier.layers)
    assert not model.has_embeddings(spec, vocab_sizes)


@pytest.mark.parametrize(
    "requested, has_embeddings, on_tpu, expected",
    [
        ("auto", True, False, "lazy_adam"),
        ("auto", False, False, "adam"),
        # TPU steps are compiled with static shapes; the touched rows are not.
        ("auto", True, True, "adam"),
        ("adam", True, False, "adam"),
        ("adagrad_adam", False, False, "adagrad_adam"),
    ],
)
def test_auto_optimizer_follows_the_model(requested, has_embeddings, on_tpu, expected):
    assert optimizer_choice.choose(requested, has_embeddings, on_tpu) == expected


def test_unknown_optimizer_names_the_options():
    with pytest.raises(ValueError, match="lazy_adam"):
        optimizer_choice.choose("sgd", True)


@pytest.mark.parametrize(
    "devices, sparse, expected_xla",
    [
        (hardware.Devices(gpu_compute_capabilities=((8, 0),)), False, True),
        (hardware.Devices(gpu_compute_capabilities=((8, 0),)), True, False),
        (hardware.Devices(has_tpu=True), True, True),
        (hardware.Devices(), True, False),
    ],
)
def test_auto_xla_stays_off_on_the_sparse_path_except_on_tpu(devices, sparse, expected_xla):
    assert hardware.choose(devices, sparse_updates=sparse).xla is expected_xla
    # An explicit choice wins.
    assert hardware.choose(devices, xla="on", sparse_updates=sparse).xla is True


@pytest.mark.parametrize("optimizer_class", [optimizers.LazyAdam, optimizers.AdagradAdam])
def test_optimizer_config_round_trips(optimizer_class):
    """Keras rebuilds optimizers from their config (model.save / load_model)."""
    original = optimizer_class(learning_rate=0.03)
    rebuilt = optimizer_class.from_config(original.get_config())
    assert type(rebuilt) is optimizer_class
    assert float(rebuilt.learning_rate) == pytest.approx(0.03)
    assert rebuilt.jit_compile is False


def test_adagrad_moves_an_embedding_row_about_as_far_as_adam_at_first():
    """A tiny batch-mean gradient still moves the row by about the learning rate (with
    tf_keras' 0.1 start the row would barely move)."""
    start = np.zeros((2, 3), np.float32)
    for optimizer in (keras.optimizers.Adam(0.01), optimizers.AdagradAdam(0.01)):
        table = tf.Variable(start)
        gradient = tf.IndexedSlices(tf.constant([[1e-4, -1e-4, 1e-4]]), tf.constant([0]), tf.constant([2, 3]))
        optimizer.apply_gradients([(gradient, table)])
        np.testing.assert_allclose(np.abs(table.numpy()[0]), 0.01, rtol=0.05)
        np.testing.assert_array_equal(table.numpy()[1], 0.0)


# Three sparse steps on a 4-row table: rows {0, 1}, rows {0, 1}, then row 0 alone; rows 2
# and 3 never get a gradient.
LAZY_STEPS = (
    ([0, 1], [[0.5, -1.0, 0.25], [2.0, 0.5, -1.5]]),
    ([0, 1], [[-0.75, 0.5, 1.0], [1.0, -2.0, 0.5]]),
    ([0], [[0.25, 0.25, -0.5]]),
)


def _sparse_run(optimizer: keras.optimizers.Optimizer) -> list[dict[str, np.ndarray]]:
    """The table and its Adam slots (m, v) after each of LAZY_STEPS."""
    table = tf.Variable(np.arange(12, dtype=np.float32).reshape(4, 3) / 4, name="table")
    states = []
    for rows, values in LAZY_STEPS:
        gradient = tf.IndexedSlices(tf.constant(values, tf.float32), tf.constant(rows), tf.constant([4, 3]))
        optimizer.apply_gradients([(gradient, table)])
        slots = {variable.name.split("/")[-2]: variable for variable in optimizer.variables
                 if variable.name.endswith("/table:0")}
        states.append({"table": table.numpy().copy(), "m": slots["m"].numpy().copy(), "v": slots["v"].numpy().copy()})
    return states


def _adam_by_hand(config: dict, lazy: bool) -> list[dict[str, np.ndarray]]:
    """Kingma & Ba's Adam (its efficient form: alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t),
    theta -= alpha_t * m / (sqrt(v) + epsilon)) on LAZY_STEPS, in float64. Dense: every row's
    moments decay at every step (absent rows have a zero gradient). Lazy: only the rows in
    the step's gradient have their moments and values updated."""
    lr, beta1, beta2, epsilon = (config[key] for key in ("learning_rate", "beta_1", "beta_2", "epsilon"))
    table = np.arange(12, dtype=np.float64).reshape(4, 3) / 4
    m, v = np.zeros_like(table), np.zeros_like(table)
    states = []
    for t, (rows, values) in enumerate(LAZY_STEPS, start=1):
        gradient = np.zeros_like(table)
        gradient[rows] = values
        updated = rows if lazy else list(range(4))
        m[updated] = beta1 * m[updated] + (1 - beta1) * gradient[updated]
        v[updated] = beta2 * v[updated] + (1 - beta2) * gradient[updated] ** 2
        alpha = lr * np.sqrt(1 - beta2 ** t) / (1 - beta1 ** t)
        table[updated] -= alpha * m[updated] / (np.sqrt(v[updated]) + epsilon)
        states.append({"table": table.copy(), "m": m.copy(), "v": v.copy()})
    return states


def test_lazy_adam_leaves_the_moments_of_rows_absent_from_a_step_undecayed():
    lazy = optimizers.LazyAdam(learning_rate=0.05, beta_1=0.8, beta_2=0.9, epsilon=1e-3)
    dense = keras.optimizers.Adam(learning_rate=0.05, beta_1=0.8, beta_2=0.9, epsilon=1e-3)
    start = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    lazy_states, dense_states = _sparse_run(lazy), _sparse_run(dense)
    expected_lazy = _adam_by_hand(lazy.get_config(), lazy=True)
    expected_dense = _adam_by_hand(dense.get_config(), lazy=False)

    for step, (actual, expected) in enumerate(zip(lazy_states, expected_lazy)):
        for name in ("table", "m", "v"):
            np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-7,
                                       err_msg=f"lazy {name} after step {step + 1}")
    last, before = lazy_states[-1], lazy_states[-2]
    # Row 1 sat out the last step: its moments and value are where the step before left them.
    np.testing.assert_array_equal(last["m"][1], before["m"][1])
    np.testing.assert_array_equal(last["v"][1], before["v"][1])
    np.testing.assert_array_equal(last["table"][1], before["table"][1])
    # Rows 2 and 3 were never touched: their values and moment slots are as they started.
    np.testing.assert_array_equal(last["table"][[2, 3]], start[[2, 3]])
    np.testing.assert_array_equal(last["m"][[2, 3]], 0.0)
    np.testing.assert_array_equal(last["v"][[2, 3]], 0.0)

    # Dense Adam (the by-hand equations agree with tf_keras' own) decays row 1's moments by
    # beta_1 / beta_2 in the last step and keeps moving the row: the lazy difference is real.
    for step, (actual, expected) in enumerate(zip(dense_states, expected_dense)):
        for name in ("table", "m", "v"):
            np.testing.assert_allclose(actual[name], expected[name], rtol=1e-5, atol=1e-7,
                                       err_msg=f"dense {name} after step {step + 1}")
    config = dense.get_config()
    np.testing.assert_allclose(dense_states[-1]["m"][1], config["beta_1"] * dense_states[-2]["m"][1], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dense_states[-1]["v"][1], config["beta_2"] * dense_states[-2]["v"][1], rtol=1e-6, atol=1e-7)
    assert not np.allclose(dense_states[-1]["m"][1], last["m"][1])
    assert not np.allclose(dense_states[-1]["table"][1], last["table"][1])
    # Both agree that row 0, touched at every step, has the same moments.
    np.testing.assert_allclose(dense_states[-1]["m"][0], last["m"][0], rtol=1e-6, atol=1e-7)
