"""The Evaluator's baseline (components/baseline_model): the latest pushed model of the
candidate's own model name and feature contract, never another dataset's, never the
candidate. A real in-memory MLMD store holds the records as a run leaves them."""

from __future__ import annotations

import pytest
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb
from tfx.types import standard_artifacts

from components.atomic_pusher import keys as pusher_keys
from components.baseline_model.strategy import (
    CANDIDATE_KEY,
    MODEL_KEY,
    PUSHED_MODEL_KEY,
    LatestPushedModelStrategy,
)
from components.reporting_trainer.keys import FEATURE_CONTRACT_KEY, MODEL_NAME_KEY


class _Store:
    def __init__(self) -> None:
        config = mlmd_pb.ConnectionConfig()
        config.fake_database.SetInParent()
        self.mlmd = metadata_store.MetadataStore(config)
        self.model_type = self.mlmd.put_artifact_type(mlmd_pb.ArtifactType(name="Model"))
        self.pushed_type = self.mlmd.put_artifact_type(mlmd_pb.ArtifactType(name="PushedModel"))
        self.pusher_type = self.mlmd.put_execution_type(mlmd_pb.ExecutionType(name="tfx.Pusher"))
        self.models: list = []
        self.pushed: list = []

    def model(self, name: str | None, contract: str | None) -> standard_artifacts.Model:
        artifact = mlmd_pb.Artifact(type_id=self.model_type, uri=f"/m/{len(self.models)}")
        if name is not None:
            artifact.custom_properties[MODEL_NAME_KEY].string_value = name
        if contract is not None:
            artifact.custom_properties[FEATURE_CONTRACT_KEY].string_value = contract
        [artifact.id] = self.mlmd.put_artifacts([artifact])
        model = standard_artifacts.Model()
        model.set_mlmd_artifact(artifact)
        self.models.append(model)
        return model

    def push(self, model: standard_artifacts.Model, serving_name: str, pushed: bool = True) -> None:
        artifact = mlmd_pb.Artifact(type_id=self.pushed_type, uri=f"/p/{len(self.pushed)}")
        artifact.custom_properties[pusher_keys.PUSHED].int_value = int(pushed)
        artifact.custom_properties[pusher_keys.PUSHED_DESTINATION].string_value = (
            f"/ws/serving/{serving_name}/{100 + len(self.pushed)}")
        execution = mlmd_pb.Execution(type_id=self.pusher_type, last_known_state=mlmd_pb.Execution.COMPLETE)

        def event(kind, key):
            found = mlmd_pb.Event(type=kind)
            found.path.steps.add().key = key
            found.path.steps.add().index = 0
            return found

        # The Pusher's input, the model it pushed, and its output, the push record.
        [model_artifact] = self.mlmd.get_artifacts_by_id([model.id])
        _, [_, pushed_id], _ = self.mlmd.put_execution(
            execution, [(model_artifact, event(mlmd_pb.Event.INPUT, "model")),
                        (artifact, event(mlmd_pb.Event.OUTPUT, "pushed_model"))], [])
        [stored] = self.mlmd.get_artifacts_by_id([pushed_id])
        record = standard_artifacts.PushedModel()
        record.set_mlmd_artifact(stored)
        self.pushed.append(record)

    def resolve(self, candidate: standard_artifacts.Model) -> list[int]:
        inputs = {MODEL_KEY: self.models, PUSHED_MODEL_KEY: self.pushed, CANDIDATE_KEY: [candidate]}
        return [m.id for m in LatestPushedModelStrategy().resolve_artifacts(self.mlmd, inputs)[MODEL_KEY]]


def test_a_candidate_is_compared_only_with_its_own_datasets_pushed_model():
    store = _Store()
    churn_old = store.model("churn", "c1")
    store.push(churn_old, "churn")
    penguins = store.model("penguins", "p1")
    store.push(penguins, "penguins")  # newer than churn's, and the latest push overall
    candidate = store.model("churn", "c1")
    assert store.resolve(candidate) == [churn_old.id]


def test_no_baseline_when_only_another_dataset_has_pushed():
    store = _Store()
    store.push(store.model("penguins", "p1"), "penguins")
    assert store.resolve(store.model("iris", "i1")) == []


def test_a_changed_feature_contract_has_no_baseline():
    store = _Store()
    store.push(store.model("churn", "c1"), "churn")
    # Same model name, other columns: the old model cannot score the new rows.
    assert store.resolve(store.model("churn", "c2")) == []


def test_the_latest_matching_push_wins_and_the_candidate_is_never_its_own_baseline():
    store = _Store()
    first = store.model("churn", "c1")
    store.push(first, "churn")
    second = store.model("churn", "c1")
    store.push(second, "churn")
    store.push(store.model("churn", "c1"), "churn", pushed=False)  # not blessed: nothing pushed
    assert store.resolve(store.model("churn", "c1")) == [second.id]
    # A rerun whose cached Trainer output was pushed already: compared with the one before.
    assert store.resolve(second) == [first.id]


@pytest.mark.parametrize("legacy_name", [None, "churn"])
def test_models_recorded_before_contracts_match_on_their_serving_name(legacy_name):
    store = _Store()
    legacy = store.model(legacy_name, None)  # an existing workspace's model: no contract recorded
    store.push(legacy, "churn")
    store.push(store.model(None, None), "penguins")
    assert store.resolve(store.model("churn", "c1")) == [legacy.id]
