"""The scoring job on Beam: rows read from each input file, checked against the curated
schema, scored in batches through the served version's serving_raw signature (Transform
inside), written as sharded CSV or Parquet. A row the schema refuses goes to errors-* with
its reasons, and the job goes on."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from typing import Any, Iterator, Sequence

import apache_beam as beam
from apache_beam.metrics import Metrics

from serving.rows import RowSchema

ERRORS = "errors"
SAMPLED = "sampled"  # rows with their features and output, the sample drawn from
# Rows read, checked, scored (one call of the signature) and written together.
BATCH_ROWS = 2048
NAMESPACE = "turbotfx.score"
SCORED, REFUSED = "rows_scored", "rows_refused"
SCORES_PREFIX, ERRORS_PREFIX, SAMPLE_NAME = "scores", "errors", "sample.jsonl"


@dataclasses.dataclass(frozen=True)
class Columns:
    """The output's columns: the ids passed through, the prediction, every class's
    probability (a classifier), the model version."""

    ids: tuple[str, ...]
    predicted: str  # predicted_<label>
    probabilities: tuple[str, ...]  # probability_<class>, in the model's class order
    version: str = "model_version"

    @property
    def names(self) -> tuple[str, ...]:
        return (*self.ids, self.predicted, *self.probabilities, self.version)


@dataclasses.dataclass(frozen=True)
class JobSpec:
    files: tuple[str, ...]
    input_format: str  # csv | parquet
    output_format: str  # csv | parquet
    staging: str  # the folder the job writes into (renamed to the output once complete)
    model_dir: str
    model_version: int
    schema: RowSchema
    columns: Columns
    sample_size: int


def build(pipeline: beam.Pipeline, spec: JobSpec) -> None:
    checked = (pipeline
               | "Files" >> beam.Create(spec.files)
               | "Read" >> beam.ParDo(_ReadRows(spec.input_format, spec.schema))
               | "Check" >> beam.ParDo(_Check(spec.schema, spec.columns.ids)).with_outputs(ERRORS, main="rows"))
    scored = checked.rows | "Score" >> beam.ParDo(_Score(spec)).with_outputs(SAMPLED, main="outputs")
    _write_scores(scored.outputs, spec)
    _ = (checked[ERRORS]
         | "ErrorLines" >> beam.Map(lambda refused: "\n".join(_csv_line(r) for r in refused))
         | "WriteErrors" >> beam.io.WriteToText(f"{spec.staging}/{ERRORS_PREFIX}", file_name_suffix=".csv",
                                               header=_csv_line(["file", "line", *spec.columns.ids, "reason"])))
    _ = (scored[SAMPLED]
         | "SampledRows" >> beam.FlatMap(lambda rows: rows)
         | "Sample" >> beam.combiners.Sample.FixedSizeGlobally(spec.sample_size)
         | "SampleLines" >> beam.FlatMap(lambda sample: [json.dumps(s) for s in sample])
         | "WriteSample" >> beam.io.WriteToText(f"{spec.staging}/{SAMPLE_NAME}", shard_name_template=""))


def _write_scores(scored, spec: JobSpec) -> None:
    """Each element a batch of output rows: one Parquet table, or one run of CSV lines."""
    names = spec.columns.names
    if spec.output_format == "parquet":
        import pyarrow as pa

        fields = [pa.field(n, pa.string()) for n in spec.columns.ids]
        fields.append(pa.field(spec.columns.predicted, pa.string() if spec.columns.probabilities else pa.float64()))
        fields += [pa.field(n, pa.float64()) for n in spec.columns.probabilities]
        fields.append(pa.field(spec.columns.version, pa.int64()))
        schema = pa.schema(fields)
        _ = (scored
             | "Tables" >> beam.Map(lambda batch: pa.Table.from_pylist([dict(zip(names, out)) for out in batch],
                                                                     schema=schema))
             | "WriteParquet" >> beam.io.WriteToParquetBatched(f"{spec.staging}/{SCORES_PREFIX}", schema,
                                                               file_name_suffix=".parquet"))
        return
    _ = (scored
         | "Lines" >> beam.Map(lambda batch: "\n".join(_csv_line(out) for out in batch))
         | "WriteCsv" >> beam.io.WriteToText(f"{spec.staging}/{SCORES_PREFIX}", file_name_suffix=".csv",
                                            header=_csv_line(names)))


def _csv_line(cells: Sequence[Any]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="").writerow(["" if c is None else c for c in cells])
    return buffer.getvalue()


def _id_text(value: Any) -> str | None:
    """An id as text (Parquet: as stored, a whole float without its .0)."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _ReadRows(beam.DoFn):
    """A file's rows in batches of BATCH_ROWS, each row as (file, line, row): CSV lines
    counted from the header's 1, Parquet rows from 1. Batches, not rows, travel between the
    steps: Beam's cost per element is paid once per batch."""

    def __init__(self, input_format: str, schema: RowSchema) -> None:
        self._format, self._schema = input_format, schema

    def process(self, path: str) -> Iterator[list[tuple[str, int, dict[str, Any], int]]]:
        yield from _batches(self._rows(path))

    def _rows(self, path: str) -> Iterator[tuple[str, int, dict[str, Any], int]]:
        """(file, line, row, the row's cells beyond the header's last column)."""
        if self._format == "parquet":
            import pyarrow.parquet as pq

            for number, row in enumerate(pq.read_table(path).to_pylist(), start=1):
                yield path, number, row, 0
            return
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            for record in reader:
                extra = record.pop(None, None)  # DictReader puts cells past the last column under None
                yield path, reader.line_num, self._schema.csv_row(record), len(extra or ())


