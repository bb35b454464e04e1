"""`serving promote | rollback | status` as library calls (pipeline/serving_labels.py), on
real serving directories: version folders, a real models.config, push records in a real
SQLite MLMD store laid out as TFX lays it out. Each call prints nothing: its lines go to the
report callback, its answer is the returned ServingStatus."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb
from tfx.types import standard_artifacts

from components.atomic_pusher import keys as pusher_keys
from pipeline import serving_labels
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.provenance import pushes
from pipeline.serving_labels import ServedVersion, ServingStatus
from pipeline.store import connection
from pipeline.store.url import sqlite_url
from serving import model_config, push
from tests.read_only import read_only
from tests.test_run_summary import Store
from tests.test_store_damage import truncate

PUSHER = "pusher.component.Pusher"  # Store names the type tfx.components.<node>, as TFX does
# Versions after the store's first record: the store can say whether it pushed them.
LATER = 9_000_000_000


def _path_step(key: str) -> mlmd_pb.Event.Path:
    return mlmd_pb.Event.Path(steps=[mlmd_pb.Event.Path.Step(key=key)])


def _version_dir(config: PipelineConfig, version: int) -> None:
    (config.serving_dir / str(version) / "variables").mkdir(parents=True)
    (config.serving_dir / str(version) / "saved_model.pb").write_bytes(b"graph")


def _record(store: Store, run: int, config: PipelineConfig, version: int, stable: int) -> int:
    """The Pusher's execution as TFX records it: the Model in, the PushedModel (version and
    the labels it left) out, both in the run. Returns the Model's artifact id."""
    model = standard_artifacts.Model()
    model.uri = f"/pipeline/Trainer/model/{version}"
    pushed = standard_artifacts.PushedModel()
    pushed.set_int_custom_property(pusher_keys.PUSHED, 1)
    pushed.set_string_custom_property(pusher_keys.PUSHED_DESTINATION, str(config.serving_dir / str(version)))
    pushed.set_string_custom_property(pusher_keys.PUSHED_VERSION, str(version))
    pushed.set_string_custom_property(pusher_keys.SERVING_LABELS, json.dumps({"stable": stable, "canary": version}))
    mlmd = store.mlmd
    for artifact in (model, pushed):
        artifact.mlmd_artifact.type_id = mlmd.put_artifact_type(artifact.artifact_type)
    type_id = mlmd.put_execution_type(mlmd_pb.ExecutionType(name=f"tfx.components.{PUSHER}"))
    events = [(model.mlmd_artifact, mlmd_pb.Event(type=mlmd_pb.Event.INPUT, path=_path_step("model"))),
              (pushed.mlmd_artifact, mlmd_pb.Event(type=mlmd_pb.Event.OUTPUT, path=_path_step("pushed_model")))]
    _, [model_id, _], _ = mlmd.put_execution(
        mlmd_pb.Execution(type_id=type_id, last_known_state=mlmd_pb.Execution.COMPLETE), events,
        mlmd.get_contexts_by_id([run]))
    return model_id


def _pushed(config: PipelineConfig, versions: tuple[int, ...], recorded: tuple[int, ...] | None = None,
            ) -> tuple[Store, dict[int, int]]:
    """Versions pushed in order (the first stable, the newest canary), those in recorded
    (default: all) with their push records in run-1. Returns the store and the Model id
    of each recorded version."""
    store = Store(connection.open_store(sqlite_url(config.metadata_path)))
    run = store.run("run-1")
    model_ids = {}
    for version in versions:
        _version_dir(config, version)
        model_config.record_push(config.serving_dir.parent, config.model_name, version)
        if recorded is None or version in recorded:
            model_ids[version] = _record(store, run, config, version, stable=versions[0])
    return store, model_ids


@pytest.fixture
def config(tmp_path) -> PipelineConfig:
    return PipelineConfig(home=str(tmp_path / "ws"))


@pytest.fixture
def quiet_mlmd(monkeypatch):
    monkeypatch.setenv("GLOG_minloglevel", "3")  # what the CLI sets, undone after the test


def test_status_names_the_labels_and_the_run_each_version_came_from(config, capsys, quiet_mlmd):
    _, model_ids = _pushed(config, (100, 200))
    lines: list[str] = []

    answer = serving_labels.status(config, lines.append)

    assert answer == ServingStatus(
        model="penguins", stable=100, canary=200, served=(100, 200),
        versions=(ServedVersion(100, model_ids[100], "run-1"), ServedVersion(200, model_ids[200], "run-1")),
        config_path=config.serving_dir.parent / "models.config")
    assert answer.labels_of(100) == ["stable"] and answer.labels_of(200) == ["canary"]
    # The JSON document `serving status --format json` prints, key for key.
    assert answer.as_json() == {"model": "penguins", "stable": 100, "canary": 200, "served": [100, 200],
                                "versions": [{"version": 100, "model_id": model_ids[100], "run_id": "run-1"},
                                             {"version": 200, "model_id": model_ids[200], "run_id": "run-1"}]}
    assert lines == [] and capsys.readouterr() == ("", "")


