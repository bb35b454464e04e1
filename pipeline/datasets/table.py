"""The user's table on disk: its files (CSV or Parquet), columns, and the checks made before
TFX sees it.

Values are read as ExampleGen will read them. CSV (CsvExampleGen with our executor: the
header as Python's csv module reads it, a UTF-8 byte-order mark dropped; the rows through
tfx_bsl's decoder): an empty cell is missing; a column whose values all parse as 64-bit
integers is INT, else as numbers FLOAT, else BYTES (`cell_type` makes the same call for one
cell). Parquet (TFX's Parquet executor): integer and boolean columns are INT, floating ones
FLOAT, strings BYTES.

Checks read as little as they can: the header (or the Parquet footer) for the columns, and
only the label column for the label, so they stay fast on tables of millions of rows. A CSV
file's rows are parsed once (check_table), as ExampleGen will parse them, in C loops: a row
ExampleGen would read otherwise than the user wrote it stops the run there.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import operator
from collections import Counter
from itertools import chain, compress, repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from components.csv_example_gen import dialect as csv_header
from pipeline.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa

SUFFIXES = {"csv": ".csv", "parquet": ".parquet"}
# Fewer rows than this cannot give both a train and an eval split a useful share.
MIN_ROWS = 20
# A classification label with more values than this is not a set of classes a model can
# learn from a table (an ID, a free-text column, a number read as text).
MAX_CLASSES = 100
# The value types ExampleGen writes into a tf.Example, as the schema names them.
INT, FLOAT, BYTES = "INT", "FLOAT", "BYTES"
_INT64 = (-(2 ** 63), 2 ** 63 - 1)
_PANDAS_DROPNA = "drop those rows (e.g. with pandas: df.dropna(subset=[{label!r}]))"


def data_files(root: Path, fmt: str) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.suffix == SUFFIXES[fmt] and p.is_file())


def data_size_bytes(root: Path, fmt: str) -> int:
    return sum(p.stat().st_size for p in data_files(root, fmt))


def detect_format(root: Path) -> str:
    """csv or parquet, from the files in root; fails unless exactly one kind is there."""
    check_root(root, "CSV or Parquet")
    found = [fmt for fmt in SUFFIXES if data_files(root, fmt)]
    if not found:
        raise ConfigError(f"data root {root} holds no .csv or .parquet file; put your CSV or Parquet files there")
    if len(found) > 1:
        raise ConfigError(f"data root {root} holds both .csv and .parquet files; keep one format in a data root, "
                          "or choose one with --format")
    return found[0]


def check_root(root: Path, what: str) -> None:
    if not root.is_dir():
        raise ConfigError(f"data root {root} does not exist; pass a directory of {what} files with --data-root")


# --- one cell, one column ------------------------------------------------------------------

def cell_type(value: str | bytes) -> str | None:
    """The type tfx_bsl's CSV decoder (CsvExampleGen) infers from one cell; None: empty.

    A column's type is the widest of its cells' (INT < FLOAT < BYTES). The same Python
    int() and float() as the decoder's, on the same bytes, so the same answers.
    """
    if isinstance(value, str):
        value = value.encode()
    if not value:
        return None
    try:
        return INT if _INT64[0] <= int(value) <= _INT64[1] else BYTES
    except ValueError:
        try:
            float(value)
        except ValueError:
            return BYTES
        return FLOAT


def column_type(distinct_cells: Sequence[str]) -> str | None:
    """The type of a CSV column from its distinct cells; None when every cell is empty."""
    order = (INT, FLOAT, BYTES)
    types = {cell_type(cell) for cell in distinct_cells} - {None}
    return max(types, key=order.index) if types else None


def arrow_type(data_type: pa.DataType) -> str | None:
    """What TFX's Parquet executor writes for a column of this Arrow type; None: nothing
    it can write (dates, times, decimals, lists, structs, ...), or an all-null column's."""
    import pyarrow as pa

    if pa.types.is_dictionary(data_type):
        data_type = data_type.value_type
    if pa.types.is_integer(data_type) or pa.types.is_boolean(data_type):
        return INT
    if pa.types.is_floating(data_type):
        return FLOAT
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type) or \
            pa.types.is_binary(data_type) or pa.types.is_large_binary(data_type):
        return BYTES
    return None


# --- the files -----------------------------------------------------------------------------

