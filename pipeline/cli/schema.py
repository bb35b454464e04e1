"""`turbotfx schema infer`: propose a schema from new data for a person to curate."""

from __future__ import annotations

import argparse
from pathlib import Path

from pipeline.cli import args as cli_args


def add_parser(commands: argparse._SubParsersAction) -> None:
    schema = commands.add_parser("schema", help="schema tools")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    infer = schema_commands.add_parser(
        "infer", help="write the schema TFDV infers from a table of CSV or Parquet files, for curation")
    cli_args.add_data_root(infer, "directory of CSV or Parquet files", required=True)
    cli_args.add_table_format(infer)
    infer.add_argument("--output", default="inferred_schema.pbtxt", help="schema file to write")
    infer.add_argument("--force", action="store_true", help="replace --output if it exists (it may be the "
                                                            "curated schema)")
    cli_args.add_quiet_logging(infer)
    schema.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pipeline.cli import console
    from pipeline.datasets import infer
    from pipeline.errors import ConfigError

    if Path(args.output).exists() and not args.force:
        # Often the curated schema itself: a person's work, not to be lost to a draft.
        raise ConfigError(f"{args.output} exists; write the proposal elsewhere with --output, or replace it "
                          "with --force")
    log_path = cli_args.workspace_config(args).log_path
    with console.session(log_path, args.verbose) as out:
        path = infer.infer_schema(Path(args.data_root), Path(args.output), args.format)
        out.line(f"inferred schema written to {path}; compare it with the curated one and curate it")
    return 0
