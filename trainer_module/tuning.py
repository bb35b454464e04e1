"""The Tuner's study: trials of the searched knobs (search_space.py), each trained on the fit
part of the train split and judged by its loss on the train split's validation slice (the eval
split stays for blessing). Where the run bags (small tables: members.py), a trial trains the
same folds and scores the mean of their losses, so every train row judges it once. Optuna
samples them (TPE) and stops hopeless ones early (a median pruner on each epoch's validation
loss, or on each fold's). The first trial is the configuration the run would
train without tuning, so a tuning result is never worse than the defaults on that slice.

A study may live in an Optuna RDB storage (SQLite, MySQL, PostgreSQL): processes given the
same storage and study name share its trials (components/tuner/worker.py runs one such
process).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from typing import Any, Callable

import numpy as np
import optuna
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import callbacks, config, features, input, members, model, progress, search_space, train
from trainer_module.config import TrainingConfig
from trainer_module.input import EpochSteps
from trainer_module.studies import (
    ERROR_ATTR,
    FOLD_LOSSES_ATTR,
    RAN_BY_ATTR,
    VALUES_ATTR,
    StudyRequest,
    StudyResult,
    TrialRecord,
    best_of,
    create_or_join,
    ran_by,
    record,
)

# A trial's validation slice: the share the run would hold out, and at least this much (the
# defaults' 10 % of a small table is a few dozen rows, too noisy to rank trials by).
MIN_VALIDATION_SHARE = 0.2
# The median pruner leaves a one-model trial's first epochs alone (a slow start is not a bad
# configuration); a bagged trial is compared fold by fold.
PRUNER_WARMUP_EPOCHS = 3
# What each trial's score is: lower is better.
OBJECTIVE = "validation loss"
# Stop after this many failed trials in a row: the configuration, not the sample, is wrong.
MAX_FAILURES_IN_A_ROW = 3


def run_study(fn_args: FnArgs, base: TrainingConfig, request: StudyRequest,
              on_trial: Callable[[TrialRecord, TrialRecord | None], None] = lambda trial, best: None) -> StudyResult:
    """Runs trials until the request's count or time is reached (counting every process's
    trials of a shared study); returns every trial of the study and the best one."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dimensions = request.dimensions
    kinds = {field.name: type(field.default) for field in dataclasses.fields(TrainingConfig)}
    study = create_or_join(request)
    for values in request.first:
        study.enqueue_trial(search_space.as_sampler_params(dimensions, _inside(dimensions, values)),
                            skip_if_exists=True)
    started = time.monotonic()
    deadline = started + request.minutes * 60 if request.minutes else math.inf
    failures = 0
    ran_here: list[int] = []
    while time.monotonic() < deadline and (request.trials is None or len(study.trials) < request.trials):
        trial = study.ask()
        ran_here.append(trial.number)
        values = search_space.sample(trial, dimensions, kinds)
        trial.set_user_attr(VALUES_ATTR, values)
        trial.set_user_attr(RAN_BY_ATTR, ran_by(os.getpid()))
        training = dataclasses.replace(base, **{name: config.coerce(_field(name), value)
                                                for name, value in values.items()})
        try:
            score = objective(fn_args, training, trial)
        except optuna.TrialPruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            failures = 0
        except Exception as err:  # a trial's own failure (a batch too big, a NaN loss): the next may work
            logging.warning("trial %d failed: %s", trial.number, err, exc_info=True)
            trial.set_user_attr(ERROR_ATTR, str(err)[:500])
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            failures += 1
            if failures >= MAX_FAILURES_IN_A_ROW:
                raise RuntimeError(f"{failures} tuning trials failed in a row, the last with: {err}") from err
        except BaseException:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            raise
        else:
            study.tell(trial, score)
            failures = 0
        finally:
            keras.backend.clear_session()
        records = [record(t) for t in study.get_trials(deepcopy=False)]
        best = best_of(records)
        on_trial(next(r for r in records if r.number == trial.number), best)
    records = [record(t) for t in study.get_trials(deepcopy=False)]
    best = best_of(records)
    if best is None:
        raise RuntimeError(f"no tuning trial completed ({len(records)} ran); see the log for why")
    return StudyResult(best=best, trials=records, ran_here=ran_here, wall_s=time.monotonic() - started)


