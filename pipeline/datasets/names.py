"""The TF names a table's columns become (trainer_module/features.identifier): two columns
that become the same one, a column that becomes the name the serving signature takes its
input by, and a column whose name Transform's graph cannot hold. Checked by `turbotfx init`
and when a dataset file is loaded."""

from __future__ import annotations

import re

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


TRANSFORM_NAME_FIX = ("rename that column in the data (in TensorFlow's node names a '>' comes only before a "
                      "letter, a digit or '.', and a name does not end in '/')")
# How Transform names a column's input (tensorflow_transform/impl_helper.py,
# _sanitize_scope_name): characters other than these become "_", and "F_" comes first
# unless the name is letters and digits only. Every column of the schema is an input,
# an ignored one too.
_TRANSFORM_OTHER_CHARS = re.compile(r"[^A-Za-z0-9_.\-/>]")
_TRANSFORM_PLAIN = re.compile(r"^[A-Za-z0-9]*$")
# A node name TensorFlow's graph takes (core/framework/node_def_util.cc, IsValidNodeName):
# a '>' only before a letter, a digit or '.'. Transform's session refuses any other.
_NODE_NAME = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_.\-/]*(>[A-Za-z0-9.][A-Za-z0-9_.\-/]*)*$")


def transform_name(column: str) -> str:
    """The name of the column's input in Transform's graph."""
    name = _TRANSFORM_OTHER_CHARS.sub("_", column)
    return name if _TRANSFORM_PLAIN.match(name) else f"F_{name}"


def transform_refuses(columns: list[str]) -> tuple[str, str] | None:
    """The first column whose input Transform's graph refuses (a trailing '/' closes the
    name scope: two nodes of one name), with that input's name; None: it takes them all."""
    for column in columns:
        name = transform_name(column)
        if not _NODE_NAME.match(name) or name.endswith("/"):
            return column, name
    return None
