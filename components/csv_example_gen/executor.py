"""CSV to tf.Examples as TFX's CsvExampleGen makes them, with the header read as the rows are.

TFX's executor reads the header with io_utils.load_csv_column_names, which splits the first
line on commas: a UTF-8 byte-order mark stays in the first column's name and quotes in every
quoted name, so the curated schema finds new columns and misses its own. The rows it already
reads with Python's csv module (tfx_bsl's ParseCSVLine), after skipping the first line, so
the mark never reaches them. Here only the header is read otherwise (dialect.column_names);
the reading, typing and conversion of the rows are TFX's own pieces.

That path costs about 150 µs a row. When the output is hash-split tf.Examples (the
pipeline's case), Do first tries arrow_csv: the same examples, byte for byte, in the same
splits, read and encoded in C++ and written per input file (no per-row Beam steps). Files
beyond it (see arrow_csv) go TFX's way, the whole split together.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any, cast

import apache_beam as beam
import tensorflow as tf
from tfx import types
from tfx.components.example_gen import utils, write_split
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
from tfx.components.util import examples_utils
from tfx.dsl.io import fileio
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs
from tfx.utils import proto_utils
from tfx_bsl.coders import csv_decoder

from components.csv_example_gen import arrow_csv, dialect

# Where the Arrow pass leaves the split's column types (JSON; null: beyond it) for Do to read.
_TYPES_FILE = ".arrow_csv_types.json"


def column_names(path: str) -> list[str]:
    """A CSV file's column names, as dialect.column_names reads its first line."""
    with fileio.open(path, "rb") as handle:
        return dialect.column_names(handle.readline())


def split_files(pattern: str) -> tuple[list[str], list[str]]:
    """The files of a split pattern and their common column names (TFX's checks and errors)."""
    csv_files = cast(list[str], fileio.glob(pattern))  # a str pattern globs str paths
    if not csv_files:
        raise RuntimeError(f"Split pattern {pattern} does not match any files.")
    names = column_names(csv_files[0])
    for path in csv_files[1:]:
        if column_names(path) != names:
            raise RuntimeError(f"Files in same split {pattern} have different header.")
    return csv_files, names


@beam.typehints.with_input_types(beam.Pipeline)
@beam.typehints.with_output_types(tf.train.Example)
class _CsvToExample(tfx_csv._CsvToExample):
    """TFX's transform (made from the exec_properties and a split pattern) but for the header."""

    def expand(self, pipeline: beam.Pipeline) -> beam.pvalue.PCollection:
        # TFX's expand, step for step and with its step names, but for the header.
        csv_files, names = split_files(self._csv_pattern)
        # Each file is read in order, so that a quoted field running over lines stays one row.
        parsed_csv_lines = (
            pipeline
            | "CreateFilenames" >> beam.Create(csv_files)
            | "ReadFromText" >> beam.ParDo(tfx_csv._ReadCsvRecordsFromTextFile())
            | "ParseCSVLine" >> beam.ParDo(csv_decoder.ParseCSVLine(delimiter=dialect.DELIMITER))
            | "ExtractParsedCSVLines" >> beam.Keys())
        column_infos = beam.pvalue.AsSingleton(
            parsed_csv_lines
            | "InferColumnTypes" >> beam.CombineGlobally(
                csv_decoder.ColumnTypeInferrer(names, skip_blank_lines=True)))
        return parsed_csv_lines | "ToTFExample" >> beam.ParDo(tfx_csv._ParsedCsvToTfExample(), column_infos)


class _WriteFileSplits(beam.DoFn):
    """Writes one input file's examples, one TFRecord file per output split, named as Beam
    names its shards; nothing when the split's types say it is beyond the Arrow path."""

    def __init__(self, names: list[str], buckets: list[int], split_config: example_gen_pb2.SplitConfig,
                 split_uris: list[str], file_count: int) -> None:
        self._names, self._buckets, self._split_config = names, buckets, split_config
        self._split_uris, self._file_count = split_uris, file_count

    def process(self, indexed_path: tuple[int, str], types: dict[str, int] | None) -> None:
        if types is None:
            return
        index, path = indexed_path
        for split, records in arrow_csv.examples_by_split(path, self._names, types, self._buckets,
                                                          self._split_config):
            # TFX's WriteSplit reshuffles: rows sorted in a file (by label, by date) come
            # out mixed here too, reproducibly.
            random.Random(index).shuffle(records)
            name = f"{write_split.DEFAULT_FILE_NAME}-{index:05d}-of-{self._file_count:05d}.gz"
            _write_records(os.path.join(self._split_uris[split], name), records)


