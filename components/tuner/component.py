"""Tuner component: between Transform and the Trainer, searches TrainingConfig's knobs and
hands the best trial's values to the Trainer's `hyperparameters` input, as TFX's own Tuner
does (its output has the same name and type), without KerasTuner: keras-tuner 1.4 rejects
tf_keras models (../shared/notes/tuning.md)."""

from __future__ import annotations

from typing import Any

from tfx.dsl.components.base import base_component, executor_spec
from tfx.types import Channel, component_spec, standard_artifacts

from components.tuner import executor, keys


class TunerSpec(component_spec.ComponentSpec):
    PARAMETERS = {
        # The Trainer's custom_config (JSON): the untuned knobs, the features, the dataset.
        "custom_config": component_spec.ExecutionParameter(type=str),
        "train_args": component_spec.ExecutionParameter(type=str),
        "eval_args": component_spec.ExecutionParameter(type=str),
        keys.TRIALS: component_spec.ExecutionParameter(type=int),  # 0: until the minutes run out
        keys.MINUTES: component_spec.ExecutionParameter(type=float),  # 0: no time limit
        keys.KNOBS: component_spec.ExecutionParameter(type=str),  # JSON list; [] every knob of the family
        # An Optuna (SQLAlchemy) storage URL without a password; "" in memory.
        keys.STORAGE: component_spec.ExecutionParameter(type=str),
        keys.PASSWORD_ENV: component_spec.ExecutionParameter(type=str),
        keys.STUDY_NAME: component_spec.ExecutionParameter(type=str),  # "" a new study per execution
        keys.PARALLELISM: component_spec.ExecutionParameter(type=int),  # processes running trials
        # The search space's fingerprint, matched by the resolver that reuses a result.
        keys.SEARCH_SPACE: component_spec.ExecutionParameter(type=str),
    }
    INPUTS = {
        "examples": component_spec.ChannelParameter(type=standard_artifacts.Examples),
        "transform_graph": component_spec.ChannelParameter(type=standard_artifacts.TransformGraph),
        "schema": component_spec.ChannelParameter(type=standard_artifacts.Schema),
    }
    OUTPUTS = {
        "best_hyperparameters": component_spec.ChannelParameter(type=standard_artifacts.HyperParameters),
    }


class Tuner(base_component.BaseComponent):
    """Runs an Optuna study of the Trainer's knobs (trainer_module/tuning.py); records every
    trial on its HyperParameters artifact."""

    SPEC_CLASS = TunerSpec
    EXECUTOR_SPEC = executor_spec.ExecutorClassSpec(executor.Executor)

    def __init__(self, examples, transform_graph, schema, **properties: Any) -> None:
        super().__init__(spec=TunerSpec(
            examples=examples, transform_graph=transform_graph, schema=schema,
            best_hyperparameters=Channel(type=standard_artifacts.HyperParameters), **properties))
