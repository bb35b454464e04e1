"""`turbotfx compile` for Vertex AI and Kubeflow Pipelines, read back with the kfp-pipeline-spec
protos, and `turbotfx submit` (dry run, and a real send to a loopback KFP API). Offline."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format
from kfp.pipeline_spec import pipeline_spec_pb2

from pipeline.runners import kubeflow
from tests import REPO
from tests.conftest import cli, turbotfx
from tests.doubles.kfp_server import EXPERIMENT_ID, RUN_ID, FakeKfpApi

IMAGE = "us-docker.pkg.dev/demo-project/ml/turbotfx:1.0"
ROOT = "gs://demo-bucket/pipelines"
RESOLVER_TASKS = {"latest_blessed_model_resolver-model-resolver",
                  "latest_blessed_model_resolver-model-blessing-resolver"}
PIPELINE_TASKS = {"CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "AnomalyGate",
                  "Transform", "Trainer", "Evaluator", "ServingCheck", "Pusher"} | RESOLVER_TASKS
BEAM_TASKS = ("CsvExampleGen", "StatisticsGen", "Transform", "Evaluator")
# Offline: Google's auth library must never probe the real metadata server.
NO_CLOUD = {"GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9"}

VERTEX_ARGS = (
    "compile", "--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT,
    "--learning-rate", "0.005", "--batch-size", "64", "--epochs", "12", "--min-accuracy", "0.8",
    "--beam-runner", "dataflow", "--project", "demo-project", "--region", "us-central1",
    "--temp-location", "gs://demo-bucket/tmp", "--beam-arg=--max_num_workers=8",
    "--training-machine-type", "n1-standard-16", "--training-accelerator", "NVIDIA_TESLA_T4",
    "--training-accelerator-count", "2", "--training-replicas", "3",
    "--vertex-endpoint", "penguins-endpoint",
    "--resources", "Transform:cpu=4,memory=16",
)
KUBEFLOW_ARGS = (
    "compile", "--target", "kubeflow", "--image", IMAGE, "--pipeline-root", "minio://mlpipeline/turbotfx",
    "--data-root", "minio://mlpipeline/data/penguins", "--serving-root", "/mnt/serving",
    "--beam-runner", "flink", "--job-endpoint", "flink-jobserver:8099",
    "--resources", "Trainer:cpu=8,memory=32,accelerator=NVIDIA_TESLA_T4,accelerator_count=1",
)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> dict:
    """Both targets compiled through the CLI in this process (the README's deploy commands
    run as a user's, each in a process of its own); the vertex one twice."""
    out = tmp_path_factory.mktemp("compiled")
    home = out / "home"
    results = {}
    for name, args, output in (("vertex", VERTEX_ARGS, "pipeline.json"),
                               ("vertex_again", VERTEX_ARGS, "again/pipeline.json"),
                               ("kubeflow", KUBEFLOW_ARGS, "pipeline.yaml")):
        result = cli(*args, "--output", str(out / output), home=home, env=NO_CLOUD)
        assert result.exit_code == 0, result.output
        results[name] = out / output
    results["stdout"] = result.stdout
    results["home"] = home
    return results


def vertex_job(path: Path) -> pipeline_spec_pb2.PipelineJob:
    job = pipeline_spec_pb2.PipelineJob()
    json_format.Parse(path.read_text(), job)  # fails on any field the protos do not know
    return job


def vertex_spec(path: Path) -> pipeline_spec_pb2.PipelineSpec:
    """The PipelineJob's spec (a Struct in the job) as a typed PipelineSpec."""
    spec = pipeline_spec_pb2.PipelineSpec()
    json_format.ParseDict(json_format.MessageToDict(vertex_job(path).pipeline_spec), spec)
    return spec


def kubeflow_spec(path: Path) -> pipeline_spec_pb2.PipelineSpec:
    spec = pipeline_spec_pb2.PipelineSpec()
    json_format.ParseDict(yaml.safe_load(path.read_text()), spec)
    return spec


def containers(spec: pipeline_spec_pb2.PipelineSpec) -> dict[str, pipeline_spec_pb2.PipelineDeploymentConfig]:
    deployment = pipeline_spec_pb2.PipelineDeploymentConfig()
    json_format.ParseDict(json_format.MessageToDict(spec.deployment_spec), deployment)
    return {label.removesuffix("_executor"): executor.container
            for label, executor in deployment.executors.items() if executor.HasField("container")}


def constant(task: pipeline_spec_pb2.PipelineTaskSpec, name: str) -> str:
    return task.inputs.parameters[name].runtime_value.constant.string_value


def test_every_component_is_a_task_with_its_dependencies(compiled):
    spec = vertex_spec(compiled["vertex"])
    tasks = spec.root.dag.tasks
    assert set(tasks) == PIPELINE_TASKS | {"VertexEndpointPusher"}
    assert set(kubeflow_spec(compiled["kubeflow"]).root.dag.tasks) == PIPELINE_TASKS

    def deps(name: str) -> set[str]:
        return set(tasks[name].dependent_tasks)

    assert deps("CsvExampleGen") == set()
    assert deps("StatisticsGen") == {"CsvExampleGen"}
    assert deps("ExampleValidator") == {"StatisticsGen", "ImportSchemaGen"}
    assert deps("AnomalyGate") == {"ExampleValidator"}
    # The gate stops a run with anomalies before Transform.
    assert deps("Transform") == {"CsvExampleGen", "ImportSchemaGen", "AnomalyGate"}
    assert deps("Trainer") == {"Transform", "ImportSchemaGen"}
    assert deps("Evaluator") == {"CsvExampleGen", "Trainer", "latest_blessed_model_resolver-model-resolver"}
    assert deps("ServingCheck") == {"Trainer", "CsvExampleGen", "Transform"}
    assert deps("Pusher") == {"Trainer", "Evaluator", "ServingCheck"}
    assert deps("VertexEndpointPusher") == {"Trainer", "Evaluator", "ServingCheck"}
    pusher_inputs = tasks["Pusher"].inputs.artifacts
    assert pusher_inputs["infra_blessing"].task_output_artifact.producer_task == "ServingCheck"
    assert pusher_inputs["model_blessing"].task_output_artifact.producer_task == "Evaluator"


def test_every_container_runs_the_image(compiled):
    for spec in (vertex_spec(compiled["vertex"]), kubeflow_spec(compiled["kubeflow"])):
        images = {name: container.image for name, container in containers(spec).items()}
        assert len(images) >= 10
        assert set(images.values()) == {IMAGE}, images


def test_runtime_parameters_with_defaults(compiled):
    job = vertex_job(compiled["vertex"])
    spec = vertex_spec(compiled["vertex"])
    declared = spec.root.input_definitions.parameters
    Types = pipeline_spec_pb2.ParameterType.ParameterTypeEnum
    assert {name: p.parameter_type for name, p in declared.items()} == {
        "data_root": Types.STRING, "epochs": Types.NUMBER_INTEGER, "blessing_threshold": Types.NUMBER_DOUBLE}
    assert declared["data_root"].default_value.string_value == kubeflow.IMAGE_DATA_ROOT
    assert declared["epochs"].default_value.number_value == 12
    assert declared["blessing_threshold"].default_value.number_value == pytest.approx(0.8)
    assert json_format.MessageToDict(job.runtime_config)["parameterValues"] == {
        "data_root": kubeflow.IMAGE_DATA_ROOT, "epochs": 12, "blessing_threshold": 0.8}
    assert job.runtime_config.gcs_output_directory == ROOT
    tasks = spec.root.dag.tasks
    # Each parameter feeds the property that reads it.
    assert tasks["CsvExampleGen"].inputs.parameters["input_base"].component_input_parameter == "data_root"
    assert tasks["Trainer"].inputs.parameters["epochs"].component_input_parameter == "epochs"
    assert tasks["Evaluator"].inputs.parameters["blessing_threshold"].component_input_parameter == "blessing_threshold"

    kfp = kubeflow_spec(compiled["kubeflow"])
    assert kfp.root.input_definitions.parameters["data_root"].default_value.string_value == \
        "minio://mlpipeline/data/penguins"
    assert kfp.default_pipeline_root == "minio://mlpipeline/turbotfx"


def test_beam_args_reach_every_beam_component(compiled):
    vertex = containers(vertex_spec(compiled["vertex"]))
    for name in BEAM_TASKS:
        args = list(vertex[name].args)
        for expected in ("--runner=DataflowRunner", "--project=demo-project", "--region=us-central1",
                         "--temp_location=gs://demo-bucket/tmp", f"--sdk_container_image={IMAGE}"):
            assert expected in args, (name, args)
        assert args[-1] == "--max_num_workers=8"  # the pass-through comes last, so it wins
    kfp = containers(kubeflow_spec(compiled["kubeflow"]))
    for name in BEAM_TASKS:
        args = list(kfp[name].args)
        assert {"--runner=PortableRunner", "--job_endpoint=flink-jobserver:8099",
                "--environment_type=DOCKER", f"--environment_config={IMAGE}"} <= set(args), (name, args)


def test_hyperparameters_and_training_setup_are_in_the_trainer_task(compiled):
    from pipeline.pipeline import code_fingerprint

    spec = vertex_spec(compiled["vertex"])
    trainer = spec.root.dag.tasks["Trainer"]
    custom_config = json.loads(constant(trainer, "custom_config"))
    assert custom_config["learning_rate"] == 0.005
    assert custom_config["batch_size"] == 64
    assert custom_config["epochs"] == 12
    assert custom_config["hidden_units"] == [32, 16]
    assert custom_config["code_fingerprint"] == code_fingerprint()
    assert constant(trainer, "run_fn") == "trainer_module.families.run_fn"
    # Vertex AI Training: a chief pool and a worker pool, each with the accelerators.
    assert custom_config["ai_platform_enable_vertex"] is True
    assert custom_config["ai_platform_vertex_region"] == "us-central1"
    assert custom_config["ai_platform_training_args"]["project"] == "demo-project"
    pools = custom_config["ai_platform_training_args"]["job_spec"]["worker_pool_specs"]
    assert [pool["replica_count"] for pool in pools] == [1, 2]
    for pool in pools:
        assert pool["machine_spec"] == {"machine_type": "n1-standard-16",
                                        "accelerator_type": "NVIDIA_TESLA_T4", "accelerator_count": 2}
        assert pool["container_spec"]["image_uri"] == IMAGE
    executors = containers(spec)
    assert executors["Trainer"].args[1] == "components.reporting_trainer.vertex_executor.Executor"
    evaluator_config = json.loads(constant(spec.root.dag.tasks["Evaluator"], "eval_config"))
    assert "SparseCategoricalAccuracy" in json.dumps(evaluator_config)
    endpoint = json.loads(constant(spec.root.dag.tasks["VertexEndpointPusher"], "custom_config"))
    assert endpoint["ai_platform_serving_args"]["endpoint_name"] == "penguins-endpoint"
    assert endpoint["ai_platform_serving_args"]["project_id"] == "demo-project"


def test_vertex_training_job_runs_our_executor_in_the_image(compiled):
    """TFX's own Vertex job builder, fed the compiled Trainer task: the CustomJob it would start."""
    from tfx.extensions.google_cloud_ai_platform import training_clients
    from tfx.types import standard_artifacts
    from tfx.utils import name_utils

    from components.reporting_trainer import vertex_executor

    class OfflineVertexClient(training_clients.VertexJobClient):
        def create_client(self) -> None:  # the job is built, never sent
            self._client = None

    trainer = vertex_spec(compiled["vertex"]).root.dag.tasks["Trainer"]
    exec_properties = {name: constant(trainer, name) for name in ("custom_config", "run_fn", "train_args")}
    exec_properties["epochs"] = 4  # the runtime parameter's value at run time
    custom_config = json.loads(exec_properties["custom_config"])
    job_args = dict(custom_config["ai_platform_training_args"])
    assert job_args.pop("project") == "demo-project"  # what TFX's runner does before building
    model = standard_artifacts.Model()
    model.uri = "gs://demo-bucket/pipelines/Trainer/model/1"
    inner_executor = name_utils.get_full_name(vertex_executor.Executor()._GetExecutorClass())
    job = OfflineVertexClient(custom_config["ai_platform_vertex_region"]).create_training_job(
        {}, {"model": [model]}, exec_properties, inner_executor, job_args, None, None)

    pools = job["job_spec"]["worker_pool_specs"]
    assert [pool["replica_count"] for pool in pools] == [1, 2]
    for pool in pools:
        assert pool["container_spec"]["image_uri"] == IMAGE
        command = pool["container_spec"]["command"]
        assert command[:5] == ["python", "-m", "tfx.scripts.run_executor", "--executor_class_path",
                               "components.reporting_trainer.executor.Executor"]
        passed = json.loads(command[command.index("--exec-properties") + 1])
        assert passed["epochs"] == 4 and passed["run_fn"] == "trainer_module.families.run_fn"
        assert pool["machine_spec"]["accelerator_type"] == "NVIDIA_TESLA_T4"


def test_schema_pusher_and_resources(compiled):
    spec = vertex_spec(compiled["vertex"])
    schema_file = constant(spec.root.dag.tasks["ImportSchemaGen"], "schema_file")
    assert schema_file == "/turbotfx/pipeline/datasets/penguins.schema.pbtxt"
    # The Dockerfile puts the source tree at /turbotfx, so the file is there in the image.
    assert (REPO / Path(schema_file).relative_to(kubeflow.IMAGE_SOURCE_ROOT)).is_file()
    assert "WORKDIR /turbotfx" in (REPO / "Dockerfile").read_text()
    vertex = containers(spec)
    # Object store: TFX's own Pusher; a mounted filesystem: the atomic pusher.
    assert vertex["Pusher"].args[1] == "tfx.components.pusher.executor.Executor"
    push = json.loads(constant(spec.root.dag.tasks["Pusher"], "push_destination"))
    assert push["filesystem"]["base_directory"] == f"{ROOT}/serving/penguins"
    kfp = containers(kubeflow_spec(compiled["kubeflow"]))
    assert kfp["Pusher"].args[1] == "components.atomic_pusher.executor.Executor"
    assert vertex["Transform"].resources.cpu_limit == 4
    assert vertex["Transform"].resources.memory_limit == 16
    trainer = kfp["Trainer"].resources
    assert (trainer.cpu_limit, trainer.memory_limit) == (8, 32)
    assert (trainer.accelerator.type, trainer.accelerator.count) == ("NVIDIA_TESLA_T4", 1)
    assert not kfp["Transform"].HasField("resources")


def test_two_compiles_are_identical_and_write_nothing_else(compiled):
    assert compiled["vertex"].read_bytes() == compiled["vertex_again"].read_bytes()
    assert not compiled["home"].exists()  # no workspace, no schema copy, no upload
    assert "runtime parameters: blessing_threshold, data_root, epochs" in compiled["stdout"]


def test_vertex_dry_run_request(compiled, tmp_path):
    result = turbotfx(
        "submit", str(compiled["vertex"]), "--target", "vertex", "--project", "demo-project",
        "--region", "europe-west4", "--service-account", "runner@demo-project.iam.gserviceaccount.com",
        "--param", "epochs=30", "--param", "data_root=gs://demo-bucket/penguins-2026-12",
        "--display-name", "penguins-nightly", "--job-id", "penguins-nightly-1",
        "--pipeline-root", "gs://demo-bucket/other-root", "--dry-run", home=tmp_path, env=NO_CLOUD)
    assert result.exit_code == 0, result.output
    request = json.loads(result.stdout)
    assert request["parent"] == "projects/demo-project/locations/europe-west4"
    assert request["pipelineJobId"] == "penguins-nightly-1"
    job = request["pipelineJob"]
    assert job["displayName"] == "penguins-nightly"
    assert job["serviceAccount"] == "runner@demo-project.iam.gserviceaccount.com"
    assert job["runtimeConfig"]["gcsOutputDirectory"] == "gs://demo-bucket/other-root"
    assert job["runtimeConfig"]["parameterValues"] == {
        "epochs": 30, "data_root": "gs://demo-bucket/penguins-2026-12", "blessing_threshold": 0.8}
    # The template is the compiled file's spec, unchanged.
    assert job["pipelineSpec"] == json.loads(compiled["vertex"].read_text())["pipelineSpec"]


def test_kubeflow_submit_sends_what_the_dry_run_prints(compiled, tmp_path):
    args = ("submit", str(compiled["kubeflow"]), "--target", "kubeflow", "--param", "blessing_threshold=0.9",
            "--param", "epochs=3", "--service-account", "pipeline-runner", "--experiment", "penguins")
    with FakeKfpApi() as api:
        dry = turbotfx(*args, "--host", api.host, "--dry-run", home=tmp_path)
        assert dry.exit_code == 0, dry.output
        assert api.runs == []  # a dry run sends nothing
        sent = turbotfx(*args, "--host", api.host, home=tmp_path)
        assert sent.exit_code == 0, sent.output
    printed = json.loads(dry.stdout)
    assert printed["experiment"] == "penguins"
    assert printed["run"]["runtime_config"]["parameters"] == {"blessing_threshold": 0.9, "epochs": 3}
    assert printed["run"]["service_account"] == "pipeline-runner"
    assert printed["run"]["pipeline_spec"] == yaml.safe_load(compiled["kubeflow"].read_text())
    assert api.experiments[0]["display_name"] == "penguins"
    assert api.runs == [{**printed["run"], "experiment_id": EXPERIMENT_ID}]
    assert f"run_id {RUN_ID}" in sent.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", "/tmp/local-root"),
         "pipeline root '/tmp/local-root' is not reachable from vertex components; use a gs://"),
        (("--target", "vertex", "--pipeline-root", ROOT), "--image is required"),
        (("--target", "vertex", "--image", " ", "--pipeline-root", ROOT), "--image is required"),
        (("--target", "argo", "--image", IMAGE, "--pipeline-root", ROOT),
         "unknown target 'argo'; choose one of: vertex, kubeflow"),
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT, "--dataset", "synthetic"),
         "the synthetic dataset is not in the image; give --data-root"),
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT, "--beam-runner", "dataflow"),
         "the Dataflow runner needs --project, --region, --temp-location"),
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT, "--beam-runner", "spark"),
         "the Spark runner needs --spark-master spark://HOST:PORT or --job-endpoint HOST:PORT"),
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT, "--beam-arg=max_num_workers=3"),
         "Beam arg 'max_num_workers=3' must look like --name=value"),
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT, "--resources", "Trainer:gpus=2"),
         "'gpus=2' is not one of cpu=..., memory=..."),
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT, "--resources", "Trainer:cpu=-1"),
         "must be positive numbers"),
        (("--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT, "--training-machine-type", "n1-standard-4"),
         "Vertex AI Training needs --project and --region"),
    ],
)
def test_bad_compile_input_is_one_clear_error(tmp_path, args, message):
    output = tmp_path / "pipeline.json"
    result = cli("compile", *args, "--output", str(output), home=tmp_path / "home")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert result.output.count("turbotfx: error:") == 1
    assert "Traceback" not in result.output
    assert not output.exists()


