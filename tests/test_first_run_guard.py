"""The shared first run's read-only guard (tests/conftest.py): a test that writes into the
shared workspace fails, naming what changed; a log that only grows, and a test that does not
use the first run, pass."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests import conftest


class _Request:
    """What the guard reads of pytest's request: the fixtures the test uses, and their values."""

    def __init__(self, first_run: conftest.FirstRun | None) -> None:
        self.fixturenames = ["tmp_path"] + (["first_run"] if first_run is not None else [])
        self._first_run = first_run

    def getfixturevalue(self, name: str) -> conftest.FirstRun | None:
        assert name == "first_run"
        return self._first_run


def _workspace(root: Path) -> conftest.FirstRun:
    (root / "metadata").mkdir(parents=True)
    (root / "metadata" / "turbotfx.sqlite").write_bytes(b"store")
    (root / "logs").mkdir()
    (root / "logs" / "turbotfx.log").write_text("a line\n")
    return conftest.FirstRun(home=root, exit_code=0, output="", stdout="", state=conftest.tree_state(root))


def _guard(request: _Request) -> None:
    """The autouse fixture around one test: set up, the test (nothing here), torn down."""
    steps = conftest._first_run_stays_read_only.__wrapped__(request)
    next(steps)
    with pytest.raises(StopIteration):
        next(steps)


def test_an_untouched_workspace_and_a_grown_log_pass(tmp_path):
    first_run = _workspace(tmp_path / "ws")
    with open(first_run.home / "logs" / "turbotfx.log", "a") as log:
        log.write("predict appended this\n")
    _guard(_Request(first_run))


@pytest.mark.parametrize("change, named", [
    (lambda home: (home / "metadata" / "turbotfx.sqlite").write_bytes(b"a rerun's store"),
     "changed metadata/turbotfx.sqlite"),
    # Same size, a later write: still a change.
    (lambda home: os.utime(home / "metadata" / "turbotfx.sqlite", ns=(1, 1)), "changed metadata/turbotfx.sqlite"),
    (lambda home: (home / "serving").mkdir(), "new serving/"),
    (lambda home: (home / "metadata" / "turbotfx.sqlite").unlink(), "gone metadata/turbotfx.sqlite"),
])
def test_a_written_workspace_fails_naming_the_change(tmp_path, change, named):
    first_run = _workspace(tmp_path / "ws")
    change(first_run.home)
    with pytest.raises(AssertionError, match="the shared first-run workspace changed") as failed:
        _guard(_Request(first_run))
    assert named in str(failed.value) and "takes first_run_copy" in str(failed.value)


def test_a_test_without_the_first_run_is_not_checked(tmp_path):
    first_run = _workspace(tmp_path / "ws")
    (first_run.home / "metadata" / "turbotfx.sqlite").unlink()
    _guard(_Request(None))
