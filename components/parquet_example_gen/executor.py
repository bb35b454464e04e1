"""Parquet to tf.Examples for FileBasedExampleGen, with missing meaning missing.

TFX's parquet_executor converts rows with example_gen.utils.dict_to_example, which tests
`if not value`: every 0, 0.0 and False becomes a missing value, so a 0/1 label fails the
schema and zeros in a numeric column are imputed as the mean. Here only null (and NaN, and
an empty string, as an empty CSV cell is) is missing; types follow TFX's: integers (and
booleans) int64, floats float, strings bytes, dates and timestamps ISO text (bytes).
"""

from __future__ import annotations

import datetime
import math
import os
from typing import Any

import apache_beam as beam
import tensorflow as tf
from tfx.components.example_gen.base_example_gen_executor import BaseExampleGenExecutor
from tfx.types import standard_component_specs

from components.parquet_example_gen.formats import DATE_FORMAT, TIMESTAMP_FORMAT


def row_to_example(row: dict[str, Any]) -> tf.train.Example:
    features = {}
    for key, value in row.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        present = [v for v in values if not _missing(v)]
        feature = tf.train.Feature()
        if present and isinstance(present[0], (bool, int)):
            feature.int64_list.value.extend(int(v) for v in present)
        elif present and isinstance(present[0], float):
            feature.float_list.value.extend(present)
        elif present:
            feature.bytes_list.value.extend(_text(v) for v in present)
        features[key] = feature
    return tf.train.Example(features=tf.train.Features(feature=features))


def _text(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, datetime.datetime):  # pandas' Timestamp too
        return value.strftime(TIMESTAMP_FORMAT).encode()
    if isinstance(value, datetime.date):
        return value.strftime(DATE_FORMAT).encode()
    return str(value).encode()


def _missing(value: Any) -> bool:
    return value is None or value in ("", b"") or (isinstance(value, float) and math.isnan(value))


@beam.ptransform_fn
@beam.typehints.with_input_types(beam.Pipeline)
@beam.typehints.with_output_types(tf.train.Example)
def _ParquetToExample(pipeline: beam.Pipeline, exec_properties: dict[str, Any],  # noqa: N802 (Beam's naming)
                      split_pattern: str) -> beam.pvalue.PCollection:
    pattern = os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY], split_pattern)
    return (pipeline
            | "ReadFromParquet" >> beam.io.ReadFromParquet(pattern)
            | "ToTFExample" >> beam.Map(row_to_example))


class Executor(BaseExampleGenExecutor):
    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 (TFX's name)
        # TFX declares a PTransform but applies what it gets as a ptransform_fn (a callable).
        return _ParquetToExample  # type: ignore[return-value]
