"""What makes the DNN worth serving: early stopping on a slice of the train split, class
weights for rare classes, weight decay, dropout and periodic number embeddings (issue 26)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras
from sklearn.utils.class_weight import compute_class_weight

from pipeline import datasets
from trainer_module import config, features, model, optimizers, progress, train
from trainer_module.config import TrainingConfig
from trainer_module.input import EpochSteps
from trainer_module.periodic import PeriodicEmbedding

SPEC = datasets.load("penguins").feature_spec()
VOCABS = {"island": 3, "sex": 2}
BINARY = dataclasses.replace(SPEC, task=features.BINARY)


def _rows(count: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    rows = {features.transformed_name(k): rng.normal(size=count).astype("float32") for k in SPEC.numeric_keys}
    for key in SPEC.categorical_keys:
        rows[features.transformed_name(key)] = rng.integers(0, 2, size=count).astype("int64")
    return rows


def _dataset(rows: dict[str, np.ndarray], labels: np.ndarray, batch: int = 32) -> tf.data.Dataset:
    return tf.data.Dataset.from_tensor_slices((rows, labels)).batch(batch)


def _fit(classifier, train_ds, training, tmp_path, validation_ds=None, class_weight=None, task=features.MULTICLASS):
    return train.fit_and_evaluate(classifier, train_ds, train_ds, training, str(tmp_path), 32, EpochSteps(),
                                  task=task, validation_ds=validation_ds, class_weight=class_weight)


def test_training_stops_when_the_validation_loss_rises_and_keeps_the_best_epoch(tmp_path):
    """Labels that are noise: a wide model memorises the training rows, so the loss on other
    rows rises after the first epochs; training ends long before the epochs allowed, on the
    weights of the best validation loss."""
    rng = np.random.default_rng(0)
    training = TrainingConfig(epochs=60, patience=3, tensorboard_histogram_freq=0)
    train_ds = _dataset(_rows(256, rng), rng.integers(0, 3, size=256))
    validation_ds = _dataset(_rows(128, rng), rng.integers(0, 3, size=128))
    classifier = model.build_model(SPEC, VOCABS, 3, hidden_units=(128, 128), learning_rate=0.02)

    report = _fit(classifier, train_ds, training, tmp_path, validation_ds)

    assert report["stopped_early"] is True
    assert report["epochs_run"] < 20
    assert report["best_epoch"] == report["epochs_run"] - training.patience
    kept = classifier.evaluate(validation_ds, verbose=0, return_dict=True)["loss"]
    assert kept == pytest.approx(report["best_validation_loss"], rel=1e-4)


def test_without_a_validation_slice_every_epoch_runs(tmp_path):
    rng = np.random.default_rng(0)
    training = TrainingConfig(epochs=6, patience=1, tensorboard_histogram_freq=0)
    classifier = model.build_model(SPEC, VOCABS, 3, hidden_units=(64,), learning_rate=0.05)
    report = _fit(classifier, _dataset(_rows(128, rng), rng.integers(0, 3, size=128)), training, tmp_path)
    assert report["epochs_run"] == 6
    assert "stopped_early" not in report


def _minority_recall(class_weight: dict[int, float] | None, tmp_path) -> float:
    """A binary table with 5 % positives and a weak signal: recall of the positives at the
    model's 0.5 threshold, on fresh rows."""
    rng = np.random.default_rng(3)

    def table(count):
        rows = _rows(count, rng)
        score = rows["bill_length_mm_xf"] + rng.normal(scale=0.8, size=count)
        return rows, (score > np.quantile(score, 0.95)).astype("int64")

    rows, labels = table(4000)
    keras.utils.set_random_seed(7)
    classifier = model.build_model(BINARY, VOCABS, 2, hidden_units=(16,), learning_rate=0.01)
    training = TrainingConfig(epochs=5, tensorboard_histogram_freq=0)
    _fit(classifier, _dataset(rows, labels), training, tmp_path, class_weight=class_weight, task=features.BINARY)
    fresh, truth = table(4000)
    predicted = classifier.predict(fresh, verbose=0)[:, 0] > 0.5
    return float(predicted[truth == 1].mean())


