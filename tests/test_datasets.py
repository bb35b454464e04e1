"""Dataset files load into what the pipeline needs, and a bad one is one error naming the
file, the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline import datasets
from pipeline.datasets import curated, prepare
from pipeline.errors import ConfigError
from tests.conftest import cli
from trainer_module.config import TrainingConfig

GOOD = '''
name = "churn"
data_root = "data"
label = "churned"
task = "binary"
schema = "churn.schema.pbtxt"
slices = ["plan type"]

[features]
"customer id" = "ignore"
"monthly charges" = "numeric"
"plan type" = "categorical"
zip = { role = "categorical", max_tokens = 1000, frequency_threshold = 2, embedding_dim = 8 }

[training]
epochs = 7
'''


SCHEMA = "".join(f'feature {{ name: "{name}" type: {kind} }}\n' for name, kind in (
    ("churned", "BYTES"), ("customer id", "BYTES"), ("monthly charges", "FLOAT"), ("plan type", "BYTES"),
    ("zip", "INT")))


def write(tmp_path: Path, text: str, schema: str = SCHEMA) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "churn.schema.pbtxt").write_text(schema)
    path = tmp_path / "churn.toml"
    path.write_text(text)
    return path


def test_a_good_file(tmp_path):
    spec = datasets.load(str(write(tmp_path, GOOD)))
    assert spec.name == "churn" and spec.task == "binary" and spec.num_classes == 2
    assert spec.data_root == tmp_path / "data"  # relative to the file's folder
    assert spec.schema == tmp_path / "churn.schema.pbtxt"
    assert [f.role for f in spec.features] == ["ignore", "numeric", "categorical", "categorical"]
    features = spec.feature_spec()
    assert features.numeric_keys == ("monthly charges",)
    assert features.categorical_keys == ("plan type", "zip")
    assert features.categorical("zip").max_tokens == 1000 and features.categorical("zip").embedding_dim == 8
    # Defaults per task and for training, with the file's values where it has them.
    assert (spec.blessing.metric, spec.blessing.threshold, spec.blessing.max_drop) == ("auc", 0.6, 0.02)
    assert spec.blessing.higher_is_better
    assert spec.training == TrainingConfig(epochs=7)


def test_the_feature_spec_survives_custom_config():
    # Transform and the Trainer get it as JSON-able custom_config.
    import json

    from trainer_module import features

    spec = datasets.load("synthetic").feature_spec()
    carried = json.loads(json.dumps({features.CONFIG_KEY: spec.to_config()}))
    assert features.from_custom_config(carried) == spec


def test_builtins_are_files():
    assert datasets.builtin_names() == ("penguins", "synthetic")
    penguins = datasets.load("penguins")
    assert (penguins.task, penguins.classes, penguins.generate) == ("multiclass", 3, "penguins")
    assert penguins.path == datasets.BUILTIN_DIR / "penguins.toml"


def test_regression_blesses_on_an_error_bound(tmp_path):
    text = GOOD.replace('task = "binary"', 'task = "regression"') + '[blessing]\nthreshold = 250.0\n'
    spec = datasets.load(str(write(tmp_path, text)))
    assert (spec.blessing.metric, spec.blessing.threshold, spec.blessing.max_drop) == ("rmse", 250.0, None)
    assert not spec.blessing.higher_is_better


@pytest.mark.parametrize("change, message", [
    (('epochs = 7', 'epochs = 7\nepoch = 3'), "training.epoch: unknown key; remove it or use one of"),
    (('name = "churn"', 'name = "churn"\nlabels = "x"'), "labels: unknown key"),
    (('epochs = 7', 'epochs = "ten"'), "training.epochs: 'ten' is not a whole number; write epochs as a whole number"),
    (('task = "binary"', 'task = "ranking"'), "task: 'ranking' is not one of binary, multiclass, regression"),
    (('data_root = "data"', 'data_root = "nowhere"'), "data_root: {tmp}/nowhere does not exist; fix the path"),
    (('schema = "churn.schema.pbtxt"', 'schema = "gone.pbtxt"'), "schema: {tmp}/gone.pbtxt does not exist"),
    (('slices = ["plan type"]', 'slices = ["city"]'), "slices: 'city' is not a column under [features]"),
    (('zip = {', '"zip code" = "numeric"\nzip_code = {'), "maps to the same TF name 'zip_code' as 'zip code'"),
    (('"monthly charges" = "numeric"', '"monthly charges" = "number"'),
     "features.monthly charges.role: 'number' is not one of numeric, categorical, date, text, ignore"),
    (('"monthly charges" = "numeric"', '"monthly charges" = {role = "numeric", max_tokens = 5}'),
     "features.monthly charges.max_tokens: applies to categorical features only"),
    (('task = "binary"', 'task = "multiclass"'), "classes: a multiclass task needs the number of label values"),
    (('task = "binary"', 'task = "regression"'), "blessing.threshold: no bound on rmse to bless against"),
    (('name = "churn"', 'name = "my churn"'), "name: 'my churn' is not a valid name"),
    (('"monthly charges" = "numeric"', 'examples = "numeric"'),
     "features.examples: becomes the TF name 'examples'; rename that column in the data"),
    (('[training]', '[training\n'), "not valid TOML"),
    (('"customer id" = "ignore"', 'churned = "numeric"'), "features.churned: the label is not a feature"),
    (('task = "binary"', 'task = "multiclass"\nclasses = 3\npositive = "yes"'),
     "positive: only a binary task has a positive class; remove it"),
])
def test_bad_file_is_one_error_naming_file_key_and_fix(tmp_path, change, message):
    old, new = change
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ConfigError) as err:
        datasets.load(str(path))
    text = str(err.value)
    assert text.startswith(f"{path}: "), text
    assert message.format(tmp=tmp_path) in text, text
    assert "\n" not in text


@pytest.mark.parametrize("schema, message", [
    ('feature { name: "churned" type: FLOATY }', "is not a schema text proto"),
    (SCHEMA.replace('"zip"', '"zip code"'), "has no feature 'zip'; add it to the schema"),
    (SCHEMA.replace('"monthly charges" type: FLOAT', '"monthly charges" type: BYTES'),
     "features.monthly charges: numeric, but the schema types it BYTES; make it categorical or ignore"),
    # A column the file does not list is still one of Transform's inputs.
    (SCHEMA + 'feature { name: "notes<internal>" type: BYTES }',
     "schema: .* has a column 'notes<internal>', which becomes 'F_notes_internal>' in Transform's graph"),
])
def test_a_schema_that_disagrees_with_the_file(tmp_path, schema, message):
    path = write(tmp_path, GOOD, schema)
    with pytest.raises(ConfigError, match=message):
        datasets.load(str(path))


def test_a_schema_path_that_is_not_a_regular_file_or_too_big_is_refused_before_reading(tmp_path):
    # /dev/zero never ends: read whole, it would take the machine's memory.
    path = write(tmp_path, GOOD.replace('schema = "churn.schema.pbtxt"', 'schema = "/dev/zero"'))
    with pytest.raises(ConfigError, match="schema: /dev/zero is not a regular file; give the schema file"):
        datasets.load(str(path))
    big = tmp_path / "big.pbtxt"
    with open(big, "wb") as out:
        out.truncate(curated.MAX_SCHEMA_BYTES + 1)  # sparse: no disk used
    path = write(tmp_path, GOOD.replace('schema = "churn.schema.pbtxt"', f'schema = "{big}"'))
    with pytest.raises(ConfigError, match="is 67,108,865 bytes, not a schema"):
        datasets.load(str(path))


@pytest.mark.parametrize("bound", ["threshold = nan", "threshold = inf", "max_drop = nan"])
def test_a_bound_that_is_not_a_finite_number_is_refused_on_load(tmp_path, bound):
    text = GOOD.replace('task = "binary"', 'task = "regression"') + f"\n[blessing]\n{bound}\n"
    if "threshold" not in bound:
        text += "threshold = 5.0\n"
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=r"blessing\.(threshold|max_drop): (nan|inf) is not a finite number"):
        datasets.load(str(path))


def test_paths_of_the_wrong_kind(tmp_path):
    path = write(tmp_path, GOOD.replace('data_root = "data"', 'data_root = "churn.schema.pbtxt"'))
    with pytest.raises(ConfigError, match="data_root: .* is a file; give the folder of the data files"):
        datasets.load(str(path))
    path = write(tmp_path, GOOD.replace('schema = "churn.schema.pbtxt"', 'schema = "data"'))
    with pytest.raises(ConfigError, match="schema: .* is a directory; give the schema file"):
        datasets.load(str(path))


def test_no_such_dataset(tmp_path):
    with pytest.raises(ConfigError, match="no dataset file 'iris'; give a built-in \\(penguins, synthetic\\)"):
        datasets.load("iris")
    with pytest.raises(ConfigError, match="no dataset file"):
        datasets.load(str(tmp_path / "missing.toml"))


def test_a_feature_the_data_lacks_stops_the_run_before_any_work(tmp_path):
    path = write(tmp_path, GOOD)
    (tmp_path / "data" / "part.csv").write_text(
        "customer id,monthly charges,plan type,churned\n"
        + "".join(f"C{i},{i}.5,{'ab'[i % 2]},{'yn'[i % 2]}\n" for i in range(40)))
    with pytest.raises(ConfigError, match="has no column 'zip', which the dataset file lists under \\[features\\]"):
        prepare.check_data_root(tmp_path / "data", datasets.load(str(path)))
    # Through the CLI: one line, exit 2, no workspace work.
    result = cli("run", "--dataset", str(path), home=tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert result.output.count("turbotfx: error:") == 1 and "Traceback" not in result.output
    assert "has no column 'zip'" in result.output
    assert not (tmp_path / "ws" / "pipelines").exists()


def test_the_positive_class_must_be_a_label_value(tmp_path):
    path = write(tmp_path, GOOD.replace('task = "binary"', 'task = "binary"\npositive = "true"'))
    assert datasets.load(str(path)).feature_spec().positive == "true"
    (tmp_path / "data" / "part.csv").write_text(
        "customer id,monthly charges,plan type,zip,churned\n"
        + "".join(f"C{i},{i}.5,{'ab'[i % 2]},{1000 + i % 3},{'yes' if i % 3 else 'no'}\n" for i in range(40)))
    with pytest.raises(ConfigError, match="positive: 'true' is not a value of label 'churned' .*\\(no, yes\\)"):
        prepare.check_data_root(tmp_path / "data", datasets.load(str(path)))
