"""What the metadata store says about pushes, labels and unfinished runs, read back from a
hand-built SQLite MLMD store laid out as TFX lays it out (tests/test_run_summary.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.atomic_pusher import keys as pusher_keys
from pipeline.provenance import pushes, run_state, runs, summary
from pipeline.store import connection
from pipeline.store.connection import open_store
from pipeline.store.url import sqlite_url
from tests.test_run_summary import Store, pushed_model

PUSHER = "pusher.component.Pusher"  # Store names the type tfx.components.<node>, as TFX does


def labelled_push(version: str, stable: int, model: str = "penguins"):
    artifact = pushed_model(version)
    artifact.set_string_custom_property("pushed_destination", f"/somewhere/serving/{model}/{version}")
    artifact.set_string_custom_property(pusher_keys.SERVING_LABELS,
                                        json.dumps({"stable": stable, "canary": int(version)}))
    return artifact


def test_history_has_every_pushed_version_and_the_latest_labels(tmp_path) -> None:
    store = Store(open_store(sqlite_url(tmp_path / "store.sqlite")))
    run = store.run("run-1")
    store.execution(run, PUSHER, outputs=[labelled_push("100", stable=100)])
    store.execution(run, PUSHER, outputs=[labelled_push("200", stable=100)])
    store.execution(run, PUSHER, outputs=[pushed_model(None)])  # not blessed: nothing pushed
    store.execution(run, PUSHER, outputs=[labelled_push("300", stable=300, model="other")])

    history = pushes.push_history(store.mlmd, "penguins", live_runs_possible=False)
    assert history.versions == {100, 200}
    assert history.labels == {"stable": 100, "canary": 200}

    pushes.record_label_change(store.mlmd, "penguins", stable=200, canary=200)  # a later promote
    assert pushes.push_history(store.mlmd, "penguins", live_runs_possible=False).labels == {"stable": 200,
                                                                                          "canary": 200}
    assert pushes.push_history(store.mlmd, "other", live_runs_possible=False).labels == {"stable": 300,
                                                                                        "canary": 300}


def test_an_unfinished_pusher_marks_a_push_in_flight_only_while_a_run_may_live(tmp_path) -> None:
    store = Store(open_store(sqlite_url(tmp_path / "store.sqlite")))
    run = store.run("run-1")
    store.execution(run, PUSHER, state=mlmd_pb.Execution.RUNNING)
    [execution] = store.mlmd.get_executions()
    live = pushes.push_history(store.mlmd, "penguins", live_runs_possible=True)
    assert live.in_flight_since == execution.create_time_since_epoch // 1000
    assert pushes.push_history(store.mlmd, "penguins", live_runs_possible=False).in_flight_since is None


def test_aborting_marks_only_the_unfinished_executions(tmp_path) -> None:
    store = Store(open_store(sqlite_url(tmp_path / "store.sqlite")))
    done, killed = store.run("run-1"), store.run("run-2")
    store.execution(done, "Trainer")
    store.execution(killed, "Trainer")
    store.execution(killed, "Evaluator", state=mlmd_pb.Execution.RUNNING)
    assert [row["status"] for row in runs.list_runs(store.mlmd)] == ["RUNNING", "COMPLETE"]
    # Displayed as aborted once no run can be alive, before anything is written.
    assert [row["status"] for row in runs.list_runs(store.mlmd, live_runs_possible=False)] == ["ABORTED", "COMPLETE"]

    assert run_state.abort_unfinished(store.mlmd, "run-2") == ["run-2"]

    states = sorted(mlmd_pb.Execution.State.Name(e.last_known_state) for e in store.mlmd.get_executions())
    assert states == ["CANCELED", "COMPLETE", "COMPLETE"]
    assert [row["status"] for row in runs.list_runs(store.mlmd)] == ["ABORTED", "COMPLETE"]
    assert summary.latest_run(store.mlmd, "turbotfx").status == "ABORTED"
    assert run_state.abort_unfinished(store.mlmd) == []  # nothing left to mark


def test_a_run_interrupted_between_two_components_is_aborted(tmp_path) -> None:
    store = Store(open_store(sqlite_url(tmp_path / "store.sqlite")))
    run = store.run("run-1")
    store.execution(run, "Trainer")  # finished; Ctrl-C came before the next one started
    assert summary.latest_run(store.mlmd, "turbotfx").status == "COMPLETE"
    assert run_state.abort_unfinished(store.mlmd, "run-1") == ["run-1"]
    assert summary.latest_run(store.mlmd, "turbotfx").status == "ABORTED"


def test_a_run_may_be_live_only_while_its_process_is(tmp_path) -> None:
    url = sqlite_url(tmp_path / "store.sqlite")
    assert connection.run_may_be_live(url) is False  # no lock file: no run ever held it
    with connection.exclusive_run(url):
        assert connection.run_may_be_live(url) is True
    assert connection.run_may_be_live(url) is False  # released
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "store.sqlite.lock").write_text(dead.stdout.strip())  # what a kill -9 leaves
    assert connection.run_may_be_live(url) is False
    (tmp_path / "store.sqlite.lock").write_text(str(os.getpid()))
    assert connection.run_may_be_live(url) is True
    assert connection.run_may_be_live("mysql://user@127.0.0.1:3306/db") is True  # other machines' runs


def test_a_run_killed_between_two_components_is_aborted_once_no_process_holds_the_store(tmp_path) -> None:
    store = Store(open_store(sqlite_url(tmp_path / "store.sqlite")))
    run_state.begin(store.mlmd, "turbotfx", "run-1")  # what `turbotfx run` registers before TFX starts
    run = store.mlmd.get_context_by_type_and_name("pipeline_run", "run-1").id
    assert runs.list_runs(store.mlmd, pipeline_name="turbotfx")[0]["run_id"] == "run-1"  # under its pipeline
    store.execution(run, "Trainer")  # finished; the kill came before the next component registered
    assert runs.list_runs(store.mlmd)[0]["status"] == "RUNNING"
    assert runs.list_runs(store.mlmd, live_runs_possible=False)[0]["status"] == "ABORTED"
    assert run_state.abort_unfinished(store.mlmd) == ["run-1"]  # what the next run records
    assert runs.list_runs(store.mlmd)[0]["status"] == "ABORTED"

    run_state.begin(store.mlmd, "turbotfx", "run-2")
    run_state.finish(store.mlmd, "run-2")  # ended on its own, nothing executed
    assert run_state.abort_unfinished(store.mlmd) == []


def test_a_pusher_unfinished_for_longer_than_a_push_takes_is_not_in_flight(tmp_path, monkeypatch) -> None:
    store = Store(open_store(sqlite_url(tmp_path / "store.sqlite")))
    store.execution(store.run("run-1"), PUSHER, state=mlmd_pb.Execution.RUNNING)
    assert pushes.push_history(store.mlmd, "penguins", live_runs_possible=True).in_flight_since is not None
    monkeypatch.setattr(pushes, "PUSH_IN_FLIGHT_LIMIT_S", -60)  # as if it had started an hour ago
    assert pushes.push_history(store.mlmd, "penguins", live_runs_possible=True).in_flight_since is None


def _two_pipelines_pushed(tmp_path):
    """The default pipeline and exp2, each with its own store, each pushed once into the one
    serving directory with its push recorded: (first config, exp2's config, stores by name)."""
    from pipeline.config import PipelineConfig
    from serving import publish
    from tests.test_push_transaction import saved_model

    first_config = PipelineConfig(home=str(tmp_path / "ws"))
    other_config = PipelineConfig(home=str(tmp_path / "ws"), pipeline_name="exp2")
    source = saved_model(tmp_path / "model")
    stores = {}
    for config in (first_config, other_config):
        version, _, labels = publish.push_and_label(source, config.serving_dir, {})
        stores[config.pipeline_name] = Store(open_store(sqlite_url(config.metadata_path)))
        stores[config.pipeline_name].execution(stores[config.pipeline_name].run("run-1"), PUSHER,
                                               outputs=[labelled_push(str(version), stable=labels["stable"])])
    return first_config, other_config, stores


def test_every_store_of_the_workspace_vouches_for_its_pushes(tmp_path) -> None:
    """Each --pipeline-name keeps a store of its own and pushes into the one serving directory."""
    from pipeline import workspace
    from serving import model_config
    from serving import push as push_lib

    first_config, other_config, stores = _two_pipelines_pushed(tmp_path)
    versions = push_lib.versions(first_config.serving_dir)
    for config in (first_config, other_config):
        result = workspace.reconcile_serving(config, stores[config.pipeline_name].mlmd, live_runs_possible=False)
        assert result.set_aside == [] and result.unaccounted == []
    assert push_lib.versions(first_config.serving_dir) == versions and len(versions) == 2
    assert model_config.status(first_config.serving_dir.parent, "penguins").canary == versions[-1]


def test_a_damaged_sibling_store_takes_no_version_down(tmp_path) -> None:
    """exp2's store holds the record of the version it pushed; with that store damaged, the
    default pipeline's store cannot tell that push from an orphan, so nothing is set aside."""
    from pipeline import workspace
    from serving import model_config
    from serving import push as push_lib

    first_config, other_config, stores = _two_pipelines_pushed(tmp_path)
    serving_root = first_config.serving_dir.parent
    model_config.promote(serving_root, "penguins")  # exp2's push becomes stable
    before = model_config.status(serving_root, "penguins")
    other_config.metadata_path.write_bytes(b"not a database" * 100)  # exp2's store damaged

    result = workspace.reconcile_serving(first_config, stores["turbotfx"].mlmd, live_runs_possible=False)

    assert result.set_aside == []
    after = model_config.status(serving_root, "penguins")
    assert (after.versions, after.stable, after.canary) == (before.versions, before.stable, before.canary)
    assert push_lib.versions(first_config.serving_dir) == before.versions and len(before.versions) == 2
    [message] = result.messages()
    assert str(other_config.metadata_path) in message and "nothing was set aside" in message


def test_a_lost_models_config_gets_the_labels_last_recorded_not_a_guess(tmp_path) -> None:
    """Two pushes, then a rollback: the labels last recorded (stable 100, canary 100) differ
    from the fallback for a config without records (the newest version as both)."""
    from pipeline import workspace
    from pipeline.config import PipelineConfig
    from serving import model_config

    config = PipelineConfig(home=str(tmp_path / "ws"))
    serving_root = config.serving_dir.parent
    store = Store(open_store(sqlite_url(config.metadata_path)))
    run = store.run("run-1")
    for version, stable in ((100, 100), (200, 100)):
        (config.serving_dir / str(version)).mkdir(parents=True)
        model_config.record_push(serving_root, "penguins", version)
        store.execution(run, PUSHER, outputs=[labelled_push(str(version), stable=stable)])
    model_config.rollback(serving_root, "penguins")
    pushes.record_label_change(store.mlmd, "penguins", stable=100, canary=100)  # as `serving rollback` does
    model_config.config_path(serving_root).unlink()  # the config lost

    result = workspace.reconcile_serving(config, store.mlmd, live_runs_possible=False)

    assert result.rebuilt_labels == {"stable": 100, "canary": 100}
    rebuilt = model_config.status(serving_root, "penguins")
    assert (rebuilt.stable, rebuilt.canary, rebuilt.versions) == (100, 100, [100, 200])