def test_balanced_class_weights_raise_the_minority_recall(tmp_path):
    labels = np.array([0] * 95 + [1] * 5)
    weights = train.class_weights("balanced", BINARY, lambda: labels)
    expected = compute_class_weight("balanced", classes=np.array([0, 1]), y=labels)
    assert weights == pytest.approx({0: expected[0], 1: expected[1]})

    plain, weighted = _minority_recall(None, tmp_path / "plain"), _minority_recall(weights, tmp_path / "weighted")
    assert weighted > plain + 0.3, (plain, weighted)


def test_class_weights_are_for_classifiers_and_read_labels_only_when_asked():
    def unread():
        raise AssertionError("labels read without class weights")

    assert train.class_weights("none", BINARY, unread) is None
    with pytest.raises(ValueError, match="apply to classification"):
        train.class_weights("balanced", dataclasses.replace(SPEC, task=features.REGRESSION), unread)
    # A class absent from the train split gets no weight (Keras would fail on a zero count).
    assert set(train.class_weights("balanced", SPEC, lambda: np.array([0, 0, 2]))) == {0, 2}


def test_weight_decay_shrinks_kernels_and_spares_biases_and_embeddings():
    """One step with a zero gradient: only decay moves a variable, by lr x decay of itself."""
    kernel = tf.Variable(tf.ones((2, 2)), name="hidden_0/kernel")
    bias = tf.Variable(tf.ones((2,)), name="hidden_0/bias")
    table = tf.Variable(tf.ones((3, 2)), name="island_xf_embedding/embeddings")
    optimizer = optimizers.build("adam", learning_rate=0.1, weight_decay=0.5)
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in (kernel, bias, table)])
    np.testing.assert_allclose(kernel.numpy(), 1 - 0.1 * 0.5)
    np.testing.assert_allclose(bias.numpy(), 1.0)
    np.testing.assert_allclose(table.numpy(), 1.0)
    assert not optimizers.build("adam", learning_rate=0.1).weight_decay


def test_periodic_embeddings_fit_what_a_plain_mlp_on_the_number_cannot():
    """y = sin(6x): the periodic encoding fits it in a few epochs; the plain MLP of the same
    width stays far off (what trees do easily and z-scored MLPs do not)."""
    rng = np.random.default_rng(5)
    regression = dataclasses.replace(SPEC, task=features.REGRESSION)
    rows = _rows(2048, rng)
    target = np.sin(6 * rows["bill_length_mm_xf"]).astype("float32")
    errors = {}
    for encoding in ("zscore", "plr"):
        keras.utils.set_random_seed(1)
        regressor = model.build_model(regression, VOCABS, 1, hidden_units=(32,), learning_rate=0.01,
                                      shape=model.Shape(numeric_encoding=encoding))
        regressor.fit(rows, target, epochs=15, batch_size=64, verbose=0)
        errors[encoding] = regressor.evaluate(rows, target, verbose=0, return_dict=True)["rmse"]
    assert errors["plr"] < 0.5 * errors["zscore"], errors
    layer = PeriodicEmbedding(frequencies=4, width=3)
    assert layer(tf.zeros((5, 2))).shape == (5, 2 * 3)


def test_the_serving_copy_has_the_trained_weights_and_no_dropout():
    rng = np.random.default_rng(6)
    args = (SPEC, VOCABS, 3, (16,), 0.01)
    shape = model.Shape(dropout=0.5, numeric_encoding="plr")
    trained = model.build_model(*args, shape=shape)
    rows = _rows(64, rng)
    trained.fit(rows, rng.integers(0, 3, size=64), epochs=1, verbose=0)
    served = train.serving_copy(trained, args, shape=shape)
    # Inference: dropout is off, so both give the same probabilities.
    np.testing.assert_allclose(served.predict(rows, verbose=0), trained.predict(rows, verbose=0), rtol=1e-5)


