"""Penguins CSV rows as tf.Examples, built here as ExampleGen writes them (one value per
present cell): what the tests feed a served model's serving_default to get its own answer."""

from __future__ import annotations

import tensorflow as tf

from pipeline import datasets

SPEC = datasets.load("penguins").feature_spec()


def example(row: dict[str, str]) -> bytes:
    feature = {key: tf.train.Feature(float_list=tf.train.FloatList(value=[float(row[key])] if row[key] else []))
               for key in SPEC.numeric_keys}
    feature |= {key: tf.train.Feature(bytes_list=tf.train.BytesList(value=[row[key].encode()] if row[key] else []))
                for key in SPEC.categorical_keys}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()
