"""ServingClient against a test double of TF Serving (tests/doubles/tf_serving.py) that
serves the pipeline's real pushed model on loopback: requests, routing, retries, errors."""

from __future__ import annotations

import csv
import dataclasses
import json

import numpy as np
import portpicker
import pytest
import tensorflow as tf

from pipeline import datasets
from pipeline.scoring.inputs import row_schema
from serving.client import ServingClient
from serving.errors import RowError, ServingClientError
from tests.conftest import turbotfx
from tests.doubles.tf_serving import FakeTfServing

pytestmark = pytest.mark.e2e

PENGUINS = datasets.load("penguins")
SPEC = PENGUINS.feature_spec()  # which columns are numbers, which text
SPECIES = ("Adelie", "Chinstrap", "Gentoo")
# A valid row for the tests that look at requests, not at predictions.
ONE_ROW = {"island": "Biscoe", "sex": "female", "bill_length_mm": 46.5, "bill_depth_mm": 14.8,
           "flipper_length_mm": 217.0, "body_mass_g": 5200.0}


@dataclasses.dataclass(frozen=True)
class Expected:
    """The pushed SavedModel's own answers for the test's rows, from serving_default fed
    tf.Examples this module builds: not from the client under test."""

    labels: list[str]
    class_ids: list[int]
    probabilities: np.ndarray


def _picked_csv_rows(run) -> list[dict[str, str]]:
    """Rows of every species from the run's data (the first 64 rows are all Adelie): the
    first three complete rows of each, the first row missing its sex, and a Chinstrap with
    its body mass blanked. Cells as text, "" where missing, the label kept."""
    with open(run.config.data_path / "penguins.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    complete = [r for r in rows if all(r.values())]
    picked = [r for species in SPECIES for r in [r for r in complete if r["species"] == species][:3]]
    picked.append(next(r for r in rows if not r["sex"] and r["bill_length_mm"]))
    picked.append({**picked[3], "body_mass_g": ""})  # picked[3]: the first Chinstrap
    return picked


def _example(row: dict[str, str]) -> bytes:
    """A tf.Example as ExampleGen writes a CSV row: one value per present cell, the label left out."""
    feature = {}
    for key in SPEC.numeric_keys:
        feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(row[key])] if row[key] else []))
    for key in SPEC.categorical_keys:
        feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[row[key].encode()] if row[key] else []))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _client_row(row: dict[str, str]) -> dict:
    """The row as a client sends it: numbers as numbers, None where missing, the label kept
    (the client drops it)."""
    return {key: (float(value) if key in SPEC.numeric_keys else value) if value else None
            for key, value in row.items()}


def _expected(model_dir: str, rows: list[dict[str, str]]) -> Expected:
    signature = tf.saved_model.load(model_dir).signatures["serving_default"]
    outputs = signature(examples=tf.constant([_example(row) for row in rows]))
    return Expected([label.decode() for label in outputs["label"].numpy()],
                    outputs["class_id"].numpy().tolist(), outputs["probabilities"].numpy())


@pytest.fixture(scope="module")
def server(first_run):
    [version_dir] = sorted(p for p in first_run.config.serving_dir.iterdir() if p.name.isdigit())[:1]
    # The same pushed model as two versions: enough to see which one a label reaches.
    with FakeTfServing("penguins", {1: str(version_dir), 2: str(version_dir)},
                       labels={"stable": 1, "canary": 2}) as fake:
        fake.csv_rows = _picked_csv_rows(first_run)
        fake.rows = [_client_row(row) for row in fake.csv_rows]
        fake.expected = _expected(str(version_dir), fake.csv_rows)
        yield fake


@pytest.fixture(autouse=True)
def _reset(server):
    server.requests.clear()
    server.unavailable_first, server.delay_s = 0, 0.0


@pytest.fixture(params=["grpc", "rest"])
def protocol(request) -> str:
    return request.param


def _client(server, protocol: str, **options) -> ServingClient:
    where = {"grpc_target": server.grpc_target} if protocol == "grpc" else {"rest_url": server.rest_url}
    return ServingClient(**where, schema=row_schema(PENGUINS), backoff_s=0.01, **options)


def test_the_rows_cover_every_class(server) -> None:
    # The model tells the species apart on these rows: comparing the client's answers to
    # its answers would otherwise not catch a client that mixes up classes.
    truth = [row["species"] for row in server.csv_rows]
    assert set(truth) == set(SPECIES) and set(server.expected.labels) == set(SPECIES)
    for species in SPECIES:
        predicted = [label for label, true in zip(server.expected.labels, truth) if true == species]
        assert predicted.count(species) > len(predicted) / 2, (species, predicted)


def test_predictions_match_the_saved_model(server, protocol) -> None:
    predictions = _client(server, protocol).predict(server.rows)
    assert [p.label for p in predictions] == server.expected.labels
    assert [p.class_id for p in predictions] == server.expected.class_ids
    np.testing.assert_allclose([p.probabilities for p in predictions], server.expected.probabilities, atol=1e-5)


