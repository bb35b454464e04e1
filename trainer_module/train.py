"""run_fn for the TFX Trainer: fit, export, training report (the input pipeline: input.py;
the knobs: config.py)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any, Callable, Iterator

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import (
    autograph,
    config,
    features,
    hardware,
    input,
    model,
    optimizer_choice,
    progress,
    signatures,
    yardsticks,
)
from trainer_module.config import TrainingConfig
from trainer_module.features import FeatureSpec
from trainer_module.input import EpochSteps

autograph.skip_library_conversion()

# Report entries: the model's blessing metric on the whole train split and on the eval split
# (components/reporting_trainer/keys.py names the Model properties they become).
TRAIN_METRIC = "train_metric"
EVAL_METRIC = "eval_metric"


def run_fn(fn_args: FnArgs) -> None:
    """Trains the model on the chosen hardware setup and exports it for serving."""
    training = TrainingConfig.from_config(fn_args.custom_config or {})
    spec = features.from_custom_config(fn_args.custom_config)
    # The dataset file's blessing metric; without one, the task's training metric.
    blessing_metric = str(fn_args.custom_config.get(features.BLESSING_METRIC_KEY) or model.training_metric(spec.task))
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    vocab_sizes, num_classes = vocabulary_sizes(tf_transform_output, spec)
    devices = hardware.detect()
    embedded = model.has_embeddings(spec, vocab_sizes)
    optimizer = optimizer_choice.choose(
        training.optimizer, embedded, on_tpu=devices.has_tpu or training.strategy == "tpu"
    )
    # Only embedding tables get sparse gradients: without them every optimizer is dense.
    choice = hardware.choose(devices, training.strategy, training.precision, training.xla,
                             sparse_updates=embedded and optimizer in optimizer_choice.SPARSE_OPTIMIZERS)
    strategy = hardware.build_strategy(choice.strategy)
    replicas = strategy.num_replicas_in_sync
    # batch_size is per replica; the input pipeline yields global batches.
    global_batch_size = training.batch_size * replicas
    label_key = spec.transformed_label_key
    # Equal batches: XLA compiles one shape; accumulation splits a batch into equal parts.
    equal_batches = choice.xla or training.accumulation_steps > 1
    # Early stopping watches a slice of the train split; the eval split stays for blessing.
    fit_part = input.Part(input.FIT, training.validation_share)
    train_ds = input.input_dataset(
        fn_args.train_files, tf_transform_output, label_key,
        global_batch_size, shuffle=True, drop_remainder=equal_batches, part=fit_part,
    )
    eval_ds = input.input_dataset(fn_args.eval_files, tf_transform_output, label_key, global_batch_size, shuffle=False)
    learning_rate = effective_learning_rate(training, replicas)
    model_args = (spec, vocab_sizes, num_classes, training.hidden_units, learning_rate)
    # Reading before fit: for data the pipeline caches, this is its one read of the files.
    started = time.perf_counter()
    steps = input.epoch_steps(train_ds, fn_args.train_files, eval_ds, fn_args.eval_files, global_batch_size,
                              fit_part) if training.steps_per_execution > 1 else EpochSteps()
    fit_batches = steps.train if steps.train is not None else input.batches_per_epoch(
        train_ds, fn_args.train_files, global_batch_size, fit_part)
    # The size rules read the split's rows, about: the batches counted are of its fit part.
    train_rows = round(fit_batches * global_batch_size / (1 - training.validation_share))
    folds = config.bag_folds(training, train_rows)
    shape = model.Shape(dropout=config.dropout_rate(training, train_rows), numeric_encoding=training.numeric_encoding,
                        linear=training.linear)
    if folds == 1:
        label_scale: dict[str, Any] = input.label_statistics(train_ds) if spec.task == features.REGRESSION else {}
        validation_ds, steps = validation_slice(fn_args.train_files, tf_transform_output, label_key,
                                                global_batch_size, input.Part(input.VALIDATION,
                                                                              training.validation_share), steps)
        require_train_batches(steps, global_batch_size, equal_batches)
        members: Iterator[MemberData] = iter([MemberData(train_ds, validation_ds, steps)])
    else:
        # Every member scales a regression output alike, from the whole split.
        label_scale = input.label_statistics(input.input_dataset(
            fn_args.train_files, tf_transform_output, label_key, global_batch_size, shuffle=False,
        )) if spec.task == features.REGRESSION else {}
        members = bagged_members(fn_args.train_files, tf_transform_output, label_key, global_batch_size,
                                 equal_batches, folds, steps)
    weights = class_weights(training.class_weight, spec, lambda: input.label_values(
        fn_args.train_files, tf_transform_output, label_key))
    read_s = time.perf_counter() - started
    chief = hardware.is_chief(os.environ.get("TF_CONFIG"))
    with worker_dir(fn_args.model_run_dir, chief) as run_dir, worker_dir(
        fn_args.serving_model_dir, chief
    ) as export_dir:
        keras.mixed_precision.set_global_policy(choice.precision)
        member_weights: list[list[np.ndarray]] = []
        member_results: list[dict[str, Any]] = []
        try:
            def build() -> keras.Model:
                with strategy.scope():
                    return model.build_model(
                        *model_args,
                        shape=shape,
                        weight_decay=training.weight_decay,
                        jit_compile=choice.xla,
                        steps_per_execution=training.steps_per_execution,
                        accumulation_steps=training.accumulation_steps,
                        optimizer=optimizer,
                        blessing_metric=blessing_metric,
                        **label_scale,
                    )

            classifier = build()
            for index, data in enumerate(members):
                if index:
                    # One model object trains every member: its traced training and evaluation
                    # steps are reused (the data differs, its shapes do not); fresh weights
                    # and optimizer state make each member a new model.
                    restart(classifier, build().get_weights(), choice.xla)
                member = (index + 1, folds) if folds > 1 else None
                member_results.append(fit_and_evaluate(
                    classifier, data.train_ds, eval_ds, training, member_dir(run_dir, member), global_batch_size,
                    data.steps, task=spec.task, blessing_metric=blessing_metric, validation_ds=data.validation_ds,
                    class_weight=weights, member=member))
                member_weights.append(classifier.get_weights())
            if folds == 1:
                results: dict[str, Any] = member_results[0] | blessing_yardsticks(
                    classifier, fn_args, tf_transform_output, spec, blessing_metric, global_batch_size)
        finally:
            keras.mixed_precision.set_global_policy("float32")

        started = time.perf_counter()
        if folds == 1:
            served = plain_model(member_weights[0], model_args, label_scale, shape)
        else:
            served = model.average([plain_model(weights, model_args, label_scale, shape, compiled=False)
                                    for weights in member_weights], spec.task, blessing_metric)
        if folds > 1:
            results = bagged_results(served, member_results, eval_ds, steps.eval, spec.task, blessing_metric,
                                     global_batch_size) \
                | blessing_yardsticks(served, fn_args, tf_transform_output, spec, blessing_metric, global_batch_size)
        signatures.export(served, tf_transform_output, spec, export_dir)
        results["export_wall_s"] = round(time.perf_counter() - started, 3)
        results["read_before_fit_wall_s"] = round(read_s, 3)
        results["bag_folds"] = folds
        results["dropout_applied"] = shape.dropout
        if chief:
            write_report(run_dir, {
                **training.to_config(),
                features.BLESSING_METRIC_KEY: blessing_metric,
                "strategy": choice.strategy,
                "replicas": replicas,
                "precision": choice.precision,
                "xla": choice.xla,
                "optimizer": optimizer,
                "global_batch_size": global_batch_size,
                "effective_learning_rate": learning_rate,
                "task": spec.task,
                "num_classes": num_classes,
                CLASS_NAMES_ENTRY: class_names(tf_transform_output, spec),
                **label_scale,
                **results,
                "tf_version": tf.__version__,
            })


@dataclasses.dataclass(frozen=True)
class MemberData:
    """What one model of the run trains on: its part of the train split, the validation
    slice that stops it (None: every epoch runs) and their batch counts."""

    train_ds: tf.data.Dataset
    validation_ds: tf.data.Dataset | None
    steps: EpochSteps


def bagged_members(train_files: list[str], tf_transform_output: tft.TFTransformOutput, label_key: str,
                   global_batch_size: int, equal_batches: bool, folds: int, steps: EpochSteps) -> Iterator[MemberData]:
    """k-fold bagging: member i stops early on the i-th of `folds` slices of the train split and
    trains on the rest, so every row trains all members but one and stops one. Built one member
    at a time (each caches its own batches)."""
    for fold in range(folds):
        fit_part = input.Part(input.FIT, 1 / folds, fold)
        train_ds = input.input_dataset(train_files, tf_transform_output, label_key, global_batch_size,
                                       shuffle=True, drop_remainder=equal_batches, part=fit_part)
        member_steps = dataclasses.replace(steps, train=input.batches_per_epoch(
            train_ds, train_files, global_batch_size, fit_part)) if steps.train is not None else steps
        validation_ds, member_steps = validation_slice(train_files, tf_transform_output, label_key, global_batch_size,
                                                       input.Part(input.VALIDATION, 1 / folds, fold), member_steps)
        require_train_batches(member_steps, global_batch_size, equal_batches)
        yield MemberData(train_ds, validation_ds, member_steps)


def require_train_batches(steps: EpochSteps, global_batch_size: int, equal_batches: bool) -> None:
    if steps.train == 0 and equal_batches:
        raise ValueError(f"the training split has fewer rows than one global batch ({global_batch_size}), "
                         "which XLA and gradient accumulation need whole; use a smaller --batch-size")
    if steps.train == 0:
        raise ValueError("the training split is empty; give the data more rows or the split more "
                         "train buckets (--split)")


def member_dir(run_dir: str, member: tuple[int, int] | None) -> str:
    """Where a model's TensorBoard logs go: model_run itself, or one folder per bagged member."""
    return run_dir if member is None else os.path.join(run_dir, f"member_{member[0]}")


