"""A date column's text as numbers, inside the Transform graph: the SavedModel parses a raw
date exactly as training did, so serving_raw takes the date as people write it.

Only TF string and integer ops (no Python datetime): the graph runs in Beam, in TF Serving
and in TFMA alike. The calendar arithmetic is Howard Hinnant's days_from_civil (proleptic
Gregorian, any year).
"""

from __future__ import annotations

import dataclasses
import math

import tensorflow as tf

from trainer_module import features

# Month lengths in a common year; February gains a day in a leap year.
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
# 1970-01-01, day 0, was a Thursday: weekday 3 counting Monday as 0.
_EPOCH_WEEKDAY = 3


@dataclasses.dataclass(frozen=True)
class Parsed:
    """Float32 [batch] tensors; where `valid` is False (missing, not ISO, no such day) the
    numbers are those of a placeholder date and must not be used."""

    valid: tf.Tensor
    days: tf.Tensor  # since 1970-01-01
    year: tf.Tensor
    month: tf.Tensor  # 0 (January) to 11
    weekday: tf.Tensor  # 0 (Monday) to 6
    yearday: tf.Tensor  # 0 (1 January) to 365
    hour: tf.Tensor  # 0 to 24, minutes as a fraction; 0 for a date without a time

    def cycle(self, name: str) -> tf.Tensor:
        """The position in one of features.DATE_CYCLES."""
        return getattr(self, name)


def parse(text: tf.Tensor) -> Parsed:
    """Each ISO date or datetime (features.DATE_PATTERN) of a [batch] string tensor."""
    valid = tf.strings.regex_full_match(text, features.DATE_PATTERN)
    safe = tf.where(valid, text, "1970-01-01")

    def number(start: int, length: int) -> tf.Tensor:
        return tf.strings.to_number(tf.strings.substr(safe, start, length), tf.int64)

    year, month, day = number(0, 4), number(5, 2), number(8, 2)
    has_time = tf.strings.regex_full_match(safe, r".{10}[T ].*")
    no_time = tf.constant(0, tf.int64)
    hour = tf.where(has_time, _time_part(safe, 11), no_time)
    minute = tf.where(has_time, _time_part(safe, 14), no_time)
    leap = tf.logical_or(tf.logical_and(year % 4 == 0, year % 100 != 0), year % 400 == 0)
    month_index = tf.clip_by_value(month - 1, 0, 11)
    month_days = tf.gather(tf.constant(_MONTH_DAYS, tf.int64), month_index) + tf.cast(
        tf.logical_and(leap, month == 2), tf.int64)
    valid = tf.logical_and(valid, tf.reduce_all(tf.stack([
        month >= 1, month <= 12, day >= 1, day <= month_days, hour < 24, minute < 60,
    ]), axis=0))
    days = days_from_civil(year, month, day)
    return Parsed(
        valid=valid,
        days=tf.cast(days, tf.float32),
        year=tf.cast(year, tf.float32),
        month=tf.cast(month_index, tf.float32),
        weekday=tf.cast(tf.math.floormod(days + _EPOCH_WEEKDAY, 7), tf.float32),
        yearday=tf.cast(days - days_from_civil(year, tf.ones_like(month), tf.ones_like(day)), tf.float32),
        hour=tf.cast(hour, tf.float32) + tf.cast(minute, tf.float32) / 60.0,
    )


def _time_part(text: tf.Tensor, start: int) -> tf.Tensor:
    """Two digits at `start`, or 0 where the text has none there (a date alone: padded, as
    Substr fails past the end)."""
    digits = tf.strings.substr(tf.strings.join([text, "     "]), start, 2)
    return tf.strings.to_number(tf.where(tf.strings.regex_full_match(digits, r"\d\d"), digits, "0"), tf.int64)


def days_from_civil(year: tf.Tensor, month: tf.Tensor, day: tf.Tensor) -> tf.Tensor:
    """Days since 1970-01-01 of int64 year, month (1-12), day (1-31) tensors."""
    year = year - tf.cast(month <= 2, tf.int64)
    era = tf.math.floordiv(year, 400)
    year_of_era = year - era * 400
    shifted_month = tf.math.floormod(month + 9, 12)  # March is 0: the leap day ends the year
    day_of_year = (153 * shifted_month + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def cyclic(parsed: Parsed, cycle: str) -> tuple[tf.Tensor, tf.Tensor]:
    """The sine and cosine of a date's position in a cycle; both 0 where it is not valid, a
    point no date takes, so a missing date carries no false signal."""
    angle = 2.0 * math.pi * parsed.cycle(cycle) / features.DATE_CYCLES[cycle]
    zero = tf.zeros_like(angle)
    return tf.where(parsed.valid, tf.sin(angle), zero), tf.where(parsed.valid, tf.cos(angle), zero)