def objective(fn_args: FnArgs, training: TrainingConfig, trial: optuna.Trial) -> float:
    """One trial's validation loss (pruned: raises optuna.TrialPruned)."""
    if training.model_family == "gbt":
        return _forest_loss(fn_args, training)
    return _network_loss(fn_args, training, trial)


def _network_loss(fn_args: FnArgs, training: TrainingConfig, trial: optuna.Trial) -> float:
    """The validation loss of the MLP as run_fn would train it: with k-fold bagging (small
    tables), the mean of each fold's best-epoch loss on its own slice, so every train row is
    validated once; else the one model's best-epoch loss on its validation slice."""
    run = train.setup(fn_args, training)
    files, tto, label_key, batch = fn_args.train_files, run.tf_transform_output, run.label_key, run.global_batch_size
    whole = input.input_dataset(files, tto, label_key, batch, shuffle=False)
    train_rows = input.batches_per_epoch(whole, files, batch) * batch
    folds = config.bag_folds(training, train_rows)
    shape = model.Shape(dropout=config.dropout_rate(training, train_rows),
                        numeric_encoding=training.numeric_encoding, linear=training.linear)
    label_scale = input.label_statistics(whole) if run.spec.task == features.REGRESSION else {}
    weights = train.class_weights(training.class_weight, run.spec,
                                  lambda: input.label_values(files, tto, label_key))
    if folds > 1:
        members_data = members.bagged_members(files, tto, label_key, batch, run.equal_batches, folds,
                                              EpochSteps(train=0))
        losses: list[float] = []
        for fold, data in enumerate(members_data):
            losses.append(_fit(run, training, shape, label_scale, weights, data, pruning=None))
            trial.set_user_attr(FOLD_LOSSES_ATTR, losses)
            # Pruned on the folds scored so far against other trials' same folds.
            trial.report(float(np.mean(losses)), fold)
            if fold + 1 < folds and trial.should_prune():
                raise optuna.TrialPruned(f"fold {fold + 1}: validation loss {np.mean(losses):.4f}")
        return float(np.mean(losses))
    share = max(training.validation_share, MIN_VALIDATION_SHARE)
    fit_part = input.Part(input.FIT, share)
    train_ds = input.input_dataset(files, tto, label_key, batch, shuffle=True, drop_remainder=run.equal_batches,
                                   part=fit_part)
    validation_ds, steps = members.validation_slice(
        files, tto, label_key, batch, input.Part(input.VALIDATION, share),
        EpochSteps(train=input.batches_per_epoch(train_ds, files, batch, fit_part)))
    members.require_train_batches(steps, batch, run.equal_batches)
    if validation_ds is None:
        raise ValueError("the train split is too small to hold out a validation slice to tune on")
    return _fit(run, training, shape, label_scale, weights, members.MemberData(train_ds, validation_ds, steps),
                pruning=_Pruning(trial))


def _fit(run: train.Setup, training: TrainingConfig, shape: model.Shape, label_scale: dict[str, Any],
         weights: dict[int, float] | None, data: members.MemberData, pruning: keras.callbacks.Callback | None) -> float:
    """Trains one fresh model on data.train_ds, stopping early on data.validation_ds; its best
    epoch's validation loss."""
    best = callbacks.BestEpoch(training.patience)
    keras.mixed_precision.set_global_policy(run.choice.precision)
    try:
        network = run.build(shape, label_scale)
        network.fit(data.train_ds.repeat(), epochs=training.epochs, steps_per_epoch=data.steps.train,
                    validation_data=data.validation_ds, validation_steps=data.steps.validation, class_weight=weights,
                    callbacks=[best, *([pruning] if pruning else [])], verbose=0)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    loss = float(best.best)
    if not math.isfinite(loss):
        raise ValueError(f"the validation loss is {loss}")
    return loss


