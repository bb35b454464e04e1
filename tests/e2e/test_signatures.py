"""The pushed SavedModel's signatures, called the ways TF Serving and clients call them."""

from __future__ import annotations

import csv

import numpy as np
import pytest
import tensorflow as tf

from pipeline import datasets
from trainer_module import signatures

SPEC = datasets.load("penguins").feature_spec()

pytestmark = pytest.mark.e2e

SPECIES = {b"Adelie", b"Chinstrap", b"Gentoo"}


def _pushed_model_dir(run) -> str:
    versions = sorted(p for p in run.config.serving_dir.iterdir() if p.is_dir())
    return str(versions[-1])


def _csv_rows(run, limit: int = 64) -> list[dict]:
    with open(run.config.data_path / "penguins.csv", newline="") as handle:
        return list(csv.DictReader(handle))[:limit]


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


def test_exports_the_three_signatures(loaded):
    assert set(loaded.signatures) == {
        signatures.SERVING_DEFAULT, signatures.SERVING_RAW, signatures.TRANSFORM_FEATURES
    }


def test_serving_default_on_real_rows(loaded, first_run):
    rows = _csv_rows(first_run)
    examples = tf.constant([_serialize(r, with_label=False) for r in rows])
    outputs = loaded.signatures[signatures.SERVING_DEFAULT](examples=examples)
    probabilities = outputs["probabilities"].numpy()
    assert outputs["probabilities"].dtype == tf.float32
    assert probabilities.shape == (len(rows), 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    labels = outputs["label"].numpy()
    assert set(labels) <= SPECIES
    # The model learned something: most of these (training) rows get their own label.
    accuracy = np.mean([label.decode() == row["species"] for label, row in zip(labels, rows)])
    assert accuracy > 0.8


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


def test_transform_features_gives_tfma_the_label(loaded, first_run):
    examples = tf.constant([_serialize(r) for r in _csv_rows(first_run, 8)])
    transformed = loaded.signatures[signatures.TRANSFORM_FEATURES](examples=examples)
    assert SPEC.transformed_label_key in transformed
    assert transformed[SPEC.transformed_label_key].dtype == tf.int64


def test_runs_through_the_session_based_loader_tf_serving_uses(first_run):
    """TF Serving's C++ SavedModelBundle restores through the TF1 loader, as saved_model_cli run does."""
    examples = [_serialize(r, with_label=False) for r in _csv_rows(first_run, 4)]
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], _pushed_model_dir(first_run))
        signature = meta_graph.signature_def[signatures.SERVING_DEFAULT]
        fetches = {name: info.name for name, info in signature.outputs.items()}
        outputs = session.run(fetches, feed_dict={signature.inputs["examples"].name: examples})
    assert outputs["probabilities"].dtype == np.float32
    np.testing.assert_allclose(outputs["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    assert set(outputs["label"]) <= SPECIES


def test_serving_functions_do_not_retrace_across_batch_sizes(first_run):
    import tensorflow_transform as tft

    from trainer_module import model

    transform_graph = sorted((first_run.config.pipeline_root / "Transform" / "transform_graph").iterdir())[0]
    module = signatures.ServingModule(
        model.build_model(SPEC, {"island": 3, "sex": 3}, num_classes=3),
        tft.TFTransformOutput(str(transform_graph)),
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
