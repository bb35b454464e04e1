"""`turbotfx run`: prepare the data, run the pipeline quietly, print one summary."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import signal
import sys
import time
from typing import TYPE_CHECKING, Iterator

from pipeline import config as config_lib
from pipeline.cli import args as cli_args
from pipeline.config import PipelineConfig
from pipeline.errors import Interrupted, innermost_cause
from pipeline.runners.cluster import LOCAL_RUNNERS

if TYPE_CHECKING:
    from pipeline.provenance.summary import RunSummary
    from pipeline.runners.beam_args import BeamOptions

# The run completed but pushed nothing: the Evaluator did not bless the model, or the serving
# check failed it (errors exit 1, bad input 2): a script can tell "no new model" from "broken".
NOT_BLESSED_EXIT = 3


def add_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run the whole pipeline (default: penguins in ./workspace)")
    cli_args.add_workspace_args(run)
    cli_args.add_pipeline_args(run)
    run.add_argument("--beam-mode", choices=config_lib.BEAM_MODES,
                     help="Beam DirectRunner mode (default: auto, by data size)")
    beam = run.add_argument_group("Beam on a cluster (ExampleGen, StatisticsGen, Transform, Evaluator)")
    cli_args.add_beam_runner_args(beam, LOCAL_RUNNERS, "where the Beam components run "
                                                       "(default: direct, here, in the --beam-mode)")
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
    return run_pipeline(cli_args.config_from_args(args), verbose=args.verbose,
                        beam=cli_args.beam_options_from_args(args), json_output=args.json,
                        allow_unblessed=args.allow_unblessed)


def run_pipeline(config: PipelineConfig, verbose: bool = False, beam: BeamOptions | None = None,
                 json_output: bool = False, allow_unblessed: bool = False) -> int:
    """Runs everything; returns the process exit code: 0 when the run completed (and blessed
    its model, unless allow_unblessed), NOT_BLESSED_EXIT when it completed without blessing."""
    from pipeline.store import backup, connection

    config_lib.ensure_writable_home(config)
    if beam is not None and beam.runner != "direct":
        from pipeline.runners import cluster

        cluster.pipeline_args(beam)  # a cluster that does not answer stops the run before it starts
    with connection.exclusive_run(config.metadata_store_url):
        # Fail before any work when the store cannot be reached or its SQLite file is damaged.
        connection.check_store(config.metadata_store_url)
        code = _run(config, verbose, beam, json_output)
        if code in (0, NOT_BLESSED_EXIT):  # a SQLite store's copy to restore should it be damaged later
            try:
                backup.keep_last_good_copy(config.metadata_store_url)
            except backup.LastGoodCopyError as err:  # the run itself completed
                print(f"turbotfx: warning: {err}", file=sys.stderr)
        return 0 if code == NOT_BLESSED_EXIT and allow_unblessed else code


def _run(config: PipelineConfig, verbose: bool, beam: BeamOptions | None, json_output: bool = False) -> int:
    from pipeline.cli import console as console_lib
    from pipeline.datasets import prepare
    from pipeline.provenance import run_state

    data_root = prepare.prepare_data(config.spec, config.data_path, config.rows, generate=not config.data_root)
    store, recovered = _recover(config)
    # Chosen here, not by TFX, to mark the run if it is interrupted; TFX's form, the local start time.
    run_id = datetime.datetime.now().isoformat()
    started = time.perf_counter()
    with console_lib.session(config.log_path, verbose, user_fd=2 if json_output else 1) as console:
        # Imported inside the session: TF, Beam and Google client libraries warn on import.
        from pipeline.runners import local

        console.line(f"turbotfx: pipeline {config.pipeline_name!r} on {data_root}")
        console.line(f"  workspace {config.home_path}  (logs: {config.log_path})")
        for line in recovered:
            console.line(f"  recovered: {line}")
        if config.enable_cache and not local.cache_enabled(config):
            console.line("  cache: off on a PostgreSQL store (MLMD 1.16 loses cached outputs there "
                         "intermittently); use MySQL or SQLite for cached reruns")
        failure = None
        try:
            with _terminate_as_interrupt():
                run_state.begin(store, config.pipeline_name, run_id, config.model_name)
                described = local.run(config, data_root, run_id, beam)
            console.line(f"  beam: {described}")
        except KeyboardInterrupt:
            console.abort_line()
            run_state.abort_unfinished(store, run_id)
            raise Interrupted(f"interrupted: run {run_id} is marked ABORTED; run the same command again "
                              "to resume (completed components are cached)") from None
        except Exception as err:  # any component failure: reported below with its cause
            console.abort_line()
            failure = err
        run_state.finish(store, run_id)
        summary = _latest_summary(config)
        if summary and not json_output:
            console.line(summary.format())
        wall_s = time.perf_counter() - started
        console.line(f"wall time {wall_s:.1f}s")
        error = None
        if failure is not None:
            failed = summary.failed_component() if summary else None
            error = f"{failed or console.current or 'a component'} failed: {_cause(failure)}"
            console.line("")
            console.line(f"turbotfx: error: {error}")
            console.line(f"  details: {config.log_path}")
    if json_output:
        _print_json(summary, wall_s, error)
    if error is not None:
        return 1
    withheld = _why_nothing_was_pushed(summary) if summary else None
    if withheld:
        print(f"turbotfx: {withheld}, so nothing was pushed (exit {NOT_BLESSED_EXIT}; --allow-unblessed exits 0)",
              file=sys.stderr)
        return NOT_BLESSED_EXIT
    return 0


def _why_nothing_was_pushed(summary: RunSummary) -> str | None:
    """Why a completed run pushed no model: not blessed (each bound broken), or the serving
    check failed; None when it pushed."""
    if summary.blessed is False:
        reasons = summary.verdict.reasons(summary.blessing_value)
        return f"not blessed: {'; '.join(reasons) or 'see the evaluation'}"
    if summary.serving_check and not summary.serving_check["passed"]:
        return "the serving check failed: " + "; ".join(summary.serving_check["problems"] or ["see the log"])
    return None


def _print_json(summary: RunSummary | None, wall_s: float, error: str | None) -> None:
    import json

    from pipeline.provenance.summary import finite_or_none

    document = summary.as_json() if summary else {}
    document.update({"wall_s": round(wall_s, 1), "error": error})
    print(json.dumps(finite_or_none(document), indent=2, allow_nan=False))


def _recover(config: PipelineConfig):
    """Before the run: runs a kill left unfinished are marked aborted, and the serving
    directory is brought into agreement with the push records (serving/reconcile.py).
    Returns the store and a line per thing put right."""
    from pipeline import serving_state
    from pipeline.provenance import run_state
    from pipeline.store import connection
    from pipeline.store.url import parse_url

    store = connection.open_store(config.metadata_store_url)
    # Under exclusive_run no other run can be writing a SQLite store: unfinished is dead.
    single_writer = parse_url(config.metadata_store_url).scheme == "sqlite"
    lines = []
    if single_writer:
        lines += [f"run {run} ended without completing: marked ABORTED" for run in run_state.abort_unfinished(store)]
    lines += serving_state.reconcile_serving(config, store, live_runs_possible=not single_writer).messages()
    return store, lines


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (a CI runner, `kill`) ends the run the way Ctrl-C does: marked, resumable."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _latest_summary(config: PipelineConfig):
    from pipeline.provenance import summary
    from pipeline.store import connection

    store = connection.open_store(config.metadata_store_url)
    return summary.latest_run(store, config.pipeline_name)


def _cause(error: BaseException) -> str:
    """The innermost exception's message: TFX wraps executor errors in its own."""
    error = innermost_cause(error)
    missing = _project_module_missing(str(error))
    if missing:
        return (f"the Beam workers cannot import {missing!r} (a turbotfx package): install turbotfx where "
                "the workers run (pip install, or the pipeline's image) and restart the worker pool")
    if _out_of_space(error):
        return ("no space left on the device holding the workspace or the serving directory; free space "
                "(or use --home on a larger disk) and run again: completed components are cached")
    return str(error).strip() or type(error).__name__


def _project_module_missing(message: str) -> str | None:
    """The turbotfx package a Beam worker failed to import, as a remote runner reports it."""
    import re

    found = re.search(r"No module named '((?:pipeline|components|trainer_module|serving)(?:\.\w+)*)'", message)
    return found.group(1) if found else None


def _out_of_space(error: BaseException) -> bool:
    """ENOSPC as Python raises it, or as TF's file system reports it in a message."""
    return getattr(error, "errno", None) == errno.ENOSPC or "No space left on device" in str(error)
