"""One anomaly as a line a person reads: what is wrong and TFDV's details. Shared by the gate
and the run report; imports no TFX (the report's command starts in a second)."""

from __future__ import annotations

from tensorflow_metadata.proto.v0 import anomalies_pb2


def describe(info: anomalies_pb2.AnomalyInfo) -> str:
    details = "; ".join(reason.description for reason in info.reason if reason.description)
    return f"{info.short_description}: {details}" if details else info.short_description
