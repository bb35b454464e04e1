"""pipeline/scoring/guard.py: a stop anywhere in a scoring (raised, wrapped by Beam, or
swallowed by it) ends as Interrupted; another failure is one line pointing at the log; the
signal handlers are the caller's again afterwards."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest

from pipeline.errors import ConfigError, Interrupted
from pipeline.scoring import guard


def test_an_interrupt_wrapped_by_beam_is_interrupted(tmp_path):
    with pytest.raises(Interrupted, match="nothing was written or recorded"):
        with guard.guarded("the scoring", tmp_path / "log"):
            # What Beam's DirectRunner raised for a Ctrl-C in a DoFn (seen in a hostile pass).
            raise RuntimeError("KeyboardInterrupt [while running 'Check/ParDo(_Check)']")


def test_a_ctrl_c_that_beam_swallowed_still_stops_before_anything_is_published(tmp_path):
    published = []
    with pytest.raises(Interrupted):
        with guard.guarded("the scoring", tmp_path / "log") as stopped:
            with contextlib.suppress(KeyboardInterrupt):  # a worker thread's catch-all: the job carried on
                os.kill(os.getpid(), signal.SIGINT)
            stopped.check()
            published.append("output")
    assert published == []


def test_another_failure_is_one_line_naming_its_cause_and_the_log(tmp_path):
    log = tmp_path / "turbotfx.log"
    with pytest.raises(ConfigError) as raised:
        with guard.guarded("the scoring", log):
            try:
                raise OSError("disk quota exceeded")
            except OSError as err:
                raise RuntimeError("a Beam stage failed") from err
    assert str(raised.value) == (f"the scoring failed: disk quota exceeded; nothing was written or recorded (the "
                                 f"log {log} has the whole story)")


def test_the_callers_signal_handlers_are_back_after(tmp_path):
    mine = signal.default_int_handler  # any handler of the caller's own, to see it put back
    previous = signal.signal(signal.SIGTERM, mine)
    try:
        before = signal.getsignal(signal.SIGINT)
        with pytest.raises(ConfigError):
            with guard.guarded("the drift check", tmp_path / "log"):
                assert signal.getsignal(signal.SIGTERM) is not mine
                raise ConfigError("a user error passes through as it is")
        assert signal.getsignal(signal.SIGTERM) is mine and signal.getsignal(signal.SIGINT) is before
    finally:
        signal.signal(signal.SIGTERM, previous)
