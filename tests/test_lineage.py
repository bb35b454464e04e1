"""Lineage queries on a real (empty or hand-filled) SQLite MLMD store, and the diff logic."""

from __future__ import annotations

import pytest
from ml_metadata.proto import metadata_store_pb2

from pipeline.provenance import diff as diff_lib
from pipeline.provenance import lineage
from pipeline.store.connection import open_store
from pipeline.store.url import sqlite_url
from tests.conftest import turbotfx


@pytest.fixture
def store(tmp_path):
    return open_store(sqlite_url(tmp_path / "store.sqlite"))


def test_no_pushed_model_yet(store) -> None:
    with pytest.raises(lineage.LineageError, match="no model has been pushed yet"):
        lineage.find_model(store, latest=True)


def test_unknown_version_and_artifact(store) -> None:
    with pytest.raises(lineage.LineageError, match="no pushed model has version 42.*no model has been pushed"):
        lineage.find_model(store, model_version="42")
    with pytest.raises(lineage.LineageError, match="not a serving version"):
        lineage.find_model(store, model_version="v1; DROP TABLE Artifact")
    with pytest.raises(lineage.LineageError, match="artifact 7 does not exist"):
        lineage.find_model(store, artifact_id=7)


def test_an_artifact_that_is_not_a_model(store) -> None:
    type_id = store.put_artifact_type(metadata_store_pb2.ArtifactType(name="Examples"))
    [artifact_id] = store.put_artifacts([metadata_store_pb2.Artifact(type_id=type_id, uri="/data/1")])
    with pytest.raises(lineage.LineageError, match=f"artifact {artifact_id} is of type Examples, not a model"):
        lineage.find_model(store, artifact_id=artifact_id)
    with pytest.raises(lineage.LineageError, match="is of type Examples"):
        lineage.find_model(store, uri="/data/1/")
    with pytest.raises(lineage.LineageError, match="no artifact in this metadata store has the URI"):
        lineage.find_model(store, uri="/elsewhere")


def _lineage(learning_rate: float, examples_id: int, accuracy: float) -> dict:
    return {
        "model": {"id": int(learning_rate * 1000)},
        "pipeline": {"run_id": f"run-{learning_rate}"},
        "trainer": {
            "hyperparameters": {"learning_rate": learning_rate, "epochs": 5, "train_args": {"num_steps": 10}},
            "effective": {"replicas": 1},
            "code_fingerprint": "abc",
        },
        "examples": {"id": examples_id, "uri": f"/ex/{examples_id}", "span": 0, "version": None, "fingerprint": "f"},
        "schema": {"id": 2, "uri": "/schema"},
        "evaluation": {"metrics": {"accuracy": accuracy}, "blessed": True, "baseline_model_id": None},
        "pushed_model": None,
    }


def test_diff_names_only_what_changed() -> None:
    diff = diff_lib.diff_models(_lineage(0.01, 1, 0.9), _lineage(0.02, 1, 0.9))
    assert diff["hyperparameters"] == {"learning_rate": {"a": 0.01, "b": 0.02}}
    assert diff["data"] == diff["schema"] == diff["metrics"] == diff["effective"] == {}

    changed_data = diff_lib.diff_models(_lineage(0.01, 1, 0.9), _lineage(0.01, 3, 0.8))
    assert changed_data["hyperparameters"] == {}
    assert set(changed_data["data"]) == {"examples.id", "examples.uri"}
    assert changed_data["metrics"] == {"accuracy": {"a": 0.9, "b": 0.8}}


def test_nested_settings_are_named_by_their_leaf() -> None:
    first, second = _lineage(0.01, 1, 0.9), _lineage(0.01, 1, 0.9)
    second["trainer"]["hyperparameters"]["train_args"] = {"num_steps": 20}
    assert diff_lib.diff_models(first, second)["hyperparameters"] == {"train_args.num_steps": {"a": 10, "b": 20}}


def test_queries_never_create_a_store(tmp_path) -> None:
    result = turbotfx("lineage", "--latest", home=tmp_path / "empty")
    assert result.exit_code == 2
    assert "no metadata store at" in result.output and "turbotfx run" in result.output
    assert not (tmp_path / "empty").exists()


def test_lineage_needs_to_know_which_model(tmp_path) -> None:
    result = turbotfx("lineage", home=tmp_path)
    assert result.exit_code == 2
    assert "one of the arguments --latest --model-version --artifact-id --uri is required" in result.output
