"""What `turbotfx drift` compares, as columns of plain values per model feature: a split of
the data the served version was trained on (ExampleGen's tf.Examples, found through the
store's lineage) and the new batch's rows (CSV or Parquet, read as `score` reads them)."""

from __future__ import annotations

import csv
import dataclasses
import glob
import math
from pathlib import Path
from typing import Any, Mapping, Sequence

from pipeline.errors import ConfigError
from pipeline.scoring.drift_stats import Kind

# The kinds drift_stats compares; dates and free text are not compared (their values are
# nearly all distinct: a distance over them says nothing).
NUMERIC, CATEGORICAL = "numeric", "categorical"
# Training rows read at most (a uniform sample beyond): the null band needs the split's
# shape, not every row, and drift must stay quick on a table of millions.
REFERENCE_ROWS = 100_000


@dataclasses.dataclass(frozen=True)
class Split:
    columns: dict[str, list[Any]]  # feature -> one value per row (None: missing)
    serialized: list[bytes]  # the rows as tf.Examples, as the model's serving_default takes them
    rows: int


def feature_kinds(spec) -> dict[str, Kind]:
    """The model features drift compares (a datasets.Dataset's), by kind."""
    return {f.name: "numeric" if f.role == NUMERIC else "categorical"
            for f in spec.model_features if f.role in (NUMERIC, CATEGORICAL)}


def read_split(examples_uri: str, split: str, kinds: Mapping[str, str], extra: Sequence[str] = (),
               limit: int = REFERENCE_ROWS, seed: int = 0) -> Split:
    """One split of ExampleGen's output: every feature in kinds (and extra, e.g. the label)."""
    import numpy as np
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    files = sorted(glob.glob(f"{examples_uri}/Split-{split}/*"))
    if not files:
        raise ConfigError(f"the {split} split of the data this model was trained on is gone ({examples_uri}); "
                          "rerun the pipeline (`turbotfx run`) to train on data that is there")
    serialized = [record.numpy() for record in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    if len(serialized) > limit:
        keep = np.random.default_rng(seed).choice(len(serialized), limit, replace=False)
        serialized = [serialized[i] for i in sorted(keep)]
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(serialized)
    columns = {}
    for name in (*kinds, *extra):
        index = batch.schema.get_field_index(name)
        values = batch.column(index).to_pylist() if index >= 0 else [None] * batch.num_rows
        columns[name] = [_value(v[0] if v else None, kinds.get(name, CATEGORICAL)) for v in values]
    return Split(columns=columns, serialized=serialized, rows=batch.num_rows)


def read_batch(files: Sequence[Path], fmt: str, kinds: Mapping[str, str]) -> dict[str, list[Any]]:
    """The batch's values of each feature: numbers as floats (text that is none, missing),
    categories as text (a value training never saw kept: it is the out-of-vocabulary share)."""
    columns: dict[str, list[Any]] = {name: [] for name in kinds}
    for path in files:
        for row in _rows(path, fmt):
            for name, kind in kinds.items():
                columns[name].append(_value(row.get(name), kind))
    if not columns or not next(iter(columns.values())):
        raise ConfigError(f"{', '.join(map(str, files))} holds no rows; give a file with rows to compare")
    return columns


def _rows(path: Path, fmt: str):
    if fmt == "parquet":
        import pyarrow.parquet as pq

        yield from pq.read_table(path).to_pylist()
        return
    with open(path, newline="", encoding="utf-8-sig") as handle:
        yield from csv.DictReader(handle)


def _value(value: Any, kind: str) -> Any:
    """A cell as drift compares it: None when missing (empty, NA, NaN, or no number); an
    infinite number (inf, 1e400) kept, to count as out of range."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if value is None or (isinstance(value, str) and value.strip() in ("", "NA")):
        return None
    if kind == NUMERIC:
        try:
            number = float(value)
        except (TypeError, ValueError):
            return None
        return None if math.isnan(number) else number  # infinity kept: it is out of range
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
