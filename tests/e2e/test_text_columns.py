"""A reviews table, no code edited: `turbotfx init` makes the review a text feature (before,
init stopped: "no column can be a feature"), `turbotfx run` blesses and pushes a model that
reads the words, and serving takes the raw text."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from pipeline import datasets
from tests import conftest
from tests.conftest import cli

pytestmark = pytest.mark.e2e

ROWS = 800
REVIEW, LIKED = "review", "liked"
PRAISE = ["great", "lovely", "tasty", "friendly", "excellent", "fresh"]
COMPLAINTS = ["awful", "cold", "rude", "bland", "slow", "stale"]
FILLER = ["the", "food", "was", "and", "service", "we", "ordered", "pasta", "pizza", "table", "our", "waiter"]


def reviews(seed: int = 0) -> pd.DataFrame:
    """Liked or not from the words alone: praise or complaints among filler (one review in
    ten has the other side's words too). Every review differs: no category to learn."""
    rng = np.random.default_rng(seed)
    liked = rng.random(ROWS) < 0.5
    texts = []
    for index, positive in enumerate(liked):
        side, other = (PRAISE, COMPLAINTS) if positive else (COMPLAINTS, PRAISE)
        words = list(rng.choice(FILLER, rng.integers(5, 12))) + list(rng.choice(side, rng.integers(1, 3)))
        if rng.random() < 0.1:
            words.append(rng.choice(other))
        rng.shuffle(words)
        texts.append(" ".join(words).capitalize() + f", visit {index}.")
    return pd.DataFrame({REVIEW: texts, LIKED: np.where(liked, "yes", "no")})


def test_a_reviews_table_trains_on_its_words(tmp_path):
    frame = reviews()
    data_root = tmp_path / "data"
    data_root.mkdir()
    frame.to_csv(data_root / "part-0.csv", index=False)
    home = tmp_path / "ws"
    dataset_file = tmp_path / "reviews.toml"
    init, model_dir = conftest.init_and_run(data_root, LIKED, dataset_file, home, "--epochs", "40")
    assert "free text:" in init.output and "a bag of words" in init.output
    assert [(f.name, f.role) for f in datasets.load(str(dataset_file)).features] == [(REVIEW, "text")]
    # The gbt family reads no text: one line, before anything runs.
    refused = cli("run", "--dataset", str(dataset_file), "--model", "gbt", home=home)
    assert refused.exit_code != 0 and "Traceback" not in refused.output
    assert "the gbt family reads no text feature, and 'review' is one" in refused.output

    raw = tf.saved_model.load(str(model_dir)).signatures["serving_raw"]
    # Reviews the model never saw (80 % of `frame` trained it), of each class.
    unseen = reviews(seed=1)
    labels = np.array([label.decode() for label in raw(review=tf.constant(unseen[REVIEW].tolist()))["label"].numpy()])
    for cls in ("yes", "no"):
        rows = unseen[LIKED].to_numpy() == cls
        assert rows.sum() > 100 and (labels[rows] == cls).mean() > 0.8, cls
    # New texts, words in any case and order, punctuation, a word never seen: read by the graph.
    new = raw(review=tf.constant(["EXCELLENT pasta; FRESH, friendly!", "Cold pizza... and a RUDE waiter, zzz",
                                  ""]))["label"].numpy()
    assert new[:2].tolist() == [b"yes", b"no"]

    answered = cli("predict", "--dataset", str(dataset_file), "--format", "json", "--json",
                        json.dumps({REVIEW: "tasty food, lovely table"}), home=home)
    assert answered.exit_code == 0, answered.output
    assert json.loads(answered.stdout)["predictions"][0]["label"] == "yes"
    wrong = cli("predict", "--dataset", str(dataset_file), "--json", json.dumps({REVIEW: 5}), home=home)
    assert wrong.exit_code != 0 and "feature 'review' must be text, got int 5" in wrong.output, wrong.output
