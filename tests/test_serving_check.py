"""The serving check on real SavedModels: a sound one passes with latencies, a broken one
(NaN outputs, missing signature, unloadable, crashing, hanging) fails, and a failed check
blocks the push. The loader process is either started ahead (a local run) or fresh (a
compiled pipeline's container): both paths are run, and neither leaves a process behind."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import tensorflow as tf
from tfx.types import standard_artifacts

from components.atomic_pusher import executor as atomic_pusher
from components.serving_check import executor as serving_check
from components.serving_check import loader_process
from serving import push, session_check, warmup
from tests import REPO

LABELS = ["Adelie", "Chinstrap", "Gentoo"]


class _Model(tf.Module):
    """Answers every example with the same prediction: fixed probabilities and label."""

    def __init__(self, probabilities: list[float], label: str) -> None:
        super().__init__()
        self.probabilities = tf.constant([probabilities])
        self.label = label

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def predict(self, examples):
        return self._answer(examples)

    def _answer(self, examples):
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
    model = saved_model(tmp_path / "model")
    started = time.perf_counter()
    report = session_check.check(model, warmup_file, LABELS)
    check_s = time.perf_counter() - started
    assert report["ok"], report["problems"]
    assert report["signatures"] == ["serving_default", "serving_raw", "transform_features"]
    _assert_plausible_latencies(report, model, check_s)


def _assert_plausible_latencies(report: dict, model_dir: str, check_s: float) -> None:
    """The reported milliseconds against the test's own clocks. Of the timed runs at a batch
    size, the slower half took at least its p50 and the slowest at least its p99, all within
    the check's wall time; and no median run is much faster than the fastest of the runs the
    test times itself on the same model."""
    timed_ms = 0.0
    for batch_size, runs in session_check.LATENCY_RUNS.items():
        p50, p99 = report[f"p50_ms_b{batch_size}"], report[f"p99_ms_b{batch_size}"]
        fastest_ms = _fastest_run_ms(model_dir, batch_size)
        assert p50 >= fastest_ms / 10, f"p50 at batch {batch_size}: {p50} ms, a run takes at least {fastest_ms:.4f} ms"
        timed_ms += (runs // 2 - 1) * p50 + p99
    assert timed_ms <= check_s * 1000, f"the reported latencies add up to {timed_ms:.1f} ms, the check took {check_s:.3f} s"


def _fastest_run_ms(model_dir: str, batch_size: int, runs: int = 50) -> float:
    """The fastest of `runs` timed answers to a batch, through the session-based loader."""
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], model_dir)
        signature = meta_graph.signature_def["serving_default"]
        feed = {signature.inputs["examples"].name: [b"example-1"] * batch_size}
        fetch = {key: tensor.name for key, tensor in signature.outputs.items()}
        session.run(fetch, feed)
        fastest = float("inf")
        for _ in range(runs):
            started = time.perf_counter()
            session.run(fetch, feed)
            fastest = min(fastest, time.perf_counter() - started)
    return fastest * 1000


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


def _problems_of(model: tf.Module, predict, directory, vocabulary: list[str] | None = LABELS) -> list[str]:
    """The check's problems with a model whose prediction signatures are `predict`; [] when it passes."""
    signatures = {"serving_default": predict, "serving_raw": predict, "transform_features": model.transform}
    tf.saved_model.save(model, str(directory), signatures=signatures)
    report = session_check.check(str(directory), _warmup(directory), vocabulary)
    assert report["ok"] == (not report["problems"]), report
    return report["problems"]


def _warmup(directory) -> str:
    path = os.path.join(f"{directory}-warmup", warmup.WARMUP_FILE)
    warmup.write(path, warmup.prediction_logs([b"example-1", b"example-2"], "penguins"))
    return path


class _Int32ClassIdModel(_Model):
    """Answers class_id as int32; TF Serving's clients read the int64 that tf.argmax gives."""

    def _answer(self, examples):
        answer = super()._answer(examples)
        return {**answer, "class_id": tf.cast(answer["class_id"], tf.int32)}


def test_a_class_id_of_the_wrong_dtype_fails(tmp_path) -> None:
    """Catches a dropped output dtype check: an int32 class_id would be blessed."""
    model = _Int32ClassIdModel([0.7, 0.2, 0.1], "Adelie")
    problems = _problems_of(model, model.predict, tmp_path / "model")
    assert any("'class_id'" in p and "int32" in p and "int64" in p for p in problems), problems


