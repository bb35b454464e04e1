"""What a pushed SavedModel offers TF Serving, its clients and TFMA: signature, input and
output names, and what the serving check reports. Pure Python, so the CLI and the
provenance queries can name them without loading TensorFlow.

trainer_module/signatures.py builds these signatures and spells the names once more
itself: its source is hashed into the Trainer's cache key, and trainer_module imports
nothing of ours. tests/test_keys.py holds the two spellings equal.
"""

from __future__ import annotations

# Serialized tf.Examples in (gRPC Predict, TFMA); the CSV's columns in (REST, JSON rows);
# raw features to transformed features (TFMA's preprocessing function).
SERVING_DEFAULT = "serving_default"
SERVING_RAW = "serving_raw"
TRANSFORM_FEATURES = "transform_features"
SIGNATURES = (SERVING_DEFAULT, SERVING_RAW, TRANSFORM_FEATURES)
EXAMPLES_INPUT = "examples"
OUTPUT_PROBABILITIES = "probabilities"
OUTPUT_CLASS_ID = "class_id"
OUTPUT_LABEL = "label"
OUTPUT_CLASSES = "classes"  # every label value, in the order of the probabilities
OUTPUT_PREDICTION = "prediction"  # a regression model's one output

# The serving check times batches of these sizes and reports each as p50/p99 milliseconds.
LATENCY_BATCH_SIZES = (1, 64)
LATENCY_PERCENTILES = (50, 99)


def latency_key(percentile: int, batch_size: int) -> str:
    """'p50_ms_b1': the report entry (and InfraBlessing property) for one measurement."""
    return f"p{percentile}_ms_b{batch_size}"


LATENCY_KEYS = tuple(latency_key(p, b) for b in LATENCY_BATCH_SIZES for p in LATENCY_PERCENTILES)

# `python -m serving.session_check --wait`: import TensorFlow, then read the check's
# arguments as one JSON list on stdin (components/serving_check/loader_process.py).
SESSION_CHECK_WAIT_FLAG = "--wait"
