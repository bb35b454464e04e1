"""The decisions behind `turbotfx init`: from a table on disk to a dataset file and the draft
of its curated schema, every decision with its reason.

The table is read as ExampleGen will read it (pipeline/tables.py: the CSV decoder's types,
the Parquet executor's), and TFDV computes its statistics. Then:

- each column's role: numeric (decimals; whole numbers with many values), categorical
  (text with few values; whole numbers with at most CATEGORICAL_INT_MAX_VALUES), or ignore
  (empty or constant; ID-like: a different value in every row; free text: long values, or
  more distinct values than FREE_TEXT_DISTINCT_FRACTION of the rows);
- the task, from the label: text, or whole numbers with few values, is classification
  (binary for two classes); decimals, or whole numbers with many values, regression;
- blessing bounds (DEFAULT_BLESSING; for a regression the label's standard deviation, the
  RMSE of always predicting the mean), slices (a categorical with few values), training
  (DEFAULT_TRAINING);
- the schema draft: every column with ExampleGen's type, the label required, features
  allowed to be missing, closed string domains for small text categoricals, and no numeric
  ranges a next batch could trip on.

Heavy libraries (pyarrow, TFDV) load inside the functions that need them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pipeline.atomic import atomic_path
from pipeline.datasets import DEFAULT_BLESSING, DEFAULT_TRAINING, FORMATS, NAME_RE
from pipeline.datasets import table as tables
from pipeline.errors import ConfigError
from trainer_module import features
from trainer_module.features import BINARY, MULTICLASS, REGRESSION, TASKS

if TYPE_CHECKING:
    import pyarrow as pa
    from tensorflow_metadata.proto.v0 import statistics_pb2

INT, FLOAT, BYTES = tables.INT, tables.FLOAT, tables.BYTES
# Whole numbers with at most this many distinct values are categories (codes, ratings,
# counts of a few); with more, a quantity. The same bound makes an integer label a class.
CATEGORICAL_INT_MAX_VALUES = 20
# Text whose values average more characters than this is free text, not categories.
FREE_TEXT_MIN_LENGTH = 40
# Text with more distinct values than this share of its rows (and more than
# CATEGORICAL_INT_MAX_VALUES of them) is free text or identifiers, not categories.
FREE_TEXT_DISTINCT_FRACTION = 0.5
# A text categorical with at most this many values gets a closed domain in the schema draft
# (a new value stops the run); a larger vocabulary stays open (new values go to the OOV
# bucket). TFDV's infer_schema draws the same line.
CLOSED_DOMAIN_MAX_VALUES = 100
# Slices: the first categorical with 2 to this many values, so per-slice metrics stay readable.
SLICE_MAX_VALUES = 10
# A regression's max_drop: this share of the label's standard deviation.
REGRESSION_MAX_DROP_FRACTION = 0.02


# --- the table, as ExampleGen reads it ---------------------------------------------------------

def load_table(root: Path, fmt: str) -> pa.Table:
    """Every row of root's `fmt` files, each column int64, float64, string or null (no
    value at all), as ExampleGen will read it; a missing value is null."""
    import pyarrow as pa

    names = tables.check_table(root, fmt)
    parts = [tables.read_columns(path, fmt).select(names) for path in tables.data_files(root, fmt)]
    if fmt == "csv":
        table = pa.concat_tables(parts)
        return pa.table({name: _typed_csv_column(table.column(name)) for name in names})
    return pa.table({name: _typed_parquet_column(name, [part.column(name) for part in parts]) for name in names})


def _typed_csv_column(texts: pa.ChunkedArray) -> pa.Array:
    """The CSV decoder's type for the column (its widest cell type), and the values in it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = texts.combine_chunks()
    kind = tables.column_type([v for v in pc.unique(texts).to_pylist() if v is not None])
    if kind is None:
        return pa.nulls(len(texts))
    if kind == BYTES:
        return texts
    arrow, parse = (pa.int64(), int) if kind == INT else (pa.float64(), float)
    try:
        return pc.cast(texts, arrow)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        # Cells Python parses but Arrow does not (" 7", "1_000"): parsed as the decoder does.
        return pa.array([None if v is None else parse(v) for v in texts.to_pylist()], arrow)


