"""Flags to config: every flag of `run` reaches its PipelineConfig field, none is dropped."""

from __future__ import annotations

import dataclasses

import pytest

from pipeline import datasets
from pipeline.cli import args as cli_args
from pipeline.cli.main import build_parser
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.runners.beam_args import BeamOptions
from trainer_module.config import TrainingConfig
from trainer_module.search_space import TuningConfig

# Flags of `run` that set something other than one field of the same meaning.
# Flags that say where Beam runs: BeamOptions, not PipelineConfig.
BEAM_FLAGS = {"beam_runner", "spark_master", "spark_job_server_jar", "job_endpoint", "worker_pool", "beam_arg",
              "spark_driver_host"}
# Flags of how `run` reports, not what it runs.
OUTPUT_FLAGS = {"json", "allow_unblessed"}
SPECIAL = {"split", "no_cache", "verbose", "handler", "command"} | BEAM_FLAGS | OUTPUT_FLAGS


def subparser(name: str):
    commands = next(a for a in build_parser()._actions if a.dest == "command")
    return commands.choices[name]


def dests(parser) -> set[str]:
    return {action.dest for action in parser._actions if action.dest != "help"}


def test_every_flag_of_run_maps_to_a_config_field():
    fields = {f.name for f in dataclasses.fields(PipelineConfig)}
    run_flags = dests(subparser("run"))
    assert set(cli_args.FIELD_OF_FLAG) <= run_flags, "a flag in FIELD_OF_FLAG that `run` does not have"
    assert set(cli_args.FIELD_OF_FLAG.values()) <= fields
    knobs = {f.name for f in cli_args.training_flags()}
    assert knobs <= {f.name for f in dataclasses.fields(TrainingConfig)} and knobs <= run_flags
    tuning = set(cli_args.TUNING_FIELD_OF_FLAG)
    assert set(cli_args.TUNING_FIELD_OF_FLAG.values()) <= {f.name for f in dataclasses.fields(TuningConfig)}
    assert tuning <= run_flags
    assert run_flags - set(cli_args.FIELD_OF_FLAG) - knobs - tuning - {"handler"} <= SPECIAL


def test_tuning_flags_reach_the_config_over_the_dataset_files_table(tmp_path):
    dataset = tmp_path / "penguins.toml"
    builtin = datasets.resolve("penguins")
    dataset.write_text(builtin.read_text().replace('schema = "', f'schema = "{builtin.parent}/', 1)
                       + "\n[tuning]\ntrials = 7\nminutes = 3\nknobs = [\"dropout\", \"learning_rate\"]\n")
    from_file = cli_args.config_from_args(build_parser().parse_args(
        ["run", "--home", str(tmp_path), "--dataset", str(dataset)]))
    assert from_file.tuning == TuningConfig(trials=7, minutes=3, knobs=("dropout", "learning_rate"))
    args = build_parser().parse_args([
        "run", "--home", str(tmp_path), "--dataset", str(dataset), "--tune-trials", "4", "--tune-time", "2.5",
        "--tune-knobs", "batch_size,dropout", "--tune-storage", "mysql://tuner@127.0.0.1/studies",
        "--tune-study", "shared", "--tune-parallelism", "3"])
    assert cli_args.config_from_args(args).tuning == TuningConfig(
        trials=4, minutes=2.5, knobs=("batch_size", "dropout"), storage="mysql://tuner@127.0.0.1/studies",
        study="shared", parallelism=3)
    # 0 trials is a choice (train untuned, reuse nothing), not "unset".
    untuned = cli_args.config_from_args(build_parser().parse_args(
        ["run", "--home", str(tmp_path), "--tune-trials", "0"])).tuning
    assert untuned.trials == 0 and not untuned.tunes and not untuned.reuses
    assert PipelineConfig(home=str(tmp_path)).tuning.reuses


@pytest.mark.parametrize("flags, message", [
    (["--tune-knobs", "epochs"], "'epochs' is not a searched knob of the dnn family"),
    (["--model", "gbt", "--tune-knobs", "dropout"], "'dropout' is not a searched knob of the gbt family"),
    (["--tune-storage", "mysql://127.0.0.1/db"], "needs a user, a host and a database"),
])
def test_bad_tuning_settings_name_the_fix(tmp_path, flags, message):
    with pytest.raises(ConfigError, match=message):
        cli_args.config_from_args(build_parser().parse_args(["run", "--home", str(tmp_path), *flags]))


