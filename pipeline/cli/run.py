"""`turbotfx run`: prepare the data, run the pipeline quietly, print one summary."""

from __future__ import annotations

import argparse
import sys
import time

from pipeline import config as config_lib
from pipeline.cli import args as cli_args
from pipeline.config import PipelineConfig
from pipeline.errors import innermost_cause


def add_parser(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run the whole pipeline (default: penguins in ./workspace)")
    cli_args.add_workspace_args(run)
    cli_args.add_pipeline_args(run)
    run.add_argument("--beam-mode", choices=config_lib.BEAM_MODES,
                     help="Beam DirectRunner mode (default: auto, by data size)")
    cli_args.add_metadata_url(
        run, "MLMD store: sqlite:///PATH, mysql://USER@HOST[:PORT]/DB or postgresql://USER@HOST[:PORT]/DB; "
             "password in $TURBOTFX_METADATA_PASSWORD (default: SQLite in the workspace)")
    cli_args.add_no_cache(run, "re-execute every component")
    cli_args.add_verbose(run, "show TF, Beam and TFX logs")
    run.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    return run_pipeline(cli_args.config_from_args(args), verbose=args.verbose)


def run_pipeline(config: PipelineConfig, verbose: bool = False) -> int:
    """Runs everything; returns the process exit code (0 only when the run completed)."""
    from pipeline.store import connection

    config_lib.ensure_writable_home(config)
    with connection.exclusive_run(config.metadata_store_url):
        if config.metadata_url:
            # Fail before any work when the store cannot be reached, naming the URL.
            connection.open_store(config.metadata_url)
        return _run(config, verbose)


def _run(config: PipelineConfig, verbose: bool) -> int:
    from pipeline import data
    from pipeline.cli import console as console_lib

    data_root = data.prepare_data(config)
    started = time.perf_counter()
    with console_lib.session(config.log_path, verbose) as console:
        # Imported inside the session: TF, Beam and Google client libraries warn on import.
        from pipeline.runners import local

        console.line(f"turbotfx: pipeline {config.pipeline_name!r} on {data_root}")
        console.line(f"  workspace {config.home_path}  (logs: {config.log_path})")
        if config.enable_cache and not local.cache_enabled(config):
            console.line("  cache: off on a PostgreSQL store (MLMD 1.16 loses cached outputs there "
                         "intermittently); use MySQL or SQLite for cached reruns")
        failure = None
        try:
            mode = local.run(config, data_root)
            console.line(f"  beam: {mode} DirectRunner")
        except Exception as err:  # any component failure: reported below with its cause
            console.abort_line()
            failure = err
        summary = _latest_summary(config)
        if summary:
            console.line(summary.format())
        console.line(f"wall time {time.perf_counter() - started:.1f}s")
        if failure is not None:
            failed = summary.failed_component() if summary else None
            console.line("")
            console.line(f"turbotfx: error: {failed or console.current or 'a component'} failed: "
                         f"{_cause(failure)}")
            console.line(f"  details: {config.log_path}")
            return 1
    if summary and summary.blessed is False:
        print(
            "turbotfx: the model was not blessed, so nothing was pushed; see the evaluation "
            "above (thresholds: --min-accuracy, --max-accuracy-drop)",
            file=sys.stderr,
        )
    return 0


def _latest_summary(config: PipelineConfig):
    from pipeline.provenance import summary
    from pipeline.store import connection

    store = connection.open_store(config.metadata_store_url)
    return summary.latest_run(store, config.pipeline_name)


def _cause(error: BaseException) -> str:
    """The innermost exception's message: TFX wraps executor errors in its own."""
    error = innermost_cause(error)
    return str(error).strip() or type(error).__name__
