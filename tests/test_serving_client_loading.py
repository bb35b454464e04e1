"""ServingClient while TF Serving is still loading a version: a new push (or a label moved
onto one) is START, then LOADING, then AVAILABLE, and until then TF Serving answers a
request for it NOT_FOUND / 404 "Servable not found for request: Specific(NAME, VERSION)".
The client waits for it with its retries (its docstring and README: it retries while the
server is reloading) and says in one line when the retries run out; a version that is not
there at all, or an unknown label, fails at once. Against the test double of TF Serving
(tests/doubles/tf_serving.py) serving two small SavedModels written here: no pipeline run."""

from __future__ import annotations

import time

import pytest
import tensorflow as tf

from pipeline import datasets
from pipeline.scoring.inputs import row_schema
from serving.client import LOADING_STATES, ServingClient
from serving.errors import ServingClientError
from tests.doubles.tf_serving import FakeTfServing

PENGUINS = datasets.load("penguins")
SCHEMA = row_schema(PENGUINS)
SPECIES = ["Adelie", "Chinstrap", "Gentoo"]
ROW = {"island": "Biscoe", "sex": "female", "bill_length_mm": 46.1, "bill_depth_mm": 13.2,
       "flipper_length_mm": 211.0, "body_mass_g": 4500.0}


class _Answers(tf.Module):
    """Every row gets the same species: which one tells which version answered."""

    def __init__(self, species: str) -> None:
        super().__init__()
        self.probabilities = tf.constant([[1.0 if name == species else 0.0 for name in SPECIES]])
        self.species = species

    def answer(self, rows):
        probabilities = tf.tile(self.probabilities, [rows, 1])
        return {"probabilities": probabilities, "class_id": tf.argmax(probabilities, axis=1),
                "label": tf.fill([rows], self.species), "classes": tf.tile(tf.constant([SPECIES]), [rows, 1])}


def _saved_model(directory, species: str) -> str:
    module = _Answers(species)
    default = tf.function(lambda examples: module.answer(tf.shape(examples)[0]),
                          input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    raw_specs = {name: tf.TensorSpec([None], tf.float32 if name in PENGUINS.feature_spec().numeric_keys
                                     else tf.string, name=name) for name in SCHEMA.to_instance(ROW)}
    raw = tf.function(lambda **features: module.answer(tf.shape(next(iter(features.values())))[0]))
    signatures = {"serving_default": default.get_concrete_function(),
                  "serving_raw": raw.get_concrete_function(**raw_specs)}
    tf.saved_model.save(module, str(directory), signatures=signatures)
    return str(directory)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("versions")
    return {"old": _saved_model(root / "old", "Adelie"), "new": _saved_model(root / "new", "Gentoo")}


@pytest.fixture(params=["grpc", "rest"])
def protocol(request) -> str:
    return request.param


def _client(server: FakeTfServing, protocol: str, **options) -> ServingClient:
    where = {"grpc_target": server.grpc_target} if protocol == "grpc" else {"rest_url": server.rest_url}
    return ServingClient(**where, schema=SCHEMA, **options)


@pytest.mark.parametrize("ask", [{"label": "canary"}, {"version": 2}], ids=["label", "version"])
def test_a_version_still_loading_is_waited_for(models, protocol, ask) -> None:
    with FakeTfServing("penguins", {1: models["old"]}, labels={"stable": 1}) as server:
        server.add_version(2, models["new"], loading_s=1.5)  # a push: the canary label on it at once
        server.labels["canary"] = 2
        [old, new] = _client(server, protocol).model_status()
        assert old == {"version": 1, "state": "AVAILABLE"} and new["state"] in LOADING_STATES, new
        time.sleep(0.15)  # past START (0.1 s at most)
        assert _client(server, protocol).model_status()[1] == {"version": 2, "state": "LOADING"}
        # The latest is the newest AVAILABLE version: old answers meanwhile.
        assert [p.label for p in _client(server, protocol).predict([ROW])] == ["Adelie"]

        [prediction] = _client(server, protocol, retries=8, backoff_s=0.05, **ask).predict([ROW])
        assert prediction.label == "Gentoo"
        predicts = [r for r in server.requests if r["call"] == "predict"][1:]
        assert [r.get("error") for r in predicts[:-1]] == ["NOT_FOUND"] * (len(predicts) - 1) != []
        assert predicts[-1]["served"] == 2
        assert {"version": 2, "state": "AVAILABLE"} in _client(server, protocol).model_status()


@pytest.mark.parametrize("ask", [{"label": "canary"}, {"version": 2}, {}], ids=["label", "version", "latest"])
def test_a_version_not_loaded_in_time_is_one_clear_line(models, protocol, ask) -> None:
    # The latest: nothing AVAILABLE yet (TF Serving would pick an older AVAILABLE version).
    versions = {1: models["old"], 2: models["new"]} if ask else {2: models["new"]}
    with FakeTfServing("penguins", versions, labels={"canary": 2}, loading_s={2: 60.0}) as server:
        time.sleep(0.15)  # past START
        with pytest.raises(ServingClientError) as raised:
            _client(server, protocol, retries=2, backoff_s=0.01, **ask).predict([ROW])
    message = str(raised.value)
    assert "\n" not in message
    assert message.endswith("is unavailable after 3 tries: version 2 of 'penguins' is not loaded yet (LOADING); "
                            "check that the server is up and has loaded the model"), message
    assert [r.get("error") for r in server.requests if r["call"] == "predict"] == ["NOT_FOUND"] * 3


@pytest.mark.parametrize("ask, refusal", [
    ({"version": 1}, "refused the request ({}): Servable not found for request: Specific(penguins, 1)"),
    ({"label": "stable"}, "refused the request ({}): Servable not found for request: Specific(penguins, 1)"),
    ({"version": 9}, "refused the request ({}): Servable not found for request: Specific(penguins, 9)"),
    ({"label": "blue"}, "refused the request ({}): Unrecognized servable version label: blue"),
], ids=["unloaded", "label-on-unloaded", "never-pushed", "unknown-label"])
def test_a_version_that_is_not_coming_fails_at_once(models, protocol, ask, refusal) -> None:
    with FakeTfServing("penguins", {1: models["old"], 2: models["new"]}, labels={"stable": 1}) as server:
        server.drop_version(1, unloading_s=60.0)
        server.add_version(3, models["new"], loading_s=60.0)  # something is loading, but not what was asked
        *served, loading = _client(server, protocol).model_status()
        assert served == [{"version": 1, "state": "UNLOADING"}, {"version": 2, "state": "AVAILABLE"}]
        assert loading["version"] == 3 and loading["state"] in LOADING_STATES, loading
        with pytest.raises(ServingClientError) as raised:
            _client(server, protocol, retries=3, backoff_s=0.01, **ask).predict([ROW])
    code = {"grpc": "NOT_FOUND", "rest": "HTTP 404"}[protocol]
    if ask.get("label") == "blue":
        code = {"grpc": "INVALID_ARGUMENT", "rest": "HTTP 400"}[protocol]
    assert str(raised.value).endswith(refusal.format(code)), raised.value
    assert len([r for r in server.requests if r["call"] == "predict"]) == 1  # not retried
