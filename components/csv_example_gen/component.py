"""TFX's CsvExampleGen (its spec, driver and node id) with our executor."""

from __future__ import annotations

from tfx.components.example_gen.csv_example_gen import component as tfx_component
from tfx.dsl.components.base import executor_spec

from components.csv_example_gen import executor


class CsvExampleGen(tfx_component.CsvExampleGen):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
