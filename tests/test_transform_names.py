"""Which column names Transform's graph can hold, asked of TensorFlow itself: Transform's
own input naming (tensorflow_transform.impl_helper) in a graph that a TF session takes or
refuses, as Transform's does when it saves its first phase."""

from __future__ import annotations

import pytest
import tensorflow as tf
from tensorflow_transform import impl_helper

from pipeline.datasets import names


def _session_takes(column: str) -> bool:
    graph = tf.Graph()
    try:
        with graph.as_default():
            with tf.compat.v1.name_scope("inputs"):
                impl_helper._batched_placeholder_from_typespec(column, tf.SparseTensorSpec([None, None], tf.string))
            one = tf.constant(1.0)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(one)  # the session takes the whole graph, or refuses it
    except (tf.errors.InvalidArgumentError, ValueError):
        return False
    return True


@pytest.mark.parametrize("column", [
    "plain", "two words", "rain (mm)", "a<b", "a>b", "a>1", "a>.b", "/a", "a//b", "1st", "ä", "日本", "a:b",
    "a>", "ticket <id>", "a>_b", "a>>b", "a>/b", "a>-b", "ä>", "a/", "a b/",
])
def test_the_check_agrees_with_tensorflow(column):
    assert (names.transform_refuses([column]) is None) == _session_takes(column), column


def test_the_first_refused_column_is_named_with_its_graph_name():
    assert names.transform_refuses(["ok", "x>", "y/"]) == ("x>", "F_x>")
    assert names.transform_refuses(["ok", "x>y"]) is None
