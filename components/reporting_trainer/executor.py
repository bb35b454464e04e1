"""Trainer executor that copies training_report.json onto the Model artifact.

TFX records the Trainer's exec properties, but not what the run actually used once
`auto` choices are resolved (strategy, replicas, precision, XLA, global batch) nor what
it measured. run_fn writes those to training_report.json in model_run; this executor
puts them on the Model artifact as custom properties, so MLMD answers "how was this
model trained?" without opening files.
"""

from __future__ import annotations

import json
import os
from typing import Any

from tfx import types
from tfx.components.trainer import executor as trainer_executor
from tfx.types import artifact_utils
from tfx.utils import io_utils

from components.reporting_trainer.keys import (
    EPOCHS_KEY,
    FEATURE_CONTRACT_KEY,
    MODEL_NAME_KEY,
    TRAINING_PREFIX,
    json_property,
)
from trainer_module.config import REPORT_FILE, RUNTIME_KNOB


class Executor(trainer_executor.GenericExecutor):
    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        super().Do(input_dict, output_dict, with_runtime_epochs(exec_properties))
        record_training_report(output_dict)
        record_identity(output_dict, exec_properties)


def record_identity(output_dict: dict[str, list[types.Artifact]], exec_properties: dict[str, Any]) -> None:
    """The model name and feature contract from custom_config onto the Model artifact, where
    the baseline resolver (components/baseline_model) matches a candidate with its baseline."""
    raw = exec_properties.get("custom_config")
    custom_config = dict(raw) if isinstance(raw, dict) else json.loads(raw or "null") or {}
    model = artifact_utils.get_single_instance(output_dict["model"])
    for key in (MODEL_NAME_KEY, FEATURE_CONTRACT_KEY):
        if custom_config.get(key):
            model.set_string_custom_property(key, str(custom_config[key]))


def record_training_report(output_dict: dict[str, list[types.Artifact]]) -> None:
    """Copies model_run's training_report.json onto the Model artifact."""
    report_path = os.path.join(artifact_utils.get_single_uri(output_dict["model_run"]), REPORT_FILE)
    if not io_utils.fileio.exists(report_path):
        return  # a run_fn that writes no report: nothing to record
    report = json.loads(io_utils.read_string_file(report_path))
    record_report(artifact_utils.get_single_instance(output_dict["model"]), report)


def with_runtime_epochs(exec_properties: dict[str, Any]) -> dict[str, Any]:
    """exec_properties with custom_config's epochs replaced by the `epochs` property, if set."""
    epochs = exec_properties.get(EPOCHS_KEY)
    if epochs is None:
        return exec_properties
    if int(epochs) < 1:
        raise ValueError(f"epochs must be at least 1, got {epochs}; set the 'epochs' pipeline parameter to 1 or more")
    raw = exec_properties.get("custom_config")
    # JSON text from TFX's orchestrators; a dict where a caller has decoded it already.
    custom_config = dict(raw) if isinstance(raw, dict) else json.loads(raw or "null") or {}
    custom_config[RUNTIME_KNOB] = int(epochs)
    return {**exec_properties, "custom_config": json.dumps(custom_config, sort_keys=True)}


def record_report(model: types.Artifact, report: dict[str, Any]) -> None:
    """Each report entry as a typed custom property named training_<key>."""
    for key, value in report.items():
        name = TRAINING_PREFIX + key
        if isinstance(value, bool):
            model.set_int_custom_property(name, int(value))
        elif isinstance(value, int):
            model.set_int_custom_property(name, value)
        elif isinstance(value, float):
            model.set_float_custom_property(name, value)
        elif isinstance(value, str):
            model.set_string_custom_property(name, value)
        else:
            model.set_string_custom_property(name, json_property(value))
