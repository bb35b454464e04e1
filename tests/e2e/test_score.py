"""`turbotfx score` on the first run's served model (in a copy of its workspace: a scoring is
recorded in the store): a whole table with ids and two rows the schema refuses, scored on
Beam in this process. Expected values come from the table itself
(ids, species, the planted rows) and from the pushed SavedModel's serving_default fed
tf.Examples built here, not from the scoring code."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import tensorflow as tf

from pipeline import datasets
from serving import push
from tests.conftest import cli, module_copy_of_first_run, turbotfx
from tests.penguin_examples import example

pytestmark = pytest.mark.e2e

SPEC = datasets.load("penguins").feature_spec()
SPECIES = ("Adelie", "Chinstrap", "Gentoo")
# Planted: (row index, column, value) the curated schema refuses, and the words its reason names.
PLANTED = ((10, "island", "Atlantis", "not in the schema's domain"), (200, "bill_length_mm", "long", "must be a number"))


@pytest.fixture(scope="module")
def table(first_run, tmp_path_factory) -> tuple[Path, list[dict[str, str]]]:
    """The run's own penguins rows with an id column first and two planted bad rows; the
    species column stays (the model ignores it)."""
    with open(first_run.config.data_path / "penguins.csv", newline="") as handle:
        rows = [{"penguin_id": f"p{number:04d}", **row} for number, row in enumerate(csv.DictReader(handle))]
    for index, column, value, _ in PLANTED:
        rows[index][column] = value
    path = tmp_path_factory.mktemp("score-input") / "new_penguins.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path, rows


@pytest.fixture(scope="module")
def home(first_run, tmp_path_factory) -> Path:
    return module_copy_of_first_run(first_run, tmp_path_factory, "score-home")


@pytest.fixture(scope="module")
def scored(home, table, tmp_path_factory) -> dict:
    output = tmp_path_factory.mktemp("score-output") / "scores"
    result = cli("score", "--data", str(table[0]), "--output", str(output), "--id", "penguin_id", "--format", "json",
                 home=home)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _scores(outcome: dict) -> list[dict[str, str]]:
    rows = []
    for path in outcome["scores"]:
        with open(path, newline="") as handle:
            rows += list(csv.DictReader(handle))
    return rows



def test_every_valid_row_is_scored_once_with_its_id_and_the_served_models_answer(first_run, table, scored):
    _, rows = table
    planted = {rows[index]["penguin_id"] for index, *_ in PLANTED}
    valid = [r for r in rows if r["penguin_id"] not in planted and any(r[k] for k in SPEC.numeric_keys + SPEC.categorical_keys)]
    written = _scores(scored)
    assert sorted(r["penguin_id"] for r in written) == sorted(r["penguin_id"] for r in valid)
    [version] = push.versions(first_run.config.serving_dir)
    assert scored["model_version"] == version and {r["model_version"] for r in written} == {str(version)}
    assert scored["rows_scored"] == len(valid) and scored["rows_refused"] == len(PLANTED)

    # The served model's own answer for every row, through serving_default.
    model = tf.saved_model.load(str(first_run.config.serving_dir / str(version)))
    by_id = {r["penguin_id"]: r for r in valid}
    ids = [r["penguin_id"] for r in written]
    outputs = model.signatures["serving_default"](examples=tf.constant([example(by_id[i]) for i in ids]))
    classes = [c.decode() for c in outputs["classes"].numpy()[0]]
    assert sorted(classes) == sorted(SPECIES)
    labels = [label.decode() for label in outputs["label"].numpy()]
    assert [r["predicted_species"] for r in written] == labels
    probabilities = np.array([[float(r[f"probability_{c}"]) for c in classes] for r in written], dtype=np.float32)
    np.testing.assert_array_equal(probabilities, outputs["probabilities"].numpy())
    # Rows of every species, each mostly named right (the model saw these rows in training).
    for species in SPECIES:
        of_species = [r for r in written if by_id[r["penguin_id"]]["species"] == species]
        right = sum(r["predicted_species"] == species for r in of_species)
        assert of_species and right / len(of_species) >= 0.9, (species, right, len(of_species))
    assert scored["rows_checked"] > 0


def test_refused_rows_are_in_the_errors_file_with_their_line_and_reason(table, scored):
    path, rows = table
    [errors] = scored["errors"]
    with open(errors, newline="") as handle:
        refused = list(csv.DictReader(handle))
    # CSV line numbers: the header is line 1, row index i is line i + 2.
    assert [(r["file"], int(r["line"]), r["penguin_id"]) for r in refused] == [
        (str(path), index + 2, rows[index]["penguin_id"]) for index, *_ in PLANTED]
    for record, (_, column, value, words) in zip(refused, PLANTED):
        assert repr(column) in record["reason"] and repr(value) in record["reason"] and words in record["reason"]


def test_a_file_without_a_feature_fails_in_one_line_and_writes_nothing(home, table, tmp_path):
    path, rows = table
    lacking = tmp_path / "no_island.csv"
    with open(lacking, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=[k for k in rows[0] if k != "island"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows[:5])
    output = tmp_path / "out"
    result = turbotfx("score", "--data", str(lacking), "--output", str(output), home=home)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"turbotfx: error: {lacking} has no column 'island', which the model needs (it reads "
        f"{', '.join(f.name for f in datasets.load('penguins').model_features)}); add the column, or score another file"]
    assert list(tmp_path.iterdir()) == [lacking]


def test_an_output_is_replaced_only_with_force_and_only_when_a_scoring_wrote_it(home, table, scored, tmp_path):
    path, _ = table
    output = tmp_path / "scores"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    kept = cli("score", "--data", str(path), "--output", str(output), home=home)
    assert kept.exit_code == 2 and "already holds files" in kept.output and "--force" in kept.output
    forced_over_notes = cli("score", "--data", str(path), "--output", str(output), "--force", home=home)
    assert forced_over_notes.exit_code == 2 and "holds files no scoring wrote (notes.txt)" in forced_over_notes.output
    assert [p.name for p in output.iterdir()] == ["notes.txt"] and (output / "notes.txt").read_text() == "mine"
    (output / "notes.txt").unlink()
    assert cli("score", "--data", str(path), "--output", str(output), home=home).exit_code == 0

    forced = cli("score", "--data", str(path), "--output", str(output), "--output-format", "parquet",
                 "--id", "penguin_id", "--label", "stable", "--force", "--drift", "--format", "json", home=home)
    assert forced.exit_code == 0, forced.output
    outcome = json.loads(forced.stdout)
    # --drift: the same rows against the training split; the planted island is the one value
    # out of vocabulary, and the table the model was trained on has not drifted.
    rows = table[1]
    islands = [r["island"] for r in rows if r["island"]]
    assert outcome["drift"]["rows"] == len(rows) and outcome["drift"]["drifted"] == []
    assert outcome["drift"]["vocabulary_oov"]["island"] == pytest.approx(1 / len(islands))
    names = sorted(p.name for p in output.iterdir())
    assert "notes.txt" not in names and all(n.startswith(("scores-", "errors-")) for n in names), names
    assert [p.name for p in tmp_path.iterdir()] == ["scores"]  # no staging or replaced folder left
    parquet = [row for p in outcome["scores"] for row in pq.read_table(p).to_pylist()]
    as_csv = {r["penguin_id"]: r for r in _scores(scored)}
    assert len(parquet) == len(as_csv)
    for row in parquet:
        assert row["predicted_species"] == as_csv[row["penguin_id"]]["predicted_species"]
        assert row["probability_Adelie"] == float(as_csv[row["penguin_id"]]["probability_Adelie"])


def test_a_version_that_is_not_served_is_named(home, table, tmp_path):
    path, _ = table
    result = cli("score", "--data", str(path), "--output", str(tmp_path / "out"), "--model-version", "7",
                 home=home)
    assert result.exit_code == 2
    assert "no version 7 of model 'penguins'" in result.output
    canary = cli("score", "--data", str(path), "--output", str(tmp_path / "out"), "--label", "canary",
                 "--model-version", "7", home=home)
    assert canary.exit_code == 2 and "not allowed with argument" in canary.output


def test_the_store_says_which_model_scored_a_file_and_what_it_was_trained_on(first_run, home, table, scored):
    path, _ = table
    [version] = push.versions(first_run.config.serving_dir)
    scores_file = scored["scores"][0]
    result = cli("lineage", "--uri", scores_file, "--format", "json", home=home)
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    scoring = found["scoring"]
    assert scoring["output"] == scored["output"] and scoring["model_version"] == version
    assert scoring["inputs"] == [{"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                                  "size_bytes": path.stat().st_size}]
    assert (scoring["rows_scored"], scoring["rows_refused"]) == (scored["rows_scored"], len(PLANTED))
    # On from the version to the model the first run trained, and the data it was trained on.
    first = json.loads(cli("lineage", "--model-version", str(version), "--format", "json", home=first_run.home).stdout)
    assert found["model"]["id"] == first["model"]["id"] and found["pushed_model"]["version"] == str(version)
    assert found["dataset"]["file"] == first["dataset"]["file"] and found["dataset"]["file"].endswith("penguins.toml")
    text = cli("lineage", "--uri", scored["output"], home=home).output
    assert text.splitlines()[0].startswith(f"scores {scored['output']}: {scored['rows_scored']} rows of {path}")

    runs = json.loads(cli("runs", "--format", "json", home=home).stdout)
    scorings = [r for r in runs if r["kind"] == "score"]
    assert [(r["scored_version"], r["metric_value"], r["output"]) for r in scorings if r["output"] == scored["output"]
            ] == [(version, scored["rows_scored"], scored["output"])]
    assert [r["kind"] for r in runs].count("run") == 1


def test_what_would_lose_data_or_cannot_be_read_is_refused_in_one_line_before_any_work(home, table, tmp_path):
    path, rows = table
    store = home / "metadata" / "turbotfx.sqlite"
    before = store.read_bytes()
    inputs = tmp_path / "in"
    inputs.mkdir()
    latin1 = inputs / "latin1.csv"
    latin1.write_bytes(path.read_bytes().replace(b"Dream", "Dr\u00eaam".encode("latin-1"), 1))
    nul = inputs / "nul.csv"
    nul.write_bytes(path.read_bytes().replace(b"Dream", b"Dre\0am", 1))
    line = next(i for i, text in enumerate(path.read_text().splitlines(), start=1) if "Dream" in text)
    collide = tmp_path / "collide.csv"
    with open(collide, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["model_version", *rows[0]])
        writer.writeheader()
        writer.writerows({"model_version": "mine", **r} for r in rows[:5])
    cases = [
        (["--data", str(path), "--output", str(home), "--force"], f"--output {home} holds the workspace {home}"),
        (["--data", str(path), "--output", str(home.parent), "--force"], f"holds the workspace {home}"),
        (["--data", str(path), "--output", str(path.parent), "--force"], f"holds the input file {path}"),
        (["--data", str(latin1), "--output", str(tmp_path / "o")], f"{latin1} is not UTF-8 (byte 0xea on line {line})"),
        (["--data", str(nul), "--output", str(tmp_path / "o")], f"{nul} line {line} holds a NUL byte"),
        (["--data", str(inputs), "--output", str(tmp_path / "o")], f"--data {inputs} is a folder"),
        (["--data", str(inputs / "*.parquet"), "--output", str(tmp_path / "o")], "no file matches"),
        (["--data", str(collide), "--output", str(tmp_path / "o"), "--id", "model_version"],
         "--id 'model_version' has the name of a column the scores add"),
    ]
    (inputs / "model_version.csv").write_text("")  # a file the glob of *.parquet must not name
    for args, words in cases:
        result = cli("score", *args, home=home)
        assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, (args, result.output)
        assert words in result.output, (args, result.output)
    assert store.read_bytes() == before and path.is_file() and not (tmp_path / "o").exists()


def test_a_ragged_row_is_refused_and_a_table_the_schema_refuses_whole_writes_nothing(home, table, tmp_path):
    path, rows = table
    header, *lines = path.read_text().splitlines()
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("\n".join([header, lines[0] + ",1,2", *lines[1:5]]) + "\n")
    result = cli("score", "--data", str(ragged), "--output", str(tmp_path / "r"), "--id", "penguin_id",
                 "--format", "json", home=home)
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    [errors] = outcome["errors"]
    with open(errors, newline="") as handle:
        [refused] = list(csv.DictReader(handle))
    assert (refused["line"], refused["penguin_id"]) == ("2", rows[0]["penguin_id"])
    assert refused["reason"].startswith("has 2 more cell(s) than the header has columns")

    atlantis = tmp_path / "atlantis.csv"
    with open(atlantis, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows({**r, "island": "Atlantis"} for r in rows[:20])
    refused_all = cli("score", "--data", str(atlantis), "--output", str(tmp_path / "a"), home=home)
    assert refused_all.exit_code == 2 and len(refused_all.output.strip().splitlines()) == 1, refused_all.output
    assert "the schema refused every row" in refused_all.output and "'Atlantis'" in refused_all.output
    empty = tmp_path / "empty.csv"
    empty.write_text(header + "\n")
    nothing = cli("score", "--data", str(empty), "--output", str(tmp_path / "e"), home=home)
    assert nothing.exit_code == 2 and f"--data {empty} holds no rows" in nothing.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["atlantis.csv", "empty.csv", "r", "ragged.csv"]
