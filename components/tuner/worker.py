"""One more process running trials of a shared study: `python -m components.tuner.worker FILE`,
FILE a JSON object from spec(). The Tuner's executor starts these for its parallelism; on
other machines, the same command joins a study kept in a MySQL or PostgreSQL storage."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from trainer_module import studies, tuning
from trainer_module.config import TrainingConfig


def spec(request: studies.StudyRequest, storage_url: str, password_env: str, train_files: list[str],
         transform_output: str, custom_config: dict[str, Any], base: TrainingConfig, seed: int | None) -> dict[str, Any]:
    """What a worker needs: storage_url an SQLAlchemy URL without the password, which the
    worker reads from the environment variable password_env, as the Tuner does."""
    return {"request": {**studies.request_json(request), "storage": None, "seed": seed},
            "storage_url": storage_url, "password_env": password_env,
            "fn_args": {"train_files": train_files, "transform_output": transform_output,
                        "custom_config": custom_config},
            "base": base.to_config()}


def with_password(storage_url: str, password_env: str) -> str:
    """The SQLAlchemy URL with the password from the environment variable password_env, if set:
    to connect with, never to print or record."""
    password = os.environ.get(password_env, "") if password_env else ""
    parts = urlsplit(storage_url)
    if not password or not parts.username or parts.password is not None:
        return storage_url
    netloc = f"{parts.username}:{quote(password, safe='')}@{parts.netloc.split('@', 1)[1]}"
    return urlunsplit(parts._replace(netloc=netloc))


def die_with_parent(parent_pid: int) -> None:
    """Linux: the kernel kills this process when the one that started it ends, however it
    ends (kill -9 too): a worker left alone would train on for minutes at ~1 GB."""
    import ctypes
    import signal

    prctl = getattr(ctypes.CDLL(None), "prctl", None)
    if prctl is None:  # not Linux: the executor's own stop is all there is
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it ended before the line above
        os._exit(1)


# prctl(2)'s option: the signal this process gets when its parent ends.
PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    """argv: the spec file, and the pid of the process that started this one when it should
    die with it (the Tuner's workers; not a worker joining from another machine)."""
    if len(argv) > 1:
        die_with_parent(int(argv[1]))
    from tfx.components.trainer.fn_args_utils import FnArgs

    logging.basicConfig(level=logging.INFO)
    with open(argv[0]) as file:
        document = json.load(file)
    request = studies.request_from_json({**document["request"],
                                        "storage": with_password(document["storage_url"], document["password_env"])})
    started = time.monotonic()
    result = tuning.run_study(FnArgs(**document["fn_args"]), TrainingConfig.from_config(document["base"]), request,
                              tuning.log_trial(request.trials, started))
    # What this process ran, for whoever started it.
    print(json.dumps({"ran_here": result.ran_here, "best": result.best.number}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
