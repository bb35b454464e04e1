"""TrainingConfig: the one place a training knob is spelled, and everything derived from it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Iterator

import pytest

from pipeline import datasets
from pipeline.cli import args as cli_args
from pipeline.cli.main import build_parser
from pipeline.config import PipelineConfig
from trainer_module import config as training_config
from trainer_module.config import TrainingConfig, knob

# The knob entries of the Trainer's custom_config as create_pipeline wrote them by hand before
# TrainingConfig (penguins, no flags): runs recorded then and now must compare equal in MLMD.
BEFORE_TRAINING_CONFIG = {
    "epochs": 20,
    "batch_size": 32,
    "learning_rate": 0.01,
    "hidden_units": [32, 16],
    "strategy": "auto",
    "precision": "auto",
    "xla": "auto",
    "optimizer": "auto",
    "steps_per_execution": 32,
    "accumulation_steps": 1,
    "scale_learning_rate": False,
    "tensorboard_histogram_freq": 5,
    "profile_batches": "",
}
# Knobs added since, at their defaults: a run recorded before lacks them (diff shows them added).
ADDED_SINCE = {"model_family": "dnn", "gbt_num_trees": 300, "gbt_max_depth": 6, "gbt_shrinkage": 0.1,
               "validation_share": 0.1, "patience": 10, "weight_decay": 0.0001, "dropout": 0.3,
               "class_weight": "none", "linear": True, "numeric_encoding": "zscore", "bag_folds": 0,
               "dropout_max_rows": 100_000}
# Defaults changed since (issue 26's quality benchmark): epochs became a maximum that early
# stopping cuts short. The built-in penguins file keeps its own 20, and trains one model.
CHANGED_SINCE = {"epochs": 100}
PENGUINS_OWN = {"bag_folds": 1}


@pytest.mark.parametrize("emitted, expected", [
    (TrainingConfig().to_config(), BEFORE_TRAINING_CONFIG | ADDED_SINCE | CHANGED_SINCE),
    (PipelineConfig().training.to_config(), BEFORE_TRAINING_CONFIG | ADDED_SINCE | PENGUINS_OWN),
])
def test_to_config_emits_the_keys_and_json_types_of_before(emitted, expected):
    assert emitted == expected
    assert {key: type(value) for key, value in emitted.items()} == {
        key: type(value) for key, value in expected.items()}


@pytest.mark.parametrize("training", [
    TrainingConfig(),
    TrainingConfig(epochs=3, batch_size=64, learning_rate=0.5, hidden_units=(8,), strategy="mirrored",
                   precision="mixed_bfloat16", xla="on", optimizer="lazy_adam", steps_per_execution=4,
                   accumulation_steps=2, scale_learning_rate=True, tensorboard_histogram_freq=0,
                   profile_batches="2,4"),
])
def test_from_config_reads_back_what_to_config_wrote(training):
    # Through JSON, as custom_config reaches run_fn.
    assert TrainingConfig.from_config(json.loads(json.dumps(training.to_config()))) == training


def test_from_config_takes_defaults_and_ignores_other_entries():
    assert TrainingConfig.from_config({"features": {}, "epochs": 4.0}) == TrainingConfig(epochs=4)


# --- a knob added in one place ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class WithFrozenLayers(TrainingConfig):
    """A next knob (a frozen backbone, on the goal list), added the one way there is."""

    frozen_layers: int = knob(0, "hidden layers kept at their initial weights (default: {default})")


def penguins_with_training(tmp_path: Path, lines: str) -> Path:
    """The penguins dataset file with these [training] lines (in place of its own for a key)."""
    penguins = datasets.load("penguins")
    keys = {line.split("=")[0].strip() for line in lines.splitlines()}
    text = "\n".join(line for line in penguins.path.read_text().splitlines() if line.split("=")[0].strip() not in keys)
    dataset_file = tmp_path / "penguins.toml"
    dataset_file.write_text(text.replace('schema = "penguins.schema.pbtxt"', f'schema = "{penguins.schema}"').replace(
        "[training]", f"[training]\n{lines}"))
    return dataset_file


@pytest.fixture
def frozen_layers(monkeypatch, tmp_path) -> Iterator[Path]:
    """TrainingConfig with one more field, and a dataset file setting it in [training]. The
    built-in dataset files are cached per process: loaded while the field exists they would
    keep it, so the cache is emptied on the way in and out."""
    datasets._builtin.cache_clear()
    monkeypatch.setattr(training_config, "TrainingConfig", WithFrozenLayers)
    yield penguins_with_training(tmp_path, "frozen_layers = 1")
    monkeypatch.undo()
    datasets._builtin.cache_clear()


def trainer_custom_config(config: PipelineConfig) -> dict:
    from pipeline.pipeline import create_pipeline

    trainer = next(c for c in create_pipeline(config, data_root=config.home_path).components if c.id == "Trainer")
    raw = trainer.exec_properties["custom_config"]
    return json.loads(raw) if isinstance(raw, str) else raw  # TFX keeps it as JSON text


def test_a_knob_added_to_training_config_is_a_flag_a_dataset_key_and_a_custom_config_entry(frozen_layers, tmp_path):
    home = str(tmp_path / "ws")
    # A flag (its help: the next test).
    run = build_parser().parse_args(["run", "--home", home, "--dataset", str(frozen_layers), "--frozen-layers", "2"])
    flagged = cli_args.config_from_args(run)
    assert flagged.training.frozen_layers == 2  # the flag over the file
    # A [training] key of a dataset file.
    from_file = cli_args.config_from_args(build_parser().parse_args(["run", "--home", home, "--dataset",
                                                                       str(frozen_layers)]))
    assert datasets.load(str(frozen_layers)).training.frozen_layers == 1
    assert from_file.training.frozen_layers == 1
    # The Trainer's custom_config, and back in run_fn.
    custom_config = trainer_custom_config(flagged)
    assert custom_config["frozen_layers"] == 2
    assert WithFrozenLayers.from_config(custom_config).frozen_layers == 2


def test_the_added_flag_has_help_from_its_field(frozen_layers):
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    for command in ("run", "compile"):
        help_text = commands.choices[command].format_help()
        assert "--frozen-layers FROZEN_LAYERS" in help_text
        assert "hidden layers kept at their initial weights (default: 0)" in " ".join(help_text.split())


def test_a_wrong_value_of_the_added_knob_in_a_dataset_file_names_the_key(frozen_layers):
    frozen_layers.write_text(frozen_layers.read_text().replace("frozen_layers = 1", 'frozen_layers = "one"'))
    with pytest.raises(Exception, match="training.frozen_layers: 'one' is not a whole number"):
        datasets.load(str(frozen_layers))


def test_the_added_knob_reaches_mlmd_as_the_trainer_records_it(frozen_layers, tmp_path):
    """The closest cheap thing to a run: the pipeline compiled to TFX's IR (what
    LocalDagRunner runs), the Trainer's parameters put into an MLMD store by TFX's own
    execution_lib (what its launcher records), read back by `lineage`."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd_pb
    from tfx.dsl.compiler import compiler
    from tfx.orchestration import metadata
    from tfx.orchestration.portable.mlmd import execution_lib

    from pipeline.pipeline import create_pipeline
    from pipeline.provenance import lineage

    config = PipelineConfig(home=str(tmp_path / "ws"), dataset=str(frozen_layers), knobs={"frozen_layers": 3})
    ir = compiler.Compiler().compile(create_pipeline(config, data_root=config.home_path))
    trainer = next(node.pipeline_node for node in ir.nodes if node.pipeline_node.node_info.id == "Trainer")
    exec_properties = {name: getattr(value.field_value, value.field_value.WhichOneof("value"))
                       for name, value in trainer.parameters.parameters.items()}
    connection = mlmd_pb.ConnectionConfig()
    connection.sqlite.filename_uri = str(tmp_path / "mlmd.sqlite")
    with metadata.Metadata(connection) as handle:
        execution = execution_lib.prepare_execution(
            handle, mlmd_pb.ExecutionType(name="Trainer"), mlmd_pb.Execution.COMPLETE, exec_properties)
        [execution_id] = handle.store.put_executions([execution])
        [stored] = handle.store.get_executions_by_id([execution_id])
    recorded = lineage.hyperparameters(stored)
    assert recorded["frozen_layers"] == 3
    assert {key: recorded[key] for key in BEFORE_TRAINING_CONFIG} == BEFORE_TRAINING_CONFIG


