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

import contextlib
import dataclasses
import fcntl
from pathlib import Path
from typing import Iterator

from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from pipeline.atomic import atomic_path
from pipeline.errors import first_line
from serving import push
from serving.errors import ServingConfigError

CONFIG_FILE = "models.config"
# Beside models.config: a hidden name TF Serving never reads.
LOCK_FILE = ".models.config.lock"
STABLE, CANARY = "stable", "canary"
# Where the serving root is mounted inside the tensorflow/serving container (deploy/).
SERVER_ROOT = "/models"


@dataclasses.dataclass
class ModelStatus:
    name: str
    versions: list[int]  # complete versions on disk, oldest first
    stable: int | None
    canary: int | None
    served: list[int]  # the versions models.config tells the server to load


def config_path(serving_root: str | Path) -> Path:
    return Path(serving_root) / CONFIG_FILE


@contextlib.contextmanager
def changing(serving_root: str | Path, create: bool = False) -> Iterator[None]:
    """Holds the serving root for one change of its versions or labels (a push, a promote,
    a reconciliation): each reads, changes and writes models.config, and two at once would
    lose one's change. Blocks until the holder is done; the lock goes with the process.
    Without the serving root there is nothing to change but a first push, which creates it
    (create): a query or a run that pushes nothing leaves no trace."""
    root = Path(serving_root)
    if not root.is_dir() and not create:
        yield
        return
    root.mkdir(parents=True, exist_ok=True)
    with open(root / LOCK_FILE, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def read_config(serving_root: str | Path) -> model_server_config_pb2.ModelServerConfig:
    """The parsed config (empty when there is none); one ServingConfigError when it is not
    a config TF Serving would read, so nothing is pushed or relabelled on top of it."""
    path = config_path(serving_root)
    config = model_server_config_pb2.ModelServerConfig()
    if path.is_dir():
        raise ServingConfigError(f"{path} is a directory, not TF Serving's model config; move it away "
                                 "(turbotfx rebuilds the config from the metadata store's push records)")
    if path.exists():
        try:
            text_format.Parse(path.read_bytes().decode("utf-8"), config)
        except (text_format.ParseError, UnicodeDecodeError) as err:
            raise ServingConfigError(f"{path} is not a valid TF Serving model config ({first_line(err)}); "
                                     "restore it, or move it away and turbotfx rebuilds it from the metadata "
                                     "store's push records") from None
    return config


def config_snapshot(serving_root: str | Path) -> bytes | None:
    """The config file's bytes as they are now (None: no file), to put back if a push fails."""
    path = config_path(serving_root)
    return path.read_bytes() if path.is_file() else None


def restore_snapshot(serving_root: str | Path, snapshot: bytes | None) -> None:
    """Puts the config back as config_snapshot found it, in one rename (or removes it)."""
    path = config_path(serving_root)
    if snapshot is None:
        path.unlink(missing_ok=True)
        return
    with atomic_path(path) as temporary:
        Path(temporary).write_bytes(snapshot)


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
    stable = entry.version_labels[STABLE]
    if stable not in push.versions(Path(serving_root) / model_name):
        # Pointing the canary there would serve nothing under either label.
        raise ServingConfigError(f"the stable version {stable} of {model_name!r} is not in "
                                 f"{Path(serving_root) / model_name}, so the canary cannot roll back to it; "
                                 "promote a version that is there (`turbotfx serving status` lists them)")
    entry.version_labels[CANARY] = stable
    _serve_labelled(entry)
    write_config(serving_root, config)
    return status(serving_root, model_name)


def set_labels(serving_root: str | Path, model_name: str, labels: dict[str, int],
               server_root: str = SERVER_ROOT) -> ModelStatus:
    """Writes the labels as given (a config rebuilt from the metadata store's records)."""
    config = read_config(serving_root)
    entry = _entry(config, model_name, server_root)
    entry.version_labels.clear()
    entry.version_labels.update(labels)
    _serve_labelled(entry)
    write_config(serving_root, config)
    return status(serving_root, model_name)


def drop_version(serving_root: str | Path, model_name: str, version: int) -> bool:
    """Takes a version out of the config (labels pointing at it fall back to the other
    label, or go); True when the config changed."""
    config = read_config(serving_root)
    entry = next((c for c in config.model_config_list.config if c.name == model_name), None)
    if entry is None or version not in set(entry.version_labels.values()) | set(entry.model_version_policy.specific.versions):
        return False
    labels = {label: v for label, v in entry.version_labels.items() if v != version}
    if labels and len(labels) == 1:
        # One label left: the other points at the same version, as after a first push.
        only = next(iter(labels.values()))
        labels = {STABLE: only, CANARY: only}
    if labels:
        entry.version_labels.clear()
        entry.version_labels.update(labels)
        _serve_labelled(entry)
    else:
        config.model_config_list.config.remove(entry)
    write_config(serving_root, config)
    return True


def status(serving_root: str | Path, model_name: str) -> ModelStatus:
    config = read_config(serving_root)
    entry = next((c for c in config.model_config_list.config if c.name == model_name), None)
    labels = dict(entry.version_labels) if entry else {}
    served = list(entry.model_version_policy.specific.versions) if entry else []
    return ModelStatus(model_name, push.versions(Path(serving_root) / model_name),
                       labels.get(STABLE), labels.get(CANARY), served)


def served_models(serving_root: str | Path) -> list[str]:
    """The models of a serving directory: those models.config names and those with a version
    directory on disk (a config lost before it was rebuilt), sorted."""
    root = Path(serving_root)
    named = {entry.name for entry in read_config(root).model_config_list.config} if config_path(root).is_file() else set()
    on_disk = {child.name for child in root.iterdir() if child.is_dir() and push.versions(child)} if root.is_dir() else set()
    return sorted(named | on_disk)


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
