"""`turbotfx init`: a table in, a dataset file and its schema draft out (pipeline/datasets/infer.py, draft.py,
pipeline/cli/init.py). Expected roles, types and domains come from how the test builds its
table, and the schema is checked by TFDV against statistics of the data as ExampleGen reads it."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from pipeline import datasets
from pipeline.datasets import draft as draft_file
from pipeline.datasets import infer
from pipeline.errors import ConfigError
from tests.conftest import cli
from trainer_module.config import TrainingConfig

ROWS = 200
SENTENCES = [f"customer wrote a long remark number {i} about the service and the bill" for i in range(30)]
PLANS = ["basic", "family", "pro"]
# How each column is built (see table()), so the role and type init must find.
ROLES = {
    "customer id": "ignore",  # 0..ROWS-1: a different integer in every row
    "plan/type": "categorical",  # three strings, some missing
    "monthly charges": "numeric",  # decimals, some missing
    "rating": "categorical",  # integers 1..5, some missing
    "tier": "categorical",  # integers 1..3
    "visits": "numeric",  # integers 0..99: more than 20 values
    "plan code": "categorical",  # integers 1..4 named as codes
    "source": "ignore",  # constant
    "comment": "text",  # long sentences of many words (free text), some missing
    "email": "ignore",  # 150 distinct short strings in 200 rows
    "churn": "categorical",  # yes/no (the binary label)
    "price": "numeric",  # decimals (the regression label)
}
TYPES = {"customer id": "INT", "plan/type": "BYTES", "monthly charges": "FLOAT", "rating": "INT", "tier": "INT",
         "visits": "INT", "plan code": "INT", "source": "BYTES", "comment": "BYTES", "email": "BYTES", "churn": "BYTES", "price": "FLOAT"}


def table(seed: int = 0, rows: int = ROWS, scale: float = 1.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({
        "customer id": np.arange(rows) + seed * rows,
        "plan/type": rng.choice(PLANS, rows),
        "monthly charges": (rng.normal(50, 10, rows) * scale).round(2),
        # Nullable integers: a missing value must not turn the column into decimals.
        "rating": pd.array(rng.integers(1, 6, rows), dtype="Int64"),
        "tier": rng.integers(1, 4, rows),
        "visits": (rng.integers(0, 100, rows) * scale).astype(int),
        "plan code": rng.integers(1, 5, rows),
        "source": "web",
        "comment": rng.choice(SENTENCES, rows),
        "email": [f"user{i % 150}@example.com" for i in range(rows)],
        "churn": rng.choice(["yes", "no"], rows),
        "price": rng.normal(100, 20, rows) * scale,
    })
    frame.loc[frame.index % 7 == 3, "monthly charges"] = np.nan
    frame.loc[frame.index % 5 == 1, "plan/type"] = None
    frame.loc[frame.index % 9 == 2, "rating"] = pd.NA
    frame.loc[frame.index % 4 == 0, "comment"] = None
    return frame


def write(frame: pd.DataFrame, root, fmt: str, name: str = "part-0"):
    root.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        frame.to_csv(root / f"{name}.csv", index=False)
    else:
        frame.to_parquet(root / f"{name}.parquet", index=False)
    return root


@pytest.fixture(scope="module")
def tables_on_disk(tmp_path_factory):
    """The same table as CSV and as Parquet."""
    base = tmp_path_factory.mktemp("tables")
    frame = table()
    return frame, {fmt: write(frame, base / fmt / "data", fmt) for fmt in ("csv", "parquet")}


LABELS = {"churn": ("binary", None), "price": ("regression", None), "tier": ("multiclass", 3)}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("label", sorted(LABELS))
def test_roles_task_and_blessing(tables_on_disk, tmp_path, fmt, label):
    frame, roots = tables_on_disk
    draft = infer.draft(roots[fmt], label, tmp_path / "out.toml")
    task, classes = LABELS[label]
    assert (draft.task, draft.classes, draft.format, draft.rows) == (task, classes, fmt, ROWS)
    assert draft.task_reason
    expected = {column: role for column, role in ROLES.items() if column != label}
    assert {d.column.name: d.role for d in draft.decisions} == expected
    assert [d.column.name for d in draft.decisions] == [c for c in frame.columns if c != label]
    assert all(d.reason for d in draft.decisions), "never silently"
    if task == "regression":
        std = float(np.std(frame[label].to_numpy()))  # the RMSE of predicting the mean
        assert draft.blessing["metric"] == "rmse"
        assert draft.blessing["threshold"] == pytest.approx(std, rel=1e-5)
        assert draft.blessing["max_drop"] == pytest.approx(0.02 * std, rel=1e-5)
    else:
        assert draft.blessing == datasets.DEFAULT_BLESSING[task]
    assert draft.slices == ("plan/type",)  # the first categorical with few values
    # What a user tunes per table; epochs is a maximum (early stopping ends sooner).
    assert draft.training == {"epochs": 100, "batch_size": 32, "learning_rate": 0.01, "hidden_units": [32, 16],
                              "class_weight": "none"}


def test_missing_values_are_counted_in_the_reasons(tables_on_disk, tmp_path):
    frame, roots = tables_on_disk
    draft = infer.draft(roots["csv"], "churn", tmp_path / "out.toml")
    reasons = {d.column.name: d.reason for d in draft.decisions}
    missing = int(frame["monthly charges"].isna().sum())
    assert f"{missing} of {ROWS} rows empty" in reasons["monthly charges"]
    assert "ID-like" in reasons["customer id"] and "constant" in reasons["source"]
    assert "free text" in reasons["comment"] and "free text" in reasons["email"]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_the_written_file_loads(tables_on_disk, tmp_path, fmt):
    frame, roots = tables_on_disk
    output = tmp_path / "files" / "churn.toml"
    draft = infer.draft(roots[fmt], "churn", output)
    assert draft_file.write(draft) == (output, tmp_path / "files" / "churn.schema.pbtxt")
    dataset = datasets.load(str(output))
    assert dataset.name == "churn"
    assert dataset.data_root == roots[fmt].resolve() and dataset.format == fmt
    assert (dataset.label, dataset.task, dataset.slices) == ("churn", "binary", ("plan/type",))
    assert dataset.schema == (tmp_path / "files" / "churn.schema.pbtxt").resolve()
    assert {f.name: f.role for f in dataset.features} == {c: r for c, r in ROLES.items() if c != "churn"}
    assert dataset.blessing == datasets.Blessing("auc", 0.6, 0.02)
    assert dataset.positive == "yes"  # by convention, whichever is commoner
    assert dataset.training == TrainingConfig()
    # data_root is written relative to the dataset file's folder.
    assert f'data_root = "{os.path.relpath(roots[fmt], output.parent)}"' in output.read_text()
    assert not [p for p in output.parent.iterdir() if p.name.startswith(".")], "no temporary file left"


def test_regression_and_multiclass_files_load(tables_on_disk, tmp_path):
    _, roots = tables_on_disk
    draft_file.write(infer.draft(roots["parquet"], "price", tmp_path / "price.toml"))
    price = datasets.load(str(tmp_path / "price.toml"))
    assert price.task == "regression" and price.blessing.metric == "rmse" and price.blessing.threshold > 0
    draft_file.write(infer.draft(roots["csv"], "tier", tmp_path / "tier.toml"))
    tier = datasets.load(str(tmp_path / "tier.toml"))
    assert (tier.task, tier.classes, tier.num_classes) == ("multiclass", 3, 3)


def _schema(path):
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    return text_format.Parse(path.read_text(), schema_pb2.Schema())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_schema_draft_types_and_domains(tables_on_disk, tmp_path, fmt):
    from tensorflow_metadata.proto.v0 import schema_pb2

    frame, roots = tables_on_disk
    draft_file.write(infer.draft(roots[fmt], "churn", tmp_path / "churn.toml"))
    schema = _schema(tmp_path / "churn.schema.pbtxt")
    by_name = {f.name: f for f in schema.feature}
    assert {name: schema_pb2.FeatureType.Name(f.type) for name, f in by_name.items()} == TYPES
    domains = {d.name: list(d.value) for d in schema.string_domain}
    label = by_name["churn"]
    assert label.presence.min_fraction == 1.0 and [d.size for d in label.shape.dim] == [1]
    assert sorted(domains[label.domain]) == sorted(set(frame["churn"]))
    for name, feature in by_name.items():
        assert not feature.HasField("float_domain") and not feature.HasField("int_domain"), name
        if name == "churn":
            continue
        assert (feature.value_count.min, feature.value_count.max) == (0, 1), name
        assert feature.presence.min_fraction == 0 and not feature.HasField("shape"), name
        assert feature.presence.min_count == (0 if ROLES[name] == "ignore" else 1), name
    # Text categoricals are closed to the values seen; ignored text is not.
    assert sorted(domains[by_name["plan/type"].domain]) == sorted(set(frame["plan/type"].dropna()))
    assert not by_name["comment"].domain and not by_name["email"].domain


def _csv_statistics(root):
    """Statistics of CSV files as CsvExampleGen types them (tfx_bsl's decoder, through TFDV)."""
    import tensorflow_data_validation as tfdv

    return tfdv.generate_statistics_from_csv(data_location=str(root / "*.csv"))


def _parquet_statistics(root):
    """Statistics of the tf.Examples the pipeline's Parquet ExampleGen writes (its row_to_example,
    not TFX's dict_to_example, which it replaced)."""
    import pyarrow.parquet as pq
    from tensorflow_data_validation.statistics import stats_impl, stats_options
    from tfx_bsl.coders import example_coder

    from components.parquet_example_gen.executor import row_to_example

    examples = [row_to_example(row).SerializeToString()
                for path in sorted(root.glob("*.parquet")) for row in pq.read_table(path).to_pylist()]
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(examples)
    return stats_impl.generate_statistics_in_memory(batch, stats_options.StatsOptions())


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_tfdv_finds_no_anomaly_in_this_batch_or_the_next(tmp_path, fmt):
    """The draft matches the types ExampleGen writes, and has no range a new batch (other
    values, other scale, more missing) could trip on."""
    import tensorflow_data_validation as tfdv

    first = write(table(seed=0), tmp_path / "first", fmt)
    draft_file.write(infer.draft(first, "churn", tmp_path / "churn.toml"))
    schema = tfdv.load_schema_text(str(tmp_path / "churn.schema.pbtxt"))
    following = table(seed=1, scale=10.0)
    following = following.astype({"customer id": "Int64", "visits": "Int64", "tier": "Int64"})
    following.loc[following.index % 2 == 0, ["monthly charges", "visits", "tier"]] = None
    following.loc[following.index % 3 == 0, "customer id"] = None
    second = write(following, tmp_path / "second", fmt)
    statistics = _csv_statistics if fmt == "csv" else _parquet_statistics
    for root in (first, second):
        anomalies = tfdv.validate_statistics(statistics(root), schema)
        assert dict(anomalies.anomaly_info) == {}, root.name


def test_a_new_class_or_a_missing_label_is_an_anomaly(tmp_path):
    import tensorflow_data_validation as tfdv

    first = write(table(), tmp_path / "first", "parquet")
    draft_file.write(infer.draft(first, "churn", tmp_path / "churn.toml"))
    schema = tfdv.load_schema_text(str(tmp_path / "churn.schema.pbtxt"))
    following = table(seed=1)
    following.loc[0, "churn"] = "maybe"
    following.loc[1, "churn"] = None
    anomalies = tfdv.validate_statistics(_parquet_statistics(write(following, tmp_path / "second", "parquet")),
                                         schema)
    assert list(anomalies.anomaly_info) == ["churn"]


def test_awkward_column_names_round_trip(tmp_path):
    names = ['say "hi"', "back\\slash", "tab\there", "ünïcode", "2nd"]
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({name: rng.normal(size=40) for name in names}).assign(y=["a", "b"] * 20)
    root = write(frame, tmp_path / "data", "parquet")
    draft_file.write(infer.draft(root, "y", tmp_path / "awkward.toml"))
    dataset = datasets.load(str(tmp_path / "awkward.toml"))
    assert [f.name for f in dataset.features] == names
    assert {f.name for f in _schema(tmp_path / "awkward.schema.pbtxt").feature} == {*names, "y"}


def test_refuses_to_overwrite_without_force(tables_on_disk, tmp_path):
    _, roots = tables_on_disk
    output = tmp_path / "churn.toml"
    draft_file.write(infer.draft(roots["csv"], "churn", output))
    before = output.read_text()
    with pytest.raises(ConfigError, match=f"{output} already exists; pass --force"):
        infer.draft(roots["csv"], "price", output)
    output.unlink()  # the schema draft alone also stops it
    with pytest.raises(ConfigError, match="churn.schema.pbtxt already exists; pass --force"):
        infer.draft(roots["csv"], "price", output)
    draft_file.write(infer.draft(roots["csv"], "price", output, force=True), force=True)
    assert output.read_text() != before and datasets.load(str(output)).task == "regression"


@pytest.mark.parametrize("label, task, message", [
    ("churn", "regression", "label column 'churn' holds text"),
    ("tier", "binary", "has 3 values (1, 2, 3) but the task is binary"),
    ("price", "multiclass", "label column 'price' holds decimals"),
    ("nope", None, "no label column 'nope'"),
    ("rating", None, "empty label 'rating'"),
])
def test_bad_label_or_task(tables_on_disk, tmp_path, label, task, message):
    _, roots = tables_on_disk
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        infer.draft(roots["csv"], label, tmp_path / "x.toml", task=task)
    assert list(tmp_path.iterdir()) == []


def test_task_override_that_fits(tables_on_disk, tmp_path):
    _, roots = tables_on_disk
    draft = infer.draft(roots["csv"], "visits", tmp_path / "x.toml")
    assert draft.task == "regression"  # whole numbers with many values
    draft = infer.draft(roots["csv"], "tier", tmp_path / "x.toml", task="regression")
    assert draft.task == "regression" and draft.task_reason.startswith("--task regression")


def test_no_usable_feature(tmp_path):
    frame = pd.DataFrame({"id": range(30), "same": 1, "y": ["a", "b", "c"] * 10})
    with pytest.raises(ConfigError, match="can be a feature") as err:
        infer.draft(write(frame, tmp_path / "d", "csv"), "y", tmp_path / "x.toml")
    assert "id: ID-like" in str(err.value) and "same: constant" in str(err.value)


def test_columns_with_the_same_tf_name(tmp_path):
    frame = pd.DataFrame({"a b": np.linspace(0, 1, 30), "a_b": np.linspace(1, 2, 30), "y": ["a", "b"] * 15})
    with pytest.raises(ConfigError, match="columns 'a b' and 'a_b' both become the TF name 'a_b'"):
        infer.draft(write(frame, tmp_path / "d", "csv"), "y", tmp_path / "x.toml")


def test_a_column_named_like_the_signatures_input_is_refused(tmp_path):
    """It passed every check before, and failed the run at the Evaluator."""
    frame = pd.DataFrame({"examples": np.linspace(0, 1, 30), "b": np.linspace(1, 2, 30), "y": ["a", "b"] * 15})
    with pytest.raises(ConfigError, match="column 'examples' becomes the TF name 'examples'; rename that column"):
        infer.draft(write(frame, tmp_path / "d", "csv"), "y", tmp_path / "x.toml")


def test_format_detection_and_choice(tables_on_disk, tmp_path):
    frame, _ = tables_on_disk
    root = write(frame, tmp_path / "both", "csv")
    write(frame, root, "parquet")
    with pytest.raises(ConfigError, match="both .csv and .parquet"):
        infer.draft(root, "churn", tmp_path / "x.toml")
    assert infer.draft(root, "churn", tmp_path / "x.toml", fmt="parquet").format == "parquet"


@pytest.mark.parametrize("stem, name", [("churn", "churn"), ("my data.v2", "my-data-v2"), ("2024 sales", "dataset-2024-sales"),
                                        ("__", "dataset"), ("x" * 80, "x" * 63)])
def test_dataset_name_from_the_file_name(stem, name, tmp_path):
    assert infer.dataset_name(None, tmp_path / f"{stem}.toml") == name
    assert datasets.NAME_RE.match(name)


def test_invalid_name(tmp_path):
    with pytest.raises(ConfigError, match="--name 'my data' is not a valid name"):
        infer.dataset_name("my data", tmp_path / "x.toml")


# --- through the CLI ---------------------------------------------------------------------

def _cli(*args, cwd, home):
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, "TURBOTFX_HOME": str(home)})
    return done.returncode, done.stdout, done.stderr


