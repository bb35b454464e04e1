"""Each trainer flag, through the real TFX Trainer executor, changes the report and MLMD.

One subprocess (the CPU split into 2 logical devices before TF starts, so `mirrored` has two
replicas) runs components.reporting_trainer's Executor once per case on the first run's
Transform outputs, puts each Model artifact into a fresh SQLite MLMD store, reads it back
and prints one JSON line per case: the training report, the MLMD training_* properties and
what the run left on disk (TensorBoard events, profile files, the exported signatures).
Expected values come from the flags set here, from counting the transformed records and
from the files TF wrote, not from the report itself.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from pipeline import datasets

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PER_REPLICA_BATCH = 32
LEARNING_RATE = 0.02
LOGICAL_CPUS = 2
# Small and short: the tests check what each flag changes, not model quality.
COMMON_CONFIG = {"epochs": 1, "batch_size": PER_REPLICA_BATCH, "learning_rate": LEARNING_RATE,
                 "hidden_units": [8], "steps_per_execution": 32}
BASELINE_FLAGS = {"strategy": "default", "precision": "float32", "xla": "off", "optimizer": "adam",
                  "accumulation_steps": 1, "scale_learning_rate": False, "tensorboard_histogram_freq": 0,
                  "profile_batches": "",
                  # Every case trains one model on the whole train split, so its steps count from
                  # the records.
                  "validation_share": 0.0, "bag_folds": 1}
PLAIN = datasets.load("penguins").feature_spec()
# An embedding_dim forces an embedding for island (penguins' vocabularies are one-hot sized).
EMBEDDED = dataclasses.replace(PLAIN, categoricals=tuple(
    dataclasses.replace(c, embedding_dim=4) if c.key == "island" else c for c in PLAIN.categoricals))
# Each case: BASELINE_FLAGS with these overrides.
CASES: dict[str, dict[str, Any]] = {
    "baseline": {},
    "mirrored": {"strategy": "mirrored"},
    "bfloat16": {"precision": "mixed_bfloat16"},
    "xla": {"xla": "on"},
    "lazy_adam": {"optimizer": "lazy_adam"},
    # Accumulation with the Adagrad-for-embeddings optimizer: sparse gradients through both.
    "accumulation": {"accumulation_steps": 2, "optimizer": "adagrad_adam"},
    "scaled": {"strategy": "mirrored", "scale_learning_rate": True},
    # Both write TensorBoard files only; one case keeps the suite short.
    "observability": {"tensorboard_histogram_freq": 1, "profile_batches": "1,2"},
    "auto_embedded": {"optimizer": "auto", "features": EMBEDDED.to_config()},
    "auto_one_hot": {"optimizer": "auto"},
    # A quarter of the train split held out: fewer training steps, and early stopping's report.
    "validation_slice": {"validation_share": 0.25},
    # Three models, each stopping on its own third of the train split; their average is served.
    "bagged": {"bag_folds": 3},
}
# Cases run_fn must refuse before training, with one line naming the cause and the fix:
# accumulation needs whole batches, and penguins' training split is smaller than this one.
TOO_LARGE_BATCH = 512
FAILING_CASES: dict[str, dict[str, Any]] = {
    "batch_larger_than_the_split": {"accumulation_steps": 2, "batch_size": TOO_LARGE_BATCH},
}
# Cases whose exported SavedModel is loaded and called (loading costs seconds each).
SERVING_CASES = ("baseline", "bfloat16", "bagged")
# (case, report key, the value the flag sets or resolves to, the case it must differ from).
FLAG_EFFECTS = [
    ("mirrored", "strategy", "mirrored", "baseline"),
    ("mirrored", "replicas", LOGICAL_CPUS, "baseline"),
    ("mirrored", "global_batch_size", LOGICAL_CPUS * PER_REPLICA_BATCH, "baseline"),
    ("bfloat16", "precision", "mixed_bfloat16", "baseline"),
    ("xla", "xla", True, "baseline"),
    ("lazy_adam", "optimizer", "lazy_adam", "baseline"),
    ("accumulation", "optimizer", "adagrad_adam", "baseline"),
    ("accumulation", "accumulation_steps", 2, "baseline"),
    ("scaled", "scale_learning_rate", True, "mirrored"),
    ("scaled", "effective_learning_rate", LOGICAL_CPUS * LEARNING_RATE, "mirrored"),
    ("observability", "tensorboard_histogram_freq", 1, "baseline"),
    ("observability", "profile_batches", "1,2", "baseline"),
    ("auto_embedded", "optimizer", "lazy_adam", "auto_one_hot"),
    ("auto_one_hot", "optimizer", "adam", "auto_embedded"),
]
# The name scope each optimizer's update ops get in the training graph (its Keras name).
OPTIMIZER_SCOPES = {"adam": "Adam", "lazy_adam": "LazyAdam", "adagrad_adam": "AdagradAdam"}
RAW_PENGUINS = {"island": ["Dream", "Biscoe"], "sex": ["male", ""], "bill_length_mm": [39.0, 47.0],
                "bill_depth_mm": [18.0, 15.0], "flipper_length_mm": [190.0, 220.0],
                "body_mass_g": [3700.0, 5000.0]}

SCRIPT = textwrap.dedent(
    r'''
    import json, os, sys
    import tensorflow as tf

    # Before anything initializes TF's devices: two logical CPUs give `mirrored` two replicas.
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2
    from tensorflow.core.framework import graph_pb2, types_pb2
    from tfx.proto import trainer_pb2
    from tfx.types import artifact_utils, standard_artifacts
    from tfx.utils import path_utils, proto_utils

    from components.reporting_trainer.executor import Executor
    from components.reporting_trainer.keys import TRAINING_PREFIX
    from pipeline.provenance.graph import prefixed_properties

    args = json.loads(sys.argv[1])
    out = args["out"]


    def artifact(kind, uri):
        made = kind()
        made.uri = uri
        return made


    def count_records(split_dir):
        files = tf.io.gfile.glob(os.path.join(split_dir, "*"))
        return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP"))


    def events(root):
        for directory, _, names in os.walk(root):
            for name in names:
                if ".tfevents." in name:
                    yield from tf.compat.v1.train.summary_iterator(os.path.join(directory, name))


    def tensorboard_facts(model_run_dir):
        """What the TensorBoard callback wrote: histogram tags, the Keras model summary,
        and the training step's graph (name scopes, XLA-compiled functions, bfloat16 ops)."""
        histograms, keras_model, scopes, xla_functions, bfloat16_nodes = set(), None, set(), [], 0
        for event in events(model_run_dir):
            if event.HasField("graph_def"):
                graph = graph_pb2.GraphDef.FromString(event.graph_def)
                nodes = list(graph.node) + [n for f in graph.library.function for n in f.node_def]
                scopes.update(part for n in nodes for part in n.name.split("/"))
                bfloat16_nodes += sum(1 for n in nodes if any(
                    v.type == types_pb2.DT_BFLOAT16 for v in n.attr.values()))
                xla_functions += [f.signature.name for f in graph.library.function
                                  if "_XlaMustCompile" in f.attr and f.attr["_XlaMustCompile"].b]
            for value in event.summary.value:
                plugin = value.metadata.plugin_data.plugin_name
                if plugin == "histograms" or value.HasField("histo"):
                    histograms.add(value.tag)
                if plugin == "graph_keras_model":
                    keras_model = json.loads(value.tensor.string_val[0])
        layers = (keras_model or {}).get("config", {}).get("layers", [])
        return {
            "histogram_tags": sorted(histograms),
            "keras_class": keras_model and keras_model["class_name"],
            "layer_policies": {layer["name"]: policy_name(layer["config"].get("dtype")) for layer in layers},
            "name_scopes": sorted(scopes),
            "xla_functions": xla_functions,
            "bfloat16_nodes": bfloat16_nodes,
        }


    def policy_name(dtype):
        return dtype["config"]["name"] if isinstance(dtype, dict) else dtype


    def profile_files(model_run_dir):
        return sorted(os.path.relpath(os.path.join(d, n), model_run_dir) for d, _, names in os.walk(model_run_dir)
                      if os.path.join("plugins", "profile") in d for n in names)


    def serving_facts(serving_dir):
        loaded = tf.saved_model.load(serving_dir)
        default = loaded.signatures["serving_default"]
        raw = loaded.signatures["serving_raw"](**{k: tf.constant(v) for k, v in args["raw_examples"].items()})
        return {
            "default_outputs": {k: v.dtype.name for k, v in default.structured_outputs.items()},
            "raw_probabilities_dtype": raw["probabilities"].dtype.name,
            "raw_probabilities": raw["probabilities"].numpy().tolist(),
        }


    def stored_report(model, store):
        """The Model artifact through MLMD and back, its training_* properties decoded."""
        model.mlmd_artifact.type_id = store.put_artifact_type(model.artifact_type)
        [artifact_id] = store.put_artifacts([model.mlmd_artifact])
        [back] = store.get_artifacts_by_id([artifact_id])
        return prefixed_properties(back, TRAINING_PREFIX)


    connection = metadata_store_pb2.ConnectionConfig()
    connection.sqlite.filename_uri = os.path.join(out, "metadata.sqlite")
    connection.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
    store = metadata_store.MetadataStore(connection)
    print(json.dumps({"setup": {
        "logical_cpus": len(tf.config.list_logical_devices("CPU")),
        "train_records": count_records(os.path.join(args["examples"], "Split-train")),
    }}), flush=True)
    for name, custom_config in args["cases"].items():
        examples = artifact(standard_artifacts.Examples, args["examples"])
        examples.split_names = artifact_utils.encode_split_names(["train", "eval"])
        model = artifact(standard_artifacts.Model, os.path.join(out, name, "model"))
        model_run = artifact(standard_artifacts.ModelRun, os.path.join(out, name, "model_run"))
        do = lambda: Executor().Do(
            {"examples": [examples],
             "transform_graph": [artifact(standard_artifacts.TransformGraph, args["transform_graph"])],
             "schema": [artifact(standard_artifacts.Schema, args["schema"])]},
            {"model": [model], "model_run": [model_run]},
            {"train_args": proto_utils.proto_to_json(trainer_pb2.TrainArgs()),
             "eval_args": proto_utils.proto_to_json(trainer_pb2.EvalArgs()),
             "custom_config": json.dumps(custom_config),
             "run_fn": "trainer_module.families.run_fn"},
        )
        if name in args["failing_cases"]:
            try:
                do()
            except Exception as err:  # the message the CLI would show
                print(json.dumps({"case": name, "error": str(err)}), flush=True)
            else:
                print(json.dumps({"case": name, "error": None}), flush=True)
            continue
        do()
        with open(os.path.join(model_run.uri, "training_report.json")) as handle:
            report = json.load(handle)
        serving_dir = path_utils.serving_model_dir(model.uri)
        print(json.dumps({
            "case": name, "report": report, "mlmd": stored_report(model, store),
            "tensorboard": tensorboard_facts(model_run.uri), "profile_files": profile_files(model_run.uri),
            "serving": serving_facts(serving_dir) if name in args["serving_cases"] else None,
        }), flush=True)
    '''
)


def single_dir(parent: Path) -> Path:
    [only] = sorted(parent.iterdir())
    return only


def script_args(pipeline_root: Path, out: Path) -> dict[str, Any]:
    """The subprocess's inputs: the first run's Transform outputs and curated schema, and
    each case's whole custom_config, as the pipeline passes it."""
    return {
        "examples": str(single_dir(pipeline_root / "Transform" / "transformed_examples")),
        "transform_graph": str(single_dir(pipeline_root / "Transform" / "transform_graph")),
        "schema": str(single_dir(pipeline_root / "ImportSchemaGen" / "schema")),
        "out": str(out),
        "cases": {name: {"features": PLAIN.to_config(), **COMMON_CONFIG, **BASELINE_FLAGS, **overrides}
                  for name, overrides in {**CASES, **FAILING_CASES}.items()},
        "serving_cases": list(SERVING_CASES),
        "failing_cases": list(FAILING_CASES),
        "raw_examples": RAW_PENGUINS,
    }


def run_cases(pipeline_root: Path, out: Path) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT, json.dumps(script_args(pipeline_root, out))],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={**os.environ, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    assert completed.returncode == 0, completed.stderr[-5000:]
    lines = [json.loads(line) for line in completed.stdout.splitlines() if line.startswith("{")]
    results = {line["case"]: line for line in lines if "case" in line}
    results["setup"] = next(line["setup"] for line in lines if "setup" in line)
    return results


@pytest.fixture(scope="module")
def cases(first_run, tmp_path_factory) -> dict[str, Any]:
    return run_cases(first_run.config.pipeline_root, tmp_path_factory.mktemp("trainer_flags"))


def steps(records: int, global_batch: int, drop_remainder: bool = False) -> int:
    return records // global_batch if drop_remainder else math.ceil(records / global_batch)


def test_every_case_ran_on_two_logical_cpus(cases):
    assert cases["setup"]["logical_cpus"] == LOGICAL_CPUS
    assert set(CASES) <= set(cases)


@pytest.mark.parametrize("name", list(CASES))
def test_mlmd_holds_the_whole_report(cases, name):
    report, stored = cases[name]["report"], cases[name]["mlmd"]
    assert set(stored) == set(report)
    for key, value in report.items():
        if isinstance(value, float):
            # MLMD's SQLite store keeps doubles to about 6 significant digits.
            assert stored[key] == pytest.approx(value, rel=1e-5), key
        else:
            assert stored[key] == value, key  # bools come back as 0/1 ints


@pytest.mark.parametrize("name", list(CASES))
def test_report_keeps_the_flags_set(cases, name):
    """The hyperparameters that are not resolved are reported as given."""
    config = {**COMMON_CONFIG, **BASELINE_FLAGS, **CASES[name]}
    for key in ("accumulation_steps", "scale_learning_rate", "tensorboard_histogram_freq", "profile_batches",
                "epochs", "batch_size", "learning_rate", "hidden_units", "steps_per_execution"):
        assert cases[name]["report"][key] == config[key], key
    assert cases[name]["mlmd"]["epochs"] == 1


@pytest.mark.parametrize(("name", "key", "expected", "contrast"), FLAG_EFFECTS,
                         ids=[f"{name}-{key}" for name, key, _, _ in FLAG_EFFECTS])
def test_flag_shows_in_report_and_mlmd(cases, name, key, expected, contrast):
    report, stored = cases[name]["report"], cases[name]["mlmd"]
    assert report[key] == (pytest.approx(expected) if isinstance(expected, float) else expected)
    assert stored[key] == (pytest.approx(report[key]) if isinstance(expected, float) else report[key])
    assert cases[contrast]["report"][key] != report[key]
    assert cases[contrast]["mlmd"][key] != stored[key]


def test_baseline_reports_what_it_set(cases):
    report = cases["baseline"]["report"]
    assert (report["strategy"], report["replicas"], report["precision"], report["xla"], report["optimizer"]) == (
        "default", 1, "float32", False, "adam")
    assert report["global_batch_size"] == PER_REPLICA_BATCH
    assert report["effective_learning_rate"] == pytest.approx(LEARNING_RATE)
    assert report["train_steps"] == steps(cases["setup"]["train_records"], PER_REPLICA_BATCH)


def test_the_validation_slice_leaves_fewer_training_rows_and_reports_the_best_epoch(cases):
    records = cases["setup"]["train_records"]
    report = cases["validation_slice"]["report"]
    # About three quarters of the rows train (a hash decides each row's side).
    assert steps(records // 2, PER_REPLICA_BATCH) <= report["train_steps"] < steps(records, PER_REPLICA_BATCH)
    assert (report["epochs_run"], report["best_epoch"], report["stopped_early"]) == (1, 1, False)
    assert "best_epoch" not in cases["baseline"]["report"]


def test_bagging_trains_a_model_per_fold_on_the_rest_and_serves_their_average(cases):
    records = cases["setup"]["train_records"]
    report = cases["bagged"]["report"]
    assert report["bag_folds"] == 3
    assert len(report["members"]) == 3
    for member in report["members"]:
        # Each trains on about two thirds of the rows (a hash decides each row's fold).
        assert steps(records // 2, PER_REPLICA_BATCH) <= member["train_steps"] < steps(records, PER_REPLICA_BATCH)
        assert (member["epochs_run"], member["best_epoch"]) == (1, 1)
    assert report["train_steps"] == sum(member["train_steps"] for member in report["members"])
    assert report["epochs_run"] == 3
    # The eval split is scored by the average, not by one member.
    assert report["eval_metric"] == pytest.approx(report["final_eval_accuracy"])
    assert len({member["eval_metric"] for member in report["members"]} | {report["eval_metric"]}) > 1
    assert cases["baseline"]["report"]["bag_folds"] == 1 and "members" not in cases["baseline"]["report"]


def test_a_small_train_split_trains_with_the_dropout_set(cases):
    # Penguins is far below dropout_max_rows: the knob's rate applies.
    assert cases["baseline"]["report"]["dropout_applied"] == cases["baseline"]["report"]["dropout"] > 0


def test_mirrored_trains_two_replicas_on_twice_the_batch(cases):
    records = cases["setup"]["train_records"]
    assert cases["mirrored"]["report"]["train_steps"] == steps(records, LOGICAL_CPUS * PER_REPLICA_BATCH)
    assert cases["baseline"]["report"]["train_steps"] == steps(records, PER_REPLICA_BATCH)
    # The step's graph holds a copy of the model per replica.
    assert "replica_1" in cases["mirrored"]["tensorboard"]["name_scopes"]
    assert "replica_1" not in cases["baseline"]["tensorboard"]["name_scopes"]


def test_scaled_learning_rate_grows_with_replicas(cases):
    assert cases["mirrored"]["report"]["effective_learning_rate"] == pytest.approx(LEARNING_RATE)
    assert cases["scaled"]["report"]["effective_learning_rate"] == pytest.approx(LOGICAL_CPUS * LEARNING_RATE)
    assert cases["scaled"]["mlmd"]["effective_learning_rate"] == pytest.approx(LOGICAL_CPUS * LEARNING_RATE)


def test_bfloat16_computes_in_bfloat16_and_serves_float32(cases):
    trained, baseline = cases["bfloat16"]["tensorboard"], cases["baseline"]["tensorboard"]
    assert trained["layer_policies"]["hidden_0"] == "mixed_bfloat16"
    assert baseline["layer_policies"]["hidden_0"] == "float32"
    assert trained["bfloat16_nodes"] > 0
    assert baseline["bfloat16_nodes"] == 0
    # The exported signatures are float32 whatever the training precision.
    for name in SERVING_CASES:
        serving = cases[name]["serving"]
        assert serving["default_outputs"]["probabilities"] == "float32", name
        assert serving["raw_probabilities_dtype"] == "float32", name
        assert len(serving["raw_probabilities"]) == len(RAW_PENGUINS["island"])
        for row in serving["raw_probabilities"]:
            assert sum(row) == pytest.approx(1.0, abs=1e-5)


def test_xla_compiles_the_step_on_equal_batches(cases):
    assert cases["xla"]["tensorboard"]["xla_functions"]
    assert not cases["baseline"]["tensorboard"]["xla_functions"]
    # XLA drops the last, partial batch so every step has one static shape.
    records = cases["setup"]["train_records"]
    assert cases["xla"]["report"]["train_steps"] == steps(records, PER_REPLICA_BATCH, drop_remainder=True)


@pytest.mark.parametrize("name", ["baseline", "lazy_adam", "accumulation", "auto_embedded", "auto_one_hot"])
def test_training_graph_uses_the_reported_optimizer(cases, name):
    scopes = set(cases[name]["tensorboard"]["name_scopes"])
    resolved = cases[name]["report"]["optimizer"]
    assert OPTIMIZER_SCOPES[resolved] in scopes
    assert not scopes & (set(OPTIMIZER_SCOPES.values()) - {OPTIMIZER_SCOPES[resolved]})


def test_auto_optimizer_follows_the_embedding(cases):
    assert "island_xf_embedding" in cases["auto_embedded"]["tensorboard"]["layer_policies"]
    assert "one_hots" in cases["auto_one_hot"]["tensorboard"]["layer_policies"]
    assert "island_xf_embedding" not in cases["auto_one_hot"]["tensorboard"]["layer_policies"]


def test_accumulation_trains_an_accumulating_model(cases):
    assert cases["accumulation"]["tensorboard"]["keras_class"] == "AccumulatingModel"
    assert cases["baseline"]["tensorboard"]["keras_class"] == "Functional"
    # Micro-batches split each batch: one optimizer step per batch, and only whole batches
    # (equal micro-batches), so the last, partial batch is left out.
    records = cases["setup"]["train_records"]
    assert cases["accumulation"]["report"]["train_steps"] == steps(records, PER_REPLICA_BATCH, drop_remainder=True)


def test_histograms_only_when_asked(cases):
    tags = cases["observability"]["tensorboard"]["histogram_tags"]
    assert any(tag.startswith("hidden_0/kernel") for tag in tags), tags
    assert not cases["baseline"]["tensorboard"]["histogram_tags"]


def test_profile_only_when_asked(cases):
    assert any(path.endswith(".xplane.pb") for path in cases["observability"]["profile_files"])
    assert not cases["baseline"]["profile_files"]



def test_a_training_split_smaller_than_one_whole_batch_is_one_line(cases):
    assert cases["setup"]["train_records"] < TOO_LARGE_BATCH
    error = cases["batch_larger_than_the_split"]["error"]
    assert error is not None and "\n" not in error
    assert f"fewer rows than one global batch ({TOO_LARGE_BATCH})" in error
    assert "--batch-size" in error
