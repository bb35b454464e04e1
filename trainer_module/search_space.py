"""What a Tuner searches: the dimensions TrainingConfig's knobs declare (config.py, each
knob's `search=`), the space of one model family, its fingerprint, and one trial's values.

No TensorFlow or Optuna import: the CLI, the pipeline definition and the resolver read the
space; trainer_module/tuning.py samples it with an Optuna trial (anything with Optuna's
suggest_float / suggest_int / suggest_categorical).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Protocol

from trainer_module.config import TrainingConfig
from trainer_module.dimensions import Choice, Dimension, json_value


def knob_family(name: str) -> str:
    """The model family a knob shapes: the gbt_ knobs the gbt family's, the others the dnn's."""
    return "gbt" if name.startswith("gbt_") else "dnn"


def space(family: str, knobs: tuple[str, ...] = ()) -> dict[str, Dimension]:
    """The searched knobs of a model family and their dimensions, in TrainingConfig's order;
    knobs (non-empty) keeps only those."""
    found = {field.name: field.metadata["search"] for field in dataclasses.fields(TrainingConfig)
             if field.metadata.get("search") is not None and knob_family(field.name) == family}
    unknown = [name for name in knobs if name not in found]
    if unknown:
        raise ValueError(f"{unknown[0]!r} is not a searched knob of the {family} family; "
                         f"choose from: {', '.join(found)}")
    return {name: dimension for name, dimension in found.items() if not knobs or name in knobs}


def describe(dimensions: dict[str, Dimension]) -> dict[str, dict[str, Any]]:
    return {name: dimension.describe() for name, dimension in dimensions.items()}


def fingerprint(family: str, dimensions: dict[str, Dimension]) -> str:
    """A hash of the family and every dimension: a tuning result is reused only for the same."""
    text = json.dumps({"family": family, "space": describe(dimensions)}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Sampler(Protocol):
    def suggest_float(self, name: str, low: float, high: float, *, log: bool = False) -> float: ...
    def suggest_int(self, name: str, low: int, high: int, *, log: bool = False) -> int: ...
    def suggest_categorical(self, name: str, choices: Any) -> Any: ...


def sample(trial: Sampler, dimensions: dict[str, Dimension], kinds: dict[str, type]) -> dict[str, Any]:
    """One value per dimension, in JSON types (a tuple as a list); kinds: each knob's Python type."""
    values: dict[str, Any] = {}
    for name, dimension in dimensions.items():
        if isinstance(dimension, Choice):
            # Optuna's categorical values are plain scalars: a tuple goes by its text.
            labels = [_label(value) for value in dimension.values]
            picked = trial.suggest_categorical(name, labels)
            values[name] = json_value(dimension.values[labels.index(picked)])
        elif kinds[name] is int:
            values[name] = trial.suggest_int(name, int(dimension.low), int(dimension.high), log=dimension.log)
        else:
            values[name] = trial.suggest_float(name, dimension.low, dimension.high, log=dimension.log)
    return values


def as_sampler_params(dimensions: dict[str, Dimension], values: dict[str, Any]) -> dict[str, Any]:
    """values (JSON types) as sample() asks the sampler for them: what Optuna's enqueue_trial takes."""
    return {name: _label(tuple(values[name]) if isinstance(values[name], list) else values[name])
            if isinstance(dimensions[name], Choice) else values[name]
            for name in dimensions if name in values}


def _label(value: Any) -> Any:
    return ",".join(str(item) for item in value) if isinstance(value, tuple) else value


# A study's user attribute naming whose trials it holds: one dataset's model (its name and
# feature contract). A shared study (--tune-storage, --tune-study) refuses another's run.
STUDY_OWNER_ATTR = "turbotfx_owner"


def study_owner(model_name: str, feature_contract: str) -> str:
    return f"model {model_name!r} (feature contract {feature_contract})"


# A run's study: more trials than any search space here needs (one a minute is a week); more
# processes than a machine has cores only queue (each holds a model and its data, ~1 GB).
MAX_TRIALS, MAX_PARALLELISM = 10_000, 64


@dataclasses.dataclass(frozen=True)
class TuningConfig:
    """Whether and how long a run tunes: a dataset file's [tuning] table, under the --tune-*
    flags. trials None and minutes None: no Tuner, and the latest tuning result of the dataset
    is reused when its search space still matches; trials 0: no Tuner and no reuse."""
    trials: int | None = None
    minutes: float | None = None
    knobs: tuple[str, ...] = ()  # the searched knobs; () every one of the model family
    storage: str | None = None  # a study storage URL (sqlite://, mysql://, postgresql://); None in memory
    study: str | None = None  # a study name to share across processes or machines; None a new one
    parallelism: int = 1  # processes running trials of the study

    def __post_init__(self) -> None:
        object.__setattr__(self, "knobs", tuple(self.knobs))

    @property
    def tunes(self) -> bool:
        return bool(self.trials) or bool(self.minutes)

    @property
    def reuses(self) -> bool:
        return self.trials is None and self.minutes is None

    def validate(self, family: str) -> None:
        """Raises ValueError naming the first setting out of range."""
        if self.trials is not None and not 0 <= self.trials <= MAX_TRIALS:
            raise ValueError(f"tuning trials must be 0 to {MAX_TRIALS}, got {self.trials}")
        if self.minutes is not None and not self.minutes > 0:
            raise ValueError(f"tuning time must be more than 0 minutes, got {self.minutes}")
        if not 1 <= self.parallelism <= MAX_PARALLELISM:
            raise ValueError(f"tuning parallelism must be 1 to {MAX_PARALLELISM}, got {self.parallelism}")
        space(family, self.knobs)
