"""Processes that start one shared study together on an empty MariaDB database race to create
Optuna's tables; each must end up in the study (trainer_module/studies.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from components.tuner.worker import with_password
from pipeline.store.url import PASSWORD_ENV_VAR, sqlalchemy_url

PROCESSES = 4
ROUNDS = 3
# Each process loads the tuner once, says it is ready, then joins each round's study when that
# round's go file appears: all of them reach that round's empty database at once.
JOIN = textwrap.dedent("""
    import json, os, sys, time
    from trainer_module import studies
    urls, folder, me = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]

    def wait_for(name):
        while not os.path.exists(os.path.join(folder, name)):
            time.sleep(0.001)

    open(os.path.join(folder, f"ready-{me}"), "w").close()
    for round_number, url in enumerate(urls):
        wait_for(f"go-{round_number}")
        study = studies.create_or_join(studies.StudyRequest(family="dnn", storage=url, study_name="shared"))
        print(study.study_name, flush=True)
        open(os.path.join(folder, f"done-{round_number}-{me}"), "w").close()
""")


def test_processes_starting_together_on_an_empty_database_all_join_the_study(mariadb_server, tmp_path,
                                                                             monkeypatch):
    urls = []
    for _ in range(ROUNDS):
        database = mariadb_server.create_database()
        monkeypatch.setenv(PASSWORD_ENV_VAR, database.password)
        urls.append(with_password(sqlalchemy_url(database.url()), PASSWORD_ENV_VAR))
    processes = [subprocess.Popen([sys.executable, "-c", JOIN, json.dumps(urls), str(tmp_path), str(me)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for me in range(PROCESSES)]
    try:
        _until_all(tmp_path, "ready-{}", processes)
        for round_number in range(ROUNDS):
            (tmp_path / f"go-{round_number}").write_text("")
            _until_all(tmp_path, f"done-{round_number}-{{}}", processes)
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err[-2000:]
            assert out.split() == ["shared"] * ROUNDS
    finally:
        for process in processes:
            process.kill()


def _until_all(folder: Path, pattern: str, processes: list[subprocess.Popen], timeout_s: float = 120) -> None:
    """Until every process has left its file (pattern.format(index)); a process that exits
    first fails the test with its error."""
    deadline = time.monotonic() + timeout_s
    while not all((folder / pattern.format(me)).exists() for me in range(len(processes))):
        for process in processes:
            if process.poll() is not None and process.returncode != 0:
                raise AssertionError(process.stderr.read()[-2000:])
        assert time.monotonic() < deadline, f"not every process wrote {pattern} within {timeout_s:.0f} s"
        time.sleep(0.01)
