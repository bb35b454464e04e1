"""The last good copy of a SQLite store, kept beside it (`<store>.last-good`) after each
completed run, to restore when the store is damaged (a full disk, a killed copy, an editor).

Made with SQLite's online backup API into a temporary file, checked, flushed to disk and
then renamed over the previous copy: a copy that exists is whole and readable, and a
failed one leaves the previous copy as it was.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from urllib.request import pathname2url

from pipeline.atomic import atomic_path
from pipeline.errors import ConfigError
from pipeline.store import integrity
from pipeline.store.url import MetadataUrl, parse_url

SUFFIX = ".last-good"


class LastGoodCopyError(ConfigError):
    """The copy could not be made; the previous one, if any, is unchanged."""


def last_good_path(store: str | Path) -> Path:
    store = Path(store)
    return store.with_name(store.name + SUFFIX)


def keep_last_good_copy(url: str | MetadataUrl) -> Path | None:
    """Copies a SQLite store to its last-good path; None for a server store (its database
    server keeps its backups). Call it only while no run writes the store (exclusive_run)."""
    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    if parsed.scheme != "sqlite":
        return None
    source, target = Path(parsed.path), last_good_path(parsed.path)
    try:
        with atomic_path(target) as temporary:
            with contextlib.closing(sqlite3.connect(f"file:{pathname2url(str(source))}?mode=ro", uri=True)) as src, \
                    contextlib.closing(sqlite3.connect(temporary)) as dst:
                src.backup(dst)
            examined = integrity.examine(Path(temporary))
            if examined.state != integrity.MLMD:
                raise LastGoodCopyError(f"the copy of {source} is not a readable MLMD store "
                                        f"({examined.reason or examined.state})")
            _fsync(temporary)
        _fsync(target.parent)  # the rename itself
    except (OSError, sqlite3.Error, LastGoodCopyError) as err:
        raise LastGoodCopyError(f"no last good copy of the metadata store {source} was made "
                                f"({getattr(err, 'strerror', None) or err}); the previous copy {target}, "
                                "if any, is unchanged") from None
    return target


def _fsync(path: str | Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
