"""A compiled task runs: the Trainer task of a compiled pipeline, executed by TFX's Kubeflow V2
container entrypoint exactly as its container would run it, with a runtime parameter set.

Vertex AI / KFP would fill the `{{$}}` placeholder with an ExecutorInput; here it is built
from the compiled task (its constants, its inputs spec) and a local run's artifacts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import turbotfx

pytestmark = pytest.mark.e2e

ENTRYPOINT = "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"


def artifact_list(schema_title: str, uri: Path, metadata: dict | None = None) -> dict:
    return {"artifacts": [{"name": f"artifacts/{uri.parent.name}-{uri.name}",
                           "type": {"schemaTitle": schema_title}, "uri": str(uri), "metadata": metadata or {}}]}


def only_child(directory: Path) -> Path:
    children = sorted(directory.iterdir())
    assert len(children) == 1, children
    return children[0]


def test_compiled_trainer_task_trains_with_the_runtime_epochs(first_run, tmp_path):
    compiled = tmp_path / "pipeline.yaml"
    result = turbotfx("compile", "--target", "kubeflow", "--image", "turbotfx:test", "--pipeline-root",
                      "gs://demo-bucket/root", "--epochs", "20", "--output", str(compiled), home=tmp_path / "home")
    assert result.exit_code == 0, result.output
    spec = yaml.safe_load(compiled.read_text())
    task = spec["root"]["dag"]["tasks"]["Trainer"]
    container = spec["deploymentSpec"]["executors"][task["componentRef"]["name"] + "_executor"]["container"]
    assert task["inputs"]["parameters"]["epochs"] == {"componentInputParameter": "epochs"}

    parameters = {name: value["runtimeValue"]["constant"]
                  for name, value in task["inputs"]["parameters"].items() if "runtimeValue" in value}
    parameters["epochs"] = 2  # what the service substitutes for the runtime parameter
    root = first_run.config.pipeline_root
    outputs = tmp_path / "outputs"
    executor_input = {
        "inputs": {
            "parameterValues": parameters,
            "artifacts": {
                "examples": artifact_list("tfx.Examples", only_child(root / "Transform" / "transformed_examples"),
                                          {"split_names": '["train", "eval"]'}),
                "transform_graph": artifact_list("tfx.TransformGraph",
                                                 only_child(root / "Transform" / "transform_graph")),
                "schema": artifact_list("tfx.Schema", only_child(root / "ImportSchemaGen" / "schema")),
            },
        },
        "outputs": {
            "artifacts": {"model": artifact_list("tfx.Model", outputs / "model"),
                          "model_run": artifact_list("tfx.ModelRun", outputs / "model_run")},
            "outputFile": str(outputs / "executor_output.json"),
        },
    }
    args = [json.dumps(executor_input) if arg == "{{$}}" else arg for arg in container["args"]]
    assert container["command"][-1] == ENTRYPOINT
    done = subprocess.run([sys.executable, "-m", ENTRYPOINT, *args], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]

    report = json.loads((outputs / "model_run" / "training_report.json").read_text())
    assert report["epochs"] == 2  # the runtime value, not the compiled 20
    assert report["learning_rate"] == 0.01 and report["batch_size"] == 32
    assert (outputs / "model" / "Format-Serving" / "saved_model.pb").is_file()
    executor_output = json.loads((outputs / "executor_output.json").read_text())
    model = executor_output["artifacts"]["model"]["artifacts"][0]
    assert model["uri"] == str(outputs / "model")
    # The reporting executor put the report on the Model artifact the service records.
    assert model["metadata"]["training_epochs"] == 2
