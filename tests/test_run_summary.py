"""The run summary read back from a hand-built SQLite MLMD store: what the executors record
(written here by their own record functions) is what `turbotfx run` prints and `runs` lists."""

from __future__ import annotations

import json
import math

import pytest
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb
from tfx.types import standard_artifacts

from components.reporting_evaluator import executor as reporting_evaluator
from components.reporting_evaluator.keys import class_key
from components.serving_check import executor as serving_check
from pipeline.provenance import runs, summary
from pipeline.store.connection import open_store
from pipeline.store.url import PASSWORD_ENV_VAR, sqlite_url

PIPELINE = "turbotfx"


class Store:
    """A store with TFX's context layout: pipeline > pipeline_run, one node context per component."""

    def __init__(self, mlmd) -> None:
        self.mlmd = mlmd
        put = self.mlmd.put_context_type
        self.pipeline_type = put(mlmd_pb.ContextType(name="pipeline"))
        self.run_type = put(mlmd_pb.ContextType(name="pipeline_run"))
        self.node_type = put(mlmd_pb.ContextType(name="node"))
        [self.pipeline] = self.mlmd.put_contexts([mlmd_pb.Context(type_id=self.pipeline_type, name=PIPELINE)])
        self.nodes: dict[str, int] = {}

    def run(self, name: str) -> int:
        [run_id] = self.mlmd.put_contexts([mlmd_pb.Context(type_id=self.run_type, name=name)])
        self.mlmd.put_parent_contexts([mlmd_pb.ParentContext(child_id=run_id, parent_id=self.pipeline)])
        return run_id

    def execution(self, run_id: int, node: str, state=mlmd_pb.Execution.COMPLETE, outputs=()) -> None:
        """One execution of the node in the run, with these (TFX) artifacts as its outputs."""
        type_id = self.mlmd.put_execution_type(mlmd_pb.ExecutionType(name=f"tfx.components.{node}"))
        if node not in self.nodes:
            [self.nodes[node]] = self.mlmd.put_contexts(
                [mlmd_pb.Context(type_id=self.node_type, name=f"{PIPELINE}.{node}")])
        artifacts = []
        for artifact in outputs:
            artifact.mlmd_artifact.type_id = self.mlmd.put_artifact_type(artifact.artifact_type)
            artifacts.append((artifact.mlmd_artifact, mlmd_pb.Event(type=mlmd_pb.Event.OUTPUT)))
        contexts = self.mlmd.get_contexts_by_id([run_id, self.nodes[node]])
        self.mlmd.put_execution(mlmd_pb.Execution(type_id=type_id, last_known_state=state), artifacts, contexts)


# Rows: true label, columns: predicted, most frequent first; 10 eval rows.
CONFUSION = {"classes": ["Adelie", "big cat", "Chinstrap"], "counts": [[4, 1, 0], [0, 3, 0], [1, 1, 0]],
             "left_out": 0}


def evaluation() -> standard_artifacts.ModelEvaluation:
    artifact = standard_artifacts.ModelEvaluation()
    artifact.uri = "/eval/1"
    reporting_evaluator.record_metrics(artifact, reporting_evaluator.Metrics(
        overall={"sparse_categorical_accuracy": 0.9, "precision[Adelie]": 0.75, "precision[big cat]": 0.6,
                 "recall[Adelie]": math.nan},  # NaN with no reason known
        undefined={"precision[Chinstrap]": "never predicted"},
        diff={"sparse_categorical_accuracy": -0.025, "precision[Adelie]": 0.0},
        slices={"island=Dream": {"sparse_categorical_accuracy": 0.5, "recall[Adelie]": math.nan},
                "island=Biscoe": {"sparse_categorical_accuracy": 1.0}},
        slice_undefined={"island=Dream": {"precision[Chinstrap]": "never predicted"}},
        confusion=CONFUSION,
    ), blessing_metric="sparse_categorical_accuracy")
    return artifact


def blessing(blessed: bool) -> standard_artifacts.ModelBlessing:
    artifact = standard_artifacts.ModelBlessing()
    artifact.set_int_custom_property("blessed", int(blessed))
    return artifact


