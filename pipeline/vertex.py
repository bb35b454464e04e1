"""Vertex AI extras of a compiled pipeline: the Trainer on Vertex AI Training, and a second
Pusher that deploys to a Vertex AI endpoint (tfx.extensions.google_cloud_ai_platform).

The TFX extension modules are imported inside the functions: they pull in the Google Cloud
client libraries (seconds of start-up) that a local run never uses.
"""

from __future__ import annotations

from pipeline.deployment import VertexEndpoint, VertexTraining


def training_config(training: VertexTraining | None) -> dict[str, object]:
    """custom_config entries that send the Trainer to Vertex AI Training."""
    if not training:
        return {}
    from tfx.extensions.google_cloud_ai_platform import constants
    from tfx.extensions.google_cloud_ai_platform.trainer import executor as vertex_trainer

    return {
        constants.ENABLE_VERTEX_KEY: True,
        constants.VERTEX_REGION_KEY: training.region,
        # A CustomJob: TFX's runner takes the project out and runs the job spec.
        vertex_trainer.TRAINING_ARGS_KEY: {
            "project": training.project,
            "job_spec": {"worker_pool_specs": training.worker_pool_specs()},
        },
    }


def endpoint_pusher(endpoint: VertexEndpoint, trainer, evaluator, serving_check):
    """Deploys the same blessed model to a Vertex AI endpoint, beside the filesystem push."""
    from tfx.extensions.google_cloud_ai_platform import constants
    from tfx.extensions.google_cloud_ai_platform.pusher.component import Pusher as VertexPusher

    return VertexPusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=serving_check.outputs["blessing"],
        custom_config={
            constants.ENABLE_VERTEX_KEY: True,
            constants.VERTEX_REGION_KEY: endpoint.region,
            constants.VERTEX_CONTAINER_IMAGE_URI_KEY: endpoint.serving_image,
            constants.SERVING_ARGS_KEY: {
                "project_id": endpoint.project,
                "endpoint_name": endpoint.endpoint_name,
                "machine_type": endpoint.machine_type,
            },
        },
    ).with_id("VertexEndpointPusher")
