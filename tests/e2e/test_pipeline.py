"""The whole pipeline on penguins, through the CLI: the shared first run, and reruns in
copies of its workspace."""

from __future__ import annotations

import glob
import json
import os
import re

import pytest
import tensorflow as tf
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from pipeline.cli.run import NOT_BLESSED_EXIT
from pipeline.provenance import summary as run_summary
from pipeline.runners import local
from serving import model_config, warmup
from tests.conftest import FAST_RUN_ARGS, cli, loader_processes, open_to_others, turbotfx

pytestmark = pytest.mark.e2e

NODES = {
    "CsvExampleGen",
    "StatisticsGen",
    "ImportSchemaGen",
    "ExampleValidator",
    "AnomalyGate",
    "Transform",
    "Trainer",
    "latest_blessed_model_resolver",
    "Evaluator",
    "ServingCheck",
    "Pusher",
}


def _store(config) -> metadata_store.MetadataStore:
    return metadata_store.MetadataStore(local.metadata_config(config))


def _versions(config) -> list:
    return sorted(p for p in config.serving_dir.iterdir() if p.is_dir()) if config.serving_dir.exists() else []


def test_first_run_pushes_a_numbered_version(first_run):
    versions = _versions(first_run.config)
    assert len(versions) == 1
    assert versions[0].name.isdigit()
    assert (versions[0] / "saved_model.pb").is_file()
    assert "blessed: yes" in first_run.output
    assert f"pushed: {versions[0]}" in first_run.output


def test_the_push_is_labelled_for_tf_serving(first_run):
    config = first_run.config
    [version] = _versions(config)
    status = model_config.status(config.serving_dir.parent, config.model_name)
    assert status.stable == status.canary == int(version.name)
    assert status.served == [int(version.name)]
    assert not [p for p in config.serving_dir.iterdir() if p.name.startswith(".")], "no staging left"
    result = turbotfx("serving", "status", "--format", "json", home=first_run.home)
    assert result.exit_code == 0, result.output
    [entry] = json.loads(result.stdout)["versions"]
    assert entry["version"] == int(version.name)
    assert isinstance(entry["model_id"], int) and entry["run_id"]


def test_the_serving_check_passed_and_its_warmup_requests_were_pushed(first_run):
    [version] = _versions(first_run.config)
    logs = list(warmup.read(str(version / warmup.IN_SAVED_MODEL)))
    assert [len(log.predict_log.request.inputs["examples"].string_val) for log in logs] == [1, 8, 64]
    assert logs[0].predict_log.request.model_spec.signature_name == "serving_default"
    assert "serving check: passed (" in first_run.output and "at batch 64" in first_run.output
    store = _store(first_run.config)
    [blessing] = store.get_artifacts_by_type("InfraBlessing")
    assert blessing.custom_properties["blessed"].int_value == 1
    assert blessing.custom_properties["p50_ms_b1"].double_value > 0
    assert json.loads(blessing.custom_properties["signatures"].string_value) == [
        "serving_default", "serving_raw", "transform_features"]


def test_the_serving_check_ran_in_the_process_started_ahead_and_none_is_left(first_run):
    log = first_run.config.log_path.read_text()
    assert "serving check: in the loader process started ahead" in log
    assert "fresh loader process" not in log
    assert loader_processes(first_run.home) == []


def test_first_run_records_one_complete_execution_per_component(first_run):
    store = _store(first_run.config)
    summary = run_summary.latest_run(store, first_run.config.pipeline_name)
    states = {c.node_id: c.state for c in summary.components}
    # The resolver is not an execution of its own in MLMD's run context.
    executed = NODES - {"latest_blessed_model_resolver"}
    assert executed <= set(states), states
    assert all(states[node] == "COMPLETE" for node in executed), states
    assert len(summary.components) == len(set(states)), "one execution per component"
    assert summary.metrics["sparse_categorical_accuracy"] >= 0.5
    assert {"island=Biscoe", "island=Dream", "island=Torgersen"} <= set(summary.slice_metrics)
    assert all(0 <= values["sparse_categorical_accuracy"] <= 1 for values in summary.slice_metrics.values())
    assert summary.serving_check["passed"] and summary.pushed_version and summary.blessed
    assert summary.status == "COMPLETE"


def test_summary_shows_every_component_and_the_metrics(first_run):
    for node in NODES - {"latest_blessed_model_resolver"}:
        assert node in first_run.output
    assert "sparse_categorical_accuracy" in first_run.output
    assert "per slice (sparse_categorical_accuracy):" in first_run.output
    assert re.search(r"^    island=Dream +[01]\.\d{4}$", first_run.output, re.MULTILINE)


