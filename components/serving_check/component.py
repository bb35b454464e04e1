"""ServingCheck component: between the Evaluator and the Pusher, needs neither Docker nor a
model server (unlike TFX's InfraValidator), so it runs the same locally, in Kubeflow
and on Vertex."""

from __future__ import annotations

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import Channel, component_spec, standard_artifacts

from components.serving_check import executor


class ServingCheckSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        # The Transform vocabulary of the label (its file name); "" for a regression model.
        "label_vocabulary": component_spec.ExecutionParameter(type=str),
        "model_name": component_spec.ExecutionParameter(type=str),
    }
    INPUTS = {
        "model": component_spec.ChannelParameter(type=standard_artifacts.Model),
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "transform_graph": component_spec.ChannelParameter(type=standard_artifacts.TransformGraph),
    }
    OUTPUTS = {
        "blessing": component_spec.ChannelParameter(type=standard_artifacts.InfraBlessing),
    }


class ServingCheck(base_component.BaseComponent):
    """Blesses (InfraBlessing) a model that loads through the session-based loader, exposes
    the expected signatures and answers real eval examples sensibly; records latency."""

    SPEC_CLASS = ServingCheckSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, model, examples, transform_graph, label_vocabulary: str, model_name: str) -> None:
        super().__init__(spec=ServingCheckSpec(model=model, examples=examples, transform_graph=transform_graph,
                                               label_vocabulary=label_vocabulary, model_name=model_name,
                                               blessing=Channel(type=standard_artifacts.InfraBlessing)))
