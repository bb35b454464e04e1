"""The `text` role: words and their ids in the Transform graph, the bag-of-words model
input, init's decision between free text and identifiers, and the families that read text."""

from __future__ import annotations

import functools
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from pipeline.pipeline import TRANSFORM_FORCE_TF_COMPAT_V1
from tests import one_column
from trainer_module import features, layers, model, preprocessing

SPEC = features.FeatureSpec(dataset="r", task=features.BINARY, label_key="liked", numeric_keys=(),
                            categoricals=(), text_keys=("review text",))
REVIEWS = ["Great food, GREAT service!", "awful food", "", "Café: great, great; awful?", "food food food x"]


@pytest.fixture(scope="module")
def transformed():
    raw_spec = {"review text": tf.io.VarLenFeature(tf.string), "liked": tf.io.FixedLenFeature([1], tf.string)}
    rows = [{"review text": [text.encode()] if text else [], "liked": [b"yes"]} for text in REVIEWS]
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(raw_spec))
    output_dir = tempfile.mkdtemp()
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (out, _), transform_fn = (rows, metadata) | tft_beam.AnalyzeAndTransformDataset(
            functools.partial(preprocessing.preprocessing_fn, custom_config={features.CONFIG_KEY: SPEC.to_config()}))
        _ = transform_fn | tft_beam.WriteTransformFn(output_dir)
    vocabulary = (tf.io.gfile.GFile(f"{output_dir}/transform_fn/assets/{features.vocabulary_name('review text')}")
                  .read().split("\n"))
    return out, [word for word in vocabulary if word]


def test_words_are_lower_cased_split_and_counted(transformed):
    _, vocabulary = transformed
    # Seen at least twice (TEXT_MIN_WORD_COUNT), most frequent first: food 6, great 4, awful 2.
    # "service", "café" and "x" are seen once: out of vocabulary.
    assert vocabulary == ["food", "great", "awful"]


def test_a_text_becomes_its_word_ids_padded(transformed):
    rows, vocabulary = transformed
    ids = np.array([row[features.transformed_name("review text")] for row in rows])
    assert ids.shape == (len(REVIEWS), features.TEXT_MAX_WORDS)
    word = {w: i + 1 for i, w in enumerate(vocabulary)}  # 0 pads
    unknown = len(vocabulary) + 1
    expected = [
        [word["great"], word["food"], word["great"], unknown],
        [word["awful"], word["food"]],
        [],
        [unknown, word["great"], word["great"], word["awful"]],
        [word["food"], word["food"], word["food"], unknown],
    ]
    for row, words in zip(ids, expected):
        assert row.tolist() == words + [0] * (features.TEXT_MAX_WORDS - len(words))


def test_the_mean_of_words_leaves_padding_out_and_an_empty_text_is_zero():
    embedded = tf.constant([[[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]], [[5.0, 5.0], [6.0, 6.0], [7.0, 7.0]]])
    ids = tf.constant([[4, 9, 0], [0, 0, 0]], tf.int64)
    mean = layers.MeanOfWords()([embedded, ids]).numpy()
    np.testing.assert_allclose(mean, [[2.0, 3.0], [0.0, 0.0]])


def test_the_model_reads_a_text_input():
    built = model.build_model(SPEC, {"review text": 3}, num_classes=2)
    name = features.transformed_name("review text")
    assert built.input[name].shape.as_list() == [None, features.TEXT_MAX_WORDS]
    # A text with words (4: out of a 3-word vocabulary) and one with none: finite for both.
    out = built({name: tf.constant([[1, 2, 4] + [0] * (features.TEXT_MAX_WORDS - 3),
                                    [0] * features.TEXT_MAX_WORDS], tf.int64)}).numpy()
    assert out.shape == (2, 1) and np.isfinite(out).all()


def test_init_tells_free_text_from_identifiers():
    rng = np.random.default_rng(0)
    words = np.array(["good", "bad", "food", "slow", "the", "was", "very", "and", "service", "cold"])
    decisions = one_column.decisions({
        "review": [" ".join(rng.choice(words, rng.integers(4, 12))) for _ in range(200)],
        "title": [" ".join(rng.choice(words, 3)) for _ in range(200)],
        "customer": [f"{a} {b}" for a, b in zip(rng.choice(["Ann", "Bo", "Cy", "Di"], 200), range(200))],
        "hash": [f"{rng.integers(0, 2 ** 62):032x}{i:032x}" for i in range(200)],
    })
    assert decisions["review"].role == "text"
    assert decisions["review"].reason.startswith("free text: 8 words (")
    assert "a bag of words" in decisions["review"].reason
    # Short texts, mostly different: still words.
    assert decisions["title"].role == "text"
    # Two words each (a name and a number), or one long token: identifiers, not text.
    assert decisions["customer"].role == "ignore"
    assert decisions["hash"].role == "ignore"
