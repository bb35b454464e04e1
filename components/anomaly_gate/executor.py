"""AnomalyGate executor: reads ExampleValidator's anomalies and fails readably on any."""

from __future__ import annotations

import os
from typing import Any

from tensorflow_metadata.proto.v0 import anomalies_pb2
from tfx import types
from tfx.dsl.components.base import base_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils

from components.anomaly_gate.describe import describe

BINARY_FILE = "SchemaDiff.pb"
TEXT_FILE = "anomalies.pbtxt"


class AnomaliesFoundError(RuntimeError):
    """The data breaks the schema; the message lists each anomaly."""


class Executor(base_executor.BaseExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        found = {}
        for artifact in input_dict["anomalies"]:
            for split in artifact_utils.decode_split_names(artifact.split_names):
                anomalies = load_anomalies(artifact_utils.get_split_uri([artifact], split))
                if anomalies.anomaly_info or anomalies.HasField("dataset_anomaly_info"):
                    found[split] = anomalies
        if found:
            raise AnomaliesFoundError(format_report(found))


def load_anomalies(split_uri: str) -> anomalies_pb2.Anomalies:
    binary = os.path.join(split_uri, BINARY_FILE)
    if io_utils.fileio.exists(binary):
        return anomalies_pb2.Anomalies.FromString(io_utils.read_bytes_file(binary))
    return io_utils.parse_pbtxt_file(os.path.join(split_uri, TEXT_FILE), anomalies_pb2.Anomalies())


def format_report(found: dict[str, anomalies_pb2.Anomalies]) -> str:
    """One line per feature anomaly: split, feature, what is wrong, the example values."""
    lines = ["the data does not match the schema:"]
    for split, anomalies in sorted(found.items()):
        if anomalies.HasField("dataset_anomaly_info"):
            lines.append(f"  [{split}] (dataset): {describe(anomalies.dataset_anomaly_info)}")
        for feature, info in sorted(anomalies.anomaly_info.items()):
            lines.append(f"  [{split}] {feature}: {describe(info)}")
    lines.append(
        "fix the rows named above, or, if the new values are legitimate, update the schema "
        "(`turbotfx schema infer` proposes one)"
    )
    return "\n".join(lines)

