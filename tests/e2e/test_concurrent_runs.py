"""Two runs at once on one SQLite store: the second fails at once with a clear message, the
first completes, and the store stays whole."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from pipeline.config import PipelineConfig
from tests.conftest import FAST_RUN_ARGS, turbotfx

pytestmark = pytest.mark.e2e


def test_second_run_on_a_busy_sqlite_store_fails_clearly(tmp_path) -> None:
    home = tmp_path / "workspace"
    store = PipelineConfig(home=str(home)).metadata_path
    lock = store.parent / (store.name + ".lock")
    first = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "run", *FAST_RUN_ARGS],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "TURBOTFX_HOME": str(home)},
    )
    try:
        deadline = time.monotonic() + 120
        while not (lock.is_file() and lock.read_text().strip() == str(first.pid)):
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the first run never took the store"
            time.sleep(0.2)

        second = turbotfx("run", *FAST_RUN_ARGS, home=home)
        assert second.exit_code == 2
        assert f"another pipeline run (pid {first.pid}) is using the SQLite metadata store" in second.output
        assert "--metadata-url" in second.output

        output, _ = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, output
    assert "blessed: yes" in output
    with sqlite3.connect(store) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    runs = turbotfx("runs", "--format", "json", home=home)
    assert runs.exit_code == 0, runs.output
    assert '"status": "COMPLETE"' in runs.output and runs.output.count('"run_id"') == 1
