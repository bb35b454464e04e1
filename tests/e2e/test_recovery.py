"""Runs and pushes that end badly: a kill, Ctrl-C, a full disk, a lost or damaged
models.config, a version nothing recorded. The state after is either complete or shows
what happened, and the next command puts it right (README, "Recovery")."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from pipeline.config import PipelineConfig
from pipeline.store.url import sqlite_url
from serving import model_config, publish, push
from tests.conftest import FAST_RUN_ARGS, cli, loader_processes, turbotfx

pytestmark = pytest.mark.e2e


def _start_run(home: Path, *args: str) -> subprocess.Popen:
    # SIGINT at its default in the run, as in a terminal: a suite started in the background by
    # a shell without job control inherits it ignored, and Python then never raises
    # KeyboardInterrupt (the runs below would ignore their Ctrl-C and complete).
    return subprocess.Popen([sys.executable, "-m", "pipeline.cli", "run", *FAST_RUN_ARGS, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "TURBOTFX_HOME": str(home)},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_until_done(process: subprocess.Popen, node: str, timeout: float = 300) -> str:
    """Reads the run's stdout until the line saying the node is done (in a log, the console
    prints a line when each component starts and one when it ends); returns what it read."""
    deadline = time.monotonic() + timeout
    read = ""
    for line in process.stdout:
        read += line
        if line.split()[:2] == [node, "done"]:
            return read
        assert time.monotonic() < deadline, f"{node} not done within {timeout}s"
    pytest.fail(f"the run ended before {node} was done: {process.stderr.read()}")


def _runs(home: Path) -> list[dict]:
    result = turbotfx("runs", "--format", "json", home=home)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _states(home: Path) -> dict[str, str]:
    from pipeline.provenance import summary
    from pipeline.store.connection import open_store

    config = PipelineConfig(home=str(home))
    latest = summary.latest_run(open_store(sqlite_url(config.metadata_path)), config.pipeline_name)
    return {c.node_id: c.state for c in latest.components}


def test_killed_and_interrupted_runs_show_aborted_and_resume(tmp_path):
    home = tmp_path / "workspace"
    run = _start_run(home)
    _wait_until_done(run, "AnomalyGate")  # Transform, the longest step, starts next
    assert loader_processes(home), "the run starts the serving check's loader ahead"
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=60)
    _wait_until_no_loader(home)  # no `finally` ran: the loader sees its run gone
    # Nothing marked it, but no process holds the store: `runs` knows it is dead.
    assert [r["status"] for r in _runs(home)] == ["ABORTED"]

    # The next run records the killed one; Ctrl-C stops it with one line and exit 130.
    run = _start_run(home)
    before_interrupt = _wait_until_done(run, "StatisticsGen")
    run.send_signal(signal.SIGINT)
    _, stderr = run.communicate(timeout=120)
    assert "ended without completing: marked ABORTED" in before_interrupt
    assert run.returncode == 130, stderr
    assert stderr.strip().count("\n") == 0 and "Traceback" not in stderr, stderr
    assert "interrupted" in stderr and "ABORTED" in stderr
    assert [r["status"] for r in _runs(home)] == ["ABORTED", "ABORTED"]
    assert loader_processes(home) == []

    resumed = cli("run", *FAST_RUN_ARGS, home=home)
    assert resumed.exit_code == 0, resumed.output
    states = _states(home)
    assert states["CsvExampleGen"] == states["StatisticsGen"] == "CACHED", states  # what finished is reused
    assert [r["status"] for r in _runs(home)] == ["COMPLETE", "ABORTED", "ABORTED"]
    assert len(push.versions(resumed.config.serving_dir)) == 1


def test_ctrl_c_during_the_evaluator_ends_the_run_as_every_interrupt_does(tmp_path):
    """One line, 130, ABORTED, the Evaluator CANCELED, resumable. Where the interrupt lands
    inside a Beam step, Beam hands it back wrapped and TFX records the Evaluator FAILED; that
    window is narrow on penguins, so tests/test_interrupts.py checks it on a real Beam job."""
    stop = signal.SIGINT
    home = tmp_path / "workspace"
    run = _start_run(home)
    _wait_until_started(run, "Evaluator")
    # TFMA logs this, then builds and runs its Beam job (about a second on penguins): the
    # interrupt lands while the job's steps run, where Beam wraps it.
    _wait_for_log_line(home, "absl: Evaluating model.")
    time.sleep(0.7)
    run.send_signal(stop)
    _, stderr = run.communicate(timeout=120)
    assert run.returncode == 130, stderr
    assert stderr.strip().count("\n") == 0 and "Traceback" not in stderr and "failed" not in stderr, stderr
    assert "interrupted" in stderr and "ABORTED" in stderr
    assert [r["status"] for r in _runs(home)] == ["ABORTED"]
    states = _states(home)
    assert states["Trainer"] == "COMPLETE" and states["Evaluator"] == "CANCELED", states
    resumed = cli("run", *FAST_RUN_ARGS, home=home)
    assert resumed.exit_code == 0, resumed.output
    assert _states(home)["Trainer"] == "CACHED"


def _wait_until_started(process: subprocess.Popen, node: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    for line in process.stdout:
        if line.split()[:2] == [node, "started"]:
            return
        assert time.monotonic() < deadline, f"{node} not started within {timeout}s"
    pytest.fail(f"the run ended before {node} started: {process.stderr.read()}")


def _wait_for_log_line(home: Path, text: str, timeout: float = 120) -> None:
    log = home / "logs" / "turbotfx.log"
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in the log within {timeout}s"
        time.sleep(0.05)


def _wait_until_no_loader(home: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while loader_processes(home):
        assert time.monotonic() < deadline, f"a loader process outlived its run for {timeout}s"
        time.sleep(0.5)


def test_a_full_disk_at_the_push_leaves_no_trace_and_the_rerun_compares_with_the_served_model(
        first_run_copy, tmp_path):
    # A private mount namespace (util-linux unshare): the small disk exists for this command only.
    assert subprocess.run(["unshare", "-rm", "true"]).returncode == 0, "unshare -rm must work here"
    home = first_run_copy.home
    keep = tmp_path / "serving-copy"
    config = first_run_copy.config
    served_model = _pushed_model_ids(home)
    serving_root = config.serving_dir.parent
    before = {p.name for p in config.serving_dir.iterdir()}
    config_before = model_config.config_path(serving_root).read_bytes()
    used_kib = int(subprocess.run(["du", "-sk", str(serving_root)], capture_output=True, text=True).stdout.split()[0])
    # The serving root on a tmpfs with room for what is there and not for another version:
    # the new model's copy fails for want of space, as on a full disk.
    script = (f'mkdir "{keep}" && cp -a "{serving_root}/." "{keep}" && mount -t tmpfs -o size={used_kib + 64}k tmpfs "{serving_root}" '
              f'&& cp -a "{keep}/." "{serving_root}" && "{sys.executable}" -m pipeline.cli run {" ".join(FAST_RUN_ARGS)} '
              f'--epochs 6; echo "exit=$?"; ls -a "{config.serving_dir}"; echo ---; cat "{serving_root}/models.config"')
    full = subprocess.run(["unshare", "-rm", "sh", "-c", script],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "TURBOTFX_HOME": str(home)})
    output = full.stdout + full.stderr
    assert "exit=1" in output, output
    assert "Pusher failed: no space left on the device" in output and "Traceback" not in output, output
    # The console's "details:" points at the log, which has the whole story: the traceback.
    failed_run = config.log_path.read_text().rpartition("the run failed")[2]
    assert failed_run.startswith("\nTraceback (most recent call last):") and "No space left on device" in failed_run
    # What the script listed after the run's own output
    # (the line after "exit=N"; the summary holds numbers too).
    listing, _, config_text = full.stdout.rpartition("exit=")[2].partition("\n")[2].partition("---")
    assert {n for n in listing.split() if n.isdigit()} == before  # no new version, no orphan
    assert config_text.strip() == config_before.decode().strip()
    assert _runs(home)[0]["pushed_version"] is None

    # The rerun (same flags: cached Trainer, blessed last time but never pushed) compares
    # the candidate with the model that is served, not with itself, and pushes it once.
    rerun = cli("run", *FAST_RUN_ARGS, "--epochs", "6", home=home)
    assert rerun.exit_code == 0, rerun.output
    assert _states(home)["Trainer"] == "CACHED"
    candidate, baseline = _evaluator_models(home)
    assert baseline == served_model[-1] and candidate != baseline
    assert len(push.versions(config.serving_dir)) == len(before) + 1


def _pushed_model_ids(home: Path) -> list[int]:
    """Ids of the models the store records as pushed, oldest first."""
    from pipeline.provenance import lineage
    from pipeline.store.connection import open_store

    config = PipelineConfig(home=str(home))
    store = open_store(sqlite_url(config.metadata_path))
    return sorted(o["model_id"] for o in lineage.pushed_origins(store, push.versions(config.serving_dir)).values())


def _evaluator_models(home: Path) -> tuple[int, int | None]:
    """(candidate, baseline) model ids of the latest Evaluator execution."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

    from pipeline.provenance.graph import event_key
    from pipeline.store.connection import open_store

    config = PipelineConfig(home=str(home))
    store = open_store(sqlite_url(config.metadata_path))
    evaluator = max((e for t in store.get_execution_types() if t.name.endswith(".Evaluator")
                     for e in store.get_executions_by_type(t.name)), key=lambda e: e.id)
    inputs = {event_key(e): e.artifact_id for e in store.get_events_by_execution_ids([evaluator.id])
              if e.type == mlmd_pb.Event.INPUT}
    return inputs["model"], inputs.get("baseline_model")


