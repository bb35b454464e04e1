"""run_fn for the TFX Trainer: fit, export, training report (the input pipeline: input.py;
the knobs: config.py; what each model trains and stops on: members.py; its callbacks:
callbacks.py)."""

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
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import (
    autograph,
    callbacks,
    config,
    features,
    hardware,
    input,
    members,
    model,
    optimizer_choice,
    signatures,
    yardsticks,
)
from trainer_module.config import TrainingConfig
from trainer_module.features import FeatureSpec
from trainer_module.input import EpochSteps

autograph.skip_library_conversion()


@dataclasses.dataclass(frozen=True)
class Setup:
    """What one training needs before it reads data: the knobs, the features, the hardware
    choice and the model's arguments (run_fn and the Tuner's trials, tuning.py, share it)."""
    training: TrainingConfig
    spec: FeatureSpec
    blessing_metric: str
    tf_transform_output: tft.TFTransformOutput
    vocab_sizes: dict[str, int]
    num_classes: int
    optimizer: str
    choice: hardware.HardwareChoice
    strategy: tf.distribute.Strategy
    global_batch_size: int
    learning_rate: float

    @property
    def replicas(self) -> int:
        return self.strategy.num_replicas_in_sync

    @property
    def label_key(self) -> str:
        return self.spec.transformed_label_key

    @property
    def equal_batches(self) -> bool:
        """XLA compiles one shape; accumulation splits a batch into equal parts."""
        return self.choice.xla or self.training.accumulation_steps > 1

    @property
    def model_args(self) -> tuple[FeatureSpec, dict[str, int], int, tuple[int, ...], float]:
        return (self.spec, self.vocab_sizes, self.num_classes, self.training.hidden_units, self.learning_rate)

    def build(self, shape: model.Shape, label_scale: dict[str, Any]) -> keras.Model:
        with self.strategy.scope():
            return model.build_model(
                *self.model_args,
                shape=shape,
                weight_decay=self.training.weight_decay,
                jit_compile=self.choice.xla,
                steps_per_execution=self.training.steps_per_execution,
                accumulation_steps=self.training.accumulation_steps,
                optimizer=self.optimizer,
                blessing_metric=self.blessing_metric,
                **label_scale,
            )


def setup(fn_args: FnArgs, training: TrainingConfig) -> Setup:
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
    return Setup(training=training, spec=spec, blessing_metric=blessing_metric,
                 tf_transform_output=tf_transform_output, vocab_sizes=vocab_sizes, num_classes=num_classes,
                 optimizer=optimizer, choice=choice, strategy=strategy,
                 # batch_size is per replica; the input pipeline yields global batches.
                 global_batch_size=training.batch_size * replicas,
                 learning_rate=effective_learning_rate(training, replicas))


def run_fn(fn_args: FnArgs) -> None:
    """Trains the model on the chosen hardware setup and exports it for serving."""
    run = setup(fn_args, config.training_of(fn_args))
    training, spec, blessing_metric = run.training, run.spec, run.blessing_metric
    tf_transform_output, num_classes, choice = run.tf_transform_output, run.num_classes, run.choice
    replicas, global_batch_size, label_key = run.replicas, run.global_batch_size, run.label_key
    equal_batches, learning_rate, model_args, optimizer = (run.equal_batches, run.learning_rate, run.model_args,
                                                           run.optimizer)
    # Early stopping watches a slice of the train split; the eval split stays for blessing.
    fit_part = input.Part(input.FIT, training.validation_share)
    train_ds = input.input_dataset(
        fn_args.train_files, tf_transform_output, label_key,
        global_batch_size, shuffle=True, drop_remainder=equal_batches, part=fit_part,
    )
    eval_ds = input.input_dataset(fn_args.eval_files, tf_transform_output, label_key, global_batch_size, shuffle=False)
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
        validation_ds, steps = members.validation_slice(
            fn_args.train_files, tf_transform_output, label_key, global_batch_size,
            input.Part(input.VALIDATION, training.validation_share), steps)
        members.require_train_batches(steps, global_batch_size, equal_batches)
        member_data: Iterator[members.MemberData] = iter([members.MemberData(train_ds, validation_ds, steps)])
    else:
        # Every member scales a regression output alike, from the whole split.
        label_scale = input.label_statistics(input.input_dataset(
            fn_args.train_files, tf_transform_output, label_key, global_batch_size, shuffle=False,
        )) if spec.task == features.REGRESSION else {}
        member_data = members.bagged_members(fn_args.train_files, tf_transform_output, label_key,
                                             global_batch_size, equal_batches, folds, steps)
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
                return run.build(shape, label_scale)

            classifier = build()
            for index, data in enumerate(member_data):
                if index:
                    # One model object trains every member: its traced training and evaluation
                    # steps are reused (the data differs, its shapes do not); fresh weights
                    # and optimizer state make each member a new model.
                    restart(classifier, build().get_weights(), choice.xla)
                member = (index + 1, folds) if folds > 1 else None
                member_results.append(fit_and_evaluate(
                    classifier, data.train_ds, eval_ds, training, members.member_dir(run_dir, member), global_batch_size,
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
            results = members.bagged_results(served, member_results, eval_ds, steps.eval, spec.task,
                                             blessing_metric, global_batch_size) \
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


def vocabulary_sizes(
    tf_transform_output: tft.TFTransformOutput, spec: FeatureSpec
) -> tuple[dict[str, int], int]:
    """Each categorical and text feature's vocabulary size, and the number of label classes
    (1 for regression)."""
    packed = spec.packed_categoricals
    sizes = {
        key: tf_transform_output.vocabulary_size_by_name(features.vocabulary_name(key))
        for key in (*(c.key for c in spec.categoricals if c not in packed), *spec.text_keys)
    }
    if packed:
        tokens = tf_transform_output.vocabulary_by_name(features.PACKED_VOCABULARY)
        sizes |= dict(zip((c.key for c in packed), features.packed_sizes(tokens, len(packed))))
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
    counter = callbacks.StepCounter(global_batch_size)
    started = time.perf_counter()
    blessing = blessing_metric or model.training_metric(task)
    fit_callbacks: list[keras.callbacks.Callback] = [callbacks.tensorboard(run_dir, training), counter,
                                                     callbacks.EpochLog(training.epochs, blessing, member)]
    best = callbacks.BestEpoch(training.patience) if validation_ds is not None else None
    history = classifier.fit(
        train_ds.repeat() if steps.train else train_ds,
        epochs=training.epochs,
        steps_per_epoch=steps.train,
        validation_data=validation_ds,
        validation_steps=steps.validation,
        class_weight=class_weight,
        callbacks=[*fit_callbacks, best] if best else fit_callbacks,
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
        **({yardsticks.EVAL_METRIC: float(eval_metrics[blessing])} if blessing in eval_metrics else {}),
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
        **({yardsticks.TRAIN_METRIC: float(measured[metric])} if metric in measured else {}),
        **yardsticks.trivial_baseline(metric, train_labels, eval_labels, class_names(tf_transform_output, spec)),
    }


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
