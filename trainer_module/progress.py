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
