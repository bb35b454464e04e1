"""run_fn for the TFX Trainer: input pipeline, fit, export, training report."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import tensorflow as tf
import tensorflow_transform as tft
from tfx.components.trainer.fn_args_utils import DataAccessor, FnArgs
from tfx_bsl.public import tfxio

from trainer_module import autograph, features, model, signatures

autograph.skip_library_conversion()

REPORT_FILE = "training_report.json"
SHUFFLE_BUFFER = 1024


def input_dataset(
    file_pattern: list[str],
    data_accessor: DataAccessor,
    tf_transform_output: tft.TFTransformOutput,
    batch_size: int,
    shuffle: bool,
) -> tf.data.Dataset:
    """One epoch of (transformed features, label) batches, prefetched."""
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(
            batch_size=batch_size,
            label_key=features.TRANSFORMED_LABEL_KEY,
            num_epochs=1,
            shuffle=shuffle,
            shuffle_buffer_size=SHUFFLE_BUFFER,
        ),
        tf_transform_output.transformed_metadata.schema,
    )
    return dataset.prefetch(tf.data.AUTOTUNE)


def run_fn(fn_args: FnArgs) -> None:
    """Trains the classifier and exports it with its serving signatures."""
    hparams = hyperparameters(fn_args.custom_config or {})
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    train_ds = input_dataset(
        fn_args.train_files, fn_args.data_accessor, tf_transform_output, hparams["batch_size"], shuffle=True
    )
    eval_ds = input_dataset(
        fn_args.eval_files, fn_args.data_accessor, tf_transform_output, hparams["batch_size"], shuffle=False
    )
    vocab_sizes = {
        key: tf_transform_output.vocabulary_size_by_name(features.vocabulary_name(key))
        for key in features.CATEGORICAL_FEATURE_KEYS
    }
    num_classes = tf_transform_output.vocabulary_size_by_name(
        features.vocabulary_name(features.LABEL_KEY)
    )
    classifier = model.build_model(
        vocab_sizes, num_classes, hparams["hidden_units"], hparams["learning_rate"]
    )
    started = time.perf_counter()
    history = classifier.fit(train_ds, epochs=hparams["epochs"], verbose=0)
    fit_s = time.perf_counter() - started
    # Evaluated once, after training: per-epoch validation on small data costs more
    # than the training steps themselves.
    eval_metrics = classifier.evaluate(eval_ds, verbose=0, return_dict=True)

    started = time.perf_counter()
    signatures.export(classifier, tf_transform_output, fn_args.serving_model_dir)
    export_s = time.perf_counter() - started
    report = {
        **hparams,
        "num_classes": num_classes,
        "fit_wall_s": round(fit_s, 3),
        "export_wall_s": round(export_s, 3),
        "final_train_accuracy": float(history.history["accuracy"][-1]),
        "final_eval_accuracy": float(eval_metrics["accuracy"]),
        "tf_version": tf.__version__,
    }
    write_report(fn_args.model_run_dir, report)


def hyperparameters(custom_config: dict[str, Any]) -> dict[str, Any]:
    """The training knobs passed through the Trainer's custom_config, with defaults."""
    return {
        "epochs": int(custom_config.get("epochs", 20)),
        "batch_size": int(custom_config.get("batch_size", 32)),
        "learning_rate": float(custom_config.get("learning_rate", 0.01)),
        "hidden_units": [int(u) for u in custom_config.get("hidden_units", (32, 16))],
    }


def write_report(model_run_dir: str, report: dict[str, Any]) -> None:
    tf.io.gfile.makedirs(model_run_dir)
    with tf.io.gfile.GFile(os.path.join(model_run_dir, REPORT_FILE), "w") as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
