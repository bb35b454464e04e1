"""`python -m tests.store_disk HOME RUN_ARGS...`: a run whose metadata store's disk fills up
while the Pusher pushes, so the Pusher's record is the write that fails. Run it where
HOME/metadata is a small disk of its own (tests/e2e/test_recovery.py mounts a tmpfs there in
a private mount namespace). The serving lock, held from the Trainer's end until the Pusher has
made its archive copy (and so is registered in the store and pushing), pins the moment; the
disk is filled, then the lock let go. Prints the run's exit code and output as one JSON line."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from pipeline.config import PipelineConfig
from serving import model_config

TIMEOUT_S = 600


def main(home: Path, run_args: list[str]) -> None:
    config = PipelineConfig(home=str(home))
    serving_root = config.serving_dir.parent
    archives_before = _archives(config)
    run = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", *run_args], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env={**os.environ, "TURBOTFX_HOME": str(home)})
    assert run.stdout is not None and run.stderr is not None
    read = ""
    for line in run.stdout:
        read += line
        if line.split()[:2] == ["Trainer", "done"]:
            break
    with open(serving_root / model_config.LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        deadline = time.monotonic() + TIMEOUT_S
        while not _archives(config) - archives_before:
            if run.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        filled = _fill(config.metadata_path.parent)
    out, err = run.communicate(timeout=TIMEOUT_S)
    print(json.dumps({"exit": run.returncode, "stdout": read + out, "stderr": err, "filled": filled}))


def _archives(config: PipelineConfig) -> set[Path]:
    """The Pusher's archive copies: complete once saved_model.pb is there."""
    return set(config.pipeline_root.glob("Pusher/pushed_model/*/saved_model.pb"))


def _fill(directory: Path) -> int:
    """Fills the disk under directory to the last byte; the bytes written."""
    written = 0
    with open(directory / "filler", "wb", buffering=0) as filler:
        for size in (1 << 20, 4096, 1):
            chunk = b"\0" * size
            while True:
                try:
                    written += filler.write(chunk) or 0
                except OSError as err:
                    if err.errno != errno.ENOSPC:
                        raise
                    break
    return written


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
