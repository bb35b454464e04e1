"""The whole pipeline on a small synthetic dataset: large vocabularies, integer features."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest
import tensorflow as tf

from pipeline.config import PipelineConfig
from tests.conftest import cli
from trainer_module import signatures

pytestmark = pytest.mark.e2e

ROWS = 3000


@pytest.fixture(scope="module")
def synthetic_run(tmp_path_factory):
    home = tmp_path_factory.mktemp("synthetic")
    result = cli("run", "--dataset", "synthetic", "--rows", str(ROWS), "--epochs", "2",
                      "--steps-per-execution", "4", "--min-accuracy", "0.5", home=home)
    assert result.exit_code == 0, result.output
    config = PipelineConfig(home=str(home), dataset="synthetic", rows=ROWS)
    return result, config


def _first_rows(config: PipelineConfig, count: int) -> list[dict]:
    shard = sorted(config.data_path.glob("*.csv"))[0]
    with open(shard, newline="") as handle:
        return list(csv.DictReader(handle))[:count]


def test_run_pushes_a_model_and_reports_channel_slices(synthetic_run):
    result, config = synthetic_run
    assert re.search(r"^    channel=web +[01]\.\d{4}$", result.output, re.MULTILINE)
    assert "blessed: yes" in result.output
    # Blessed at --min-accuracy 0.5, a coin's accuracy on this binary label: the model must
    # also beat always answering the majority class, as counted here from the generated CSVs.
    labels: list[str] = []
    for shard in sorted(config.data_path.glob("*.csv")):
        with open(shard, newline="") as handle:
            labels += [row["purchased"] for row in csv.DictReader(handle)]
    majority_share = max(labels.count(value) for value in set(labels)) / len(labels)
    [accuracy] = re.findall(r"^  this model \(\w+\) +([01]\.\d{4})", result.output, re.MULTILINE)
    assert float(accuracy) > majority_share + 0.05, (accuracy, majority_share)
    manifest = json.loads((config.data_path.parent / f"rows-{ROWS}.json").read_text())
    assert manifest["rows"] == ROWS and 0.7 < manifest["bayes_accuracy"] < 0.9
    assert len(list(config.serving_dir.iterdir())) == 1


def test_raw_signature_takes_numbers_for_integer_columns_and_requires_required_features(synthetic_run):
    _, config = synthetic_run
    version = sorted(config.serving_dir.iterdir())[-1]
    serve_raw = tf.saved_model.load(str(version)).signatures[signatures.SERVING_RAW]
    rows = _first_rows(config, 16)
    numeric = ("price", "discount_pct", "session_seconds", "pages_viewed", "days_since_last_visit", "cart_items")
    inputs = {k: tf.constant([float(r[k]) if r[k] else np.nan for r in rows], tf.float32) for k in numeric}
    inputs.update({k: tf.constant([r[k] for r in rows]) for k in ("channel", "country", "category", "brand")})
    # A product never seen in training goes to the OOV bucket instead of failing.
    inputs["product_id"] = tf.constant(["product_999999"] + [r["product_id"] for r in rows[1:]])
    outputs = serve_raw(**inputs)
    assert outputs["probabilities"].shape == (16, 2)
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    assert set(outputs["label"].numpy()) <= {b"0", b"1"}

    inputs["price"] = tf.constant([np.nan] * 16, tf.float32)
    with pytest.raises(tf.errors.InvalidArgumentError, match="price is required"):
        serve_raw(**inputs)
