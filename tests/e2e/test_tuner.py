"""The Tuner through `turbotfx run --tune-trials N`, as a user runs it: every trial in MLMD,
the Trainer trained with the best one's values, the result reused by a later run over the
same search space and not over another, and trials of one study shared by two processes on
the test MariaDB server.

Expected values come from the trials as MLMD recorded them (the best is recomputed here from
their scores), from the flags given and from TrainingConfig's declared search space, not from
the code that picks the best.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from components.tuner import keys as tuner_keys
from components.tuner import worker
from pipeline.config import PipelineConfig
from pipeline.store.connection import open_store
from pipeline.store.url import PASSWORD_ENV_VAR, sqlalchemy_url, sqlite_url
from tests.conftest import CliResult, cli, open_to_others, turbotfx
from trainer_module import search_space
from trainer_module.config import TrainingConfig

pytestmark = pytest.mark.e2e

TRIALS = 6
# Short trials: what is checked is the bookkeeping, not the model. The learning rate given lies
# outside the searched range, so no trial tries it and a Trainer that ignored the tuning result
# would train with it: the checks below cannot pass by the defaults winning.
UNTUNED_LEARNING_RATE = 0.05
RUN_ARGS = ("--epochs", "8", "--min-accuracy", "0.5", "--learning-rate", str(UNTUNED_LEARNING_RATE))
SEARCHED = tuple(search_space.space("dnn"))
# MLMD's SQLite store keeps a double property to six decimal places (0.005873669 reads back
# 0.005874); the trials' JSON text keeps every digit.
MLMD_SQLITE_DOUBLE = 5e-7


@dataclasses.dataclass(frozen=True)
class TunedRun:
    home: Path
    result: CliResult


@pytest.fixture(scope="module")
def tuned(tmp_path_factory) -> TunedRun:
    home = tmp_path_factory.mktemp("tuned")
    result = cli("run", *RUN_ARGS, "--tune-trials", str(TRIALS), home=home)
    assert result.exit_code == 0, result.output
    return TunedRun(home=home, result=result)


def store_of(home: Path):
    return open_store(sqlite_url(PipelineConfig(home=str(home)).metadata_path))


def tuning_results(store) -> list:
    return sorted(store.get_artifacts_by_type("HyperParameters"), key=lambda a: a.id)


def trials_of(artifact) -> list[dict]:
    from components.reporting_trainer.keys import from_json_property

    return from_json_property(artifact.custom_properties[tuner_keys.TRIALS_PROPERTY].string_value)


def latest_model(store):
    return max(store.get_artifacts_by_type("Model"), key=lambda a: a.id)


def trainer_inputs(store, model, key: str) -> list[int]:
    """The artifact ids the Trainer that made model took under key."""
    from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

    trainer = [e.execution_id for e in store.get_events_by_artifact_ids([model.id]) if e.type == mlmd_pb.Event.OUTPUT]
    return [e.artifact_id for e in store.get_events_by_execution_ids(trainer)
            if e.type == mlmd_pb.Event.INPUT and e.path.steps[0].key == key]


def trained_value(model, knob: str):
    value = model.custom_properties["training_" + knob]
    kind = value.WhichOneof("value")
    found = getattr(value, kind)
    return json.loads(found) if knob == "hidden_units" else found


def executions_of(store, type_suffix: str) -> list:
    names = {t.id: t.name for t in store.get_execution_types()}
    return [e for e in store.get_executions() if names[e.type_id].endswith(type_suffix)]


def test_every_trial_is_recorded_and_the_trainer_trains_with_the_best(tuned):
    # The trials' records and everything else the run wrote: owner-only.
    assert open_to_others(tuned.home) == []
    store = store_of(tuned.home)
    [result] = tuning_results(store)
    trials = trials_of(result)
    assert [t["number"] for t in trials] == list(range(TRIALS))
    assert {t["state"] for t in trials} <= {"complete", "pruned"}
    assert all(set(t["values"]) == set(SEARCHED) for t in trials)
    assert len({json.dumps(t["values"], sort_keys=True) for t in trials}) == TRIALS, "trials repeated a configuration"
    # The first trial is the configuration the run would train untuned, but for the knob whose
    # value lies outside the searched range.
    untuned = PipelineConfig(home=str(tuned.home)).training.to_config()
    assert {k: v for k, v in trials[0]["values"].items() if k != "learning_rate"} == {
        k: untuned[k] for k in SEARCHED if k != "learning_rate"}
    assert all(t["values"]["learning_rate"] <= 0.03 for t in trials)
    complete = [t for t in trials if t["state"] == "complete"]
    best = min(complete, key=lambda t: t["score"])
    assert result.custom_properties[tuner_keys.BEST_TRIAL].int_value == best["number"]
    assert result.custom_properties[tuner_keys.TRIAL_COUNT].int_value == TRIALS
    assert result.custom_properties[tuner_keys.PRUNED_COUNT].int_value == sum(t["state"] == "pruned" for t in trials)
    # The Trainer took this result and trained with the best trial's values (its report, as run_fn wrote it).
    model = latest_model(store)
    assert trainer_inputs(store, model, "hyperparameters") == [result.id]
    for knob, value in best["values"].items():
        assert trained_value(model, knob) == pytest.approx(value, abs=MLMD_SQLITE_DOUBLE), knob
    # One console line per trial, and the total.
    lines = [line.strip() for line in tuned.result.output.splitlines()]
    assert [line.split()[1] for line in lines if line.startswith("trial ")] == [f"{n}/{TRIALS}" for n in
                                                                               range(1, TRIALS + 1)]
    assert any(line.startswith(f"tuning: {TRIALS} trials") and f"best trial {best['number'] + 1}," in line
               for line in lines), tuned.result.output


def test_hopeless_trials_are_pruned_and_recorded_as_pruned(tuned):
    # Seeded TPE samples its first trials at random: on penguins some land on a learning rate
    # and batch so slow that by epoch 4 their validation loss is far above the median.
    [result] = tuning_results(store_of(tuned.home))
    pruned = [t for t in trials_of(result) if t["state"] == "pruned"]
    assert pruned, trials_of(result)
    assert all(t["steps"] < 8 for t in pruned)


def test_tune_show_and_lineage_show_the_trials(tuned):
    shown = turbotfx("tune", "show", home=tuned.home)
    assert shown.exit_code == 0, shown.output
    [result] = tuning_results(store_of(tuned.home))
    trials = trials_of(result)
    rows = [line.split() for line in shown.output.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [(int(r[0]), r[1]) for r in rows] == [(t["number"] + 1, t["state"]) for t in trials]
    assert sum(line.endswith(" *") for line in shown.output.splitlines()) == 1
    lineage = turbotfx("lineage", "--latest", "--format", "json", home=tuned.home)
    document = json.loads(lineage.stdout)
    assert document["tuning"]["trials"] == TRIALS and document["tuning"]["reused"] is False
    best = trials[document["tuning"]["best_trial"]]
    assert {k: document["trainer"]["hyperparameters"][k] for k in SEARCHED} == best["values"]


def test_a_rerun_without_tune_trials_reuses_the_result(tuned, tmp_path):
    home = tmp_path / "home"
    shutil.copytree(tuned.home, home, symlinks=True)
    store = store_of(home)
    [result] = tuning_results(store)
    # Not blessing is not the point here: the copy misses the cache, so the Trainer trains
    # again (unseeded) and may trail the served model by more than the allowed drop.
    rerun = cli("run", *RUN_ARGS, "--allow-unblessed", home=home)
    assert rerun.exit_code == 0, rerun.output
    assert "trial 1/" not in rerun.output and f"tuning: reused result {result.id}" in rerun.output
    store = store_of(home)
    assert len(tuning_results(store)) == 1 and len(executions_of(store, "Tuner")) == 1
    model = latest_model(store)
    assert trainer_inputs(store, model, "hyperparameters") == [result.id]
    best = trials_of(result)[result.custom_properties[tuner_keys.BEST_TRIAL].int_value]
    assert trained_value(model, "learning_rate") == pytest.approx(best["values"]["learning_rate"],
                                                                  abs=MLMD_SQLITE_DOUBLE)

    # Another search space (fewer knobs) answers another question: nothing reused, defaults.
    narrowed = cli("run", *RUN_ARGS, "--tune-knobs", "learning_rate,dropout", "--allow-unblessed", home=home)
    assert narrowed.exit_code == 0, narrowed.output
    store = store_of(home)
    model = latest_model(store)
    assert trainer_inputs(store, model, "hyperparameters") == []
    assert trained_value(model, "learning_rate") == UNTUNED_LEARNING_RATE
    assert "tuning:" not in narrowed.output


def test_two_processes_sharing_a_study_on_mariadb_split_the_trials(tuned, mariadb_server, tmp_path, monkeypatch):
    database = mariadb_server.create_database()
    store = store_of(tuned.home)
    [result] = tuning_results(store)
    transform = executions_of(store, "Transform")[0]
    from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

    outputs = store.get_artifacts_by_id([e.artifact_id for e in store.get_events_by_execution_ids([transform.id])
                                         if e.type == mlmd_pb.Event.OUTPUT])
    transform_graph = next(a.uri for a in outputs if a.uri.split("/")[-2] == "transform_graph")
    examples = next(a.uri for a in outputs if a.uri.split("/")[-2] == "transformed_examples")
    trainer = executions_of(store, "Trainer")[0]
    custom_config = json.loads(trainer.custom_properties["custom_config"].string_value)
    from trainer_module import studies
    trials = 6
    request = studies.StudyRequest(family="dnn", trials=trials, study_name="shared",
                                  knobs=("learning_rate", "dropout"))
    processes = []
    for seed in (1, 2):
        spec = tmp_path / f"worker-{seed}.json"
        spec.write_text(json.dumps(worker.spec(
            request, sqlalchemy_url(database.url()), PASSWORD_ENV_VAR, [f"{examples}/Split-train/*"],
            transform_graph, custom_config, TrainingConfig.from_config(custom_config), seed=seed)))
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "components.tuner.worker", str(spec)], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env={**os.environ, PASSWORD_ENV_VAR: database.password}))
    ran = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err[-3000:]
        ran.append(set(json.loads(out.strip().splitlines()[-1])["ran_here"]))
    assert ran[0] and ran[1], f"one process ran every trial: {ran}"
    assert not ran[0] & ran[1]
    # Each process stops once the study holds `trials`; one may have started its last as the other did.
    assert ran[0] | ran[1] == set(range(len(ran[0] | ran[1]))) and trials <= len(ran[0] | ran[1]) <= trials + 1
    import optuna

    monkeypatch.setenv(PASSWORD_ENV_VAR, database.password)
    study = optuna.load_study(study_name="shared",
                              storage=worker.with_password(sqlalchemy_url(database.url()), PASSWORD_ENV_VAR))
    assert len(study.trials) == len(ran[0] | ran[1])


def test_the_gbt_family_tunes_its_own_knobs(tmp_path):
    home = tmp_path / "gbt"
    # 50 trees lie outside the searched range: a Trainer ignoring the result would keep them.
    run = cli("run", "--model", "gbt", "--gbt-num-trees", "50", "--min-accuracy", "0.5", "--tune-trials", "3",
                   home=home)
    assert run.exit_code == 0, run.output
    store = store_of(home)
    [result] = tuning_results(store)
    trials = trials_of(result)
    assert len(trials) == 3 and all(set(t["values"]) == set(search_space.space("gbt")) for t in trials)
    best = trials[result.custom_properties[tuner_keys.BEST_TRIAL].int_value]
    assert best["score"] == min(t["score"] for t in trials if t["state"] == "complete")
    model = latest_model(store)
    for knob, value in best["values"].items():
        assert trained_value(model, knob) == pytest.approx(value, abs=MLMD_SQLITE_DOUBLE), knob
    assert trained_value(model, "gbt_num_trees") != 50


def test_parallel_bagged_trials_run_in_several_processes_of_one_study(tmp_path):
    home = tmp_path / "parallel"
    # Three bagged folds: each trial trains the run's three members, scored by their mean loss.
    run = cli("run", *RUN_ARGS, "--bag-folds", "3", "--tune-trials", "4", "--tune-parallelism", "2",
                   "--tune-knobs", "learning_rate,dropout", home=home)
    assert run.exit_code == 0, run.output
    assert open_to_others(home) == []  # the workers' study and models too
    [result] = tuning_results(store_of(home))
    trials = trials_of(result)
    # Both processes stop once the study holds 4 trials; one may have started a fifth meanwhile.
    assert 4 <= len(trials) <= 5 and [t["number"] for t in trials] == list(range(len(trials)))
    assert {t["state"] for t in trials} <= {"complete", "pruned"}
    assert len({t["ran_by"] for t in trials}) == 2, trials
    for trial in trials:
        folds = trial["fold_losses"]
        assert (len(folds) == 3) == (trial["state"] == "complete") and trial["steps"] == len(folds)
        if trial["state"] == "complete":
            assert trial["score"] == pytest.approx(sum(folds) / 3)
    best = trials[result.custom_properties[tuner_keys.BEST_TRIAL].int_value]
    assert best["score"] == min(t["score"] for t in trials if t["state"] == "complete")
    assert trained_value(latest_model(store_of(home)), "learning_rate") == pytest.approx(
        best["values"]["learning_rate"], abs=MLMD_SQLITE_DOUBLE)


def test_a_failed_trial_is_recorded_with_its_cause_and_the_study_goes_on(tmp_path):
    home = tmp_path / "failing"
    # Gradient accumulation trains on whole batches only: the untuned first trial's batch of 256
    # is more than the penguins fit slice holds, so it fails; the sampled batches mostly fit.
    run = cli("run", "--epochs", "4", "--min-accuracy", "0.5", "--accumulation-steps", "2",
                   "--batch-size", "256", "--tune-trials", "3", "--tune-knobs", "batch_size,learning_rate",
                   home=home)
    assert run.exit_code == 0, run.output
    [result] = tuning_results(store_of(home))
    trials = trials_of(result)
    assert trials[0]["values"]["batch_size"] == 256 and trials[0]["state"] == "failed"
    assert "fewer rows than one global batch" in trials[0]["error"] and trials[0]["score"] is None
    assert result.custom_properties[tuner_keys.FAILED_COUNT].int_value == sum(t["state"] == "failed" for t in trials)
    best = trials[result.custom_properties[tuner_keys.BEST_TRIAL].int_value]
    assert best["state"] == "complete" and best["values"]["batch_size"] < 256
    assert "trial 1/3  failed" in run.output
    shown = turbotfx("tune", "show", home=home)
    assert "fewer rows than one global batch" in shown.output
