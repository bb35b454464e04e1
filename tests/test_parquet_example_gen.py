"""Parquet rows become tf.Examples typed as TFX types them, with zeros kept."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import tensorflow as tf

from components.parquet_example_gen.executor import row_to_example


def test_zeros_and_false_are_values_and_only_null_nan_or_empty_is_missing():
    example = row_to_example({"won": 0, "score": 0.0, "flag": False, "name": "", "gone": None,
                              "nan": math.nan, "city": "Oslo", "count": 3})
    features = example.features.feature
    assert list(features["won"].int64_list.value) == [0]
    assert list(features["score"].float_list.value) == [0.0]
    assert list(features["flag"].int64_list.value) == [0]
    assert list(features["city"].bytes_list.value) == [b"Oslo"]
    assert list(features["count"].int64_list.value) == [3]
    for missing in ("name", "gone", "nan"):
        assert features[missing] == tf.train.Feature(), missing


def test_rows_as_beam_reads_them_from_a_parquet_file(tmp_path):
    # The values Beam's ReadFromParquet yields (python scalars, None for null) convert alike.
    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({"label": [0, 1, None], "x": [0.0, None, 2.5], "s": ["a", None, "b"]}), path)
    rows = pq.read_table(path).to_pylist()
    examples = [row_to_example(row).features.feature for row in rows]
    assert [list(e["label"].int64_list.value) for e in examples] == [[0], [1], []]
    assert [list(e["x"].float_list.value) for e in examples] == [[0.0], [], [2.5]]
    assert [list(e["s"].bytes_list.value) for e in examples] == [[b"a"], [], [b"b"]]
