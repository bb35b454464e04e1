"""What `turbotfx init` writes from a Draft: the dataset file's TOML text, the curated
schema's draft as text proto, and the two files written so that each appears whole and a
failure leaves neither. The decisions themselves are in infer.py.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from pathlib import Path
from typing import Any

from components.csv_example_gen.dialect import BYTES
from pipeline.atomic import atomic_path
from pipeline.datasets.infer import (
    REGRESSION_MAX_DROP_FRACTION,
    Draft,
    check_outputs,
    positive_class,
)
from pipeline.datasets.profile import CLOSED_DOMAIN_MAX_VALUES
from pipeline.errors import ConfigError
from trainer_module.features import NUMBER_FORMATS, REGRESSION


def write(draft: Draft, force: bool = False) -> tuple[Path, Path]:
    """Writes the schema draft, then the dataset file that names it; each appears whole, and
    a failure leaves neither (the dataset file is renamed into place last)."""
    check_outputs(draft.output, force)
    toml, schema = dataset_toml(draft), schema_text(draft)
    schema_existed = draft.schema_path.exists()
    try:
        with atomic_path(draft.output) as toml_tmp:
            Path(toml_tmp).write_text(toml)
            with atomic_path(draft.schema_path) as schema_tmp:
                Path(schema_tmp).write_text(schema)
    except BaseException as err:
        if not schema_existed and not draft.output.is_file():
            with contextlib.suppress(OSError):  # its folder could not be made: it was never written
                draft.schema_path.unlink(missing_ok=True)
        if isinstance(err, OSError):
            raise ConfigError(f"cannot write {draft.output} ({err.strerror}); choose another --output") from None
        raise
    return draft.output, draft.schema_path


def dataset_toml(draft: Draft) -> str:
    try:
        data_root = os.path.relpath(draft.data_root, draft.output.resolve().parent)
    except ValueError:  # another drive (Windows): no relative path
        data_root = str(draft.data_root)
    files = f"{draft.files} {draft.format.upper()} file{'s' if draft.files != 1 else ''}"
    lines = [
        f"# Written by `turbotfx init` from {draft.rows} rows in {files}. Check each column's role",
        f"# and the blessing bounds; curate {draft.schema_path.name} (ImportSchemaGen reads it).",
        f"name = {_string(draft.name)}",
        f"data_root = {_string(data_root)}",
        f"format = {_string(draft.format)}",
        f"label = {_string(draft.label.name)}",
        f"# {_comment(draft.task_reason)}",
        f"task = {_string(draft.task)}",
    ]
    if draft.classes is not None:
        lines.append(f"classes = {draft.classes}")
    positive = positive_class(draft)
    if positive is not None:
        lines.append("# the class TFMA's AUC, precision and recall are about (class id 1)")
        lines.append(f"positive = {_string(positive)}")
    lines += [
        f"schema = {_string(draft.schema_path.name)}",
        f"# slices: {_comment(draft.slice_reason)}",
        f"slices = [{', '.join(_string(s) for s in draft.slices)}]",
        "",
        "# numeric: imputed and z-scored (missing_values: texts read as missing, with an indicator;",
        f"#   number_format: digit grouping dropped, one of {', '.join(_string(f) for f in NUMBER_FORMATS)});",
        "# categorical: a vocabulary (one-hot or embedded);",
        "# date: ISO text, parsed into days, year and month/weekday/day-of-year/hour cycles;",
        "# text: words, a vocabulary of the most frequent, averaged learned embeddings;",
        "# ignore: not fed to the model.",
        "[features]",
    ]
    keys = [_key(d.column.name) for d in draft.decisions]
    width = max(len(k) for k in keys)
    for key, decision in zip(keys, draft.decisions):
        settings = {"missing_values": decision.missing_values, "number_format": decision.number_format}
        written = [f"{name} = {_value(value)}" for name, value in settings.items() if value]
        role = f"{{role = {_string(decision.role)}, {', '.join(written)}}}" if written else _string(decision.role)
        lines.append(f"{key.ljust(width)} = {role.ljust(13)}  # {_comment(decision.reason)}")
    blessing = draft.blessing
    if draft.task == REGRESSION:
        lines += ["", "# rmse of at most the label's standard deviation (the error of always predicting",
                  f"# its mean), and at most {REGRESSION_MAX_DROP_FRACTION:.0%} of it worse than the last blessed model."]
    else:
        lines += ["", f"# {blessing['metric']} of at least threshold, and at most max_drop below the last blessed model."]
    lines.append("[blessing]")
    lines += [f"{key} = {_value(blessing[key])}" for key in ("metric", "threshold", "max_drop")
              if blessing[key] is not None]
    lines += ["", "[training]"]
    for key, value in draft.training.items():
        if key == "class_weight" and draft.imbalanced:
            lines.append(f"# {class_weight_advice(draft)}")
        lines.append(f"{key} = {_value(value)}")
    return "\n".join(lines) + "\n"


def class_weight_advice(draft: Draft) -> str:
    """The proposal for a table with a rare class (init prints it too)."""
    name, share = draft.rarest_class or ("", 0.0)
    return (f"class {_comment(name)!r} is {share:.1%} of the rows: class_weight = \"balanced\" raises its recall, "
            "at some cost in accuracy")


def schema_text(draft: Draft) -> str:
    """The schema draft as text proto: see this module's docstring."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    schema = schema_pb2.Schema()
    label = draft.label
    feature = schema.feature.add(name=label.name, type=schema_pb2.FeatureType.Value(label.type))
    feature.presence.min_fraction = 1.0
    feature.presence.min_count = 1
    feature.shape.dim.add(size=1)
    if label.type == BYTES:
        feature.domain = label.name
        schema.string_domain.add(name=label.name, value=[str(v) for v in label.values])
    for decision in draft.decisions:
        column = decision.column
        # A column with no value at all gets BYTES: ExampleGen writes it as an empty feature.
        feature = schema.feature.add(name=column.name, type=schema_pb2.FeatureType.Value(column.type or BYTES))
        feature.value_count.min = 0
        feature.value_count.max = 1
        if decision.role == "ignore":
            continue
        feature.presence.min_count = 1
        if decision.role == "categorical" and column.type == BYTES and column.values:
            feature.domain = column.name
            schema.string_domain.add(name=column.name, value=[str(v) for v in column.values])
    header = [
        f"# Draft of the curated schema of dataset {draft.name!r}, written by `turbotfx init`; curate it:",
        f"# - the label {_comment(label.name)!r} is required in every row"
        + ("; its domain is the classes seen" if label.type == BYTES else ""),
        "# - features may be missing (Transform imputes them); text categoricals with at most",
        f"#   {CLOSED_DOMAIN_MAX_VALUES} values have a closed domain (the values seen), larger ones stay open;",
        "# - no numeric ranges yet: add float_domain / int_domain bounds a wrong unit would break;",
        "# - ignored columns are listed (so a batch holding them raises no anomaly) and may be missing.",
    ]
    return "\n".join(header) + "\n" + text_format.MessageToString(schema)


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(text: str) -> str:
    """A TOML basic string."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _key(name: str) -> str:
    return name if _BARE_KEY.match(name) else _string(name)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ("nan" if math.isnan(value) else
                                                          ("inf" if value > 0 else "-inf"))
    return str(value)


def _comment(text: str) -> str:
    """Text safe in a one-line comment (column names and values can hold anything)."""
    return "".join(char if char.isprintable() else "?" for char in text)