def test_cli_init_prints_every_decision_and_writes_both_files(tables_on_disk, tmp_path):
    frame, roots = tables_on_disk
    root = tmp_path / "telco"
    write(frame, root, "csv")
    code, out, err = _cli("init", "--data-root", str(root), "--label", "churn", cwd=tmp_path, home=tmp_path / "ws")
    assert (code, err) == (0, ""), out + err
    lines = out.splitlines()
    assert "binary" in lines[1] and "'no', 'yes'" in lines[1]
    for column, role in ROLES.items():
        if column != "churn":
            assert [line for line in lines if line.split()[:len(column.split()) + 1] == [*column.split(), role]], column
    assert "wrote telco.toml and telco.schema.pbtxt" in out
    assert lines[-1] == "next: turbotfx run --dataset telco.toml"
    assert datasets.load(str(tmp_path / "telco.toml")).name == "telco"
    assert (tmp_path / "ws" / "logs" / "turbotfx.log").exists(), "library logs went to the log file"

    before = (tmp_path / "telco.toml").stat().st_mtime_ns
    code, out, err = _cli("init", "--data-root", str(root), "--label", "price", cwd=tmp_path, home=tmp_path / "ws")
    assert code == 2 and out == ""
    assert err.splitlines() == ["turbotfx: error: telco.toml already exists; pass --force to overwrite it, "
                                "or choose another --output"]
    assert (tmp_path / "telco.toml").stat().st_mtime_ns == before


