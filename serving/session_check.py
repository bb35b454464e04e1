"""Loads a SavedModel the way TF Serving does and checks what it will serve.

TF Serving's C++ SavedModelBundle restores through the session-based loader (what
`tf.compat.v1.saved_model.loader.load` and `saved_model_cli run` use), which fails on
some models that `tf.saved_model.load` accepts. This module runs in its own process
(`python -m serving.session_check MODEL_DIR WARMUP_FILE VOCAB_FILE OUT_JSON`; VOCAB_FILE is ""
for a regression model): a model that crashes the loader cannot take the pipeline down with it.
With `--wait` instead, it imports TensorFlow first and then reads those four arguments as one
JSON list on stdin (a process started ahead: components/serving_check/loader_process.py).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import numpy as np
import tensorflow as tf

from serving import forest_ops, warmup
from serving.contract import (
    EXAMPLES_INPUT,
    LATENCY_BATCH_SIZES,
    LATENCY_PERCENTILES,
    OUTPUT_CLASS_ID,
    OUTPUT_LABEL,
    OUTPUT_PREDICTION,
    OUTPUT_PROBABILITIES,
    SERVING_DEFAULT,
    SESSION_CHECK_WAIT_FLAG,
    SIGNATURES,
    latency_key,
)

# What TF Serving will expose, for a classifier and a regression model; outputs are the
# same for both prediction signatures.
CLASSIFIER_OUTPUTS = {OUTPUT_PROBABILITIES: tf.float32, OUTPUT_CLASS_ID: tf.int64, OUTPUT_LABEL: tf.string}
REGRESSION_OUTPUTS = {OUTPUT_PREDICTION: tf.float32}
# Ranks TF Serving batches along: every tensor's first dimension is the batch (-1).
OUTPUT_RANKS = {OUTPUT_PROBABILITIES: 2, OUTPUT_CLASS_ID: 1, OUTPUT_LABEL: 1, OUTPUT_PREDICTION: 1}
# Timed runs per batch size: fewer for the larger, slower batch.
LATENCY_RUNS = dict(zip(LATENCY_BATCH_SIZES, (100, 30)))


def check(model_dir: str, warmup_file: str, vocabulary: list[str] | None) -> dict:
    """The report on a classifier (vocabulary: its label values) or, vocabulary None, a
    regression model."""
    expected_outputs = REGRESSION_OUTPUTS if vocabulary is None else CLASSIFIER_OUTPUTS
    problems: list[str] = []
    report: dict = {}
    logs = list(warmup.read(warmup_file))  # eagerly, before the graph-mode session below
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        forest_ops.register_for(model_dir)
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], model_dir)
        signatures = meta_graph.signature_def
        report["signatures"] = sorted(name for name in signatures if not name.startswith("__"))
        problems += [f"signature {name!r} is missing" for name in SIGNATURES if name not in signatures]
        if SERVING_DEFAULT not in signatures:
            return {**report, "ok": False, "problems": problems}
        signature = signatures[SERVING_DEFAULT]
        problems += _signature_problems(signature, expected_outputs)
        if problems:
            return {**report, "ok": False, "problems": problems}
        feed = signature.inputs[EXAMPLES_INPUT].name
        fetch = {key: signature.outputs[key].name for key in expected_outputs}
        pool: list[bytes] = []
        for number, log in enumerate(logs):
            batch = tf.make_ndarray(log.predict_log.request.inputs[EXAMPLES_INPUT])
            pool.extend(batch.tolist())
            outputs = session.run(fetch, {feed: batch})
            problems += [f"warmup request {number}: {p}" for p in _output_problems(outputs, len(batch), vocabulary)]
        if not pool:
            problems.append("no warmup requests to replay")
        if problems:
            return {**report, "ok": False, "problems": problems}
        for batch_size, runs in LATENCY_RUNS.items():
            batch = np.array([pool[i % len(pool)] for i in range(batch_size)], dtype=object)
            seconds = []
            for _ in range(runs):
                started = time.perf_counter()
                session.run(fetch, {feed: batch})
                seconds.append(time.perf_counter() - started)
            for percentile in LATENCY_PERCENTILES:
                report[latency_key(percentile, batch_size)] = round(
                    float(np.percentile(seconds, percentile)) * 1000, 3)
    return {**report, "ok": True, "problems": []}


def _signature_problems(signature, expected_outputs: dict) -> list[str]:
    problems = []
    example_input = signature.inputs.get(EXAMPLES_INPUT)
    if (example_input is None or example_input.dtype != tf.string.as_datatype_enum
            or _dims(example_input) != [-1]):
        problems.append("serving_default must take 'examples', a batch (shape [-1]) of serialized "
                        "tf.Example strings")
    for key, dtype in expected_outputs.items():
        output = signature.outputs.get(key)
        if output is None:
            problems.append(f"serving_default has no output {key!r}")
        elif output.dtype != dtype.as_datatype_enum:
            problems.append(f"serving_default output {key!r} is {tf.dtypes.as_dtype(output.dtype).name}, "
                            f"not {dtype.name}")
        elif len(_dims(output)) != OUTPUT_RANKS[key] or _dims(output)[0] != -1:
            problems.append(f"serving_default output {key!r} has shape {_dims(output)}; expected rank "
                            f"{OUTPUT_RANKS[key]} with the batch first (-1)")
    return problems


def _dims(tensor_info) -> list[int]:
    return [dim.size for dim in tensor_info.tensor_shape.dim]


def _output_problems(outputs: dict, batch_size: int, vocabulary: list[str] | None) -> list[str]:
    if vocabulary is None:
        predictions = outputs[OUTPUT_PREDICTION]
        if predictions.shape[0] != batch_size:
            return [f"{predictions.shape[0]} predictions for {batch_size} examples"]
        if not np.all(np.isfinite(predictions)):
            return ["predictions are not all finite (NaN or infinity)"]
        return []
    probabilities = outputs[OUTPUT_PROBABILITIES]
    if probabilities.shape[0] != batch_size:
        return [f"{probabilities.shape[0]} predictions for {batch_size} examples"]
    if not np.all(np.isfinite(probabilities)):
        return ["probabilities are not all finite (NaN or infinity)"]
    problems = []
    sums = probabilities.sum(axis=1)
    if not np.allclose(sums, 1.0, atol=1e-3):
        problems.append(f"probabilities do not sum to 1 (sums from {sums.min():.4f} to {sums.max():.4f})")
    if not np.array_equal(outputs[OUTPUT_CLASS_ID], probabilities.argmax(axis=1)):
        problems.append("class_id is not the most probable class")
    labels = [label.decode() for label in outputs[OUTPUT_LABEL].tolist()]
    unknown = sorted(set(labels) - set(vocabulary)) if vocabulary else []
    if unknown:
        problems.append(f"labels outside the label vocabulary: {unknown}")
    return problems


def main(argv: list[str]) -> int:
    if argv == [SESSION_CHECK_WAIT_FLAG]:
        _exit_with_parent()
        request = sys.stdin.readline()
        if not request:  # the run ended without a check for it to do
            return 0
        argv = json.loads(request)
    model_dir, warmup_file, vocabulary_file, out_json = argv
    vocabulary = None
    if vocabulary_file:
        with open(vocabulary_file) as handle:
            vocabulary = [line.rstrip("\n") for line in handle if line.strip()]
    with open(out_json, "w") as handle:
        json.dump(check(model_dir, warmup_file, vocabulary), handle)
    return 0


def _exit_with_parent() -> None:
    """Ends this process when the run that started it is gone (killed, even with SIGKILL), so
    a process started ahead outlives no pipeline. Its stdin closing says so too, but a child
    forked by the run could hold that pipe open."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
