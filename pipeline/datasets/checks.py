"""The checks made on the user's table before TFX sees it: every file has rows and the same
columns, every CSV record parses as ExampleGen will parse it, the label is there, filled in,
and suits the task. Each failure is one line: the file (and line), the cause and the fix.

Checks read as little as they can: the header (or the Parquet footer) for the columns, and
only the label column for the label, so they stay fast on tables of millions of rows. A CSV
file's rows are parsed once (check_table), as ExampleGen will parse them, in C loops: a row
ExampleGen would read otherwise than the user wrote it stops the run there.
"""

from __future__ import annotations

import csv
from collections import Counter
from itertools import chain
from pathlib import Path
from typing import Sequence

from components.csv_example_gen import dialect
from components.csv_example_gen.dialect import BYTES, FLOAT
from pipeline.datasets import table
from pipeline.datasets.table import LabelColumn
from pipeline.errors import ConfigError, listed, shown
from trainer_module.features import BINARY, MULTICLASS, REGRESSION

# Fewer rows than this cannot give both a train and an eval split a useful share.
MIN_ROWS = 20
# A classification label with more values than this is not a set of classes a model can
# learn from a table (an ID, a free-text column, a number read as text).
MAX_CLASSES = 100
_PANDAS_DROPNA = "drop those rows (e.g. with pandas: df.dropna(subset=[{label!r}]))"
# A label of numbers with at most this many distinct texts: the texts are mistakes or
# placeholders ("n/a"), not classes, and each is named with its lines.
LABEL_TEXTS_MAX = 3
# Lines named for each such text; the rest are counted.
LABEL_TEXT_LINES_SHOWN = 5


def check_table(root: Path, fmt: str) -> list[str]:
    """The columns every `fmt` file in root shares; fails (one line: the cause and the fix)
    unless root holds such files, each with rows and the same columns."""
    table.check_root(root, fmt.upper())
    files = table.data_files(root, fmt)
    if not files:
        raise ConfigError(f"data root {root} holds no {table.SUFFIXES[fmt]} file; put your {fmt.upper()} files there")
    first = table.columns_of(files[0], fmt)
    for path in files[1:]:
        columns = table.columns_of(path, fmt)
        # CsvExampleGen reads every CSV file by the first file's header: order matters.
        same = columns == first if fmt == "csv" else sorted(columns) == sorted(first)
        if not same:
            what = "header" if fmt == "csv" else "columns"
            raise ConfigError(f"{path} has columns {columns} but {files[0]} has {first}; "
                              f"give every {fmt.upper()} file in the data root the same {what}")
    if fmt == "parquet":
        _check_parquet_types(files)
    else:
        for path in files:
            _check_csv_rows(path, len(first))
    return first


def _check_parquet_types(files: list[Path]) -> None:
    import pyarrow.parquet as pq

    first = {field.name: table.arrow_type(field.type) for field in pq.read_schema(files[0])}
    for path in files[1:]:
        for field in pq.read_schema(path):
            kind = table.arrow_type(field.type)
            if None not in (kind, first[field.name]) and kind != first[field.name]:
                raise ConfigError(f"{path}: column {field.name!r} holds {kind} values but {files[0]}'s holds "
                                  f"{first[field.name]}; give the column one type in every file")


# --- the rows of a CSV file, as ExampleGen parses them ---------------------------------------
#
# The check makes the records and the parse of csv_example_gen/dialect.py, so what it passes
# ExampleGen reads as the user wrote it; it names the first line that would not be. To stay
# fast, lines are taken in blocks and the work on each runs in C loops; a block that fails
# is parsed again record by record, as ExampleGen parses it, to name the line.

# Characters of lines read at a time.
_BLOCK_CHARS = 4 * 1024 * 1024


def _check_csv_rows(path: Path, width: int) -> None:
    """Fails (one line: the file, the line, what is wrong, the fix) unless ExampleGen parses
    every record of the file into `width` cells, and at least one."""
    rows = 0
    pending: list[str] = []  # the lines of a record whose quotes are still open
    number = 2  # the next line's number: the header is line 1
    try:
        with open(path, encoding=dialect.ENCODING, newline="\n") as handle:
            handle.readline()
            while lines := handle.readlines(_BLOCK_CHARS):
                records, starts = dialect.records(lines, pending, number)
                number += len(lines)
                rows += _count_rows(path, records, starts, width)
    except UnicodeDecodeError:
        table.check_utf8(path)  # names the byte
        raise
    if pending:
        raise ConfigError(f"{path}, line {number - len(pending)}: a quoted field opens there and never closes "
                          "(an odd number of '\"' from there to the end of the file); close it, or quote the "
                          "field and double each '\"' in it (\"12\"\" pizza\"), as pandas' to_csv writes it")
    # ExampleGen skips blank lines: a file of a header and blank lines has no rows.
    if not rows:
        raise ConfigError(f"{path} has a header but no rows; remove it or add rows")


def _count_rows(path: Path, records: list[str], starts: Sequence[int], width: int) -> int:
    """The rows (records not blank) among records; fails, naming the first record ExampleGen
    would not parse into `width` cells."""
    # Parsed as one stream, with a blank line after: a record the csv module reads on into
    # the next (where ExampleGen would read the same record again) leaves a row fewer.
    try:
        cells = Counter(map(len, csv.reader(chain(records, ("\n",)), delimiter=dialect.DELIMITER)))
    except csv.Error:
        cells = Counter()
    if cells.total() != len(records) + 1 or cells.keys() - {0, width}:
        raise ConfigError(dialect.first_problem(path, records, starts, width))
    return len(records) + 1 - cells[0]