def _typed_parquet_column(name: str, chunks: Sequence[pa.ChunkedArray]) -> pa.Array:
    """The Parquet executor's type: integers and booleans int64, floats float64, text
    string; an empty string is no value (it writes none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    arrays = []
    for chunked in chunks:
        array = tables._plain(chunked.combine_chunks())
        kind = tables.arrow_type(array.type)
        if kind == INT:
            array = pc.cast(array, pa.int64(), safe=False)
        elif kind == FLOAT:
            array = pc.cast(array, pa.float64())
        elif kind == BYTES:
            try:
                array = pc.cast(array, pa.string()) if not pa.types.is_string(array.type) else array
            except pa.ArrowInvalid:
                raise ConfigError(f"column {name!r} holds bytes that are not UTF-8 text, which TFX's Parquet "
                                  "ExampleGen cannot decode; store it as UTF-8 strings") from None
            array = pc.if_else(pc.equal(pc.binary_length(array), 0), pa.scalar(None, pa.string()), array)
        arrays.append(array)
    kinds = {a.type for a in arrays} - {pa.null()}
    if not kinds:
        return pa.nulls(sum(len(a) for a in arrays))
    target = kinds.pop()
    return pa.concat_arrays([a if a.type == target else pa.nulls(len(a), target) for a in arrays])


def statistics(table: pa.Table) -> statistics_pb2.DatasetFeatureStatisticsList:
    """TFDV's statistics of the table: each row an example, each column a feature of at
    most one value (a null: none), as ExampleGen writes them."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    from tensorflow_data_validation.statistics import stats_impl, stats_options

    columns = []
    for column in table.columns:
        array = column.combine_chunks()
        if pa.types.is_null(array.type):
            columns.append(array)  # TFDV takes an all-null column as such, not as list<null>
            continue
        valid = pc.is_valid(array)
        offsets = np.concatenate([[0], np.cumsum(valid.to_numpy(zero_copy_only=False))]).astype(np.int32)
        columns.append(pa.ListArray.from_arrays(pa.array(offsets), array.drop_null(), mask=pc.invert(valid)))
    batch = pa.RecordBatch.from_arrays(columns, table.column_names)
    return stats_impl.generate_statistics_in_memory(batch, stats_options.StatsOptions())


def statistics_of(root: Path, fmt: str) -> statistics_pb2.DatasetFeatureStatisticsList:
    return statistics(load_table(root, fmt))


# --- columns and roles -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Column:
    """What the decisions look at in one column."""

    name: str
    type: str | None  # INT, FLOAT or BYTES as ExampleGen writes it; None: no value at all
    rows: int
    missing: int
    distinct: int
    values: tuple  # the distinct values, sorted, when at most CLOSED_DOMAIN_MAX_VALUES
    mean_length: float  # characters (text only)
    std_dev: float  # population standard deviation (numbers only)

    @property
    def present(self) -> int:
        return self.rows - self.missing


def profile(table: pa.Table, stats: statistics_pb2.DatasetFeatureStatisticsList) -> list[Column]:
    """Each column's type, missing values and standard deviation (TFDV), and its distinct
    values (counted exactly by Arrow)."""
    import pyarrow.compute as pc

    by_name = {feature.path.step[0]: feature for feature in stats.datasets[0].features}
    found = []
    for name in table.column_names:
        array = table.column(name).combine_chunks()
        feature = by_name.get(name)
        kind = tables.arrow_type(array.type)
        distinct = pc.count_distinct(array, mode="only_valid").as_py() if kind else 0
        values = tuple(sorted(v for v in pc.unique(array).to_pylist() if v is not None)) \
            if kind and distinct <= CLOSED_DOMAIN_MAX_VALUES else ()
        std_dev = feature.num_stats.std_dev if feature is not None and feature.HasField("num_stats") else 0.0
        mean_length = (pc.mean(pc.utf8_length(array)).as_py() or 0.0) if kind == BYTES else 0.0
        found.append(Column(name, kind, len(array), array.null_count, distinct, values, mean_length, std_dev))
    return found


@dataclasses.dataclass(frozen=True)
class Decision:
    column: Column
    role: str  # numeric, categorical or ignore
    reason: str


def role_of(column: Column) -> Decision:
    """A feature's role and why: the rules in this module's docstring, in order."""
    n, present = column.distinct, column.present

    def decide(role: str, reason: str) -> Decision:
        if column.missing and role != "ignore":
            reason += f"; {column.missing} of {column.rows} rows empty (imputed)"
        return Decision(column, role, reason)

    if n == 0:
        return decide("ignore", "empty: no value in any row")
    if n == 1:
        return decide("ignore", f"constant: {_show(column.values[0])} in every row that has a value")
    if column.type == FLOAT:
        return decide("numeric", "decimals")
    if n == present and present >= tables.MIN_ROWS and (column.type == BYTES or n > CATEGORICAL_INT_MAX_VALUES):
        what = "whole number" if column.type == INT else "value"
        return decide("ignore", f"ID-like: a different {what} in each of the {present} rows")
    if column.type == INT:
        if n <= CATEGORICAL_INT_MAX_VALUES:
            return decide("categorical", f"whole numbers with {n} values "
                                         f"(at most {CATEGORICAL_INT_MAX_VALUES}: categories)")
        return decide("numeric", f"whole numbers with {n} values (more than {CATEGORICAL_INT_MAX_VALUES}: a quantity)")
    if column.mean_length > FREE_TEXT_MIN_LENGTH:
        return decide("ignore", f"free text: values of {column.mean_length:.0f} characters on average "
                                f"(more than {FREE_TEXT_MIN_LENGTH})")
    if n > FREE_TEXT_DISTINCT_FRACTION * present and n > CATEGORICAL_INT_MAX_VALUES:
        return decide("ignore", f"free text or identifiers: {n} distinct values in {present} rows "
                                f"(more than {FREE_TEXT_DISTINCT_FRACTION:.0%})")
    return decide("categorical", f"text with {n} values")


