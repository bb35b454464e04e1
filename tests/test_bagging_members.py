"""k-fold bagging, pinned down on real Transform output (a tiny table written as the gzip
TFRecord shards the Trainer reads):

- members.bagged_members: member i validates on a fold of the train split that it never
  trains on, trains on all the rest, and the members' validation folds together hold every
  train row exactly once; each member's batch counts are those of its own data (cached or
  counted from records). The folds' hash-bucket ranges tile all buckets for every fold count.
- model.average: the served ensemble's output is the mean of all its members' outputs
  (members with known, different outputs, the mean computed apart in numpy), and
  members.bagged_results scores that ensemble on the eval split and totals the members.
- class_weight = "balanced": the weights read from the train split's shards are
  scikit-learn's, and train.fit_and_evaluate hands them to a real Keras fit, whose
  result shows them (a bias-only classifier converges to their weighted class shares).
"""

from __future__ import annotations

import collections
import dataclasses
import tempfile

import numpy as np
import optuna
import pytest
import tensorflow as tf
import tensorflow_transform as tft
import tensorflow_transform.beam as tft_beam
import tf_keras as keras
from sklearn.utils.class_weight import compute_class_weight
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils
from tfx.components.trainer.fn_args_utils import FnArgs

from pipeline.pipeline import TRANSFORM_FORCE_TF_COMPAT_V1
from trainer_module import config, features, input, members, model, preprocessing, studies, train, tuning
from trainer_module.config import TrainingConfig
from trainer_module.input import EpochSteps
from trainer_module.yardsticks import EVAL_METRIC

ROWS = 60
ROW_KEY, LABEL_KEY = "row_xf", "label"
SHARDS = 2


def _label(row: int) -> int:
    # Imbalanced on purpose (36 / 15 / 9 rows): balanced weights differ from 1 and per class.
    return 0 if row % 20 < 12 else 1 if row % 20 < 17 else 2


LABELS = np.array([_label(row) for row in range(ROWS)])


