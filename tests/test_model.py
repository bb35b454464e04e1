import numpy as np
import tf_keras as keras

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