def columns_of(path: Path, fmt: str) -> list[str]:
    """A file's column names, from its header or footer only; fails on a duplicate or empty
    column name, (CSV) a header ExampleGen would read otherwise, or (Parquet) a file with no
    rows or a column type ExampleGen cannot write."""
    columns = _csv_header(path) if fmt == "csv" else _parquet_columns(path)
    seen = set()
    for position, column in enumerate(columns, start=1):
        if not column.strip():
            raise ConfigError(f"{path}: column {position} has no name; name it, or drop it (a pandas index "
                              "written with to_csv or to_parquet has none: pass index=False)")
        if column in seen:
            raise ConfigError(f"{path} has two columns named {column!r}; rename one of them")
        seen.add(column)
    return columns


def _csv_header(path: Path) -> list[str]:
    with open(path, "rb") as handle:
        first_line = handle.readline()
    try:
        header = csv_header.column_names(first_line)
    except UnicodeDecodeError:
        _check_utf8(path)
        raise
    except ValueError as err:
        raise ConfigError(f"{path}: {err}; write the header as one line of comma-separated names "
                          "(e.g. with pandas: df.to_csv(path, index=False))") from None
    if not header:
        raise ConfigError(f"{path} is empty (or its first line is); remove it or give it a header row and rows")
    if len(header) == 1:
        _check_delimiter(path, header[0])
    return header


# Separators a CSV file may have been written with instead of commas, by name.
_OTHER_DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "pipes"}


def _check_delimiter(path: Path, name: str) -> None:
    """A header of one column holding another separator: a file ExampleGen would read as one column."""
    for delimiter, names in _OTHER_DELIMITERS.items():
        if delimiter in name:
            raise ConfigError(
                f"{path}: the header is one column, {_show(name, 40)}, split by {names}: ExampleGen reads only "
                f"comma-separated files; save it with commas (e.g. with pandas: "
                f"pd.read_csv(path, sep={delimiter!r}).to_csv(path, index=False))")


# --- the rows of a CSV file, as ExampleGen parses them ---------------------------------------
#
# TFX's CsvExampleGen skips the first line, reads the rest a line (ended by \n) at a time,
# joins lines into one record until the record holds an even number of '"' (a quoted field
# may span lines), and parses each record alone with Python's csv module (tfx_bsl's
# ParseCSVLine). A blank record is skipped; one of a different number of cells than the
# header fails the run. The check below makes the same records and the same parse, so what
# it passes ExampleGen reads as the user wrote it; it names the first line that would not be.
# To stay fast, lines are taken in blocks and the work on each runs in C loops; a block that
# fails is parsed again record by record, as ExampleGen parses it, to name the line.

# Characters of lines read at a time.
_BLOCK_CHARS = 4 * 1024 * 1024


def _check_csv_rows(path: Path, width: int) -> None:
    """Fails (one line: the file, the line, what is wrong, the fix) unless ExampleGen parses
    every record of the file into `width` cells, and at least one."""
    rows = 0
    pending: list[str] = []  # the lines of a record whose quotes are still open
    number = 2  # the next line's number: the header is line 1
    try:
        with open(path, encoding=csv_header.ENCODING, newline="\n") as handle:
            handle.readline()
            while lines := handle.readlines(_BLOCK_CHARS):
                records, starts = _records(lines, pending, number)
                number += len(lines)
                rows += _count_rows(path, records, starts, width)
    except UnicodeDecodeError:
        _check_utf8(path)  # names the byte
        raise
    if pending:
        raise ConfigError(f"{path}, line {number - len(pending)}: a quoted field opens there and never closes "
                          "(an odd number of '\"' from there to the end of the file); close it, or quote the "
                          "field and double each '\"' in it (\"12\"\" pizza\"), as pandas' to_csv writes it")
    # ExampleGen skips blank lines: a file of a header and blank lines has no rows.
    if not rows:
        raise ConfigError(f"{path} has a header but no rows; remove it or add rows")