def test_serving_commands_reconcile_orphans_and_a_lost_config(first_run_copy):
    home = first_run_copy.home
    config = first_run_copy.config
    serving_root = config.serving_dir.parent
    [recorded] = push.versions(config.serving_dir)
    orphan = recorded + 1000  # a version directory no push record accounts for
    shutil.copytree(config.serving_dir / str(recorded), config.serving_dir / str(orphan))

    refused = turbotfx("serving", "promote", str(orphan), home=home)
    assert refused.exit_code == 2 and "Traceback" not in refused.output
    assert f"set aside version {orphan}" in refused.output and f"version {orphan} of 'penguins' is not in" in refused.output
    assert push.versions(config.serving_dir) == [recorded]
    assert (config.serving_dir / push.SET_ASIDE_DIR / str(orphan) / "saved_model.pb").is_file()

    model_config.config_path(serving_root).unlink()
    status = turbotfx("serving", "status", "--format", "json", home=home)
    assert status.exit_code == 0, status.output
    assert "rebuilt" in status.output
    report = json.loads(status.stdout)
    assert (report["stable"], report["canary"], report["served"]) == (recorded, recorded, [recorded])
    assert report["versions"][0]["model_id"] is not None

    model_config.config_path(serving_root).write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage")
    damaged = turbotfx("serving", "status", home=home)
    assert damaged.exit_code == 2, damaged.output
    assert damaged.output.count("\n") == 1 and "not a valid TF Serving model config" in damaged.output


