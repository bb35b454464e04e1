"""The Tuner's pruning callback: a trial may stop after any epoch past the warm-up but its
last; a trial trained to its last epoch completes and is scored."""

from __future__ import annotations

import optuna
import pytest

from trainer_module import tuning

EPOCHS = 8


class _AlwaysPrune(optuna.pruners.BasePruner):
    """A pruner that says stop at every report."""

    def prune(self, study, trial) -> bool:
        return True


def _callback() -> tuple[tuning._Pruning, optuna.Trial]:
    trial = optuna.create_study(pruner=_AlwaysPrune()).ask()
    callback = tuning._Pruning(trial)
    callback.set_params({"epochs": EPOCHS})  # as Keras' fit() sets them
    return callback, trial


@pytest.mark.parametrize("epoch", range(tuning.PRUNER_WARMUP_EPOCHS, EPOCHS - 1))
def test_an_epoch_before_the_last_is_pruned(epoch):
    callback, _ = _callback()
    with pytest.raises(optuna.TrialPruned):
        callback.on_epoch_end(epoch, {"val_loss": 1.0})


def test_the_last_epoch_reports_and_is_not_pruned():
    callback, trial = _callback()
    callback.on_epoch_end(EPOCHS - 1, {"val_loss": 0.25})
    assert trial.study.trials[0].intermediate_values == {EPOCHS - 1: 0.25}