def choose_task(label: Column, task: str | None) -> tuple[str, int | None, str]:
    """(task, classes for multiclass, why) from the label's values, or the --task given."""
    n = label.distinct
    values = f" ({_values(label.values)})" if label.values else ""
    if label.type == BYTES:
        what = f"text with {n} values{values}"
    elif label.type == INT:
        what = f"whole numbers with {n} values{values if n <= CATEGORICAL_INT_MAX_VALUES else ''}"
    else:
        what = f"decimals with {n} values"
    if task is not None:
        reason = f"--task {task} ({what})"
    elif label.type == BYTES or (label.type == INT and n <= CATEGORICAL_INT_MAX_VALUES):
        task = BINARY if n == 2 else MULTICLASS
        bound = "" if label.type == BYTES else f", at most {CATEGORICAL_INT_MAX_VALUES}"
        reason = f"{what}{bound}: classes"
    else:
        task = REGRESSION
        bound = f" (more than {CATEGORICAL_INT_MAX_VALUES})" if label.type == INT else ""
        reason = f"{what}{bound}: a quantity to predict"
    return task, (n if task == MULTICLASS else None), reason


# Binary label values that name the positive class by convention (compared in lower case).
POSITIVE_NAMES = ("1", "yes", "true", "y")


def positive_class(draft: Draft) -> str | None:
    """A binary label's conventional positive value ("1", "yes", "true"), as the vocabulary
    writes it; None otherwise (the pipeline then takes the rarer class)."""
    if draft.task != BINARY:
        return None
    values = [tables.label_text(value) for value in draft.label.values]
    return next((value for value in values if value.lower() in POSITIVE_NAMES), None)


def pick_slices(decisions: Sequence[Decision]) -> tuple[tuple[str, ...], str]:
    for decision in decisions:
        if decision.role == "categorical" and 2 <= decision.column.distinct <= SLICE_MAX_VALUES:
            return (decision.column.name,), (f"{decision.column.name} ({decision.column.distinct} values: the first "
                                              f"categorical with at most {SLICE_MAX_VALUES})")
    return (), f"none (no categorical with 2 to {SLICE_MAX_VALUES} values)"


def blessing_for(task: str, label: Column) -> dict[str, Any]:
    if task != REGRESSION:
        return dict(DEFAULT_BLESSING[task])
    std = _round(label.std_dev)
    return {"metric": DEFAULT_BLESSING[REGRESSION]["metric"], "threshold": std,
            "max_drop": _round(REGRESSION_MAX_DROP_FRACTION * label.std_dev)}


# --- the draft -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Draft:
    """A dataset file and its schema draft, not yet written, with every decision's reason."""

    name: str
    output: Path  # the dataset file
    schema_path: Path  # beside it
    data_root: Path
    format: str
    files: int
    rows: int
    label: Column
    task: str
    classes: int | None
    task_reason: str
    decisions: tuple[Decision, ...]  # every column but the label, in the table's order
    slices: tuple[str, ...]
    slice_reason: str
    blessing: dict[str, Any]
    training: dict[str, Any]

    def toml(self) -> str:
        return dataset_toml(self)

    def schema(self) -> str:
        return schema_text(self)


def schema_path_for(output: Path) -> Path:
    return output.with_name(f"{output.stem}.schema.pbtxt")


def check_outputs(output: Path, force: bool) -> None:
    """Refuses to overwrite the dataset file or its schema unless forced, and never writes
    over a directory."""
    for path in (output, schema_path_for(output)):
        if path.is_dir():
            raise ConfigError(f"{path} is a directory; give --output a file name, e.g. {path / 'dataset.toml'}")
        if path.exists() and not force:
            raise ConfigError(f"{path} already exists; pass --force to overwrite it, or choose another --output")


