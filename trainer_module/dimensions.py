"""The kinds of values a Tuner searches, which TrainingConfig's knobs declare (config.py's
`search=`): a range of numbers or a set of choices. search_space.py gathers and samples them."""

from __future__ import annotations

import dataclasses
from typing import Any, Union


@dataclasses.dataclass(frozen=True)
class Range:
    """Numbers from low to high (whole numbers for an int knob); log: sampled on a log scale."""
    low: float
    high: float
    log: bool = False

    def describe(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "log": self.log}


@dataclasses.dataclass(frozen=True)
class Choice:
    """One of the values (a tuple knob's values are tuples)."""
    values: tuple[Any, ...]

    def describe(self) -> dict[str, Any]:
        return {"choices": [json_value(value) for value in self.values]}


Dimension = Union[Range, Choice]


def json_value(value: Any) -> Any:
    """A knob value in JSON types: a tuple as a list."""
    return list(value) if isinstance(value, tuple) else value
