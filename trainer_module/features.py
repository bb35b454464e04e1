"""What preprocessing, the model, the signatures and TFMA need to know of a dataset.

The spec travels from the dataset file (pipeline/datasets) to Transform and the Trainer as
a JSON-able dict in their custom_config, so this module knows no dataset by name. Column
names are kept as people wrote them; where TF needs an identifier (signature arguments,
layer names, vocabulary files, transformed features), `identifier` derives one.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

BINARY, MULTICLASS, REGRESSION = "binary", "multiclass", "regression"
TASKS = (BINARY, MULTICLASS, REGRESSION)
# The custom_config entry (Transform and Trainer) holding FeatureSpec.to_config().
CONFIG_KEY = "features"
# The Trainer custom_config entry naming the dataset file's blessing metric (accuracy, auc,
# rmse or mae); also the report entry that names it.
BLESSING_METRIC_KEY = "blessing_metric"
# Categorical features with at most this many ids (vocabulary + OOV) are one-hot
# encoded; larger vocabularies get an embedding.
ONE_HOT_MAX_IDS = 64
# A date column's text: an ISO date, optionally with a time ("T" or a space between) and a
# zone, which is ignored (the local time counts). Parquet timestamps arrive in this form
# (ExampleGen writes them as text). Transform parses it in the graph (trainer_module/dates.py);
# `init` and `predict`'s row checks match it with Python's re (RE2 reads it alike).
DATE_PATTERN = r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?"
# Categoricals without vocabulary settings (max_tokens, frequency_threshold) share one
# vocabulary: each value keyed by its column's position among them ("3" PACKED_SEPARATOR
# "red"), so Transform runs one vocabulary analysis for all of them. Each analysis is a
# dozen Beam stages of fixed cost: sixty were most of a wide table's Transform. The name
# holds a '-', which no column's vocabulary_name does.
PACKED_VOCABULARY = "packed-categoricals_vocab"
PACKED_SEPARATOR = "\x1f"
# A text column: lower-cased words (runs of letters and digits), ids over a vocabulary of the
# train split's TEXT_VOCABULARY_SIZE most frequent words (rarer ones share an out-of-vocabulary
# id), the first TEXT_MAX_WORDS of each row (0 pads a shorter one), averaged as learned
# TEXT_EMBEDDING_DIM-wide word embeddings in the model: a bag of words, tokenized in the
# graph so serving_raw takes the raw text.
TEXT_VOCABULARY_SIZE = 10_000
TEXT_MIN_WORD_COUNT = 2  # a word seen once in training is out of vocabulary (typos, names)
TEXT_MAX_WORDS = 64
TEXT_EMBEDDING_DIM = 16
TEXT_WORD_PATTERN = r"[^\pL\pN]+"  # what separates words (RE2: letters and digits in any script)
# A number written as text, as the CSV decoder reads one (a number column that also holds a
# few text values, e.g. "T" for a trace of rain, arrives as text). Transform parses it in the
# graph; `init` and `predict`'s row checks match it with Python's re and Arrow (RE2 alike).
NUMBER_PATTERN = r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*"
# Numbers with digit grouping, as spreadsheets and locales write them ("12,000", "1.234,56"):
# a numeric column's number_format names its convention, as {name: (grouping, decimal mark)}.
# Transform drops the grouping and reads the decimal mark as a point before parsing.
NUMBER_FORMATS = {"1,234.56": (",", "."), "1.234,56": (".", ",")}


def number_pattern(number_format: str | None = None) -> str:
    """What a number is in that format (NUMBER_PATTERN for None): groups of three digits
    after the first one to three, or none at all, then the decimals (RE2 and Python alike)."""
    if number_format is None:
        return NUMBER_PATTERN
    grouping, decimal = (re.escape(mark) for mark in NUMBER_FORMATS[number_format])
    return rf"\s*[-+]?(\d{{1,3}}({grouping}\d{{3}})+|\d+)({decimal}\d+)?\s*"


# What a date column becomes in Transform: days since the training dates' mean and the year
# (both z-scored), and the position in each cycle as sine and cosine (0 and 0 when missing).
DATE_SCALED_PARTS = ("days", "year")
DATE_CYCLES = {"month": 12, "weekday": 7, "yearday": 366, "hour": 24}
DATE_PARTS = (*DATE_SCALED_PARTS, *(f"{cycle}_{wave}" for cycle in DATE_CYCLES for wave in ("sin", "cos")))

_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]+")


@dataclasses.dataclass(frozen=True)
class Categorical:
    """A categorical feature: strings, or integers read as categories."""

    key: str
    max_tokens: int | None = None  # vocabulary cap: the most frequent values, the rest OOV
    frequency_threshold: int | None = None  # values seen fewer times are OOV
    embedding_dim: int | None = None  # None: one-hot for small vocabularies, else by size


@dataclasses.dataclass(frozen=True)
class FeatureSpec:
    dataset: str
    task: str
    label_key: str
    numeric_keys: tuple[str, ...]
    categoricals: tuple[Categorical, ...]
    # Binary: the label value that is the positive class (class id 1), as text ("yes", "1");
    # None: the rarer of the two.
    positive: str | None = None
    # Slots for categories Transform never saw in training.
    num_oov_buckets: int = 1
    # Columns of ISO dates (DATE_PATTERN), expanded into DATE_PARTS.
    date_keys: tuple[str, ...] = ()
    # Numeric columns with text values read as missing, each with an indicator input (1 where
    # the row held one of them): (key, values) pairs.
    missing_values: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # Columns of free text, a bag of words each (TEXT_*).
    text_keys: tuple[str, ...] = ()
    # Numeric columns of numbers with digit grouping: (key, a NUMBER_FORMATS name) pairs.
    number_formats: tuple[tuple[str, str], ...] = ()

    @property
    def categorical_keys(self) -> tuple[str, ...]:
        return tuple(c.key for c in self.categoricals)

    @property
    def feature_keys(self) -> tuple[str, ...]:
        return (*self.numeric_keys, *self.categorical_keys, *self.date_keys, *self.text_keys)

    @property
    def numeric_inputs(self) -> tuple[str, ...]:
        """The transformed float features the model reads: each numeric column's, and each
        date column's parts."""
        return (*(transformed_name(key) for key in self.numeric_keys),
                *(indicator_name(key) for key, _ in self.missing_values),
                *(date_part_name(key, part) for key in self.date_keys for part in DATE_PARTS))

    @property
    def transformed_label_key(self) -> str:
        return transformed_name(self.label_key)

    @property
    def is_classification(self) -> bool:
        return self.task != REGRESSION

    @property
    def packed_categoricals(self) -> tuple[Categorical, ...]:
        """The categoricals whose values share PACKED_VOCABULARY, in their key order."""
        return tuple(c for c in self.categoricals if c.max_tokens is None and c.frequency_threshold is None)

    def categorical(self, key: str) -> Categorical:
        return next(c for c in self.categoricals if c.key == key)

    def to_config(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "task": self.task,
            "label": self.label_key,
            "numeric": list(self.numeric_keys),
            "categorical": [
                {k: v for k, v in dataclasses.asdict(c).items() if v is not None} for c in self.categoricals
            ],
            **({"positive": self.positive} if self.positive is not None else {}),
            **({"date": list(self.date_keys)} if self.date_keys else {}),
            **({"missing_values": {key: list(values) for key, values in self.missing_values}}
               if self.missing_values else {}),
            **({"text": list(self.text_keys)} if self.text_keys else {}),
            **({"number_formats": dict(self.number_formats)} if self.number_formats else {}),
        }

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> FeatureSpec:
        return cls(
            dataset=str(config["dataset"]),
            task=str(config["task"]),
            label_key=str(config["label"]),
            numeric_keys=tuple(config["numeric"]),
            categoricals=tuple(Categorical(**c) for c in config["categorical"]),
            positive=config.get("positive"),
            date_keys=tuple(config.get("date", ())),
            missing_values=tuple((key, tuple(values)) for key, values in config.get("missing_values", {}).items()),
            text_keys=tuple(config.get("text", ())),
            number_formats=tuple(config.get("number_formats", {}).items()),
        )