# Per bagged member, the report keeps these of its fit_and_evaluate figures.
MEMBER_REPORT_KEYS = ("epochs_run", "best_epoch", "stopped_early", "best_validation_loss", "train_steps",
                      "fit_wall_s", EVAL_METRIC)


def bagged_results(ensemble: keras.Model, member_results: list[dict[str, Any]], eval_ds: tf.data.Dataset,
                   eval_steps: int | None, task: str, blessing_metric: str,
                   global_batch_size: int) -> dict[str, Any]:
    """The training report's figures for a bagged ensemble: the eval split scored by the
    average the run serves, training totals over the members, and each member's own figures."""
    evaluated = ensemble.evaluate(eval_ds, steps=eval_steps, verbose=0, return_dict=True)
    metric = model.training_metric(task)
    steps = sum(result["train_steps"] for result in member_results)
    fit_s = sum(result["fit_wall_s"] for result in member_results)
    first = member_results[0]
    return {
        "train_steps": steps,
        "fit_wall_s": round(fit_s, 3),
        "examples_per_second": round(steps * global_batch_size / max(fit_s, 1e-9), 1),
        "first_epoch_examples_per_second": first["first_epoch_examples_per_second"],
        **({"later_epochs_examples_per_second": first["later_epochs_examples_per_second"]}
           if "later_epochs_examples_per_second" in first else {}),
        f"final_train_{metric}": statistics.mean(result[f"final_train_{metric}"] for result in member_results),
        f"final_eval_{metric}": float(evaluated[metric]),
        **({EVAL_METRIC: float(evaluated[blessing_metric])} if blessing_metric in evaluated else {}),
        "epochs_run": sum(result["epochs_run"] for result in member_results),
        **({"class_weights": first["class_weights"]} if "class_weights" in first else {}),
        "members": [{key: result[key] for key in MEMBER_REPORT_KEYS if key in result} for result in member_results],
    }


