"""run_fn for the TFX Trainer: input pipeline, fit, export, training report."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import time
from typing import Any, Iterator

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import (
    autograph,
    features,
    hardware,
    model,
    optimizer_choice,
    progress,
    signatures,
    yardsticks,
)
from trainer_module.features import FeatureSpec

autograph.skip_library_conversion()

REPORT_FILE = "training_report.json"
# Report entries: the model's blessing metric on the whole train split and on the eval split
# (components/reporting_trainer/keys.py names the Model properties they become).
TRAIN_METRIC = "train_metric"
EVAL_METRIC = "eval_metric"
# Records parsed (and, when shuffling, permuted) together, in batches: 16 x 256 = 4,096
# records shuffle as well as tfxio's 1,024-record buffer did, at a fraction of the cost.
CHUNK_BATCHES = 16
# Shards read at once; more only helps with more cores than tf.data's parsing uses.
READ_PARALLELISM = 4
# Transformed training data up to this size (compressed TFRecords) is cached in memory
# after the first epoch.
CACHE_LIMIT_BYTES = 256 * 1024 * 1024
CACHED_BATCHES_SHUFFLE_BUFFER = 256
# Records whose labels one parse_example reads (label_values).
LABEL_CHUNK_RECORDS = 4096


def input_dataset(
    file_pattern: list[str],
    tf_transform_output: tft.TFTransformOutput,
    label_key: str,
    batch_size: int,
    shuffle: bool,
    drop_remainder: bool = False,
) -> tf.data.Dataset:
    """One epoch of (transformed features, label) batches, prefetched.

    Each shard is read in chunks of CHUNK_BATCHES batches' records; a chunk is parsed by
    one vectorized parse_example, its rows permuted when shuffling, and cut into batches.
    Nothing runs per example in Python or per record in tf.data: several times the
    examples/s of tfxio's path (../shared/notes/trainer-input-and-optimizer.md), so the
    first, uncached epoch keeps up with training. Shards are read in parallel, in
    non-deterministic order when shuffling. Data small enough is cached after the first
    epoch; later epochs then reshuffle the cached batches (their composition stays fixed).
    drop_remainder gives every batch the same static shape, which XLA needs to compile
    the training step once instead of once per batch shape.
    """
    files = matching_files(file_pattern)
    feature_spec = tf_transform_output.transformed_feature_spec()

    def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        parsed = tf.io.parse_example(serialized, feature_spec)
        if not shuffle:
            return parsed
        order = tf.random.shuffle(tf.range(tf.shape(serialized)[0]))
        return {name: tf.gather(values, order) for name, values in parsed.items()}

    paths = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        paths = paths.shuffle(len(files), reshuffle_each_iteration=True)
    chunks = paths.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression_of(files)).batch(
            CHUNK_BATCHES * batch_size),
        cycle_length=min(len(files), READ_PARALLELISM),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle,
    )
    dataset = (
        chunks.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle)
        .rebatch(batch_size, drop_remainder=drop_remainder)
        .map(lambda batch: split_label(batch, label_key))
    )
    if files_size(files) <= CACHE_LIMIT_BYTES:
        dataset = dataset.cache()
        if shuffle:
            dataset = dataset.shuffle(CACHED_BATCHES_SHUFFLE_BUFFER, reshuffle_each_iteration=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def split_label(batch: dict[str, tf.Tensor], label_key: str) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    features_only = dict(batch)
    return features_only, features_only.pop(label_key)


def matching_files(file_pattern: list[str]) -> list[str]:
    files = sorted(path for pattern in file_pattern for path in tf.io.gfile.glob(pattern))
    if not files:
        raise ValueError(f"no transformed examples match {', '.join(file_pattern)}; "
                         "rerun Transform (its output was moved or deleted)")
    return files


def compression_of(files: list[str]) -> str:
    """Transform writes gzip-compressed TFRecord shards (*.gz), all alike."""
    compressed = {path.endswith(".gz") for path in files}
    if len(compressed) > 1:
        raise ValueError(f"the transformed examples in {os.path.dirname(files[0])} mix gzip (*.gz) and "
                         "uncompressed shards; rerun Transform to rewrite them")
    return "GZIP" if compressed.pop() else ""


def batches_per_epoch(dataset: tf.data.Dataset, file_pattern: list[str], batch_size: int) -> int:
    """Batches in one epoch of dataset = input_dataset(file_pattern, ..., batch_size, ...)
    (Keras needs the count to run several steps per call).

    Data that input_dataset caches is counted by reading it once: that fills the cache at
    the input pipeline's full speed, which on few cores is faster than reading while
    training (fit's epochs then all come from memory). Larger data is counted from its
    records in chunks (read, not parsed).
    """
    files = matching_files(file_pattern)
    if files_size(files) <= CACHE_LIMIT_BYTES:
        return int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))
    chunks = tf.data.TFRecordDataset(
        files, compression_type=compression_of(files), num_parallel_reads=min(len(files), READ_PARALLELISM)
    ).batch(CHUNK_BATCHES * batch_size)
    records = int(chunks.reduce(tf.constant(0, tf.int64), lambda count, chunk: count + tf.size(chunk, tf.int64)))
    # A static batch dimension: input_dataset dropped the last, partial batch.
    drops_remainder = dataset.element_spec[1].shape[0] is not None
    return records // batch_size if drops_remainder else -(-records // batch_size)


def files_size(files: list[str]) -> int:
    return sum(tf.io.gfile.stat(path).length for path in files)


def run_fn(fn_args: FnArgs) -> None:
    """Trains the model on the chosen hardware setup and exports it for serving."""
    hparams = hyperparameters(fn_args.custom_config or {})
    spec = features.from_custom_config(fn_args.custom_config)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    vocab_sizes, num_classes = vocabulary_sizes(tf_transform_output, spec)
    devices = hardware.detect()
    embedded = model.has_embeddings(spec, vocab_sizes)
    optimizer = optimizer_choice.choose(
        hparams["optimizer"], embedded, on_tpu=devices.has_tpu or hparams["strategy"] == "tpu"
    )
    # Only embedding tables get sparse gradients: without them every optimizer is dense.
    choice = hardware.choose(devices, hparams["strategy"], hparams["precision"], hparams["xla"],
                             sparse_updates=embedded and optimizer in optimizer_choice.SPARSE_OPTIMIZERS)
    strategy = hardware.build_strategy(choice.strategy)
    replicas = strategy.num_replicas_in_sync
    # batch_size is per replica; the input pipeline yields global batches.
    global_batch_size = hparams["batch_size"] * replicas
    label_key = spec.transformed_label_key
    # Equal batches: XLA compiles one shape; accumulation splits a batch into equal parts.
    equal_batches = choice.xla or hparams["accumulation_steps"] > 1
    train_ds = input_dataset(
        fn_args.train_files, tf_transform_output, label_key,
        global_batch_size, shuffle=True, drop_remainder=equal_batches,
    )
    eval_ds = input_dataset(fn_args.eval_files, tf_transform_output, label_key, global_batch_size, shuffle=False)
    learning_rate = effective_learning_rate(hparams, replicas)
    model_args = (spec, vocab_sizes, num_classes, hparams["hidden_units"], learning_rate)
    # Reading before fit: for data the pipeline caches, this is its one read of the files.
    started = time.perf_counter()
    label_scale = label_statistics(train_ds) if spec.task == features.REGRESSION else {}
    steps = epoch_steps(train_ds, fn_args.train_files, eval_ds, fn_args.eval_files, global_batch_size) if (
        hparams["steps_per_execution"] > 1) else EpochSteps()
    read_s = time.perf_counter() - started
    if steps.train == 0 and equal_batches:
        raise ValueError(f"the training split has fewer rows than one global batch ({global_batch_size}), "
                         "which XLA and gradient accumulation need whole; use a smaller --batch-size")
    if steps.train == 0:
        raise ValueError("the training split is empty; give the data more rows or the split more "
                         "train buckets (--split)")
    chief = hardware.is_chief(os.environ.get("TF_CONFIG"))
    with worker_dir(fn_args.model_run_dir, chief) as run_dir, worker_dir(
        fn_args.serving_model_dir, chief
    ) as export_dir:
        keras.mixed_precision.set_global_policy(choice.precision)
        try:
            with strategy.scope():
                classifier = model.build_model(
                    *model_args,
                    jit_compile=choice.xla,
                    steps_per_execution=hparams["steps_per_execution"],
                    accumulation_steps=hparams["accumulation_steps"],
                    optimizer=optimizer,
                    blessing_metric=hparams[features.BLESSING_METRIC_KEY],
                    **label_scale,
                )
            results = fit_and_evaluate(classifier, train_ds, eval_ds, hparams, run_dir, global_batch_size, steps)
            results |= blessing_yardsticks(classifier, fn_args, tf_transform_output, spec,
                                           hparams[features.BLESSING_METRIC_KEY], global_batch_size)
        finally:
            keras.mixed_precision.set_global_policy("float32")

        started = time.perf_counter()
        signatures.export(serving_copy(classifier, model_args, label_scale), tf_transform_output, spec, export_dir)
        results["export_wall_s"] = round(time.perf_counter() - started, 3)
        results["read_before_fit_wall_s"] = round(read_s, 3)
        if chief:
            write_report(run_dir, {
                **hparams,
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
class EpochSteps:
    """Batches per epoch of each split; None where Keras reads until the data ends."""

    train: int | None = None
    eval: int | None = None


def epoch_steps(train_ds: tf.data.Dataset, train_files: list[str], eval_ds: tf.data.Dataset,
                eval_files: list[str], global_batch_size: int) -> EpochSteps:
    return EpochSteps(
        train=batches_per_epoch(train_ds, train_files, global_batch_size),
        eval=batches_per_epoch(eval_ds, eval_files, global_batch_size),
    )


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


def label_statistics(train_ds: tf.data.Dataset) -> dict[str, float]:
    """The training labels' mean and standard deviation, which scale a regression output.

    One pass over the labels; the batches it reads are the ones the first epoch caches.
    """
    count, total, squares = train_ds.reduce(
        (0.0, 0.0, 0.0),
        lambda state, batch: (
            state[0] + tf.cast(tf.size(batch[1]), tf.float32),
            state[1] + tf.reduce_sum(batch[1]),
            state[2] + tf.reduce_sum(tf.square(batch[1])),
        ),
    )
    count, total, squares = float(count), float(total), float(squares)
    mean = total / max(count, 1.0)
    std = max(squares / max(count, 1.0) - mean * mean, 0.0) ** 0.5
    return {"label_mean": mean, "label_std": std if std > 0 else 1.0}


def effective_learning_rate(hparams: dict[str, Any], replicas: int) -> float:
    """With linear scaling, the rate grows with the global batch (Goyal et al., 2017)."""
    if hparams["scale_learning_rate"]:
        return hparams["learning_rate"] * replicas
    return hparams["learning_rate"]


def fit_and_evaluate(
    classifier: keras.Model,
    train_ds: tf.data.Dataset,
    eval_ds: tf.data.Dataset,
    hparams: dict[str, Any],
    run_dir: str,
    global_batch_size: int,
    steps: EpochSteps = EpochSteps(),
) -> dict[str, float]:
    """Trains, then evaluates once (per-epoch validation on small data costs more than
    the training steps); returns the measured figures for the training report."""
    counter = StepCounter(global_batch_size)
    started = time.perf_counter()
    blessing = hparams.get(features.BLESSING_METRIC_KEY) or model.training_metric(hparams["task"])
    history = classifier.fit(
        train_ds.repeat() if steps.train else train_ds,
        epochs=hparams["epochs"],
        steps_per_epoch=steps.train,
        callbacks=[tensorboard(run_dir, hparams), counter, EpochLog(hparams["epochs"], blessing)],
        verbose=0,
    )
    fit_s = time.perf_counter() - started
    # Keras would XLA-compile evaluation too, once more for the last, smaller batch.
    classifier.jit_compile = False
    eval_metrics = classifier.evaluate(eval_ds, steps=steps.eval, verbose=0, return_dict=True)
    # Every step trains on a full global batch except possibly each epoch's last.
    examples = counter.total * global_batch_size
    metric = model.training_metric(hparams["task"])
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
    train_labels = label_values(fn_args.train_files, tf_transform_output, label_key)
    eval_labels = label_values(fn_args.eval_files, tf_transform_output, label_key)
    whole_train = input_dataset(fn_args.train_files, tf_transform_output, label_key, global_batch_size, shuffle=False)
    # Evaluation runs several steps per call: Keras needs the batch count, here from the labels.
    measured = classifier.evaluate(whole_train, steps=-(-train_labels.size // global_batch_size),
                                   verbose=0, return_dict=True)
    return {
        **({TRAIN_METRIC: float(measured[metric])} if metric in measured else {}),
        **yardsticks.trivial_baseline(metric, train_labels, eval_labels, class_names(tf_transform_output, spec)),
    }


def label_values(file_pattern: list[str], tf_transform_output: tft.TFTransformOutput, label_key: str) -> np.ndarray:
    """Every transformed label of a split (class ids, or the regression values), in file
    order; only the label is parsed."""
    files = matching_files(file_pattern)
    label_spec = {label_key: tf_transform_output.transformed_feature_spec()[label_key]}
    chunks = tf.data.TFRecordDataset(
        files, compression_type=compression_of(files), num_parallel_reads=min(len(files), READ_PARALLELISM)
    ).batch(LABEL_CHUNK_RECORDS).map(lambda serialized: tf.io.parse_example(serialized, label_spec)[label_key])
    values = [np.ravel(chunk) for chunk in chunks.as_numpy_iterator()]
    return np.concatenate(values) if values else np.zeros((0,), np.float32)


class EpochLog(keras.callbacks.Callback):
    """Logs one line per finished epoch (trainer_module/progress.py: its form): the loss and
    the blessing metric on that epoch's training batches, and its seconds. `turbotfx run`
    prints these lines; elsewhere (Vertex, Kubeflow) they are log lines."""

    def __init__(self, epochs: int, metric: str) -> None:
        super().__init__()
        self.epochs = epochs
        self.metric = metric
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
                                            float(logs[metric]), time.perf_counter() - self._epoch_started))


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


def tensorboard(model_run_dir: str, hparams: dict[str, Any]) -> keras.callbacks.TensorBoard:
    """Scalars, weight histograms and an optional profiled batch range under model_run."""
    profile = hparams["profile_batches"]
    return keras.callbacks.TensorBoard(
        log_dir=model_run_dir,
        histogram_freq=hparams["tensorboard_histogram_freq"],
        profile_batch=tuple(int(b) for b in profile.split(",")) if profile else 0,
    )


def serving_copy(trained: keras.Model, model_args: tuple, label_scale: dict[str, float] | None = None) -> keras.Model:
    """The trained weights in a plain float32 model, whatever training used.

    Always a fresh model: mixed-precision layers compute in a dtype that serves slowly on
    CPUs (their variables are float32 already), gradient accumulation lives in a Model
    subclass that serving has no use for, and the training optimizer's state would be saved
    with the model that tracks it. Built outside any strategy, so export sees plain
    variables.
    """
    serving_model = model.build_model(*model_args, **(label_scale or {}))
    serving_model.set_weights(trained.get_weights())
    return serving_model


def hyperparameters(custom_config: dict[str, Any]) -> dict[str, Any]:
    """The training knobs passed through the Trainer's custom_config, with defaults."""
    task = str(custom_config.get(features.CONFIG_KEY, {}).get("task", features.MULTICLASS))
    return {
        "task": task,
        # The dataset file's blessing metric; without one, the task's training metric.
        features.BLESSING_METRIC_KEY: str(custom_config.get(features.BLESSING_METRIC_KEY) or model.training_metric(task)),
        "epochs": int(custom_config.get("epochs", 20)),
        "batch_size": int(custom_config.get("batch_size", 32)),
        "learning_rate": float(custom_config.get("learning_rate", 0.01)),
        "hidden_units": [int(u) for u in custom_config.get("hidden_units", (32, 16))],
        "strategy": str(custom_config.get("strategy", "auto")),
        "precision": str(custom_config.get("precision", "auto")),
        "xla": str(custom_config.get("xla", "auto")),
        "steps_per_execution": int(custom_config.get("steps_per_execution", 32)),
        "accumulation_steps": int(custom_config.get("accumulation_steps", 1)),
        "optimizer": str(custom_config.get("optimizer", "auto")),
        "scale_learning_rate": bool(custom_config.get("scale_learning_rate", False)),
        "tensorboard_histogram_freq": int(custom_config.get("tensorboard_histogram_freq", 5)),
        "profile_batches": str(custom_config.get("profile_batches", "")),
    }


def write_report(model_run_dir: str, report: dict[str, Any]) -> None:
    tf.io.gfile.makedirs(model_run_dir)
    with tf.io.gfile.GFile(os.path.join(model_run_dir, REPORT_FILE), "w") as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
