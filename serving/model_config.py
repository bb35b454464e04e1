"""TF Serving's models.config: which versions are served, and the stable/canary labels.

The file lives beside the model directories (<serving root>/models.config) and is
what `tensorflow_model_server --model_config_file` reads and re-reads
(--model_config_file_poll_wait_seconds). Labels:
  canary  the newest pushed version, taking trial traffic;
  stable  the version promoted after its canary period (`turbotfx serving promote`).
Both are served (a `specific` version policy), so clients can address either label.
Every change is written to a temporary file and renamed over the old one: the server
never reads a half-written config.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from pipeline.atomic import atomic_path
from pipeline.errors import ConfigError
from serving import push

CONFIG_FILE = "models.config"
STABLE, CANARY = "stable", "canary"
# Where the serving root is mounted inside the tensorflow/serving container (deploy/).
SERVER_ROOT = "/models"


class ServingConfigError(ConfigError):
    """A label change that cannot be made (no such version, nothing pushed yet)."""


@dataclasses.dataclass
class ModelStatus:
    name: str
    versions: list[int]  # complete versions on disk, oldest first
    stable: int | None
    canary: int | None
    served: list[int]  # the versions models.config tells the server to load


def config_path(serving_root: str | Path) -> Path:
    return Path(serving_root) / CONFIG_FILE


def read_config(serving_root: str | Path) -> model_server_config_pb2.ModelServerConfig:
    path = config_path(serving_root)
    config = model_server_config_pb2.ModelServerConfig()
    if path.is_file():
        try:
            text_format.Parse(path.read_text(), config)
        except text_format.ParseError as err:
            raise ServingConfigError(f"{path} is not a valid TF Serving model config ({err}); "
                                     "fix or remove it, then push again") from None
    return config


def write_config(serving_root: str | Path, config: model_server_config_pb2.ModelServerConfig) -> Path:
    path = config_path(serving_root)
    with atomic_path(path) as temporary:
        Path(temporary).write_text(text_format.MessageToString(config))
    return path


def record_push(serving_root: str | Path, model_name: str, version: int, server_root: str = SERVER_ROOT) -> ModelStatus:
    """A new version becomes the canary; the first one is also stable."""
    config = read_config(serving_root)
    entry = _entry(config, model_name, server_root)
    entry.version_labels[CANARY] = version
    if STABLE not in entry.version_labels:
        entry.version_labels[STABLE] = version
    _serve_labelled(entry)
    write_config(serving_root, config)
    return status(serving_root, model_name)


def promote(serving_root: str | Path, model_name: str, version: int | None = None) -> ModelStatus:
    """Labels a version stable: the canary by default, or any complete version."""
    config = read_config(serving_root)
    entry = _existing_entry(config, serving_root, model_name)
    target = entry.version_labels.get(CANARY) if version is None else version
    if target not in push.versions(Path(serving_root) / model_name):
        raise ServingConfigError(f"version {target} of {model_name!r} is not in {Path(serving_root) / model_name}; "
                                 f"`turbotfx serving status` lists the versions")
    entry.version_labels[STABLE] = target
    _serve_labelled(entry)
    write_config(serving_root, config)
    return status(serving_root, model_name)


def rollback(serving_root: str | Path, model_name: str) -> ModelStatus:
    """Ends the canary: the canary label goes back to the stable version."""
    config = read_config(serving_root)
    entry = _existing_entry(config, serving_root, model_name)
    if entry.version_labels.get(CANARY) == entry.version_labels.get(STABLE):
        raise ServingConfigError(f"{model_name!r} has no canary to roll back: canary and stable are both "
                                 f"version {entry.version_labels.get(STABLE)}")
    entry.version_labels[CANARY] = entry.version_labels[STABLE]
    _serve_labelled(entry)
    write_config(serving_root, config)
    return status(serving_root, model_name)


def status(serving_root: str | Path, model_name: str) -> ModelStatus:
    config = read_config(serving_root)
    entry = next((c for c in config.model_config_list.config if c.name == model_name), None)
    labels = dict(entry.version_labels) if entry else {}
    served = list(entry.model_version_policy.specific.versions) if entry else []
    return ModelStatus(model_name, push.versions(Path(serving_root) / model_name),
                       labels.get(STABLE), labels.get(CANARY), served)


def protected_versions(serving_root: str | Path, model_name: str) -> set[int]:
    """Versions retention must keep: whatever a label points at."""
    current = status(serving_root, model_name)
    return {v for v in (current.stable, current.canary) if v is not None}


def _entry(config, model_name: str, server_root: str):
    for entry in config.model_config_list.config:
        if entry.name == model_name:
            return entry
    entry = config.model_config_list.config.add()
    entry.name = model_name
    entry.base_path = f"{server_root.rstrip('/')}/{model_name}"
    entry.model_platform = "tensorflow"
    return entry


def _existing_entry(config, serving_root, model_name: str):
    for entry in config.model_config_list.config:
        if entry.name == model_name:
            return entry
    raise ServingConfigError(f"no model {model_name!r} in {config_path(serving_root)}: push one first "
                             "(`turbotfx run`)")


def _serve_labelled(entry) -> None:
    entry.model_version_policy.specific.ClearField("versions")
    entry.model_version_policy.specific.versions.extend(sorted(set(entry.version_labels.values())))