def test_a_full_disk_at_the_pushers_record_unserves_the_version_at_once(first_run_copy, tmp_path):
    """The store's disk fills while the Pusher pushes: its record is the write that fails. The
    run ends in one line with its summary, and the version no record names serves no request,
    not even until the next command: the labels are back on the served version."""
    assert subprocess.run(["unshare", "-rm", "true"]).returncode == 0, "unshare -rm must work here"
    home = first_run_copy.home
    config = first_run_copy.config
    store_dir, keep = config.metadata_path.parent, tmp_path / "store-copy"
    serving_root = config.serving_dir.parent
    versions_before = set(push.versions(config.serving_dir))
    config_before = model_config.config_path(serving_root).read_bytes()
    used_kib = int(subprocess.run(["du", "-sk", str(store_dir)], capture_output=True, text=True).stdout.split()[0])
    # The store's folder on a tmpfs of its own, with room for the run's records until it is filled.
    script = (f'mkdir "{keep}" && cp -a "{store_dir}/." "{keep}" && '
              f'mount -t tmpfs -o size={used_kib + 8192}k tmpfs "{store_dir}" && cp -a "{keep}/." "{store_dir}" && '
              f'exec "{sys.executable}" -m tests.store_disk "{home}" {" ".join(FAST_RUN_ARGS)} --epochs 6')
    driver = subprocess.run(["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=900,
                            cwd=Path(__file__).parents[2])
    assert driver.returncode == 0, driver.stdout + driver.stderr
    outcome = json.loads(driver.stdout.strip().splitlines()[-1])
    output = outcome["stdout"] + outcome["stderr"]
    assert outcome["filled"] > 0 and outcome["exit"] == 1, output
    assert "Pusher failed: no space left on the device holding the metadata store" in output, output
    assert "Traceback" not in output, output
    assert "Pusher " in outcome["stdout"] and "wall time" in outcome["stdout"]  # the summary is there
    # The pushed version was set aside and the labels restored, by the failed run itself.
    assert "serving: " in outcome["stdout"] and "set aside" in outcome["stdout"], outcome["stdout"]
    assert set(push.versions(config.serving_dir)) == versions_before
    assert model_config.config_path(serving_root).read_bytes() == config_before


def test_a_promote_during_a_push_whose_run_dies_leaves_the_labels_on_recorded_versions(first_run_copy):
    """A run's Pusher has pushed a version, labelled canary, and not yet recorded it when
    `serving promote` asks for the canary; then the run dies. Promoting a version no record
    vouches for is refused, so the stable label stays on a version that is still there."""
    home, config = first_run_copy.home, first_run_copy.config
    serving_root = config.serving_dir.parent
    stable_before = model_config.status(serving_root, config.model_name).stable
    archives_before = set(config.pipeline_root.glob("Pusher/pushed_model/*/saved_model.pb"))
    run = _start_run(home, "--epochs", "6")
    _wait_until_done(run, "Trainer")
    # The serving lock stops the Pusher before its push; its archive copy says it is running.
    with open(serving_root / model_config.LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        deadline = time.monotonic() + 300
        while not (new := set(config.pipeline_root.glob("Pusher/pushed_model/*/saved_model.pb")) - archives_before):
            assert run.poll() is None and time.monotonic() < deadline, "the Pusher never started"
            time.sleep(0.1)
        run.send_signal(signal.SIGSTOP)
        # Stopped before the lock goes: a Pusher woken by the release could take it first.
        while psutil.Process(run.pid).status() != psutil.STATUS_STOPPED:
            time.sleep(0.01)
    try:
        # The Pusher's next step (serving/publish.py), taken for it while its run is stopped:
        # the new version, labelled canary, which no record names yet.
        [archive] = new
        version, _, _ = publish.push_and_label(str(archive.parent), config.serving_dir, {})
        assert model_config.status(serving_root, config.model_name).canary == version
        promote = turbotfx("serving", "promote", home=home)
        assert promote.exit_code == 2, promote.output
        assert f"version {version} of {config.model_name!r} has no push record yet" in promote.output
        assert model_config.status(serving_root, config.model_name).stable == stable_before
    finally:
        run.kill()  # the run dies before it records the push
        run.communicate(timeout=60)
    _wait_until_no_loader(home)
    status = turbotfx("serving", "status", "--format", "json", home=home)
    assert status.exit_code == 0, status.output
    served = json.loads(status.stdout)
    assert served["stable"] == stable_before and served["canary"] == stable_before, served
    assert version not in [v["version"] for v in served["versions"]]