def test_promote_labels_the_canary_stable_and_records_the_change(config, capsys, quiet_mlmd):
    store, _ = _pushed(config, (100, 200))

    answer = serving_labels.promote(config)

    assert (answer.stable, answer.canary, answer.served) == (200, 200, (200,))
    assert answer.versions == (ServedVersion(100), ServedVersion(200))  # a change looks up no origins
    on_disk = model_config.status(config.serving_dir.parent, "penguins")
    assert (on_disk.stable, on_disk.canary) == (200, 200)
    # Recorded, so a lost models.config is rebuilt with these labels.
    assert pushes.push_history(store.mlmd, "penguins", live_runs_possible=False).labels == {"stable": 200,
                                                                                          "canary": 200}
    assert capsys.readouterr() == ("", "")


def test_rollback_sends_the_canary_back_and_records_it(config, capsys, quiet_mlmd):
    store, _ = _pushed(config, (100, 200))
    lines: list[str] = []

    answer = serving_labels.rollback(config, lines.append)

    assert (answer.stable, answer.canary, answer.served) == (100, 100, (100,))
    assert answer.labels_of(100) == ["stable", "canary"] and answer.labels_of(200) == []
    assert pushes.push_history(store.mlmd, "penguins", live_runs_possible=False).labels == {"stable": 100,
                                                                                          "canary": 100}
    with pytest.raises(ConfigError, match="'penguins' has no canary to roll back"):
        serving_labels.rollback(config, lines.append)
    assert lines == [] and capsys.readouterr() == ("", "")


def test_an_orphan_is_set_aside_and_reported_before_its_promote_is_refused(config, capsys, quiet_mlmd):
    orphan = LATER + 10
    _pushed(config, (LATER, orphan), recorded=(LATER,))
    lines: list[str] = []

    with pytest.raises(ConfigError, match=f"version {orphan} of 'penguins' is not in"):
        serving_labels.promote(config, orphan, lines.append)

    # What reconciling did reaches the caller although the promote failed after it.
    assert lines[0].startswith(f"turbotfx: set aside version {orphan} of penguins: no push record")
    assert lines[1].startswith(f"turbotfx: rebuilt {config.serving_dir.parent / 'models.config'}")
    assert len(lines) == 2
    assert push.versions(config.serving_dir) == [LATER]
    assert (config.serving_dir / push.SET_ASIDE_DIR / str(orphan) / "saved_model.pb").is_file()
    assert capsys.readouterr() == ("", "")


def test_a_version_whose_push_is_not_recorded_yet_is_not_promoted(config, capsys, quiet_mlmd):
    store, _ = _pushed(config, (100,))
    # A run is pushing: its Pusher is running and its process holds the store's lock.
    store.execution(store.run("run-2"), PUSHER, state=mlmd_pb.Execution.RUNNING)
    Path(f"{config.metadata_path}.lock").write_text(str(os.getpid()))
    pushing = int(time.time()) + 5
    _version_dir(config, pushing)
    model_config.record_push(config.serving_dir.parent, "penguins", pushing)
    lines: list[str] = []

    with pytest.raises(ConfigError, match=f"version {pushing} of 'penguins' has no push record yet"):
        serving_labels.promote(config, report=lines.append)

    current = model_config.status(config.serving_dir.parent, "penguins")
    assert (current.stable, current.canary, current.versions) == (100, pushing, [100, pushing])  # left alone
    assert lines == [] and capsys.readouterr() == ("", "")


def test_status_on_a_damaged_store_warns_and_lists_the_versions_unchecked(config, capsys, quiet_mlmd):
    orphan = LATER + 10
    _pushed(config, (LATER, orphan), recorded=(LATER,))
    truncate(config.metadata_path)
    lines: list[str] = []

    answer = serving_labels.status(config, lines.append)

    assert answer.versions == (ServedVersion(LATER), ServedVersion(orphan))  # the orphan is not set aside
    [warning] = lines
    assert warning.startswith(f"turbotfx: warning: the metadata store {config.metadata_path} is damaged")
    assert warning.endswith("; versions below are not checked against push records")
    # A label change is never made against records that cannot be read.
    with pytest.raises(connection.DamagedStoreError):
        serving_labels.promote(config, report=lines.append)
    assert len(lines) == 1 and capsys.readouterr() == ("", "")


def test_a_label_on_a_version_that_is_gone_is_warned_of(config, capsys):
    for version in (10, 20):  # no store: nothing to check against
        _version_dir(config, version)
        model_config.record_push(config.serving_dir.parent, "penguins", version)
    (config.serving_dir / "10" / "saved_model.pb").unlink()
    (config.serving_dir / "10" / "variables").rmdir()
    (config.serving_dir / "10").rmdir()  # the stable version deleted by hand
    lines: list[str] = []

    answer = serving_labels.status(config, lines.append)

    assert (answer.stable, answer.canary, answer.versions) == (10, 20, (ServedVersion(20),))
    assert lines == [f"turbotfx: warning: the stable label of 'penguins' points at version 10, which is not in "
                     f"{config.serving_dir}: TF Serving serves nothing under it; promote a version that is there"]
    assert capsys.readouterr() == ("", "")


def test_status_answers_on_a_serving_directory_that_cannot_be_written(config, capsys, quiet_mlmd):
    _pushed(config, (100, 200))
    serving_root = config.serving_dir.parent
    lines: list[str] = []
    with read_only(serving_root):
        answer = serving_labels.status(config, lines.append)

    assert (answer.stable, answer.canary) == (100, 200)
    assert answer.versions == (ServedVersion(100), ServedVersion(200))  # unchecked: no origins either
    [warning] = lines
    assert warning.startswith(f"turbotfx: warning: {serving_root} cannot be written (")
    assert warning.endswith("), so its versions are not checked against the push records")
    assert capsys.readouterr() == ("", "")
