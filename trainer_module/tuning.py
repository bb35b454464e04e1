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
import socket
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

# A trial's validation slice: the share the run would hold out, and at least this much (the
# defaults' 10 % of a small table is a few dozen rows, too noisy to rank trials by).
MIN_VALIDATION_SHARE = 0.2
# The median pruner leaves the first trials alone (nothing to compare with) and a one-model
# trial's first epochs (a slow start is not a bad configuration); a bagged trial is compared
# fold by fold.
PRUNER_STARTUP_TRIALS = 3
PRUNER_WARMUP_EPOCHS = 3
# What each trial's score is: lower is better.
OBJECTIVE = "validation loss"
# Trial states as recorded (Optuna's FAIL as "failed").
COMPLETE, PRUNED, FAILED, RUNNING = "complete", "pruned", "failed", "running"
_STATES = {optuna.trial.TrialState.COMPLETE: COMPLETE, optuna.trial.TrialState.PRUNED: PRUNED,
           optuna.trial.TrialState.FAIL: FAILED, optuna.trial.TrialState.RUNNING: RUNNING,
           optuna.trial.TrialState.WAITING: RUNNING}
# The user attributes holding a trial's knob values in JSON types, the process that ran it and
# why it failed.
_VALUES_ATTR, _RAN_BY_ATTR, _ERROR_ATTR = "values", "ran_by", "error"
# A bagged trial's best-epoch validation loss of each fold it trained.
_FOLD_LOSSES_ATTR = "fold_losses"
# Stop after this many failed trials in a row: the configuration, not the sample, is wrong.
MAX_FAILURES_IN_A_ROW = 3


@dataclasses.dataclass(frozen=True)
class StudyRequest:
    """What to search and for how long: trials (None: until minutes run out), minutes (None:
    no limit), storage (an SQLAlchemy URL; None: in memory, this process alone)."""
    family: str
    knobs: tuple[str, ...] = ()
    trials: int | None = None
    minutes: float | None = None
    storage: str | None = None
    study_name: str = "turbotfx"
    # Sampler seed: each worker of a shared study needs its own (None: a random one).
    seed: int | None = 0
    # Whose trials the study holds (search_space.study_owner); "" claims nothing.
    owner: str = ""
    # Configurations tried first (knob values, JSON types): the untuned one.
    first: tuple[dict[str, Any], ...] = ()

    @property
    def dimensions(self) -> dict[str, search_space.Dimension]:
        return search_space.space(self.family, self.knobs)


@dataclasses.dataclass(frozen=True)
class TrialRecord:
    number: int
    state: str
    # The trial's validation loss: its best epoch's, or a pruned trial's last; None if it failed.
    score: float | None
    duration_s: float | None
    values: dict[str, Any]
    # The last step reported: an epoch of one model, a fold of a bagged one (a pruned trial's:
    # where it stopped).
    steps: int = 0
    # Which process ran it (HOST:PID): a shared study's trials come from several.
    ran_by: str = ""
    error: str = ""  # a failed trial's cause
    # A bagged trial's loss per fold trained (its score: their mean); [] for one model.
    fold_losses: list[float] = dataclasses.field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StudyResult:
    best: TrialRecord
    trials: list[TrialRecord]  # every trial of the study, this process's and others'
    ran_here: list[int]  # the numbers of the trials this process ran
    wall_s: float


# Processes that start together on an empty storage race to create Optuna's tables (MySQL:
# "Table ... already exists"); the one that loses finds them made when it tries again.
CREATE_ATTEMPTS = 5
CREATE_RETRY_S = 0.5


class StudyOwnerError(ValueError):
    """The named study holds another dataset's trials."""


def _create_or_join(request: StudyRequest) -> optuna.Study:
    study = _created_or_joined(request)
    if request.owner:
        claimed = study.user_attrs.get(search_space.STUDY_OWNER_ATTR)
        if claimed is None:
            study.set_user_attr(search_space.STUDY_OWNER_ATTR, request.owner)
        elif claimed != request.owner:
            raise StudyOwnerError(f"study {request.study_name!r} holds the trials of {claimed}, not of "
                                  f"{request.owner}; name another study (--tune-study)")
    return study


def _created_or_joined(request: StudyRequest) -> optuna.Study:
    from sqlalchemy import exc as sql_errors

    for attempt in range(1, CREATE_ATTEMPTS + 1):
        try:
            return optuna.create_study(
                study_name=request.study_name, storage=request.storage, direction="minimize", load_if_exists=True,
                sampler=optuna.samplers.TPESampler(seed=request.seed),
                pruner=optuna.pruners.MedianPruner(n_startup_trials=PRUNER_STARTUP_TRIALS))
        except (sql_errors.OperationalError, sql_errors.ProgrammingError, sql_errors.IntegrityError):
            if attempt == CREATE_ATTEMPTS:
                raise
            time.sleep(CREATE_RETRY_S * attempt)
    raise AssertionError("unreachable")


