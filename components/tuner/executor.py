"""Tuner executor: runs the study (trainer_module/tuning.py) in this process and, with
parallelism above 1, in as many more worker processes sharing its storage; writes the best
trial's values for the Trainer and records every trial on the HyperParameters artifact."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from typing import Any

from tfx import types
from tfx.components.trainer import fn_args_utils
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils

from components.reporting_trainer.keys import FEATURE_CONTRACT_KEY, MODEL_NAME_KEY, json_property
from components.tuner import keys, worker
from trainer_module import config, progress, search_space, studies, tuning
from trainer_module.config import TrainingConfig

# How long the worker processes may take to end their last trial after this process's loop
# ends (each stops on the same trial count).
WORKER_WAIT_S = 3600
# How long a worker told to stop may take to end.
WORKER_STOP_S = 10


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        custom_config = json.loads(exec_properties["custom_config"])
        fn_args = fn_args_utils.get_common_fn_args(input_dict, exec_properties, working_dir=self._get_tmp_dir())
        # What run_fn reads the Transform output as (the Trainer's executor sets it the same way).
        fn_args.transform_output = fn_args.transform_graph_path
        base = TrainingConfig.from_config(custom_config)
        parallelism = max(int(exec_properties.get(keys.PARALLELISM) or 1), 1)
        storage_url = str(exec_properties.get(keys.STORAGE) or "")
        if parallelism > 1 and not storage_url:
            # The workers share one study: an SQLite file beside this execution's scratch.
            storage_url = "sqlite:///" + os.path.join(self._get_tmp_dir(), "study.sqlite")
        password_env = str(exec_properties.get(keys.PASSWORD_ENV) or "")
        request = studies.StudyRequest(
            family=base.model_family,
            knobs=tuple(json.loads(exec_properties.get(keys.KNOBS) or "[]")),
            trials=int(exec_properties.get(keys.TRIALS) or 0) or None,
            minutes=float(exec_properties.get(keys.MINUTES) or 0) or None,
            storage=worker.with_password(storage_url, password_env) if storage_url else None,
            study_name=str(exec_properties.get(keys.STUDY_NAME) or "")
            or f"{custom_config.get(MODEL_NAME_KEY, 'model')}-{uuid.uuid4().hex[:12]}",
            # The untuned configuration first: tuning never ranks below it on the validation slice.
            first=(base.to_config(),),
            seed=sampler_seeds(bool(exec_properties.get(keys.STORAGE)), parallelism)[0],
            owner=search_space.study_owner(str(custom_config.get(MODEL_NAME_KEY, "")),
                                           str(custom_config.get(FEATURE_CONTRACT_KEY, ""))),
        )
        workers = [_start_worker(request, storage_url, password_env, fn_args, base, index, self._get_tmp_dir())
                   for index in range(1, parallelism)]
        started = time.monotonic()
        try:
            result = tuning.run_study(fn_args, base, request, tuning.log_trial(request.trials, started))
        except BaseException:
            # Interrupted or failed here: the workers' trials are not waited for.
            for process in workers:
                _stop(process)
            raise
        lost = {}
        for process in workers:
            code = _wait(process)
            if code != 0:
                lost[studies.ran_by(process.pid)] = f"its tuning worker process ended mid-trial (exit {code})"
        if lost:
            studies.fail_lost_trials(request, lost)
        if workers:
            result = studies.reload(request, result)
        values = result.best.values
        logging.info(progress.tuning_message(
            len(result.trials), _count(result, studies.PRUNED), _count(result, studies.FAILED), result.wall_s,
            result.best.number + 1, tuning.OBJECTIVE, float(result.best.score or 0.0)))
        hyperparameters = artifact_utils.get_single_instance(output_dict["best_hyperparameters"])
        io_utils.write_string_file(os.path.join(hyperparameters.uri, keys.HYPERPARAMETERS_FILE),
                                   json.dumps({config.TUNED_VALUES: values}, sort_keys=True))
        _record(hyperparameters, result, request, exec_properties, custom_config)


def _record(artifact: types.Artifact, result: studies.StudyResult, request: studies.StudyRequest,
            exec_properties: dict[str, Any], custom_config: dict[str, Any]) -> None:
    artifact.set_string_custom_property(keys.TRIALS_PROPERTY, json_property([t.as_json() for t in result.trials]))
    artifact.set_int_custom_property(keys.TRIAL_COUNT, len(result.trials))
    artifact.set_int_custom_property(keys.PRUNED_COUNT, _count(result, studies.PRUNED))
    artifact.set_int_custom_property(keys.FAILED_COUNT, _count(result, studies.FAILED))
    artifact.set_int_custom_property(keys.BEST_TRIAL, result.best.number)
    artifact.set_float_custom_property(keys.BEST_SCORE, float(result.best.score or 0.0))
    artifact.set_string_custom_property(keys.BEST_VALUES, json_property(result.best.values))
    artifact.set_string_custom_property(keys.OBJECTIVE, tuning.OBJECTIVE)
    artifact.set_float_custom_property(keys.WALL_S, round(result.wall_s, 3))
    artifact.set_string_custom_property(keys.STUDY, request.study_name)
    artifact.set_string_custom_property(keys.SEARCH_SPACE, str(exec_properties.get(keys.SEARCH_SPACE) or
                                                               search_space.fingerprint(request.family,
                                                                                        request.dimensions)))
    for key, name in ((FEATURE_CONTRACT_KEY, keys.FEATURE_CONTRACT), (MODEL_NAME_KEY, keys.MODEL_NAME)):
        if custom_config.get(key):
            artifact.set_string_custom_property(name, str(custom_config[key]))


def sampler_seeds(shared_storage: bool, processes: int) -> list[int | None]:
    """The TPE sampler seed of this process, then of each worker. A study others may join
    (--tune-storage) gets random ones (None): two runs started alike would otherwise sample
    the same trials. A run's own study is reproducible: 0 here, a worker's index there."""
    return [None] * processes if shared_storage else list(range(processes))


def _count(result: studies.StudyResult, state: str) -> int:
    return sum(1 for trial in result.trials if trial.state == state)


def _start_worker(request: studies.StudyRequest, storage_url: str, password_env: str,
                  fn_args: fn_args_utils.FnArgs, base: TrainingConfig, index: int, scratch: str) -> subprocess.Popen:
    """A process running trials of the same study (components/tuner/worker.py)."""
    path = os.path.join(scratch, f"tuning-worker-{index}.json")
    os.makedirs(scratch, exist_ok=True)
    with open(path, "w") as spec:
        json.dump(worker.spec(request, storage_url, password_env, fn_args.train_files, fn_args.transform_output,
                              fn_args.custom_config, base,
                              seed=sampler_seeds(request.seed is None, index + 1)[index]), spec)
    # Its logs (trial lines included) go where this process's do: the run's log file.
    return subprocess.Popen([sys.executable, "-m", "components.tuner.worker", path, str(os.getpid())])


def _stop(worker: subprocess.Popen) -> None:
    worker.terminate()
    try:
        worker.wait(WORKER_STOP_S)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


def _wait(worker: subprocess.Popen) -> int:
    try:
        code = worker.wait(WORKER_WAIT_S)
    except BaseException:
        worker.kill()
        worker.wait()
        raise
    if code != 0:
        logging.warning("a tuning worker exited with code %d; a trial it was running is recorded as failed", code)
    return code
