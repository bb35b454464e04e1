"""A quiet console: library noise goes to the workspace log, the user sees one line per component."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping

from trainer_module import progress

# What TFX's LocalDagRunner logs around each node (tfx/orchestration/local/local_dag_runner.py).
_RUNNING = re.compile(r"Component (\S+) is running\.")
_FINISHED = re.compile(r"Component (\S+) is finished\.")
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class Console:
    """Writes the user-facing lines; everything else is for the log file.

    On a terminal a running component's line is rewritten in place once a tick ("running
    12s") by a daemon thread; a line printed meanwhile (a Trainer epoch) goes above it. A
    non-terminal (a CI log) gets whole lines only: one when a component starts, one when
    it ends.
    """

    def __init__(self, stream: IO[str], tick_s: float = 1.0, rewrite: bool = True) -> None:
        self.stream = stream
        # rewrite=False (verbose: library logs share the terminal) gets whole lines too.
        self._interactive = rewrite and stream.isatty()
        self._started: dict[str, float] = {}
        self.current: str | None = None
        self._tick_s = tick_s
        # Log handlers (any thread) and the ticker write: one at a time.
        self._lock = threading.RLock()
        self._partial = ""  # the unfinished line on the terminal, rewritten by the ticker
        self._ticker: threading.Thread | None = None
        self._stop_ticker = threading.Event()

    def line(self, text: str = "") -> None:
        with self._lock:
            self._write_above(text)

    def component_started(self, node_id: str) -> None:
        self._stop_ticking()
        with self._lock:
            self._end_partial()
            self._started[node_id] = time.perf_counter()
            self.current = node_id
            if not self._interactive:
                self._write(f"  {node_id:<32} started\n")
                return
            self._show_partial(f"  {node_id:<32} running...")
            self._stop_ticker = threading.Event()
            self._ticker = threading.Thread(target=self._tick, args=(node_id, self._stop_ticker),
                                            name="turbotfx-console-ticker", daemon=True)
            self._ticker.start()

    def component_finished(self, node_id: str) -> None:
        self._stop_ticking()
        with self._lock:
            seconds = time.perf_counter() - self._started.get(node_id, time.perf_counter())
            self._show_partial(f"  {node_id:<32} done {seconds:6.1f}s  ")
            self._end_partial()
            self.current = None

    def epoch_line(self, text: str) -> None:
        """A Trainer epoch's line, indented under the running component."""
        self.line(f"    {text}")

    def abort_line(self) -> None:
        """Stops the counter and ends a half-written 'running' line before an error is printed."""
        self._stop_ticking()
        with self._lock:
            self._end_partial()

    def close(self) -> None:
        self._stop_ticking()

    def _tick(self, node_id: str, stop: threading.Event) -> None:
        while not stop.wait(self._tick_s):
            with self._lock:
                if stop.is_set() or self.current != node_id:
                    return
                elapsed = time.perf_counter() - self._started[node_id]
                self._show_partial(f"  {node_id:<32} running {elapsed:.0f}s")

    def _stop_ticking(self) -> None:
        # Outside the lock: the ticker may be waiting for it.
        self._stop_ticker.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        self._ticker = None

    def _show_partial(self, text: str) -> None:
        """Replaces the unfinished terminal line with text (padded over a longer one)."""
        self._write("\r" + text.ljust(len(self._partial)) if self._partial else text)
        self._partial = text

    def _end_partial(self) -> None:
        if self._partial:
            self._write("\n")
            self._partial = ""

    def _write_above(self, text: str) -> None:
        """A whole line; the unfinished one, if any, is cleared and drawn again below it."""
        partial = self._partial
        if partial:
            self._write("\r" + text.ljust(len(partial)) + "\n" + partial)
        else:
            self._write(text + "\n")

    def _write(self, text: str) -> None:
        self.stream.write(text)
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
        elif any(line.match(message) for line in (progress.EPOCH_LINE, progress.TRIAL_LINE, progress.TUNING_LINE)):
            self.console.epoch_line(message)


def can_log(log_path: Path) -> bool:
    """Whether the log can be written (made, with its folder, if missing): a read-only
    workspace still answers the commands that only read it."""
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        _private_log(log_path).close()
    except OSError:
        return False
    return True


