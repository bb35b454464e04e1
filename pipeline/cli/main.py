"""`turbotfx`: the top-level parser; each command module adds its own sub-commands and
handles them. Run with `turbotfx` or `python -m pipeline.cli`."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from pipeline import private
from pipeline.cli import args as cli_args
from pipeline.cli import deploy, drift, init, provenance, report, run, schema, score, serve, tune
from pipeline.errors import ConfigError, Interrupted

# What a shell reports for a process ended by SIGINT, and by SIGPIPE.
INTERRUPTED_EXIT, BROKEN_PIPE_EXIT = 130, 141

# In the order `turbotfx --help` lists them.
COMMAND_MODULES = (init, run, provenance, report, tune, deploy, serve, score, drift, schema)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turbotfx", description="An end-to-end TFX pipeline: data to a served model."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:  # --help or a usage error: what it printed must reach the reader
            sys.stdout.flush()
            raise
        with private.owner_only():
            code = args.handler(args)
        sys.stdout.flush()  # a reader that went away shows here, not at interpreter exit
        return code
    except ConfigError as err:
        print(f"turbotfx: error: {err}", file=sys.stderr)
        return cli_args.BAD_INPUT_EXIT
    except Interrupted as err:
        print(f"turbotfx: {err}", file=sys.stderr)
        return INTERRUPTED_EXIT
    except KeyboardInterrupt:
        print("turbotfx: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT
    except BrokenPipeError:
        # The reader went away (`turbotfx runs | head`): stop quietly, as cat does.
        _silence_stdout()
        return BROKEN_PIPE_EXIT
    except OSError as err:
        # The file system refused (permissions, a full disk, a path that is not a folder):
        # nothing the user gave was wrong, but the one line names the path to look at.
        where = f": {err.filename}" if err.filename else ""
        print(f"turbotfx: error: {err.strerror or err}{where}; check that it exists, that you may write it "
              "and that its disk has space", file=sys.stderr)
        return 1


def _silence_stdout() -> None:
    """Python would report the broken pipe again when it flushes stdout at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
