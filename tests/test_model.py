import dataclasses

import numpy as np
import pytest
import tf_keras as keras
from sklearn.metrics import mean_absolute_error, roc_auc_score

from pipeline import datasets
from trainer_module import features, model

SPEC = datasets.load("penguins").feature_spec()


def _batch(rows: int, rng: np.random.Generator) -> dict:
    batch = {
        features.transformed_name(k): rng.normal(size=rows).astype("float32")
        for k in SPEC.numeric_keys
    }
    for key in SPEC.categorical_keys:
        batch[features.transformed_name(key)] = rng.integers(0, 3, size=rows).astype("int64")
    return batch


def test_model_builds_and_one_step_lowers_the_loss():
    rng = np.random.default_rng(0)
    classifier = model.build_model(SPEC, {"island": 3, "sex": 2}, num_classes=3, hidden_units=(8,), learning_rate=0.05)
    x = _batch(64, rng)
    y = (x["bill_length_mm_xf"] > 0).astype("int64") + (x["body_mass_g_xf"] > 0).astype("int64")
    before = classifier.evaluate(x, y, verbose=0)[0]
    classifier.fit(x, y, epochs=1, batch_size=64, verbose=0)
    after = classifier.evaluate(x, y, verbose=0)[0]
    assert after < before

    probabilities = classifier.predict(x, verbose=0)
    assert probabilities.shape == (64, 3)
    assert probabilities.dtype == np.float32
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)


def test_model_inputs_are_the_transformed_features():
    classifier = model.build_model(SPEC, {"island": 3, "sex": 3}, num_classes=3)
    expected = {features.transformed_name(k) for k in SPEC.feature_keys}
    assert set(classifier.input_names) == expected


def test_gradient_accumulation_matches_one_big_batch():
    """N micro-batches of size B give the same update as one batch of N x B."""
    rng = np.random.default_rng(1)
    n_micro, micro_batch = 4, 16
    x = _batch(n_micro * micro_batch, rng)
    y = (x["bill_length_mm_xf"] > 0).astype("int64")
    args = (SPEC, {"island": 3, "sex": 2}, 3, (8,), 0.05)
    big = model.build_model(*args)
    accumulating = model.build_model(*args, accumulation_steps=n_micro)
    initial = big.get_weights()
    accumulating.set_weights(initial)
    for classifier in (big, accumulating):
        # Plain SGD: unlike Adam, its update scales with the gradient, so a sum where a
        # mean belongs (or a dropped micro-batch) would show.
        classifier.compile(optimizer=keras.optimizers.SGD(0.5), loss="sparse_categorical_crossentropy")
    for classifier in (big, accumulating):
        classifier.fit(x, y, batch_size=n_micro * micro_batch, epochs=2, shuffle=False, verbose=0)
    for after_big, after_accumulated in zip(big.get_weights(), accumulating.get_weights()):
        np.testing.assert_allclose(after_big, after_accumulated, rtol=1e-4, atol=1e-5)
    # Both trained: the weights moved away from the shared start.
    assert any(not np.allclose(a, b) for a, b in zip(initial, accumulating.get_weights()))


