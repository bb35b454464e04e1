"""The pushed SavedModel's signatures, called the ways TF Serving and clients call them."""

from __future__ import annotations

import csv
from collections import defaultdict

import numpy as np
import pytest
import tensorflow as tf

from pipeline import datasets
from trainer_module import features, signatures

SPEC = datasets.load("penguins").feature_spec()

pytestmark = pytest.mark.e2e

SPECIES = {b"Adelie", b"Chinstrap", b"Gentoo"}
# Each species' share of its own CSV rows that must get its label. The first run's model
# (5 epochs) gets every row of every class right (measured: 1.0 each, on rows it mostly
# trained on); a model that always answers one species scores 0 on the other two, and one
# that cannot tell two species apart scores about 0.5 or less on one of them. 0.8 fails
# both and leaves room for training noise on the smallest class (68 Chinstrap rows).
MIN_CLASS_ACCURACY = 0.8


def _pushed_model_dir(run) -> str:
    versions = sorted(p for p in run.config.serving_dir.iterdir() if p.is_dir())
    return str(versions[-1])


def _transform_graph_dir(run) -> str:
    return str(sorted((run.config.pipeline_root / "Transform" / "transform_graph").iterdir())[0])


def _csv_rows(run, limit: int | None = None) -> list[dict]:
    """The CSV's rows (all, or the first `limit`). The file is sorted by species: only the
    whole file has every class (its first 152 rows are all Adelie)."""
    with open(run.config.data_path / "penguins.csv", newline="") as handle:
        return list(csv.DictReader(handle))[:limit]


def _assert_every_class_predicted(labels, rows: list[dict]) -> None:
    """Rows of every species were scored, and per species more than MIN_CLASS_ACCURACY of
    them got its label (the CSV's, not the model's idea of it)."""
    hits = defaultdict(list)
    for label, row in zip(labels, rows, strict=True):
        hits[row["species"]].append(label.decode() == row["species"])
    accuracy = {species: float(np.mean(h)) for species, h in hits.items()}
    assert {s.encode() for s in accuracy} == SPECIES, accuracy  # rows of every class were scored
    assert all(a > MIN_CLASS_ACCURACY for a in accuracy.values()), accuracy


def _raw_columns(rows: list[dict]) -> dict[str, tf.Tensor]:
    """serving_raw's arguments for CSV rows: one value per row, NaN or '' where missing."""
    columns = {features.identifier(k): tf.constant([float(r[k]) if r[k] else float("nan") for r in rows])
               for k in SPEC.numeric_keys}
    columns |= {features.identifier(k): tf.constant([r[k] for r in rows]) for k in SPEC.categorical_keys}
    return columns


def _serialize(row: dict, with_label: bool = True) -> bytes:
    feature = {}
    for key in SPEC.numeric_keys:
        values = [float(row[key])] if row[key] else []
        feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    keys = SPEC.categorical_keys + ((SPEC.label_key,) if with_label else ())
    for key in keys:
        values = [row[key].encode()] if row[key] else []
        feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def loaded(first_run):
    return tf.saved_model.load(_pushed_model_dir(first_run))


@pytest.fixture(scope="module")
def rows(first_run) -> list[dict]:
    return _csv_rows(first_run)


def test_exports_the_three_signatures(loaded):
    assert set(loaded.signatures) == {
        signatures.SERVING_DEFAULT, signatures.SERVING_RAW, signatures.TRANSFORM_FEATURES
    }


