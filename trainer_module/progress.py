"""The Trainer's progress line, one per epoch: train.py's EpochLog callback logs it, and
`turbotfx run`'s console (pipeline/cli/console.py) recognises it in the log records and
prints it. No TensorFlow import: the CLI loads this module at start-up.

The logged message, e.g. `epoch 3/20  loss 0.4123  auc 0.8812  1.2s`: the epoch (from 1)
and the number of epochs, the training loss, the blessing metric on the training batches
of that epoch by its name, and the epoch's seconds; one model of a bagged ensemble
prefixes `model 2/5  `.
"""

from __future__ import annotations

import re

EPOCH_LINE = re.compile(r"^(?:model (\d+)/(\d+)  )?epoch (\d+)/(\d+)  loss (\S+)  (\w+) (\S+)  (\d+\.\d)s$")


def epoch_message(epoch: int, epochs: int, loss: float, metric: str, value: float, seconds: float,
                  member: tuple[int, int] | None = None) -> str:
    """The line for one finished epoch; epoch counts from 1. member (i, of k) prefixes the line
    of one model of a bagged ensemble: `model 2/5  epoch 3/100  ...`."""
    prefix = f"model {member[0]}/{member[1]}  " if member else ""
    return f"{prefix}epoch {epoch}/{epochs}  loss {loss:.4f}  {metric} {value:.4f}  {seconds:.1f}s"


# The Tuner's line, one per finished trial, e.g.
# `trial 3/20  complete  loss 0.4123  best 0.3981 (trial 2)  41.2s`: the trial (from 1) and the
# trials asked for ("?" when only time limits them), its state, its validation loss (absent
# for a pruned or failed trial), the best so far and the study's elapsed seconds.
TRIAL_LINE = re.compile(r"^trial (\d+)/(\d+|\?)  (complete|pruned|failed)  .*  (\d+\.\d)s$")


def trial_message(trial: int, trials: int | None, state: str, loss: float | None, best: float | None,
                  best_trial: int | None, elapsed_s: float) -> str:
    score = f"loss {loss:.4f}" if loss is not None else "loss -"
    best_text = f"best {best:.4f} (trial {best_trial})" if best is not None else "best -"
    return f"trial {trial}/{trials if trials else '?'}  {state}  {score}  {best_text}  {elapsed_s:.1f}s"


# The Tuner's total, after its last trial, e.g.
# `tuning: 20 trials (6 pruned, 0 failed) in 312.4s; best trial 7, validation loss 0.3981`.
TUNING_LINE = re.compile(r"^tuning: \d+ trials \(\d+ pruned, \d+ failed\) in \d+\.\ds; best trial \d+, .+$")


def tuning_message(trials: int, pruned: int, failed: int, seconds: float, best_trial: int, objective: str,
                   best_score: float) -> str:
    return (f"tuning: {trials} trials ({pruned} pruned, {failed} failed) in {seconds:.1f}s; "
            f"best trial {best_trial}, {objective} {best_score:.4f}")
