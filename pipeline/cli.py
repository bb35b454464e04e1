"""`turbotfx` command line: run or compile the pipeline, ask MLMD about models and runs, serve, infer a schema."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Sequence

from pipeline import config as config_lib
from pipeline import deploy_commands
from pipeline.config import ConfigError, PipelineConfig
from serving import commands as serving_commands
from serving import predict_command
from trainer_module import hardware


class CliError(Exception):
    """A failure the user can fix; the message names cause and fix."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="turbotfx", description="An end-to-end TFX pipeline: data to a served model."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run the whole pipeline (default: penguins in ./workspace)")
    add_workspace_args(run)
    add_pipeline_args(run)
    run.add_argument("--beam-mode", choices=config_lib.BEAM_MODES,
                     help="Beam DirectRunner mode (default: auto, by data size)")
    run.add_argument("--metadata-url",
                     help="MLMD store: sqlite:///PATH, mysql://USER@HOST[:PORT]/DB or postgresql://USER@HOST[:PORT]/DB; "
                          "password in $TURBOTFX_METADATA_PASSWORD (default: SQLite in the workspace)")
    run.add_argument("--no-cache", action="store_true", help="re-execute every component")
    run.add_argument("-v", "--verbose", action="store_true", help="show TF, Beam and TFX logs")

    lineage = commands.add_parser("lineage", help="where a model came from and where it went (from MLMD)")
    add_store_args(lineage)
    which = lineage.add_mutually_exclusive_group(required=True)
    which.add_argument("--latest", action="store_true", help="the latest pushed model")
    which.add_argument("--model-version", help="a pushed model by its serving version (directory name)")
    which.add_argument("--artifact-id", type=int, help="a Model, PushedModel or ModelBlessing artifact id")
    which.add_argument("--uri", help="a model's URI, a pushed model's URI or its serving directory")
    lineage.add_argument("--format", choices=("text", "json", "dot"), default="text",
                         help="text: a readable tree; json: every field; dot: a Graphviz graph (default: text)")

    runs = commands.add_parser("runs", help="list pipeline runs: status, duration, accuracy, blessing, push")
    add_store_args(runs)
    runs.add_argument("--pipeline-name", help="only this pipeline's runs (default: all)")
    runs.add_argument("--limit", type=int, default=20, help="newest runs to show, 0 for all (default: 20)")
    runs.add_argument("--format", choices=("text", "json"), default="text")

    diff = commands.add_parser("diff", help="what differs between two models: hyperparameters, data, schema, metrics")
    add_store_args(diff)
    diff.add_argument("model_a", type=int, help="model artifact id (see `turbotfx runs`), or a serving version "
                                                "with --versions")
    diff.add_argument("model_b", type=int, help="the other model")
    diff.add_argument("--versions", action="store_true", help="A and B are serving versions, not artifact ids")
    diff.add_argument("--format", choices=("text", "json"), default="text")

    deploy_commands.add_parsers(commands)
    serving_commands.add_parser(commands)
    predict_command.add_parser(commands)

    schema = commands.add_parser("schema", help="schema tools")
    schema_commands = schema.add_subparsers(dest="schema_command", required=True, metavar="SUBCOMMAND")
    infer = schema_commands.add_parser("infer", help="write the inferred schema of CSV data for curation")
    infer.add_argument("--data-root", required=True, help="directory of CSV files")
    infer.add_argument("--dataset", default="penguins", choices=config_lib.DATASETS,
                       help="which dataset's columns the files hold (default: penguins)")
    infer.add_argument("--output", default="inferred_schema.pbtxt", help="schema file to write")
    infer.add_argument("-v", "--verbose", action="store_true", help="show TF and Beam logs")
    return parser


def add_pipeline_args(parser: argparse.ArgumentParser) -> None:
    """What the pipeline trains and how: shared by `run` and `compile`."""
    parser.add_argument("--pipeline-name", help="pipeline name in MLMD (default: turbotfx)")
    parser.add_argument("--rows", type=int, help="rows of the synthetic dataset (default: 100000)")
    parser.add_argument("--model-name", help="name of the model under the serving dir (default: the dataset's)")
    parser.add_argument("--split", type=_split, help="train:eval hash buckets (default: 4:1)")
    parser.add_argument("--epochs", type=int, help="training epochs (default: 20 penguins, 3 synthetic)")
    parser.add_argument("--batch-size", type=int,
                     help="training batch size per replica (default: 32 penguins, 256 synthetic)")
    parser.add_argument("--learning-rate", type=float,
                     help="Adam learning rate (default: 0.01 penguins, 0.002 synthetic)")
    parser.add_argument("--min-accuracy", type=float,
                     help="accuracy a model needs to be blessed (default: 0.6 penguins, 0.7 synthetic)")
    parser.add_argument("--max-accuracy-drop", type=float,
                     help="how far below the last blessed model's accuracy a model may be (default: 0.02)")
    parser.add_argument("--keep-versions", type=int,
                     help="pushed versions kept under the serving dir; stable/canary always are (default: 5)")
    parser.add_argument("--strategy", choices=hardware.STRATEGIES,
                     help="tf.distribute strategy for the Trainer (default: auto, from the devices)")
    parser.add_argument("--precision", choices=hardware.PRECISIONS,
                     help="Keras mixed-precision policy for training (default: auto)")
    parser.add_argument("--xla", choices=hardware.XLA_MODES,
                     help="XLA-compile the training step (default: auto: on for GPU/TPU)")
    parser.add_argument("--steps-per-execution", type=int,
                     help="training steps per tf.function call (default: 32)")
    parser.add_argument("--accumulation-steps", type=int,
                     help="micro-batches per optimizer step (gradient accumulation; default: 1)")
    parser.add_argument("--scale-learning-rate", action="store_true",
                     help="multiply the learning rate by the number of replicas (linear scaling)")
    parser.add_argument("--histogram-freq", type=int,
                     help="epochs between TensorBoard weight histograms, 0 for none (default: 5)")
    parser.add_argument("--profile-batches", help="TensorBoard-profile batches START,END, e.g. 2,4")


