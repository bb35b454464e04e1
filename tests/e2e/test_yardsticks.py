"""A real run's epoch lines and the Trainer's yardsticks on the Model artifact in MLMD.

Expected values come from the examples ExampleGen wrote for each split (read here with
tf.train.Example) and from the exported model's predictions on them, never from the
training report: the trivial baseline is a constant learned from the train split's labels
and scored on the eval split's; train_metric is the model's blessing metric on the whole
train split.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2

from components.reporting_trainer import keys
from pipeline import datasets
from pipeline.config import PipelineConfig
from pipeline.runners import local
from tests.conftest import cli

pytestmark = pytest.mark.e2e

EPOCH_LINE = r"    epoch (\d+)/{epochs}  loss \d+\.\d{{4}}  {metric} \d+\.\d{{4}}  \d+\.\ds"
# One model of a bagged ensemble (what small tables train by default) names itself first.
MODEL_EPOCH_LINE = r"    model (\d+)/{models}  epoch (\d+)/{epochs}  loss \d+\.\d{{4}}  {metric} \d+\.\d{{4}}  \d+\.\ds"


def latest_artifact(home: Path, type_name: str, node_id: str) -> metadata_store_pb2.Artifact:
    """The newest artifact of type_name that node_id output in the workspace's store."""
    store = metadata_store.MetadataStore(local.metadata_config(PipelineConfig(home=str(home))))
    context = next(c for c in store.get_contexts_by_type("node") if c.name.endswith(f".{node_id}"))
    executions = sorted(store.get_executions_by_context(context.id), key=lambda e: e.id)
    outputs = [e.artifact_id for e in store.get_events_by_execution_ids([executions[-1].id])
               if e.type == metadata_store_pb2.Event.OUTPUT]
    [found] = [a for a in store.get_artifacts_by_id(outputs)
               if store.get_artifact_types_by_id([a.type_id])[0].name == type_name]
    return found


def split_examples(home: Path, split: str) -> list[bytes]:
    examples = latest_artifact(home, "Examples", "CsvExampleGen")
    files = sorted(tf.io.gfile.glob(f"{examples.uri}/Split-{split}/*"))
    assert files, examples.uri
    return [record.numpy() for record in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def feature_value(serialized: bytes, name: str):
    feature = tf.train.Example.FromString(serialized).features.feature[name]
    kind = feature.WhichOneof("kind")
    value = getattr(feature, kind).value[0]
    return value.decode() if kind == "bytes_list" else value


def predict(home: Path, serialized: list[bytes]) -> dict[str, np.ndarray]:
    model = latest_artifact(home, "Model", "Trainer")
    signature = tf.saved_model.load(f"{model.uri}/Format-Serving").signatures["serving_default"]
    return {key: value.numpy() for key, value in signature(examples=tf.constant(serialized)).items()}


def epoch_lines(output: str, epochs: int, metric: str) -> list[int]:
    pattern = re.compile(EPOCH_LINE.format(epochs=epochs, metric=metric))
    return [int(match.group(1)) for line in output.splitlines() if (match := pattern.fullmatch(line))]


def model_epoch_lines(output: str, models: int, epochs: int, metric: str) -> dict[int, list[int]]:
    """Each bagged model's epoch numbers, in the order printed."""
    pattern = re.compile(MODEL_EPOCH_LINE.format(models=models, epochs=epochs, metric=metric))
    found: dict[int, list[int]] = {}
    for line in output.splitlines():
        if match := pattern.fullmatch(line):
            found.setdefault(int(match.group(1)), []).append(int(match.group(2)))
    return found


def test_penguins_run_prints_each_epoch_and_records_honest_yardsticks(first_run):
    penguins = datasets.load("penguins")
    assert penguins.blessing.metric == "accuracy"
    # FAST_RUN_ARGS: 5 epochs; the lines sit between the Trainer's start and end lines.
    assert epoch_lines(first_run.stdout, 5, "accuracy") == [1, 2, 3, 4, 5], first_run.stdout
    lines = first_run.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split() == ["Trainer", "started"])
    end = next(i for i, line in enumerate(lines) if line.split()[:2] == ["Trainer", "done"])
    assert end - start == 6 and all(line.startswith("    epoch ") for line in lines[start + 1:end])

    props = latest_artifact(first_run.home, "Model", "Trainer").custom_properties
    train_rows, eval_rows = (split_examples(first_run.home, split) for split in ("train", "eval"))
    train_species = [feature_value(row, penguins.label) for row in train_rows]
    eval_species = np.array([feature_value(row, penguins.label) for row in eval_rows])
    majority = pd.Series(train_species).value_counts().idxmax()
    assert props[keys.BLESSING_METRIC_NAME].string_value == "accuracy"
    assert props[keys.TRIVIAL_PREDICTION].string_value == majority
    # MLMD's SQLite store keeps 6 significant digits of a double.
    assert props[keys.TRIVIAL_METRIC].double_value == pytest.approx(np.mean(eval_species == majority), rel=2e-5)
    assert keys.TRIVIAL_NOTE not in props
    # The model's accuracy on every train row; training ran in bfloat16 where the CPU has
    # it, the exported model computes in float32: a row or two may differ.
    predicted = predict(first_run.home, train_rows)["label"].astype(str)
    assert props[keys.TRAIN_METRIC].double_value == pytest.approx(np.mean(predicted == train_species), abs=0.02)
    # ... and on every eval row, computed here through the exported model.
    predicted_eval = predict(first_run.home, eval_rows)["label"].astype(str)
    assert props[keys.EVAL_METRIC].double_value == pytest.approx(np.mean(predicted_eval == eval_species), abs=0.03)


HOMES_ROWS = 400


def homes_dataset(tmp_path: Path) -> tuple[Path, Path]:
    """A regression table (a price from a size and a kind of home) after `turbotfx init`:
    the workspace and the dataset file init wrote."""
    rng = np.random.default_rng(5)
    size = rng.gamma(2.0, 50.0, HOMES_ROWS).round(1)
    kind = rng.choice(["flat", "house", "barn"], HOMES_ROWS)
    price = (3.0 * size + np.where(kind == "house", 200.0, 0.0) + rng.normal(0, 20, HOMES_ROWS) + 50).round(2)
    data_root = tmp_path / "data"
    data_root.mkdir()
    pd.DataFrame({"size": size, "kind": kind, "price": price}).to_csv(data_root / "homes.csv", index=False)
    home, dataset_file = tmp_path / "ws", tmp_path / "homes.toml"
    init = cli("init", "--data-root", str(data_root), "--label", "price", "--output", str(dataset_file),
               home=home)
    assert init.exit_code == 0 and "regression" in init.output, init.output
    return home, dataset_file
