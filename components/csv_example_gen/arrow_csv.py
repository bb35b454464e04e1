"""CSV files to serialized tf.Examples with Arrow, byte for byte as TFX's CsvExampleGen makes them.

TFX's path (components/csv_example_gen/executor.py) reads each row with Python's csv module
and builds each tf.Example in Python, about 150 µs a row; pyarrow.csv parses and tfx_bsl's
C++ encoder encodes the same rows about 30x faster. The result must not change, so this
module keeps TFX's rules:

  typing    (tfx_bsl's ColumnTypeInferrer over every file of the split) a column whose
            non-empty cells all read as int64 is INT, else FLOAT if they all read as floats,
            else STRING; a column empty in every row is UNKNOWN
  values    INT int(cell), FLOAT float(cell) stored as float32, STRING the cell's bytes;
            an empty cell an empty list of the column's kind; every cell of an UNKNOWN
            column an empty Feature
  split key the example serialized deterministically (sorted keys): what TFX's
            _PartitionFn hashes

Arrow reads some inputs otherwise than the csv module, and Python's int()/float() take
forms no regex here admits (" 5", "1_000", "nan", other scripts' digits). Such a file is
"beyond" this path: `inspect` returns None for it and the whole split goes TFX's way (types
are inferred over all files together, so one file cannot go alone).
"""

from __future__ import annotations

import re
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from tfx.components.example_gen import base_example_gen_executor as base_executor
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx_bsl.coders import csv_decoder, example_coder

from components.csv_example_gen import arrow_read, dialect

# TFX's column types, ordered as its inference widens them (UNKNOWN < INT < FLOAT < STRING).
UNKNOWN, INT, FLOAT, STRING = (csv_decoder.ColumnType.UNKNOWN, csv_decoder.ColumnType.INT,
                               csv_decoder.ColumnType.FLOAT, csv_decoder.ColumnType.STRING)
# Cells both Python's int() and Arrow's cast read, the same way (Arrow refuses a leading +).
_INT_RE = r"^[+-]?[0-9]+$"
# Cells both Python's float() and Arrow's cast read (Arrow uses a correctly rounded parser).
_FLOAT_RE = r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$"
# A float cell beyond float32 is left to TFX (how protobuf stores it is its business).
_FLOAT32_MAX = 3.4028234663852886e38
# Cells of a non-numeric column tried with TFX's own test before giving up on finding one
# it calls STRING (all numeric-looking in forms the regexes above do not admit).
_STRING_PROBES = 64
# A whole quoted field: quotes inside doubled.
_QUOTED_FIELD = re.compile(rb'("[^"]*(?:""[^"]*)*")')
_BLOCK_BYTES = 16 << 20
# A file is read whole (its rows, table and examples in memory, about 4x its size): a
# larger one goes TFX's way, which streams.
MAX_FILE_BYTES = 512 << 20


def _open(path: str):
    return fileio.open(path, "rb")


def _quoting_is_plain(body: bytes) -> bool:
    """True when every quote in the rows (the file after its header line) opens or closes a
    whole field and no carriage return stands alone outside one: then the csv module (as
    TFX's line reader feeds it) and Arrow split the rows and fields alike."""
    if b'"' not in body:
        return body.count(b"\r") == body.count(b"\r\n")
    parts = _QUOTED_FIELD.split(body)
    for index in range(0, len(parts), 2):
        plain = parts[index]
        if b'"' in plain or plain.count(b"\r") != plain.count(b"\r\n"):
            return False
        # A quoted field must be a whole field: a delimiter or a line end on both sides.
        if index + 1 < len(parts) and plain and not plain.endswith((b",", b"\n")):
            return False
        if index > 0 and plain and not plain.startswith((b",", b"\n", b"\r\n")):
            return False
    return True


