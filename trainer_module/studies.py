"""A tuning study's bookkeeping in Optuna: the request, each trial's record, creating or
joining a study in its storage, and reading back what every process of it recorded. No
TensorFlow here: processes that only join or read a study (a worker's start, `tune show`, the
Tuner's executor after its workers) load in a fraction of a second (trials: tuning.py).
"""

from __future__ import annotations

import dataclasses
import socket
import time
from typing import Any

import optuna

from trainer_module import search_space

# The median pruner leaves the first trials alone: nothing to compare them with.
PRUNER_STARTUP_TRIALS = 3
# Trial states as recorded (Optuna's FAIL as "failed").
COMPLETE, PRUNED, FAILED, RUNNING = "complete", "pruned", "failed", "running"
STATES = {optuna.trial.TrialState.COMPLETE: COMPLETE, optuna.trial.TrialState.PRUNED: PRUNED,
           optuna.trial.TrialState.FAIL: FAILED, optuna.trial.TrialState.RUNNING: RUNNING,
           optuna.trial.TrialState.WAITING: RUNNING}
# The user attributes holding a trial's knob values in JSON types, the process that ran it and
# why it failed.
VALUES_ATTR, RAN_BY_ATTR, ERROR_ATTR = "values", "ran_by", "error"
# A bagged trial's best-epoch validation loss of each fold it trained.
FOLD_LOSSES_ATTR = "fold_losses"

@dataclasses.dataclass(frozen=True)
class StudyRequest:
    """What to search and for how long: trials (None: until minutes run out), minutes (None:
    no limit), storage (an SQLAlchemy URL; None: in memory, this process alone)."""
    family: str
    knobs: tuple[str, ...] = ()
    trials: int | None = None
    minutes: float | None = None
    storage: str | None = None
    study_name: str = "turbotfx"
    # Sampler seed: each worker of a shared study needs its own (None: a random one).
    seed: int | None = 0
    # Whose trials the study holds (search_space.study_owner); "" claims nothing.
    owner: str = ""
    # Configurations tried first (knob values, JSON types): the untuned one.
    first: tuple[dict[str, Any], ...] = ()

    @property
    def dimensions(self) -> dict[str, search_space.Dimension]:
        return search_space.space(self.family, self.knobs)


@dataclasses.dataclass(frozen=True)
class TrialRecord:
    number: int
    state: str
    # The trial's validation loss: its best epoch's, or a pruned trial's last; None if it failed.
    score: float | None
    duration_s: float | None
    values: dict[str, Any]
    # The last step reported: an epoch of one model, a fold of a bagged one (a pruned trial's:
    # where it stopped).
    steps: int = 0
    # Which process ran it (HOST:PID): a shared study's trials come from several.
    ran_by: str = ""
    error: str = ""  # a failed trial's cause
    # A bagged trial's loss per fold trained (its score: their mean); [] for one model.
    fold_losses: list[float] = dataclasses.field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StudyResult:
    best: TrialRecord
    trials: list[TrialRecord]  # every trial of the study, this process's and others'
    ran_here: list[int]  # the numbers of the trials this process ran
    wall_s: float


# Processes that start together on an empty storage race to create Optuna's tables (MySQL:
# "Table ... already exists"); the one that loses finds them made when it tries again.
CREATE_ATTEMPTS = 5
CREATE_RETRY_S = 0.5


class StudyOwnerError(ValueError):
    """The named study holds another dataset's trials."""


def create_or_join(request: StudyRequest) -> optuna.Study:
    study = _created_or_joined(request)
    if request.owner:
        claimed = study.user_attrs.get(search_space.STUDY_OWNER_ATTR)
        if claimed is None:
            study.set_user_attr(search_space.STUDY_OWNER_ATTR, request.owner)
        elif claimed != request.owner:
            raise StudyOwnerError(f"study {request.study_name!r} holds the trials of {claimed}, not of "
                                  f"{request.owner}; name another study (--tune-study)")
    return study


def _created_or_joined(request: StudyRequest) -> optuna.Study:
    from sqlalchemy import exc as sql_errors

    for attempt in range(1, CREATE_ATTEMPTS + 1):
        try:
            return optuna.create_study(
                study_name=request.study_name, storage=request.storage, direction="minimize", load_if_exists=True,
                sampler=optuna.samplers.TPESampler(seed=request.seed),
                pruner=optuna.pruners.MedianPruner(n_startup_trials=PRUNER_STARTUP_TRIALS))
        except (sql_errors.OperationalError, sql_errors.ProgrammingError, sql_errors.IntegrityError):
            if attempt == CREATE_ATTEMPTS:
                raise
            time.sleep(CREATE_RETRY_S * attempt)
    raise AssertionError("unreachable")


def reload(request: StudyRequest, result: StudyResult) -> StudyResult:
    """result with the study's trials as its storage holds them now (after other processes'
    last trials ended)."""
    assert request.storage, "only a study in a storage outlives its process"
    study = optuna.load_study(study_name=request.study_name, storage=request.storage)
    records = [record(t) for t in study.get_trials(deepcopy=False)]
    return dataclasses.replace(result, trials=records, best=best_of(records) or result.best)


def fail_lost_trials(request: StudyRequest, lost: dict[str, str]) -> int:
    """Records as failed, with its cause, each trial still running in the storage that a
    process which has ended was running (lost: its ran_by, "host:pid", and why it ended): a
    worker killed mid-trial would leave it running for ever. Other processes' trials are left
    alone (a shared study's other machines). How many were failed."""
    assert request.storage, "only a study in a storage outlives its process"
    storage = optuna.storages.get_storage(request.storage)
    study_id = storage.get_study_id_from_name(request.study_name)
    failed = 0
    for trial in storage.get_all_trials(study_id, deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        cause = lost.get(str(trial.user_attrs.get(RAN_BY_ATTR, "")))
        if cause is None:
            continue
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        storage.set_trial_user_attr(trial_id, ERROR_ATTR, cause)
        storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
        failed += 1
    return failed


def ran_by(pid: int) -> str:
    """How a trial names the process that ran it."""
    return f"{socket.gethostname()}:{pid}"


def request_json(request: StudyRequest) -> dict[str, Any]:
    return {**dataclasses.asdict(request), "knobs": list(request.knobs), "first": list(request.first)}


def request_from_json(document: dict[str, Any]) -> StudyRequest:
    return StudyRequest(**{**document, "knobs": tuple(document.get("knobs", ())),
                           "first": tuple(document.get("first", ()))})


def record(trial: optuna.trial.FrozenTrial) -> TrialRecord:
    duration = trial.duration.total_seconds() if trial.duration is not None else None
    steps = trial.intermediate_values
    return TrialRecord(number=trial.number, state=STATES.get(trial.state, FAILED),
                       score=float(trial.value) if trial.value is not None else None,
                       duration_s=round(duration, 3) if duration is not None else None,
                       values=dict(trial.user_attrs.get(VALUES_ATTR, {})), steps=max(steps) + 1 if steps else 0,
                       ran_by=str(trial.user_attrs.get(RAN_BY_ATTR, "")),
                       error=str(trial.user_attrs.get(ERROR_ATTR, "")),
                       fold_losses=list(trial.user_attrs.get(FOLD_LOSSES_ATTR, [])))


def best_of(records: list[TrialRecord]) -> TrialRecord | None:
    complete = [r for r in records if r.state == COMPLETE and r.score is not None]
    return min(complete, key=lambda r: (r.score, r.number)) if complete else None