def test_second_run_reuses_the_cache_and_compares_with_the_served_model(tmp_path):
    # A workspace of its own, run twice in place: the cache keys hold the workspace's paths
    # (data, schema copy), so a copy of the shared one would not hit the cache.
    home = tmp_path / "workspace"
    first = cli("run", *FAST_RUN_ARGS, home=home)
    assert first.exit_code == 0, first.output
    config = first.config
    first_model = _pushed_model_ids(config)
    # One more epoch: the data steps are reused, the Trainer makes a new candidate.
    result = cli("run", *FAST_RUN_ARGS, "--epochs", "6", home=home)
    assert result.exit_code == 0, result.output
    store = _store(config)
    summary = run_summary.latest_run(store, config.pipeline_name)
    states = {c.node_id: c.state for c in summary.components}
    for node in ("CsvExampleGen", "StatisticsGen", "Transform"):
        assert states[node] == "CACHED", states
    assert states["Trainer"] == "COMPLETE", states
    evaluator = _latest_execution(store, "Evaluator")
    baseline_ids = _input_artifact_ids(store, evaluator.id, "baseline_model")
    assert baseline_ids == first_model, "the Evaluator compared against the served (first) model"
    assert _input_artifact_ids(store, evaluator.id, "model") != first_model
    # The new push is the canary; the first version stays stable until promoted.
    first_version, second_version = [int(p.name) for p in _versions(config)]
    status = model_config.status(config.serving_dir.parent, config.model_name)
    assert (status.stable, status.canary) == (first_version, second_version)
    # The summary shows the change against the baseline as TFMA names it.
    assert "sparse_categorical_accuracy_diff" in result.output

    # The same flags again: the candidate is the model just pushed, which the baseline must
    # not be. Compared with the first model as before, the Evaluator's inputs are unchanged,
    # so it is cached and nothing new is pushed; compared with itself, it would run again.
    again = cli("run", *FAST_RUN_ARGS, "--epochs", "6", home=home)
    assert again.exit_code == 0, again.output
    states = {c.node_id: c.state for c in run_summary.latest_run(_store(config), config.pipeline_name).components}
    assert states["Trainer"] == "CACHED" and states["Evaluator"] == "CACHED", states
    assert [int(p.name) for p in _versions(config)] == [first_version, second_version]


def test_impossible_threshold_pushes_nothing_and_says_so(first_run_copy):
    config = first_run_copy.config
    before = _versions(config)
    # A barely trained model (one epoch at a negligible learning rate) cannot reach 99%.
    result = cli("run", "--epochs", "1", "--learning-rate", "1e-6", "--min-accuracy", "0.99",
                      home=first_run_copy.home)
    assert result.exit_code == NOT_BLESSED_EXIT, result.output
    assert "blessed: no" in result.output
    # Which bound failed, with the model's value (as `runs` recorded it) and the flag.
    [run] = [r for r in json.loads(turbotfx("runs", "--format", "json", home=first_run_copy.home).stdout)
             if r["blessed"] is False]
    assert f"accuracy {run['metric_value']:.4f} < bound 0.9900 (--blessing-threshold)" in result.output
    # --allow-unblessed: the same verdict, exit 0 for those who want it.
    allowed = cli("run", "--epochs", "1", "--learning-rate", "1e-6", "--min-accuracy", "0.99",
                       "--allow-unblessed", home=first_run_copy.home)
    assert allowed.exit_code == 0 and "blessed: no" in allowed.output, allowed.output
    assert "nothing was pushed" in result.output
    assert _versions(config) == before


def _latest_execution(store, node_id):
    context = store.get_context_by_type_and_name("node", f"turbotfx.{node_id}")
    return max(store.get_executions_by_context(context.id), key=lambda e: (e.create_time_since_epoch, e.id))


def _input_artifact_ids(store, execution_id, key):
    ids = []
    for event in store.get_events_by_execution_ids([execution_id]):
        if event.type == metadata_store_pb2.Event.INPUT and any(
            step.key == key for step in event.path.steps if step.HasField("key")
        ):
            ids.append(event.artifact_id)
    return sorted(ids)


def _pushed_model_ids(config):
    store = _store(config)
    pusher = _latest_execution(store, "Pusher")
    return _input_artifact_ids(store, pusher.id, "model")