class _LeastProbableModel(_Model):
    """Answers the least probable class as class_id (argmin where argmax belongs)."""

    def _answer(self, examples):
        answer = super()._answer(examples)
        return {**answer, "class_id": tf.argmin(answer["probabilities"], axis=1)}


def test_a_class_id_that_is_not_the_most_probable_class_fails(tmp_path) -> None:
    """Catches a dropped class_id-vs-argmax check: class 2 answered where 0.7 makes class 0 the likeliest."""
    model = _LeastProbableModel([0.7, 0.2, 0.1], "Adelie")
    problems = _problems_of(model, model.predict, tmp_path / "model")
    assert any("class_id is not the most probable class" in p for p in problems), problems


class _RegressionModel(tf.Module):
    """A regression model answering 3.5 for every example, as a tensor of the given shape
    after the batch: () is TF Serving's [batch], (1,) the [batch, 1] a Keras Dense(1) gives."""

    def __init__(self, trailing: tuple[int, ...]) -> None:
        super().__init__()
        self.trailing = list(trailing)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def predict(self, examples):
        return {"prediction": tf.fill([tf.shape(examples)[0], *self.trailing], 3.5)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def transform(self, examples):
        return {"rows": tf.shape(examples)}


def test_a_regression_prediction_of_rank_one_passes(tmp_path) -> None:
    """The control for the rank test below: the same regression model, rank 1, is blessed."""
    model = _RegressionModel(())
    assert _problems_of(model, model.predict, tmp_path / "model", vocabulary=None) == []


def test_a_regression_prediction_of_the_wrong_rank_fails(tmp_path) -> None:
    """Catches a dropped output rank check: a [batch, 1] prediction (Keras' Dense(1)) would be blessed."""
    model = _RegressionModel((1,))
    problems = _problems_of(model, model.predict, tmp_path / "model", vocabulary=None)
    assert any("'prediction'" in p and "[-1, 1]" in p and "rank 1" in p for p in problems), problems


@pytest.mark.parametrize("spec", [
    tf.TensorSpec([None], tf.string, name="inputs"),  # another input name
    tf.TensorSpec([None], tf.float32, name="examples"),  # numbers, not serialized tf.Examples
    tf.TensorSpec([None, 1], tf.string, name="examples"),  # a column of examples, not a batch
    tf.TensorSpec(None, tf.string, name="examples"),  # any shape at all
], ids=["name", "dtype", "rank 2", "unknown rank"])
def test_a_serving_default_with_another_input_spec_fails(tmp_path, spec) -> None:
    """Catches a dropped input spec check: serving_default must take 'examples', a [-1] batch of strings."""
    model = _Model([0.7, 0.2, 0.1], "Adelie")
    problems = _problems_of(model, tf.function(model._answer, input_signature=[spec]), tmp_path / "model")
    assert any(p.startswith("serving_default must take 'examples'") for p in problems), problems


def test_an_unloadable_model_fails_without_failing_the_run(tmp_path, warmup_file) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "saved_model.pb").write_bytes(b"not a graph")
    report = serving_check.run_check(str(tmp_path / "model"), warmup_file, _vocabulary(tmp_path))
    assert not report["ok"]
    assert report["problems"][0].startswith("the session-based loader failed")


class _CrashingModel(_Model):
    """Kills its process (SIGABRT) on the first request, as a loader bug in TF's C++ would."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def predict(self, examples):
        with tf.control_dependencies([tf.raw_ops.Abort(error_msg="a crashing serving graph")]):
            return self._answer(tf.identity(examples))


class _HangingModel(_Model):
    """Never answers: a loop that does not end before its output."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def predict(self, examples):
        start = tf.cast(tf.size(examples), tf.int64)
        endless = tf.while_loop(lambda i: tf.not_equal(i, -1), lambda i: i + 1, [start])
        with tf.control_dependencies(endless):
            return self._answer(tf.identity(examples))


def _saved(model: _Model, directory) -> str:
    signatures = {"serving_default": model.predict, "serving_raw": model.predict,
                  "transform_features": model.transform}
    tf.saved_model.save(model, str(directory), signatures=signatures)
    return str(directory)


