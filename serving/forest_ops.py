"""TF-DF's custom ops, registered before a SavedModel that uses them is loaded in-process.

A gbt model (trainer_module/gbt.py) runs its trees in TF-DF's own ops ("SimpleML..."),
which TensorFlow only knows once tensorflow_decision_forests is imported: without it, any
in-process load (tf.saved_model.load, the session loader, TFMA) fails with "Op type not
registered". TF Serving (2.11 and later) has them built in, and TFMA (so the Evaluator, in
its Beam worker processes too) imports TF-DF itself when it is installed
(tensorflow_model_analysis/utils/model_util.py; tests/test_gbt_family.py checks it). No
TensorFlow import here.
"""

from __future__ import annotations

import functools
import os
from typing import Any

# Every TF-DF op's name starts with this; a graph without it needs no registration.
OP_PREFIX = b"SimpleML"
_GRAPH_FILE = "saved_model.pb"


@functools.cache
def register() -> None:
    """Imports TF-DF, which registers its ops in this process (once: about half a second)."""
    import tensorflow_decision_forests  # noqa: F401


def register_for(model_dir: str) -> None:
    """Registers TF-DF's ops when the SavedModel in model_dir uses them; for any other model,
    one read of its graph file (no TF-DF import)."""
    if uses_forest_ops(model_dir):
        register()


def load(model_dir: str) -> Any:
    """tf.saved_model.load, with TF-DF's ops registered first when the model needs them."""
    import tensorflow as tf

    register_for(str(model_dir))
    return tf.saved_model.load(str(model_dir))


def uses_forest_ops(model_dir: str) -> bool:
    path = os.path.join(str(model_dir), _GRAPH_FILE)
    if "://" in path:
        # A remote store (gs://): TensorFlow's file system reads it.
        import tensorflow as tf

        with tf.io.gfile.GFile(path, "rb") as handle:
            return OP_PREFIX in handle.read()
    try:
        with open(path, "rb") as handle:
            return OP_PREFIX in handle.read()
    except FileNotFoundError:
        # No graph to read: let the loader say what is wrong.
        return False
