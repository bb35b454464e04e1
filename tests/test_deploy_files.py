"""serving/deploy/: the compose file and Kubernetes manifests agree with the client and the pipeline.

Nothing here starts a server: the files are parsed and checked against serving/client.py's
defaults, the pipeline's serving layout (serving/model_config.py), the installed TensorFlow,
and TF Serving's own config protos.
"""

from __future__ import annotations

import functools
import importlib.metadata
import posixpath
import re

import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format, wrappers_pb2
from tensorflow_serving.config import model_server_config_pb2

from pipeline.config import PipelineConfig
from serving import model_config
from serving.client import DEFAULT_GRPC_PORT, DEFAULT_MODEL_NAME, DEFAULT_REST_PORT
from tests import REPO

DEPLOY = REPO / "serving" / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
BATCHING_FILE = DEPLOY / "batching.config"
K8S = DEPLOY / "kubernetes"
K8S_FILES = ["configmap.yaml", "deployment.yaml", "service.yaml"]
IMAGE = "tensorflow/serving"
SERVER = "tensorflow_model_server"
REQUIRED_FLAGS = {
    "--model_config_file_poll_wait_seconds": "30",
    "--allow_version_labels_for_unavailable_models": "true",
    "--enable_batching": "true",
}


# --- helpers ---------------------------------------------------------------------------------------

def compose_default(value: str) -> str:
    """A compose value with each ${VAR:-default} replaced by its default (the environment ignored)."""
    resolved = re.sub(r"\$\{\w+:-([^}]*)\}", lambda m: m.group(1), value)
    assert "$" not in resolved, f"unresolved variable (no default) in {value!r}"
    return resolved


def flags(args: list[str]) -> dict[str, str]:
    """--name=value arguments as a dict; every argument must have that form, once."""
    parsed: dict[str, str] = {}
    for arg in args:
        match = re.fullmatch(r"(--\w+)=(\S+)", arg)
        assert match, f"argument {arg!r} is not --flag=value"
        assert match.group(1) not in parsed, f"{match.group(1)} given twice"
        parsed[match.group(1)] = match.group(2)
    return parsed


def under(path: str, directory: str) -> bool:
    return posixpath.commonpath([posixpath.normpath(path), directory.rstrip("/") or "/"]) == directory.rstrip("/")


@functools.cache  # one class: messages of two rebuilt classes never compare equal
def batching_parameters_class():
    """tensorflow.serving.BatchingParameters.

    tensorflow-serving-api ships only tensorflow_serving.apis and .config, not
    tensorflow_serving.servables.tensorflow.session_bundle_config_pb2. When that module is
    missing, the message is rebuilt here with the field names, numbers and types of
    session_bundle_config.proto (the Int64Value/StringValue wrappers included), in a private
    descriptor pool: the text format is then checked just as the server parses it.
    """
    try:
        from tensorflow_serving.servables.tensorflow import session_bundle_config_pb2
    except ImportError:
        pass
    else:
        return session_bundle_config_pb2.BatchingParameters

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    file = descriptor_pb2.FileDescriptorProto(
        name="turbotfx_test/session_bundle_config_mirror.proto", package="tensorflow.serving",
        syntax="proto3", dependency=["google/protobuf/wrappers.proto"])
    message = file.message_type.add(name="BatchingParameters")
    field = descriptor_pb2.FieldDescriptorProto
    for number, (name, wrapper) in enumerate([
        ("max_batch_size", "Int64Value"), ("batch_timeout_micros", "Int64Value"),
        ("max_enqueued_batches", "Int64Value"), ("num_batch_threads", "Int64Value"),
        ("thread_pool_name", "StringValue"),
    ], start=1):
        message.field.add(name=name, number=number, label=field.LABEL_OPTIONAL,
                          type=field.TYPE_MESSAGE, type_name=f".google.protobuf.{wrapper}")
    message.field.add(name="allowed_batch_sizes", number=6, label=field.LABEL_REPEATED, type=field.TYPE_INT64)
    message.field.add(name="pad_variable_length_inputs", number=7, label=field.LABEL_OPTIONAL,
                      type=field.TYPE_BOOL)
    pool.Add(file)
    descriptor = pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def parse_batching(text: str):
    return text_format.Parse(text, batching_parameters_class()())


def parse_model_server_config(text: str) -> model_server_config_pb2.ModelServerConfig:
    return text_format.Parse(text, model_server_config_pb2.ModelServerConfig())


def cpu_cores(quantity: str | int | float) -> float:
    text = str(quantity)
    return int(text[:-1]) / 1000 if text.endswith("m") else float(text)


# --- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def service() -> dict:
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    assert list(compose["services"]) == ["tf-serving"]
    return compose["services"]["tf-serving"]


@pytest.fixture(scope="module")
def compose_flags(service) -> dict[str, str]:
    return flags(service["command"])


@pytest.fixture(scope="module")
def compose_mounts(service) -> dict[str, tuple[str, str]]:
    """container path -> (host path as the default resolves it, mode)."""
    mounts = {}
    for volume in service["volumes"]:
        source, target, *mode = compose_default(volume).split(":")
        mounts[target] = (source, mode[0] if mode else "rw")
    return mounts


