"""The decisions behind `turbotfx init`: from a table on disk to a dataset file and the draft
of its curated schema, every decision with its reason.

The table is read as ExampleGen will read it (datasets/table.py: the CSV decoder's types,
the Parquet executor's), and TFDV computes its statistics. Then:

- each column's role: numeric (decimals; whole numbers with many values; numbers with a few
  text values, those read as missing; numbers with digit grouping, "12,000" or "1.234,56",
  in the features.NUMBER_FORMATS most values are written in), categorical (text with few
  values; whole numbers named as codes, CODE_WORDS, or with at most --categorical-max
  values, DEFAULT_CATEGORICAL_MAX),
  date (text that is ISO dates, Parquet timestamps), text (free text: long values, or more
  distinct values than FREE_TEXT_DISTINCT_FRACTION of the rows, of TEXT_MIN_WORDS words or
  more), or ignore (empty or constant; ID-like: a different value in every row; free text of
  fewer words; a leak: the column alone predicts the label almost perfectly,
  datasets/leaks.py);
- the task, from the label: text, or whole numbers with few values, is classification
  (binary for two classes); decimals, or whole numbers with many values, regression;
- blessing bounds (DEFAULT_BLESSING; for a regression the label's standard deviation, the
  RMSE of always predicting the mean), slices (a categorical with few values), training
  (TrainingConfig's dataset knobs);
- the schema draft (its text is draft.py's): every column with ExampleGen's type, the label
  required, features allowed to be missing, closed string domains for small text
  categoricals, and no numeric ranges a next batch could trip on.

Also the schema TFDV infers from new data for a person to curate (`turbotfx schema infer`).

Heavy libraries (pyarrow, TFDV) load inside the functions that need them.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from components.csv_example_gen.dialect import BYTES, FLOAT, INT
from pipeline.atomic import atomic_path
from pipeline.datasets import (
    DEFAULT_BLESSING,
    FORMATS,
    NAME_RE,
    checks,
    leaks,
    table,
)
from pipeline.datasets.names import (
    RESERVED_FIX,
    TRANSFORM_NAME_FIX,
    identifier_clash,
    reserved_name,
    transform_refuses,
)
from pipeline.datasets.profile import Column, profile
from pipeline.errors import ConfigError, listed, shown
from trainer_module import config as training_config
from trainer_module.features import (
    BINARY,
    MULTICLASS,
    REGRESSION,
    TASKS,
)

if TYPE_CHECKING:
    import pyarrow as pa

# An integer label with at most this many distinct values is a class; with more, a quantity.
CATEGORICAL_INT_MAX_VALUES = 20
# Whole-number features with at most this many distinct values are categories (ratings,
# levels, small counts); with more, a quantity. `init --categorical-max N` moves the line
# (0: every whole number a quantity, unless named as a code): measured on the quality
# benchmark, 0 helps some tables and costs Caravan (docs/quality.md), so 20 stays.
DEFAULT_CATEGORICAL_MAX = 20
# A whole-number column whose name's last word is one of these holds codes (customer_type,
# zip code, ProductID, age group); so does one whose name ends in a longer one (MOSTYPE).
CODE_WORDS = frozenset({"id", "code", "type", "zip", "class", "kind", "group", "category", "segment"})
CODE_SUFFIXES = ("code", "type", "class", "group", "category")
# ... and at most this many values (more: too many categories to learn each; a quantity).
CODE_MAX_VALUES = 1000
# Text of which at least this share of values are ISO dates (features.DATE_PATTERN) is a date.
DATE_MIN_SHARE = 0.95
# Text of which at least this share of values are numbers, and the rest at most
# MISSING_VALUES_MAX distinct texts ("T" for a trace of rain, "n/a"), is numeric with those
# texts read as missing (and an indicator), if its numbers are decimals or more than
# --categorical-max distinct whole numbers.
NUMBERS_MIN_SHARE = 0.5
# Free text (long values, or more distinct values than FREE_TEXT_DISTINCT_FRACTION of the rows)
# of at least this many words on average is a `text` feature; with fewer (hashes, names,
# codes), it is ignored.
TEXT_MIN_WORDS = 3
# Text whose values average more characters than this is free text, not categories.
FREE_TEXT_MIN_LENGTH = 40
# Text with more distinct values than this share of its rows (and more than
# CATEGORICAL_INT_MAX_VALUES of them) is free text or identifiers, not categories.
FREE_TEXT_DISTINCT_FRACTION = 0.5
# Slices: the first categorical with 2 to this many values, so per-slice metrics stay readable.
SLICE_MAX_VALUES = 10
# A regression's max_drop: this share of the label's standard deviation.
REGRESSION_MAX_DROP_FRACTION = 0.02


# --- columns and roles -------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Decision:
    column: Column
    role: str  # one of datasets.ROLES
    reason: str
    missing_values: tuple[str, ...] = ()  # numeric: text values read as missing
    number_format: str | None = None  # numeric: how its numbers are written (NUMBER_FORMATS)


def named_as_codes(name: str) -> bool:
    """Whether a column's name says its numbers are codes (CODE_WORDS, CODE_SUFFIXES)."""
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+", name)
    last = words[-1].lower() if words else ""
    return last in CODE_WORDS or last.removesuffix("s") in CODE_WORDS or last.endswith(CODE_SUFFIXES)