def dataset_name(name: str | None, output: Path) -> str:
    """--name if valid, else one derived from the dataset file's name."""
    if name is not None:
        if not NAME_RE.match(name):
            raise ConfigError(f"--name {name!r} is not a valid name; use a letter followed by letters, digits, "
                              "'-' or '_' (at most 63 characters)")
        return name
    derived = re.sub(r"[^A-Za-z0-9_-]+", "-", output.stem).strip("-_")
    if not derived[:1].isalpha():
        derived = f"dataset-{derived}".strip("-")
    return derived[:63].rstrip("-_")


def draft(data_root: Path, label: str, output: Path, fmt: str | None = None, task: str | None = None,
          name: str | None = None, force: bool = False) -> Draft:
    """Reads the table and decides everything; writes nothing (see write)."""
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r} is not one of {', '.join(FORMATS)}; choose one with --format")
    if task is not None and task not in TASKS:
        raise ConfigError(f"task {task!r} is not one of {', '.join(TASKS)}; choose one with --task")
    root = Path(data_root).expanduser().resolve()
    output = Path(output)
    check_outputs(output, force)
    dataset = dataset_name(name, output)
    fmt = fmt or tables.detect_format(root)
    tables.check_data(root, fmt, label, None, [])
    table = load_table(root, fmt)
    columns = profile(table, statistics(table))
    label_column = next(c for c in columns if c.name == label)
    task, classes, task_reason = choose_task(label_column, task)
    tables.check_data(root, fmt, label, task, [])
    decisions = tuple(role_of(c) for c in columns if c.name != label)
    _check_identifiers([label, *(d.column.name for d in decisions)])
    if not any(d.role != "ignore" for d in decisions):
        reasons = "; ".join(f"{d.column.name}: {d.reason}" for d in decisions) or "no other column"
        raise ConfigError(f"no column of {root} can be a feature ({reasons}); add columns to learn from, "
                          "or pass another --label")
    slices, slice_reason = pick_slices(decisions)
    return Draft(
        name=dataset, output=output, schema_path=schema_path_for(output), data_root=root, format=fmt,
        files=len(tables.data_files(root, fmt)), rows=table.num_rows, label=label_column, task=task,
        classes=classes, task_reason=task_reason, decisions=decisions, slices=slices,
        slice_reason=slice_reason, blessing=blessing_for(task, label_column), training=dict(DEFAULT_TRAINING),
    )


def write(draft: Draft, force: bool = False) -> tuple[Path, Path]:
    """Writes the schema draft, then the dataset file that names it; each appears whole, and
    a failure leaves neither (the dataset file is renamed into place last)."""
    check_outputs(draft.output, force)
    toml, schema = draft.toml(), draft.schema()
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


def _check_identifiers(columns: Sequence[str]) -> None:
    seen: dict[str, str] = {}
    for column in columns:
        name = features.identifier(column)
        if name in seen:
            raise ConfigError(f"columns {seen[name]!r} and {column!r} both become the TF name {name!r}; "
                              "rename one of them in the data")
        seen[name] = column


# --- the files' text -------------------------------------------------------------------------

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
        "# numeric: imputed and z-scored; categorical: a vocabulary (one-hot or embedded);",
        "# ignore: not fed to the model.",
        "[features]",
    ]
    keys = [_key(d.column.name) for d in draft.decisions]
    width = max(len(k) for k in keys)
    for key, decision in zip(keys, draft.decisions):
        lines.append(f"{key.ljust(width)} = {_string(decision.role).ljust(13)}  # {_comment(decision.reason)}")
    blessing = draft.blessing
    if draft.task == REGRESSION:
        lines += ["", "# rmse of at most the label's standard deviation (the error of always predicting",
                  f"# its mean), and at most {REGRESSION_MAX_DROP_FRACTION:.0%} of it worse than the last blessed model."]
    else:
        lines += ["", f"# {blessing['metric']} of at least threshold, and at most max_drop below the last blessed model."]
    lines.append("[blessing]")
    lines += [f"{key} = {_value(blessing[key])}" for key in ("metric", "threshold", "max_drop")
              if blessing[key] is not None]
    lines += ["", "[training]"] + [f"{key} = {_value(value)}" for key, value in draft.training.items()]
    return "\n".join(lines) + "\n"


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


def _round(value: float) -> float:
    """Six significant digits: enough for a bound, short enough to read."""
    return float(f"{value:.6g}")


def _comment(text: str) -> str:
    """Text safe in a one-line comment (column names and values can hold anything)."""
    return "".join(char if char.isprintable() else "?" for char in text)


def _show(value: Any, width: int = 24) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 4] + "...'"


def _values(values: Sequence[Any], most: int = 5) -> str:
    shown = ", ".join(_show(v) for v in values[:most])
    return shown + (", ..." if len(values) > most else "")
