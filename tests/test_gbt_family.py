"""The gbt model family (TF-DF gradient-boosted trees): chosen by `--model` or a dataset
file's [model] table; trained on the Transform output, evaluated, checked, pushed and served
with the DNN's signatures. Real TFX and TF-DF; the pipeline runs are e2e."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from tensorflow_decision_forests.component.inspector.inspector import ColumnType
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from pipeline import datasets
from pipeline.cli import args as cli_args
from pipeline.cli.main import build_parser
from pipeline.errors import ConfigError
from pipeline.scoring.inputs import row_schema
from serving import forest_ops
from serving.client import ServingClient
from tests import REPO
from tests.conftest import cli, turbotfx
from tests.doubles.tf_serving import FakeTfServing
from tests.test_training_config import penguins_with_training
from trainer_module import features, gbt, signatures
from trainer_module.config import TrainingConfig
from trainer_module.features import Categorical, FeatureSpec

PENGUINS = datasets.load("penguins")
SPEC = PENGUINS.feature_spec()


# --- choosing the family ---------------------------------------------------------------

def penguins_with_model(tmp_path: Path, lines: str) -> Path:
    dataset_file = penguins_with_training(tmp_path, "")
    dataset_file.write_text(dataset_file.read_text() + f"\n[model]\n{lines}\n")
    return dataset_file


def test_a_dataset_files_model_table_chooses_the_family_and_its_knobs(tmp_path):
    dataset = datasets.load(str(penguins_with_model(tmp_path, 'family = "gbt"\nnum_trees = 50\nshrinkage = 0.2')))
    assert dataset.training.model_family == "gbt"
    assert (dataset.training.gbt_num_trees, dataset.training.gbt_shrinkage) == (50, 0.2)
    assert dataset.training.gbt_max_depth == TrainingConfig().gbt_max_depth
    assert datasets.load("penguins").training.model_family == "dnn"


def test_the_training_table_may_name_the_family_too(tmp_path):
    assert datasets.load(str(penguins_with_training(tmp_path, 'model_family = "gbt"'))).training.model_family == "gbt"


@pytest.mark.parametrize("lines, message", [
    ('family = "xgboost"', "model.family: 'xgboost' is not one of dnn, gbt; choose one of: dnn, gbt"),
    ('kind = "gbt"', "model.kind: unknown key"),
    ("num_trees = 2.5", "model.num_trees: 2.5 is not a whole number"),
])
def test_a_wrong_model_table_is_one_line_naming_the_key(tmp_path, lines, message):
    with pytest.raises(ConfigError) as raised:
        datasets.load(str(penguins_with_model(tmp_path, lines)))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_a_knob_in_both_tables_is_refused(tmp_path):
    dataset_file = penguins_with_training(tmp_path, 'model_family = "dnn"')
    dataset_file.write_text(dataset_file.read_text() + '\n[model]\nfamily = "gbt"\n')
    with pytest.raises(ConfigError, match="model.family: set in \\[training\\] too"):
        datasets.load(str(dataset_file))


def test_the_model_flag_wins_over_the_dataset_file(tmp_path):
    dataset_file = str(penguins_with_model(tmp_path, 'family = "gbt"'))
    home = str(tmp_path / "ws")
    from_file = cli_args.config_from_args(build_parser().parse_args(["run", "--home", home, "--dataset", dataset_file]))
    assert from_file.training.model_family == "gbt"
    flagged = cli_args.config_from_args(build_parser().parse_args(
        ["run", "--home", home, "--dataset", dataset_file, "--model", "dnn", "--gbt-num-trees", "7"]))
    assert (flagged.training.model_family, flagged.training.gbt_num_trees) == ("dnn", 7)
    assert flagged.training.to_config()["model_family"] == "dnn"  # the Trainer's custom_config, so MLMD


def test_an_unknown_model_flag_names_the_choices(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--model", "xgboost"])
    assert "invalid choice: 'xgboost' (choose from 'dnn', 'gbt')" in capsys.readouterr().err


def test_a_gbt_knob_out_of_range_is_refused():
    with pytest.raises(ValueError, match="gbt shrinkage must be in"):
        TrainingConfig(gbt_shrinkage=0).validate()


# --- the model, in process --------------------------------------------------------------

def test_a_binary_forest_answers_the_probability_of_class_id_1_and_splits_ids_as_categories():
    rng = np.random.default_rng(0)
    rows = 600
    numbers = rng.normal(size=rows).astype("float32")
    ids = rng.integers(0, 5, rows)
    # Class 1 when the number is high or the id is 3: a category, not an order.
    labels = ((numbers > 0.5) | (ids == 3)).astype("int64")
    spec = FeatureSpec("toy", features.BINARY, "y", ("x",), (Categorical("c"),))
    inputs = {"x_xf": numbers, "c_xf": ids}
    forest = gbt.build(spec, TrainingConfig(gbt_num_trees=50), "auc")
    forest.fit(tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(100), verbose=0)
    probability = forest.predict(inputs, verbose=0)
    assert probability.shape == (rows, 1)
    assert probability[labels == 1].mean() > 0.8 and probability[labels == 0].mean() < 0.2
    semantics = {f.name: ColumnType.Name(f.type) for f in forest.make_inspector().features()}
    assert semantics == {"c_xf": "CATEGORICAL", "x_xf": "NUMERICAL"}
    assert set(forest.evaluate(tf.data.Dataset.from_tensor_slices((inputs, labels)).batch(100), verbose=0,
                               return_dict=True)) >= {"accuracy", "auc"}
    assert gbt.Forest(forest, gbt.input_names(spec)).input_names == ("x_xf", "c_xf")


def test_only_a_saved_model_with_forest_ops_needs_them(tmp_path):
    module = tf.Module()
    module.double = tf.function(lambda x: 2 * x, input_signature=[tf.TensorSpec([None], tf.float32)])
    tf.saved_model.save(module, str(tmp_path))
    assert not forest_ops.uses_forest_ops(str(tmp_path))
    assert not forest_ops.uses_forest_ops(str(tmp_path / "missing"))


# --- whole pipelines ---------------------------------------------------------------------

def pushed_dir(output: str) -> Path:
    [pushed] = [line.split("pushed: ", 1)[1] for line in output.splitlines() if line.startswith("pushed: /")]
    return Path(pushed)


def direct(model_dir: Path, spec: FeatureSpec, examples: list[bytes]) -> np.ndarray:
    """The TF-DF Keras model in the SavedModel called on transform_features' output: what
    the signatures must answer, without them."""
    loaded = forest_ops.load(str(model_dir))
    transformed = loaded.signatures[signatures.TRANSFORM_FEATURES](examples=tf.constant(examples))
    return loaded.model.forest({name: transformed[name] for name in gbt.input_names(spec)}).numpy()


def penguin_example(row: dict[str, str]) -> bytes:
    """A CSV row as ExampleGen writes it: present cells only, the label kept."""
    feature = {}
    for key, value in row.items():
        if value == "":
            continue
        if key in SPEC.numeric_keys:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(value)]))
        else:
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[value.encode()]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.fixture(scope="module")
def penguins_gbt(tmp_path_factory):
    home = tmp_path_factory.mktemp("gbt-penguins")
    result = cli("run", "--model", "gbt", home=home)
    assert result.exit_code == 0, result.output
    with open(result.config.data_path / "penguins.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    # Every species, and a row missing its sex.
    picked = [r for species in ("Adelie", "Chinstrap", "Gentoo")
              for r in [r for r in rows if r["species"] == species and all(r.values())][:4]]
    picked.append(next(r for r in rows if not r["sex"] and r["bill_length_mm"]))
    return result, pushed_dir(result.output), picked


@pytest.mark.e2e
def test_gbt_on_penguins_is_trained_evaluated_checked_and_pushed(penguins_gbt):
    result, model_dir, _ = penguins_gbt
    for line in ("Trainer                          COMPLETE", "Evaluator                        COMPLETE",
                 "blessed: yes", "serving check: passed", "this model (gbt)"):
        assert line in result.output, result.output
    assert forest_ops.uses_forest_ops(str(model_dir))
    lineage = json.loads(turbotfx("lineage", "--latest", "--format", "json", home=result.home).stdout)
    hyperparameters, report = lineage["trainer"]["hyperparameters"], lineage["trainer"]["training_report"]
    assert (hyperparameters["model_family"], hyperparameters["gbt_num_trees"]) == ("gbt", 300)
    assert report["model_family"] == "gbt" and 1 <= report["gbt_trees"] <= 300
    assert report["train_metric"] >= report["eval_metric"] > report["trivial_metric"]
    assert "epochs" not in report  # the DNN's knobs are not the gbt model's
    text = turbotfx("lineage", "--latest", home=result.home).output
    assert "hyperparameters: model_family=gbt" in text and "gbt_trees=" in text


@pytest.mark.e2e
def test_gbt_serves_through_both_signatures_as_the_forest_answers(penguins_gbt):
    result, model_dir, rows = penguins_gbt
    expected = direct(model_dir, SPEC, [penguin_example(row) for row in rows])
    assert expected.shape == (len(rows), 3)
    with FakeTfServing("penguins", {1: str(model_dir)}) as server:
        client_rows = [{key: (float(value) if key in SPEC.numeric_keys else value) if value else None
                        for key, value in row.items()} for row in rows]
        predictions = ServingClient(grpc_target=server.grpc_target, schema=row_schema(PENGUINS)).predict(client_rows)
        np.testing.assert_allclose([p.probabilities for p in predictions], expected, atol=1e-6)
        assert [p.label for p in predictions] == [row["species"] for row in rows]

        request = predict_pb2.PredictRequest()
        request.model_spec.name, request.model_spec.signature_name = "penguins", signatures.SERVING_RAW
        for key in SPEC.numeric_keys:
            values = np.array([float(row[key]) if row[key] else np.nan for row in rows], np.float32)
            request.inputs[features.identifier(key)].CopyFrom(tf.make_tensor_proto(values))
        for key in SPEC.categorical_keys:
            request.inputs[features.identifier(key)].CopyFrom(tf.make_tensor_proto([row[key] for row in rows]))
        import grpc

        with grpc.insecure_channel(server.grpc_target) as channel:
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=30)
        raw = tf.make_ndarray(response.outputs[signatures.OUTPUT_PROBABILITIES])
        np.testing.assert_allclose(raw, expected, atol=1e-6)


LOAD_IN_A_FRESH_PROCESS = """
import sys
loader, model_dir = sys.argv[1:]
if loader == "tfma":
    import tensorflow_model_analysis as tfma
    eval_config = tfma.EvalConfig(model_specs=[tfma.ModelSpec(name="candidate", label_key="species")])
    model = tfma.default_eval_shared_model(eval_saved_model_path=model_dir, model_name="candidate",
                                           eval_config=eval_config).model_loader.construct_fn()
