"""The TF names a table's columns become (trainer_module/features.identifier): two columns
that become the same one, and a column that becomes the name the serving signature takes its
input by. Checked by `turbotfx init` and when a dataset file is loaded."""

from __future__ import annotations

from serving.contract import EXAMPLES_INPUT
from trainer_module import features

RESERVED_FIX = "rename that column in the data (the serving signature takes its input by that name)"


def identifier_clash(columns: list[str]) -> tuple[str, str, str] | None:
    """The first two columns that become the same TF name, and that name; None: no two do."""
    seen: dict[str, str] = {}
    for column in columns:
        name = features.identifier(column)
        if name in seen:
            return seen[name], column, name
        seen[name] = column
    return None


def reserved_name(columns: list[str]) -> str | None:
    """The first column whose TF name is the serving signature's input ('examples'): TFMA
    and the signatures would take the one for the other, failing the run at the Evaluator."""
    return next((column for column in columns if features.identifier(column) == EXAMPLES_INPUT), None)
