"""`turbotfx init`: a dataset file (and the draft of its curated schema) for a table of CSV
or Parquet files, every decision printed with its reason (pipeline/datasets/infer.py)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline import config as config_lib
from pipeline.cli import args as cli_args
from pipeline.datasets import HIGHER_IS_BETTER
from trainer_module.features import TASKS

if TYPE_CHECKING:
    from pipeline.datasets.infer import Draft


def add_parser(commands: argparse._SubParsersAction) -> None:
    init = commands.add_parser("init", help="write a dataset file for your CSV or Parquet table")
    cli_args.add_data_root(init, "directory of the table's CSV or Parquet files", required=True)
    init.add_argument("--label", required=True, help="the column to predict")
    init.add_argument("--output", help="dataset file to write; its schema draft goes beside it "
                                       "(default: DATA_ROOT's name + .toml in this directory)")
    init.add_argument("--task", choices=TASKS,
                      help="what to predict (default: from the label: text or few whole numbers are "
                           "classes, decimals a regression)")
    init.add_argument("--name", help="dataset name (default: from the dataset file's name)")
    init.add_argument("--categorical-max", type=int, default=None, metavar="N",
                      help="whole-number columns with at most N distinct values are categories, more "
                           "are quantities (0: every whole number a quantity unless named as a code)")
    cli_args.add_table_format(init)
    init.add_argument("--force", action="store_true", help="overwrite the dataset file and its schema draft")
    cli_args.add_quiet_logging(init)
    init.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pipeline.cli import console
    from pipeline.datasets import draft as draft_file
    from pipeline.datasets import infer

    data_root = Path(args.data_root).expanduser()
    output = Path(args.output) if args.output else Path(f"{data_root.resolve().name or 'dataset'}.toml")
    infer.check_outputs(output, args.force)  # before any reading
    config = cli_args.workspace_config(args)
    config_lib.ensure_writable_home(config)  # where the log goes
    with console.session(config.log_path, args.verbose) as out:
        categorical_max = infer.DEFAULT_CATEGORICAL_MAX if args.categorical_max is None else args.categorical_max
        draft = infer.draft(data_root, args.label, output, fmt=args.format, task=args.task, name=args.name,
                            force=args.force, categorical_max=categorical_max)
        draft_file.write(draft, force=args.force)
        for line in report(draft):
            out.line(line)
    return 0


def report(draft: Draft) -> list[str]:
    """What init decided and why, the files written, and the next command."""
    from pipeline.datasets import draft as draft_file

    files = f"{draft.files} {draft.format.upper()} file{'s' if draft.files != 1 else ''}"
    lines = [f"turbotfx init: {draft.rows} rows in {files} under {draft.data_root}",
             f"  label {_name(draft.label.name)}: {draft.task}, from {draft.task_reason}", "  columns:"]
    width = max(len(_name(d.column.name)) for d in draft.decisions)
    for decision in draft.decisions:
        lines.append(f"    {_name(decision.column.name).ljust(width)}  {decision.role:<11}  {decision.reason}")
    lines.append(f"  slices: {draft.slice_reason}")
    blessing = draft.blessing
    bound = "at least" if HIGHER_IS_BETTER[blessing["metric"]] else "at most"
    lines.append(f"  blessing: {blessing['metric']} {bound} {blessing['threshold']}, and at most "
                 f"{blessing['max_drop']} worse than the last blessed model")
    if draft.imbalanced:
        lines.append(f"  imbalance: {draft_file.class_weight_advice(draft)} (in [training])")
    lines.append(f"wrote {draft.output} and {draft.schema_path}: check the roles, then curate the schema")
    lines.append(f"next: turbotfx run --dataset {_dataset_arg(draft.output)}")
    return lines


def _name(column: str) -> str:
    """A column name as typed, unless quoting shows it better (spaces at its ends, control characters)."""
    return column if column.isprintable() and column == column.strip() and column else repr(column)


def _dataset_arg(output: Path) -> str:
    """The dataset file as --dataset takes it: a bare name without .toml would be a built-in's."""
    text = str(output)
    if "/" not in text and not text.endswith(".toml"):
        text = f"./{text}"
    return shlex.quote(text)
