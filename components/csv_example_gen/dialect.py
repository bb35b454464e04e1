"""How our CSV ExampleGen reads a CSV file: the header, the records, the cells' types, and
the first record it would not parse. The contract between the executor (which reads files
by these rules) and the checks made before a run (pipeline/datasets/checks.py, which refuse
what the executor would read otherwise than the user wrote it).

The header is the first line, a UTF-8 byte-order mark dropped, split as Python's csv module
splits a line (quotes removed, a quoted comma kept in its name), the way tfx_bsl's decoder
splits the rows below it. A cell's type is the one tfx_bsl's decoder infers.

Standard library only: the checks import this without paying for TFX.
"""

from __future__ import annotations

import csv
import operator
from itertools import compress, repeat
from pathlib import Path
from typing import Sequence

# How the rows are read (TFX's CsvExampleGen: tfx_bsl's ParseCSVLine(delimiter=',')).
DELIMITER = ","
# A byte-order mark (Excel's "CSV UTF-8") is dropped; the rows are UTF-8 text.
ENCODING = "utf-8-sig"
# The value types ExampleGen writes into a tf.Example, as the schema names them.
INT, FLOAT, BYTES = "INT", "FLOAT", "BYTES"
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def column_names(first_line: bytes) -> list[str]:
    """The column names in a file's first line, as read from the file (its line break
    included); [] for an empty line. Raises UnicodeDecodeError when the line is not UTF-8,
    and ValueError (what is wrong, in words) when it is not one CSV record: ExampleGen skips
    exactly one line as the header, so a quoted name may not run onto the next."""
    text = first_line.decode(ENCODING)
    # A blank line after it tells a record that ends on this line from one that wants more.
    try:
        records = list(csv.reader([text, "\n"], delimiter=DELIMITER))
    except csv.Error as err:
        raise ValueError(f"the header is not a CSV line ({err})") from None
    if len(records) != 2:
        raise ValueError("a quoted name in the header does not close on the header's line")
    return records[0]


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


# --- the rows, as ExampleGen parses them -----------------------------------------------------
#
# TFX's CsvExampleGen skips the first line, reads the rest a line (ended by \n) at a time,
# joins lines into one record until the record holds an even number of '"' (a quoted field
# may span lines), and parses each record alone with Python's csv module (tfx_bsl's
# ParseCSVLine). A blank record is skipped; one of a different number of cells than the
# header fails the run.

def records(lines: list[str], pending: list[str], number: int) -> tuple[list[str], Sequence[int]]:
    """ExampleGen's records among lines (the first is line `number`), and the line each starts
    on. pending holds the lines of a record still open before them, and is left holding
    those of one still open after them (TFX's _CsvLineBuffer)."""
    quoted = compress(lines, map(operator.contains, lines, repeat('"')))
    if not pending and not any(map((1).__and__, map(str.count, quoted, repeat('"')))):
        return lines, range(number, number + len(lines))
    found: list[str] = []
    starts: list[int] = []
    for index, line in enumerate(lines):
        odd = line.count('"') & 1
        if not pending and not odd:
            found.append(line)
            starts.append(number + index)
            continue
        pending.append(line)  # an open record holds an odd number of '"': an odd count closes it
        if len(pending) > 1 and odd:
            found.append("".join(pending))
            starts.append(number + index + 1 - len(pending))
            pending.clear()
    return found, starts


def first_problem(path: Path, records: list[str], starts: Sequence[int], width: int) -> str:
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
        reader = csv.reader(repeat(record, 2), delimiter=DELIMITER)
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
