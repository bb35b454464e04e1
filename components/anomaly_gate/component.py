"""AnomalyGate component: TFX's ExampleValidator only records anomalies; this stops the run."""

from __future__ import annotations

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import component_spec, standard_artifacts

from components.anomaly_gate import executor


class AnomalyGateSpec(component_spec.ComponentSpec):
    PARAMETERS: dict = {}
    INPUTS = {
        "anomalies": component_spec.ChannelParameter(type=standard_artifacts.ExampleAnomalies),
    }
    OUTPUTS: dict = {}


class AnomalyGate(base_component.BaseComponent):
    """Fails, with a readable report, when any split has anomalies.

    Downstream components that must not see bad data depend on it with
    `add_upstream_node`.
    """

    SPEC_CLASS = AnomalyGateSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, anomalies) -> None:
        super().__init__(spec=AnomalyGateSpec(anomalies=anomalies))
