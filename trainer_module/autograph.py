"""Keeps AutoGraph out of library code it does not need to rewrite.

AutoGraph skips modules named `keras` but not `tf_keras` (Keras 2, which TFT and TFMA
need), so every tf.function that touches the model rewrote the whole Keras and TFT call
stack, statement by statement: most of Trainer's and Transform's wall time on small
data. Both libraries are written graph-compatible and need no conversion.
"""

from __future__ import annotations

from tensorflow.python.autograph.core import config as autograph_config

LIBRARIES = ("tf_keras", "tensorflow_transform", "tensorflow_model_analysis", "tfx_bsl")


def skip_library_conversion() -> None:
    """Idempotent: prepends DoNotConvert rules for LIBRARIES."""
    present = {getattr(rule, "_prefix", None) for rule in autograph_config.CONVERSION_RULES}
    missing = tuple(
        autograph_config.DoNotConvert(name) for name in LIBRARIES if name not in present
    )
    if missing:
        autograph_config.CONVERSION_RULES = missing + tuple(autograph_config.CONVERSION_RULES)
