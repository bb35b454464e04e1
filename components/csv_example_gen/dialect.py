"""A CSV file's header as our CSV ExampleGen reads it: the first line, a UTF-8 byte-order
mark dropped, split as Python's csv module splits a line (quotes removed, a quoted comma
kept in its name), the way tfx_bsl's decoder splits the rows below it.

No TFX import: pipeline/tables.py checks the user's files by these same rules before a run.
"""

from __future__ import annotations

import csv

# How the rows are read (TFX's CsvExampleGen: tfx_bsl's ParseCSVLine(delimiter=',')).
DELIMITER = ","
# A byte-order mark (Excel's "CSV UTF-8") is dropped; the rows are UTF-8 text.
ENCODING = "utf-8-sig"


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
