"""`turbotfx compile` and `turbotfx submit`: the same pipeline on Vertex AI Pipelines or
Kubeflow Pipelines v2."""

from __future__ import annotations

import argparse
import json
import os
import warnings

from pipeline.cli import args as cli_args
from pipeline.cli.console import quietly
from pipeline.errors import ConfigError
from pipeline.runners import beam_args


def add_parser(commands: argparse._SubParsersAction) -> None:
    compile_ = commands.add_parser(
        "compile", help="compile the pipeline for Vertex AI Pipelines or Kubeflow Pipelines (offline)")
    compile_.add_argument("--target", required=True, help="vertex (PipelineJob JSON) or kubeflow (KFP v2 YAML)")
    compile_.add_argument("--image", help="container image every component runs in (built from the Dockerfile)")
    compile_.add_argument("--pipeline-root", required=True,
                          help="where artifacts go: gs://BUCKET/DIR (Vertex); gs://, s3:// or minio:// (Kubeflow)")
    compile_.add_argument("--output", required=True, help="file to write: pipeline.json (vertex), pipeline.yaml (kubeflow)")
    cli_args.add_dataset(compile_, "a dataset file in the source tree (it travels in the image) or a "
                                   "built-in: penguins (default), synthetic")
    cli_args.add_data_root(compile_, "default of the data_root parameter: a directory of CSV files "
                                     "(default: the penguins CSV inside the image)")
    compile_.add_argument("--serving-root", help="where the Pusher writes versions (default: <pipeline root>/serving)")
    cli_args.add_pipeline_args(compile_)
    cli_args.add_no_cache(compile_, "compile with caching off for every task")

    beam = compile_.add_argument_group("Beam (ExampleGen, StatisticsGen, Transform, Evaluator)")
    cli_args.add_beam_runner_args(beam, beam_args.BEAM_RUNNERS,
                                  "where Beam components run (default: direct, inside each component's container)")
    beam.add_argument("--project", help="Google Cloud project (Dataflow, Vertex AI Training, endpoint)")
    beam.add_argument("--region", help="Google Cloud region (Dataflow, Vertex AI Training, endpoint)")
    beam.add_argument("--temp-location", help="Dataflow temp and staging path, gs://BUCKET/tmp")
    beam.add_argument("--worker-image", help="Beam worker image (default: --image)")
    beam.add_argument("--requirements-file", help="Dataflow: requirements file for the workers")

    training = compile_.add_argument_group("Vertex AI Training for the Trainer (optional)")
    training.add_argument("--training-machine-type", help="e.g. n1-standard-8; turns Vertex AI Training on")
    training.add_argument("--training-accelerator", default="", help="e.g. NVIDIA_TESLA_T4")
    training.add_argument("--training-accelerator-count", type=int, default=0,
                          help="accelerators per machine, with --training-accelerator (default: 0)")
    training.add_argument("--training-replicas", type=int, default=1,
                          help="machines; more than 1 trains with MultiWorkerMirroredStrategy")

    endpoint = compile_.add_argument_group("Vertex AI endpoint push (optional, beside the TF Serving push)")
    endpoint.add_argument("--vertex-endpoint", help="endpoint name; turns the Vertex endpoint Pusher on")
    endpoint.add_argument("--endpoint-machine-type", default="n1-standard-4",
                          help="machine type serving the endpoint (default: n1-standard-4)")

    compile_.add_argument("--resources", action="append", default=[], metavar="NODE:cpu=N,memory=GB[,accelerator=TYPE,accelerator_count=N]",
                          help="CPU (cores), memory (GB) and accelerator limits of one component, repeatable "
                               "(e.g. --resources Trainer:cpu=8,memory=32,accelerator=NVIDIA_TESLA_T4,accelerator_count=1)")

    submit = commands.add_parser("submit", help="submit a compiled pipeline to Vertex AI or Kubeflow Pipelines")
    submit.add_argument("package", help="the compiled file (from `turbotfx compile`)")
    submit.add_argument("--target", required=True, help="vertex or kubeflow")
    submit.add_argument("--project", help="Vertex: Google Cloud project")
    submit.add_argument("--region", help="Vertex: region, e.g. us-central1")
    submit.add_argument("--service-account", help="service account the run executes as")
    submit.add_argument("--host", help="Kubeflow: the KFP API endpoint, e.g. http://localhost:8080")
    submit.add_argument("--experiment", default="turbotfx", help="Kubeflow: experiment name (default: turbotfx)")
    submit.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="runtime parameter, repeatable: data_root, epochs, blessing_threshold")
    submit.add_argument("--display-name", help="run name (default: the pipeline name)")
    submit.add_argument("--job-id", help="Vertex: job id (default: <pipeline name>-<UTC timestamp>)")
    submit.add_argument("--pipeline-root", help="override the compiled pipeline root")
    caching = submit.add_mutually_exclusive_group()
    caching.add_argument("--cache", dest="enable_caching", action="store_true", default=None,
                         help="turn caching on for every task (default: as compiled)")
    caching.add_argument("--no-cache", dest="enable_caching", action="store_false",
                         help="turn caching off for every task")
    submit.add_argument("--dry-run", action="store_true", help="print the exact request instead of sending it")
    compile_.set_defaults(handler=handle)
    submit.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    # Google client libraries warn about the Python version on import; the answer is ours to print.
    warnings.filterwarnings("ignore", category=FutureWarning)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.command == "compile":
        return _compile(args)
    return _submit(args)