@pytest.fixture(params=["started ahead", "fresh"])
def loader(request, caplog):
    """The loader process a check runs in: started ahead (what the local runner does) and
    taken by the check, or none started ahead, so the check starts a fresh one."""
    caplog.set_level(logging.INFO)

    def logged() -> str:
        return "\n".join(record.getMessage() for record in caplog.get_records("call"))

    if request.param == "fresh":
        yield None
        assert "in a fresh loader process" in logged()
        return
    with loader_process.prestarted() as started:
        yield started
        assert "in the loader process started ahead" in logged()
        assert started.returncode is not None, "the check ran in another process than the one started ahead"
    assert _gone(started.pid, 0)


def test_a_sound_model_passes_in_a_loader_process(tmp_path, warmup_file, loader) -> None:
    model = saved_model(tmp_path / "model")
    started = time.perf_counter()
    report = serving_check.run_check(model, warmup_file, _vocabulary(tmp_path))
    check_s = time.perf_counter() - started
    assert report["ok"], report["problems"]
    assert report["signatures"] == ["serving_default", "serving_raw", "transform_features"]
    _assert_plausible_latencies(report, model, check_s)
    if loader is not None:
        assert loader.returncode == 0


def test_a_crashing_loader_is_a_failed_check(tmp_path, warmup_file, loader) -> None:
    model = _saved(_CrashingModel([0.7, 0.2, 0.1], "Adelie"), tmp_path / "model")
    report = serving_check.run_check(model, warmup_file, _vocabulary(tmp_path))
    assert not report["ok"]
    assert report["problems"][0].startswith(f"the session-based loader failed (exit {-signal.SIGABRT})")
    assert "a crashing serving graph" in report["problems"][0]


# Long enough for a fresh loader to import TF and load the model on a busy machine, so the
# check times out on the model's hang, not on the loading; short, since the test waits it out.
HANG_TIMEOUT_S = 6


def test_a_hanging_loader_is_a_failed_check_and_is_ended(tmp_path, warmup_file, loader) -> None:
    model = _saved(_HangingModel([0.7, 0.2, 0.1], "Adelie"), tmp_path / "model")
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    report = serving_check.run_check(model, warmup_file, _vocabulary(tmp_path), timeout_s=HANG_TIMEOUT_S)
    assert report == {"ok": False, "problems": [f"the model did not answer within {HANG_TIMEOUT_S} s"]}
    left = [c for c in psutil.Process().children(recursive=True)
            if c.pid not in before and c.status() != psutil.STATUS_ZOMBIE]
    assert left == [], "the hung loader was not ended"
    if loader is not None:
        assert loader.returncode == -signal.SIGKILL


def test_a_loader_that_died_before_the_check_is_replaced_by_a_fresh_one(tmp_path, warmup_file, caplog) -> None:
    caplog.set_level(logging.INFO)
    with loader_process.prestarted() as started:
        os.kill(started.pid, signal.SIGKILL)
        started._process.wait()
        report = serving_check.run_check(saved_model(tmp_path / "model"), warmup_file, _vocabulary(tmp_path))
    assert report["ok"], report["problems"]
    assert "in a fresh loader process" in caplog.text


def _gone(pid: int, timeout_s: float) -> bool:
    """Whether the process ended (a zombie counts: it runs no more) within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def test_an_unused_loader_ends_with_the_run_even_on_an_error() -> None:
    with pytest.raises(KeyboardInterrupt):
        with loader_process.prestarted() as started:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the run
    assert _gone(started.pid, 0)
    assert loader_process.take() is None


def test_an_unused_loader_ends_when_its_run_is_killed() -> None:
    """SIGKILL leaves no `finally`: the loader sees its run gone and exits by itself."""
    run = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from components.serving_check import loader_process; "
                               "print(loader_process.LoaderProcess().pid, flush=True); time.sleep(600)"],
        cwd=REPO, stdout=subprocess.PIPE, text=True)
    loader_pid = int(run.stdout.readline())
    time.sleep(1)  # inside its TensorFlow import, or already waiting
    run.kill()
    run.wait()
    assert _gone(loader_pid, 60), "the loader outlived its killed run"


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
