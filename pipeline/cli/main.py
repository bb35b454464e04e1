"""`turbotfx`: the top-level parser; each command module adds its own sub-commands and
handles them. Run with `turbotfx` or `python -m pipeline.cli`."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from pipeline.cli import deploy, init, provenance, run, schema, serve
from pipeline.errors import ConfigError

# In the order `turbotfx --help` lists them.
COMMAND_MODULES = (init, run, provenance, deploy, serve, schema)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turbotfx", description="An end-to-end TFX pipeline: data to a served model."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as err:
        print(f"turbotfx: error: {err}", file=sys.stderr)
        return 2
