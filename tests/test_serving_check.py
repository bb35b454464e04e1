"""The serving check on real SavedModels: a sound one passes with latencies, a broken one
(NaN outputs, missing signature, unloadable) fails, and a failed check blocks the push."""

from __future__ import annotations

import json
import os

import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from components.atomic_pusher import executor as atomic_pusher
from components.serving_check import executor as serving_check
from serving import push, session_check, warmup

LABELS = ["Adelie", "Chinstrap", "Gentoo"]


class _Model(tf.Module):
    """Answers every example with the same prediction: fixed probabilities and label."""

    def __init__(self, probabilities: list[float], label: str) -> None:
        super().__init__()
        self.probabilities = tf.constant([probabilities])
        self.label = label

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def predict(self, examples):
        rows = tf.shape(examples)[0]
        probabilities = tf.tile(self.probabilities, [rows, 1])
        return {"probabilities": probabilities, "class_id": tf.argmax(probabilities, axis=1),
                "label": tf.fill([rows], self.label)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def transform(self, examples):
        return {"rows": tf.shape(examples)}


def saved_model(directory, probabilities=(0.7, 0.2, 0.1), label="Adelie", signatures=None) -> str:
    model = _Model(list(probabilities), label)
    signatures = signatures or {"serving_default": model.predict, "serving_raw": model.predict,
                                "transform_features": model.transform}
    tf.saved_model.save(model, str(directory), signatures=signatures)
    return str(directory)


@pytest.fixture
def warmup_file(tmp_path) -> str:
    path = str(tmp_path / "warmup" / warmup.WARMUP_FILE)
    warmup.write(path, warmup.prediction_logs([b"example-1", b"example-2"], "penguins"))
    return path


def test_a_sound_model_passes_with_latencies(tmp_path, warmup_file) -> None:
    report = session_check.check(saved_model(tmp_path / "model"), warmup_file, LABELS)
    assert report["ok"], report["problems"]
    assert report["signatures"] == ["serving_default", "serving_raw", "transform_features"]
    assert 0 < report["p50_ms_b1"] <= report["p99_ms_b1"]
    assert 0 < report["p50_ms_b64"] <= report["p99_ms_b64"]


@pytest.mark.parametrize("probabilities, label, problem", [
    ((float("nan"), 0.5, 0.5), "Adelie", "not all finite"),
    ((0.5, 0.5, 0.5), "Adelie", "do not sum to 1"),
    ((0.7, 0.2, 0.1), "Emperor", "labels outside the label vocabulary: ['Emperor']"),
])
def test_bad_outputs_fail(tmp_path, warmup_file, probabilities, label, problem) -> None:
    report = session_check.check(saved_model(tmp_path / "model", probabilities, label), warmup_file, LABELS)
    assert not report["ok"]
    assert any(problem in p for p in report["problems"]), report["problems"]


def test_a_missing_signature_fails(tmp_path, warmup_file) -> None:
    model = _Model([1.0, 0.0, 0.0], "Adelie")
    directory = saved_model(tmp_path / "model", signatures={"serving_default": model.predict})
    report = session_check.check(directory, warmup_file, LABELS)
    assert not report["ok"]
    assert "signature 'serving_raw' is missing" in report["problems"]


def test_an_unloadable_model_fails_without_failing_the_run(tmp_path, warmup_file) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "saved_model.pb").write_bytes(b"not a graph")
    report = serving_check.run_check(str(tmp_path / "model"), warmup_file, _vocabulary(tmp_path))
    assert not report["ok"]
    assert report["problems"][0].startswith("the session-based loader failed")


def _vocabulary(tmp_path) -> str:
    path = tmp_path / "labels.txt"
    path.write_text("\n".join(LABELS) + "\n")
    return str(path)


def _artifact(cls, uri):
    artifact = cls()
    artifact.uri = str(uri)
    os.makedirs(artifact.uri, exist_ok=True)
    return artifact


def test_a_model_returning_nan_is_not_pushed(tmp_path, warmup_file) -> None:
    model = _artifact(standard_artifacts.Model, tmp_path / "model")
    saved_model(tmp_path / "model" / "Format-Serving", probabilities=(float("nan"),) * 3)
    infra_blessing = _artifact(standard_artifacts.InfraBlessing, tmp_path / "infra_blessing")
    report = serving_check.run_check(os.path.join(model.uri, "Format-Serving"), warmup_file, _vocabulary(tmp_path))
    serving_check.record(infra_blessing, report)
    assert infra_blessing.get_int_custom_property("blessed") == 0
    assert "not all finite" in json.loads(infra_blessing.get_string_custom_property("problems"))[0]
    assert os.path.exists(os.path.join(infra_blessing.uri, serving_check.NOT_BLESSED_FILE))

    model_blessing = _artifact(standard_artifacts.ModelBlessing, tmp_path / "model_blessing")
    model_blessing.set_int_custom_property("blessed", 1)  # the Evaluator was happy
    pushed = _artifact(standard_artifacts.PushedModel, tmp_path / "pushed_model")
    destination = {"filesystem": {"base_directory": str(tmp_path / "serving" / "penguins")}}
    atomic_pusher.Executor().Do(
        {"model": [model], "model_blessing": [model_blessing], "infra_blessing": [infra_blessing]},
        {"pushed_model": [pushed]},
        {"push_destination": json.dumps(destination), "custom_config": "null"},
    )
    assert pushed.get_int_custom_property("pushed") == 0
    assert push.versions(tmp_path / "serving" / "penguins") == []
