"""What each model of a run trains on and stops on: the train split's fit part and validation
slice, one pair per member when the run bags (k-fold), and the report of a bagged ensemble."""

from __future__ import annotations

import dataclasses
import os
import statistics
from typing import Any, Iterator

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras

from trainer_module import input, model
from trainer_module.input import EpochSteps
from trainer_module.yardsticks import EVAL_METRIC


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
