"""The errors a user can fix. Each message names the cause and the fix; the CLI prints it
as one line and exits with 2. Any other exception is a bug in turbotfx. Also the helpers
the messages share (first_line, shown, listed)."""

from __future__ import annotations

from typing import Sequence


class ConfigError(ValueError):
    """Something a user gave or set up is unusable: a flag, a file, a store, a server.

    The root of every user-fixable error (the store, lineage and serving errors derive
    from it), not only of configuration values.
    """


def innermost_cause(error: BaseException) -> BaseException:
    """The exception at the bottom of a `raise ... from` chain: TFX wraps executor errors."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def first_line(value: object) -> str:
    """The first line of an error (or of a server's reason text), else the value's type name."""
    text = str(value or "").strip()
    return text.splitlines()[0] if text else type(value).__name__


class Interrupted(Exception):
    """The user stopped a command (Ctrl-C, SIGTERM); the message says what state it left.
    The CLI prints it as one line and exits with 130, as a shell does for SIGINT."""


def shown(value: object, width: int = 24) -> str:
    """A value as a message quotes it: its repr, cut to `width` characters."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 4] + "...'"


def listed(values: Sequence[object], most: int = 5, counted: bool = True) -> str:
    """The first `most` values as a message lists them; counted: say how many in all when cut."""
    text = ", ".join(shown(v) for v in values[:most])
    if len(values) <= most:
        return text
    return text + (f", ... ({len(values)} in all)" if counted else ", ...")
