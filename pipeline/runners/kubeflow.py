"""Compiles the pipeline with KubeflowV2DagRunner for Vertex AI Pipelines or Kubeflow Pipelines v2.

The functions Transform and Trainer run are import paths inside the pipeline image, so a
compile uploads nothing and needs no cloud access: it writes one file.
  vertex:   a PipelineJob JSON (what aiplatform.PipelineJob's template_path takes)
  kubeflow: the PipelineSpec YAML (what kfp.Client uploads and runs)
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline import datasets
from pipeline.atomic import atomic_path
from pipeline.config import PipelineConfig
from pipeline.deployment import Deployment, VertexEndpoint, VertexTraining
from pipeline.errors import ConfigError
from pipeline.runners import TARGETS, beam_args

# What --resources may limit per component.
RESOURCE_KEYS = ("cpu", "memory", "accelerator", "accelerator_count")
# Where the Dockerfile puts the source tree and the embedded penguins CSV in the image.
IMAGE_SOURCE_ROOT = "/turbotfx"
IMAGE_DATA_ROOT = "/turbotfx/data/penguins"
# Pipeline roots each target's runner can write artifacts to.
PIPELINE_ROOT_SCHEMES = {"vertex": ("gs://",), "kubeflow": ("gs://", "s3://", "minio://")}
OUTPUT_SUFFIXES = {"vertex": (".json",), "kubeflow": (".yaml", ".yml")}

# Runtime parameters: a submitted run may set these without recompiling.
DATA_ROOT_PARAMETER = "data_root"
EPOCHS_PARAMETER = "epochs"
THRESHOLD_PARAMETER = "blessing_threshold"


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    target: str
    image: str
    pipeline_root: str
    output: str
    data_root: str | None = None  # runtime parameter default; None: penguins in the image
    serving_root: str | None = None  # None: <pipeline root>/serving
    beam: beam_args.BeamOptions = beam_args.BeamOptions()
    vertex_training: VertexTraining | None = None
    vertex_endpoint: VertexEndpoint | None = None
    resources: dict[str, Any] = dataclasses.field(default_factory=dict)  # node id -> ResourceSpec


def validate(options: CompileOptions, config: PipelineConfig) -> None:
    if options.target not in TARGETS:
        raise ConfigError(f"unknown target {options.target!r}; choose one of: {', '.join(TARGETS)}")
    if not options.image or not options.image.strip():
        raise ConfigError("--image is required: the container image every component runs in "
                          "(build it from the Dockerfile, e.g. us-docker.pkg.dev/PROJECT/REPO/turbotfx:TAG)")
    schemes = PIPELINE_ROOT_SCHEMES[options.target]
    if not options.pipeline_root.startswith(schemes):
        raise ConfigError(
            f"pipeline root {options.pipeline_root!r} is not reachable from {options.target} "
            f"components; use a {' or '.join(s + '...' for s in schemes)} path, e.g. gs://BUCKET/pipelines"
        )
    if not options.output.endswith(OUTPUT_SUFFIXES[options.target]):
        wanted = OUTPUT_SUFFIXES[options.target][0]
        raise ConfigError(f"--output {options.output!r}: the {options.target} target writes a "
                          f"{wanted[1:].upper()} file; name it e.g. pipeline{wanted}")
    if options.data_root is None and config.spec.generate != "penguins":
        raise ConfigError(f"the {config.spec.name} dataset is not in the image; give --data-root "
                          f"gs://BUCKET/DIR (its {config.spec.format.upper()} files) or set the data_root "
                          "parameter at submit")
    image_path(config.spec.schema, f"the schema of {config.spec.path}")
    if config.metadata_url:
        raise ConfigError("--metadata-url is for local runs; Vertex AI and Kubeflow record to "
                          "their own MLMD store")
    beam_args.pipeline_args(options.beam, options.image)  # raises on incomplete runner settings


def deployment(config: PipelineConfig, options: CompileOptions) -> Deployment:
    """The compiled pipeline's deployment: runtime parameters, paths inside the image."""
    from tfx.orchestration import data_types

    serving_root = options.serving_root or options.pipeline_root.rstrip("/") + "/serving"
    return Deployment(
        pipeline_root=options.pipeline_root,
        data_root=data_types.RuntimeParameter(
            name=DATA_ROOT_PARAMETER, ptype=str, default=options.data_root or IMAGE_DATA_ROOT),
        epochs=data_types.RuntimeParameter(name=EPOCHS_PARAMETER, ptype=int, default=config.training.epochs),
        blessing_threshold=None if config.blessing_threshold is None else data_types.RuntimeParameter(
            name=THRESHOLD_PARAMETER, ptype=float, default=float(config.blessing_threshold)),
        schema_file=image_path(config.spec.schema, f"the schema of {config.spec.path}"),
        serving_dir=f"{serving_root.rstrip('/')}/{config.model_name}",
        vertex_training=options.vertex_training,
        vertex_endpoint=options.vertex_endpoint,
        resources=options.resources,
        python_resolvers=False,
    )


