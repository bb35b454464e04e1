"""Rows checked against the curated schema, and encoded for TF Serving.

A RowSchema holds what the pipeline's curated schema allows in each column of a row (type,
presence, string domain, numeric range); `check` names every bad value before anything is
sent, and `to_example` / `to_instance` encode a row for serving_default (a serialized
tf.Example) or serving_raw (named features). TensorFlow is imported only to encode.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import difflib
import math
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from tensorflow_metadata.proto.v0 import schema_pb2

from serving.errors import RowError, ServingClientError
from trainer_module.features import DATE_PATTERN, NUMBER_FORMATS, identifier, number_pattern

# tf.Example and the model hold FLOAT features as float32: a larger value becomes inf.
FLOAT32_MAX = 3.4028234663852886e38
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Domain values listed in a message; a longer domain is cut short with its size.
MAX_VALUES_SHOWN = 12


@dataclasses.dataclass(frozen=True)
class _Column:
    """What the curated schema allows in one column of a row."""

    name: str
    type: int  # schema_pb2.BYTES, INT, FLOAT (or TYPE_UNKNOWN: not checked)
    required: bool
    values: frozenset[str] | None = None  # a string domain; None: open
    domain: str = ""  # the domain's name, for the message
    low: float | None = None
    high: float | None = None
    date: bool = False  # a `date` feature: ISO text the model parses
    # A numeric feature held as text: numbers, or these texts (read as missing); None: not one.
    missing_values: frozenset[str] | None = None
    number_format: str | None = None  # such a feature's digit grouping (features.NUMBER_FORMATS)


def _columns(schema: schema_pb2.Schema, label_key: str) -> dict[str, _Column]:
    """Each feature's type, presence and domain, global domains (`domain: "name"`) resolved."""
    global_domains: dict[str, Any] = {}
    for domains in (schema.string_domain, schema.int_domain, schema.float_domain):
        global_domains.update((d.name, d) for d in domains)
    columns = {}
    for feature in schema.feature:
        if feature.name == label_key:
            continue
        kind = feature.WhichOneof("domain_info")
        domain = global_domains.get(feature.domain) if kind == "domain" else getattr(feature, kind) if kind else None
        # A fixed shape makes the feature a FixedLenFeature in the model's parsing spec: a
        # row without it cannot be parsed. min_count (penguins' features) only asks that some
        # example has it, so such a feature may be missing from a row.
        required = feature.presence.min_fraction >= 1.0 or feature.HasField("shape")
        values = low = high = None
        if isinstance(domain, schema_pb2.StringDomain) and feature.type == schema_pb2.BYTES:
            values = frozenset(domain.value)
        elif isinstance(domain, (schema_pb2.IntDomain, schema_pb2.FloatDomain)):
            low = domain.min if domain.HasField("min") else None
            high = domain.max if domain.HasField("max") else None
        columns[feature.name] = _Column(feature.name, feature.type, required, values,
                                        getattr(domain, "name", "") or feature.name, low, high)
    return columns


