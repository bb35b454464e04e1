"""`turbotfx run`: prepare the data, run the pipeline quietly, print one summary."""

from __future__ import annotations

import sys
import time

from pipeline import console as console_lib
from pipeline import data, metadata
from pipeline.config import PipelineConfig, ensure_writable_home


def run_pipeline(config: PipelineConfig, verbose: bool = False) -> int:
    """Runs everything; returns the process exit code (0 only when the run completed)."""
    ensure_writable_home(config)
    store_url = config.metadata_url or metadata.sqlite_url(config.metadata_path)
    with metadata.exclusive_run(store_url):
        if config.metadata_url:
            # Fail before any work when the store cannot be reached, naming the URL.
            metadata.open_store(config.metadata_url)
        return _run(config, verbose)


def _run(config: PipelineConfig, verbose: bool) -> int:
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
        summary = _latest_summary(config, local.metadata_config(config))
        if summary:
            console.line(summary.format())
        console.line(f"wall time {time.perf_counter() - started:.1f}s")
        if failure is not None:
            failed = _failed_component(summary) or console.current or "a component"
            console.line("")
            console.line(f"turbotfx: error: {failed} failed: {_cause(failure)}")
            console.line(f"  details: {config.log_path}")
            return 1
    if summary and summary.blessed is False:
        print(
            "turbotfx: the model was not blessed, so nothing was pushed; see the evaluation "
            "above (thresholds: --min-accuracy, --max-accuracy-drop)",
            file=sys.stderr,
        )
    return 0


def _latest_summary(config: PipelineConfig, connection_config):
    from ml_metadata.metadata_store import metadata_store

    from pipeline import run_summary

    store = metadata_store.MetadataStore(connection_config)
    return run_summary.latest_run(store, config.pipeline_name)


def _failed_component(summary) -> str | None:
    if summary:
        for component in summary.components:
            if component.state == "FAILED":
                return component.node_id
    return None


def _cause(error: BaseException) -> str:
    """The innermost exception's message: TFX wraps executor errors in its own."""
    while error.__cause__ is not None:
        error = error.__cause__
    text = str(error).strip()
    return text or type(error).__name__
