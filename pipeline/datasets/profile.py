"""What init's decisions look at in each column of a table: its type as ExampleGen reads it,
missing and distinct values (Arrow, exactly), the standard deviation (TFDV), and for text
its words, ISO dates and numbers (plain or with digit grouping, features.NUMBER_FORMATS)."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from pipeline.datasets import table
from pipeline.datasets.table import BYTES
from trainer_module.features import DATE_PATTERN, NUMBER_FORMATS, number_pattern

if TYPE_CHECKING:
    import pyarrow as pa
    from tensorflow_metadata.proto.v0 import statistics_pb2

# A text categorical with at most this many values gets a closed domain in the schema draft
# (a new value stops the run); a larger vocabulary stays open (new values go to the OOV
# bucket). TFDV's infer_schema draws the same line. Columns list their values up to it.
CLOSED_DOMAIN_MAX_VALUES = 100
# A number column's other texts are named (and may be read as missing) up to this many.
MISSING_VALUES_MAX = 3


@dataclasses.dataclass(frozen=True)
class Column:
    """What the decisions look at in one column."""

    name: str
    type: str | None  # INT, FLOAT or BYTES as ExampleGen writes it; None: no value at all
    rows: int
    missing: int
    distinct: int
    values: tuple  # the distinct values, sorted, when at most CLOSED_DOMAIN_MAX_VALUES
    mean_length: float  # characters (text only)
    std_dev: float  # population standard deviation (numbers only)
    mean_words: float = 0.0  # words separated by white space (text only)
    dates: int = 0  # present values that are ISO dates (text only)
    first_date: str = ""  # the earliest and latest of them, as written
    last_date: str = ""
    numbers: int = 0  # present values that are numbers (text only)
    number_values: int = 0  # distinct numbers among them
    decimals: bool = False  # whether any of them has a fraction or an exponent
    number_format: str | None = None  # how most of them are written (NUMBER_FORMATS); None: plain
    # The other values with their counts, most frequent first, when at most
    # MISSING_VALUES_MAX of them (text only).
    not_numbers: tuple[tuple[str, int], ...] = ()

    @property
    def present(self) -> int:
        return self.rows - self.missing


def profile(rows: pa.Table, stats: statistics_pb2.DatasetFeatureStatisticsList) -> list[Column]:
    """Each column's type, missing values and standard deviation (TFDV), and its distinct
    values (counted exactly by Arrow)."""
    import pyarrow.compute as pc

    by_name = {feature.path.step[0]: feature for feature in stats.datasets[0].features}
    found = []
    for name in rows.column_names:
        array = rows.column(name).combine_chunks()
        feature = by_name.get(name)
        kind = table.arrow_type(array.type)
        distinct = pc.count_distinct(array, mode="only_valid").as_py() if kind else 0
        values = tuple(sorted(v for v in pc.unique(array).to_pylist() if v is not None)) \
            if kind and distinct <= CLOSED_DOMAIN_MAX_VALUES else ()
        std_dev = feature.num_stats.std_dev if feature is not None and feature.HasField("num_stats") else 0.0
        mean_length = (pc.mean(pc.utf8_length(array)).as_py() or 0.0) if kind == BYTES else 0.0
        found.append(Column(name, kind, len(array), array.null_count, distinct, values, mean_length, std_dev,
                            **(_text_profile(array) if kind == BYTES else {})))
    return found


def _numbers(array: pa.Array) -> dict[str, Any]:
    """How many of a text column's values are numbers, written as most of them are (plain, or
    with digit grouping in one of NUMBER_FORMATS; plain first, then in that order when as
    many match), and the rest, if few, named and counted."""
    import pyarrow as pa
    import pyarrow.compute as pc

    number_format, is_number = None, None
    for candidate in (None, *NUMBER_FORMATS):
        matches = pc.fill_null(pc.match_substring_regex(array, f"^(?:{number_pattern(candidate)})$"), False)
        if is_number is None or pc.sum(matches).as_py() > pc.sum(is_number).as_py():
            number_format, is_number = candidate, matches
    numbers = array.filter(is_number)
    if not len(numbers):
        return {}
    plain = pc.utf8_trim_whitespace(numbers)
    decimal_mark = r"[.eE]"
    if number_format is not None:  # the grouping dropped, the decimal mark a point
        grouping, decimal = NUMBER_FORMATS[number_format]
        plain = pc.replace_substring(pc.replace_substring(plain, grouping, ""), decimal, ".")
        decimal_mark = re.escape(decimal)
    # Empty cells (nulls) are missing, not a text among the others.
    others = pc.value_counts(pc.utf8_trim_whitespace(array.filter(pc.and_(pc.invert(is_number),
                                                                          pc.is_valid(array))))).to_pylist()
    others.sort(key=lambda pair: (-pair["counts"], pair["values"]))
    return {
        "numbers": len(numbers),
        "number_values": pc.count_distinct(pc.cast(plain, pa.float64())).as_py(),
        "decimals": pc.any(pc.match_substring_regex(numbers, decimal_mark)).as_py(),
        "number_format": number_format,
        "not_numbers": tuple((p["values"], p["counts"]) for p in others) if len(others) <= MISSING_VALUES_MAX else (),
    }


def _text_profile(array: pa.Array) -> dict[str, Any]:
    """What the roles of a text column look at: its words, dates and numbers."""
    import pyarrow.compute as pc

    words = pc.mean(pc.list_value_length(pc.utf8_split_whitespace(array))).as_py() or 0.0
    return {"mean_words": words, **_dates(array), **_numbers(array)}


def _dates(array: pa.Array) -> dict[str, Any]:
    """How many of a text column's values are ISO dates, and the first and last (ISO text
    sorts by time)."""
    import pyarrow.compute as pc

    matching = array.filter(pc.fill_null(pc.match_substring_regex(array, f"^(?:{DATE_PATTERN})$"), False))
    if not len(matching):
        return {}
    span = pc.min_max(matching)
    return {"dates": len(matching), "first_date": span["min"].as_py(), "last_date": span["max"].as_py()}