@pytest.mark.parametrize("args, message", [
    (["--label", "nope"], "no label column 'nope'"),
    (["--label", "churn", "--task", "regression"], "label column 'churn' holds text"),
    (["--label", "churn", "--categorical-max", "-1"], "--categorical-max must be 0 or more, got -1"),
])
def test_cli_init_bad_input_writes_nothing(tables_on_disk, tmp_path, args, message):
    _, roots = tables_on_disk
    output = tmp_path / "out" / "x.toml"
    result = cli("init", "--data-root", str(roots["csv"]), "--output", str(output), *args, home=tmp_path / "ws")
    code, out, err = result.exit_code, result.stdout, result.output[len(result.stdout):]
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("turbotfx: error: ") and message in err
    assert not (tmp_path / "out").exists()


def test_cli_schema_infer_on_parquet(tables_on_disk, tmp_path):
    _, roots = tables_on_disk
    output = tmp_path / "inferred.pbtxt"
    code, out, err = _cli("schema", "infer", "--data-root", str(roots["parquet"]), "--output", str(output),
                          cwd=tmp_path, home=tmp_path / "ws")
    assert code == 0, out + err
    assert f"inferred schema written to {output}" in out
    from tensorflow_metadata.proto.v0 import schema_pb2

    types = {f.name: schema_pb2.FeatureType.Name(f.type) for f in _schema(output).feature}
    assert types == TYPES