def _batches(rows: Iterator[Any]) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for row in rows:
        batch.append(row)
        if len(batch) == BATCH_ROWS:
            yield batch
            batch = []
    if batch:
        yield batch


class _Check(beam.DoFn):
    """Of a batch, the rows the curated schema allows go on as (where, ids, model features);
    those it refuses go to ERRORS as (file, line, ids..., reasons)."""

    def __init__(self, schema: RowSchema, ids: Sequence[str]) -> None:
        self._schema, self._ids = schema, tuple(ids)
        self._refused = Metrics.counter(NAMESPACE, REFUSED)

    def process(self, batch: list[tuple[str, int, dict[str, Any], int]]):
        allowed, refused = [], []
        for path, line, row, extra in batch:
            features = {name: row.get(name) for name in self._schema.features}
            ids = [_id_text(row.get(name)) for name in self._ids]
            problems = self._schema.problems(line, features)
            if extra:
                problems.insert(0, f"row {line}: has {extra} more cell(s) than the header has columns; "
                                   "quote a value that holds a comma, or drop the extra cells")
            if problems:
                reasons = "; ".join(p.removeprefix(f"row {line}: ") for p in problems)
                refused.append([path, line, *ids, reasons])
            else:
                allowed.append({"where": [path, line], "ids": ids, "features": features})
        if refused:
            self._refused.inc(len(refused))
            yield beam.pvalue.TaggedOutput(ERRORS, refused)
        if allowed:
            yield allowed


class _Score(beam.DoFn):
    """A batch of rows through serving_raw: one call; the batch's output rows (ids,
    prediction, version), and its first rows with their features to SAMPLED."""

    def __init__(self, spec: JobSpec) -> None:
        self._spec = spec
        self._scored = Metrics.counter(NAMESPACE, SCORED)

    def setup(self) -> None:
        from serving import forest_ops
        from serving.contract import SERVING_RAW

        self._signature = forest_ops.load(self._spec.model_dir).signatures[SERVING_RAW]
        self._dtypes = {name: spec.dtype for name, spec in self._signature.structured_input_signature[1].items()}

    def process(self, batch: list[dict]) -> Iterator[Any]:
        import tensorflow as tf

        from serving.contract import OUTPUT_LABEL, OUTPUT_PREDICTION, OUTPUT_PROBABILITIES

        instances = [self._spec.schema.to_instance(item["features"]) for item in batch]
        outputs = self._signature(**{name: tf.constant([i[name] for i in instances], dtype=dtype)
                                     for name, dtype in self._dtypes.items()})
        if OUTPUT_PREDICTION in outputs:
            predicted = [[float(v)] for v in outputs[OUTPUT_PREDICTION].numpy().reshape(-1).tolist()]
        else:
            labels = [v.decode() for v in outputs[OUTPUT_LABEL].numpy().reshape(-1).tolist()]
            probabilities = outputs[OUTPUT_PROBABILITIES].numpy().tolist()
            predicted = [[label, *p] for label, p in zip(labels, probabilities)]
        self._scored.inc(len(batch))
        outputs = [[*item["ids"], *prediction, self._spec.model_version] for item, prediction in zip(batch, predicted)]
        # The sample is drawn from each batch's first rows: only they travel with their features.
        yield beam.pvalue.TaggedOutput(SAMPLED, [{**item, "out": out} for item, out in
                                                 zip(batch[:self._spec.sample_size], outputs)])
        yield outputs
