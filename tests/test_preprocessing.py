"""preprocessing_fn run by real TFT (Beam, in memory) on a few rows."""

import dataclasses
import functools
import tempfile

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform.beam as tft_beam
from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

from pipeline import datasets
from pipeline.pipeline import TRANSFORM_FORCE_TF_COMPAT_V1
from trainer_module import features, preprocessing

SPEC = datasets.load("penguins").feature_spec()

RAW_SPEC = {
    **{k: tf.io.VarLenFeature(tf.float32) for k in SPEC.numeric_keys},
    **{k: tf.io.VarLenFeature(tf.string) for k in SPEC.categorical_keys},
    SPEC.label_key: tf.io.FixedLenFeature([1], tf.string),
}


def _row(species, island, sex, bill, depth, flipper, mass):
    row = {"species": [species], "island": [island] if island else [], "sex": [sex] if sex else []}
    for key, value in zip(SPEC.numeric_keys, (bill, depth, flipper, mass)):
        row[key] = [value] if value is not None else []
    return row


ROWS = [
    _row(b"Adelie", b"Dream", b"male", 39.0, 18.0, 180.0, 3700.0),
    _row(b"Adelie", b"Torgersen", b"female", 37.0, 17.0, 190.0, 3500.0),
    _row(b"Gentoo", b"Biscoe", None, 47.0, 15.0, 220.0, None),
    _row(b"Gentoo", b"Biscoe", b"male", 49.0, 16.0, 230.0, 5500.0),
    _row(b"Chinstrap", b"Dream", b"female", None, 18.5, 195.0, 3600.0),
]


@pytest.fixture(scope="module")
def transformed():
    metadata = dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(RAW_SPEC))
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (rows, _), transform_fn = (ROWS, metadata) | tft_beam.AnalyzeAndTransformDataset(
            functools.partial(preprocessing.preprocessing_fn,
                              custom_config={features.CONFIG_KEY: SPEC.to_config()})
        )
    return rows


def test_numerics_are_imputed_with_the_mean_and_z_scored(transformed):
    masses = np.array([r["body_mass_g_xf"] for r in transformed])
    assert np.all(np.isfinite(masses))
    # The missing mass (row 2) is imputed with the mean, which z-scores to 0.
    assert masses[2] == pytest.approx(0.0, abs=1e-5)
    bills = np.array([r["bill_length_mm_xf"] for r in transformed])
    assert bills[4] == pytest.approx(0.0, abs=1e-5)
    assert bills.mean() == pytest.approx(0.0, abs=1e-5)
    assert bills[3] > bills[2] > bills[0] > bills[1]


def test_categoricals_and_label_become_vocabulary_indices(transformed):
    islands = [int(r["island_xf"]) for r in transformed]
    # Biscoe and Dream appear twice: the most frequent tokens get the smallest ids.
    assert islands[2] == islands[3] and islands[0] == islands[4]
    assert set(islands) <= {0, 1, 2}
    labels = [int(r["species_xf"]) for r in transformed]
    assert labels[0] == labels[1] and labels[2] == labels[3] and len(set(labels)) == 3
    # A missing sex is a token of its own, not an error.
    assert int(transformed[2]["sex_xf"]) not in {int(transformed[0]["sex_xf"]), int(transformed[1]["sex_xf"])}


def test_every_output_is_a_transformed_name(transformed):
    expected = {features.transformed_name(k) for k in (SPEC.label_key, *SPEC.feature_keys)}
    assert set(transformed[0]) == expected


def test_a_binary_label_names_its_positive_class_whatever_its_frequency():
    # Adelie is named positive: id 1 for its rows, 0 for every other value, though by
    # frequency it ties for id 0.
    spec = dataclasses.replace(SPEC, task=features.BINARY, positive="Adelie")
    with tft_beam.Context(temp_dir=tempfile.mkdtemp(), force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1):
        (rows, _), _ = (ROWS, dataset_metadata.DatasetMetadata(schema_utils.schema_from_feature_spec(RAW_SPEC))) \
            | tft_beam.AnalyzeAndTransformDataset(
                functools.partial(preprocessing.preprocessing_fn,
                                  custom_config={features.CONFIG_KEY: spec.to_config()}))
    species = [r[0] for r in (row["species"] for row in ROWS)]
    assert [int(r["species_xf"]) for r in rows] == [1 if s == b"Adelie" else 0 for s in species]