def infra_blessing(tmp_path, report: dict) -> standard_artifacts.InfraBlessing:
    artifact = standard_artifacts.InfraBlessing()
    artifact.uri = str(tmp_path)
    serving_check.record(artifact, report)
    return artifact


def pushed_model(version: str | None) -> standard_artifacts.PushedModel:
    artifact = standard_artifacts.PushedModel()
    artifact.set_int_custom_property("pushed", int(version is not None))
    if version:
        artifact.set_string_custom_property("pushed_destination", f"/serving/penguins/{version}")
        artifact.set_string_custom_property("pushed_version", version)
    return artifact


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(open_store(sqlite_url(tmp_path / "store.sqlite")))


def test_a_blessed_and_pushed_run(store, tmp_path):
    run = store.run("run-1")
    model = standard_artifacts.Model()
    store.execution(run, "Trainer", outputs=[model])
    store.execution(run, "Evaluator", outputs=[evaluation(), blessing(True)])
    report = {"ok": True, "problems": [], "signatures": ["serving_default"],
              "p50_ms_b1": 0.5, "p99_ms_b1": 0.75, "p50_ms_b64": 1.25, "p99_ms_b64": 2.5}
    store.execution(run, "ServingCheck", outputs=[infra_blessing(tmp_path, report)])
    store.execution(run, "Pusher", outputs=[pushed_model("1700000000")])
    # A second pusher after the first (a Vertex endpoint): the summary names the first push.
    store.execution(run, "VertexEndpointPusher", outputs=[pushed_model("1700000001")])

    found = summary.latest_run(store.mlmd, PIPELINE)
    lines = found.format().splitlines()
    assert lines[0] == "run run-1"
    assert [line.split()[:2] for line in lines[1:5]] == [
        ["Trainer", "COMPLETE"], ["Evaluator", "COMPLETE"], ["ServingCheck", "COMPLETE"], ["Pusher", "COMPLETE"]]
    assert lines[5].split()[:2] == ["VertexEndpointPusher", "COMPLETE"]
    assert lines[6:] == [
        "evaluation (eval split):",
        f"  {'precision[Adelie]':<32} 0.7500",
        f"  {'precision[Chinstrap]':<32} n/a (never predicted)",  # every class listed
        f"  {'precision[big cat]':<32} 0.6000",
        f"  {'precision_diff[Adelie]':<32} 0.0000",
        f"  {'recall[Adelie]':<32} n/a (undefined)",
        f"  {'sparse_categorical_accuracy':<32} 0.9000",
        f"  {'sparse_categorical_accuracy_diff':<32} -0.0250",
        "  per slice (sparse_categorical_accuracy):",
        f"    {'island=Biscoe':<30} 1.0000",
        f"    {'island=Dream':<30} 0.5000",
        "  confusion matrix (rows: true label, columns: predicted; 10 rows):",
        # Columns as wide as the widest name; row names left-aligned, counts right-aligned.
        f"    {'':9}  {'Adelie':>9}  {'big cat':>9}  {'Chinstrap':>9}",
        f"    {'Adelie':9}  {4:>9}  {1:>9}  {0:>9}",
        f"    {'big cat':9}  {0:>9}  {3:>9}  {0:>9}",
        f"    {'Chinstrap':9}  {1:>9}  {1:>9}  {0:>9}",
        # The blessing metric beside its yardsticks: here only the served baseline's change.
        "against (accuracy, eval split unless named):",
        f"  {'this model':<40} 0.9000",
        f"  {'served baseline':<40} 0.9250  (this model -0.0250)",
        "blessed: yes",
        "serving check: passed (0.50 ms p50 / 0.75 ms p99 at batch 1, 1.25 ms p50 / 2.50 ms p99 at batch 64)",
        "pushed: /serving/penguins/1700000000",
    ]
    assert found.status == "COMPLETE" and found.failed_component() is None
    assert found.slice_metrics == {"island=Biscoe": {"sparse_categorical_accuracy": 1.0},
                                   "island=Dream": {"sparse_categorical_accuracy": 0.5}}

    [row] = runs.list_runs(store.mlmd)
    assert {key: row[key] for key in ("run_id", "pipeline", "status", "metric", "metric_value", "blessed",
                                      "pushed_version")} == {
        "run_id": "run-1", "pipeline": PIPELINE, "status": "COMPLETE", "metric": "sparse_categorical_accuracy",
        "metric_value": 0.9, "blessed": True, "pushed_version": "1700000000"}
    assert row["model_id"] == found.model_id is not None


