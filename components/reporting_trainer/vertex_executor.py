"""Trainer executor that trains in a Vertex AI custom job, then records its report.

TFX's Vertex AI Training executor starts a job that runs a Trainer executor in the
pipeline image and waits for it. Here that inner executor is ours (runtime epochs, the
training report written beside the model); artifact properties set inside the job never
reach the pipeline's MLMD, so the report is read back from model_run and recorded here.
"""

from __future__ import annotations

from typing import Any

from tfx import types
from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer_executor

from components.reporting_trainer import executor as reporting_trainer


class Executor(vertex_trainer_executor.GenericExecutor):
    def _GetExecutorClass(self) -> type:
        return reporting_trainer.Executor

    def Do(
        self,
        input_dict: dict[str, list[types.Artifact]],
        output_dict: dict[str, list[types.Artifact]],
        exec_properties: dict[str, Any],
    ) -> None:
        super().Do(input_dict, output_dict, exec_properties)
        reporting_trainer.record_training_report(output_dict)
        reporting_trainer.record_identity(output_dict, exec_properties)