def image_path(path: Path, what: str) -> str:
    """A file's path in the image: the Dockerfile copies the source tree to IMAGE_SOURCE_ROOT,
    so the built-in datasets, and your own dataset file kept in the tree, travel with it."""
    source_root = datasets.BUILTIN_DIR.parents[1]  # pipeline/datasets/ -> the tree
    try:
        relative = path.resolve().relative_to(source_root)
    except ValueError:
        raise ConfigError(f"{what} ({path}) is outside the source tree the image is built from "
                          f"({source_root}); copy it into the tree, rebuild the image and compile again") from None
    return str(PurePosixPath(IMAGE_SOURCE_ROOT) / relative.as_posix())


def compile_pipeline(config: PipelineConfig, options: CompileOptions) -> dict[str, Any]:
    """Writes the compiled pipeline to options.output; returns the PipelineJob dict."""
    validate(options, config)
    from tfx.orchestration import data_types
    from tfx.orchestration.kubeflow.v2 import kubeflow_v2_dag_runner

    from pipeline.pipeline import create_pipeline

    compiled = deployment(config, options)
    pipeline = create_pipeline(
        config,
        beam_pipeline_args=beam_args.pipeline_args(options.beam, options.image),
        deployment=compiled,
    )
    parameters = (compiled.data_root, compiled.epochs, compiled.blessing_threshold)
    defaults = {p.name: p.default for p in parameters if isinstance(p, data_types.RuntimeParameter)}
    runner = kubeflow_v2_dag_runner.KubeflowV2DagRunner(
        config=kubeflow_v2_dag_runner.KubeflowV2DagRunnerConfig(
            display_name=config.pipeline_name,
            default_image=options.image,
            # Schema 2.1 (typed parameters with defaults) is what KFP v2 runs; Vertex runs it too.
            use_pipeline_spec_2_1=True,
        ),
    )
    job = runner.run(pipeline, parameter_values=defaults, write_out=False)
    # TFX leaves the defaults out of the spec; KFP runs the spec alone and needs them there.
    root_parameters = job["pipelineSpec"]["root"]["inputDefinitions"]["parameters"]
    for name, default in defaults.items():
        root_parameters[name].update(defaultValue=default, isOptional=True)
    # As given (20, not the 20.0 a protobuf Value turns every number into).
    job["runtimeConfig"]["parameterValues"] = defaults
    # The telemetry labels name the machine's Python and TFX install, not the pipeline.
    job.pop("labels", None)
    _write(job, options)
    return job


def _write(job: dict[str, Any], options: CompileOptions) -> None:
    """Writes the file whole or not at all (a temp file renamed into place)."""
    output = Path(options.output)
    if output.is_dir():
        raise ConfigError(f"--output {output} is a directory; name a file, e.g. {output / 'pipeline.json'}")
    if options.target == "vertex":
        text = json.dumps(job, indent=2, sort_keys=True) + "\n"
    else:
        import yaml

        spec = dict(job["pipelineSpec"])
        # KFP runs the spec alone: the pipeline root travels in it.
        spec["defaultPipelineRoot"] = options.pipeline_root
        text = yaml.safe_dump(spec, sort_keys=True)
    with atomic_path(output) as tmp:
        Path(tmp).write_text(text)


def parameter_names(job: dict[str, Any]) -> list[str]:
    """The runtime parameters a compiled pipeline takes."""
    spec = job.get("pipelineSpec", job)
    return sorted(spec.get("root", {}).get("inputDefinitions", {}).get("parameters", {}))


def parse_resources(text: str) -> tuple[str, Any]:
    """'Trainer:cpu=8,memory=32,accelerator=NVIDIA_TESLA_T4,accelerator_count=1' -> (node, ResourceSpec)."""
    from kfp.pipeline_spec import pipeline_spec_pb2

    example = "e.g. Trainer:cpu=8,memory=32,accelerator=NVIDIA_TESLA_T4,accelerator_count=1"
    node, sep, body = text.partition(":")
    if not sep or not node or not body:
        raise ConfigError(f"--resources {text!r} is not NODE:KEY=VALUE,...; {example}")
    values: dict[str, str] = {}
    for item in body.split(","):
        key, eq, value = item.partition("=")
        if not eq or key not in RESOURCE_KEYS:
            raise ConfigError(f"--resources {text!r}: {item!r} is not one of "
                              f"{', '.join(k + '=...' for k in RESOURCE_KEYS)}; {example}")
        values[key] = value
    spec = pipeline_spec_pb2.PipelineDeploymentConfig.PipelineContainerSpec.ResourceSpec()
    try:
        if "cpu" in values:
            spec.cpu_limit = _positive(float(values["cpu"]))
        if "memory" in values:
            spec.memory_limit = _positive(float(values["memory"]))
        if "accelerator_count" in values:
            spec.accelerator.count = int(_positive(int(values["accelerator_count"])))
    except ValueError:
        raise ConfigError(f"--resources {text!r}: cpu, memory and accelerator_count must be positive "
                          f"numbers; {example}") from None
    if ("accelerator" in values) != ("accelerator_count" in values):
        raise ConfigError(f"--resources {text!r}: give accelerator and accelerator_count together; {example}")
    if "accelerator" in values:
        spec.accelerator.type = values["accelerator"]
    return node, spec


def _positive(value: float) -> float:
    if value <= 0:
        raise ValueError(value)
    return value