def _records(lines: list[str], pending: list[str], number: int) -> tuple[list[str], Sequence[int]]:
    """ExampleGen's records among lines (the first is line `number`), and the line each starts
    on. pending holds the lines of a record still open before them, and is left holding
    those of one still open after them (TFX's _CsvLineBuffer)."""
    quoted = compress(lines, map(operator.contains, lines, repeat('"')))
    if not pending and not any(map((1).__and__, map(str.count, quoted, repeat('"')))):
        return lines, range(number, number + len(lines))
    records: list[str] = []
    starts: list[int] = []
    for index, line in enumerate(lines):
        odd = line.count('"') & 1
        if not pending and not odd:
            records.append(line)
            starts.append(number + index)
            continue
        pending.append(line)  # an open record holds an odd number of '"': an odd count closes it
        if len(pending) > 1 and odd:
            records.append("".join(pending))
            starts.append(number + index + 1 - len(pending))
            pending.clear()
    return records, starts


def _count_rows(path: Path, records: list[str], starts: Sequence[int], width: int) -> int:
    """The rows (records not blank) among records; fails, naming the first record ExampleGen
    would not parse into `width` cells."""
    # Parsed as one stream, with a blank line after: a record the csv module reads on into
    # the next (where ExampleGen would read the same record again) leaves a row fewer.
    try:
        cells = Counter(map(len, csv.reader(chain(records, ("\n",)), delimiter=csv_header.DELIMITER)))
    except csv.Error:
        cells = Counter()
    if cells.total() != len(records) + 1 or cells.keys() - {0, width}:
        raise ConfigError(_first_problem(path, records, starts, width))
    return len(records) + 1 - cells[0]


def _first_problem(path: Path, records: list[str], starts: Sequence[int], width: int) -> str:
    """What is wrong with the first record ExampleGen would not parse into `width` cells
    as the csv module reads the file, parsing each record alone as ExampleGen does."""
    unpaired = ("its quotes do not pair up as CSV's do (a '\"' inside a field not quoted?); quote such a "
                "field and double each '\"' in it (\"12\"\" pizza\"), as pandas' to_csv writes it")
    for record, start in zip(records, starts):
        end = start + record.count("\n", 0, len(record) - 1)
        where = f"{path}, line {start}" if end == start else \
            f"{path}, lines {start}-{end} (one row to ExampleGen: a '\"' opens a quoted field over them)"
        # tfx_bsl gives the reader the record again and again while it reads on (which may
        # never end): twice tells.
        reader = csv.reader(repeat(record, 2), delimiter=csv_header.DELIMITER)
        try:
            cells = next(reader)
        except csv.Error as err:
            if end > start:
                return f"{where}: {unpaired}"
            if "new-line" in str(err):
                return (f"{where}: a carriage return (\\r) inside a field not quoted, where ExampleGen ends "
                        "lines only at \\n; save the file with \\n or \\r\\n line ends, or quote the field")
            return (f"{where}: Python's csv module fails on it ({err}); write it as CSV (e.g. with pandas: "
                    "df.to_csv(path, index=False))")
        if reader.line_num > 1:
            return f"{where}: {unpaired}"
        if cells and len(cells) != width:
            return (f"{where} has {len(cells)} field{'s' if len(cells) != 1 else ''} but the header has "
                    f"{width}; give every row {width} comma-separated fields, and quote a field that holds "
                    "a comma (\"Oslo, Norway\")")
    return f"{path} holds a row ExampleGen cannot parse; write it as CSV (e.g. with pandas: df.to_csv(path))"


# Bytes read at a time when checking that a CSV file is UTF-8 text.
_UTF8_CHUNK = 16 * 1024 * 1024


