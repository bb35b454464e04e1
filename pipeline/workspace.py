"""A workspace's life as library calls that never print: the store held and checked, runs a
kill left unfinished marked ABORTED, the serving directory reconciled with the push records
(the rules are in serving/reconcile.py), and one pipeline run from start to end.

`run` hands each line meant for the user to a `report` callback and returns a RunOutcome;
the CLI (`turbotfx run`) turns that into text and an exit code, and a run report or a tuner
can call it the same way. Routing library logs (the CLI's quiet console) is the caller's:
`run` enters the caller's `session` around the pipeline's execution.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import logging
import re
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ContextManager, Iterator, Protocol

from pipeline import config as config_lib
from pipeline import private
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError, Interrupted, innermost_cause
from pipeline.store.url import MetadataUrl, parse_url, sqlite_url

if TYPE_CHECKING:
    from ml_metadata.metadata_store import metadata_store

    from pipeline.provenance import pushes
    from pipeline.provenance.summary import RunSummary
    from pipeline.runners.beam_args import BeamOptions
    from serving import reconcile

Report = Callable[[str], None]


class Progress(Protocol):
    """What shows the run while its pipeline executes (the CLI's console)."""

    current: str | None  # the component running now: named when the run fails without a record of it

    def abort_line(self) -> None:
        """Ends a half-written progress line before a failure is reported."""


class _Unshown:
    current: str | None = None

    def abort_line(self) -> None:
        pass


def _unshown() -> ContextManager[Progress]:
    return contextlib.nullcontext(_Unshown())


def _ignore(line: str) -> None:
    pass


# RunOutcome.kind: a component failed; the run completed but pushed no model (not blessed,
# or the serving check failed it); the run completed and pushed.
FAILED, NOT_PUSHED, COMPLETED = "failed", "not pushed", "completed"


@dataclasses.dataclass(frozen=True)
class RunOutcome:
    """How one pipeline run ended (an interrupted one raises Interrupted instead)."""

    run_id: str  # the run's context in MLMD (TFX's form: the local start time)
    pipeline_name: str
    summary: RunSummary | None  # None when the store recorded nothing of the run
    wall_s: float
    error: str | None = None  # "<component> failed: <cause>" when a component failed
    withheld: str | None = None  # why a completed run pushed nothing
    warnings: tuple[str, ...] = ()  # the run completed, but something after it did not
    report_path: Path | None = None  # the run's report page

    @property
    def kind(self) -> str:
        if self.error is not None:
            return FAILED
        return NOT_PUSHED if self.withheld else COMPLETED

    @property
    def pushed(self) -> bool:
        return self.summary is not None and self.summary.pushed_version is not None


def run(config: PipelineConfig, beam: BeamOptions | None = None, report: Report = _ignore, *,
        session: Callable[[], ContextManager[Progress]] = _unshown, text_summary: bool = True) -> RunOutcome:
    """Prepares the data and runs the pipeline once, holding the store for the run.

    report gets every line for the user, in order; text_summary=False leaves out the
    summary's text (a caller that renders outcome.summary itself). Bad input raises
    ConfigError before any work; Ctrl-C or SIGTERM raises Interrupted with the run marked
    ABORTED (rerun to resume: completed components are cached). What it writes is its
    owner's alone (pipeline.private)."""
    with private.owner_only():
        return _held_run(config, beam, report, session, text_summary)


def _held_run(config: PipelineConfig, beam: BeamOptions | None, report: Report,
              session: Callable[[], ContextManager[Progress]], text_summary: bool) -> RunOutcome:
    from pipeline.store import backup, connection

    config_lib.ensure_writable_home(config)
    if beam is not None and beam.runner != "direct":
        from pipeline.runners import cluster

        cluster.pipeline_args(beam)  # a cluster that does not answer stops the run before it starts
    url = parse_url(config.metadata_store_url)
    with connection.exclusive_run(url):
        # Fail before any work when the store cannot be reached or its SQLite file is damaged.
        connection.check_store(url)
        if config.tuning.storage and config.tuning.tunes:  # the study's, likewise
            from pipeline.store import study
            from trainer_module.search_space import study_owner

            study.check_storage(config.tuning.storage, config.tuning.study,
                                study_owner(config.serving_dir.name, config.spec.feature_contract()))
        outcome = _run(config, url, beam, report, session, text_summary)
        if outcome.error is None:  # a SQLite store's copy to restore should it be damaged later
            try:
                backup.keep_last_good_copy(url)
            except backup.LastGoodCopyError as err:  # the run itself completed
                outcome = dataclasses.replace(outcome, warnings=(*outcome.warnings, str(err)))
        return outcome


def prepare_input(config: PipelineConfig) -> Path:
    """The run's input directory: a built-in dataset written into the workspace (generated
    once), or the user's files checked against the dataset file."""
    from pipeline.datasets import prepare

    return prepare.prepare_data(config.spec, config.data_path, config.rows, generate=not config.data_root)


def _run(config: PipelineConfig, url: MetadataUrl, beam: BeamOptions | None, report: Report,
         session: Callable[[], ContextManager[Progress]], text_summary: bool) -> RunOutcome:
    from pipeline.provenance import run_state, summary
    from pipeline.store import connection

    data_root = prepare_input(config)
    store, recovered = recover(config, url)
    # Chosen here, not by TFX, to mark the run if it is interrupted; TFX's form, the local start time.
    run_id = datetime.datetime.now().isoformat()
    started = time.perf_counter()
    with session() as progress:
        # Imported inside the session: TF, Beam and Google client libraries warn on import.
        from pipeline.runners import local

        report(f"turbotfx: pipeline {config.pipeline_name!r} on {data_root}")
        report(f"  workspace {config.home_path}  (logs: {config.log_path})")
        for line in recovered:
            report(f"  recovered: {line}")
        if config.enable_cache and not local.cache_enabled(config):
            report("  cache: off on a PostgreSQL store (MLMD 1.16 loses cached outputs there "
                   "intermittently); use MySQL or SQLite for cached reruns")
        failure = None
        try:
            with _terminate_as_interrupt():
                run_state.begin(store, config.pipeline_name, run_id, config.model_name)
                described = local.run(config, data_root, run_id, beam)
            report(f"  beam: {described}")
        except KeyboardInterrupt:
            progress.abort_line()
            run_state.abort_unfinished(store, run_id)
            raise Interrupted(_interrupted_line(run_id)) from None
        except Exception as err:  # any component failure: reported below with its cause
            progress.abort_line()
            if _caused_by_interrupt(err):
                # Ctrl-C inside Beam (the Evaluator, Transform) comes back wrapped, and TFX has
                # recorded the component as FAILED: it was stopped, not broken.
                run_state.abort_unfinished(store, run_id, failed_too=True)
                raise Interrupted(_interrupted_line(run_id)) from None
            # The console has one line; the log, which it points to, has the whole story.
            logging.getLogger(__name__).error("the run failed", exc_info=err)
            failure = err
        unrecorded = _record_end(store, run_id)
        if unrecorded is not None:
            # MLMD leaves a connection whose write failed inside its transaction ("Transaction
            # already open" on every later call); reading goes on through a fresh one.
            store = connection.open_store(url)
        if failure is not None:
            # A push whose record never reached the store (a full disk at the MLMD write) must
            # not serve until the next command: the serving directory is put right now.
            for line in _put_serving_right(config, store, url):
                report(f"  serving: {line}")
        # The store opened before the run reads what TFX recorded meanwhile: MLMD commits each call.
        found = summary.latest_run(store, config.pipeline_name)
        if found and text_summary:
            report(found.format())
        page, page_warning = _write_report(store, config, found.run_id) if found else (None, None)
        if page is not None:
            report(f"report: {page}")
        wall_s = time.perf_counter() - started
        report(f"wall time {wall_s:.1f}s")
        error = None
        if failure is not None:
            failed = found.failed_component() if found else None
            error = f"{failed or progress.current or 'a component'} failed: {cause(failure)}"
        elif unrecorded is not None:
            error = f"the metadata store could not record the run's end: {unrecorded}"
        if error is not None:
            report("")
            report(f"turbotfx: error: {error}")
            report(f"  details: {config.log_path}")
    withheld = why_nothing_was_pushed(found) if found and error is None else None
    return RunOutcome(run_id=run_id, pipeline_name=config.pipeline_name, summary=found, wall_s=wall_s,
                      error=error, withheld=withheld, report_path=page,
                      warnings=(page_warning,) if page_warning else ())


def _record_end(store, run_id: str) -> str | None:
    """Marks the run finished; why not, when the store refuses the write (a full disk)."""
    from pipeline.provenance import run_state

    try:
        run_state.finish(store, run_id)
        return None
    except Exception as err:  # noqa: BLE001 (any store error: named in the run's last line)
        logging.getLogger(__name__).exception("recording the run's end failed")
        return cause(err)


def _put_serving_right(config: PipelineConfig, store, url: MetadataUrl) -> list[str]:
    """After a failed run: the serving directory reconciled with the push records, as the next
    command would (serving/reconcile.py); a line for each thing done, or why it could not be."""
    try:
        return reconcile_serving(config, store, live_runs_possible=url.scheme != "sqlite").messages()
    except Exception as err:  # noqa: BLE001 (the run already failed; the next command retries)
        logging.getLogger(__name__).exception("reconciling serving after the failed run failed")
        return [f"not checked against the store ({cause(err)}); the next turbotfx command does it"]


def _write_report(store, config: PipelineConfig, run_id: str) -> tuple[Path | None, str | None]:
    """The run's report page (pipeline/report), and why not when it could not be written:
    the run itself is done by then, so a report that fails is a warning, not a failed run."""
    from pipeline.provenance.graph import RUN_CONTEXT
    from pipeline.report import write

    target = write.report_path(config.reports_dir, run_id)
    try:
        run = store.get_context_by_type_and_name(RUN_CONTEXT, run_id)
        return write.write_report(store, run, target, config.serving_dir.parent), None
    except Exception as err:  # noqa: BLE001 (any cause: it is named in the warning and logged)
        logging.getLogger(__name__).exception("the run report failed")
        return None, f"the run's report could not be written to {target}: {cause(err)}"


def why_nothing_was_pushed(summary: RunSummary) -> str | None:
    """Why a completed run pushed no model: not blessed (each bound broken), or the serving
    check failed; None when it pushed."""
    if summary.blessed is False:
        reasons = summary.verdict.reasons(summary.blessing_value)
        return f"not blessed: {'; '.join(reasons) or 'see the evaluation'}"
    if summary.serving_check and not summary.serving_check["passed"]:
        return "the serving check failed: " + "; ".join(summary.serving_check["problems"] or ["see the log"])
    return None


def cause(error: BaseException) -> str:
    """What went wrong, in the line the user reads: the innermost exception's message (TFX
    wraps executor errors in its own), or what to do about a cause we recognise."""
    error = innermost_cause(error)
    missing = _project_module_missing(str(error))
    if missing:
        return (f"the Beam workers cannot import {missing!r} (a turbotfx package): install turbotfx where "
                "the workers run (pip install, or the pipeline's image) and restart the worker pool")
    if _store_out_of_space(error):
        return ("no space left on the device holding the metadata store; free space there and run again: "
                "completed components are cached")
    if _out_of_space(error):
        return ("no space left on the device holding the workspace or the serving directory; free space "
                "(or use --home on a larger disk) and run again: completed components are cached")
    return str(error).strip() or type(error).__name__


def _project_module_missing(message: str) -> str | None:
    """The turbotfx package a Beam worker failed to import, as a remote runner reports it."""
    found = re.search(r"No module named '((?:pipeline|components|trainer_module|serving)(?:\.\w+)*)'", message)
    return found.group(1) if found else None


def _out_of_space(error: BaseException) -> bool:
    """ENOSPC as Python raises it, or as TF's file system reports it in a message."""
    return getattr(error, "errno", None) == errno.ENOSPC or "No space left on device" in str(error)


def _store_out_of_space(error: BaseException) -> bool:
    """SQLite's SQLITE_FULL, as MLMD reports a store's write that found no room."""
    return "database or disk is full" in str(error)


def _interrupted_line(run_id: str) -> str:
    return (f"interrupted: run {run_id} is marked ABORTED; run the same command again to resume "
            "(completed components are cached)")


def _caused_by_interrupt(error: BaseException) -> bool:
    """Whether a KeyboardInterrupt (Ctrl-C, or SIGTERM as one) is in the error's chain."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        pending += [current.__cause__, current.__context__]
    return False


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


# --- the store and the serving directory before a run ----------------------------------

def recover(config: PipelineConfig, url: MetadataUrl) -> tuple[metadata_store.MetadataStore, list[str]]:
    """Opens the store a run writes (url: config's, parsed); runs a kill left unfinished are
    marked ABORTED, and the serving directory is brought into agreement with the push
    records. Call it holding the store (exclusive_run). Returns the store and a line per
    thing put right."""
    from pipeline.provenance import run_state
    from pipeline.store import connection

    store = connection.open_store(url)
    # Under exclusive_run no other run can be writing a SQLite store: unfinished is dead.
    single_writer = url.scheme == "sqlite"
    lines = []
    if single_writer:
        lines += [f"run {run} ended without completing: marked ABORTED" for run in run_state.abort_unfinished(store)]
        # Only where no other run can be writing: a live run's new folders are not leftovers.
        lines += _set_aside_leftover_artifacts(config, store)
    lines += reconcile_serving(config, store, live_runs_possible=not single_writer).messages()
    return store, lines


def _set_aside_leftover_artifacts(config: PipelineConfig, store: metadata_store.MetadataStore) -> list[str]:
    from ml_metadata.metadata_store import metadata_store as mlmd

    from pipeline.runners import leftovers

    newest = store.get_executions(list_options=mlmd.ListOptions(limit=1, order_by=mlmd.OrderByField.ID,
                                                                 is_asc=False))
    count, where = leftovers.set_aside_unknown(config.pipeline_root, newest[0].id if newest else 0)
    if not count:
        return []
    return [f"set aside {count} artifact folders of executions this metadata store does not know (a new "
            f"store, or a copy restored): moved to {where}"]


def reconcile_serving(config: PipelineConfig, store: metadata_store.MetadataStore,
                      live_runs_possible: bool) -> reconcile.Reconciliation:
    """live_runs_possible: another run may be pushing now, so its version is left alone."""
    from serving import model_config
    from serving import reconcile as reconcile_lib

    serving_root = config.serving_dir.parent
    # Under the serving lock: a push cannot start its copy between the read of the records
    # and the look at the directory.
    with model_config.changing(serving_root):
        history, damaged = recorded_pushes(config, store, live_runs_possible)
        # A store that cannot be read may hold the very push that made a version: none is
        # set aside on the word of the others.
        incomplete = (f"the store {damaged[0]} could not be read, so its pushes are not known"
                      if damaged else None)
        return reconcile_lib.reconcile(serving_root, config.serving_dir.name, history.versions,
                                       history.labels, history.in_flight_since, history.records_since,
                                       records_incomplete=incomplete)


def recorded_pushes(config: PipelineConfig, store: metadata_store.MetadataStore,
                    live_runs_possible: bool) -> tuple[pushes.PushHistory, list[str]]:
    """The push records of config's model in its store and the workspace's other stores,
    and the stores that could not be read."""
    from pipeline.provenance import pushes as pushes_lib
    from pipeline.store import connection

    model_name = config.serving_dir.name  # config.model_name, filled in by PipelineConfig
    history = pushes_lib.push_history(store, model_name, live_runs_possible)
    damaged: list[str] = []
    for url, other in _other_workspace_stores(config, damaged):
        history = history.merge(pushes_lib.push_history(other, model_name, connection.run_may_be_live(url)))
    return history, damaged


def dataset_of_model(config: PipelineConfig, model_name: str) -> tuple[str | None, list[str]]:
    """The dataset file the model's newest push was trained from (its Trainer recorded the
    path), over every store of the workspace (None when no push of it is recorded), and why
    each store that could not be read was skipped."""
    from pipeline.provenance import lineage
    from pipeline.store import connection

    newest, dataset, skipped = -1, None, []
    for path in config.workspace_store_paths:
        try:
            store = connection.open_store(sqlite_url(path), create=False)
        except ConfigError as err:  # damaged: the caller names it
            skipped.append(str(err))
            continue
        found = lineage.dataset_file_of_latest_push(store, model_name)
        if found is not None and found[0] > newest:
            newest, dataset = found
    return dataset, skipped


def _other_workspace_stores(config: PipelineConfig,
                            damaged: list[str]) -> Iterator[tuple[str, metadata_store.MetadataStore]]:
    """The workspace's other SQLite stores: each --pipeline-name keeps its own
    (metadata/<name>.sqlite) and pushes into the same serving directory. The path of each
    that cannot be opened is appended to damaged."""
    from pipeline.store import connection

    current = parse_url(config.metadata_store_url)
    current_path = Path(current.path).resolve() if current.scheme == "sqlite" else None
    for path in config.workspace_store_paths:
        if path.resolve() == current_path:
            continue
        url = sqlite_url(path)
        try:
            yield url, connection.open_store(url, create=False)
        except ConfigError:  # damaged: its own commands say so; the caller is told
            damaged.append(str(path))
