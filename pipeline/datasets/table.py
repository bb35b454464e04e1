"""The user's table on disk as ExampleGen reads it: its files (CSV or Parquet), columns,
the label column, Arrow reads of some columns or of the whole table, and its statistics.
The checks made on it before a run are in checks.py.

Values are read as ExampleGen will read them. CSV (CsvExampleGen with our executor, by the
rules of components/csv_example_gen/dialect.py: the header as Python's csv module reads it,
a UTF-8 byte-order mark dropped; the rows through tfx_bsl's decoder): an empty cell is
missing; a column whose values all parse as 64-bit integers is INT, else as numbers FLOAT,
else BYTES (`dialect.cell_type` makes the same call for one cell). Parquet (TFX's Parquet
executor): integer and boolean columns are INT, floating ones FLOAT, strings BYTES.

Heavy libraries (pyarrow, TFDV) load inside the functions that need them.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from components.csv_example_gen import dialect
from components.csv_example_gen.dialect import BYTES, FLOAT, INT, cell_type, column_type
from components.parquet_example_gen.formats import DATE_FORMAT, TIMESTAMP_FORMAT
from pipeline.errors import ConfigError, first_line, shown

if TYPE_CHECKING:
    import pyarrow as pa
    from tensorflow_metadata.proto.v0 import statistics_pb2

SUFFIXES = {"csv": ".csv", "parquet": ".parquet"}


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


# --- a Parquet column's type ------------------------------------------------------------------

def arrow_type(data_type: pa.DataType) -> str | None:
    """What the Parquet executor writes for a column of this Arrow type (dates and
    timestamps: ISO text); None: nothing it can write (times, decimals, lists, structs, ...),
    or an all-null column's."""
    import pyarrow as pa

    if pa.types.is_dictionary(data_type):
        data_type = data_type.value_type
    if pa.types.is_timestamp(data_type) or pa.types.is_date(data_type):
        return BYTES
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
        header = dialect.column_names(first_line)
    except UnicodeDecodeError:
        check_utf8(path)
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
                f"{path}: the header is one column, {shown(name, 40)}, split by {names}: ExampleGen reads only "
                f"comma-separated files; save it with commas (e.g. with pandas: "
                f"pd.read_csv(path, sep={delimiter!r}).to_csv(path, index=False))")


# Bytes read at a time when checking that a CSV file is UTF-8 text.
_UTF8_CHUNK = 16 * 1024 * 1024


def check_utf8(path: Path) -> None:
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
        raise ConfigError(f"{path} is not a readable Parquet file ({first_line(err)}); "
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

    chunks: list[Any] = []  # pyarrow arrays
    for path in data_files(root, fmt):
        chunks.extend(_plain(chunk) for chunk in read_columns(path, fmt, [label]).column(label).chunks)
    rows = sum(len(chunk) for chunk in chunks)
    if fmt == "csv":
        texts = [v for chunk in chunks for v in pc.unique(chunk).to_pylist() if v is not None]
        kind = column_type(texts)
        parse: Callable[[str], Any] = {INT: int, FLOAT: float}.get(kind or BYTES, str)
        csv_values = {text: parse(text) for text in texts}
        # Cells the decoder reads as NaN ("nan", "NaN", ...) in a FLOAT column: no label.
        absent = pa.array([text for text, value in csv_values.items() if _absent(value)], pa.string())
        missing: int = sum(chunk.null_count + (pc.sum(pc.is_in(chunk, value_set=absent)).as_py() or 0)
                      for chunk in chunks)
        present = {value for value in csv_values.values() if not _absent(value)}
    else:
        kinds = {arrow_type(chunk.type) for chunk in chunks} - {None}
        kind = kinds.pop() if len(kinds) == 1 else None
        values = {_python(v) for chunk in chunks for v in pc.unique(chunk).to_pylist() if v is not None}
        missing = sum(chunk.null_count + _count_absent(chunk) for chunk in chunks)
        present = {value for value in values if not _absent(value)}
    return LabelColumn(label, kind if present else None, rows, missing, tuple(sorted(present)))


def cell_lines(root: Path, column: str, values: set[str]) -> dict[str, list[tuple[Path, int]]]:
    """Where a CSV column holds each of values: (file, line where the row starts) in file
    order. Reads every row in Python: for naming a few bad cells, not for a check every run."""
    import csv

    found: dict[str, list[tuple[Path, int]]] = {value: [] for value in values}
    for path in data_files(root, "csv"):
        with open(path, newline="", encoding=dialect.ENCODING) as handle:
            reader = csv.reader(handle, delimiter=dialect.DELIMITER)
            index = next(reader).index(column)
            start = reader.line_num + 1
            for row in reader:
                if index < len(row) and row[index] in found:
                    found[row[index]].append((path, start))
                start = reader.line_num + 1
    return found


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
    """A dictionary-encoded column (pandas' category dtype) as its values; dates and
    timestamps as the ISO text ExampleGen writes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_dictionary(array.type):
        array = array.dictionary_decode()
    if pa.types.is_timestamp(array.type):
        whole_seconds = pc.cast(array, pa.timestamp("s", array.type.tz), safe=False)
        return pc.strftime(whole_seconds, format=TIMESTAMP_FORMAT)
    if pa.types.is_date(array.type):
        return pc.strftime(array, format=DATE_FORMAT)
    return array


def read_columns(path: Path, fmt: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Some (None: all) columns of one file: CSV cells as strings (an empty cell null),
    Parquet columns as stored."""
    import pyarrow as pa

    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path, columns=list(columns) if columns is not None else None)
    import pyarrow.csv as pacsv

    from components.csv_example_gen import arrow_read

    header = columns_of(path, "csv")
    wanted = list(columns) if columns is not None else header
    try:
        return arrow_read.read_csv(
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
        raise ConfigError(f"{path} is not a well-formed CSV file ({first_line(err)}); {fix}") from None


def label_text(value: Any) -> str:
    """A label value as Transform's vocabulary writes it: integers (booleans are 0 or 1 in a
    tf.Example) in decimal, text as it is."""
    return str(int(value)) if isinstance(value, bool) else str(value)


# --- the whole table, as ExampleGen reads it ----------------------------------------------------

def load_table(root: Path, fmt: str) -> pa.Table:
    """Every row of root's `fmt` files (checks.check_table first: this reads, it does not
    check), each column int64, float64, string or null (no value at all), as ExampleGen
    will read it; a missing value is null. The columns are the first file's, as
    CsvExampleGen takes them."""
    import pyarrow as pa

    files = data_files(root, fmt)
    names = columns_of(files[0], fmt)
    parts = [read_columns(path, fmt).select(names) for path in files]
    if fmt == "csv":
        table = pa.concat_tables(parts)
        return pa.table({name: _typed_csv_column(table.column(name)) for name in names})
    return pa.table({name: _typed_parquet_column(name, [part.column(name) for part in parts]) for name in names})


def _typed_csv_column(texts: pa.ChunkedArray) -> pa.Array:
    """The CSV decoder's type for the column (its widest cell type), and the values in it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = texts.combine_chunks()
    kind = column_type([v for v in pc.unique(texts).to_pylist() if v is not None])
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
        array = _plain(chunked.combine_chunks())
        kind = arrow_type(array.type)
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
    """The statistics of root's `fmt` files (checks.check_table first)."""
    return statistics(load_table(root, fmt))