elif loader == "forest_ops":
    from serving import forest_ops
    model = forest_ops.load(model_dir)
else:
    import tensorflow as tf
    model = tf.saved_model.load(model_dir)
print(sorted(model.signatures))
"""


@pytest.mark.e2e
@pytest.mark.parametrize("loader, loads", [("forest_ops", True), ("tfma", True), ("tensorflow", False)])
def test_a_fresh_process_loads_a_gbt_model_only_with_the_forest_ops(penguins_gbt, loader, loads):
    # A fresh process, as the serving check's loader or a Beam worker of the Evaluator
    # (multi_process) is: TF-DF not imported before. TFMA imports it itself.
    _, model_dir, _ = penguins_gbt
    done = subprocess.run([sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS, loader, str(model_dir)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    if loads:
        assert done.returncode == 0, done.stderr
        assert "'serving_default'" in done.stdout.splitlines()[-1]
    else:
        assert done.returncode != 0 and "Op type not registered 'SimpleML" in done.stderr


def houses(rows: int, seed: int = 0) -> pd.DataFrame:
    """Prices that follow a known rule, with a category that matters."""
    rng = np.random.default_rng(seed)
    area = rng.uniform(40, 200, rows).round(1)
    rooms = rng.integers(1, 6, rows)
    district = rng.choice(["north", "south", "east"], rows)
    price = 3 * area + 20 * rooms + np.where(district == "south", 150, 0) + rng.normal(0, 10, rows)
    return pd.DataFrame({"area": area, "rooms": rooms, "district": district, "price": price.round(2)})


def house_example(row: dict) -> bytes:
    """A row as ExampleGen writes it (integers int64, decimals float, text bytes), label kept."""
    feature = {
        "area": tf.train.Feature(float_list=tf.train.FloatList(value=[row["area"]])),
        "rooms": tf.train.Feature(int64_list=tf.train.Int64List(value=[row["rooms"]])),
        "district": tf.train.Feature(bytes_list=tf.train.BytesList(value=[row["district"].encode()])),
        "price": tf.train.Feature(float_list=tf.train.FloatList(value=[row["price"]])),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


@pytest.mark.e2e
def test_gbt_regression_from_the_dataset_files_model_table(tmp_path):
    frame = houses(400)
    data_root = tmp_path / "data"
    data_root.mkdir()
    frame.to_csv(data_root / "houses.csv", index=False)
    home, dataset_file = tmp_path / "ws", tmp_path / "houses.toml"
    init = cli("init", "--data-root", str(data_root), "--label", "price", "--output", str(dataset_file),
               home=home)
    assert init.exit_code == 0, init.output
    dataset_file.write_text(dataset_file.read_text() + '\n[model]\nfamily = "gbt"\n')
    run = cli("run", "--dataset", str(dataset_file), home=home)
    assert run.exit_code == 0 and "blessed: yes" in run.output and "this model (gbt)" in run.output, run.output
    model_dir = pushed_dir(run.output)
    dataset = datasets.load(str(dataset_file))
    spec = dataset.feature_spec()
    assert spec.task == features.REGRESSION
    schema = row_schema(dataset)
    rows = frame.head(20).to_dict("records")
    expected = direct(model_dir, spec, [house_example(row) for row in rows])
    assert expected.shape == (20, 1)
    # Trees on 400 rows: within a few units of a rule with noise 10 and a spread of ~150.
    assert np.sqrt(np.mean((expected[:, 0] - frame["price"].head(20)) ** 2)) < 40
    with FakeTfServing(dataset.name, {1: str(model_dir)}) as server:
        predictions = ServingClient(grpc_target=server.grpc_target, schema=schema,
                                     model_name=dataset.name).predict(rows)
    np.testing.assert_allclose([p.value for p in predictions], expected[:, 0], rtol=1e-6)