def test_what_a_run_writes_is_its_owners_alone(first_run):
    # A process of its own, as a user runs it: TFX's, Beam's, MLMD's and TF's files too.
    assert list(first_run.home.rglob("*.sqlite")) and open_to_others(first_run.home) == []


def test_console_is_quiet_and_the_log_file_holds_the_library_output(first_run):
    for noise in ("INFO", "WARNING", "FutureWarning", "tensorflow"):
        assert noise not in first_run.output
    log = first_run.config.log_path.read_text()
    assert "INFO absl: Component Trainer is running." in log


def test_training_report_is_recorded_on_the_model_artifact(first_run):
    store = _store(first_run.config)
    context = store.get_context_by_type_and_name("node", "turbotfx.Trainer")
    trainer = min(store.get_executions_by_context(context.id), key=lambda e: e.id)
    outputs = [e.artifact_id for e in store.get_events_by_execution_ids([trainer.id])
               if e.type == metadata_store_pb2.Event.OUTPUT]
    models = [a for a in store.get_artifacts_by_id(outputs)
              if store.get_artifact_types_by_id([a.type_id])[0].name == "Model"]
    assert len(models) == 1
    props = models[0].custom_properties
    # What `auto` picks here, by the README's rules, from the devices as this test sees them:
    # several GPUs mirror, GPUs train in mixed_float16 (compute capability 7.0 and up, every
    # GPU this runs on), a CPU with native bfloat16 in mixed_bfloat16, else float32. Penguins
    # embeds categoricals: lazy Adam, so XLA stays off on GPUs too.
    gpus = len(tf.config.list_physical_devices("GPU"))
    with open("/proc/cpuinfo") as cpuinfo:
        flags = {flag for line in cpuinfo if line.startswith("flags") for flag in line.split(":", 1)[1].split()}
    cpu_bfloat16 = bool(flags & {"avx512_bf16", "amx_bf16"})
    replicas = max(gpus, 1)
    assert props["training_strategy"].string_value == ("mirrored" if gpus > 1 else "default")
    assert props["training_precision"].string_value == (
        "mixed_float16" if gpus else "mixed_bfloat16" if cpu_bfloat16 else "float32")
    assert props["training_replicas"].int_value == replicas
    assert props["training_xla"].int_value == 0
    assert props["training_global_batch_size"].int_value == 32 * replicas
    assert props["training_epochs"].int_value == 5
    assert props["training_fit_wall_s"].double_value > 0
    assert props["training_hidden_units"].string_value == "[32, 16]"
    steps = props["training_train_steps"].int_value
    assert steps > 0 and steps % 5 == 0, "the same number of steps in each of the 5 epochs"
    # Examples per second, checked against what the test counts itself: the rows of the
    # train split the Trainer read, and the Trainer's wall time as MLMD recorded it.
    train_rows = _split_rows(store, trainer.id, "examples", "train")
    assert train_rows > 200, "penguins: about four fifths (train:eval 4:1) of its 344 rows"
    # Each epoch reads the split's fit part (all but a hashed ~10% validation slice), in
    # global batches of which the last may be partial (or dropped): generous bounds on the
    # examples the 5 epochs trained on.
    batch = 32 * replicas
    fewest, most = 5 * (0.75 * train_rows - batch), 5 * (train_rows + batch)
    per_second = props["training_examples_per_second"].double_value
    fit_s = props["training_fit_wall_s"].double_value
    assert fewest <= per_second * fit_s <= most, (per_second, fit_s, train_rows)
    # fit() runs inside the Trainer's execution: its rate is at least the epochs' examples
    # over the whole execution's time.
    trainer_s = (trainer.last_update_time_since_epoch - trainer.create_time_since_epoch) / 1000
    assert 0 < fit_s <= trainer_s, (fit_s, trainer_s)
    assert per_second >= fewest / trainer_s, (per_second, fewest, trainer_s)


def _split_rows(store, execution_id: int, key: str, split: str) -> int:
    """The records in one split of the Examples artifact an execution read as input `key`."""
    [artifact_id] = _input_artifact_ids(store, execution_id, key)
    [examples] = store.get_artifacts_by_id([artifact_id])
    files = sorted(glob.glob(os.path.join(examples.uri, f"Split-{split}", "*")))
    assert files, f"no files in {examples.uri}/Split-{split}"
    compression = "GZIP" if all(f.endswith(".gz") for f in files) else ""
    return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type=compression))