# --- all of it -----------------------------------------------------------------------------

def check_data(root: Path, fmt: str, label: str, task: str | None, feature_columns: Sequence[str]) -> LabelColumn:
    """The label column, read once; raises ConfigError (one line: the cause and the fix)
    unless root holds `fmt` files with the same columns, among them the label and every
    feature column, and enough rows whose label suits the task (task None: any task;
    `turbotfx init` has not chosen yet)."""
    files = table.data_files(root, fmt) if root.is_dir() else []
    columns = check_table(root, fmt)
    if label not in columns:
        raise ConfigError(f"{files[0]} has no label column {label!r} (columns: {', '.join(columns)}); "
                          "name one of its columns as the label, or add the column")
    for name in feature_columns:
        if name not in columns:
            raise ConfigError(f"{files[0]} has no column {name!r}, which the dataset file lists under "
                              "[features]; add the column to the data or remove it from the dataset file")
    column = table.read_label(root, fmt, label)
    if column.rows < MIN_ROWS:
        raise ConfigError(f"data root {root} holds {column.rows} rows; a train and an eval split need at "
                          f"least {MIN_ROWS}: add rows")
    if column.missing:
        raise ConfigError(f"{column.missing} of {column.rows} rows in {root} have an empty label {label!r}; "
                          + _PANDAS_DROPNA.format(label=label) + " or fill them in")
    _check_numbers_with_text(root, fmt, column, task)
    if len(column.classes) < 2:
        needs = ("a regression needs a label that varies" if task == REGRESSION
                 else "a model needs at least two classes")
        raise ConfigError(f"label column {label!r} has a single value ({shown(column.classes[0])}) in all "
                          f"{column.rows} rows; {needs}: choose another label or add rows with other values")
    check_label_task(column, task)
    return column


def _check_numbers_with_text(root: Path, fmt: str, column: LabelColumn, task: str | None) -> None:
    """Fails, naming each text with its rows' lines, when a CSV label column holds numbers
    and a few texts (a regression's label, or init's with numbers that are a quantity:
    decimals, or more than MAX_CLASSES values). A classification task keeps text classes."""
    if column.type != BYTES or fmt != "csv" or task not in (None, REGRESSION):
        return
    cells = [str(value) for value in column.classes]
    texts = [cell for cell in cells if dialect.cell_type(cell) == BYTES]
    numbers = [cell for cell in cells if dialect.cell_type(cell) != BYTES]
    quantity = any(dialect.cell_type(cell) == FLOAT for cell in numbers) or len(numbers) > MAX_CLASSES
    if not numbers or len(texts) > LABEL_TEXTS_MAX or not (task == REGRESSION or quantity):
        return
    found = table.cell_lines(root, column.name, set(texts))
    rows = sum(len(lines) for lines in found.values())
    named = "; ".join(f"{shown(text)} in {_lines(found[text])}" for text in texts)
    raise ConfigError(f"label column {column.name!r} holds numbers, and text in {rows} row{'s' if rows != 1 else ''}: "
                      f"{named}; a label is a number in every row: correct those cells, or drop those rows "
                      f"(e.g. with pandas: df[pd.to_numeric(df[{column.name!r}], errors=\"coerce\").notna()])")


def _lines(places: list[tuple[Path, int]]) -> str:
    """'part-0.csv lines 3, 9 and 2 more' for the first LABEL_TEXT_LINES_SHOWN places."""
    shown_places = places[:LABEL_TEXT_LINES_SHOWN]
    by_file: dict[Path, list[int]] = {}
    for path, line in shown_places:
        by_file.setdefault(path, []).append(line)
    text = ", ".join(f"{path.name} line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
                     for path, lines in by_file.items())
    more = len(places) - len(shown_places)
    return text + (f" and {more} more" if more else "")


def check_label_task(column: LabelColumn, task: str | None) -> None:
    """Fails unless the label's values suit the task (None: nothing to check)."""
    label, count = column.name, len(column.classes)
    if task == REGRESSION and column.type == BYTES:
        raise ConfigError(f"label column {label!r} holds text (e.g. {shown(column.example)}), which a "
                          "regression cannot predict; make every value a number, or choose a "
                          "classification task (binary or multiclass)")
    if task in (BINARY, MULTICLASS) and column.type == FLOAT:
        raise ConfigError(f"label column {label!r} holds decimals (e.g. {shown(column.example)}), which a "
                          "classifier cannot take as classes; choose task regression, or write the "
                          "classes as whole numbers or text")
    if task in (BINARY, MULTICLASS) and count > MAX_CLASSES:
        raise ConfigError(f"label column {label!r} has {count} distinct values, more than the {MAX_CLASSES} "
                          "classes a classifier here takes; choose another label, or group its values")
    if task == BINARY and count != 2:
        raise ConfigError(f"label column {label!r} has {count} values ({listed(column.classes)}) but the task "
                          f"is binary; use task multiclass with classes = {count}")
    if task == MULTICLASS and count < 3:
        raise ConfigError(f"label column {label!r} has {count} values ({listed(column.classes)}) but the task "
                          "is multiclass; use task binary")