def test_run_beam_flags_reach_the_beam_options():
    args = build_parser().parse_args([
        "run", "--beam-runner", "spark", "--spark-master", "spark://127.0.0.1:7077", "--spark-job-server-jar",
        "/j.jar", "--job-endpoint", "127.0.0.1:8099", "--worker-pool", "127.0.0.1:50000",
        "--beam-arg=--max_bundle_size=5"])
    assert cli_args.beam_options_from_args(args) == BeamOptions(
        runner="spark", spark_master="spark://127.0.0.1:7077", spark_job_server_jar="/j.jar",
        job_endpoint="127.0.0.1:8099", worker_pool="127.0.0.1:50000", extra=("--max_bundle_size=5",))
    assert dests(subparser("run")) & BEAM_FLAGS == BEAM_FLAGS
    with pytest.raises(SystemExit):  # Dataflow runs compiled pipelines only
        build_parser().parse_args(["run", "--beam-runner", "dataflow"])


def test_run_flags_reach_the_config(tmp_path):
    args = build_parser().parse_args([
        "run", "--home", str(tmp_path), "--dataset", "synthetic", "--rows", "500", "--split", "3:2",
        "--epochs", "2", "--batch-size", "64", "--learning-rate", "0.5", "--min-accuracy", "0.4",
        "--max-accuracy-drop", "0.1", "--keep-versions", "2", "--strategy", "one_device",
        "--precision", "float32", "--xla", "off", "--steps-per-execution", "4", "--accumulation-steps", "2",
        "--scale-learning-rate", "--histogram-freq", "0", "--profile-batches", "2,4", "--beam-mode",
        "in_memory", "--metadata-url", "sqlite:///tmp/x.sqlite", "--no-cache", "--pipeline-name", "p",
        "--model-name", "m",
    ])
    config = cli_args.config_from_args(args)
    expected = PipelineConfig(
        home=str(tmp_path), dataset="synthetic", rows=500, train_buckets=3, eval_buckets=2,
        blessing_threshold=0.4, max_metric_drop=0.1, keep_versions=2, beam_mode="in_memory",
        metadata_url="sqlite:///tmp/x.sqlite", enable_cache=False, pipeline_name="p", model_name="m",
        knobs=dict(epochs=2, batch_size=64, learning_rate=0.5, strategy="one_device", precision="float32", xla="off",
                   steps_per_execution=4, accumulation_steps=2, scale_learning_rate=True,
                   tensorboard_histogram_freq=0, profile_batches="2,4"))
    assert config == expected
    # The file's hidden_units stand: they have no flag.
    assert config.training == TrainingConfig(
        epochs=2, batch_size=64, learning_rate=0.5, hidden_units=expected.spec.training.hidden_units,
        strategy="one_device", precision="float32", xla="off", steps_per_execution=4, accumulation_steps=2,
        scale_learning_rate=True, tensorboard_histogram_freq=0, profile_batches="2,4")


def test_unset_flags_take_the_dataset_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("TURBOTFX_HOME", str(tmp_path))
    config = cli_args.config_from_args(build_parser().parse_args(["run", "--dataset", "synthetic"]))
    assert config == PipelineConfig(home=str(tmp_path), dataset="synthetic")
    assert config.training.epochs == 3 and config.enable_cache


def test_compile_reads_data_root_as_the_parameter_default_not_a_local_directory():
    args = build_parser().parse_args(["compile", "--target", "vertex", "--pipeline-root", "gs://b/r",
                                      "--output", "p.json", "--data-root", "gs://b/data"])
    assert cli_args.config_from_args(args, ignore=("data_root",)).data_root is None


@pytest.mark.parametrize("argv", [["serving", "status"], ["predict", "--json", "{}"]])
def test_workspace_commands_name_home_dataset_and_model(argv, tmp_path):
    args = build_parser().parse_args([*argv, "--home", str(tmp_path), "--dataset", "synthetic",
                                      "--model-name", "churn"])
    config = cli_args.workspace_config(args)
    assert (config.home_path, config.dataset, config.model_name) == (tmp_path.resolve(), "synthetic", "churn")
    assert config.serving_dir == tmp_path.resolve() / "serving" / "churn"


@pytest.mark.parametrize("limit", ["-1", "-20"])
def test_runs_refuses_a_negative_limit(limit, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["runs", "--limit", limit])
    assert exit_.value.code == 2
    assert f"argument --limit: must be at least 0, got {limit}" in capsys.readouterr().err


@pytest.mark.parametrize("limit, expected", [("0", 0), ("1", 1), ("50", 50)])  # 0: every run
def test_runs_takes_a_limit_of_zero_or_more(limit, expected):
    assert build_parser().parse_args(["runs", "--limit", limit]).limit == expected
