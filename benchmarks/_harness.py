"""What every benchmark needs: the repository importable, the CLI run in a fresh
interpreter, timing helpers and the final JSON line.

Import it before TensorFlow: it quiets TensorFlow's C++ logging, which only counts before
TensorFlow loads. (TF_USE_LEGACY_KERAS is left to pipeline/ and trainer_module/, which set
it on import, so a benchmark runs with what the pipeline runs with.)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # pipeline/, serving/, trainer_module/ as in the repo


def run_python(args: Sequence[str], what: str, env: Mapping[str, str] | None = None,
               log: Path | None = None) -> float:
    """`python ARGS` in a fresh interpreter in the repository; returns its wall seconds.

    Its output goes to `log` if given, else is kept back and shown only if it fails: a
    failure ends the benchmark, as numbers from a broken run mean nothing.
    """
    command = [sys.executable, *args]
    options: dict[str, Any] = {"cwd": REPO, "env": {**os.environ, **(env or {})}, "stderr": subprocess.STDOUT}
    started = time.perf_counter()
    if log:
        with open(log, "w") as handle:
            done = subprocess.run(command, stdout=handle, **options)
    else:
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, **options)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{what} failed (exit {done.returncode}); see {log}" if log
                 else f"{done.stdout}\n{what} failed (exit {done.returncode})")
    return seconds


def run_cli(*args: str, home: Path, env: Mapping[str, str] | None = None) -> float:
    """`turbotfx ARGS --home HOME`, as `python -m pipeline.cli` with this interpreter (what the
    entry point runs, without depending on where it is installed); returns its wall seconds."""
    return run_python(["-m", "pipeline.cli", *args, "--home", str(home)], f"turbotfx {args[0]}", env)


def timed(calls: Mapping[str, Callable[[], object]], runs: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds of each of `runs` calls of each, after `warmup` untimed ones (first calls
    trace and allocate). Interleaved, so that drift on the machine hits all alike."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    seconds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(runs):
        for name, call in calls.items():
            started = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - started)
    return seconds


def median_seconds(calls: Mapping[str, Callable[[], object]], runs: int, warmup: int = 1) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in timed(calls, runs, warmup).items()}


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo), "?" where it cannot be read."""
    try:
        with open("/proc/cpuinfo") as handle:
            return next((line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")), "?")
    except OSError:
        return "?"


def cpu_summary() -> str:
    return f"CPU: {cpu_name()}, {os.cpu_count()} cores"


def print_result(result: Mapping[str, Any], sort_keys: bool = False) -> None:
    """The benchmark's last line: one JSON object, for scripts that collect results."""
    print(json.dumps(result, sort_keys=sort_keys), flush=True)
