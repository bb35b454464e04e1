"""The Trainer's Keras callbacks: an epoch line per epoch, early stopping on the best epoch,
step counts and speeds, and TensorBoard under model_run."""

from __future__ import annotations

import time
from typing import Any

import tf_keras as keras
from absl import logging

from trainer_module import progress
from trainer_module.config import TrainingConfig


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


def tensorboard(model_run_dir: str, training: TrainingConfig) -> keras.callbacks.TensorBoard:
    """Scalars, weight histograms and an optional profiled batch range under model_run."""
    profile = training.profile_batches
    return keras.callbacks.TensorBoard(
        log_dir=model_run_dir,
        histogram_freq=training.tensorboard_histogram_freq,
        profile_batch=tuple(int(b) for b in profile.split(",")) if profile else 0,
    )