def test_dropout_drops_the_rate_in_training_scales_the_rest_and_passes_through_at_inference():
    from trainer_module.dropout import Dropout

    layer = Dropout(0.3)
    ones = tf.ones((200, 500))
    dropped = layer(ones, training=True).numpy()
    assert abs((dropped == 0).mean() - 0.3) < 0.01
    np.testing.assert_allclose(dropped[dropped != 0], 1 / 0.7, rtol=1e-6)
    np.testing.assert_array_equal(layer(ones, training=False).numpy(), ones.numpy())
    # Under mixed precision the mask is drawn in float32 but applied in the compute dtype.
    half = Dropout(0.3, dtype="mixed_bfloat16")(tf.ones((4, 4), tf.bfloat16), training=True)
    assert half.dtype == tf.bfloat16


def test_bag_folds_pick_bagging_for_small_train_splits_only():
    auto = TrainingConfig()
    assert config.bag_folds(auto, 300) == config.AUTO_BAG_FOLDS > 1
    assert config.bag_folds(auto, config.BAG_MAX_ROWS) == config.AUTO_BAG_FOLDS
    assert config.bag_folds(auto, config.BAG_MAX_ROWS + 1) == 1
    # No validation slice asked for: one model, trained every epoch.
    assert config.bag_folds(TrainingConfig(validation_share=0), 300) == 1
    # A number set wins, whatever the size.
    assert config.bag_folds(TrainingConfig(bag_folds=3), 10**6) == 3
    assert config.bag_folds(TrainingConfig(bag_folds=1), 300) == 1
    with pytest.raises(ValueError, match="bag folds must be in"):
        TrainingConfig(bag_folds=config.MAX_BAG_FOLDS + 1).validate()


@pytest.mark.parametrize("task", [features.MULTICLASS, features.BINARY, features.REGRESSION])
def test_the_bagged_model_outputs_the_mean_of_its_members(task):
    rng = np.random.default_rng(8)
    spec = dataclasses.replace(SPEC, task=task)
    classes = {features.MULTICLASS: 3, features.BINARY: 2, features.REGRESSION: 1}[task]
    members = [model.build_model(spec, VOCABS, classes, hidden_units=(8,), label_mean=5.0, label_std=2.0)
               for _ in range(3)]
    rows = _rows(50, rng)
    predictions = [member.predict(rows, verbose=0) for member in members]
    # Differently initialised members disagree; the ensemble gives their mean.
    assert not np.allclose(predictions[0], predictions[1])
    bagged = model.average(members, task)
    np.testing.assert_allclose(bagged.predict(rows, verbose=0), np.mean(predictions, axis=0), rtol=1e-5, atol=1e-6)
    labels = rng.integers(0, classes, size=50) if classes > 1 else rng.normal(5, 2, size=50)
    evaluated = bagged.evaluate(rows, labels, verbose=0, return_dict=True)
    assert set(evaluated) == {"loss", model.training_metric(task)}


def test_a_bagged_members_epoch_line_names_the_model_and_the_console_knows_it():
    line = progress.epoch_message(3, 100, 0.41234, "auc", 0.88123, 1.23, member=(2, 5))
    assert line == "model 2/5  epoch 3/100  loss 0.4123  auc 0.8812  1.2s"
    assert progress.EPOCH_LINE.match(line)
    assert progress.EPOCH_LINE.match(progress.epoch_message(3, 100, 0.4, "auc", 0.8, 1.2))


def test_dropout_applies_to_train_splits_up_to_its_row_limit():
    training = TrainingConfig(dropout=0.3, dropout_max_rows=1000)
    assert config.dropout_rate(training, 1000) == 0.3
    assert config.dropout_rate(training, 1001) == 0.0
    # 0: every size.
    assert config.dropout_rate(TrainingConfig(dropout=0.3, dropout_max_rows=0), 10**7) == 0.3
    assert config.dropout_rate(TrainingConfig(), TrainingConfig().dropout_max_rows + 1) == 0.0
    with pytest.raises(ValueError, match="dropout max rows must be 0 or more"):
        TrainingConfig(dropout_max_rows=-1).validate()