def test_a_run_that_was_not_blessed_and_one_that_failed(store, tmp_path):
    rejected = store.run("run-1")
    store.execution(rejected, "Evaluator", outputs=[blessing(False)])
    failed_check = {"ok": False, "problems": ["signature 'serving_raw' is missing"]}
    store.execution(rejected, "ServingCheck", outputs=[infra_blessing(tmp_path, failed_check)])
    store.execution(rejected, "Pusher", outputs=[pushed_model(None)])
    text = summary.latest_run(store.mlmd, PIPELINE).format()
    assert "evaluation (eval split):" not in text  # no ModelEvaluation recorded
    assert "blessed: no" in text
    assert "serving check: FAILED: signature 'serving_raw' is missing" in text
    assert text.endswith("pushed: nothing (the model was not blessed)")

    failed = store.run("run-2")
    store.execution(failed, "Trainer")
    store.execution(failed, "Evaluator", state=mlmd_pb.Execution.FAILED)
    latest = summary.latest_run(store.mlmd, PIPELINE)
    assert (latest.run_id, latest.status, latest.failed_component()) == ("run-2", "FAILED", "Evaluator")
    assert latest.format().splitlines()[-2:] == ["blessed: not evaluated", "pushed: nothing"]
    assert [row["status"] for row in runs.list_runs(store.mlmd)] == ["FAILED", "COMPLETE"]
    assert runs.list_runs(store.mlmd, pipeline_name="other") == []


def test_undefined_metrics_are_recorded_with_their_reason_not_as_numbers():
    artifact = evaluation()
    names = set(artifact.mlmd_artifact.custom_properties)
    assert "metric_precision[Adelie]" in names
    assert "metric_precision[Chinstrap]" not in names and "metric_recall[Adelie]" not in names  # MySQL: no NaN
    assert json.loads(artifact.get_string_custom_property("slice_metrics"))["island=Dream"] == {
        "sparse_categorical_accuracy": 0.5}
    assert json.loads(artifact.get_string_custom_property("undefined_metrics")) == {
        "overall": {"precision[Chinstrap]": "never predicted", "recall[Adelie]": "undefined"},
        "slices": {"island=Dream": {"precision[Chinstrap]": "never predicted", "recall[Adelie]": "undefined"}},
    }
    assert json.loads(artifact.get_string_custom_property("confusion_matrix")) == CONFUSION


def binary_evaluation(confusion: dict | None = None) -> standard_artifacts.ModelEvaluation:
    """A binary model's evaluation: positive class 'yes', a slice without positive rows."""
    artifact = standard_artifacts.ModelEvaluation()
    reporting_evaluator.record_metrics(artifact, reporting_evaluator.Metrics(
        overall={"auc[yes]": 0.875, "precision[yes]": 0.8},
        slices={"plan=basic": {"auc[yes]": 0.9}, "plan=pro": {"precision[yes]": 0.5}},
        slice_undefined={"plan=pro": {"auc[yes]": "no positive rows"}},
        confusion=confusion,
    ), blessing_metric="auc[yes]")
    return artifact


def test_a_slice_without_positive_rows_has_no_auc(store):
    run = store.run("run-1")
    store.execution(run, "Evaluator", outputs=[binary_evaluation()])
    lines = summary.latest_run(store.mlmd, PIPELINE).format().splitlines()
    start = lines.index("  per slice (auc[yes]):")
    assert lines[start:start + 3] == [
        "  per slice (auc[yes]):",
        f"    {'plan=basic':<30} 0.9000",
        f"    {'plan=pro':<30} n/a (no positive rows)",  # TFMA says 0.0 there
    ]
    assert "confusion matrix" not in "\n".join(lines)  # none recorded


