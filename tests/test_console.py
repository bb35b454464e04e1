"""The run console: one line per component start and end in a log, a live counter on a
terminal, and the Trainer's epoch lines (logged by the real Keras callback) on both."""

from __future__ import annotations

import io
import logging
import re
import threading
import time

import numpy as np
import pytest
import tf_keras as keras
from absl import logging as absl_logging

from pipeline.cli import console as console_lib
from trainer_module import callbacks

TICKER = "turbotfx-console-ticker"
# What LocalDagRunner logs around a node (see console._RUNNING / _FINISHED).
RUNNING, FINISHED = "Component Trainer is running.", "Component Trainer is finished."
EPOCHS = ("epoch 1/2  loss 0.6931  accuracy 0.5000  0.3s", "epoch 2/2  loss 0.5123  accuracy 0.7500  0.2s")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def render(written: str) -> list[str]:
    """The lines a terminal shows for written: \\r moves to the line's start, text overwrites."""
    lines, column = [""], 0
    for char in written:
        if char == "\r":
            column = 0
        elif char == "\n":
            lines.append("")
            column = 0
        else:
            lines[-1] = lines[-1][:column] + char + lines[-1][column + 1:]
            column += 1
    return [line.rstrip() for line in lines]


def tickers() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == TICKER]


def log(handler: logging.Handler, message: str) -> None:
    handler.handle(logging.LogRecord("absl", logging.INFO, __file__, 1, message, None, None))


def test_a_log_gets_a_line_when_each_component_starts_and_ends_and_each_epoch():
    stream = io.StringIO()
    handler = console_lib._ComponentProgress(console_lib.Console(stream))
    log(handler, RUNNING)
    assert not tickers(), "no counter thread when the stream is not a terminal"
    for line in EPOCHS:
        log(handler, line)
    log(handler, "Epoch 3 of something else")  # not the Trainer's pattern: not printed
    log(handler, FINISHED)
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines[0].split() == ["Trainer", "started"]
    assert lines[1:3] == [f"    {line}" for line in EPOCHS]
    assert re.fullmatch(r"  Trainer +done +\d+\.\ds", lines[3].rstrip()), lines[3]
    assert len(lines) == 4