def from_custom_config(custom_config: Mapping[str, Any] | None) -> FeatureSpec:
    """The spec Transform's or the Trainer's custom_config carries."""
    if not custom_config or CONFIG_KEY not in custom_config:
        raise ValueError(f"custom_config has no {CONFIG_KEY!r} entry; the pipeline passes the "
                         "dataset file's features there")
    return FeatureSpec.from_config(custom_config[CONFIG_KEY])


def identifier(column: str) -> str:
    """A name TF accepts everywhere (op, argument, layer, file) for a column name.

    'monthly charges' -> 'monthly_charges', '2nd plan' -> 'f_2nd_plan'. Two columns that
    map to one identifier are refused when the dataset file loads.
    """
    name = _NOT_IDENTIFIER.sub("_", column).strip("_")
    if not name or not name[0].isalpha():
        name = f"f_{name}"
    return name


def transformed_name(key: str) -> str:
    return f"{identifier(key)}_xf"


def date_part_name(key: str, part: str) -> str:
    """A date column's transformed part: '_xf_' inside, so no column's transformed_name
    (which ends in '_xf') can be the same."""
    return f"{identifier(key)}_xf_{part}"


def indicator_name(key: str) -> str:
    """The input that is 1 where a numeric column held one of its missing_values ('_xf_'
    inside, as date_part_name)."""
    return f"{identifier(key)}_xf_marked"


def vocabulary_name(key: str) -> str:
    return f"{identifier(key)}_vocab"


def packed_sizes(tokens: list[bytes], columns: int) -> list[int]:
    """How many values of each packed column (by position) PACKED_VOCABULARY's tokens hold."""
    sizes = [0] * columns
    for token in tokens:
        sizes[int(token.split(PACKED_SEPARATOR.encode(), 1)[0])] += 1
    return sizes


def embedding_dim(num_ids: int) -> int:
    """Width of the embedding for a vocabulary: grows as the fourth root, capped at 16."""
    return min(16, max(4, round(2 * num_ids ** 0.25)))