def test_serving_default_on_real_rows(loaded, rows):
    examples = tf.constant([_serialize(r, with_label=False) for r in rows])
    outputs = loaded.signatures[signatures.SERVING_DEFAULT](examples=examples)
    probabilities = outputs["probabilities"].numpy()
    assert outputs["probabilities"].dtype == tf.float32
    assert probabilities.shape == (len(rows), 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    labels = outputs["label"].numpy()
    assert set(labels) <= SPECIES
    # The model learned every class: most rows of each species get their own label.
    _assert_every_class_predicted(labels, rows)


def test_serving_raw_on_real_rows(loaded, rows):
    outputs = loaded.signatures[signatures.SERVING_RAW](**_raw_columns(rows))
    np.testing.assert_allclose(outputs["probabilities"].numpy().sum(axis=1), 1.0, rtol=1e-5)
    _assert_every_class_predicted(outputs["label"].numpy(), rows)


def test_serving_raw_accepts_named_features_with_missing_values(loaded):
    rows = {
        "island": tf.constant(["Biscoe", "Dream"]),
        "sex": tf.constant(["", "female"]),  # '' marks a missing value
        "bill_length_mm": tf.constant([47.5, 46.0]),
        "bill_depth_mm": tf.constant([15.0, 17.8]),
        "flipper_length_mm": tf.constant([217.0, 195.0]),
        "body_mass_g": tf.constant([float("nan"), 3700.0]),  # NaN marks a missing value
    }
    outputs = loaded.signatures[signatures.SERVING_RAW](**rows)
    probabilities = outputs["probabilities"].numpy()
    assert np.all(np.isfinite(probabilities))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    assert list(outputs["label"].numpy()) == [b"Gentoo", b"Chinstrap"]


def test_serving_raw_and_serving_default_agree_row_by_row(loaded, rows):
    """The two ways in build the same features: with values missing in different columns of
    different rows (serving_raw handles columns side by side), each row's probabilities match."""
    holes = [dict(row) for row in rows[:12]]
    for index, row in enumerate(holes):
        row[(*SPEC.numeric_keys, *SPEC.categorical_keys)[index % 6]] = ""
    raw = loaded.signatures[signatures.SERVING_RAW](**_raw_columns(holes))
    examples = loaded.signatures[signatures.SERVING_DEFAULT](
        examples=tf.constant([_serialize(row, with_label=False) for row in holes]))
    np.testing.assert_allclose(raw["probabilities"].numpy(), examples["probabilities"].numpy(), rtol=1e-5, atol=1e-6)
    # Missing values moved the scores: the holes reached the model.
    whole = loaded.signatures[signatures.SERVING_RAW](**_raw_columns(rows[:12]))
    assert not np.allclose(whole["probabilities"].numpy(), raw["probabilities"].numpy(), atol=1e-4)


def test_transform_features_gives_tfma_the_label(loaded, rows, first_run):
    """TFMA compares this label id with the argmax of serving_default's probabilities: the id
    must name the row's species in the vocabulary the model's class ids index."""
    import tensorflow_transform as tft

    transformed = loaded.signatures[signatures.TRANSFORM_FEATURES](
        examples=tf.constant([_serialize(r) for r in rows]))
    assert SPEC.transformed_label_key in transformed
    assert transformed[SPEC.transformed_label_key].dtype == tf.int64
    vocabulary = tft.TFTransformOutput(_transform_graph_dir(first_run)).vocabulary_by_name(
        features.vocabulary_name(SPEC.label_key))
    assert set(vocabulary) == SPECIES
    label_ids = transformed[SPEC.transformed_label_key].numpy().reshape(-1)
    # A lookup, not a prediction: every row exactly, so a constant id fails on two species.
    assert [vocabulary[i].decode() for i in label_ids] == [row["species"] for row in rows]
    served = loaded.signatures[signatures.SERVING_DEFAULT](
        examples=tf.constant([_serialize(r, with_label=False) for r in rows]))
    # The model's class ids index the same vocabulary, so TFMA's hits are correct answers.
    assert [vocabulary[i] for i in served["class_id"].numpy()] == list(served["label"].numpy())


def test_runs_through_the_session_based_loader_tf_serving_uses(first_run, rows):
    """TF Serving's C++ SavedModelBundle restores through the TF1 loader, as saved_model_cli run does."""
    examples = [_serialize(r, with_label=False) for r in rows]
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], _pushed_model_dir(first_run))
        signature = meta_graph.signature_def[signatures.SERVING_DEFAULT]
        fetches = {name: info.name for name, info in signature.outputs.items()}
        outputs = session.run(fetches, feed_dict={signature.inputs["examples"].name: examples})
    assert outputs["probabilities"].dtype == np.float32
    np.testing.assert_allclose(outputs["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    assert set(outputs["label"]) <= SPECIES
    # Through this loader too, most rows of each species get their own label.
    _assert_every_class_predicted(outputs["label"], rows)


def test_serving_functions_do_not_retrace_across_batch_sizes(first_run):
    import tensorflow_transform as tft

    from trainer_module import model

    module = signatures.ServingModule(
        model.build_model(SPEC, {"island": 3, "sex": 3}, num_classes=3),
        tft.TFTransformOutput(_transform_graph_dir(first_run)),
        SPEC,
    )
    rows = _csv_rows(first_run, 64)
    for batch in (1, 7, 64):
        module.serve_examples(tf.constant([_serialize(r, with_label=False) for r in rows[:batch]]))
        module.serve_raw({
            "island": tf.constant(["Dream"] * batch),
            "sex": tf.constant(["male"] * batch),
            **{k: tf.fill([batch], 40.0) for k in SPEC.numeric_keys},
        })
    assert module.serve_examples.experimental_get_tracing_count() == 1
    assert module.serve_raw.experimental_get_tracing_count() == 1