def test_every_knob_is_a_dataset_key_and_a_flag_wins_over_it(tmp_path):
    dataset_file = penguins_with_training(tmp_path, 'strategy = "mirrored"\nscale_learning_rate = true\n'
                                                    'learning_rate = 1')
    home = str(tmp_path / "ws")
    from_file = cli_args.config_from_args(build_parser().parse_args(["run", "--home", home, "--dataset",
                                                                       str(dataset_file)]))
    # penguins' file sets epochs = 20 and bag_folds = 1 beside the knobs added here.
    assert from_file.training == TrainingConfig(epochs=20, bag_folds=1, strategy="mirrored", scale_learning_rate=True,
                                                learning_rate=1.0)
    assert isinstance(from_file.training.learning_rate, float)
    flagged = cli_args.config_from_args(build_parser().parse_args([
        "run", "--home", home, "--dataset", str(dataset_file), "--strategy", "default", "--learning-rate", "0.1"]))
    assert (flagged.training.strategy, flagged.training.learning_rate) == ("default", 0.1)
    assert flagged.training.scale_learning_rate  # no flag given: the file's stands
    unset = cli_args.config_from_args(build_parser().parse_args([
        "run", "--home", home, "--dataset", str(dataset_file), "--no-scale-learning-rate", "--no-linear"]))
    assert (unset.training.scale_learning_rate, unset.training.linear) == (False, False)


@pytest.mark.parametrize("line, message", [
    ('strategy = "magic"', "training.strategy: 'magic' is not one of auto, default"),
    ("scale_learning_rate = 1", "training.scale_learning_rate: 1 is not true or false"),
    ("hidden_units = [8, 2.5]", "training.hidden_units: [8, 2.5] is not a list of whole numbers"),
])
def test_a_wrong_knob_in_a_dataset_file_names_the_key(tmp_path, line, message):
    with pytest.raises(Exception, match=message.replace("[", r"\[").replace("]", r"\]")):
        datasets.load(str(penguins_with_training(tmp_path, line)))


def test_the_runtime_parameter_is_a_training_knob():
    # A compiled pipeline's `epochs` runtime parameter lands in custom_config under this name,
    # where run_fn's from_config reads the field.
    assert training_config.RUNTIME_KNOB in {field.name for field in dataclasses.fields(training_config.TrainingConfig)}