def test_a_terminal_counts_seconds_in_place_and_epoch_lines_go_above_the_counter():
    stream = FakeTerminal()
    console = console_lib.Console(stream, tick_s=0.1)
    handler = console_lib._ComponentProgress(console)
    log(handler, RUNNING)
    assert len(tickers()) == 1
    # Waits for the counter rather than for a fixed time: a loaded CI machine may run the
    # thread late, never wrongly.
    deadline = time.monotonic() + 20
    while not re.search(r"\r  Trainer +running 1s", stream.getvalue()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert re.search(r"\r  Trainer +running 1s", stream.getvalue()), repr(stream.getvalue())
    for line in EPOCHS:
        log(handler, line)
        time.sleep(0.25)  # the counter keeps rewriting its own line meanwhile
    log(handler, FINISHED)
    assert not tickers(), "the counter stops with the component"
    written = stream.getvalue()
    time.sleep(0.3)
    assert stream.getvalue() == written, "nothing is written after the component ended"
    screen = render(written)
    assert screen[:2] == [f"    {line}" for line in EPOCHS]
    assert re.fullmatch(r"  Trainer +done +\d+\.\ds", screen[2]), screen
    assert screen[3:] == [""]  # the cursor at the start of a fresh line
    assert written.count("running") >= 2  # rewritten in place, not once


def test_an_abort_stops_the_counter_and_ends_its_line():
    stream = FakeTerminal()
    console = console_lib.Console(stream, tick_s=0.05)
    console.component_started("Transform")
    time.sleep(0.2)
    console.abort_line()
    assert not tickers()
    written = stream.getvalue()
    time.sleep(0.2)
    assert stream.getvalue() == written and written.endswith("\n")
    console.line("turbotfx: error: Transform failed")
    assert render(stream.getvalue())[-2:] == ["turbotfx: error: Transform failed", ""]
    assert console.current == "Transform"  # the run names the failing component


@pytest.fixture
def absl_info():
    previous = absl_logging.get_verbosity()
    absl_logging.set_verbosity(absl_logging.INFO)
    yield
    absl_logging.set_verbosity(previous)


def test_the_trainer_callbacks_epoch_lines_reach_the_console(absl_info):
    # The real callback, logging through absl as run_fn does under LocalDagRunner, and the
    # console's handler on the root logger as `turbotfx run` installs it.
    stream = io.StringIO()
    handler = console_lib._ComponentProgress(console_lib.Console(stream))
    logging.getLogger().addHandler(handler)
    try:
        inputs = keras.Input(shape=(2,))
        model = keras.Model(inputs, keras.layers.Dense(1, activation="sigmoid")(inputs))
        model.compile(optimizer="adam", loss="binary_crossentropy",
                      metrics=[keras.metrics.BinaryAccuracy(name="accuracy"), keras.metrics.AUC(name="auc")])
        x = np.random.default_rng(0).normal(size=(64, 2)).astype("float32")
        y = (x[:, 0] > 0).astype("float32")
        history = model.fit(x, y, epochs=3, batch_size=16, verbose=0, callbacks=[callbacks.EpochLog(3, "auc")])
    finally:
        logging.getLogger().removeHandler(handler)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3, lines
    for epoch, line in enumerate(lines):
        loss, auc = history.history["loss"][epoch], history.history["auc"][epoch]
        assert re.fullmatch(rf"    epoch {epoch + 1}/3  loss {loss:.4f}  auc {auc:.4f}  \d+\.\ds", line), line


def test_the_store_password_reaches_no_log_record_and_the_log_is_private(tmp_path, monkeypatch):
    from ml_metadata.proto import metadata_store_pb2

    from pipeline.store.url import PASSWORD_ENV_VAR

    # A quote, a backslash and a non-ASCII letter: a protobuf's text form escapes each.
    password = 'pa"ss\\wörd#1'
    monkeypatch.setenv(PASSWORD_ENV_VAR, password)
    config = metadata_store_pb2.ConnectionConfig()
    config.mysql.host, config.mysql.password = "127.0.0.1", password
    printed = re.search(r'password: "(.*)"', str(config)).group(1)  # as the config prints it
    assert printed != password
    log_path = tmp_path / "logs" / "turbotfx.log"
    log_path.parent.mkdir()
    log_path.write_text("a line from before\n")
    log_path.chmod(0o644)
    seen = io.StringIO()
    watcher = logging.StreamHandler(seen)
    user = open(tmp_path / "terminal", "w")
    logging.getLogger().addHandler(watcher)
    try:
        with console_lib.session(log_path, verbose=False, user_fd=user.fileno()):
            absl_logging.info("Using connection config:\n %s", config)  # as LocalDagRunner logs it
            logging.getLogger("some.library").warning("connecting with %s", password)
        logging.getLogger("after").warning("outside a session: %s", "untouched")
    finally:
        logging.getLogger().removeHandler(watcher)
        user.close()
    text = seen.getvalue()
    assert 'host: "127.0.0.1"' in text and "connecting with ***" in text
    assert password not in text and printed not in text
    assert "outside a session: untouched" in text
    assert log_path.stat().st_mode & 0o777 == 0o600
    assert log_path.read_text().startswith("a line from before\n")


def test_library_output_reaches_the_log_where_pythons_streams_are_not_the_descriptors(tmp_path):
    """A notebook (or a caller's redirect) gives sys.stdout and sys.stderr streams of its own:
    a quiet session still sends the libraries' log records and what they print to the log."""
    import contextlib
    import sys

    log_path = tmp_path / "logs" / "turbotfx.log"
    cell_out, cell_err = io.StringIO(), io.StringIO()
    user = open(tmp_path / "terminal", "w")
    try:
        with contextlib.redirect_stdout(cell_out), contextlib.redirect_stderr(cell_err):
            with console_lib.session(log_path, verbose=False, user_fd=user.fileno()):
                logging.getLogger("some.library").warning("a library's record")
                print("a library's print")
                # Where Python prints a warning (pytest records them instead of printing here).
                print("a library's warning", file=sys.stderr)
            print("the caller's own line")
    finally:
        user.close()
    log = log_path.read_text()
    for line in ("a library's record", "a library's print", "a library's warning"):
        assert line in log, line
        assert line not in cell_out.getvalue() + cell_err.getvalue(), line
    assert cell_out.getvalue() == "the caller's own line\n"
