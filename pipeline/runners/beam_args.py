"""Beam pipeline args for the runner the Beam components (ExampleGen, StatisticsGen,
Transform, Evaluator) scale out on: DirectRunner, Dataflow, or Flink/Spark through Beam's
portable runner. The pipeline code stays the same; only these args change.
"""

from __future__ import annotations

import dataclasses

from pipeline.errors import ConfigError

BEAM_RUNNERS = ("direct", "dataflow", "flink", "spark")


@dataclasses.dataclass(frozen=True)
class BeamOptions:
    runner: str = "direct"
    project: str | None = None  # Dataflow
    region: str | None = None  # Dataflow
    temp_location: str | None = None  # Dataflow: gs:// staging and temp files
    worker_image: str | None = None  # Dataflow / portable workers; default: the pipeline image
    requirements_file: str | None = None  # Dataflow: extra packages for the workers
    job_endpoint: str | None = None  # Flink / Spark job server, HOST:PORT
    extra: tuple[str, ...] = ()  # --beam-arg pass-through, appended last (so it wins)


def pipeline_args(options: BeamOptions, image: str | None = None) -> list[str]:
    """The Beam args for options.runner; image is the pipeline's container image."""
    if options.runner not in BEAM_RUNNERS:
        raise ConfigError(f"unknown Beam runner {options.runner!r}; choose one of: {', '.join(BEAM_RUNNERS)}")
    for arg in options.extra:
        if not arg.startswith("--"):
            raise ConfigError(f"Beam arg {arg!r} must look like --name=value "
                              "(e.g. --beam-arg=--max_num_workers=10)")
    worker_image = options.worker_image or image
    if options.runner == "direct":
        args: list[str] = []
    elif options.runner == "dataflow":
        args = _dataflow_args(options, worker_image)
    else:
        args = _portable_args(options, worker_image)
    return args + list(options.extra)


def _dataflow_args(options: BeamOptions, worker_image: str | None) -> list[str]:
    missing = [flag for flag, value in (("--project", options.project), ("--region", options.region),
                                        ("--temp-location", options.temp_location)) if not value]
    if missing:
        raise ConfigError(f"the Dataflow runner needs {', '.join(missing)} "
                          "(e.g. --project my-project --region us-central1 --temp-location gs://bucket/tmp)")
    if not options.temp_location.startswith("gs://"):
        raise ConfigError(f"Dataflow's temp location must be a gs:// path, got {options.temp_location!r}")
    args = [
        "--runner=DataflowRunner",
        f"--project={options.project}",
        f"--region={options.region}",
        f"--temp_location={options.temp_location}",
    ]
    if worker_image:
        # Workers run the pipeline image: the same TFX, TFT and trainer_module versions.
        args += [f"--sdk_container_image={worker_image}", "--experiments=use_runner_v2"]
    if options.requirements_file:
        args.append(f"--requirements_file={options.requirements_file}")
    return args


def _portable_args(options: BeamOptions, worker_image: str | None) -> list[str]:
    if not options.job_endpoint:
        raise ConfigError(f"the {options.runner.title()} runner needs --job-endpoint HOST:PORT "
                          f"(the {options.runner.title()} job server Beam submits to)")
    args = ["--runner=PortableRunner", f"--job_endpoint={options.job_endpoint}"]
    if worker_image:
        args += ["--environment_type=DOCKER", f"--environment_config={worker_image}"]
    return args
