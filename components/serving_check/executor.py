"""Builds warmup requests from eval examples, then checks the model in a separate process
(serving/session_check.py, see loader_process.py) and records the verdict and latencies on
an InfraBlessing."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from typing import Any

from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import path_utils

from components.serving_check import loader_process
from components.serving_check.keys import BLESSED, LATENCY_KEYS, PROBLEMS, SIGNATURES
from serving import warmup

WARMUP_EXAMPLES = 64
CHECK_TIMEOUT_S = 600
# The file names TFX's InfraValidator writes beside its verdict.
BLESSED_FILE, NOT_BLESSED_FILE = "INFRA_BLESSED", "INFRA_NOT_BLESSED"


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        model = artifact_utils.get_single_instance(input_dict["model"])
        examples = artifact_utils.get_single_instance(input_dict["examples"])
        transform_graph = artifact_utils.get_single_instance(input_dict["transform_graph"])
        blessing = artifact_utils.get_single_instance(output_dict["blessing"])

        serialized = warmup.read_examples(examples.uri, "eval", WARMUP_EXAMPLES)
        warmup_file = os.path.join(blessing.uri, warmup.WARMUP_FILE)
        warmup.write(warmup_file, warmup.prediction_logs(serialized, exec_properties["model_name"]))
        vocabulary_file = label_vocabulary_file(transform_graph.uri, exec_properties["label_vocabulary"])
        report = run_check(path_utils.serving_model_path(model.uri), warmup_file, vocabulary_file)
        record(blessing, report)


def label_vocabulary_file(transform_graph_uri: str, vocabulary_name: str) -> str:
    """The label vocabulary's path; "" (a regression model) when there is none."""
    if not vocabulary_name:
        return ""
    import tensorflow_transform as tft

    path = tft.TFTransformOutput(transform_graph_uri).vocabulary_file_by_name(vocabulary_name)
    if path is None:  # tft answers None, not an error, for a vocabulary the graph lacks
        raise RuntimeError(f"the Transform graph at {transform_graph_uri} has no vocabulary {vocabulary_name!r}")
    return path


def run_check(model_dir: str, warmup_file: str, vocabulary_file: str,
              timeout_s: float = CHECK_TIMEOUT_S) -> dict[str, Any]:
    """The check's report; a loader that crashes or hangs is a failed check, not a failed run.

    It runs in the loader process the local runner started ahead, else in a fresh one."""
    loader = loader_process.take()
    if loader is None:
        loader = loader_process.LoaderProcess()
        logging.info("serving check: in a fresh loader process (pid %d)", loader.pid)
    else:
        logging.info("serving check: in the loader process started ahead (pid %d)", loader.pid)
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "report.json")
        try:
            returncode = loader.check([model_dir, warmup_file, vocabulary_file, out], timeout_s)
            tail = loader.output_tail()
        finally:
            loader.close()
        if returncode is None:
            return {"ok": False, "problems": [f"the model did not answer within {timeout_s:g} s"]}
        if returncode != 0 or not os.path.exists(out):
            return {"ok": False, "problems": [f"the session-based loader failed (exit {returncode}): "
                                              + " | ".join(tail)]}
        with open(out) as handle:
            return json.load(handle)


def record(blessing: types.Artifact, report: dict[str, Any]) -> None:
    blessing.set_int_custom_property(BLESSED, int(bool(report["ok"])))
    blessing.set_string_custom_property(PROBLEMS, json.dumps(report.get("problems", [])))
    blessing.set_string_custom_property(SIGNATURES, json.dumps(report.get("signatures", [])))
    for key in LATENCY_KEYS:
        if key in report:
            blessing.set_float_custom_property(key, float(report[key]))
    verdict = BLESSED_FILE if report["ok"] else NOT_BLESSED_FILE
    with open(os.path.join(blessing.uri, verdict), "w") as handle:
        handle.write(json.dumps(report, indent=2))
