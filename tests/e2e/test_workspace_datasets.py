"""One workspace, two datasets: penguins (CSV, multiclass; the shared first run) and a
user's Parquet regression table. Each model is compared only with a baseline of its own
dataset, both are pushed and served, and `runs`, `lineage`, `serving status` and `predict`
see both and say which is which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline.config import PipelineConfig
from pipeline.provenance.graph import event_key
from pipeline.store.connection import open_store
from pipeline.store.url import sqlite_url
from tests.conftest import ONE_MODEL_ARGS, CliResult, cli, turbotfx
from tests.e2e.test_own_data import CHARGES, CHURNED, PLAN, SEATS, SPEND, TENURE, customers

pytestmark = pytest.mark.e2e

SPEND_MODEL = "spend"


def _evaluator_inputs(home: Path) -> list[tuple[int, int | None]]:
    """(candidate, baseline) model ids of every Evaluator execution, oldest first, from MLMD."""
    store = open_store(sqlite_url(PipelineConfig(home=str(home)).metadata_path))
    evaluators = sorted((e for t in store.get_execution_types() if t.name.endswith(".Evaluator")
                         for e in store.get_executions_by_type(t.name)), key=lambda e: e.id)
    found = []
    for evaluator in evaluators:
        inputs = {event_key(e): e.artifact_id for e in store.get_events_by_execution_ids([evaluator.id])
                  if e.type == mlmd_pb.Event.INPUT}
        found.append((inputs["model"], inputs.get("baseline_model")))
    return found


def _json(result: CliResult):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_two_datasets_in_one_workspace(first_run_copy: CliResult, tmp_path: Path):
    home = first_run_copy.home
    [penguins_run] = _json(turbotfx("runs", "--format", "json", home=home))
    assert penguins_run["model_name"] == "penguins" and penguins_run["pushed_version"]

    data_root = tmp_path / "spend-data"
    data_root.mkdir()
    customers(seed=3).drop(columns=[CHURNED]).to_parquet(data_root / "part-0.parquet", index=False)
    dataset_file = tmp_path / f"{SPEND_MODEL}.toml"
    init = cli("init", "--data-root", str(data_root), "--label", SPEND, "--output", str(dataset_file), home=home)
    assert init.exit_code == 0, init.output

    # The penguins model is the latest push in the workspace, and another dataset's: no baseline.
    first = cli("run", "--dataset", str(dataset_file), "--epochs", "20", *ONE_MODEL_ARGS, "--json",
                     home=home)
    summary = _json(first)  # stdout holds one JSON document; progress went to stderr
    assert summary["model_name"] == SPEND_MODEL and summary["status"] == "COMPLETE"
    assert summary["verdict"]["blessed"] is True and summary["pushed_version"], summary
    assert summary["verdict"]["metric"] == "rmse" and summary["verdict"]["trivial"] is not None
    assert summary["verdict"]["value"] < summary["verdict"]["trivial"]
    spend_first = summary["model_id"]
    assert _evaluator_inputs(home)[-1] == (spend_first, None)

    # A second spend model (one more epoch: a new Trainer run) is compared with the first.
    second = cli("run", "--dataset", str(dataset_file), "--epochs", "21", *ONE_MODEL_ARGS,
                      "--allow-unblessed", home=home)
    assert second.exit_code == 0, second.output
    spend_second, baseline = _evaluator_inputs(home)[-1]
    assert spend_second != spend_first and baseline == spend_first
    assert f"served baseline, model {spend_first}" in second.output

    # Every dataset's runs, each named.
    listed = _json(turbotfx("runs", "--format", "json", home=home))
    assert [(r["model_name"], r["model_id"]) for r in listed] == [
        (SPEND_MODEL, spend_second), (SPEND_MODEL, spend_first), ("penguins", penguins_run["model_id"])]
    assert SPEND_MODEL in turbotfx("runs", home=home).output

    # lineage --latest: the newest push overall (a spend model: the second if it was blessed),
    # or the newest of the model named.
    newest_push = next(r["model_id"] for r in listed if r["pushed_version"])
    assert newest_push in (spend_first, spend_second)
    assert _json(turbotfx("lineage", "--latest", "--format", "json", home=home))["model"]["id"] == newest_push
    penguins = _json(turbotfx("lineage", "--latest", "--model-name", "penguins", "--format", "json", home=home))
    assert penguins["model"]["id"] == penguins_run["model_id"]
    assert f"({SPEND_MODEL})" in turbotfx("lineage", "--latest", "--model-name", SPEND_MODEL, home=home).output

    # serving status: both models, each with its own stable version.
    status = _json(turbotfx("serving", "status", "--format", "json", home=home))
    by_model = {model["model"]: model for model in status["models"]}
    assert set(by_model) == {"penguins", SPEND_MODEL}
    assert str(by_model["penguins"]["stable"]) == penguins_run["pushed_version"]

    # predict: with two models it asks which; named, it finds the dataset the runs recorded.
    row = json.dumps({CHARGES: 70.0, TENURE: 12, PLAN: "plus", SEATS: 2})
    ambiguous = cli("predict", "--json", row, home=home)
    assert ambiguous.exit_code == 2 and "serves 2 models (penguins, spend)" in ambiguous.output, ambiguous.output
    assert "Traceback" not in ambiguous.output
    named = _json(cli("predict", "--model-name", SPEND_MODEL, "--format", "json", "--json", row, home=home))
    assert len(named["predictions"]) == 1 and isinstance(named["predictions"][0]["value"], float)