def vocabulary_sizes(
    tf_transform_output: tft.TFTransformOutput, spec: FeatureSpec
) -> tuple[dict[str, int], int]:
    """Each categorical feature's vocabulary size, and the number of label classes (1 for
    regression)."""
    sizes = {
        key: tf_transform_output.vocabulary_size_by_name(features.vocabulary_name(key))
        for key in spec.categorical_keys
    }
    if not spec.is_classification:
        return sizes, 1
    return sizes, tf_transform_output.vocabulary_size_by_name(features.vocabulary_name(spec.label_key))


# The report entry of class_names (components/reporting_trainer/keys.py CLASS_NAMES_KEY).
CLASS_NAMES_ENTRY = "class_names"


def class_names(tf_transform_output: tft.TFTransformOutput, spec: FeatureSpec) -> list[str]:
    """The label values in class id order, as the serving signature names them; [] for
    regression. The Evaluator names per-class metrics by them."""
    if not spec.is_classification:
        return []
    return [name.decode("utf-8", errors="replace") for name in signatures.label_names(tf_transform_output, spec)]


def validation_slice(
    train_files: list[str], tf_transform_output: tft.TFTransformOutput, label_key: str,
    global_batch_size: int, part: input.Part, steps: EpochSteps,
) -> tuple[tf.data.Dataset | None, EpochSteps]:
    """The train split's validation slice (part) and its batch count; None when its share is 0
    or the slice holds no row (a tiny table): then training runs every epoch."""
    if part.share == 0:
        return None, steps
    validation_ds = input.input_dataset(train_files, tf_transform_output, label_key, global_batch_size,
                                        shuffle=False, part=part)
    batches = input.batches_per_epoch(validation_ds, train_files, global_batch_size, part)
    if batches == 0:
        return None, steps
    return validation_ds, dataclasses.replace(steps, validation=batches)


