"""Atomic versioned pushes, retention, and models.config labels, on real directories."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from serving import model_config, push
from serving.errors import PushError, ServingConfigError
from tests import REPO


def saved_model(directory: Path, payload_bytes: int = 1024) -> Path:
    """A directory shaped like a SavedModel (what push copies; it never loads it)."""
    (directory / "variables").mkdir(parents=True)
    (directory / "saved_model.pb").write_bytes(b"graph")
    (directory / "variables" / "variables.data-00000-of-00001").write_bytes(os.urandom(payload_bytes))
    return directory


def test_push_creates_a_complete_numbered_version(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    version, path = push.push(source, tmp_path / "serving" / "penguins")
    assert path == tmp_path / "serving" / "penguins" / str(version)
    assert (path / "saved_model.pb").read_bytes() == b"graph"
    assert push.versions(path.parent) == [version]
    assert [p.name for p in path.parent.iterdir()] == [str(version)]  # no staging left


def test_versions_always_increase(tmp_path) -> None:
    model_dir = tmp_path / "penguins"
    (model_dir / "2000000000").mkdir(parents=True)  # a version from the future (clock skew)
    assert push.next_version(model_dir, now=1_800_000_000) == 2000000001
    assert push.next_version(tmp_path / "empty", now=1_800_000_000.7) == 1800000000


def test_not_a_saved_model_pushes_nothing(tmp_path) -> None:
    (tmp_path / "model").mkdir()
    with pytest.raises(PushError, match="no SavedModel"):
        push.push(tmp_path / "model", tmp_path / "penguins")
    assert push.versions(tmp_path / "penguins") == []


def test_a_push_killed_halfway_leaves_no_version(tmp_path) -> None:
    source = saved_model(tmp_path / "model", payload_bytes=400 * 1024 * 1024)
    model_dir = tmp_path / "penguins"
    model_dir.mkdir()
    code = f"from serving import push; push.push({str(source)!r}, {str(model_dir)!r})"
    pusher = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    deadline = time.monotonic() + 60
    while not any(p.name.startswith(push.TEMP_PREFIX) for p in model_dir.iterdir()):
        assert pusher.poll() is None, "the push finished before it could be interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.01)
    pusher.send_signal(signal.SIGKILL)
    pusher.wait()
    assert push.versions(model_dir) == []  # a server polling model_dir sees nothing to load
    assert len(push.remove_stale_staging(model_dir)) == 1
    assert list(model_dir.iterdir()) == []


def test_retention_keeps_the_newest_and_every_labelled_version(tmp_path) -> None:
    model_dir = tmp_path / "penguins"
    for version in (1, 2, 3, 4, 5):
        (model_dir / str(version)).mkdir(parents=True)
    deleted = push.apply_retention(model_dir, keep=2, protected={1})
    assert deleted == [2, 3]
    assert push.versions(model_dir) == [1, 4, 5]
    with pytest.raises(ValueError):
        push.apply_retention(model_dir, keep=0)


def _pushed(root: Path, *versions: int) -> None:
    for version in versions:
        (root / "penguins" / str(version)).mkdir(parents=True)


def test_labels_follow_pushes_promotion_and_rollback(tmp_path) -> None:
    _pushed(tmp_path, 10)
    first = model_config.record_push(tmp_path, "penguins", 10)
    assert (first.stable, first.canary, first.served) == (10, 10, [10])

    _pushed(tmp_path, 11)
    second = model_config.record_push(tmp_path, "penguins", 11)
    assert (second.stable, second.canary, second.served) == (10, 11, [10, 11])

    rolled_back = model_config.rollback(tmp_path, "penguins")
    assert (rolled_back.stable, rolled_back.canary, rolled_back.served) == (10, 10, [10])
    with pytest.raises(ServingConfigError, match="no canary to roll back"):
        model_config.rollback(tmp_path, "penguins")

    promoted = model_config.promote(tmp_path, "penguins", 11)
    assert (promoted.stable, promoted.canary, promoted.served) == (11, 10, [10, 11])
    with pytest.raises(ServingConfigError, match="version 99 of 'penguins' is not in"):
        model_config.promote(tmp_path, "penguins", 99)
    assert model_config.protected_versions(tmp_path, "penguins") == {10, 11}


def test_no_rollback_onto_a_stable_version_whose_directory_is_gone(tmp_path) -> None:
    _pushed(tmp_path, 10, 11)
    model_config.record_push(tmp_path, "penguins", 10)
    model_config.record_push(tmp_path, "penguins", 11)
    (tmp_path / "penguins" / "10").rmdir()  # someone deleted the stable version's directory
    before = (tmp_path / "models.config").read_bytes()
    with pytest.raises(ServingConfigError, match="the stable version 10 of 'penguins' is not in"):
        model_config.rollback(tmp_path, "penguins")
    assert (tmp_path / "models.config").read_bytes() == before


def test_models_config_is_what_tf_serving_reads(tmp_path) -> None:
    _pushed(tmp_path, 7)
    model_config.record_push(tmp_path, "penguins", 7)
    parsed = text_format.Parse((tmp_path / "models.config").read_text(), model_server_config_pb2.ModelServerConfig())
    [entry] = parsed.model_config_list.config
    assert (entry.name, entry.base_path, entry.model_platform) == ("penguins", "/models/penguins", "tensorflow")
    assert dict(entry.version_labels) == {"stable": 7, "canary": 7}
    assert list(entry.model_version_policy.specific.versions) == [7]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["models.config", "penguins"]  # no temp file left


def test_labels_need_a_pushed_model(tmp_path) -> None:
    with pytest.raises(ServingConfigError, match="no model 'penguins'.*push one first"):
        model_config.promote(tmp_path, "penguins")
    (tmp_path / "models.config").write_text("this is not a config {")
    with pytest.raises(ServingConfigError, match="not a valid TF Serving model config"):
        model_config.status(tmp_path, "penguins")


def test_serving_commands_without_a_push_fail_clearly(tmp_path) -> None:
    from tests.conftest import turbotfx

    result = turbotfx("serving", "rollback", home=tmp_path)
    assert result.exit_code == 2
    assert "no model 'penguins'" in result.output and "Traceback" not in result.output
    status = turbotfx("serving", "status", "--format", "json", home=tmp_path)
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout) == {"model": "penguins", "stable": None, "canary": None,
                                         "served": [], "versions": []}