def test_labels_and_versions_route_the_request(server, protocol) -> None:
    _client(server, protocol, label="canary").predict([ONE_ROW])
    _client(server, protocol, version=1).predict([ONE_ROW])
    _client(server, protocol).predict([ONE_ROW])
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
    ({"island": 3}, "row 0: feature 'island' must be text"),
    ({}, "row 0 has no feature values"),
    ({**ONE_ROW, "island": "Atlantis"}, "row 0: feature 'island' is 'Atlantis', not in the schema's domain"),
    ({**ONE_ROW, "body_mass_g": 1e308}, "row 0: feature 'body_mass_g' is 1e\\+308, beyond a 32-bit float"),
])
def test_bad_rows_are_refused_before_sending(server, protocol, row, message) -> None:
    with pytest.raises(RowError, match=message):
        _client(server, protocol).predict([row])
    assert server.requests == []


def test_unavailable_is_retried_with_backoff(server, protocol) -> None:
    server.unavailable_first = 2
    assert len(_client(server, protocol, retries=3).predict(server.rows)) == len(server.rows)
    assert len(server.requests) == 3
    server.requests.clear()
    server.unavailable_first = 5
    with pytest.raises(ServingClientError, match="unavailable after 2 tries"):
        _client(server, protocol, retries=1).predict(server.rows)
    assert len(server.requests) == 2


def test_a_slow_server_times_out_clearly(server, protocol) -> None:
    server.delay_s = 1.0
    with pytest.raises(ServingClientError, match="did not answer within 0.3 s"):
        _client(server, protocol, timeout_s=0.3).predict([ONE_ROW])


def test_an_unknown_label_is_a_clear_error(server, protocol) -> None:
    with pytest.raises(ServingClientError, match="refused the request.*Unrecognized servable version label: blue"):
        _client(server, protocol, label="blue").predict([ONE_ROW])


def test_nothing_listening(protocol) -> None:
    port = portpicker.pick_unused_port()
    where = {"grpc_target": f"127.0.0.1:{port}"} if protocol == "grpc" else {"rest_url": f"http://127.0.0.1:{port}"}
    with pytest.raises(ServingClientError, match="unavailable after 2 tries"):
        ServingClient(**where, schema=row_schema(PENGUINS), retries=1, backoff_s=0.01,
                      timeout_s=2).predict([ONE_ROW])


def _labels(output: str) -> list[str]:
    return [line.split()[2] for line in output.splitlines() if line.startswith("row ")]


def test_predict_command_in_process_and_against_the_server(server, first_run, tmp_path) -> None:
    rows = json.dumps(server.rows)  # the label included: predict drops it
    in_process = turbotfx("predict", "--json", rows, home=first_run.home)
    assert in_process.exit_code == 0, in_process.output
    assert _labels(in_process.stdout) == server.expected.labels
    for where in (("--grpc", server.grpc_target), ("--rest", server.rest_url)):
        remote = turbotfx("predict", "--json", rows, *where, "--label", "canary", home=first_run.home)
        assert remote.exit_code == 0, remote.output
        assert _labels(remote.stdout) == server.expected.labels
    assert [r["label"] for r in server.requests] == ["canary", "canary"]

    table = tmp_path / "rows.csv"
    with open(table, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(server.csv_rows[0]))
        writer.writeheader()
        writer.writerows(server.csv_rows)
    from_csv = turbotfx("predict", "--csv", str(table), "--format", "json", home=first_run.home)
    assert from_csv.exit_code == 0, from_csv.output
    predicted = json.loads(from_csv.stdout)["predictions"]
    assert [p["label"] for p in predicted] == server.expected.labels
    np.testing.assert_allclose([p["probabilities"] for p in predicted], server.expected.probabilities, atol=1e-5)


def test_predict_command_errors(first_run, tmp_path) -> None:
    bad_json = turbotfx("predict", "--json", "{island: Biscoe}", home=first_run.home)
    assert bad_json.exit_code == 2 and "--json is not valid JSON" in bad_json.output
    bad_row = turbotfx("predict", "--json", '{"bill_length_mm": "long"}', home=first_run.home)
    assert bad_row.exit_code == 2 and "feature 'bill_length_mm' must be a number" in bad_row.output
    for row, message in (("{}", "row 0 has no feature values"),
                         ('{"island": "Atlantis"}', "row 0: feature 'island' is 'Atlantis', not in the schema's"),
                         ('{"bill_length_mm": 1e308}', "row 0: feature 'bill_length_mm' is 1e+308, beyond")):
        refused = turbotfx("predict", "--json", row, home=first_run.home)
        assert refused.exit_code == 2 and f"turbotfx: error: {message}" in refused.output, refused.output
    nothing_pushed = turbotfx("predict", "--json", "{}", home=tmp_path)
    assert nothing_pushed.exit_code == 2 and "no pushed model under" in nothing_pushed.output
