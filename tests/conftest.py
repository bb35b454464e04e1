"""Shared fixtures: real pipeline runs on penguins (subprocesses, as a user runs them)."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import dataclasses  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

from pipeline.config import PipelineConfig  # noqa: E402

pytest_plugins = ["tests.db_fixtures"]

# Few epochs: the tests check wiring and contracts, not model quality.
FAST_RUN_ARGS = ("--epochs", "5", "--min-accuracy", "0.5")


@dataclasses.dataclass
class CliResult:
    home: Path
    exit_code: int
    output: str  # stdout and stderr
    stdout: str = ""

    @property
    def config(self) -> PipelineConfig:
        return PipelineConfig(home=str(self.home))


def turbotfx(*args: str, home: Path, timeout: int = 600, env: dict[str, str] | None = None) -> CliResult:
    """Runs the `turbotfx` CLI in a fresh interpreter, as a user would."""
    completed = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TURBOTFX_HOME": str(home), **(env or {})},
    )
    return CliResult(home=home, exit_code=completed.returncode, output=completed.stdout + completed.stderr,
                     stdout=completed.stdout)


@pytest.fixture(scope="session")
def first_run(tmp_path_factory) -> CliResult:
    """The whole pipeline, once, on the embedded penguins data in a fresh workspace."""
    home = tmp_path_factory.mktemp("workspace")
    result = turbotfx("run", *FAST_RUN_ARGS, home=home)
    assert result.exit_code == 0, result.output
    return result
