"""CSV to tf.Examples as TFX's CsvExampleGen makes them, with the header read as the rows are.

TFX's executor reads the header with io_utils.load_csv_column_names, which splits the first
line on commas: a UTF-8 byte-order mark stays in the first column's name and quotes in every
quoted name, so the curated schema finds new columns and misses its own. The rows it already
reads with Python's csv module (tfx_bsl's ParseCSVLine), after skipping the first line, so
the mark never reaches them. Here only the header is read otherwise (header.column_names);
the reading, typing and conversion of the rows are TFX's own pieces.
"""

from __future__ import annotations

import apache_beam as beam
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
from tfx.dsl.io import fileio
from tfx_bsl.coders import csv_decoder

from components.csv_example_gen import header


def column_names(path: str) -> list[str]:
    """A CSV file's column names, as header.column_names reads its first line."""
    with fileio.open(path, "rb") as handle:
        return header.column_names(handle.readline())


@beam.typehints.with_input_types(beam.Pipeline)
@beam.typehints.with_output_types(tf.train.Example)
class _CsvToExample(tfx_csv._CsvToExample):
    """TFX's transform (made from the exec_properties and a split pattern) but for the header."""

    def expand(self, pipeline: beam.Pipeline) -> beam.pvalue.PCollection:
        # TFX's expand, step for step and with its step names, but for the header.
        csv_files = fileio.glob(self._csv_pattern)
        if not csv_files:
            raise RuntimeError(f"Split pattern {self._csv_pattern} does not match any files.")
        names = column_names(csv_files[0])
        for path in csv_files[1:]:
            if column_names(path) != names:
                raise RuntimeError(f"Files in same split {self._csv_pattern} have different header.")
        # Each file is read in order, so that a quoted field running over lines stays one row.
        parsed_csv_lines = (
            pipeline
            | "CreateFilenames" >> beam.Create(csv_files)
            | "ReadFromText" >> beam.ParDo(tfx_csv._ReadCsvRecordsFromTextFile())
            | "ParseCSVLine" >> beam.ParDo(csv_decoder.ParseCSVLine(delimiter=header.DELIMITER))
            | "ExtractParsedCSVLines" >> beam.Keys())
        column_infos = beam.pvalue.AsSingleton(
            parsed_csv_lines
            | "InferColumnTypes" >> beam.CombineGlobally(
                csv_decoder.ColumnTypeInferrer(names, skip_blank_lines=True)))
        return parsed_csv_lines | "ToTFExample" >> beam.ParDo(tfx_csv._ParsedCsvToTfExample(), column_infos)


class Executor(tfx_csv.Executor):
    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 (TFX's name)
        return _CsvToExample
