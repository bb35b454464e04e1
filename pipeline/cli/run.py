"""`turbotfx run`: flags in, one pipeline run (pipeline/workspace.py) with library logs in
the log file, the run's lines and summary out, and an exit code that tells what happened."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from pipeline.cli import args as cli_args
from pipeline.cli import console as console_lib
from pipeline.errors import ConfigError
from pipeline.runners.cluster import LOCAL_RUNNERS

if TYPE_CHECKING:
    from pipeline.workspace import RunOutcome

# The run completed but pushed nothing: the Evaluator did not bless the model, or the serving
# check failed it (errors exit 1, bad input 2): a script can tell "no new model" from "broken".
NOT_BLESSED_EXIT = 3


def add_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run the whole pipeline (default: penguins in ./workspace)")
    cli_args.add_workspace_args(run)
    cli_args.add_pipeline_args(run)
    cli_args.add_beam_mode(run)
    beam = run.add_argument_group("Beam on a cluster (ExampleGen, StatisticsGen, Transform, Evaluator)")
    cli_args.add_beam_runner_args(beam, LOCAL_RUNNERS, "where the Beam components run "
                                                       "(default: direct, here, in the --beam-mode)")
    beam.add_argument("--spark-driver-host", metavar="ADDRESS",
                      help="Spark: the address of this machine that the driver and its UI listen on, which "
                           "the executors connect back to (default: loopback, for a master on this machine)")
    cli_args.add_metadata_url(
        run, "MLMD store: sqlite:///PATH, mysql://USER@HOST[:PORT]/DB or postgresql://USER@HOST[:PORT]/DB; "
             "password in $TURBOTFX_METADATA_PASSWORD (default: SQLite in the workspace)")
    cli_args.add_no_cache(run, "re-execute every component")
    cli_args.add_verbose(run, "show TF, Beam and TFX logs")
    run.add_argument("--json", action="store_true",
                     help="print the run's summary as one JSON document on stdout (progress goes to stderr)")
    run.add_argument("--allow-unblessed", action="store_true",
                     help="exit 0 when the model is not blessed or fails the serving check "
                          f"(default: exit {NOT_BLESSED_EXIT})")
    run.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    """Runs everything; the exit code: 0 when the run completed (and pushed its model, unless
    --allow-unblessed), NOT_BLESSED_EXIT when it completed without pushing, 1 when a
    component failed (2: bad input, 130: interrupted, from the errors raised)."""
    from pipeline import workspace

    try:
        config = cli_args.config_from_args(args)
        terminal = _Terminal(config.log_path, args.verbose, user_fd=2 if args.json else 1)
        outcome = workspace.run(config, cli_args.beam_options_from_args(args), terminal.line,
                                session=terminal.session, text_summary=not args.json)
    except ConfigError as err:
        if args.json:  # a reader of stdout gets a document whatever happened; the line goes to stderr too
            _print_json_error(str(err), cli_args.BAD_INPUT_EXIT)
        raise
    if args.json:
        _print_json(outcome)
    code = 0
    if outcome.kind == workspace.FAILED:
        code = 1
    elif outcome.kind == workspace.NOT_PUSHED:
        print(f"turbotfx: {outcome.withheld}, so nothing was pushed (exit {NOT_BLESSED_EXIT}; "
              "--allow-unblessed exits 0)", file=sys.stderr)
        code = 0 if args.allow_unblessed else NOT_BLESSED_EXIT
    for warning in outcome.warnings:
        print(f"turbotfx: warning: {warning}", file=sys.stderr)
    return code


class _Terminal:
    """The run's lines on the user's terminal (stderr where stdout carries the JSON document),
    written by the quiet console of the session the run opens around its pipeline."""

    def __init__(self, log_path: Path, verbose: bool, user_fd: int) -> None:
        self._log_path, self._verbose, self._user_fd = log_path, verbose, user_fd
        self._console: console_lib.Console | None = None

    @contextlib.contextmanager
    def session(self) -> Iterator[console_lib.Console]:
        with console_lib.session(self._log_path, self._verbose, self._user_fd) as self._console:
            yield self._console

    def line(self, text: str) -> None:
        assert self._console is not None, "the run reports its lines inside its session"
        self._console.line(text)


def _print_json_error(message: str, exit_code: int) -> None:
    import json

    print(json.dumps({"error": message, "exit_code": exit_code, "run_id": None}, indent=2))


def _print_json(outcome: RunOutcome) -> None:
    import json

    from pipeline.provenance.summary import finite_or_none

    document = outcome.summary.as_json() if outcome.summary else {}
    document.update({"wall_s": round(outcome.wall_s, 1), "error": outcome.error,
                     "report": str(outcome.report_path) if outcome.report_path else None})
    print(json.dumps(finite_or_none(document), indent=2, allow_nan=False))
