"""A quiet console: library noise goes to the workspace log, the user sees one line per component."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterator

# What TFX's LocalDagRunner logs around each node (tfx/orchestration/local/local_dag_runner.py).
_RUNNING = re.compile(r"Component (\S+) is running\.")
_FINISHED = re.compile(r"Component (\S+) is finished\.")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class Console:
    """Writes the user-facing lines; everything else is for the log file."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self._interactive = stream.isatty()
        self._started: dict[str, float] = {}
        self.current: str | None = None

    def line(self, text: str = "") -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def component_started(self, node_id: str) -> None:
        self._started[node_id] = time.perf_counter()
        self.current = node_id
        if self._interactive:
            self.stream.write(f"  {node_id:<32} running...")
            self.stream.flush()

    def component_finished(self, node_id: str) -> None:
        seconds = time.perf_counter() - self._started.get(node_id, time.perf_counter())
        prefix = "\r" if self._interactive else ""
        self.stream.write(f"{prefix}  {node_id:<32} done {seconds:6.1f}s  \n")
        self.stream.flush()
        self.current = None

    def abort_line(self) -> None:
        """Ends a half-written 'running...' line before an error is printed."""
        if self._interactive and self.current:
            self.stream.write("\n")
            self.stream.flush()


class _ComponentProgress(logging.Handler):
    def __init__(self, console: Console) -> None:
        super().__init__(level=logging.INFO)
        self.console = console

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a malformed library log record must not break the run
            return
        if match := _RUNNING.search(message):
            self.console.component_started(match.group(1))
        elif match := _FINISHED.search(message):
            self.console.component_finished(match.group(1))


@contextlib.contextmanager
def session(log_path: Path, verbose: bool, user_fd: int = 1) -> Iterator[Console]:
    """Routes library output to log_path (or the terminal with verbose) for the block.

    Quiet mode redirects file descriptors 1 and 2, which silences TF's C++ logging and
    Beam's subprocesses too; the console keeps a duplicate of the original user_fd (stdout;
    stderr where stdout is kept for a JSON document).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    saved_level = root.level
    sys.stdout.flush()
    sys.stderr.flush()
    user_stream = os.fdopen(os.dup(user_fd), "w", buffering=1)
    console = Console(user_stream)
    progress = _ComponentProgress(console)
    log_file = open(log_path, "a", buffering=1)
    saved_fds = None
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        saved_fds = (os.dup(1), os.dup(2))
        os.dup2(log_file.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
    _absl_to_python_logging()
    # stderr is the log file in quiet mode, the terminal with verbose. Timestamps show
    # where a run's seconds went.
    library_logs = logging.StreamHandler(sys.stderr)
    library_logs.setFormatter(logging.Formatter(LOG_FORMAT))
    root.setLevel(logging.INFO)
    root.addHandler(library_logs)
    root.addHandler(progress)
    try:
        yield console
    finally:
        root.removeHandler(progress)
        root.removeHandler(library_logs)
        root.setLevel(saved_level)
        sys.stdout.flush()
        sys.stderr.flush()
        if saved_fds:
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            os.close(saved_fds[0])
            os.close(saved_fds[1])
        log_file.close()
        user_stream.close()


def _absl_to_python_logging() -> None:
    """TFX logs through absl, whose logger propagates to the root one at its own verbosity."""
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)


def quietly(function: Callable[..., Any], *args: Any) -> Any:
    """Runs function with TFX, absl and client-library info logs kept off the terminal."""
    logging.getLogger().setLevel(logging.ERROR)
    for name in ("absl", "google", "kfp", "urllib3"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.ERROR)
    except ImportError:
        pass
    return function(*args)
