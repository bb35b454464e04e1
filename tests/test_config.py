import pytest

from pipeline.config import PipelineConfig, ensure_writable_home, parse_split
from pipeline.errors import ConfigError


def test_defaults_are_valid_and_place_everything_under_home(tmp_path):
    config = PipelineConfig(home=str(tmp_path))
    assert config.dataset == "penguins"
    for path in (config.pipeline_root, config.metadata_path, config.serving_dir, config.log_path, config.data_path):
        assert tmp_path in path.parents


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"dataset": "iris"}, "no dataset file 'iris'"),
        ({"knobs": {"epochs": 0}}, "epochs must be at least 1"),
        ({"knobs": {"batch_size": -4}}, "batch size must be at least 1"),
        ({"knobs": {"learning_rate": 0.0}}, "learning rate must be in (0, 10)"),
        ({"blessing_threshold": 1.5}, "blessing threshold on accuracy must be in [0, 1]"),
        ({"max_metric_drop": -0.1}, "max accuracy drop must be 0 or more"),
        ({"beam_mode": "turbo"}, "unknown beam mode 'turbo'"),
        ({"pipeline_name": "has space"}, "pipeline_name 'has space' is not a valid name"),
        ({"train_buckets": 0}, "split buckets must be positive"),
        ({"knobs": {"hidden_units": ()}}, "hidden units must be positive"),
        ({"knobs": {"strategy": "magic"}}, "unknown strategy 'magic'; choose one of: auto"),
        ({"knobs": {"precision": "float8"}}, "unknown precision 'float8'"),
        ({"knobs": {"steps_per_execution": 0}}, "steps per execution must be at least 1"),
        ({"knobs": {"accumulation_steps": 0}}, "accumulation steps must be at least 1"),
        ({"knobs": {"batch_size": 30, "accumulation_steps": 4}}, "must be a multiple of accumulation steps 4"),
        ({"knobs": {"profile_batches": "2-4"}}, "must be START,END"),
        ({"knobs": {"profile_batches": "4,2"}}, "'4,2' must be START,END with 1 <= START <= END"),
        ({"knobs": {"profile_batches": "0,3"}}, "'0,3' must be START,END with 1 <= START <= END"),
        ({"knobs": {"epoch": 3}}, "unknown training knob 'epoch'"),
        ({"rows": 1000}, "--rows sizes the synthetic dataset only"),
        ({"dataset": "synthetic", "rows": 10}, "rows must be at least 100"),
    ],
)
def test_invalid_values_name_the_field(overrides, message):
    with pytest.raises(ConfigError) as err:
        PipelineConfig(**overrides)
    assert message in str(err.value)


def test_data_root_override_is_used(tmp_path):
    assert PipelineConfig(data_root=str(tmp_path)).data_path == tmp_path.resolve()


@pytest.mark.parametrize("text, expected", [("4:1", (4, 1)), ("9:1", (9, 1))])
def test_parse_split(text, expected):
    assert parse_split(text) == expected


@pytest.mark.parametrize("text", ["4", "a:b", "0:1", "4:1:1"])
def test_parse_split_rejects(text):
    with pytest.raises(ConfigError, match="--split 4:1"):
        parse_split(text)


def test_home_on_a_read_only_filesystem_is_a_clear_error():
    # /proc refuses new directories even to root, which CI runs as.
    with pytest.raises(ConfigError, match="not writable"):
        ensure_writable_home(PipelineConfig(home="/proc/turbotfx-workspace"))


def test_home_under_a_file_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError) as err:
        ensure_writable_home(PipelineConfig(home=str(blocker / "ws")))
    assert "not writable" in str(err.value) and "--home" in str(err.value)


def test_each_dataset_brings_its_defaults_and_explicit_values_win(tmp_path):
    penguins = PipelineConfig(home=str(tmp_path))
    synthetic = PipelineConfig(home=str(tmp_path), dataset="synthetic")
    assert (penguins.model_name, penguins.training.epochs, penguins.training.batch_size) == ("penguins", 20, 32)
    assert (synthetic.model_name, synthetic.training.batch_size, synthetic.rows) == ("synthetic", 256, 100_000)
    assert synthetic.data_path == tmp_path.resolve() / "data" / "synthetic" / "rows-100000"
    tuned = PipelineConfig(home=str(tmp_path), dataset="synthetic", rows=5000, knobs={"epochs": 7, "batch_size": 64})
    assert (tuned.training.epochs, tuned.training.batch_size, tuned.training.learning_rate) == (
        7, 64, synthetic.training.learning_rate)
    assert tuned.data_path.name == "rows-5000"


@pytest.mark.parametrize("text", ["", "1,1", "2,4", "10,100"])
def test_profile_batch_ranges_the_keras_profiler_takes(text, tmp_path):
    assert PipelineConfig(home=str(tmp_path), knobs={"profile_batches": text}).training.profile_batches == text
