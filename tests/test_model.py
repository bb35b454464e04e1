import numpy as np

from trainer_module import features, model


def _batch(rows: int, rng: np.random.Generator) -> dict:
    batch = {
        features.transformed_name(k): rng.normal(size=rows).astype("float32")
        for k in features.NUMERIC_FEATURE_KEYS
    }
    for key in features.CATEGORICAL_FEATURE_KEYS:
        batch[features.transformed_name(key)] = rng.integers(0, 3, size=rows).astype("int64")
    return batch


def test_model_builds_and_one_step_lowers_the_loss():
    rng = np.random.default_rng(0)
    classifier = model.build_model({"island": 3, "sex": 2}, num_classes=3, hidden_units=(8,), learning_rate=0.05)
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
    classifier = model.build_model({"island": 3, "sex": 3}, num_classes=3)
    expected = {features.transformed_name(k) for k in features.NUMERIC_FEATURE_KEYS + features.CATEGORICAL_FEATURE_KEYS}
    assert set(classifier.input_names) == expected