def _identity_fn(inputs: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    # The row's index passes through as a float feature: a value unique per row (and exact in
    # float32), so a row read back from any dataset says which row it is. The analyzer makes
    # this a real Analyze-and-Transform run (its result is multiplied away).
    row = tf.cast(inputs["row"], tf.float32)
    return {ROW_KEY: row + 0.0 * tft.mean(row), LABEL_KEY: inputs[LABEL_KEY]}


@pytest.fixture(scope="module")
def split(tmp_path_factory) -> tuple[list[str], tft.TFTransformOutput]:
    """The train split as the Trainer gets it: a file pattern of gzip TFRecord shards of
    transformed examples (trainer_module/input.py reads *.gz as GZIP), and the
    TFTransformOutput whose transformed_feature_spec parses them."""
    root = tmp_path_factory.mktemp("transform")
    raw_spec = {"row": tf.io.FixedLenFeature([], tf.int64), LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}
    raw_rows = [{"row": row, LABEL_KEY: int(LABELS[row])} for row in range(ROWS)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(dir=root), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (transformed, transformed_metadata), transform_fn = (raw_rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            _identity_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(str(root / "transform_graph"))
    coder = tft.coders.ExampleProtoCoder(transformed_metadata.schema)
    shards = root / "Split-train"
    shards.mkdir()
    for shard in range(SHARDS):
        path = shards / f"transformed_examples-{shard:05d}-of-{SHARDS:05d}.gz"
        with tf.io.TFRecordWriter(str(path), options="GZIP") as writer:
            for row in transformed[shard::SHARDS]:
                writer.write(coder.encode(row))
    return [str(shards / "*")], tft.TFTransformOutput(str(root / "transform_graph"))


def _rows_of(dataset: tf.data.Dataset | None) -> list[int]:
    """The row indices one epoch of a (features, label) dataset holds, repeats kept."""
    assert dataset is not None
    rows: list[int] = []
    for batch_features, batch_labels in dataset.as_numpy_iterator():
        batch_rows = batch_features[ROW_KEY].astype(int).tolist()
        # The label travels with its own row (and is not left among the features).
        assert batch_labels.tolist() == [_label(row) for row in batch_rows]
        assert LABEL_KEY not in batch_features
        rows += batch_rows
    return rows


def _batches(dataset: tf.data.Dataset | None) -> list[int]:
    assert dataset is not None
    return [len(batch_labels) for _, batch_labels in dataset.as_numpy_iterator()]


@pytest.mark.parametrize("folds", [2, 3, 4])
def test_each_member_validates_on_its_own_fold_and_trains_on_every_other_row(split, folds):
    files, tto = split
    built = list(members.bagged_members(files, tto, LABEL_KEY, global_batch_size=8, equal_batches=False,
                                        folds=folds, steps=EpochSteps(train=999, eval=7)))
    assert len(built) == folds
    everything = collections.Counter(range(ROWS))
    validated: collections.Counter = collections.Counter()
    for member in built:
        trained, stopped_on = _rows_of(member.train_ds), _rows_of(member.validation_ds)
        # Early stopping on rows the member trained on would stop it late, on a flattering loss.
        assert not set(trained) & set(stopped_on)
        # Without equal batches nothing is dropped: the member trains on every row of the
        # split but its own fold, each once per epoch.
        assert collections.Counter(trained) + collections.Counter(stopped_on) == everything
        assert stopped_on, "a fold of this table is empty: the hash split changed"
        validated.update(stopped_on)
    # The folds tile the split: every row stops exactly one member (and so trains all others).
    assert validated == everything


@pytest.mark.parametrize("folds", [2, 3])
def test_member_i_validates_on_the_ith_slice_as_validation_slice_reads_it(split, folds):
    """Member i's fold is the i-th slice: the one validation_slice reads for
    Part(VALIDATION, 1 / folds, i) (so tuning and training bag alike)."""
    files, tto = split
    built = members.bagged_members(files, tto, LABEL_KEY, 8, False, folds, EpochSteps())
    for fold, member in enumerate(built):
        alone, _ = members.validation_slice(files, tto, LABEL_KEY, 8,
                                            input.Part(input.VALIDATION, 1 / folds, fold), EpochSteps())
        assert sorted(_rows_of(member.validation_ds)) == sorted(_rows_of(alone))


@pytest.mark.parametrize("cached", [True, False])
def test_each_members_batch_counts_are_of_its_own_data(split, monkeypatch, cached):
    files, tto = split
    if not cached:
        # Data too large to cache is counted from its records, not by reading the dataset:
        # there the member's part must be applied to the count as well.
        monkeypatch.setattr(input, "CACHE_LIMIT_BYTES", 0)
    # equal_batches: every training batch is whole (XLA's one shape); the counts Keras gets
    # are the member's own, and the eval split's count passes through.
    for member in members.bagged_members(files, tto, LABEL_KEY, global_batch_size=8, equal_batches=True,
                                         folds=3, steps=EpochSteps(train=999, eval=7)):
        train_batches, validation_batches = _batches(member.train_ds), _batches(member.validation_ds)
        assert set(train_batches) == {8}
        assert member.steps == EpochSteps(train=len(train_batches), eval=7, validation=len(validation_batches))
        # The rows the dropped remainder leaves out are fewer than one batch.
        assert ROWS - sum(validation_batches) - sum(train_batches) < 8
    # steps.train None (Keras reads each epoch to its end) stays None; validation is counted.
    for member in members.bagged_members(files, tto, LABEL_KEY, 8, False, 3, EpochSteps()):
        assert member.steps == EpochSteps(validation=len(_batches(member.validation_ds)))


def test_the_fold_parts_tile_every_hash_bucket_for_every_fold_count():
    """The folds are hash-bucket ranges: with 60 rows few land on a range's edge, so here
    records enough to fill all the buckets (edges included) are each in exactly one fold's
    validation slice, and in a fold's fit part exactly when not in its slice."""
    records = tf.constant([b"record %d" % i for i in range(20_000)])
    buckets = tf.strings.to_hash_bucket_fast(records, 1000).numpy()
    assert len(set(buckets.tolist())) == 1000
    for folds in range(2, config.MAX_BAG_FOLDS + 1):
        validated = np.zeros(len(buckets), int)
        for fold in range(folds):
            stops = input.Part(input.VALIDATION, 1 / folds, fold).keep(records).numpy()
            trains = input.Part(input.FIT, 1 / folds, fold).keep(records).numpy()
            np.testing.assert_array_equal(trains, ~stops)
            validated += stops
        assert (validated == 1).all(), folds


def test_a_split_too_small_for_one_batch_is_refused_with_equal_batches(split):
    files, tto = split
    with pytest.raises(ValueError, match="fewer rows than one global batch"):
        next(members.bagged_members(files, tto, LABEL_KEY, global_batch_size=ROWS, equal_batches=True,
                                    folds=3, steps=EpochSteps(train=1)))


def test_a_members_logs_go_to_its_own_folder():
    assert members.member_dir("/runs/model_run", None) == "/runs/model_run"
    assert members.member_dir("/runs/model_run", (2, 5)) == "/runs/model_run/member_2"


def _linear_member(slope: float, offset: float) -> keras.Model:
    """A regression member whose output is slope * row + offset: known, and different per member."""
    row = keras.Input(shape=(), name=ROW_KEY, dtype=tf.float32)
    column = keras.layers.Reshape((1,))(row)
    dense = keras.layers.Dense(1)
    output = dense(column)
    dense.set_weights([np.array([[slope]], np.float32), np.array([offset], np.float32)])
    return keras.Model(inputs={ROW_KEY: row}, outputs=output)


def _softmax_member(slopes: list[float], offsets: list[float]) -> keras.Model:
    """A 3-class member: softmax(row * slopes / ROWS + offsets), input-dependent probabilities."""
    row = keras.Input(shape=(), name=ROW_KEY, dtype=tf.float32)
    column = keras.layers.Reshape((1,))(row)
    dense = keras.layers.Dense(3, activation="softmax")
    output = dense(column)
    dense.set_weights([np.array([slopes], np.float32) / ROWS, np.array(offsets, np.float32)])
    return keras.Model(inputs={ROW_KEY: row}, outputs=output)


def _softmax(logits: np.ndarray) -> np.ndarray:
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return exp / exp.sum(axis=1, keepdims=True)


# Three linear members: no member, pair of members, median or middle member gives the mean.
LINEAR = [(1.0, 0.0), (3.0, 1.0), (-2.0, 5.0)]
SOFTMAX = [([1.0, 0.0, -1.0], [0.5, 0.0, 0.0]), ([-3.0, 2.0, 0.0], [0.0, 1.0, -1.0]),
           ([0.0, 0.0, 4.0], [-1.0, 0.0, 0.0])]


def test_the_ensemble_outputs_the_mean_of_all_its_members_regression():
    rows = np.arange(ROWS, dtype=np.float32)
    ensemble = model.average([_linear_member(*line) for line in LINEAR], features.REGRESSION)
    got = ensemble.predict({ROW_KEY: rows}, verbose=0)
    # Computed from the members' definitions, not by running them: (1x + 3x - 2x) / 3 + 2.
    expected = np.mean([slope * rows + offset for slope, offset in LINEAR], axis=0)
    np.testing.assert_allclose(got[:, 0], expected, rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(expected, 2 / 3 * rows + 2, rtol=1e-6)
    assert got.shape == (ROWS, 1) and got.dtype == np.float32


def test_the_ensemble_outputs_the_mean_of_all_its_members_probabilities():
    rows = np.arange(ROWS, dtype=np.float32)
    ensemble = model.average([_softmax_member(*member) for member in SOFTMAX], features.MULTICLASS)
    got = ensemble.predict({ROW_KEY: rows}, verbose=0)
    probabilities = [_softmax(rows[:, None] * np.array(slopes) / ROWS + np.array(offsets))
                     for slopes, offsets in SOFTMAX]
    # The mean of the members' probabilities (not the softmax of their mean logits): still a
    # distribution per row.
    expected = np.mean(probabilities, axis=0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=1e-5)
    assert not np.allclose(expected, _softmax(np.mean([np.log(p) for p in probabilities], axis=0)), atol=1e-3)


def _member_result(steps: int, seconds: float, rmse: float, epochs: int, rate: float) -> dict:
    return {"train_steps": steps, "fit_wall_s": seconds, "first_epoch_examples_per_second": rate,
            "later_epochs_examples_per_second": rate * 2, "final_train_rmse": rmse, "final_eval_rmse": 99.0,
            "epochs_run": epochs, "best_epoch": epochs - 2, "stopped_early": True, "best_validation_loss": rmse,
            EVAL_METRIC: 98.0, "class_weights": {"0": 0.5}, "not_reported": 1}


def test_the_bagged_report_scores_the_ensemble_on_the_eval_split_and_totals_the_members(split):
    files, tto = split
    eval_ds = input.input_dataset(files, tto, LABEL_KEY, 16, shuffle=False)
    ensemble = model.average([_linear_member(*line) for line in LINEAR], features.REGRESSION, "mae")
    results = [_member_result(10, 1.5, 2.0, 4, 100.0), _member_result(20, 2.5, 4.0, 6, 300.0),
               _member_result(30, 1.0, 9.0, 5, 500.0)]

    report = members.bagged_results(ensemble, results, eval_ds, None, features.REGRESSION, "mae",
                                    global_batch_size=16)

    # The eval split scored by the average served, computed apart over every eval row.
    rows = np.arange(ROWS, dtype=np.float64)
    errors = np.mean([slope * rows + offset for slope, offset in LINEAR], axis=0) - LABELS
    assert report["final_eval_rmse"] == pytest.approx(np.sqrt(np.mean(errors**2)), rel=1e-5)
    assert report[EVAL_METRIC] == pytest.approx(np.mean(np.abs(errors)), rel=1e-5)
    # Training is the members' together; the train metric their mean; rates the first's.
    assert report["train_steps"] == 60 and report["epochs_run"] == 15
    assert report["fit_wall_s"] == pytest.approx(5.0)
    assert report["examples_per_second"] == pytest.approx(60 * 16 / 5.0)
    assert report["final_train_rmse"] == pytest.approx(5.0)
    assert report["first_epoch_examples_per_second"] == 100.0
    assert report["later_epochs_examples_per_second"] == 200.0
    assert report["class_weights"] == {"0": 0.5}
    assert [member["best_validation_loss"] for member in report["members"]] == [2.0, 4.0, 9.0]
    assert set(report["members"][0]) == set(members.MEMBER_REPORT_KEYS)


def test_balanced_class_weights_read_from_the_train_shards_are_scikit_learns(split, monkeypatch):
    files, tto = split
    # Labels are read in chunks of records: several here, as a large split's would be.
    monkeypatch.setattr(input, "LABEL_CHUNK_RECORDS", 7)
    spec = features.FeatureSpec(dataset="bag", task=features.MULTICLASS, label_key=LABEL_KEY,
                                numeric_keys=("row",), categoricals=())
    weights = train.class_weights("balanced", spec, lambda: input.label_values(files, tto, LABEL_KEY))
    # The labels as built, not as read back: a misread split fails here too.
    expected = compute_class_weight("balanced", classes=np.array([0, 1, 2]), y=LABELS)
    assert weights == pytest.approx(dict(enumerate(expected)))
    assert weights[2] > weights[1] > 1 > weights[0]


def _bias_only_classifier() -> keras.Model:
    """softmax(b): the input is multiplied away, so fit can only learn class shares. Trained on
    one whole batch, weighted cross-entropy is minimised at p_c proportional to w_c x n_c."""
    row = keras.Input(shape=(), name=ROW_KEY, dtype=tf.float32)
    zeros = keras.layers.Reshape((1,))(row * 0.0)
    output = keras.layers.Dense(3, activation="softmax", kernel_initializer="zeros")(zeros)
    classifier = keras.Model(inputs={ROW_KEY: row}, outputs=output)
    classifier.compile(optimizer=keras.optimizers.Adam(0.05), loss=keras.losses.SparseCategoricalCrossentropy(),
                       metrics=model.compiled_metrics(features.MULTICLASS, keras.metrics.SparseCategoricalAccuracy,
                                                      None))
    return classifier


@pytest.mark.parametrize("balanced", [True, False])
def test_balanced_class_weights_reach_a_bagged_members_fit(split, tmp_path, balanced):
    files, tto = split
    spec = features.FeatureSpec(dataset="bag", task=features.MULTICLASS, label_key=LABEL_KEY,
                                numeric_keys=("row",), categoricals=())
    weights = train.class_weights("balanced" if balanced else "none", spec,
                                  lambda: input.label_values(files, tto, LABEL_KEY))
    # Member 1 of 3, in one batch holding its whole fit part (so no batch outweighs another).
    member = list(members.bagged_members(files, tto, LABEL_KEY, global_batch_size=ROWS, equal_batches=False,
                                         folds=3, steps=EpochSteps()))[0]
    counts = np.bincount(LABELS[_rows_of(member.train_ds)], minlength=3).astype(np.float64)
    assert member.steps.validation == 1
    classifier = _bias_only_classifier()
    training = TrainingConfig(epochs=2, patience=100, tensorboard_histogram_freq=0)

    report = train.fit_and_evaluate(classifier, member.train_ds, member.validation_ds, training, str(tmp_path),
                                    ROWS, dataclasses.replace(member.steps, train=300), task=features.MULTICLASS,
                                    validation_ds=member.validation_ds, class_weight=weights)

    learned = classifier.predict({ROW_KEY: np.zeros(1, np.float32)}, verbose=0)[0]
    weighted = counts * np.array([weights[c] for c in range(3)]) if weights else counts
    np.testing.assert_allclose(learned, weighted / weighted.sum(), atol=0.01)
    if balanced:
        # Weighted, the rare class is no longer rare: near a third each, not its 15 % share.
        assert learned[2] > 0.25 and report["class_weights"] == {str(c): round(w, 4) for c, w in weights.items()}
    else:
        assert learned[2] < 0.2 and "class_weights" not in report


# A bagged tuning trial's pruning: tuning.objective on the real folds of a Transform output, in
# a real Optuna study with the Tuner's median pruner. The split above names its label "label",
# not a transformed name (features.transformed_name), so run_fn's setup cannot read it: the
# same 60 rows go through the pipeline's own preprocessing_fn here (a label vocabulary, the row
# z-scored).
TUNED_SPEC = features.FeatureSpec(dataset="bag", task=features.MULTICLASS, label_key=LABEL_KEY,
                                  numeric_keys=("row",), categoricals=())
TUNED_FOLDS = 2


@pytest.fixture(scope="module")
def trainer_split(tmp_path_factory) -> tuple[list[str], str]:
    """The train shards (gzip TFRecord) and Transform output directory a Trainer's fn_args name."""
    root = tmp_path_factory.mktemp("trainer_transform")
    raw_spec = {"row": tf.io.FixedLenFeature([], tf.float32), LABEL_KEY: tf.io.FixedLenFeature([], tf.int64)}
    raw_rows = [{"row": float(row), LABEL_KEY: int(LABELS[row])} for row in range(ROWS)]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    custom_config = {features.CONFIG_KEY: TUNED_SPEC.to_config()}
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(dir=root), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (transformed, transformed_metadata), transform_fn = (raw_rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            lambda inputs: preprocessing.preprocessing_fn(inputs, custom_config))
        _ = transform_fn | tft_beam.WriteTransformFn(str(root / "transform_graph"))
    coder = tft.coders.ExampleProtoCoder(transformed_metadata.schema)
    shards = root / "Split-train"
    shards.mkdir()
    for shard in range(SHARDS):
        with tf.io.TFRecordWriter(str(shards / f"transformed_examples-{shard:05d}-of-{SHARDS:05d}.gz"),
                                  options="GZIP") as writer:
            for row in transformed[shard::SHARDS]:
                writer.write(coder.encode(row))
    return [str(shards / "*")], str(root / "transform_graph")


def _bagged_trial(trainer_split) -> tuple[FnArgs, TrainingConfig]:
    """A trial's fn_args and knobs: two folds of about 30 rows, batches of 8, two short epochs."""
    files, transform_dir = trainer_split
    training = TrainingConfig(bag_folds=TUNED_FOLDS, epochs=2, batch_size=8, patience=5, hidden_units=(4,),
                              steps_per_execution=1, strategy="default", precision="float32", xla="off",
                              optimizer="adam")
    assert config.bag_folds(training, ROWS) == TUNED_FOLDS
    fn_args = FnArgs(train_files=files, transform_output=transform_dir,
                     custom_config={features.CONFIG_KEY: TUNED_SPEC.to_config(), **training.to_config()})
    return fn_args, training


def _study_after(intermediate_values: dict[int, float]) -> optuna.Study:
    """An in-memory study pruned as the Tuner's is, holding enough completed trials for its
    pruner to judge (PRUNER_STARTUP_TRIALS), each with these losses after each fold."""
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.RandomSampler(seed=0),
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=studies.PRUNER_STARTUP_TRIALS))
    for _ in range(studies.PRUNER_STARTUP_TRIALS):
        study.add_trial(optuna.trial.create_trial(value=float(np.mean(list(intermediate_values.values()))),
                                                  intermediate_values=intermediate_values))
    return study


def test_a_bagged_trial_is_never_pruned_after_its_last_fold(trainer_split):
    """The earlier trials were hopeless after their first fold (1e9) and perfect after their
    last (0.0): the pruner lets this trial go on after fold 1 and would prune it after fold 2.
    A trial that trained all its folds has cost all it will: it completes, scored by the mean
    of its fold losses."""
    fn_args, training = _bagged_trial(trainer_split)
    study = _study_after({0: 1e9, TUNED_FOLDS - 1: 0.0})
    trial = study.ask()
    try:
        score = tuning.objective(fn_args, training, trial)
    finally:
        keras.backend.clear_session()

    fold_losses = trial.user_attrs[studies.FOLD_LOSSES_ATTR]
    assert len(fold_losses) == TUNED_FOLDS and all(np.isfinite(fold_losses)) and min(fold_losses) > 0
    assert score == pytest.approx(float(np.mean(fold_losses)), rel=1e-9)
    # The pruner was asked at the last fold's step and says prune (any real loss > 0.0): the
    # objective alone decided not to.
    assert trial.should_prune()
    study.tell(trial, score)
    finished = study.trials[-1]
    assert finished.state == optuna.trial.TrialState.COMPLETE and finished.value == pytest.approx(score)
    assert finished.intermediate_values == pytest.approx({0: fold_losses[0], 1: float(np.mean(fold_losses))})


def test_a_bagged_trial_worse_than_the_median_after_a_fold_is_pruned_before_the_next(trainer_split):
    """The earlier trials were perfect (0.0) after every fold: this trial is pruned after its
    first fold, its one fold loss recorded, the second never trained."""
    fn_args, training = _bagged_trial(trainer_split)
    study = _study_after({fold: 0.0 for fold in range(TUNED_FOLDS)})
    trial = study.ask()
    try:
        with pytest.raises(optuna.TrialPruned, match="fold 1:"):
            tuning.objective(fn_args, training, trial)
    finally:
        keras.backend.clear_session()

    fold_losses = trial.user_attrs[studies.FOLD_LOSSES_ATTR]
    assert len(fold_losses) == 1 and np.isfinite(fold_losses[0]) and fold_losses[0] > 0
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    finished = study.trials[-1]
    assert finished.state == optuna.trial.TrialState.PRUNED
    assert finished.intermediate_values == pytest.approx({0: fold_losses[0]})