def run_study(fn_args: FnArgs, base: TrainingConfig, request: StudyRequest,
              on_trial: Callable[[TrialRecord, TrialRecord | None], None] = lambda trial, best: None) -> StudyResult:
    """Runs trials until the request's count or time is reached (counting every process's
    trials of a shared study); returns every trial of the study and the best one."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dimensions = request.dimensions
    kinds = {field.name: type(field.default) for field in dataclasses.fields(TrainingConfig)}
    study = _create_or_join(request)
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
        trial.set_user_attr(_VALUES_ATTR, values)
        trial.set_user_attr(_RAN_BY_ATTR, ran_by(os.getpid()))
        training = dataclasses.replace(base, **{name: config.coerce(_field(name), value)
                                                for name, value in values.items()})
        try:
            score = objective(fn_args, training, trial)
        except optuna.TrialPruned:
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            failures = 0
        except Exception as err:  # a trial's own failure (a batch too big, a NaN loss): the next may work
            logging.warning("trial %d failed: %s", trial.number, err, exc_info=True)
            trial.set_user_attr(_ERROR_ATTR, str(err)[:500])
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
        best = _best(records)
        on_trial(next(r for r in records if r.number == trial.number), best)
    records = [record(t) for t in study.get_trials(deepcopy=False)]
    best = _best(records)
    if best is None:
        raise RuntimeError(f"no tuning trial completed ({len(records)} ran); see the log for why")
    return StudyResult(best=best, trials=records, ran_here=ran_here, wall_s=time.monotonic() - started)


def reload(request: StudyRequest, result: StudyResult) -> StudyResult:
    """result with the study's trials as its storage holds them now (after other processes'
    last trials ended)."""
    assert request.storage, "only a study in a storage outlives its process"
    study = optuna.load_study(study_name=request.study_name, storage=request.storage)
    records = [record(t) for t in study.get_trials(deepcopy=False)]
    return dataclasses.replace(result, trials=records, best=_best(records) or result.best)


def fail_lost_trials(request: StudyRequest, lost: dict[str, str]) -> int:
    """Records as failed, with its cause, each trial still running in the storage that a
    process which has ended was running (lost: its ran_by, "host:pid", and why it ended): a
    worker killed mid-trial would leave it running for ever. Other processes' trials are left
    alone (a shared study's other machines). How many were failed."""
    assert request.storage, "only a study in a storage outlives its process"
    storage = optuna.storages.get_storage(request.storage)
    study_id = storage.get_study_id_from_name(request.study_name)
    failed = 0
    for trial in storage.get_all_trials(study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        cause = lost.get(str(trial.user_attrs.get(_RAN_BY_ATTR, "")))
        if cause is None:
            continue
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        storage.set_trial_user_attr(trial_id, _ERROR_ATTR, cause)
        storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
        failed += 1
    return failed


def ran_by(pid: int) -> str:
    """How a trial names the process that ran it."""
    return f"{socket.gethostname()}:{pid}"


def request_json(request: StudyRequest) -> dict[str, Any]:
    return {**dataclasses.asdict(request), "knobs": list(request.knobs), "first": list(request.first)}


def request_from_json(document: dict[str, Any]) -> StudyRequest:
    return StudyRequest(**{**document, "knobs": tuple(document.get("knobs", ())),
                           "first": tuple(document.get("first", ()))})


def record(trial: optuna.trial.FrozenTrial) -> TrialRecord:
    duration = trial.duration.total_seconds() if trial.duration is not None else None
    steps = trial.intermediate_values
    return TrialRecord(number=trial.number, state=_STATES.get(trial.state, FAILED),
                       score=float(trial.value) if trial.value is not None else None,
                       duration_s=round(duration, 3) if duration is not None else None,
                       values=dict(trial.user_attrs.get(_VALUES_ATTR, {})), steps=max(steps) + 1 if steps else 0,
                       ran_by=str(trial.user_attrs.get(_RAN_BY_ATTR, "")),
                       error=str(trial.user_attrs.get(_ERROR_ATTR, "")),
                       fold_losses=list(trial.user_attrs.get(_FOLD_LOSSES_ATTR, [])))


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
            trial.set_user_attr(_FOLD_LOSSES_ATTR, losses)
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


def _best(records: list[TrialRecord]) -> TrialRecord | None:
    complete = [r for r in records if r.state == COMPLETE and r.score is not None]
    return min(complete, key=lambda r: (r.score, r.number)) if complete else None


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