def test_accumulation_runs_micro_batches_and_keeps_embedding_gradients_sparse():
    """Each batch is cut into accumulation_steps forward passes (a model ignoring the
    setting would see one pass of the whole batch), the embedding gradients reach the
    optimizer as IndexedSlices, and the update equals one step on the whole batch."""
    import tensorflow as tf

    spec = datasets.load("synthetic").feature_spec()
    vocab_sizes = {key: 500 for key in spec.categorical_keys}
    args = (spec, vocab_sizes, 2, (8,), 0.05)
    rng = np.random.default_rng(2)
    n_micro, micro_batch = 4, 8
    rows = n_micro * micro_batch
    plain = model.build_model(*args, optimizer="lazy_adam")
    x = {name: (rng.integers(0, 500, size=rows) if tensor.dtype == tf.int64
                else rng.normal(size=rows).astype("float32")) for name, tensor in plain.input.items()}
    y = rng.integers(0, 2, size=rows).astype("int64")
    accumulating = model.build_model(*args, accumulation_steps=n_micro, optimizer="lazy_adam")
    initial = plain.get_weights()
    accumulating.set_weights(initial)

    passes, gradient_kinds = [], {}
    call, apply_gradients = accumulating.call, accumulating.optimizer.apply_gradients

    def recording_call(inputs, *rest, **options):
        passes.append(int(tf.shape(next(iter(inputs.values())))[0]))
        return call(inputs, *rest, **options)

    def recording_apply(grads_and_vars, *rest, **options):
        grads_and_vars = list(grads_and_vars)
        gradient_kinds.update({v.name: type(g).__name__ for g, v in grads_and_vars})
        return apply_gradients(grads_and_vars, *rest, **options)

    accumulating.call, accumulating.optimizer.apply_gradients = recording_call, recording_apply
    accumulating.run_eagerly = True  # the recorders see each pass
    accumulating.fit(x, y, batch_size=rows, epochs=1, shuffle=False, verbose=0)
    plain.fit(x, y, batch_size=rows, epochs=1, shuffle=False, verbose=0)

    assert passes == [micro_batch] * n_micro
    embedding_names = {layer.embeddings.name for layer in accumulating.layers
                       if isinstance(layer, keras.layers.Embedding)}
    assert embedding_names
    assert {gradient_kinds[name] for name in embedding_names} == {"IndexedSlices"}
    assert {kind for name, kind in gradient_kinds.items() if name not in embedding_names} == {"EagerTensor"}
    for after_plain, after_accumulated in zip(plain.get_weights(), accumulating.get_weights()):
        # Summation order differs between one batch and its micro-batches (a few 1e-6 seen
        # once under load); a wrong accumulation moves weights by orders of magnitude more.
        np.testing.assert_allclose(after_plain, after_accumulated, rtol=1e-4, atol=1e-5)
    assert any(not np.allclose(a, b) for a, b in zip(initial, accumulating.get_weights()))


def test_the_blessing_metric_is_compiled_beside_the_task_metric():
    """AUC on a binary model's positive-class probability and MAE on a regression, each as
    scikit-learn computes it from the model's own predictions."""
    rng = np.random.default_rng(2)
    x = _batch(256, rng)
    binary = dataclasses.replace(SPEC, task=features.BINARY)
    y = (x["bill_length_mm_xf"] + 0.5 * rng.normal(size=256) > 0).astype("int64")
    classifier = model.build_model(binary, {"island": 3, "sex": 2}, num_classes=2, hidden_units=(8,),
                                   blessing_metric="auc")
    classifier.fit(x, y, epochs=2, batch_size=32, verbose=0)
    measured = classifier.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
    assert set(measured) == {"loss", "accuracy", "auc"}
    probability = classifier.predict(x, verbose=0)
    assert probability.shape == (256, 1)
    # Keras interpolates over 200 thresholds: close to the exact value, not equal.
    assert measured["auc"] == pytest.approx(roc_auc_score(y, probability[:, 0]), abs=0.01)

    regression = dataclasses.replace(SPEC, task=features.REGRESSION)
    target = (3 * x["body_mass_g_xf"] + 10).astype("float32")
    regressor = model.build_model(regression, {"island": 3, "sex": 2}, num_classes=1, hidden_units=(8,),
                                  blessing_metric="mae")
    measured = regressor.evaluate(x, target, batch_size=64, verbose=0, return_dict=True)
    assert set(measured) == {"loss", "rmse", "mae"}
    assert measured["mae"] == pytest.approx(mean_absolute_error(target, regressor.predict(x, verbose=0)[:, 0]),
                                            rel=1e-4)

    # The task's own metric: nothing added; a metric that does not fit the task: refused.
    assert [m.name for m in model.compiled_metrics(features.MULTICLASS, keras.metrics.SparseCategoricalAccuracy,
                                                   "accuracy")] == ["accuracy"]
    with pytest.raises(ValueError, match="does not fit a multiclass model"):
        model.build_model(SPEC, {"island": 3, "sex": 2}, num_classes=3, blessing_metric="auc")
