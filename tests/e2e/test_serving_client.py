"""ServingClient against a test double of TF Serving (tests/doubles/tf_serving.py) that
serves the pipeline's real pushed model on loopback: requests, routing, retries, errors."""

from __future__ import annotations

import json

import portpicker
import pytest
import tensorflow as tf
from tensorflow_metadata.proto.v0 import schema_pb2

from serving import client as client_lib
from serving.client import RowSchema, ServingClient, ServingClientError
from tests.conftest import turbotfx
from tests.doubles.tf_serving import FakeTfServing

pytestmark = pytest.mark.e2e

ROWS = [
    {"island": "Biscoe", "sex": "female", "bill_length_mm": 46.5, "bill_depth_mm": 14.8,
     "flipper_length_mm": 217.0, "body_mass_g": 5200.0},
    {"island": "Dream", "sex": "male", "bill_length_mm": 51.0, "bill_depth_mm": 19.0,
     "flipper_length_mm": 196.0, "body_mass_g": 3800.0},
    {"island": "Torgersen", "sex": None, "bill_length_mm": 39.0, "bill_depth_mm": 18.5,
     "flipper_length_mm": None, "body_mass_g": 3700.0},  # missing values, as in the data
]


@pytest.fixture(scope="module")
def server(first_run):
    [version_dir] = sorted(p for p in first_run.config.serving_dir.iterdir() if p.name.isdigit())[:1]
    # The same pushed model as two versions: enough to see which one a label reaches.
    with FakeTfServing("penguins", {1: str(version_dir), 2: str(version_dir)},
                       labels={"stable": 1, "canary": 2}) as fake:
        fake.in_process = _in_process(str(version_dir))
        yield fake


def _in_process(model_dir: str) -> list[str]:
    signature = tf.saved_model.load(model_dir).signatures["serving_default"]
    schema = RowSchema.for_dataset("penguins")
    examples = tf.constant([schema.to_example(row) for row in ROWS])
    return [label.decode() for label in signature(examples=examples)["label"].numpy()]


@pytest.fixture(autouse=True)
def _reset(server):
    server.requests.clear()
    server.unavailable_first, server.delay_s = 0, 0.0


@pytest.fixture(params=["grpc", "rest"])
def protocol(request) -> str:
    return request.param


def _client(server, protocol: str, **options) -> ServingClient:
    where = {"grpc_target": server.grpc_target} if protocol == "grpc" else {"rest_url": server.rest_url}
    return ServingClient(**where, backoff_s=0.01, **options)


def test_predictions_match_the_model_in_process(server, protocol) -> None:
    predictions = _client(server, protocol).predict(ROWS)
    assert [p.label for p in predictions] == server.in_process
    for prediction in predictions:
        assert len(prediction.probabilities) == 3
        assert sum(prediction.probabilities) == pytest.approx(1.0, abs=1e-3)
        assert prediction.class_id == max(range(3), key=lambda i: prediction.probabilities[i])


def test_labels_and_versions_route_the_request(server, protocol) -> None:
    _client(server, protocol, label="canary").predict(ROWS[:1])
    _client(server, protocol, version=1).predict(ROWS[:1])
    _client(server, protocol).predict(ROWS[:1])
    assert [(r["label"], r["version"], r["served"]) for r in server.requests] == [
        ("canary", None, 2), (None, 1, 1), (None, None, 2)]


def test_status_and_metadata(server, protocol) -> None:
    client = _client(server, protocol)
    assert client.model_status() == [{"version": 1, "state": "AVAILABLE"}, {"version": 2, "state": "AVAILABLE"}]
    metadata = client.model_metadata()
    assert {"serving_default", "serving_raw", "transform_features"} <= set(metadata)
    assert metadata["serving_default"]["inputs"] == ["examples"]
    assert {"probabilities", "class_id", "label"} <= set(metadata["serving_raw"]["outputs"])


@pytest.mark.parametrize("row, message", [
    ({"bill_lenght_mm": 40.0}, "row 0: unknown feature 'bill_lenght_mm'"),
    ({"bill_length_mm": "long"}, "row 0: feature 'bill_length_mm' must be a number, got str 'long'"),
    ({"island": 3}, "row 0: feature 'island' must be a string"),
])
def test_bad_rows_are_refused_before_sending(server, protocol, row, message) -> None:
    with pytest.raises(ServingClientError, match=message):
        _client(server, protocol).predict([row])
    assert server.requests == []


