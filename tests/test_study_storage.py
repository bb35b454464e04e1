"""Processes that start one shared study together on an empty MariaDB database race to create
Optuna's tables; each must end up in the study (trainer_module/tuning.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from components.tuner.worker import with_password
from pipeline.store.url import PASSWORD_ENV_VAR, sqlalchemy_url

PROCESSES = 4
# Each process waits for this file, so all of them reach the empty database at once.
JOIN = textwrap.dedent("""
    import os, sys, time
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.001)
    from trainer_module import tuning
    study = tuning._create_or_join(tuning.StudyRequest(family="dnn", storage=sys.argv[1], study_name="shared"))
    print(study.study_name)
""")


def test_processes_starting_together_on_an_empty_database_all_join_the_study(mariadb_server, tmp_path,
                                                                             monkeypatch):
    for round_number in range(3):
        database = mariadb_server.create_database()
        monkeypatch.setenv(PASSWORD_ENV_VAR, database.password)
        url = with_password(sqlalchemy_url(database.url()), PASSWORD_ENV_VAR)
        go = tmp_path / f"go-{round_number}"
        processes = [subprocess.Popen([sys.executable, "-c", JOIN, url, str(go)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for _ in range(PROCESSES)]
        go.write_text("")
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err[-2000:]
            assert out.strip() == "shared"

