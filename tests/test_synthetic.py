"""The synthetic e-commerce dataset: deterministic, shaped like the spec, learnable."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline import datasets
from pipeline.datasets import synthetic


def _read(directory) -> pd.DataFrame:
    return pd.concat(pd.read_csv(p, keep_default_na=True) for p in sorted(directory.glob("*.csv")))


def test_same_rows_give_the_same_files_whatever_the_workers(tmp_path):
    rows = synthetic.ROWS_PER_SHARD + 5_000  # two shards
    one = synthetic.generate(tmp_path / "one", rows, workers=1)
    two = synthetic.generate(tmp_path / "two", rows, workers=2)
    assert one == two and one["shards"] == 2
    names = sorted(p.name for p in (tmp_path / "one").iterdir())
    assert names == ["part-00000-of-00002.csv", "part-00001-of-00002.csv"]
    for name in names:
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()
    assert json.loads((tmp_path / "one.json").read_text()) == one
    assert not list(tmp_path.glob(".one-*")), "no staging directory left behind"


def test_columns_vocabularies_and_missing_values(tmp_path):
    synthetic.generate(tmp_path / "data", 100_000)
    frame = _read(tmp_path / "data")
    assert len(frame) == 100_000
    _agrees_with_the_curated_schema(frame)
    # Vocabularies from ten values up to tens of thousands of products.
    assert frame["country"].nunique() == 200
    assert frame["brand"].nunique() > 5_000
    assert frame["product_id"].nunique() > 30_000
    assert frame["product_id"].str.fullmatch(r"product_\d{6}").all()
    # First visits have no previous visit: missing, not zero.
    missing = frame["days_since_last_visit"].isna().mean()
    assert 0.08 < missing < 0.12
    assert frame.drop(columns="days_since_last_visit").notna().all().all()
    assert set(frame["purchased"]) == {0, 1}


def _agrees_with_the_curated_schema(frame: pd.DataFrame) -> None:
    """The rows as the pipeline will check them: the schema ImportSchemaGen reads (and the
    dataset file, which names the same columns) is the definition, not the generator's own
    constants: its columns, types, ranges, closed domains and required features."""
    spec = datasets.load("synthetic")
    schema = text_format.Parse(spec.schema.read_text(), schema_pb2.Schema())
    features = {feature.name: feature for feature in schema.feature}
    assert set(frame.columns) == set(features) == {spec.label, *(f.name for f in spec.features)}
    domains = {domain.name: set(domain.value) for domain in schema.string_domain}
    for name, feature in features.items():
        values = frame[name].dropna()
        if feature.presence.min_fraction == 1.0:
            assert len(values) == len(frame), f"{name} is required"
        if feature.type == schema_pb2.BYTES:
            assert values.map(type).eq(str).all(), name
            if feature.domain:
                assert set(values) == domains[feature.domain], name  # every value seen, none outside
            continue
        kind = "int_domain" if feature.type == schema_pb2.INT else "float_domain"
        if feature.type == schema_pb2.INT:
            assert (values == values.round()).all(), f"{name} holds fractions"
        domain = getattr(feature, kind)
        assert values.min() >= domain.min and values.max() <= domain.max, (name, values.min(), values.max())


def test_the_label_carries_a_learnable_signal(tmp_path):
    manifest = synthetic.generate(tmp_path / "data", 50_000)
    frame = _read(tmp_path / "data")
    majority = max(manifest["positive_rate"], 1 - manifest["positive_rate"])
    # The best possible classifier beats always guessing the majority class by far.
    assert manifest["bayes_accuracy"] > majority + 0.1
    deep_discounts = frame["discount_pct"] > frame["discount_pct"].quantile(0.9)
    no_discounts = frame["discount_pct"] < frame["discount_pct"].quantile(0.1)
    assert frame.loc[deep_discounts, "purchased"].mean() > frame.loc[no_discounts, "purchased"].mean() + 0.15


def test_a_failed_shard_leaves_no_dataset(tmp_path, monkeypatch):
    real_write = synthetic._write_shard

    def fail_on_second_shard(job):
        if job[1] == 1:
            raise OSError("disk full")
        return real_write(job)

    monkeypatch.setattr(synthetic, "_write_shard", fail_on_second_shard)
    with pytest.raises(OSError, match="disk full"):
        synthetic.generate(tmp_path / "data", synthetic.ROWS_PER_SHARD + 10, workers=1)
    assert list(tmp_path.iterdir()) == []


def test_rows_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="rows must be positive"):
        synthetic.generate(tmp_path / "data", 0)
    assert np.all([not p.exists() for p in tmp_path.iterdir()])
