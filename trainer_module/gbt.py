"""The gbt model family: TF-DF gradient-boosted trees on the same Transform output, exported
with the same signatures as the DNN (signatures.py) and reported alike (train.py).

Categorical features arrive as vocabulary ids and are declared categorical (the trees split
on sets of ids); numerics arrive z-scored, which trees do not need but do not mind. TF-DF
carves its own validation slice from the train split (validation_ratio, 10 %) and stops
adding trees when its loss stops improving; the eval split stays for blessing.
Imported only when a run asks for gbt: importing TF-DF costs the DNN nothing then.
"""

from __future__ import annotations

import os
import time
from typing import Any

import tensorflow as tf
import tensorflow_decision_forests as tfdf
import tensorflow_transform as tft
import tf_keras as keras
from absl import logging
from tfx.components.trainer.fn_args_utils import FnArgs

from trainer_module import features, hardware, input, model, signatures, train, yardsticks
from trainer_module.config import TrainingConfig
from trainer_module.features import FeatureSpec

# TF-DF reads the whole train split into memory once; the batch size only sets how.
READ_BATCH_SIZE = 4096
_TASKS = {
    features.BINARY: tfdf.keras.Task.CLASSIFICATION,
    features.MULTICLASS: tfdf.keras.Task.CLASSIFICATION,
    features.REGRESSION: tfdf.keras.Task.REGRESSION,
}
_TASK_METRICS = {
    features.BINARY: keras.metrics.BinaryAccuracy,
    features.MULTICLASS: keras.metrics.SparseCategoricalAccuracy,
    features.REGRESSION: keras.metrics.RootMeanSquaredError,
}


class Forest(tf.Module):
    """The trained TF-DF model as signatures.ServingModule calls a Keras model: by its
    input names (a subclassed Keras model has none), answering per task what the DNN
    answers: the probability of class id 1 [batch, 1], the class probabilities
    [batch, classes], or the value [batch, 1]."""

    def __init__(self, forest: keras.Model, input_names: list[str]) -> None:
        super().__init__()
        self.forest = forest
        self.input_names = tuple(input_names)

    def __call__(self, inputs: dict[str, tf.Tensor], training: bool = False) -> tf.Tensor:
        return self.forest(inputs, training=training)


def build(spec: FeatureSpec, training: TrainingConfig, blessing_metric: str) -> keras.Model:
    """An untrained TF-DF GradientBoostedTreesModel over the spec's transformed features,
    compiled with the DNN's metrics (the task's training metric and the blessing metric)."""
    usages = [tfdf.keras.FeatureUsage(name) for name in spec.numeric_inputs]
    usages += [tfdf.keras.FeatureUsage(features.transformed_name(key), semantic=tfdf.keras.FeatureSemantic.CATEGORICAL)
               for key in spec.categorical_keys]
    forest = tfdf.keras.GradientBoostedTreesModel(
        task=_TASKS[spec.task],
        features=usages,
        exclude_non_specified_features=True,
        num_trees=training.gbt_num_trees,
        max_depth=training.gbt_max_depth,
        shrinkage=training.gbt_shrinkage,
        verbose=0,
        # input.py batches with rebatch(), which TF-DF's check does not recognise as batching.
        check_dataset=False,
    )
    forest.compile(metrics=model.compiled_metrics(spec.task, _TASK_METRICS[spec.task], blessing_metric))
    return forest


def input_names(spec: FeatureSpec) -> list[str]:
    return [*spec.numeric_inputs, *(features.transformed_name(key) for key in spec.categorical_keys)]


def run_fn(fn_args: FnArgs, training: TrainingConfig) -> None:
    """train.run_fn for model_family gbt: fit, yardsticks, export, training report."""
    spec = features.from_custom_config(fn_args.custom_config)
    blessing_metric = str(fn_args.custom_config.get(features.BLESSING_METRIC_KEY) or model.training_metric(spec.task))
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    _, num_classes = train.vocabulary_sizes(tf_transform_output, spec)
    if not hardware.is_chief(os.environ.get("TF_CONFIG")):
        # TF-DF trains on one machine: the other workers have nothing to do.
        return
    label_key = spec.transformed_label_key
    train_ds = input.input_dataset(fn_args.train_files, tf_transform_output, label_key, READ_BATCH_SIZE,
                                   shuffle=False)
    eval_ds = input.input_dataset(fn_args.eval_files, tf_transform_output, label_key, READ_BATCH_SIZE,
                                  shuffle=False)
    forest = build(spec, training, blessing_metric)
    started = time.perf_counter()
    forest.fit(train_ds, verbose=0)
    fit_s = time.perf_counter() - started
    trees = forest.make_inspector().num_trees()
    logging.info("gbt: %d trees (at most %d), %.1fs", trees, training.gbt_num_trees, fit_s)
    metric = model.training_metric(spec.task)
    eval_metrics = forest.evaluate(eval_ds, verbose=0, return_dict=True)
    results: dict[str, Any] = {
        "fit_wall_s": round(fit_s, 3),
        "gbt_trees": trees,
        f"final_eval_{metric}": float(eval_metrics[metric]),
        **({yardsticks.EVAL_METRIC: float(eval_metrics[blessing_metric])} if blessing_metric in eval_metrics else {}),
    }
    results |= train.blessing_yardsticks(forest, fn_args, tf_transform_output, spec, blessing_metric,
                                         READ_BATCH_SIZE)
    started = time.perf_counter()
    signatures.export(Forest(forest, input_names(spec)), tf_transform_output, spec, fn_args.serving_model_dir)
    results["export_wall_s"] = round(time.perf_counter() - started, 3)
    knobs = training.to_config()
    train.write_report(fn_args.model_run_dir, {
        # The family and its knobs (the DNN's knobs do not apply; MLMD has them all).
        **{name: value for name, value in knobs.items() if name == "model_family" or name.startswith("gbt_")},
        features.BLESSING_METRIC_KEY: blessing_metric,
        "task": spec.task,
        "num_classes": num_classes,
        train.CLASS_NAMES_ENTRY: train.class_names(tf_transform_output, spec),
        **results,
        "tf_version": tf.__version__,
        "tfdf_version": tfdf.__version__,
    })