def add_workspace_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help=f"workspace directory (default: ${config_lib.HOME_ENV_VAR} or ./workspace)")
    parser.add_argument("--dataset", help=f"embedded dataset: {', '.join(config_lib.DATASETS)}")
    parser.add_argument("--data-root", help="directory of your own CSV files (same columns as the dataset)")


def add_store_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--home", help=f"workspace whose SQLite store to read (default: ${config_lib.HOME_ENV_VAR} "
                                       "or ./workspace)")
    parser.add_argument("--metadata-url", help="MLMD store URL instead (sqlite://, mysql://, postgresql://; "
                                               "password in $TURBOTFX_METADATA_PASSWORD)")


def _split(text: str) -> tuple[int, int]:
    try:
        return config_lib.parse_split(text)
    except ConfigError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def config_from_args(args: argparse.Namespace) -> PipelineConfig:
    split = getattr(args, "split", None) or (None, None)
    given = dict(
        home=getattr(args, "home", None) or config_lib.default_home(),
        dataset=args.dataset,
        rows=getattr(args, "rows", None),
        data_root=getattr(args, "data_root", None),
        pipeline_name=getattr(args, "pipeline_name", None),
        model_name=getattr(args, "model_name", None),
        train_buckets=split[0],
        eval_buckets=split[1],
        epochs=getattr(args, "epochs", None),
        batch_size=getattr(args, "batch_size", None),
        learning_rate=getattr(args, "learning_rate", None),
        min_accuracy=getattr(args, "min_accuracy", None),
        max_accuracy_drop=getattr(args, "max_accuracy_drop", None),
        keep_versions=getattr(args, "keep_versions", None),
        beam_mode=getattr(args, "beam_mode", None),
        metadata_url=getattr(args, "metadata_url", None),
        strategy=getattr(args, "strategy", None),
        precision=getattr(args, "precision", None),
        xla=getattr(args, "xla", None),
        steps_per_execution=getattr(args, "steps_per_execution", None),
        accumulation_steps=getattr(args, "accumulation_steps", None),
        scale_learning_rate=True if getattr(args, "scale_learning_rate", False) else None,
        tensorboard_histogram_freq=getattr(args, "histogram_freq", None),
        profile_batches=getattr(args, "profile_batches", None),
        enable_cache=False if getattr(args, "no_cache", False) else None,
    )
    # Built in one go: fields left unset take the chosen dataset's defaults.
    return PipelineConfig(**{field: value for field, value in given.items() if value is not None})


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            from pipeline.run_command import run_pipeline

            return run_pipeline(config_from_args(args), verbose=args.verbose)
        if args.command in ("lineage", "runs", "diff"):
            # MLMD's C++ client logs each connection to stderr; the answer (and any error,
            # with its cause) is ours to print. Read when MLMD's library loads, just below.
            os.environ.setdefault("GLOG_minloglevel", "3")
            from pipeline import provenance_commands

            return provenance_commands.run(args)
        if args.command in ("compile", "submit"):
            return deploy_commands.run(args)
        if args.command == "serving":
            return serving_commands.run(args)
        if args.command == "predict":
            return predict_command.run(args)
        if args.command == "schema":
            return _infer_schema(Path(args.data_root), Path(args.output), args.dataset, args.verbose)
    except (ConfigError, CliError) as err:
        print(f"turbotfx: error: {err}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


def _infer_schema(data_root: Path, output: Path, dataset: str, verbose: bool) -> int:
    from pipeline import console
    from pipeline.schema_tools import infer_schema

    log_path = PipelineConfig(home=config_lib.default_home()).log_path
    with console.session(log_path, verbose) as out:
        path = infer_schema(data_root, output, dataset)
        out.line(f"inferred schema written to {path}; compare it with the curated one and curate it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