def class_weights(choice: str, spec: FeatureSpec, train_labels: Callable[[], np.ndarray]) -> dict[int, float] | None:
    """balanced: each class weighs total / (classes x its count), so every class carries the
    same total weight in the loss (scikit-learn's class_weight="balanced"); None for none.
    train_labels reads the train split's class ids (only when weights are asked for)."""
    if choice == "none":
        return None
    if not spec.is_classification:
        raise ValueError(f"class weights ({choice}) apply to classification; this dataset's task is "
                         f"{spec.task}: set class_weight = \"none\"")
    labels = train_labels().astype(np.int64)
    counts = np.bincount(labels)
    present = np.flatnonzero(counts)
    return {int(c): float(labels.size / (present.size * counts[c])) for c in present}


def effective_learning_rate(training: TrainingConfig, replicas: int) -> float:
    """With linear scaling, the rate grows with the global batch (Goyal et al., 2017)."""
    if training.scale_learning_rate:
        return training.learning_rate * replicas
    return training.learning_rate


def fit_and_evaluate(
    classifier: keras.Model,
    train_ds: tf.data.Dataset,
    eval_ds: tf.data.Dataset,
    training: TrainingConfig,
    run_dir: str,
    global_batch_size: int,
    steps: EpochSteps | None = None,
    *,
    task: str,
    blessing_metric: str | None = None,
    validation_ds: tf.data.Dataset | None = None,
    class_weight: dict[int, float] | None = None,
    member: tuple[int, int] | None = None,
) -> dict[str, Any]:
    """Trains, then evaluates once on the eval split; returns the measured figures for the
    training report. With validation_ds (a slice of the train split), training stops once
    its loss has not improved for `patience` epochs and keeps the best epoch's weights.
    steps None: Keras reads each epoch until the data ends; blessing_metric None: the
    task's training metric. member: (i, of k) when this model is one of a bagged ensemble."""
    steps = steps or EpochSteps()
    counter = StepCounter(global_batch_size)
    started = time.perf_counter()
    blessing = blessing_metric or model.training_metric(task)
    callbacks: list[keras.callbacks.Callback] = [tensorboard(run_dir, training), counter,
                                                 EpochLog(training.epochs, blessing, member)]
    best = BestEpoch(training.patience) if validation_ds is not None else None
    history = classifier.fit(
        train_ds.repeat() if steps.train else train_ds,
        epochs=training.epochs,
        steps_per_epoch=steps.train,
        validation_data=validation_ds,
        validation_steps=steps.validation,
        class_weight=class_weight,
        callbacks=[*callbacks, best] if best else callbacks,
        verbose=0,
    )
    fit_s = time.perf_counter() - started
    # Keras would XLA-compile evaluation too, once more for the last, smaller batch.
    classifier.jit_compile = False
    eval_metrics = classifier.evaluate(eval_ds, steps=steps.eval, verbose=0, return_dict=True)
    # Every step trains on a full global batch except possibly each epoch's last.
    examples = counter.total * global_batch_size
    metric = model.training_metric(task)
    return {
        "train_steps": counter.total,
        "examples_per_second": round(examples / fit_s, 1),
        # The first epoch traces the step (and, for data too large to cache, every epoch
        # reads the files).
        "first_epoch_examples_per_second": counter.epoch_rates[0],
        **({"later_epochs_examples_per_second": round(statistics.mean(counter.epoch_rates[1:]), 1)}
           if len(counter.epoch_rates) > 1 else {}),
        "fit_wall_s": round(fit_s, 3),
        f"final_train_{metric}": float(history.history[metric][-1]),
        f"final_eval_{metric}": float(eval_metrics[metric]),
        **({EVAL_METRIC: float(eval_metrics[blessing])} if blessing in eval_metrics else {}),
        "epochs_run": len(counter.epoch_rates),
        **(best.report() if best else {}),
        **({"class_weights": {str(c): round(w, 4) for c, w in class_weight.items()}} if class_weight else {}),
    }


