"""Beam pipeline args for the runner the Beam components (ExampleGen, StatisticsGen,
Transform, Evaluator) scale out on: DirectRunner, Dataflow, or Flink/Spark through Beam's
portable runner. The pipeline code stays the same; only these args change.
"""

from __future__ import annotations

import dataclasses

from pipeline.errors import ConfigError

BEAM_RUNNERS = ("direct", "dataflow", "flink", "spark")
# Flink and Spark close a stage's Python SDK worker when the stage ends, by default: each
# stage then pays a fresh worker's start and imports (TFX's jobs have dozens of stages).
# Kept for a while instead, workers are reused across the stages of a job.
ENVIRONMENT_CACHE_MS = 300_000


@dataclasses.dataclass(frozen=True)
class BeamOptions:
    runner: str = "direct"
    project: str | None = None  # Dataflow
    region: str | None = None  # Dataflow
    temp_location: str | None = None  # Dataflow: gs:// staging and temp files
    worker_image: str | None = None  # Dataflow / portable workers; default: the pipeline image
    requirements_file: str | None = None  # Dataflow: extra packages for the workers
    job_endpoint: str | None = None  # Flink / Spark job server, HOST:PORT
    spark_master: str | None = None  # spark://HOST:PORT: Beam starts the job server from the jar
    spark_job_server_jar: str | None = None  # default: the one `make cluster-deps` builds
    worker_pool: str | None = None  # HOST:PORT of a Beam worker pool (EXTERNAL environment)
    spark_driver_host: str | None = None  # `run` on Spark: where the driver listens; default loopback
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
    assert options.temp_location is not None  # in `missing` above otherwise
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
    name = options.runner.title()
    if options.runner == "spark" and options.spark_master:
        args = _spark_master_args(options.spark_master, options.spark_job_server_jar)
    elif options.job_endpoint:
        args = ["--runner=PortableRunner", f"--job_endpoint={options.job_endpoint}"]
    else:
        wanted = "--spark-master spark://HOST:PORT or --job-endpoint HOST:PORT" if options.runner == "spark" \
            else "--job-endpoint HOST:PORT"
        raise ConfigError(f"the {name} runner needs {wanted} (the {name} job server Beam submits to)")
    return args + [f"--environment_cache_millis={ENVIRONMENT_CACHE_MS}"] + _worker_environment(options, worker_image, name)


def _spark_master_args(spark_master: str, job_server_jar: str | None) -> list[str]:
    if not spark_master.startswith("spark://"):
        raise ConfigError(f"--spark-master must look like spark://HOST:PORT, got {spark_master!r}")
    jar = job_server_jar or default_spark_job_server_jar()
    # SparkRunner starts (once per process) and stops the job server itself, from this jar.
    return ["--runner=SparkRunner", f"--spark_master_url={spark_master}",
            f"--spark_job_server_jar={jar}"]


def default_spark_job_server_jar() -> str:
    from pipeline.runners.spark import jars

    return str(jars.job_server_jar())


def _worker_environment(options: BeamOptions, worker_image: str | None, name: str) -> list[str]:
    """Where the Python stages run: a worker pool already serving (EXTERNAL) or the image (DOCKER)."""
    if options.worker_pool:
        return ["--environment_type=EXTERNAL", f"--environment_config={options.worker_pool}"]
    if worker_image:
        return ["--environment_type=DOCKER", f"--environment_config={worker_image}"]
    raise ConfigError(f"the {name} runner needs Python workers with turbotfx installed: give --worker-pool "
                      "HOST:PORT (a Beam worker pool, python -m pipeline.runners.worker_pool), "
                      "or, in a compiled pipeline, --worker-image IMAGE")