@pytest.fixture(scope="module")
def k8s() -> dict[str, dict]:
    """The kustomization's resources, by kind."""
    documents = {}
    for name in K8S_FILES:
        for document in yaml.safe_load_all((K8S / name).read_text()):
            assert document["kind"] not in documents, f"two {document['kind']}s"
            documents[document["kind"]] = document
    return documents


@pytest.fixture(scope="module")
def container(k8s) -> dict:
    containers = k8s["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


@pytest.fixture(scope="module")
def k8s_flags(container) -> dict[str, str]:
    return flags(container["args"])


@pytest.fixture(scope="module")
def k8s_mounts(k8s, container) -> dict[str, tuple[dict, dict]]:
    """container path -> (volumeMount, volume)."""
    volumes = {v["name"]: v for v in k8s["Deployment"]["spec"]["template"]["spec"]["volumes"]}
    return {m["mountPath"]: (m, volumes[m["name"]]) for m in container["volumeMounts"]}


@pytest.fixture(scope="module")
def configmap_data(k8s, k8s_mounts, k8s_flags) -> tuple[str, dict[str, str]]:
    """(where the ConfigMap is mounted, its data)."""
    config_dir = posixpath.dirname(k8s_flags["--model_config_file"])
    mount, volume = k8s_mounts[config_dir]
    assert "subPath" not in mount  # a subPath mount never sees ConfigMap updates
    assert volume["configMap"]["name"] == k8s["ConfigMap"]["metadata"]["name"] == "turbotfx-serving-config"
    return config_dir, k8s["ConfigMap"]["data"]


# --- the client's defaults, the pipeline's model name ----------------------------------------------

def test_client_defaults_are_what_the_deploy_files_assume() -> None:
    assert (DEFAULT_GRPC_PORT, DEFAULT_REST_PORT) == (8500, 8501)
    assert DEFAULT_MODEL_NAME == PipelineConfig().model_name == "penguins"


def test_image_matches_the_installed_tensorflow(service, container) -> None:
    installed = importlib.metadata.version("tensorflow")
    major_minor = ".".join(installed.split(".")[:2])
    for image in (service["image"], container["image"]):
        name, tag = image.split(":")
        assert name == IMAGE
        assert tag.startswith(major_minor + "."), f"{image} does not serve what TF {installed} exports"


# --- docker compose ----------------------------------------------------------------------------------

def test_compose_ports_match_the_client(service, compose_flags) -> None:
    assert compose_flags["--port"] == str(DEFAULT_GRPC_PORT)
    assert compose_flags["--rest_api_port"] == str(DEFAULT_REST_PORT)
    published = dict(str(p).split(":") for p in service["ports"])
    assert published == {str(DEFAULT_GRPC_PORT): str(DEFAULT_GRPC_PORT),
                         str(DEFAULT_REST_PORT): str(DEFAULT_REST_PORT)}


def test_compose_runs_the_server_with_only_these_flags(service, compose_flags) -> None:
    # The image's own entrypoint script would add --model_name/--model_base_path.
    assert service["entrypoint"] == [SERVER]
    for flag, value in REQUIRED_FLAGS.items():
        assert compose_flags[flag] == value
    assert service["restart"] == "unless-stopped"


def test_compose_serves_the_pipelines_serving_root(compose_mounts, compose_flags) -> None:
    source, mode = compose_mounts[model_config.SERVER_ROOT]
    assert mode == "ro"
    # Relative to the compose file: from the repo root that is the default workspace's serving root.
    served = (COMPOSE_FILE.parent / source).resolve()
    assert served == (REPO / PipelineConfig().serving_dir.parent).resolve()
    # ... where the pipeline keeps models.config, as the server sees it.
    config_file = compose_flags["--model_config_file"]
    assert config_file == posixpath.join(model_config.SERVER_ROOT, model_config.CONFIG_FILE)
    assert under(config_file, model_config.SERVER_ROOT)


def test_compose_mounts_the_batching_config(compose_mounts, compose_flags) -> None:
    path = compose_flags["--batching_parameters_file"]
    mounted = {target: src for target, (src, _) in compose_mounts.items() if under(path, target)}
    assert len(mounted) == 1, f"{path} is not in exactly one mounted volume: {compose_mounts}"
    (target, source), = mounted.items()
    host_file = (COMPOSE_FILE.parent / source / posixpath.relpath(path, target)).resolve()
    assert host_file == BATCHING_FILE.resolve()
    assert compose_mounts[target][1] == "ro"


def test_compose_healthcheck_asks_the_rest_port_for_the_default_model(service) -> None:
    command = " ".join(compose_default(part) for part in service["healthcheck"]["test"])
    assert service["healthcheck"]["test"][0] == "CMD"
    assert f"/dev/tcp/127.0.0.1/{DEFAULT_REST_PORT}" in command
    assert f"GET /v1/models/{DEFAULT_MODEL_NAME} " in command
    assert '"AVAILABLE"' in command


# --- batching ----------------------------------------------------------------------------------------

def test_batching_config_parses_as_batching_parameters() -> None:
    parameters = parse_batching(BATCHING_FILE.read_text())
    assert parameters.max_batch_size.value == 64
    assert parameters.batch_timeout_micros.value == 2000
    assert parameters.num_batch_threads.value == 4
    assert parameters.max_enqueued_batches.value == 100
    # The wrappers are required: a bare scalar is what the server would reject.
    with pytest.raises(text_format.ParseError):
        parse_batching("max_batch_size: 64")


def test_kubernetes_batching_config_is_the_compose_one(configmap_data, k8s_flags, container) -> None:
    config_dir, data = configmap_data
    path = k8s_flags["--batching_parameters_file"]
    assert posixpath.dirname(path) == config_dir
    in_configmap = parse_batching(data[posixpath.basename(path)])
    assert in_configmap == parse_batching(BATCHING_FILE.read_text())
    # One batch thread per CPU the pod may use, at most.
    assert in_configmap.num_batch_threads.value <= cpu_cores(container["resources"]["limits"]["cpu"])


# --- Kubernetes --------------------------------------------------------------------------------------

def test_kustomization_lists_the_manifests() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    assert sorted(kustomization["resources"]) == sorted(K8S_FILES)


def test_deployment_runs_the_server_like_compose(container, k8s_flags, compose_flags) -> None:
    assert container["command"] == [SERVER]
    assert k8s_flags["--port"] == str(DEFAULT_GRPC_PORT)
    assert k8s_flags["--rest_api_port"] == str(DEFAULT_REST_PORT)
    for flag, value in REQUIRED_FLAGS.items():
        assert k8s_flags[flag] == value
    # Only the model config's location differs (the ConfigMap instead of the serving root).
    differing = {f for f in k8s_flags.keys() | compose_flags.keys() if k8s_flags.get(f) != compose_flags.get(f)}
    assert differing == {"--model_config_file"}
    for kind in ("requests", "limits"):
        assert set(container["resources"][kind]) == {"cpu", "memory"}


def test_models_come_from_the_read_only_claim(k8s_mounts) -> None:
    mount, volume = k8s_mounts[model_config.SERVER_ROOT]
    assert mount["readOnly"] is True
    assert volume["persistentVolumeClaim"]["claimName"] == "turbotfx-models"


def test_configmap_models_config_serves_the_default_model(configmap_data, k8s_flags) -> None:
    config_dir, data = configmap_data
    config_file = k8s_flags["--model_config_file"]
    assert under(config_file, config_dir)
    config = parse_model_server_config(data[posixpath.basename(config_file)])
    entries = list(config.model_config_list.config)
    assert [e.name for e in entries] == [DEFAULT_MODEL_NAME]
    entry = entries[0]
    # The layout the pipeline pushes to (<root>/<model>/<version>/), under the models mount.
    assert entry.base_path == posixpath.join(model_config.SERVER_ROOT, DEFAULT_MODEL_NAME)
    assert under(entry.base_path, model_config.SERVER_ROOT)
    assert entry.model_platform == "tensorflow"
    # As model_config.py writes it: both labels, and exactly the labelled versions served.
    assert set(entry.version_labels) == {model_config.STABLE, model_config.CANARY}
    assert entry.model_version_policy.WhichOneof("policy_choice") == "specific"
    assert set(entry.model_version_policy.specific.versions) == set(entry.version_labels.values())


def test_configmap_models_config_matches_what_the_pipeline_writes(configmap_data, tmp_path) -> None:
    _, data = configmap_data
    in_configmap = parse_model_server_config(data[model_config.CONFIG_FILE])
    version = in_configmap.model_config_list.config[0].version_labels[model_config.STABLE]
    # The config the pipeline keeps in its serving root after a first push of that version.
    model_config.record_push(tmp_path, DEFAULT_MODEL_NAME, version)
    assert in_configmap == model_config.read_config(tmp_path)


def test_service_exposes_the_container_ports(k8s, container) -> None:
    spec = k8s["Service"]["spec"]
    assert k8s["Service"]["metadata"]["name"] == "tf-serving"
    assert spec["type"] == "ClusterIP"
    pod_labels = k8s["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert spec["selector"].items() <= pod_labels.items()
    assert k8s["Deployment"]["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    container_ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert container_ports == {"grpc": DEFAULT_GRPC_PORT, "http": DEFAULT_REST_PORT}
    service_ports = {p["name"]: p for p in spec["ports"]}
    assert set(service_ports) == set(container_ports)
    for name, port in service_ports.items():
        assert port["port"] == container_ports[name]
        target = port.get("targetPort", port["port"])
        assert container_ports.get(target, target) == container_ports[name]


def test_readiness_probe_asks_the_rest_port_for_the_default_model(container) -> None:
    probe = container["readinessProbe"]["httpGet"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports.get(probe["port"], probe["port"]) == DEFAULT_REST_PORT
    assert probe["path"] == f"/v1/models/{DEFAULT_MODEL_NAME}"