def blessing_yardsticks(
    classifier: keras.Model,
    fn_args: FnArgs,
    tf_transform_output: tft.TFTransformOutput,
    spec: FeatureSpec,
    metric: str,
    global_batch_size: int,
) -> dict[str, float | str]:
    """After fit: the model's blessing metric on the whole train split (one unshuffled pass,
    no batch dropped), and the trivial baseline on the eval split (trainer_module/yardsticks.py)
    from a label-only read of both splits."""
    label_key = spec.transformed_label_key
    train_labels = input.label_values(fn_args.train_files, tf_transform_output, label_key)
    eval_labels = input.label_values(fn_args.eval_files, tf_transform_output, label_key)
    whole_train = input.input_dataset(fn_args.train_files, tf_transform_output, label_key, global_batch_size, shuffle=False)
    # Evaluation runs several steps per call: Keras needs the batch count, here from the labels.
    measured = classifier.evaluate(whole_train, steps=-(-train_labels.size // global_batch_size),
                                   verbose=0, return_dict=True)
    return {
        **({TRAIN_METRIC: float(measured[metric])} if metric in measured else {}),
        **yardsticks.trivial_baseline(metric, train_labels, eval_labels, class_names(tf_transform_output, spec)),
    }


class EpochLog(keras.callbacks.Callback):
    """Logs one line per finished epoch (trainer_module/progress.py: its form): the loss and
    the blessing metric on that epoch's training batches, and its seconds. `turbotfx run`
    prints these lines; elsewhere (Vertex, Kubeflow) they are log lines."""

    def __init__(self, epochs: int, metric: str, member: tuple[int, int] | None = None) -> None:
        super().__init__()
        self.epochs = epochs
        self.metric = metric
        self.member = member
        self._epoch_started = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_started = time.perf_counter()

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = logs or {}
        # The blessing metric when compiled; else the model's first metric.
        metric = self.metric if self.metric in logs else next((k for k in logs if k != "loss"), None)
        if "loss" not in logs or metric is None:
            return
        logging.info(progress.epoch_message(epoch + 1, self.epochs, float(logs["loss"]), metric,
                                            float(logs[metric]), time.perf_counter() - self._epoch_started,
                                            self.member))


class BestEpoch(keras.callbacks.EarlyStopping):
    """Early stopping on the validation loss; training ends on the best epoch's weights
    (tf_keras restores them at the end whether or not it stopped early)."""

    def __init__(self, patience: int) -> None:
        super().__init__(monitor="val_loss", patience=patience, restore_best_weights=True)

    def report(self) -> dict[str, Any]:
        return {"best_epoch": self.best_epoch + 1, "stopped_early": self.stopped_epoch > 0,
                "best_validation_loss": float(self.best)}


class StepCounter(keras.callbacks.Callback):
    """Counts the training steps fit() ran, across epochs, and times each epoch.

    Keras reports the index of the last step of each call, also when one call runs
    several steps (steps_per_execution), so the last index of an epoch counts its steps.
    """

    def __init__(self, global_batch_size: int = 1) -> None:
        super().__init__()
        self.global_batch_size = global_batch_size
        self.total = 0
        self.epoch_rates: list[float] = []  # examples/s of each epoch
        self._epoch_steps = 0
        self._epoch_started = 0.0

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self._epoch_steps = 0
        self._epoch_started = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: dict | None = None) -> None:
        self._epoch_steps = batch + 1

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        self.total += self._epoch_steps
        seconds = max(time.perf_counter() - self._epoch_started, 1e-9)
        self.epoch_rates.append(round(self._epoch_steps * self.global_batch_size / seconds, 1))