def test_unavailable_is_retried_with_backoff(server, protocol) -> None:
    server.unavailable_first = 2
    assert len(_client(server, protocol, retries=3).predict(ROWS)) == 3
    assert len(server.requests) == 3
    server.requests.clear()
    server.unavailable_first = 5
    with pytest.raises(ServingClientError, match="unavailable after 2 tries"):
        _client(server, protocol, retries=1).predict(ROWS)
    assert len(server.requests) == 2


def test_a_slow_server_times_out_clearly(server, protocol) -> None:
    server.delay_s = 1.0
    with pytest.raises(ServingClientError, match="did not answer within 0.3 s"):
        _client(server, protocol, timeout_s=0.3).predict(ROWS[:1])


def test_an_unknown_label_is_a_clear_error(server, protocol) -> None:
    with pytest.raises(ServingClientError, match="refused the request.*Unrecognized servable version label: blue"):
        _client(server, protocol, label="blue").predict(ROWS[:1])


def test_nothing_listening(protocol) -> None:
    port = portpicker.pick_unused_port()
    where = {"grpc_target": f"127.0.0.1:{port}"} if protocol == "grpc" else {"rest_url": f"http://127.0.0.1:{port}"}
    with pytest.raises(ServingClientError, match="unavailable after 2 tries"):
        ServingClient(**where, retries=1, backoff_s=0.01, timeout_s=2).predict(ROWS[:1])


def test_required_features_come_from_the_schema() -> None:
    schema = RowSchema.for_dataset("synthetic")
    assert "price" in schema.required
    row = {name: "x" if schema.types[name] == schema_pb2.BYTES else 1.0 for name in schema.required}
    schema.check([row])
    del row["price"]
    with pytest.raises(ServingClientError, match="row 0: feature 'price' is missing"):
        schema.check([row])
    with pytest.raises(ServingClientError, match="give exactly one server"):
        ServingClient()
    assert client_lib.DEFAULT_MODEL_NAME == "penguins"


def _labels(output: str) -> list[str]:
    return [line.split()[2] for line in output.splitlines() if line.startswith("row ")]


def test_predict_command_in_process_and_against_the_server(server, first_run, tmp_path) -> None:
    rows = json.dumps(ROWS)
    in_process = turbotfx("predict", "--json", rows, home=first_run.home)
    assert in_process.exit_code == 0, in_process.output
    assert _labels(in_process.stdout) == server.in_process
    for where in (("--grpc", server.grpc_target), ("--rest", server.rest_url)):
        remote = turbotfx("predict", "--json", rows, *where, "--label", "canary", home=first_run.home)
        assert remote.exit_code == 0, remote.output
        assert _labels(remote.stdout) == server.in_process
    assert [r["label"] for r in server.requests] == ["canary", "canary"]

    table = tmp_path / "rows.csv"
    table.write_text("species,island,sex,bill_length_mm,bill_depth_mm,flipper_length_mm,body_mass_g\n"
                     "Gentoo,Biscoe,female,46.5,14.8,217,5200\nAdelie,Torgersen,,39.0,18.5,,3700\n")
    from_csv = turbotfx("predict", "--csv", str(table), "--format", "json", home=first_run.home)
    assert from_csv.exit_code == 0, from_csv.output
    predicted = json.loads(from_csv.stdout)["predictions"]
    assert [p["label"] for p in predicted] == [server.in_process[0], server.in_process[2]]


def test_predict_command_errors(first_run, tmp_path) -> None:
    bad_json = turbotfx("predict", "--json", "{island: Biscoe}", home=first_run.home)
    assert bad_json.exit_code == 2 and "--json is not valid JSON" in bad_json.output
    bad_row = turbotfx("predict", "--json", '{"bill_length_mm": "long"}', home=first_run.home)
    assert bad_row.exit_code == 2 and "feature 'bill_length_mm' must be a number" in bad_row.output
    nothing_pushed = turbotfx("predict", "--json", "{}", home=tmp_path)
    assert nothing_pushed.exit_code == 2 and "no pushed model under" in nothing_pushed.output