def test_records_in_the_class_id_form_still_display(store):
    # As the Evaluator recorded before classes had names (workspaces made then).
    old = standard_artifacts.ModelEvaluation()
    old.set_string_custom_property("blessing_metric", "auc[classId:1]")
    old.set_float_custom_property("metric_auc[classId:1]", 0.9748)
    old.set_float_custom_property("diff_auc[classId:1]", 0.0125)
    old.set_string_custom_property("slice_metrics", json.dumps({"plan/type=basic": {"auc[classId:1]": 1.0}}))
    run = store.run("run-1")
    store.execution(run, "Evaluator", outputs=[old])
    found = summary.latest_run(store.mlmd, PIPELINE)
    assert found.format().splitlines()[2:7] == [
        "evaluation (eval split):",
        f"  {'auc[classId:1]':<32} 0.9748",
        f"  {'auc_diff[classId:1]':<32} 0.0125",
        "  per slice (auc[classId:1]):",
        f"    {'plan/type=basic':<30} 1.0000",
    ]
    assert runs.list_runs(store.mlmd)[0]["metric_value"] == 0.9748


def test_a_confusion_matrix_of_many_classes_says_how_many_it_left_out(store):
    confusion = {"classes": ["a very long class name indeed", "b"], "counts": [[5, 0, 1], [0, 7, 0], [2, 0, 30]],
                 "left_out": 12}
    run = store.run("run-1")
    store.execution(run, "Evaluator", outputs=[binary_evaluation(confusion)])
    lines = summary.latest_run(store.mlmd, PIPELINE).format().splitlines()
    start = lines.index("  confusion matrix (rows: true label, columns: predicted; 45 rows):")
    assert lines[start + 1:start + 6] == [
        # A long name is cut to 16 characters, the last one "~".
        f"    {'':16}  {'a very long cla~':>16}  {'b':>16}  {'(other)':>16}",
        f"    {'a very long cla~':16}  {5:>16}  {0:>16}  {1:>16}",
        f"    {'b':16}  {0:>16}  {7:>16}  {0:>16}",
        f"    {'(other)':16}  {2:>16}  {0:>16}  {30:>16}",
        "    (other): 12 classes left out, with fewer rows; their counts together",
    ]


AWKWARD = ['say "hi"', "C:\\dir", "big cat"]


def test_awkward_label_values_survive_a_postgresql_store(postgresql_server):
    # MLMD 1.16's PostgreSQL store fails on a backslash in a property: a label with a quote
    # or a backslash must reach it as neither.
    database = postgresql_server.create_database()
    store = Store(open_store(database.url(), {PASSWORD_ENV_VAR: database.password}))
    keys = [class_key("precision", label) for label in AWKWARD]
    confusion = {"classes": AWKWARD, "counts": [[1, 0, 0], [0, 1, 0], [0, 0, 1]], "left_out": 0}
    artifact = standard_artifacts.ModelEvaluation()
    reporting_evaluator.record_metrics(artifact, reporting_evaluator.Metrics(
        overall={keys[0]: 0.5, keys[1]: 0.25}, undefined={keys[2]: "never predicted"},
        slices={f"plan={AWKWARD[0]}": {keys[0]: 1.0}}, confusion=confusion), blessing_metric=keys[0])
    run = store.run("run-1")
    store.execution(run, "Evaluator", outputs=[artifact])
    found = summary.latest_run(store.mlmd, PIPELINE)
    assert found.metrics == {keys[0]: 0.5, keys[1]: 0.25}
    assert found.undefined_metrics == {keys[2]: "never predicted"}
    assert found.slice_metrics == {f"plan={AWKWARD[0]}": {keys[0]: 1.0}}
    assert found.confusion_matrix == confusion
    assert keys[0] == 'precision["say ""hi"""]'
    assert f"  {keys[0]:<32} 0.5000" in found.format()