@contextlib.contextmanager
def worker_dir(chief_dir: str, chief: bool) -> Iterator[str]:
    """chief_dir on the chief; elsewhere a temporary directory, removed afterwards.

    Under MultiWorkerMirroredStrategy every worker must take part in training and saving,
    but only the chief's outputs are the model: the others write beside it and clean up.
    """
    if chief:
        yield chief_dir
        return
    temporary = tempfile.mkdtemp(prefix="turbotfx-worker-")
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def tensorboard(model_run_dir: str, training: TrainingConfig) -> keras.callbacks.TensorBoard:
    """Scalars, weight histograms and an optional profiled batch range under model_run."""
    profile = training.profile_batches
    return keras.callbacks.TensorBoard(
        log_dir=model_run_dir,
        histogram_freq=training.tensorboard_histogram_freq,
        profile_batch=tuple(int(b) for b in profile.split(",")) if profile else 0,
    )


def restart(classifier: keras.Model, fresh_weights: list[np.ndarray], xla: bool) -> None:
    """classifier as if newly built: the given initial weights, its optimizer's slots and step
    count zeroed, XLA as chosen (fit_and_evaluate turns it off to evaluate)."""
    classifier.set_weights(fresh_weights)
    for variable in classifier.optimizer.variables:
        variable.assign(tf.zeros_like(variable))
    classifier.jit_compile = xla


def serving_copy(trained: keras.Model, model_args: tuple, label_scale: dict[str, Any] | None = None,
                 shape: model.Shape = model.PLAIN) -> keras.Model:
    """plain_model with the trained model's weights."""
    return plain_model(trained.get_weights(), model_args, label_scale, shape)


def plain_model(weights: list[np.ndarray], model_args: tuple, label_scale: dict[str, Any] | None = None,
                shape: model.Shape = model.PLAIN, compiled: bool = True) -> keras.Model:
    """The trained weights in a plain float32 model, whatever training used.

    Always a fresh model: mixed-precision layers compute in a dtype that serves slowly on
    CPUs (their variables are float32 already), gradient accumulation lives in a Model
    subclass that serving has no use for, and the training optimizer's state would be saved
    with the model that tracks it. Built outside any strategy, so export sees plain
    variables.
    """
    # One keyword dict: model_args is an untyped tuple, so mypy cannot tell what it fills.
    keywords: dict[str, Any] = {"shape": shape, "compiled": compiled, **(label_scale or {})}
    serving_model = model.build_model(*model_args, **keywords)
    serving_model.set_weights(weights)
    return serving_model


def write_report(model_run_dir: str, report: dict[str, Any]) -> None:
    tf.io.gfile.makedirs(model_run_dir)
    with tf.io.gfile.GFile(os.path.join(model_run_dir, config.REPORT_FILE), "w") as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