def test_bad_compile_input_found_while_building_leaves_no_file(tmp_path):
    output = tmp_path / "pipeline.yaml"
    result = cli("compile", "--target", "kubeflow", "--image", IMAGE, "--pipeline-root", ROOT,
                   "--resources", "Trainr:cpu=2", "--output", str(output), home=tmp_path)
    assert result.exit_code == 2, result.output
    assert "no component named Trainr to give resources to; components: CsvExampleGen" in result.output
    assert not output.exists() and list(tmp_path.iterdir()) == []


def test_kubeflow_output_must_be_yaml(tmp_path):
    result = cli("compile", "--target", "kubeflow", "--image", IMAGE, "--pipeline-root", ROOT,
                   "--output", str(tmp_path / "pipeline.json"), home=tmp_path)
    assert result.exit_code == 2
    assert "the kubeflow target writes a YAML file; name it e.g. pipeline.yaml" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (("--target", "vertex", "--project", "p", "--region", "r", "--param", "epoch=3"),
         "the pipeline has no parameter 'epoch'; it takes: blessing_threshold, data_root, epochs"),
        (("--target", "vertex", "--project", "p", "--region", "r", "--param", "epochs=many"),
         "parameter epochs='many' is not a valid int"),
        (("--target", "vertex", "--project", "p", "--region", "r", "--param", "epochs"),
         "parameter 'epochs' is not NAME=VALUE"),
        (("--target", "vertex", "--region", "r"), "a Vertex AI submit needs --project"),
        (("--target", "vertex", "--project", "p", "--region", "r", "--pipeline-root", "/local"),
         "use a gs://BUCKET/... path"),
        (("--target", "kubeflow"), "a Kubeflow submit needs --host"),
        (("--target", "kubeflow", "--host", "http://127.0.0.1:9"),
         "is a Vertex AI PipelineJob; compile with --target kubeflow"),
    ],
)
def test_bad_submit_input_is_one_clear_error(compiled, tmp_path, args, message):
    result = cli("submit", str(compiled["vertex"]), *args, "--dry-run", home=tmp_path, env=NO_CLOUD)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_submit_without_credentials_or_server_says_how_to_fix(compiled, tmp_path):
    vertex = cli("submit", str(compiled["vertex"]), "--target", "vertex", "--project", "p",
                      "--region", "us-central1", home=tmp_path,
                      env={**NO_CLOUD, "GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "missing-key.json")})
    assert vertex.exit_code == 2, vertex.output
    assert "no usable Google Cloud credentials" in vertex.output
    assert "gcloud auth application-default login" in vertex.output
    with FakeKfpApi() as api:
        closed_port = api.host
    kfp = cli("submit", str(compiled["kubeflow"]), "--target", "kubeflow", "--host", closed_port,
                   home=tmp_path)
    assert kfp.exit_code == 2, kfp.output
    assert f"nothing answers at {closed_port} (Failed to establish a new connection" in kfp.output
    with FakeKfpApi(reject_with=403) as api:
        denied = cli("submit", str(compiled["kubeflow"]), "--target", "kubeflow", "--host", api.host,
                          home=tmp_path)
    assert denied.exit_code == 2, denied.output
    assert "refused the credentials (403" in denied.output and "TURBOTFX_KFP_TOKEN" in denied.output
    missing = cli("submit", str(tmp_path / "nope.json"), "--target", "vertex", "--project", "p",
                       "--region", "r", home=tmp_path)
    assert missing.exit_code == 2 and "no compiled pipeline at" in missing.output


def readme_deploy_commands() -> list[list[str]]:
    """The turbotfx commands of docs/deploy.md (Vertex AI / Kubeflow), as written there."""
    text = (REPO / "docs" / "deploy.md").read_text()
    joined = re.sub(r"\\\n\s*", " ", text)  # shell line continuations
    image = re.search(r"^\s*IMAGE=(\S+)", joined, re.MULTILINE).group(1)
    return [shlex.split(line.strip().replace("$IMAGE", image).replace(".venv/bin/turbotfx ", "", 1))
            for line in joined.splitlines() if line.strip().startswith(".venv/bin/turbotfx ")]


def test_readme_deploy_commands_work(tmp_path, monkeypatch):
    commands = readme_deploy_commands()
    assert [c[0] for c in commands] == ["compile", "compile", "submit", "submit", "compile"]
    monkeypatch.chdir(tmp_path)  # the commands' relative paths
    # The first in a process of its own, as a user types it; the rest in this one (the
    # submit tests above run `submit` in processes of their own).
    first = subprocess.run([sys.executable, "-m", "pipeline.cli", *commands[0]], cwd=tmp_path, capture_output=True,
                           text=True, timeout=300, env={**os.environ, **NO_CLOUD, "TURBOTFX_HOME": str(tmp_path / "home")})
    assert first.returncode == 0, (commands[0], first.stdout + first.stderr)
    for command in commands[1:]:
        if command[0] == "submit":
            command = [*command, "--dry-run"]  # offline: print the request, send nothing
        done = cli(*command, home=tmp_path / "home", env=NO_CLOUD)
        assert done.exit_code == 0, (command, done.output)
        if command[0] == "submit":
            request = json.loads(done.stdout)
            assert request.get("pipelineJob") or request.get("run")
    assert (tmp_path / "pipeline.json").is_file() and (tmp_path / "pipeline.yaml").is_file()


def test_a_dataset_file_outside_the_source_tree_cannot_travel_in_the_image(tmp_path):
    # A file of one's own: compiles only from inside the tree the image is built from.
    (tmp_path / "data").mkdir()
    (tmp_path / "own.schema.pbtxt").write_text('feature { name: "y" type: FLOAT }\nfeature { name: "x" type: FLOAT }\n')
    (tmp_path / "own.toml").write_text('name = "own"\ndata_root = "data"\nlabel = "y"\ntask = "regression"\n'
                                       'schema = "own.schema.pbtxt"\n[features]\nx = "numeric"\n'
                                       '[blessing]\nthreshold = 1.0\n')
    output = tmp_path / "pipeline.json"
    result = cli("compile", "--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT,
                 "--dataset", str(tmp_path / "own.toml"), "--data-root", "gs://b/own",
                 "--output", str(output), home=tmp_path / "home")
    assert result.exit_code == 2, result.output
    assert f"the schema of {tmp_path / 'own.toml'}" in result.output
    assert "is outside the source tree the image is built from" in result.output
    assert not output.exists()


def test_a_built_in_dataset_file_compiles_with_its_schema_path_in_the_image(tmp_path):
    output = tmp_path / "pipeline.json"
    result = cli("compile", "--target", "vertex", "--image", IMAGE, "--pipeline-root", ROOT,
                 "--dataset", "synthetic", "--data-root", "gs://b/synthetic", "--output", str(output),
                 home=tmp_path / "home", env=NO_CLOUD)
    assert result.exit_code == 0, result.output
    spec = json.loads(output.read_text())["pipelineSpec"]
    schema_file = spec["root"]["dag"]["tasks"]["ImportSchemaGen"]["inputs"]["parameters"]["schema_file"]
    assert schema_file["runtimeValue"]["constant"] == "/turbotfx/pipeline/datasets/synthetic.schema.pbtxt"


def test_a_tuned_compile_puts_the_tuner_before_the_trainer(compiled, tmp_path):
    out = tmp_path / "tuned.json"
    result = cli(*VERTEX_ARGS, "--tune-trials", "30", "--tune-parallelism", "4",
                      "--tune-storage", "mysql://tuner@10.1.2.3/studies", "--tune-study", "penguins-nightly",
                      "--output", str(out), home=tmp_path / "home", env=NO_CLOUD)
    assert result.exit_code == 0, result.output
    spec = vertex_spec(out)
    tuner, trainer = spec.root.dag.tasks["Tuner"], spec.root.dag.tasks["Trainer"]
    assert trainer.inputs.artifacts["hyperparameters"].task_output_artifact.producer_task == "Tuner"
    assert trainer.inputs.artifacts["hyperparameters"].task_output_artifact.output_artifact_key == \
        "best_hyperparameters"
    assert "Transform" in tuner.dependent_tasks
    parameters = tuner.inputs.parameters
    assert parameters["trials"].runtime_value.constant.number_value == 30
    assert parameters["parallelism"].runtime_value.constant.number_value == 4
    # The study's storage as SQLAlchemy names it, and never a password (it is in the environment).
    assert constant(tuner, "storage") == "mysql+pymysql://tuner@10.1.2.3:3306/studies"
    assert constant(tuner, "password_env") == "TURBOTFX_METADATA_PASSWORD"
    assert constant(tuner, "study_name") == "penguins-nightly"
    assert containers(spec)["Tuner"].image == IMAGE
    # The Tuner searches what the Trainer would train: the flags' knobs are in its config.
    assert json.loads(constant(tuner, "custom_config"))["batch_size"] == 64
    # Without --tune-trials a compiled pipeline has no Tuner (no Python resolver to reuse a result).
    untuned = vertex_spec(compiled["vertex"]).root.dag.tasks
    assert "Tuner" not in untuned and not untuned["Trainer"].inputs.artifacts["hyperparameters"].task_output_artifact.producer_task
