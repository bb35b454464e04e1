"""The errors of serving/, in one place so a caller can catch them by family:

    ConfigError (pipeline.errors: the root of every user-fixable error)
    ├── ServingClientError    a request that could not be made or answered
    │   └── RowError          rows the curated schema forbids, one line per problem
    └── ServingConfigError    a label change that cannot be made
    PushError                 a push that could not be completed (nothing left behind)
"""

from __future__ import annotations

from typing import Sequence

from pipeline.errors import ConfigError

# A CSV file of bad rows would otherwise bury the first problems.
MAX_PROBLEMS_SHOWN = 20


class ServingClientError(ConfigError):
    """A request that could not be made or answered; the message names the cause."""


class RowError(ServingClientError):
    """Rows that do not fit the curated schema: one line per problem (`problems`), each
    naming the row, the feature, the value, what the schema allows and the fix."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:MAX_PROBLEMS_SHOWN]
        more = len(self.problems) - len(shown)
        super().__init__("\n".join(shown + ([f"... and {more} more problems"] if more else [])))


class ServingConfigError(ConfigError):
    """A label change that cannot be made (no such version, nothing pushed yet)."""


class PushError(Exception):
    """A push that could not be completed; nothing was left in the model directory."""