def role_of(column: Column, categorical_max: int = DEFAULT_CATEGORICAL_MAX) -> Decision:
    """A feature's role and why: the rules in this module's docstring, in order."""
    n, present = column.distinct, column.present

    def decide(role: str, reason: str, missing_values: tuple[str, ...] = (), number_format: str | None = None
               ) -> Decision:
        if column.missing and role != "ignore":
            reason += f"; {column.missing} of {column.rows} rows empty (imputed)"
        return Decision(column, role, reason, missing_values, number_format)

    if n == 0:
        return decide("ignore", "empty: no value in any row")
    if n == 1:
        return decide("ignore", f"constant: {shown(column.values[0])} in every row that has a value")
    if column.type == FLOAT:
        return decide("numeric", "decimals")
    if column.type == BYTES and column.dates >= DATE_MIN_SHARE * present:
        others = present - column.dates
        odd = f"; {others} values that are not dates are treated as missing" if others else ""
        return decide("date", f"ISO dates from {column.first_date} to {column.last_date}{odd}")
    # All numbers (a text column only when written with grouping), or a few texts besides.
    few_others = column.not_numbers or column.numbers == present
    if column.type == BYTES and few_others and column.numbers >= NUMBERS_MIN_SHARE * present and \
            (column.decimals or column.number_values > categorical_max):
        written = f"numbers written {column.number_format}" if column.number_format else "numbers"
        named = ", ".join(f"{shown(value)} in {count} rows" for value, count in column.not_numbers)
        return decide("numeric", f"{written}, and {named}: read as missing, with an indicator" if named else written,
                      tuple(value for value, _ in column.not_numbers), column.number_format)
    if column.type == BYTES and column.mean_words >= TEXT_MIN_WORDS and \
            (column.mean_length > FREE_TEXT_MIN_LENGTH or n > FREE_TEXT_DISTINCT_FRACTION * present):
        return decide("text", f"free text: {column.mean_words:.0f} words ({column.mean_length:.0f} characters) on "
                              f"average, {n} distinct values: a bag of words")
    if n == present and present >= checks.MIN_ROWS and (column.type == BYTES or n > CATEGORICAL_INT_MAX_VALUES):
        what = "whole number" if column.type == INT else "value"
        return decide("ignore", f"ID-like: a different {what} in each of the {present} rows")
    if column.type == INT:
        if named_as_codes(column.name) and n <= CODE_MAX_VALUES:
            return decide("categorical", f"whole numbers with {n} values, named as codes")
        if n <= categorical_max:
            return decide("categorical", f"whole numbers with {n} values (at most {categorical_max}: categories)")
        return decide("numeric", f"whole numbers with {n} values (more than {categorical_max}: a quantity)")
    if column.mean_length > FREE_TEXT_MIN_LENGTH:
        return decide("ignore", f"free text: values of {column.mean_length:.0f} characters on average "
                                f"(more than {FREE_TEXT_MIN_LENGTH})")
    if n > FREE_TEXT_DISTINCT_FRACTION * present and n > CATEGORICAL_INT_MAX_VALUES:
        return decide("ignore", f"free text or identifiers: {n} distinct values in {present} rows "
                                f"(more than {FREE_TEXT_DISTINCT_FRACTION:.0%})")
    return decide("categorical", f"text with {n} values")


def unless_leak(decision: Decision, rows: pa.Table, label: leaks.Target | None) -> Decision:
    """The decision, or `ignore` when the column alone gives the label away (datasets/leaks.py;
    label None: too few labelled rows to judge)."""
    if decision.role == "ignore" or label is None:
        return decision
    found = leaks.evidence(rows.column(decision.column.name), decision.column.type, label)
    if found is None:
        return decision
    return Decision(decision.column, "ignore", f"leak? {found}; give it its role back if its value is known "
                                               "before the label is")