def read_table(path: str, names: Sequence[str]) -> pa.Table | None:
    """The file's rows (after its header line) as string columns, cells as written ("" for
    empty); None when Arrow would not read them as TFX does."""
    if not names or len(set(names)) != len(names):
        return None  # TFX keys features by name: duplicate names are its business
    with _open(path) as handle:
        handle.seek(0, 2)
        if handle.tell() > MAX_FILE_BYTES:
            return None
        handle.seek(0)
        data = handle.read()
    newline = data.find(b"\n")
    body = data[newline + 1:]
    if newline < 0 or not _quoting_is_plain(body):
        return None
    if not body.replace(b"\r\n", b"\n").strip(b"\n"):  # no rows, maybe blank lines (Arrow: "empty file")
        return pa.table({name: pa.array([], pa.string()) for name in names})
    try:
        return arrow_read.read_csv(
            pa.py_buffer(body),
            read_options=pacsv.ReadOptions(column_names=list(names), block_size=_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=dialect.DELIMITER, quote_char='"', double_quote=True,
                                             escape_char=False, newlines_in_values=True,
                                             ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(
                column_types={name: pa.string() for name in names}, strings_can_be_null=False,
                quoted_strings_can_be_null=False, check_utf8=True),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None  # a row of another width, text that is not UTF-8: TFX's path says what


def _numbers(column: pa.ChunkedArray, kind: pa.DataType) -> pa.ChunkedArray | None:
    """The cells as numbers of kind (int64 or float64); None where Arrow cannot read one."""
    try:
        return pc.cast(pc.replace_substring_regex(column, r"^\+", ""), kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def column_type(column: pa.ChunkedArray) -> csv_decoder.ColumnType | None:
    """TFX's type for a column of one file (the widest of its cells' types); None when some
    cell's type cannot be told here as TFX tells it."""
    present = pc.filter(column, pc.not_equal(column, ""))
    if len(present) == 0:
        return UNKNOWN
    if pc.all(pc.match_substring_regex(present, _INT_RE)).as_py():
        return INT if _numbers(present, pa.int64()) is not None else None
    floats = pc.match_substring_regex(present, _FLOAT_RE)
    if pc.all(floats).as_py():
        ints = pc.filter(present, pc.match_substring_regex(present, _INT_RE))
        values = _numbers(present, pa.float64())
        if values is None or _numbers(ints, pa.int64()) is None:
            return None  # an integer past int64 is STRING to TFX: its path decides
        if pc.max(pc.abs(values)).as_py() > _FLOAT32_MAX:
            return None
        return FLOAT
    # Some cell is neither: STRING if TFX's own test says so of one of them.
    others = pc.unique(pc.filter(present, pc.invert(floats)))
    for cell in others[:_STRING_PROBES].to_pylist():
        if csv_decoder._InferValueType(cell.encode()) == STRING:
            return STRING
    return None


def inspect(path: str, names: Sequence[str]) -> dict[str, int] | None:
    """Each column's TFX type in this file (ints, to pickle plainly); None when the file is
    beyond this path."""
    table = read_table(path, names)
    if table is None:
        return None
    types = {}
    for name in names:
        kind = column_type(table.column(name))
        if kind is None:
            return None
        types[name] = int(kind)
    return types


def merge(per_file: Sequence[dict[str, int] | None]) -> dict[str, int] | None:
    """The split's types: per column the widest over its files (TFX's ColumnTypeInferrer);
    None when a file is beyond this path."""
    merged: dict[str, int] = {}
    for types in per_file:
        if types is None:
            return None
        for name, kind in types.items():
            merged[name] = max(merged.get(name, kind), kind)
    return merged


def _feature_column(column: pa.ChunkedArray, kind: int) -> pa.Array:
    """One column as the encoder takes it: a list per row, empty for an empty cell, null
    (an empty Feature) for every row of an UNKNOWN column."""
    column = column.combine_chunks()
    rows = len(column)
    if kind == UNKNOWN:
        return pa.nulls(rows, pa.list_(pa.int64()))
    present = pc.not_equal(column, "")
    offsets = pa.array([0], pa.int32()) if rows == 0 else pa.concat_arrays([
        pa.array([0], pa.int32()), pc.cumulative_sum(pc.cast(present, pa.int32()))])
    cells = pc.filter(column, present)
    if kind == INT:
        values = _numbers(cells, pa.int64())
    elif kind == FLOAT:
        # float(cell) then float32, as TFX's handler and protobuf do: parse to double first.
        values = pc.cast(_numbers(cells, pa.float64()), pa.float32(), safe=False)
    else:
        values = pc.cast(cells, pa.binary())
    return pa.ListArray.from_arrays(offsets, values)


def encode(table: pa.Table, types: dict[str, int]) -> list[bytes]:
    """The table's rows as tf.Examples, serialized deterministically (sorted feature keys),
    as TFX hashes them for the split."""
    from tensorflow.core.example import example_pb2

    names = table.column_names
    batch = pa.RecordBatch.from_arrays([_feature_column(table.column(n), types[n]) for n in names], names)
    # The C++ encoder's feature order is its map's; TFX hashes the sorted serialization.
    parse = example_pb2.Example.FromString
    return [parse(record).SerializeToString(deterministic=True)
            for record in example_coder.RecordBatchToExamplesEncoder().encode(batch)]


def examples_by_split(path: str, names: Sequence[str], types: dict[str, int], buckets: list[int],
                      split_config: example_gen_pb2.SplitConfig) -> Iterator[tuple[int, list[bytes]]]:
    """The file's examples grouped by output split: (split index, records); buckets are the
    splits' cumulative hash buckets."""
    table = read_table(path, names)
    if table is None:
        raise RuntimeError(f"{path} changed while ExampleGen read it")
    groups: list[list[bytes]] = [[] for _ in buckets]
    for record in encode(table, types):
        # TFX's own partition function: the same hash of the same bytes, the same split.
        groups[base_executor._PartitionFn(record, len(buckets), buckets, split_config)].append(record)
    yield from enumerate(groups)