def _check_utf8(path: Path) -> None:
    """CsvExampleGen decodes every line as UTF-8: fail here, naming the file, rather than in Beam."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(_UTF8_CHUNK)
            try:
                decoder.decode(chunk, final=not chunk)
            except UnicodeDecodeError as err:
                raise ConfigError(f"{path} is not UTF-8 text (byte {offset + err.start}); save it as UTF-8 "
                                  "(e.g. with pandas: df.to_csv(path, encoding='utf-8'))") from None
            if not chunk:
                return
            offset += len(chunk)


def _parquet_columns(path: Path) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as err:  # pyarrow raises several types for a file that is not Parquet
        raise ConfigError(f"{path} is not a readable Parquet file ({_first_line(err)}); "
                          "replace it or remove it from the data root") from None
    if parquet.metadata.num_rows == 0:
        raise ConfigError(f"{path} has no rows; remove it or add rows")
    schema = parquet.schema_arrow
    for field in schema:
        if arrow_type(field.type) is None and not pa.types.is_null(field.type):
            raise ConfigError(
                f"{path}: column {field.name!r} is {field.type}, which TFX's Parquet ExampleGen cannot write "
                "into a tf.Example; convert it to numbers or strings (e.g. with pandas: "
                f"df[{field.name!r}] = df[{field.name!r}].astype(str))")
    return list(schema.names)


def check_table(root: Path, fmt: str) -> list[str]:
    """The columns every `fmt` file in root shares; fails (one line: the cause and the fix)
    unless root holds such files, each with rows and the same columns."""
    check_root(root, fmt.upper())
    files = data_files(root, fmt)
    if not files:
        raise ConfigError(f"data root {root} holds no {SUFFIXES[fmt]} file; put your {fmt.upper()} files there")
    first = columns_of(files[0], fmt)
    for path in files[1:]:
        columns = columns_of(path, fmt)
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

    first = {field.name: arrow_type(field.type) for field in pq.read_schema(files[0])}
    for path in files[1:]:
        for field in pq.read_schema(path):
            kind = arrow_type(field.type)
            if None not in (kind, first[field.name]) and kind != first[field.name]:
                raise ConfigError(f"{path}: column {field.name!r} holds {kind} values but {files[0]}'s holds "
                                  f"{first[field.name]}; give the column one type in every file")


# --- the label -----------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class LabelColumn:
    """The label column as ExampleGen reads it, over every file."""

    name: str
    type: str | None  # INT, FLOAT or BYTES; None when no value is present
    rows: int
    missing: int  # empty cells, nulls, empty strings and NaN
    classes: tuple  # its distinct present values, sorted (ints, floats or strings)

    @property
    def example(self) -> Any:
        """A value to show: for a text label, one that is no number."""
        texts = [v for v in self.classes if self.type == BYTES and cell_type(str(v)) == BYTES]
        return (texts or list(self.classes) or [None])[0]


def read_label(root: Path, fmt: str, label: str) -> LabelColumn:
    """Reads only the label column of every file (check_table first)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    chunks = []
    for path in data_files(root, fmt):
        chunks.extend(_plain(chunk) for chunk in read_columns(path, fmt, [label]).column(label).chunks)
    rows = sum(len(chunk) for chunk in chunks)
    if fmt == "csv":
        texts = [v for chunk in chunks for v in pc.unique(chunk).to_pylist() if v is not None]
        kind = column_type(texts)
        parse = {INT: int, FLOAT: float}.get(kind, str)
        values = {text: parse(text) for text in texts}
        # Cells the decoder reads as NaN ("nan", "NaN", ...) in a FLOAT column: no label.
        absent = pa.array([text for text, value in values.items() if _absent(value)], pa.string())
        missing = sum(chunk.null_count + (pc.sum(pc.is_in(chunk, value_set=absent)).as_py() or 0)
                      for chunk in chunks)
        present = {value for value in values.values() if not _absent(value)}
    else:
        kinds = {arrow_type(chunk.type) for chunk in chunks} - {None}
        kind = kinds.pop() if len(kinds) == 1 else None
        values = {_python(v) for chunk in chunks for v in pc.unique(chunk).to_pylist() if v is not None}
        missing = sum(chunk.null_count + _count_absent(chunk) for chunk in chunks)
        present = {value for value in values if not _absent(value)}
    return LabelColumn(label, kind if present else None, rows, missing, tuple(sorted(present)))


def _absent(value: Any) -> bool:
    """An empty string or NaN: ExampleGen writes no value (or a NaN) for either."""
    return value == "" or (isinstance(value, float) and math.isnan(value))


def _python(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return int(value) if isinstance(value, bool) else value


def _count_absent(chunk: Any) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_floating(chunk.type):
        flags = pc.is_nan(chunk)
    elif arrow_type(chunk.type) == BYTES:
        flags = pc.equal(pc.binary_length(chunk), 0)
    else:
        return 0
    return pc.sum(pc.cast(flags, pa.int64())).as_py() or 0


def _plain(array: Any) -> Any:
    """A dictionary-encoded column (pandas' category dtype) as its values."""
    import pyarrow as pa

    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def read_columns(path: Path, fmt: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Some (None: all) columns of one file: CSV cells as strings (an empty cell null),
    Parquet columns as stored."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, columns=list(columns) if columns is not None else None)
    import pyarrow.csv as pacsv

    header = columns_of(path, "csv")
    wanted = list(columns) if columns is not None else header
    try:
        return pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            # CsvExampleGen joins lines inside quotes into one row.
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                include_columns=wanted, column_types={c: pa.string() for c in wanted},
                null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True),
        )
    except pa.ArrowInvalid as err:
        fix = ("save it as UTF-8 text" if "utf8" in str(err).lower()
               else "give every row as many cells as the header")
        raise ConfigError(f"{path} is not a well-formed CSV file ({_first_line(err)}); {fix}") from None


