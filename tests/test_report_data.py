"""The run report's data table: each split's missing share and mean ± standard deviation (or
top value), from statistics TFDV computes over examples written as ExampleGen writes them
(a blank cell is an empty value list), checked against numpy on the same rows."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_data_validation as tfdv

from pipeline.report import files, page
from pipeline.report.records import RunRecords, SplitStatistics

SPLITS = {
    # x: a number with blanks (None); color: text; y: the label.
    "train": {"x": [1.0, 2.0, None, 4.0, 10.0, None, 3.0, 8.0], "color": ["red", "red", "blue", None, "red",
                                                                         "green", "blue", "red"]},
    "eval": {"x": [5.0, None, 7.0, 9.0], "color": ["blue", "blue", "red", "blue"]},
}


def _example(x: float | None, color: str | None) -> bytes:
    features = {"x": tf.train.Feature(float_list=tf.train.FloatList(value=[] if x is None else [x])),
                "color": tf.train.Feature(bytes_list=tf.train.BytesList(value=[] if color is None else [color.encode()])),
                "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[1]))}
    return tf.train.Example(features=tf.train.Features(feature=features)).SerializeToString()


@pytest.fixture(scope="module")
def statistics_artifact(tmp_path_factory):
    root = tmp_path_factory.mktemp("statistics")
    for split, columns in SPLITS.items():
        records = root / f"{split}.tfrecord"
        with tf.io.TFRecordWriter(str(records)) as writer:
            for x, color in zip(columns["x"], columns["color"]):
                writer.write(_example(x, color))
        stats = tfdv.generate_statistics_from_tfrecord(data_location=str(records))
        folder = root / f"{files.SPLIT_PREFIX}{split}"
        folder.mkdir()
        (folder / files.STATISTICS_FILE).write_bytes(stats.SerializeToString())
    return root


@pytest.mark.parametrize("split", list(SPLITS))
def test_each_split_reads_as_numpy_computes_it(statistics_artifact, split):
    rows, features = files.read_statistics(str(statistics_artifact), split)
    x = np.array([v for v in SPLITS[split]["x"] if v is not None])
    colors = SPLITS[split]["color"]
    assert rows == len(colors)
    assert features["x"].kind == "numeric"
    assert features["x"].mean == pytest.approx(x.mean())
    assert features["x"].std == pytest.approx(x.std())  # the population's, as TFDV gives it
    assert (features["x"].minimum, features["x"].maximum) == (x.min(), x.max())
    assert features["x"].missing_share == pytest.approx(SPLITS[split]["x"].count(None) / rows)
    present = [c for c in colors if c is not None]
    top = max(set(present), key=present.count)
    assert features["color"].top_values[0] == (top, pytest.approx(present.count(top) / rows))
    assert features["color"].unique == len(set(present))
    assert features["color"].missing_share == pytest.approx(colors.count(None) / rows)


def test_the_table_puts_each_splits_numbers_in_its_own_column(statistics_artifact):
    statistics = {split: SplitStatistics(*files.read_statistics(str(statistics_artifact), split))
                  for split in files.splits(str(statistics_artifact))}
    assert list(statistics) == ["train", "eval"]  # train first
    records = RunRecords(summary=None, lineage={"dataset": {"label": "y"}}, statistics=statistics,  # type: ignore[arg-type]
                         anomalies=None, curves={}, labels={})
    html = page._data(records)
    cells = {row[0]: row for row in
             ([re.sub("<[^>]+>", "", cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", tr)]
              for tr in re.findall(r"<tr>(.*?)</tr>", html)) if row}
    train_x = np.array([v for v in SPLITS["train"]["x"] if v is not None])
    eval_x = np.array([v for v in SPLITS["eval"]["x"] if v is not None])
    assert cells["x"] == ["x", "numeric", "25.0%", "25.0%",
                          f"{train_x.mean():.4g} ± {train_x.std():.3g}", f"{eval_x.mean():.4g} ± {eval_x.std():.3g}"]
    assert cells["color"] == ["color", "categorical", "12.5%", "0.0%", "red (50%; 3 distinct)",
                              "blue (75%; 2 distinct)"]
    assert cells["y"][1] == "numeric (label)"