def _forest_loss(fn_args: FnArgs, training: TrainingConfig) -> float:
    """Gradient-boosted trees fitted on the fit part; their log loss (classification) or
    squared error (regression) on the validation slice."""
    from trainer_module import gbt

    spec = features.from_custom_config(fn_args.custom_config)
    blessing_metric = str(fn_args.custom_config.get(features.BLESSING_METRIC_KEY) or model.training_metric(spec.task))
    tto = tft.TFTransformOutput(fn_args.transform_output)
    share = max(training.validation_share, MIN_VALIDATION_SHARE)

    def read(part: input.Part) -> tf.data.Dataset:
        return input.input_dataset(fn_args.train_files, tto, spec.transformed_label_key, gbt.READ_BATCH_SIZE,
                                   shuffle=False, part=part)

    forest = gbt.build(spec, training, blessing_metric)
    forest.fit(read(input.Part(input.FIT, share)), verbose=0)
    validation_ds = read(input.Part(input.VALIDATION, share))
    labels = np.concatenate([label.numpy() for _, label in validation_ds]).reshape(-1)
    if labels.size == 0:
        raise ValueError("the train split is too small to hold out a validation slice to tune on")
    predicted = np.asarray(forest.predict(validation_ds, verbose=0))
    return prediction_loss(spec.task, labels, predicted)


def prediction_loss(task: str, labels: np.ndarray, predicted: np.ndarray) -> float:
    """Log loss of the predicted probabilities (a binary model's: of class id 1), or the mean
    squared error of the predicted values."""
    if task == features.REGRESSION:
        return float(np.mean((predicted.reshape(-1) - labels) ** 2))
    if task == features.BINARY:
        positive = np.clip(predicted.reshape(-1), 1e-7, 1 - 1e-7)
        return float(-np.mean(np.where(labels == 1, np.log(positive), np.log(1 - positive))))
    chosen = predicted[np.arange(labels.size), labels.astype(np.int64)]
    return float(-np.mean(np.log(np.clip(chosen, 1e-7, 1.0))))


class _Pruning(keras.callbacks.Callback):
    """Reports each epoch's validation loss to the trial, from the first after the warm-up;
    stops it when the pruner says so."""

    def __init__(self, trial: optuna.Trial) -> None:
        super().__init__()
        self.trial = trial

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("val_loss")
        if epoch < PRUNER_WARMUP_EPOCHS or loss is None or not math.isfinite(loss):
            return
        self.trial.report(float(loss), epoch)
        # A trial trained to its last epoch has cost all it will: it completes and is scored
        # (as the folds' path never prunes after the last fold).
        last = epoch + 1 >= self.params.get("epochs", epoch + 1)
        if not last and self.trial.should_prune():
            raise optuna.TrialPruned(f"epoch {epoch + 1}: validation loss {loss:.4f}")


def _field(name: str) -> dataclasses.Field:
    return next(field for field in dataclasses.fields(TrainingConfig) if field.name == name)


def _inside(dimensions: dict[str, search_space.Dimension], values: dict[str, Any]) -> dict[str, Any]:
    """The values a sampler can take as given: those inside their dimension (a dataset's own
    default outside the searched range is sampled instead)."""
    kept = {}
    for name, dimension in dimensions.items():
        value = values.get(name)
        if isinstance(dimension, search_space.Choice):
            if (tuple(value) if isinstance(value, list) else value) in dimension.values:
                kept[name] = value
        elif isinstance(value, (int, float)) and dimension.low <= value <= dimension.high:
            kept[name] = value
    return kept


def log_trial(total: int | None, started: float) -> Callable[[TrialRecord, TrialRecord | None], None]:
    """on_trial for run_study: one progress line per trial (progress.py), which `turbotfx run`
    prints."""
    def line(trial: TrialRecord, best: TrialRecord | None) -> None:
        logging.info(progress.trial_message(trial.number + 1, total, trial.state, trial.score,
                                            best.score if best else None, best.number + 1 if best else None,
                                            time.monotonic() - started))
    return line
