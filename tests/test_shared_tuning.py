"""A tuning run's processes and its study's storage: a worker dies with the run that started
it (kill -9 included), a trial a dead worker was running is recorded as failed with the cause
(never "running" for ever), the flags have upper bounds, --tune-storage is reached before any
work, as --metadata-url is, and a shared study holds one dataset's model's trials only."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import optuna
import psutil
import pytest

from pipeline.config import PipelineConfig
from pipeline.runners.spark.local_cluster import free_port
from pipeline.store import study as study_storage
from pipeline.store.url import PASSWORD_ENV_VAR, sqlalchemy_url
from tests import REPO
from tests.conftest import cli
from trainer_module import search_space, studies

# A parent that starts a child the way the Tuner's executor starts a worker (its pid last on
# the command line), prints the child's pid, and waits to be killed.
PARENT = textwrap.dedent("""
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c",
        "import sys, time; from components.tuner.worker import die_with_parent; "
        "die_with_parent(int(sys.argv[1])); print('ready', flush=True); time.sleep(120)", str(os.getpid())],
        stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    print(child.pid, flush=True)
    time.sleep(120)
""")


def test_a_worker_dies_with_the_process_that_started_it_even_by_kill_9():
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=30)
        assert _gone(child, timeout_s=10), "the worker outlived its parent"
    finally:
        parent.kill()


def _gone(process: psutil.Process, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_a_trial_its_dead_worker_was_running_is_recorded_failed_with_the_cause(tmp_path):
    request = studies.StudyRequest(family="dnn", trials=4, storage=f"sqlite:///{tmp_path / 'study.sqlite'}",
                                  study_name="shared")
    study = optuna.create_study(study_name="shared", storage=request.storage, direction="minimize")
    lost_trial, other_machines = study.ask(), study.ask()  # both left running
    lost_trial.set_user_attr("ran_by", studies.ran_by(4242))
    other_machines.set_user_attr("ran_by", "elsewhere:7")
    done = study.ask()
    done.set_user_attr("ran_by", studies.ran_by(4242))
    study.tell(done, 0.5)

    cause = "its tuning worker process ended mid-trial (exit -9)"
    assert studies.fail_lost_trials(request, {studies.ran_by(4242): cause}) == 1
    records = {r.number: r for r in map(studies.record, optuna.load_study(
        study_name="shared", storage=request.storage).get_trials(deepcopy=False))}
    assert (records[lost_trial.number].state, records[lost_trial.number].error) == (studies.FAILED, cause)
    assert records[other_machines.number].state == studies.RUNNING  # another process's: left alone
    assert records[done.number].state == studies.COMPLETE and records[done.number].score == 0.5


# The bounds docs/training.md promises.
@pytest.mark.parametrize("flag, value, message", [
    ("--tune-trials", "10001", "must be at most 10000"),
    ("--tune-parallelism", "65", "must be at most 64"),
])
def test_the_tuning_flags_have_upper_bounds(tmp_path, flag, value, message):
    result = cli("run", flag, value, home=tmp_path / "ws")
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "ws").exists()


def test_a_dataset_files_tuning_settings_have_the_same_bounds():
    search_space.TuningConfig(trials=10_000, parallelism=64).validate("dnn")
    with pytest.raises(ValueError, match="tuning trials must be 0 to 10000, got 10001"):
        search_space.TuningConfig(trials=10_001).validate("dnn")
    with pytest.raises(ValueError, match="tuning parallelism must be 1 to 64, got 65"):
        search_space.TuningConfig(trials=2, parallelism=65).validate("dnn")


@pytest.mark.parametrize("storage, message", [
    (lambda tmp_path: f"mysql://tuner@127.0.0.1:{free_port()}/studies", "cannot be reached"),
    (lambda tmp_path: f"sqlite:///{tmp_path / 'no-such-folder' / 'study.sqlite'}", "does not exist"),
])
def test_a_study_storage_that_cannot_be_used_stops_the_run_before_any_work(tmp_path, storage, message):
    url = storage(tmp_path)
    result = cli("run", "--tune-trials", "2", "--tune-storage", url, home=tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and message in result.output, result.output
    assert not (tmp_path / "ws" / "pipelines").exists()  # not one component ran


def test_a_study_server_that_answers_passes_the_check(mariadb_server, monkeypatch):
    database = mariadb_server.create_database()
    monkeypatch.setenv(PASSWORD_ENV_VAR, database.password)
    study_storage.check_storage(database.url())
    monkeypatch.setenv(PASSWORD_ENV_VAR, "not-the-password")
    with pytest.raises(study_storage.StudyStorageError, match="cannot be reached") as refused:
        study_storage.check_storage(database.url())
    assert "not-the-password" not in str(refused.value)
    assert f"--tune-storage {database.url()} cannot be reached" in str(refused.value)


def owner_of(dataset: str) -> str:
    config = PipelineConfig(home="unused", dataset=dataset)
    return search_space.study_owner(config.model_name, config.spec.feature_contract())


def test_a_study_of_another_datasets_model_is_refused_before_any_work(tmp_path):
    url = f"sqlite:///{tmp_path / 'studies.sqlite'}"
    penguins = owner_of("penguins")
    claimed = optuna.create_study(study_name="shared", storage=sqlalchemy_url(url))
    claimed.set_user_attr(search_space.STUDY_OWNER_ATTR, penguins)
    result = cli("run", "--dataset", "synthetic", "--tune-trials", "2", "--tune-storage", url,
                 "--tune-study", "shared", home=tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert f"holds the trials of {penguins}, not of {owner_of('synthetic')}" in result.output
    assert not (tmp_path / "ws" / "pipelines").exists()
    study_storage.check_storage(url, "shared", penguins)  # its own dataset joins
    study_storage.check_storage(url, "another", owner_of("synthetic"))  # a new study is anyone's


def test_the_tuner_itself_refuses_a_study_claimed_since_the_check(tmp_path):
    """The check before the run and the Tuner are minutes apart: the Tuner checks again."""
    storage = f"sqlite:///{tmp_path / 'studies.sqlite'}"
    first = studies.StudyRequest(family="dnn", storage=storage, study_name="shared", owner=owner_of("penguins"))
    studies.create_or_join(first)
    studies.create_or_join(first)  # the same dataset again: joins
    other = studies.StudyRequest(family="dnn", storage=storage, study_name="shared", owner=owner_of("synthetic"))
    with pytest.raises(studies.StudyOwnerError, match="holds the trials of model 'penguins'"):
        studies.create_or_join(other)


def _first_samples(seed: int | None) -> list[float]:
    """The learning rates a fresh TPE study with this sampler seed tries first."""
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
    return [study.ask().suggest_float("learning_rate", 1e-4, 1e-1, log=True) for _ in range(3)]


def test_processes_on_a_shared_study_sample_differently_a_private_study_repeats():
    from components.tuner import executor

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # A study others may join: two runs started alike (and their workers) try other trials.
    shared = executor.sampler_seeds(True, 3)
    assert len({tuple(_first_samples(seed)) for seed in shared * 2}) == 6
    # A run's own study: the same run again tries the same trials; its workers differ.
    private = executor.sampler_seeds(False, 3)
    assert [_first_samples(seed) for seed in private] == [_first_samples(seed) for seed in private]
    assert len({tuple(_first_samples(seed)) for seed in private}) == 3