class RowSchema:
    """The columns a model's rows may have, from the pipeline's curated schema (label left
    out), and the features it uses (`features`, default: all of them). `source` names the
    schema file in messages."""

    def __init__(self, schema: schema_pb2.Schema, label_key: str, features: Sequence[str] | None = None,
                 source: str = "the curated schema", dates: Sequence[str] = (),
                 missing_values: Mapping[str, Sequence[str]] | None = None,
                 number_formats: Mapping[str, str] | None = None) -> None:
        self.label_key = label_key
        self.source = source
        texts, formats = missing_values or {}, number_formats or {}

        def held_as_text(name: str, column: _Column) -> bool:
            return (name in texts or name in formats) and column.type == schema_pb2.BYTES

        self.columns = {name: dataclasses.replace(
            column, date=name in dates,
            missing_values=frozenset(texts.get(name, ())) if held_as_text(name, column) else None,
            number_format=formats.get(name) if held_as_text(name, column) else None)
            for name, column in _columns(schema, label_key).items()}
        self.types = {name: column.type for name, column in self.columns.items()}
        self.required = {name for name, column in self.columns.items() if column.required}
        self.features = tuple(features) if features is not None else tuple(self.types)
        self._used = frozenset(self.features)
        self._required_sorted = tuple(sorted(self.required))

    @classmethod
    def from_file(cls, path: str | Path, label_key: str, features: Sequence[str] | None = None,
                  dates: Sequence[str] = (), missing_values: Mapping[str, Sequence[str]] | None = None,
                  number_formats: Mapping[str, str] | None = None) -> RowSchema:
        """The rows a schema text proto (a curated .schema.pbtxt) allows; messages name the file.
        dates: the `date` features; missing_values: each numeric feature's texts read as missing;
        number_formats: the digit grouping of each numeric feature written with one."""
        from google.protobuf import text_format

        schema = text_format.Parse(Path(path).read_text(), schema_pb2.Schema())
        return cls(schema, label_key, features, source=str(path), dates=dates, missing_values=missing_values,
                   number_formats=number_formats)

    def rows_from_csv(self, path: Path) -> list[dict[str, Any]]:
        """The rows of a CSV file with a header of feature names; an empty or NA cell is missing.
        UTF-8, with or without the byte-order mark Excel writes (else the first feature's name
        would carry it); any other encoding is one error naming the fix."""
        try:
            with open(path, newline="", encoding="utf-8-sig") as handle:
                reader = csv.DictReader(handle)
                try:
                    return [self.csv_row(row) for row in reader]
                except csv.Error as err:  # a NUL byte; a cell past the reader's limit (128 KiB)
                    # line_num counts the lines read before the one it failed on.
                    raise ServingClientError(f"{path} line {reader.line_num + 1}: {_csv_problem(err)}") from None
        except UnicodeDecodeError as err:
            line = path.read_bytes()[:err.start].count(b"\n") + 1
            raise ServingClientError(f"{path} is not UTF-8 (byte {err.object[err.start]:#04x} on line {line}); "
                                     "save it as UTF-8 (Excel: CSV UTF-8) and try again") from None

    def csv_row(self, cells: Mapping[str, str | None]) -> dict[str, Any]:
        """A CSV record's cells as a row: numbers where the schema has a number (text that is
        none stays text, for the check to name), an empty or NA cell missing."""
        return {key: _csv_value(value, self.types.get(key)) for key, value in cells.items()}

    def without_label(self, rows: Sequence[Any]) -> list[Any]:
        """Rows copied from the training data may carry the label; the model ignores it."""
        return [{k: v for k, v in row.items() if k != self.label_key} if isinstance(row, Mapping) else row
                for row in rows]

    def check(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Raises RowError naming every bad value (row, feature, value, what is allowed, the
        fix) before anything is sent: the model would otherwise answer for a row the
        curated schema forbids (an unknown category, an impossible or infinite number)."""
        if not rows:
            raise ServingClientError("no rows to predict; give at least one row of feature values")
        problems = [problem for number, row in enumerate(rows) for problem in self.problems(number, row)]
        if problems:
            raise RowError(problems)

    def problems(self, number: int, row: Any) -> list[str]:
        """What is wrong with row `number`, one line each; [] when the schema allows it."""
        where = f"row {number}"
        if not isinstance(row, Mapping):
            return [f"{where} is {type(row).__name__} {_show(row)}, not an object of feature: value; "
                    'give each row as {"feature": value, ...}']
        problems = []
        for name in row:
            if name not in self.columns and name != self.label_key:  # the label is dropped, not sent
                near = difflib.get_close_matches(str(name), self.columns, n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                problems.append(f"{where}: unknown feature {name!r} (value {_show(row[name])}); {hint}the schema "
                                f"({self.source}) has {', '.join(sorted(self.columns))}")
        if not any(name in self._used and not _missing(value) for name, value in row.items()):
            return problems or [f"{where} has no feature values (the model uses {', '.join(self.features)}); "
                                "give at least one"]
        for name in self._required_sorted:
            if _missing(row.get(name)):
                problems.append(f"{where}: feature {name!r} is missing; the schema ({self.source}) requires it "
                                "in every row: give a value")
        for name, value in row.items():
            column = self.columns.get(name)
            if column is not None and not _missing(value):
                problem = _value_problem(column, value, self.source)
                if problem:
                    problems.append(f"{where}: feature {name!r} {problem}")
        return problems

    def to_example(self, row: Mapping[str, Any]) -> bytes:
        """A serialized tf.Example; missing values are left out, as in the CSV data."""
        from tensorflow.core.example import example_pb2

        example = example_pb2.Example()
        features = example.features.feature
        for name, value in row.items():
            if _missing(value):
                continue
            kind = self.types[name]
            if kind == schema_pb2.BYTES:
                features[name].bytes_list.value.append(_text(value, self.columns[name].number_format).encode())
            elif kind == schema_pb2.INT:
                features[name].int64_list.value.append(int(value))
            else:
                features[name].float_list.value.append(float(value))
        return example.SerializeToString()

    def to_instance(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A serving_raw row: every feature the model uses, keyed by its TF identifier (TF
        signature arguments cannot hold spaces or slashes); NaN or "" where missing. TF
        Serving's JSON parser takes a bare NaN token (its JSON conformance notes), as
        json.dumps writes it."""
        instance: dict[str, Any] = {}
        for name in self.features:
            value: Any = row.get(name)
            if self.types[name] == schema_pb2.BYTES:
                instance[identifier(name)] = "" if _missing(value) else _text(value, self.columns[name].number_format)
            else:
                instance[identifier(name)] = math.nan if _missing(value) else float(value)
        return instance


def _csv_problem(err: csv.Error) -> str:
    text = str(err)
    if "NUL" in text:
        return "holds a NUL byte, which no text cell does; remove it (or export the file as CSV again)"
    if "field larger than field limit" in text:
        return (f"has a cell over {csv.field_size_limit() // 1024} KiB, longer than any feature value; "
                "check the file's quoting (an unclosed quote runs on to the end)")
    return f"{text}; check that it is a CSV file with a header of feature names"


def _csv_value(text: str | None, kind: int | None) -> Any:
    if text is None or text.strip() in ("", "NA"):
        return None
    if kind in (schema_pb2.FLOAT, schema_pb2.INT):
        try:
            return float(text)
        except ValueError:
            return text  # left for the schema check to name
    return text


def _missing(value: Any) -> bool:
    """None or "" (an empty CSV cell, JSON null) is a missing value. NaN is not: the check
    refuses it, so that a computed NaN is not quietly imputed."""
    return value is None or (isinstance(value, str) and value == "")


def _value_problem(column: _Column, value: Any, source: str) -> str | None:
    """Why the schema forbids a (present) value of the column, and the fix; None: allowed."""
    if column.missing_values is not None:
        return _number_as_text_problem(column, value)
    if column.type == schema_pb2.BYTES:
        if not isinstance(value, str):
            return f"must be text, got {type(value).__name__} {_show(value)}; give one quoted value"
        if column.date and not _is_date(value):
            return (f"is {_show(value)}, not a date; give an ISO date such as 2024-03-15 or 2024-03-15 14:30 "
                    "(year-month-day, a real day), or null (None) where it is missing")
        if column.values is not None and value not in column.values:
            near = difflib.get_close_matches(value, column.values, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            return (f"is {_show(value)}, not in the schema's domain {column.domain!r} "
                    f"({_listed(sorted(column.values))}); {hint}use one of those values (they are case-sensitive), "
                    f"or add it to the domain in {source} and run the pipeline again")
        return None
    if column.type not in (schema_pb2.FLOAT, schema_pb2.INT):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return (f"must be a number, got {type(value).__name__} {_show(value)}; give a number without quotes, "
                "or null (None) where it is missing")
    if isinstance(value, float) and not math.isfinite(value):
        return (f"is {value!r}, not a finite number; give a finite number, or null (None) where it is "
                "missing")
    if column.type == schema_pb2.FLOAT and abs(value) > FLOAT32_MAX:
        return (f"is {_show(value)}, beyond a 32-bit float (at most ±{FLOAT32_MAX:.7g}: the model would see "
                "infinity); check the value and its unit")
    if column.type == schema_pb2.INT:
        if isinstance(value, float) and not value.is_integer():
            return f"must be a whole number, got {value!r}; round it"
        if not INT64_MIN <= value <= INT64_MAX:
            return f"is {_show(value)}, beyond a 64-bit integer; check the value and its unit"
    if (column.low is not None and value < column.low) or (column.high is not None and value > column.high):
        allowed = (f"from {column.low:g} to {column.high:g}" if column.low is not None and column.high is not None
                   else f"at least {column.low:g}" if column.low is not None else f"at most {column.high:g}")
        return (f"is {_show(value)}, outside the schema's range ({allowed}, {source}); check the value and its "
                "unit, or widen the range there and run the pipeline again")
    return None


def _number_as_text_problem(column: _Column, value: Any) -> str | None:
    """A numeric feature held as text takes a finite number (or its text, in the column's
    number_format) or one of its missing_values."""
    assert column.missing_values is not None
    pattern = number_pattern(column.number_format)
    if isinstance(value, str) and (value.strip() in column.missing_values or re.fullmatch(pattern, value)):
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return None
    written = f" (as text, written {column.number_format})" if column.number_format else ""
    if not column.missing_values:
        return (f"is {_show(value)}, not a finite number{written}; give a number, or null (None) where it is "
                "missing")
    named = _listed(sorted(repr(v) for v in column.missing_values))
    return (f"is {_show(value)}, neither a finite number{written} nor one of the values read as missing "
            f"({named}); give a number, one of those, or null (None) where it is missing")


def _text(value: Any, number_format: str | None = None) -> str:
    """A value of a text feature as the data holds it: a number (a numeric feature held as
    text) as Python writes it, with the decimal mark of the column's number_format."""
    if isinstance(value, str):
        return value
    if number_format is None:
        return repr(value)
    _, decimal = NUMBER_FORMATS[number_format]
    # Positional (no exponent, which a grouped format has no place for), shortest digits.
    return np.format_float_positional(value, trim="-").replace(".", decimal)


def _is_date(text: str) -> bool:
    """Whether the model reads text as a date (trainer_module/dates.py: the pattern, a real
    day, an hour below 24)."""
    if not re.fullmatch(DATE_PATTERN, text):
        return False
    try:
        datetime.date(int(text[:4]), int(text[5:7]), int(text[8:10]))
    except ValueError:
        return False
    return not re.match(r".{10}[T ]", text) or (int(text[11:13]) < 24 and int(text[14:16]) < 60)


def _listed(values: Sequence[str]) -> str:
    shown = ", ".join(values[:MAX_VALUES_SHOWN])
    return shown + (f", ... ({len(values)} values)" if len(values) > MAX_VALUES_SHOWN else "")


def _show(value: Any) -> str:
    """A value as in the row, cut short: a row may hold a long text by mistake."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