@contextlib.contextmanager
def session(log_path: Path | None, verbose: bool, user_fd: int = 1) -> Iterator[Console]:
    """Routes library output to log_path (or the terminal with verbose; None: nowhere) for
    the block.

    Quiet mode redirects file descriptors 1 and 2, which silences TF's C++ logging and
    Beam's subprocesses too; the console keeps a duplicate of the original user_fd (stdout;
    stderr where stdout is kept for a JSON document).
    """
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
    root = logging.getLogger()
    saved_level = root.level
    sys.stdout.flush()
    sys.stderr.flush()
    user_stream = os.fdopen(os.dup(user_fd), "w", buffering=1)
    console = Console(user_stream, rewrite=not verbose)
    component_progress = _ComponentProgress(console)
    log_file = _private_log(log_path) if log_path is not None else open(os.devnull, "a")
    saved_fds = None
    python_streams = contextlib.ExitStack()
    if not verbose:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
        saved_fds = (os.dup(1), os.dup(2))
        os.dup2(log_file.fileno(), 1)
        os.dup2(log_file.fileno(), 2)
        # Python's own streams too: where they are not descriptors 1 and 2 (a notebook's
        # cell output, a caller's redirect), library prints and warnings would miss the log.
        python_streams.enter_context(contextlib.redirect_stdout(log_file))
        python_streams.enter_context(contextlib.redirect_stderr(log_file))
    _absl_to_python_logging()
    # Every Python log record of the run, whichever library makes it (TFX prints the store's
    # connection config, password included), is redacted when it is made.
    saved_factory = logging.getLogRecordFactory()
    logging.setLogRecordFactory(_redacting(saved_factory, secrets_to_hide()))
    # stderr is the log file in quiet mode, the terminal with verbose. Timestamps show
    # where a run's seconds went.
    library_logs = logging.StreamHandler(sys.stderr)
    library_logs.setFormatter(logging.Formatter(LOG_FORMAT))
    root.setLevel(logging.INFO)
    root.addHandler(library_logs)
    root.addHandler(component_progress)
    try:
        yield console
    finally:
        root.removeHandler(component_progress)
        root.removeHandler(library_logs)
        logging.setLogRecordFactory(saved_factory)
        console.close()
        root.setLevel(saved_level)
        sys.stdout.flush()
        sys.stderr.flush()
        python_streams.close()
        if saved_fds:
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            os.close(saved_fds[0])
            os.close(saved_fds[1])
        log_file.close()
        user_stream.close()


def _private_log(log_path: Path) -> IO[str]:
    """The log file, readable by its owner only: it holds library output (paths, hosts, the
    data's values in an error) that other users of the machine have no business reading."""
    descriptor = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.chmod(log_path, 0o600)  # a log made before this rule was world-readable
    return os.fdopen(descriptor, "a", buffering=1)


def secrets_to_hide(environ: Mapping[str, str] | None = None) -> list[str]:
    """The store password as given, and as a protobuf's text form escapes it (how TFX logs a
    connection config): quotes, backslashes and non-ASCII bytes come out escaped there."""
    from google.protobuf import text_encoding

    from pipeline.store.url import PASSWORD_ENV_VAR

    password = (os.environ if environ is None else environ).get(PASSWORD_ENV_VAR, "")
    if not password:
        return []
    forms = {password, text_encoding.CEscape(password.encode(), as_utf8=False),
             text_encoding.CEscape(password.encode(), as_utf8=True)}
    return sorted(forms, key=len, reverse=True)


REDACTED = "***"


def _redacting(make_record: Callable[..., logging.LogRecord], secrets: list[str]) -> Callable[..., logging.LogRecord]:
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        if secrets:
            try:
                message = record.getMessage()
            except Exception:  # a malformed record: left for its handler to report
                return record
            if any(secret in message for secret in secrets):
                for secret in secrets:
                    message = message.replace(secret, REDACTED)
                record.msg, record.args = message, None
        return record

    return make


def _absl_to_python_logging() -> None:
    """TFX logs through absl, whose logger propagates to the root one at its own verbosity."""
    from absl import logging as absl_logging

    absl_logging.set_verbosity(absl_logging.INFO)


def quietly(function: Callable[..., Any], *args: Any) -> Any:
    """Runs function with TFX, absl and client-library info logs kept off the terminal; the
    levels are put back after, for a caller that goes on in the same process (main() called
    from Python, a notebook)."""
    loggers = [logging.getLogger(name) for name in ("", "absl", "google", "kfp", "urllib3")]
    saved_levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    from absl import logging as absl_logging  # installed with TFX

    saved_verbosity = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.ERROR)
    try:
        return function(*args)
    finally:
        for logger, level in zip(loggers, saved_levels):
            logger.setLevel(level)
        absl_logging.set_verbosity(saved_verbosity)


def counted(number: int, noun: str) -> str:
    """'1 row', '2 rows': a count with its noun (nouns with a plain -s plural)."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
