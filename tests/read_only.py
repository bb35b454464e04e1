"""A folder no process may write, for the duration of a with block (tests of read-only
workspaces)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pytest


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Read-only even for root (the tests' usual user): the immutable flag; else the mode bits.
    Skips the test on a file system without the flag when running as root."""
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
            pytest.skip("this file system has no immutable flag, and root writes past mode bits")
        undo = ["chattr", "-i", str(folder)]
    else:
        folder.chmod(0o555)
        undo = ["chmod", "755", str(folder)]
    try:
        yield
    finally:
        subprocess.run(undo, check=True)
