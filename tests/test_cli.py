"""Bad input through the real CLI: one clear message, a non-zero exit, nothing pushed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from pipeline import datasets
from pipeline.datasets import prepare
from tests.conftest import cli, turbotfx
from tests.read_only import read_only
from tests.test_store_damage import make_store, overwrite_middle


def _serving_versions(home) -> list:
    serving = home / "serving"
    return [p for p in serving.rglob("*") if p.is_dir()] if serving.exists() else []


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "--dataset", "iris"], "no dataset file 'iris'; give a built-in (penguins, synthetic)"),
        (["run", "--epochs", "0"], "epochs must be at least 1"),
        (["run", "--epochs", "many"], "argument --epochs: invalid int value: 'many'"),
        (["run", "--split", "4-1"], "use e.g. --split 4:1"),
        (["run", "--beam-mode", "turbo"], "invalid choice: 'turbo'"),
        (["run", "--rows", "500"], "--rows sizes the synthetic dataset only"),
        (["run", "--metadata-url", "mysql://mlmd:hunter2@127.0.0.1/md"], "TURBOTFX_METADATA_PASSWORD instead"),
        (["run", "--metadata-url", "oracle://u@h/db"], "unsupported scheme"),
        (["run", "--min-accuracy", "2"], "blessing threshold on accuracy must be in [0, 1]"),
        (["run", "--profile-batches", "4,2"], "profile batches '4,2' must be START,END with 1 <= START <= END"),
        (["runs", "--limit", "-1"], "argument --limit: must be at least 0, got -1"),
    ],
)
def test_invalid_flags(tmp_path, args, message):
    result = turbotfx(*args, home=tmp_path)
    assert result.exit_code == 2
    assert message in result.output
    assert "hunter2" not in result.output, "a password never reaches the output"
    assert not _serving_versions(tmp_path)


def test_data_root_without_csv(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = turbotfx("run", "--data-root", str(empty), home=tmp_path / "ws")
    assert result.exit_code == 2
    assert "holds no .csv file" in result.output


def test_json_gets_a_document_on_stdout_for_bad_input_too(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli("run", "--json", "--data-root", str(empty), home=tmp_path / "ws")
    assert result.exit_code == 2, result.output
    document = json.loads(result.stdout)
    assert "holds no .csv file" in document["error"] and document["exit_code"] == 2 and document["run_id"] is None
    stderr = result.output[len(result.stdout):]
    assert stderr.strip() == f"turbotfx: error: {document['error']}"


def test_csv_without_label_column(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "rows.csv").write_text("island,sex,bill_length_mm\nDream,male,39.1\n")
    result = turbotfx("run", "--data-root", str(root), home=tmp_path / "ws")
    assert result.exit_code == 2
    assert "no label column 'species'" in result.output


def test_unwritable_home(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    result = turbotfx("run", home=blocker / "ws")
    assert result.exit_code == 2
    assert "is not writable" in result.output and "--home" in result.output


def test_schema_infer_writes_a_schema_to_curate(tmp_path):
    root = tmp_path / "data"
    prepare.write_penguins_csv(root / "penguins.csv", datasets.load("penguins"))
    output = tmp_path / "proposed" / "schema.pbtxt"
    # In this process: tests/test_init.py runs `schema infer` in a process of its own, as a user does.
    result = cli("schema", "infer", "--data-root", str(root), "--output", str(output), home=tmp_path / "ws")
    assert result.exit_code == 0, result.output
    assert f"inferred schema written to {output}" in result.output
    text = output.read_text()
    for column in ("species", "island", "body_mass_g"):
        assert f'name: "{column}"' in text
    assert 'value: "Torgersen"' in text


def test_schema_infer_never_overwrites_a_file_unless_forced(tmp_path):
    root = tmp_path / "data"
    prepare.write_penguins_csv(root / "penguins.csv", datasets.load("penguins"))
    curated = tmp_path / "penguins.schema.pbtxt"
    curated.write_text("# curated by hand\n")
    refused = cli("schema", "infer", "--data-root", str(root), "--output", str(curated), home=tmp_path / "ws")
    assert refused.exit_code == 2 and "exists" in refused.output and "--force" in refused.output, refused.output
    assert curated.read_text() == "# curated by hand\n"
    forced = cli("schema", "infer", "--data-root", str(root), "--output", str(curated), "--force",
                 home=tmp_path / "ws")
    assert forced.exit_code == 0, forced.output
    assert 'name: "species"' in curated.read_text()


def test_schema_infer_on_a_missing_directory(tmp_path):
    result = cli("schema", "infer", "--data-root", str(tmp_path / "nope"), home=tmp_path / "ws")
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_unreachable_metadata_server_stops_the_run_before_any_work(tmp_path):
    import portpicker

    port = portpicker.pick_unused_port()
    result = turbotfx("run", "--metadata-url", f"mysql://mlmd@127.0.0.1:{port}/md", home=tmp_path)
    assert result.exit_code == 2
    assert f"cannot open the metadata store at mysql://mlmd@127.0.0.1:{port}/md" in result.output
    assert not (tmp_path / "data").exists() and not _serving_versions(tmp_path)


def test_a_run_on_a_damaged_store_stops_before_any_work_and_leaves_the_file_as_it_was(tmp_path):
    store = tmp_path / "metadata" / "turbotfx.sqlite"
    make_store(store, runs=2)
    overwrite_middle(store)
    damaged = store.read_bytes()
    result = turbotfx("run", home=tmp_path)
    assert result.exit_code == 2
    assert result.output.startswith(f"turbotfx: error: the metadata store {store} is damaged (corrupt")
    assert result.output.count("\n") == 1, "one line"
    assert store.read_bytes() == damaged
    assert not (tmp_path / "data").exists() and not _serving_versions(tmp_path)


def test_a_lock_path_that_is_a_directory_stops_the_run_with_one_line(tmp_path):
    lock = tmp_path / "metadata" / "turbotfx.sqlite.lock"
    lock.mkdir(parents=True)
    result = turbotfx("run", home=tmp_path)
    assert result.exit_code == 2
    assert result.output == (f"turbotfx: error: the lock file {lock} of the SQLite metadata store is a "
                             f"directory; remove it (rmdir {lock}) and run again\n")


@pytest.mark.parametrize("args", [["--help"], ["runs", "--help"]], ids=["help", "runs-help"])
def test_a_reader_that_goes_away_is_no_traceback(args, tmp_path):
    """`turbotfx ... | head`: the pipe closes before turbotfx writes."""
    process = subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env={**os.environ, "TURBOTFX_HOME": str(tmp_path)})
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr and "Exception ignored" not in stderr, stderr
    assert process.returncode in (0, 141)


def test_serving_status_warns_of_a_label_on_a_version_that_is_gone(tmp_path):
    from serving import model_config

    serving_root = tmp_path / "ws" / "serving"
    for version in (10, 11):
        (serving_root / "penguins" / str(version)).mkdir(parents=True)
        model_config.record_push(serving_root, "penguins", version)
    (serving_root / "penguins" / "10").rmdir()  # the stable version's directory deleted by hand
    result = turbotfx("serving", "status", home=tmp_path / "ws")
    assert result.exit_code == 0, result.output
    assert ("warning: the stable label of 'penguins' points at version 10, which is not in "
            f"{serving_root / 'penguins'}") in result.output
    assert "canary label" not in result.output


def test_serving_status_answers_on_a_read_only_workspace_and_names_a_missing_one(tmp_path):

    from serving import model_config

    serving_root = tmp_path / "ws" / "serving"
    (serving_root / "penguins" / "10").mkdir(parents=True)
    model_config.record_push(serving_root, "penguins", 10)
    with read_only(serving_root):
        result = turbotfx("serving", "status", home=tmp_path / "ws")
    assert result.exit_code == 0, result.output
    assert "stable 10, canary 10" in result.output and "cannot be written" in result.output

    missing = turbotfx("serving", "status", home=tmp_path / "nowhere")
    assert missing.exit_code == 2 and f"no workspace at {tmp_path / 'nowhere'}" in missing.output, missing.output
    assert not (tmp_path / "nowhere").exists()
