"""Runs the pipeline with LocalDagRunner and picks the Beam setting for the data size."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tfx.dsl.compiler import constants as compiler_constants
from tfx.orchestration.local.local_dag_runner import LocalDagRunner
from tfx.orchestration.portable import runtime_parameter_utils

from components.serving_check import loader_process
from pipeline.config import MULTI_PROCESS_THRESHOLD_BYTES, PipelineConfig
from pipeline.datasets import table
from pipeline.runners import beam_tuning, cluster, loopback
from pipeline.runners.beam_args import BeamOptions
from pipeline.store import connection
from pipeline.store.url import parse_url


def beam_mode(config: PipelineConfig, data_root: Path) -> str:
    """in_memory for small data (no worker start-up), multi_process past the threshold."""
    return mode_for_size(config.beam_mode, table.data_size_bytes(data_root, config.spec.format))


def mode_for_size(chosen: str, size_bytes: int) -> str:
    """The Beam mode chosen (--beam-mode), or for `auto` the one for this much input."""
    if chosen != "auto":
        return chosen
    return "multi_process" if size_bytes > MULTI_PROCESS_THRESHOLD_BYTES else "in_memory"


def prepare_direct_runner(mode: str) -> list[str]:
    """Readies this process's DirectRunner for mode (threads, loopback-only servers); its args."""
    beam_tuning.tune(mode)
    skip_tfx_sdist()
    loopback.bind_beam_servers_to_loopback()
    return beam_pipeline_args(mode)


def skip_tfx_sdist() -> None:
    """Stops TFX from building an sdist of itself at each Beam component of this process.

    Given any Beam arg but a dependency (an extra package, a requirements file, an image),
    TFX builds one (about 1 s a component) and stages it with the job, for workers that lack
    TFX. A local run's workers never do: the DirectRunner's are this machine's processes, and
    a Spark or Flink run's worker pool or image must have turbotfx, and so TFX, installed
    (a run names a worker without it in one line).
    """
    from tfx.utils import dependency_utils

    if not hasattr(dependency_utils.make_beam_dependency_flags, "tfx_own"):
        tfx_own = dependency_utils.make_beam_dependency_flags

        def as_given(beam_pipeline_args: list[str]) -> list[str]:
            return beam_pipeline_args

        as_given.tfx_own = tfx_own  # type: ignore[attr-defined]
        dependency_utils.make_beam_dependency_flags = as_given


def beam_pipeline_args(mode: str) -> list[str]:
    if mode == "in_memory":
        return []  # the DirectRunner's default
    # 0 workers: one per core.
    return ["--direct_running_mode=multi_processing", "--direct_num_workers=0"]


def metadata_config(config: PipelineConfig):
    """The MLMD connection: --metadata-url, else the workspace's SQLite store."""
    return connection.connection_config(config.metadata_store_url)


def cache_enabled(config: PipelineConfig) -> bool:
    """No cached reruns on a PostgreSQL store. With MLMD/TFX 1.16 a rerun that reuses cached
    outputs there intermittently fails the Trainer's input resolution ("min_count has not
    met"): the cached Transform's outputs came back with the Examples and TransformCache
    types swapped, so no Examples was found under 'transformed_examples'. Every component
    runs again instead; SQLite and MySQL keep the cache."""
    if config.metadata_url and parse_url(config.metadata_url).scheme == "postgresql":
        return False
    return config.enable_cache


class _NamedRunDagRunner(LocalDagRunner):
    """LocalDagRunner with the run id chosen by the caller (TFX's is the start time), so an
    interrupted run can be found and marked aborted."""

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id

    def run_with_ir(self, pipeline, run_options=None) -> None:
        runtime_parameter_utils.substitute_runtime_parameter(
            pipeline, {compiler_constants.PIPELINE_RUN_ID_PARAMETER_NAME: self.run_id})
        super().run_with_ir(pipeline, run_options)


def run(config: PipelineConfig, data_root: Path, run_id: str | None = None,
        beam: BeamOptions | None = None) -> str:
    """Runs the pipeline to completion (raises on a failed component); returns how Beam ran.
    beam: a Flink or Spark cluster for the Beam components; default: the DirectRunner here."""
    from pipeline.pipeline import create_pipeline

    if beam is None or beam.runner == "direct":
        beam = BeamOptions()
        mode = beam_mode(config, data_root)
        args, described = prepare_direct_runner(mode), f"{mode} DirectRunner"
    else:
        beam_tuning.compress_pickles(True)  # the cluster's workers read only Beam's own pickles
        skip_tfx_sdist()
        args, described = cluster.pipeline_args(beam), cluster.describe(beam)
    pipeline = create_pipeline(
        dataclasses.replace(config, enable_cache=cache_enabled(config)),
        data_root=data_root,
        beam_pipeline_args=args,
        metadata_connection_config=metadata_config(config),
    )
    # The serving check's process imports TensorFlow while ExampleGen..Trainer run.
    with loader_process.prestarted(), cluster.spark_driver_address(beam):
        (_NamedRunDagRunner(run_id) if run_id else LocalDagRunner()).run(pipeline)
    return described