def choose_task(label: Column, task: str | None) -> tuple[str, int | None, str]:
    """(task, classes for multiclass, why) from the label's values, or the --task given."""
    n = label.distinct
    values = f" ({listed(label.values, counted=False)})" if label.values else ""
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
    values = [table.label_text(value) for value in draft.label.values]
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
    # Classification: the rarest class and its share of the labelled rows.
    rarest_class: tuple[str, float] | None = None

    @property
    def imbalanced(self) -> bool:
        """Rare enough a class that init proposes class weights."""
        return self.rarest_class is not None and self.rarest_class[1] < CLASS_WEIGHT_PROPOSAL_SHARE


# Below this share of the rows, init proposes class_weight = "balanced" (issue 26's rule of thumb).
CLASS_WEIGHT_PROPOSAL_SHARE = 0.15


def rarest_class(label: pa.ChunkedArray) -> tuple[str, float] | None:
    """The least frequent label value and its share of the labelled rows."""
    import pyarrow.compute as pc

    counts = pc.value_counts(label.drop_null()).to_pylist()
    if not counts:
        return None
    rarest = min(counts, key=lambda entry: (entry["counts"], str(entry["values"])))
    return str(rarest["values"]), rarest["counts"] / sum(entry["counts"] for entry in counts)


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
          name: str | None = None, force: bool = False, categorical_max: int = DEFAULT_CATEGORICAL_MAX) -> Draft:
    """Reads the table and decides everything; writes nothing (see draft.write)."""
    if categorical_max < 0:
        raise ConfigError(f"--categorical-max must be 0 or more, got {categorical_max}")
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"format {fmt!r} is not one of {', '.join(FORMATS)}; choose one with --format")
    if task is not None and task not in TASKS:
        raise ConfigError(f"task {task!r} is not one of {', '.join(TASKS)}; choose one with --task")
    root = Path(data_root).expanduser().resolve()
    output = Path(output)
    check_outputs(output, force)
    dataset = dataset_name(name, output)
    fmt = fmt or table.detect_format(root)
    label_read = checks.check_data(root, fmt, label, None, [])
    rows = table.load_table(root, fmt)
    columns = profile(rows, table.statistics(rows))
    label_column = next(c for c in columns if c.name == label)
    task, classes, task_reason = choose_task(label_column, task)
    checks.check_label_task(label_read, task)
    leak_target = leaks.target(rows.column(label), task)
    decisions = tuple(unless_leak(role_of(c, categorical_max), rows, leak_target)
                      for c in columns if c.name != label)
    refused = transform_refuses([c.name for c in columns])
    if refused is not None:
        raise ConfigError(f"column {refused[0]!r} becomes {refused[1]!r} in Transform's graph, which TensorFlow "
                          f"refuses; {TRANSFORM_NAME_FIX}")
    reserved = reserved_name([label, *(d.column.name for d in decisions if d.role != "ignore")])
    if reserved is not None:
        raise ConfigError(f"column {reserved!r} becomes the TF name 'examples'; {RESERVED_FIX}")
    clash = identifier_clash([label, *(d.column.name for d in decisions)])
    if clash is not None:
        first, second, name = clash
        raise ConfigError(f"columns {first!r} and {second!r} both become the TF name {name!r}; "
                          "rename one of them in the data")
    if not any(d.role != "ignore" for d in decisions):
        reasons = "; ".join(f"{d.column.name}: {d.reason}" for d in decisions) or "no other column"
        raise ConfigError(f"no column of {root} can be a feature ({reasons}); add columns to learn from, "
                          "or pass another --label")
    slices, slice_reason = pick_slices(decisions)
    return Draft(
        name=dataset, output=output, schema_path=schema_path_for(output), data_root=root, format=fmt,
        files=len(table.data_files(root, fmt)), rows=rows.num_rows, label=label_column, task=task,
        classes=classes, task_reason=task_reason, decisions=decisions, slices=slices,
        slice_reason=slice_reason, blessing=blessing_for(task, label_column), training=training_config.dataset_defaults(),
        rarest_class=rarest_class(rows.column(label)) if task != REGRESSION else None,
    )


def _round(value: float) -> float:
    """Six significant digits: enough for a bound, short enough to read."""
    return float(f"{value:.6g}")


def infer_schema(data_root: Path, output: Path, fmt: str | None = None) -> Path:
    """Infers a schema (TFDV) from every CSV or Parquet file under data_root, read with the
    types ExampleGen will give it, and writes it as text proto. fmt None: from the files'
    suffix."""
    import tensorflow_data_validation as tfdv

    root = data_root.expanduser().resolve()
    fmt = fmt or table.detect_format(root)
    checks.check_table(root, fmt)
    schema = tfdv.infer_schema(table.statistics_of(root, fmt))
    output = output.resolve()
    with atomic_path(output) as tmp:
        tfdv.write_schema_text(schema, tmp)
    return output
