"""What a scoring or drift check does when it is stopped or breaks: Ctrl-C or SIGTERM
anywhere (Beam wraps an interrupt in its own error, or its worker threads swallow it) ends
it as Interrupted with nothing written; any other failure is one line pointing at the log,
whose traceback has the whole story."""

from __future__ import annotations

import contextlib
import logging
import signal
from pathlib import Path
from typing import Iterator

from pipeline.errors import ConfigError, Interrupted, first_line, innermost_cause


class Stopped:
    """Whether a stop signal arrived while guarded (Beam may have carried on regardless)."""

    def __init__(self) -> None:
        self.signals: list[int] = []

    def check(self) -> None:
        """Raises KeyboardInterrupt if a stop arrived: checked before anything is published."""
        if self.signals:
            raise KeyboardInterrupt


@contextlib.contextmanager
def guarded(what: str, log_path: Path) -> Iterator[Stopped]:
    """Runs the body with SIGINT and SIGTERM noted (and raised as KeyboardInterrupt); turns
    an interrupt into Interrupted and an unexpected error into one ConfigError line."""
    stopped = Stopped()

    def stop(signum, frame):
        stopped.signals.append(signum)
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stopped
    except (ConfigError, Interrupted):
        raise
    except BaseException as err:  # KeyboardInterrupt included: Beam may wrap it in its own error
        if stopped.signals or isinstance(err, KeyboardInterrupt) or "KeyboardInterrupt" in str(err):
            raise Interrupted(f"interrupted: {what} stopped; nothing was written or recorded") from None
        if not isinstance(err, Exception):
            raise
        logging.getLogger(__name__).error("%s failed", what, exc_info=err)
        raise ConfigError(f"{what} failed: {first_line(innermost_cause(err))}; nothing was written or recorded "
                          f"(the log {log_path} has the whole story)") from None
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
