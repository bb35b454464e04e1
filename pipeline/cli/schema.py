"""`turbotfx schema infer`: propose a schema from new data for a person to curate."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline import config as config_lib
from pipeline.cli import args as cli_args


def add_parser(commands: argparse._SubParsersAction) -> None:
    schema = commands.add_parser("schema", help="schema tools")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    infer = schema_commands.add_parser("infer", help="write the inferred schema of CSV data for curation")
    cli_args.add_data_root(infer, "directory of CSV files", required=True)
    cli_args.add_dataset(infer, "which dataset's columns the files hold (default: penguins)",
                         default="penguins", choices=config_lib.DATASETS)
    infer.add_argument("--output", default="inferred_schema.pbtxt", help="schema file to write")
    cli_args.add_verbose(infer, "show TF and Beam logs")
    schema.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pipeline import data
    from pipeline.cli import console

    log_path = cli_args.workspace_config(args).log_path
    with console.session(log_path, args.verbose) as out:
        path = data.infer_schema(Path(args.data_root), Path(args.output), args.dataset)
        out.line(f"inferred schema written to {path}; compare it with the curated one and curate it")
    return 0

