"""Whether a SQLite file is an ML Metadata store MLMD can read, asked with Python's sqlite3
before MLMD opens it: MLMD's own error on a damaged file is a failed CREATE TABLE that
names no file and no fix.

The check is cheap: one `PRAGMA quick_check` (every page's structure, not the index
contents that `integrity_check` also compares) and one look at the table names.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
from pathlib import Path
from urllib.request import pathname2url

from pipeline.errors import first_line

# Tables MLMD creates in every store (MLMDEnv holds the schema version).
MLMD_TABLES = frozenset({"MLMDEnv", "Type"})

NEW, MLMD, UNKNOWN, DAMAGED = "new", "mlmd", "unknown", "damaged"


@dataclasses.dataclass(frozen=True)
class Examined:
    """state: NEW (missing, or a SQLite file without tables: MLMD creates its tables), MLMD
    (a readable MLMD store), UNKNOWN (busy or unreadable just now: MLMD's own error will
    say why), DAMAGED (reason says how)."""

    state: str
    reason: str = ""


def examine(path: Path) -> Examined:
    """What the file at path is, read without creating it (SQLite may roll back a journal an
    interrupted write left, as MLMD would on opening it)."""
    if not path.exists() or (path.is_file() and path.stat().st_size == 0):
        return Examined(NEW)
    try:
        with contextlib.closing(_connect(path)) as db:
            [problem] = db.execute("PRAGMA quick_check(1)").fetchone()
            if problem != "ok":
                return Examined(DAMAGED, f"corrupt: {_one_line(problem)}")
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.OperationalError:
        # Locked by a writer, unreadable (permissions): not a verdict on the contents.
        return Examined(UNKNOWN)
    except sqlite3.DatabaseError as err:  # SQLITE_NOTADB, SQLITE_CORRUPT
        text = first_line(err)
        what = "not a SQLite database" if "not a database" in text else "corrupt"
        return Examined(DAMAGED, f"{what}: {text}")
    if not tables:
        return Examined(NEW)
    if not MLMD_TABLES <= tables:
        return Examined(DAMAGED, f"not an MLMD SQLite database: no {' or '.join(sorted(MLMD_TABLES - tables))} "
                                 "table")
    return Examined(MLMD)


def _connect(path: Path) -> sqlite3.Connection:
    """Never creates the file. Read-write where allowed, as MLMD opens it: SQLite then rolls
    back a journal an interrupted write left, which a read-only connection cannot."""
    mode = "rw" if os.access(path, os.W_OK) else "ro"
    return sqlite3.connect(f"file:{pathname2url(str(path))}?mode={mode}", uri=True, timeout=5)


def _one_line(text: str) -> str:
    """quick_check's first finding; its report starts with a '*** in database main ***' line."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip() and not line.startswith("***")]
    return lines[0] if lines else str(text).strip()
