"""After a completed `turbotfx run`, the last good copy of its SQLite store lies beside it:
a readable MLMD store holding the same runs."""

from __future__ import annotations

import pytest

from pipeline.store import backup, connection, integrity
from pipeline.store.url import sqlite_url

pytestmark = pytest.mark.e2e


def _runs(path) -> list[str]:
    store = connection.open_store(sqlite_url(path), create=False)
    return sorted(context.name for context in store.get_contexts_by_type("pipeline_run"))


def test_a_completed_run_leaves_a_last_good_copy_of_its_store(first_run):
    store = first_run.config.metadata_path
    copy = backup.last_good_path(store)
    assert copy == store.parent / "turbotfx.sqlite.last-good" and copy.is_file()
    assert integrity.examine(copy).state == integrity.MLMD
    assert len(_runs(store)) == 1 and _runs(copy) == _runs(store)
