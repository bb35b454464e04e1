"""The process the serving check loads the model in: `python -m serving.session_check --wait`.

Such a process spends about 3 s importing TensorFlow before it can check anything. A local
run starts one ahead (`prestarted`, around the LocalDagRunner run) so that the import
overlaps ExampleGen..Trainer; the executor `take`s it, or starts a fresh one where none was
started ahead (a compiled pipeline runs each component in its own container). Either way
the model is loaded in a process of its own: a loader that crashes cannot take the run down.

No TensorFlow or TFX here: the local runner imports this module.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from typing import Iterator

from serving.contract import SESSION_CHECK_WAIT_FLAG

COMMAND = (sys.executable, "-m", "serving.session_check", SESSION_CHECK_WAIT_FLAG)

_prestarted: LoaderProcess | None = None


class LoaderProcess:
    """One session-check process; it answers one request, then exits."""

    def __init__(self) -> None:
        # Its output goes to a file, not a pipe: nobody reads a pipe while it waits, and
        # TensorFlow's logs could fill one and stall it.
        self._output = tempfile.TemporaryFile()
        self._process = subprocess.Popen(COMMAND, stdin=subprocess.PIPE, stdout=self._output,
                                         stderr=subprocess.STDOUT)
        assert self._process.stdin is not None  # stdin=PIPE: Popen's type cannot say so
        self._stdin = self._process.stdin

    @property
    def pid(self) -> int:
        return self._process.pid

    def running(self) -> bool:
        return self._process.poll() is None

    @property
    def returncode(self) -> int | None:
        """Its exit status once it ended (negative: the signal that ended it), else None."""
        return self._process.poll()

    def check(self, args: list[str], timeout_s: float) -> int | None:
        """Sends the session check's arguments; its exit status, or None (killed) past timeout_s."""
        try:
            self._stdin.write((json.dumps(args) + "\n").encode())
            self._stdin.close()
        except OSError:  # it ended before the request: its exit status and output say why
            pass
        try:
            return self._process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self._stop()
            return None

    def output_tail(self, lines: int = 3) -> list[str]:
        """Its last non-blank output lines (the loader's error, when it failed)."""
        self._output.seek(0)
        text = self._output.read().decode(errors="replace")
        return [line for line in text.splitlines() if line.strip()][-lines:]

    def close(self) -> None:
        """Ends it if it still runs (unused, or hung) and frees its output; safe to repeat."""
        self._stop()
        self._output.close()

    def _stop(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        with contextlib.suppress(OSError):  # a request half-written to a dead process
            self._stdin.close()


@contextlib.contextmanager
def prestarted() -> Iterator[LoaderProcess]:
    """A loader process started now for the serving check to `take` later; whatever happens
    in between (the check never runs, an error, Ctrl-C), it is gone when this ends."""
    global _prestarted
    loader = LoaderProcess()
    _prestarted = loader
    try:
        yield loader
    finally:
        _prestarted = None
        loader.close()


def take() -> LoaderProcess | None:
    """The process started ahead, once, if it is still there to answer; else None."""
    global _prestarted
    loader, _prestarted = _prestarted, None
    return loader if loader is not None and loader.running() else None