def _write_records(path: str, records: list[bytes]) -> None:
    """A gzipped TFRecord file, appearing whole (a retried bundle rewrites it)."""
    staging = f"{path}.incomplete"
    with tf.io.TFRecordWriter(staging, options="GZIP") as writer:
        for record in records:
            writer.write(record)
    fileio.rename(staging, path, overwrite=True)


def _write_types(path: str, types: dict[str, int] | None) -> None:
    with fileio.open(path, "w") as handle:
        handle.write(json.dumps(types))


class Executor(tfx_csv.Executor):
    def GetInputSourceToExamplePTransform(self) -> beam.PTransform:  # noqa: N802 (TFX's name)
        # TFX declares a PTransform but applies what it gets as a ptransform_fn (a callable).
        return _CsvToExample  # type: ignore[return-value]

    def Do(self, input_dict: dict[str, list[types.Artifact]], output_dict: dict[str, list[types.Artifact]],
           exec_properties: dict[str, Any]) -> None:  # noqa: N802 (TFX's name)
        if not self._do_with_arrow(output_dict, exec_properties):
            super().Do(input_dict, output_dict, exec_properties)

    def _do_with_arrow(self, output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> bool:
        """Writes the splits with arrow_csv; False (nothing written) where that path does not
        apply: another output than hash-split, gzipped tf.Examples, or files beyond it."""
        input_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.INPUT_CONFIG_KEY], example_gen_pb2.Input())
        output_config = proto_utils.json_to_proto(
            exec_properties[standard_component_specs.OUTPUT_CONFIG_KEY], example_gen_pb2.Output())
        split_config = output_config.split_config
        payload = exec_properties.get(standard_component_specs.OUTPUT_DATA_FORMAT_KEY)
        file_format = exec_properties.get(standard_component_specs.OUTPUT_FILE_FORMAT_KEY)
        if (len(input_config.splits) != 1 or not split_config.splits or split_config.HasField("partition_feature_name")
                or payload not in (None, example_gen_pb2.FORMAT_TF_EXAMPLE)
                or file_format not in (None, example_gen_pb2.FILE_FORMAT_UNSPECIFIED,
                                       example_gen_pb2.FORMAT_TFRECORDS_GZIP)):
            return False
        files, names = split_files(os.path.join(exec_properties[standard_component_specs.INPUT_BASE_KEY],
                                                input_config.splits[0].pattern))
        examples = artifact_utils.get_single_instance(output_dict[standard_component_specs.EXAMPLES_KEY])
        split_names = utils.generate_output_split_names(input_config, output_config)
        examples.split_names = artifact_utils.encode_split_names(split_names)  # as TFX's Do, first
        split_uris = [artifact_utils.get_split_uri([examples], name) for name in split_names]
        buckets = [sum(s.hash_buckets for s in split_config.splits[:i + 1]) for i in range(len(split_config.splits))]
        for uri in split_uris:
            fileio.makedirs(uri)
        types_path = os.path.join(examples.uri, _TYPES_FILE)
        with self._make_beam_pipeline() as pipeline:
            file_types = (pipeline
                          | "CreateFilenames" >> beam.Create(files)
                          | "SpreadFilenames" >> beam.Reshuffle()  # files over the workers, not one bundle
                          | "InspectWithArrow" >> beam.Map(arrow_csv.inspect, names)
                          | "CollectTypes" >> beam.combiners.ToList()
                          | "MergeTypes" >> beam.Map(arrow_csv.merge))
            split_types = beam.pvalue.AsSingleton(file_types)
            _ = file_types | "RecordTypes" >> beam.Map(lambda t: _write_types(types_path, t))
            _ = (pipeline
                 | "CreateIndexedFilenames" >> beam.Create(list(enumerate(files)))
                 | "SpreadFiles" >> beam.Reshuffle()
                 | "WriteSplits" >> beam.ParDo(
                     _WriteFileSplits(names, buckets, split_config, split_uris, len(files)), split_types))
        with fileio.open(types_path) as handle:
            written = json.load(handle) is not None
        fileio.remove(types_path)
        if not written:
            return False
        # What TFX's Do records for these settings.
        if payload:
            examples_utils.set_payload_format(examples, payload)
        if file_format:
            examples_utils.set_file_format(examples, write_split.to_file_format_str(file_format))
        return True
