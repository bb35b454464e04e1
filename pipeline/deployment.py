"""Deployment: what differs between a local run and a compiled (Vertex AI / Kubeflow) one.

create_pipeline builds the same components either way. A deployment says where the
pipeline root, the input data, the curated schema and the serving directory are, which
settings are runtime parameters, and the cloud-only extras (Vertex AI Training, a Vertex
endpoint push, per-component resources).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping, Union

from tfx.orchestration import data_types

from pipeline.config import PipelineConfig
from pipeline.datasets import prepare

# A value fixed at definition time, or a runtime parameter (its default fixed then).
Setting = Union[str, int, float, data_types.RuntimeParameter]


@dataclasses.dataclass(frozen=True)
class VertexTraining:
    """The Trainer runs as a Vertex AI custom job (tfx.extensions.google_cloud_ai_platform)."""

    project: str
    region: str
    image: str
    machine_type: str = "n1-standard-8"
    accelerator_type: str = ""  # e.g. NVIDIA_TESLA_T4; "" for none
    accelerator_count: int = 0
    replicas: int = 1  # more than 1: one chief plus workers (MultiWorkerMirroredStrategy)

    def worker_pool_specs(self) -> list[dict[str, Any]]:
        machine: dict[str, Any] = {"machine_type": self.machine_type}
        if self.accelerator_type:
            machine.update(accelerator_type=self.accelerator_type, accelerator_count=self.accelerator_count)
        pool = {"machine_spec": machine, "container_spec": {"image_uri": self.image}}
        pools = [{**pool, "replica_count": 1}]
        if self.replicas > 1:
            pools.append({**pool, "replica_count": self.replicas - 1})
        return pools


@dataclasses.dataclass(frozen=True)
class VertexEndpoint:
    """A second Pusher deploys blessed models to a Vertex AI endpoint."""

    project: str
    region: str
    endpoint_name: str
    machine_type: str = "n1-standard-4"
    # Vertex's prebuilt TF serving container closest to TF 2.16.
    serving_image: str = "us-docker.pkg.dev/vertex-ai/prediction/tf2-cpu.2-15:latest"


@dataclasses.dataclass(frozen=True)
class Deployment:
    pipeline_root: str
    data_root: Setting
    epochs: Setting
    blessing_threshold: Setting | None  # None: the dataset file sets no bound (a regression)
    schema_file: str
    serving_dir: str  # <serving root>/<model name>; a URI (gs://...) or a local path
    vertex_training: VertexTraining | None = None
    vertex_endpoint: VertexEndpoint | None = None
    # Node id -> kfp ResourceSpec (PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec).
    resources: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    # Kubeflow's and Vertex's compilers turn a Resolver into their own tasks and know only
    # TFX's strategies: there the baseline is TFX's latest blessed model.
    python_resolvers: bool = True

    @property
    def serving_on_filesystem(self) -> bool:
        """A local (or mounted) path: the atomic pusher; an object store: TFX's own copy."""
        return "://" not in self.serving_dir


def local(config: PipelineConfig, data_root: Path | None = None) -> Deployment:
    """A LocalDagRunner run: everything under the workspace, every setting fixed."""
    return Deployment(
        pipeline_root=str(config.pipeline_root),
        data_root=str(data_root or config.data_path),
        epochs=config.training.epochs,
        blessing_threshold=config.blessing_threshold,
        # ImportSchemaGen's cache key is the path: a content-addressed copy keeps an edited
        # schema from being ignored on the next run.
        schema_file=str(prepare.content_addressed_copy(config.spec.schema, config.pipeline_root / "curated_schemas")),
        serving_dir=str(config.serving_dir),
    )