def test_parquet_bytes_that_are_not_text(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "d"
    root.mkdir()
    pq.write_table(pa.table({"raw": pa.array([b"\xff\xfe", b"ok"] * 15, pa.binary()),
                             "x": np.linspace(0, 1, 30), "y": ["a", "b"] * 15}), root / "a.parquet")
    with pytest.raises(ConfigError, match="column 'raw' holds bytes that are not UTF-8 text"):
        infer.draft(root, "y", tmp_path / "x.toml")


@pytest.mark.parametrize("values, positive", [
    (["no", "yes"], "yes"), (["0", "1"], "1"), (["False", "True"], "True"), (["cat", "dog"], None),
])
def test_the_positive_class_by_convention(tmp_path, values, positive):
    frame = pd.DataFrame({"x": np.arange(40) % 7 + 0.5, "label": [values[i % 2] for i in range(40)]})
    write(frame, tmp_path / "data", "csv")
    draft = infer.draft(tmp_path / "data", "label", tmp_path / "out.toml")
    assert draft.task == "binary" and infer.positive_class(draft) == positive
    written = draft_file.dataset_toml(draft)
    assert (f'positive = "{positive}"' in written) if positive else ("positive" not in written)


@pytest.mark.parametrize("rare, proposed", [(6, True), (20, False)])
def test_a_rare_class_gets_the_class_weight_proposal(tmp_path, rare, proposed):
    """6 of 100 rows 'yes': under 15 %, so the dataset file and init's report propose
    balanced class weights (left off: they cost accuracy); 20 of 100: nothing proposed."""
    labels = ["yes"] * rare + ["no"] * (100 - rare)
    frame = pd.DataFrame({"x": np.arange(100) % 7 + 0.5, "churn": labels})
    write(frame, tmp_path / "data", "csv")
    draft = infer.draft(tmp_path / "data", "churn", tmp_path / "out.toml")
    assert draft.rarest_class == ("yes", pytest.approx(rare / 100))
    written = draft_file.dataset_toml(draft)
    advice = f"class 'yes' is {rare:.1f}% of the rows: class_weight = \"balanced\""
    assert (advice in written) is proposed
    assert 'class_weight = "none"' in written
    from pipeline.cli.init import report

    assert any(advice in line for line in report(draft)) is proposed


def test_categorical_max_moves_the_line_between_categories_and_quantities(tables_on_disk, tmp_path):
    """rating has 5 values, tier 3, visits 100, plan code 4 (see table()). --categorical-max 0
    makes every whole number a quantity except the one named as a code; 3 splits rating from
    tier."""
    _, roots = tables_on_disk

    def roles(categorical_max: int) -> dict[str, infer.Decision]:
        draft = infer.draft(roots["csv"], "churn", tmp_path / f"{categorical_max}.toml", categorical_max=categorical_max)
        return {d.column.name: d for d in draft.decisions}

    none = roles(0)
    assert [none[c].role for c in ("rating", "tier", "visits", "plan code")] == \
        ["numeric", "numeric", "numeric", "categorical"]
    assert none["tier"].reason == "whole numbers with 3 values (more than 0: a quantity)"
    assert none["plan code"].reason == "whole numbers with 4 values, named as codes"
    three = roles(3)
    assert (three["rating"].role, three["tier"].role) == ("numeric", "categorical")
    assert three["tier"].reason == "whole numbers with 3 values (at most 3: categories)"


@pytest.mark.parametrize("name, codes", [
    ("customer_type", True), ("MOSTYPE", True), ("zip code", True), ("ProductID", True), ("store_ids", True),
    ("age group", True), ("Seats", False), ("paid", False), ("Education", False), ("years", False),
])
def test_names_that_say_their_numbers_are_codes(name, codes):
    assert infer.named_as_codes(name) is codes


def test_a_column_name_transform_cannot_hold_is_refused_by_name(tmp_path):
    """It passed init and failed Transform 45 s into the run, naming only a TF node; an
    ignored column is one of Transform's inputs too."""
    frame = pd.DataFrame({"ticket <id>": [f"t{i}" for i in range(30)], "b": np.linspace(1, 2, 30),
                          "y": ["a", "b"] * 15})
    with pytest.raises(ConfigError) as err:
        infer.draft(write(frame, tmp_path / "d", "csv"), "y", tmp_path / "x.toml")
    assert str(err.value) == (
        "column 'ticket <id>' becomes 'F_ticket__id>' in Transform's graph, which TensorFlow refuses; rename that "
        "column in the data (in TensorFlow's node names a '>' comes only before a letter, a digit or '.', and a name "
        "does not end in '/')")
