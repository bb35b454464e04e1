"""The Tuner's search space as TrainingConfig declares it, sampled by a real Optuna study;
a dataset file's [tuning] table; the trial scores against scikit-learn's losses."""

from __future__ import annotations

import dataclasses

import numpy as np
import optuna
import pytest
from sklearn.metrics import log_loss, mean_squared_error

from pipeline import datasets
from pipeline.errors import ConfigError
from trainer_module import search_space
from trainer_module.config import TrainingConfig
from trainer_module.dimensions import Choice, Range

KINDS = {field.name: type(field.default) for field in dataclasses.fields(TrainingConfig)}
# What the issue asks the Tuner to search, by family.
WANTED = {"dnn": {"learning_rate", "weight_decay", "hidden_units", "dropout", "batch_size", "numeric_encoding"},
          "gbt": {"gbt_num_trees", "gbt_max_depth", "gbt_shrinkage"}}


@pytest.mark.parametrize("family", ["dnn", "gbt"])
def test_each_family_searches_its_own_knobs(family):
    assert set(search_space.space(family)) == WANTED[family]


@pytest.mark.parametrize("family", ["dnn", "gbt"])
def test_the_untuned_defaults_lie_inside_the_space(family):
    # The first trial is the untuned configuration: every default must be a value the space holds.
    defaults = TrainingConfig().to_config()
    for name, dimension in search_space.space(family).items():
        value = defaults[name]
        if isinstance(dimension, Choice):
            assert (tuple(value) if isinstance(value, list) else value) in dimension.values, name
        else:
            assert dimension.low <= value <= dimension.high, name


def test_the_fingerprint_tells_search_spaces_apart():
    every = search_space.fingerprint("dnn", search_space.space("dnn"))
    assert every == search_space.fingerprint("dnn", search_space.space("dnn"))
    narrowed = search_space.fingerprint("dnn", search_space.space("dnn", ("learning_rate",)))
    wider = search_space.fingerprint("dnn", {**search_space.space("dnn"), "dropout": Range(0.0, 0.9)})
    assert len({every, narrowed, wider, search_space.fingerprint("gbt", search_space.space("gbt"))}) == 4


@pytest.mark.parametrize("family", ["dnn", "gbt"])
def test_sampled_values_are_in_range_of_the_knobs_type_and_make_a_valid_config(family):
    dimensions = search_space.space(family)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen = []
    for _ in range(30):
        trial = study.ask()
        values = search_space.sample(trial, dimensions, KINDS)
        study.tell(trial, 0.0)
        for name, dimension in dimensions.items():
            value = values[name]
            if isinstance(dimension, Choice):
                assert (tuple(value) if isinstance(value, list) else value) in dimension.values
            else:
                assert dimension.low <= value <= dimension.high
                assert isinstance(value, KINDS[name])
        config = TrainingConfig.from_config({**TrainingConfig().to_config(), **values})
        config.validate()
        seen.append(config)
    # Thirty draws try more than one value of every knob.
    for name in dimensions:
        assert len({getattr(config, name) for config in seen}) > 1, name


def test_a_configuration_enqueued_first_is_the_first_trial():
    dimensions = search_space.space("dnn")
    given = {"learning_rate": 0.002, "weight_decay": 1e-5, "hidden_units": [64, 32], "dropout": 0.1,
             "batch_size": 128, "numeric_encoding": "plr"}
    study = optuna.create_study()
    study.enqueue_trial(search_space.as_sampler_params(dimensions, given))
    assert search_space.sample(study.ask(), dimensions, KINDS) == given


def test_prediction_losses_are_scikit_learns():
    from trainer_module.tuning import prediction_loss

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 50)
    probabilities = rng.dirichlet(np.ones(3), 50)
    assert prediction_loss("multiclass", labels.astype(float), probabilities) == pytest.approx(
        log_loss(labels, probabilities, labels=[0, 1, 2]))
    positive = rng.uniform(0.01, 0.99, (50, 1))
    binary = (rng.uniform(size=50) < 0.4).astype(float)
    assert prediction_loss("binary", binary, positive) == pytest.approx(log_loss(binary, positive.reshape(-1)))
    values = rng.normal(size=(50, 1))
    target = rng.normal(size=50)
    assert prediction_loss("regression", target, values) == pytest.approx(mean_squared_error(target, values))


def _penguins_file(tmp_path, tuning: str):
    builtin = datasets.resolve("penguins")
    path = tmp_path / "penguins.toml"
    path.write_text(builtin.read_text().replace('schema = "', f'schema = "{builtin.parent}/', 1) + tuning)
    return path


@pytest.mark.parametrize("table, message", [
    ("[tuning]\ntrial = 5\n", "tuning.trial: unknown key"),
    ("[tuning]\ntrials = \"5\"\n", "tuning.trials: '5' is not a whole number"),
    ("[tuning]\nknobs = [\"learning_rate\", 3]\n", "tuning.knobs: .* is not a list of knob names"),
])
def test_a_bad_tuning_table_names_the_key_and_the_fix(tmp_path, table, message):
    with pytest.raises(ConfigError, match=message):
        datasets.load(str(_penguins_file(tmp_path, "\n" + table)))


def test_a_tuning_table_is_read(tmp_path):
    loaded = datasets.load(str(_penguins_file(tmp_path, "\n[tuning]\ntrials = 12\nparallelism = 2\n")))
    assert loaded.tuning == search_space.TuningConfig(trials=12, parallelism=2)
    assert datasets.load("penguins").tuning.reuses
