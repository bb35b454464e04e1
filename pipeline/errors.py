"""The errors a user can fix. Each message names the cause and the fix; the CLI prints it
as one line and exits with 2. Any other exception is a bug in turbotfx."""

from __future__ import annotations


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