def label_text(value: Any) -> str:
    """A label value as Transform's vocabulary writes it: integers (booleans are 0 or 1 in a
    tf.Example) in decimal, text as it is."""
    return str(int(value)) if isinstance(value, bool) else str(value)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


# --- all of it -----------------------------------------------------------------------------

def check_data(root: Path, fmt: str, label: str, task: str | None, feature_columns: Sequence[str]) -> None:
    """Raises ConfigError (one line: the cause and the fix) unless root holds `fmt` files
    with the same columns, among them the label and every feature column, and enough rows
    whose label suits the task (task None: any task; `turbotfx init` has not chosen yet)."""
    files = data_files(root, fmt) if root.is_dir() else []
    columns = check_table(root, fmt)
    if label not in columns:
        raise ConfigError(f"{files[0]} has no label column {label!r} (columns: {', '.join(columns)}); "
                          "name one of its columns as the label, or add the column")
    for column in feature_columns:
        if column not in columns:
            raise ConfigError(f"{files[0]} has no column {column!r}, which the dataset file lists under "
                              "[features]; add the column to the data or remove it from the dataset file")
    column = read_label(root, fmt, label)
    if column.rows < MIN_ROWS:
        raise ConfigError(f"data root {root} holds {column.rows} rows; a train and an eval split need at "
                          f"least {MIN_ROWS}: add rows")
    if column.missing:
        raise ConfigError(f"{column.missing} of {column.rows} rows in {root} have an empty label {label!r}; "
                          + _PANDAS_DROPNA.format(label=label) + " or fill them in")
    if len(column.classes) < 2:
        needs = ("a regression needs a label that varies" if task == "regression"
                 else "a model needs at least two classes")
        raise ConfigError(f"label column {label!r} has a single value ({_show(column.classes[0])}) in all "
                          f"{column.rows} rows; {needs}: choose another label or add rows with other values")
    check_label_task(column, task)


def check_label_task(column: LabelColumn, task: str | None) -> None:
    """Fails unless the label's values suit the task (None: nothing to check)."""
    # The task names of trainer_module/features.py, spelled out: this module stays on the
    # ground floor, under everything that imports it.
    label, count = column.name, len(column.classes)
    if task == "regression" and column.type == BYTES:
        raise ConfigError(f"label column {label!r} holds text (e.g. {_show(column.example)}), which a "
                          "regression cannot predict; make every value a number, or choose a "
                          "classification task (binary or multiclass)")
    if task in ("binary", "multiclass") and column.type == FLOAT:
        raise ConfigError(f"label column {label!r} holds decimals (e.g. {_show(column.example)}), which a "
                          "classifier cannot take as classes; choose task regression, or write the "
                          "classes as whole numbers or text")
    if task in ("binary", "multiclass") and count > MAX_CLASSES:
        raise ConfigError(f"label column {label!r} has {count} distinct values, more than the {MAX_CLASSES} "
                          "classes a classifier here takes; choose another label, or group its values")
    if task == "binary" and count != 2:
        raise ConfigError(f"label column {label!r} has {count} values ({_values(column.classes)}) but the task "
                          f"is binary; use task multiclass with classes = {count}")
    if task == "multiclass" and count < 3:
        raise ConfigError(f"label column {label!r} has {count} values ({_values(column.classes)}) but the task "
                          "is multiclass; use task binary")


def _show(value: Any, width: int = 24) -> str:
    text = repr(value)
    return text if len(text) <= width else text[:width - 4] + "...'"


def _values(values: Sequence[Any], most: int = 5) -> str:
    shown = ", ".join(_show(v) for v in values[:most])
    return shown + (f", ... ({len(values)} in all)" if len(values) > most else "")