def _compile(args: argparse.Namespace) -> int:
    from pipeline.runners import kubeflow

    # data_root here is the runtime parameter's default, not a local directory to read.
    config = cli_args.config_from_args(args, ignore=("data_root",))
    options = kubeflow.CompileOptions(
        target=args.target,
        image=args.image or "",
        pipeline_root=args.pipeline_root,
        output=args.output,
        data_root=args.data_root,
        serving_root=args.serving_root,
        beam=cli_args.beam_options_from_args(
            args, project=args.project, region=args.region, temp_location=args.temp_location,
            worker_image=args.worker_image, requirements_file=args.requirements_file),
        vertex_training=_vertex_training(args),
        vertex_endpoint=_vertex_endpoint(args),
        resources={node: spec for node, spec in map(kubeflow.parse_resources, args.resources)},
    )
    kubeflow.validate(options, config)  # before TFX and TF are imported (seconds)
    job = quietly(kubeflow.compile_pipeline, config, options)
    tasks = job["pipelineSpec"]["root"]["dag"]["tasks"]
    print(f"compiled {config.pipeline_name!r} for {args.target}: {len(tasks)} tasks -> {args.output}")
    print(f"  image {args.image}, pipeline root {args.pipeline_root}, Beam runner {args.beam_runner}")
    print(f"  runtime parameters: {', '.join(kubeflow.parameter_names(job))}")
    return 0


def _vertex_training(args: argparse.Namespace):
    if not args.training_machine_type:
        return None
    from pipeline.deployment import VertexTraining

    _require_project(args, "Vertex AI Training")
    if args.training_replicas < 1:
        raise ConfigError(f"--training-replicas must be at least 1, got {args.training_replicas}")
    if bool(args.training_accelerator) != (args.training_accelerator_count > 0):
        raise ConfigError("give --training-accelerator and --training-accelerator-count together "
                          "(e.g. NVIDIA_TESLA_T4 and 1)")
    return VertexTraining(
        project=args.project, region=args.region, image=args.image or "",
        machine_type=args.training_machine_type, accelerator_type=args.training_accelerator,
        accelerator_count=args.training_accelerator_count, replicas=args.training_replicas,
    )


def _vertex_endpoint(args: argparse.Namespace):
    if not args.vertex_endpoint:
        return None
    from pipeline.deployment import VertexEndpoint

    _require_project(args, "the Vertex endpoint push")
    return VertexEndpoint(project=args.project, region=args.region, endpoint_name=args.vertex_endpoint,
                          machine_type=args.endpoint_machine_type)


def _require_project(args: argparse.Namespace, what: str) -> None:
    if not (args.project and args.region):
        raise ConfigError(f"{what} needs --project and --region (e.g. --project my-project --region us-central1)")


def _submit(args: argparse.Namespace) -> int:
    from pipeline.runners import submit

    options = submit.SubmitOptions(
        target=args.target,
        package=args.package,
        parameters=dict(submit.parse_parameter(p) for p in args.param),
        display_name=args.display_name,
        job_id=args.job_id,
        pipeline_root=args.pipeline_root,
        enable_caching=args.enable_caching,
        service_account=args.service_account,
        project=args.project,
        region=args.region,
        host=args.host,
        experiment=args.experiment,
    )
    if args.dry_run:
        request = quietly(submit.build_request, options)
        print(json.dumps(request, indent=2, sort_keys=True))
        return 0
    result = quietly(submit.submit, options)
    print(f"submitted to {args.target}: " + ", ".join(f"{k} {v}" for k, v in result.items()))
    return 0

