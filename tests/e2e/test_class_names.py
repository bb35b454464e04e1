"""Classes are named by their label values everywhere: the evaluation summary, MLMD, the
confusion matrix and `turbotfx predict` (in process, over gRPC and over REST), on tables
whose label vocabulary (ordered by frequency) is not in sorted order.

Expected values come from the data and from the pushed SavedModel run here on the eval
split's own examples (read from ExampleGen's output), not from the code under test.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from pipeline import datasets
from pipeline.scoring.inputs import row_schema
from serving.client import ServingClient
from tests.conftest import ONE_MODEL_ARGS, cli, turbotfx
from tests.doubles.tf_serving import FakeTfServing

pytestmark = pytest.mark.e2e

ROWS = 600
LABEL, SIZE, COLOR = "kind", "size", "color"
# 'c' is the most frequent class (class id 0), then 'a', 'b c' (a label with a space) and a
# rare 'd' whose rows look like 'a' rows: 15 times rarer there, it is never the likelier
# class, so a model that learned predicts it for no row.
SHARES = {"c": 0.5, "a": 0.3, "b c": 0.18, "d": 0.02}
CENTERS = {"c": 0.0, "a": 4.0, "b c": 8.0, "d": 4.0}
COLORS = {"c": "red", "a": "green", "b c": "blue", "d": "green"}


def kinds(seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    labels = rng.choice(list(SHARES), size=ROWS, p=list(SHARES.values()))
    return pd.DataFrame({
        SIZE: np.round([rng.normal(CENTERS[label], 0.7) for label in labels], 3),
        COLOR: [COLORS[label] if rng.random() < 0.9 else rng.choice(["red", "green", "blue"]) for label in labels],
        LABEL: labels,
    })


def init_and_run(tmp_path: Path, frame: pd.DataFrame, label: str) -> tuple[Path, Path, str]:
    """`turbotfx init` then `turbotfx run --epochs 5`; the dataset file, the workspace and
    the run's output."""
    data_root = tmp_path / "data"
    data_root.mkdir()
    frame.to_csv(data_root / "part-0.csv", index=False)
    home, dataset_file = tmp_path / "ws", tmp_path / "mine.toml"
    init = cli("init", "--data-root", str(data_root), "--label", label, "--output", str(dataset_file),
               home=home)
    assert init.exit_code == 0, init.output
    run = cli("run", "--dataset", str(dataset_file), "--epochs", "5", *ONE_MODEL_ARGS, home=home)
    assert run.exit_code == 0, run.output
    assert "blessed: yes" in run.output, run.output
    return dataset_file, home, run.output


def lineage(home: Path) -> dict:
    result = turbotfx("lineage", "--latest", "--format", "json", home=home)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def eval_split(found: dict) -> list[bytes]:
    """The eval split's serialized tf.Examples, as ExampleGen wrote them."""
    files = tf.io.gfile.glob(str(Path(found["examples"]["uri"]) / "Split-eval" / "*"))
    assert files
    return [record.numpy() for record in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def true_labels(examples: list[bytes], label: str) -> list[str]:
    return [tf.train.Example.FromString(example).features.feature[label].bytes_list.value[0].decode()
            for example in examples]


def test_multiclass_names_in_the_summary_mlmd_the_confusion_matrix_and_predict(tmp_path):
    frame = kinds()
    dataset_file, home, output = init_and_run(tmp_path, frame, LABEL)
    found = lineage(home)
    by_frequency = [name for name, _ in collections.Counter(frame[LABEL]).most_common()]
    assert by_frequency != sorted(by_frequency)  # c, a, b c, d: not a, b c, c, d

    # The Trainer recorded the names in class id order: the label vocabulary's, by frequency.
    assert found["trainer"]["training_report"]["class_names"] == by_frequency

    # The pushed model on the eval split's rows: the confusion matrix, counted here.
    examples = eval_split(found)
    truth = true_labels(examples, LABEL)
    model_dir = found["pushed_model"]["destination"]
    outputs = tf.saved_model.load(model_dir).signatures["serving_default"](examples=tf.constant(examples))
    predicted = [label.decode() for label in outputs["label"].numpy()]
    pairs = collections.Counter(zip(truth, predicted))
    rows = collections.Counter(truth)
    order = sorted(by_frequency, key=lambda name: (-rows[name], by_frequency.index(name)))
    expected_matrix = [[pairs[(actual, guess)] for guess in order] for actual in order]

    evaluation = found["evaluation"]
    assert evaluation["confusion_matrix"] == {"classes": order, "counts": expected_matrix, "left_out": 0}
    assert sum(map(sum, expected_matrix)) == len(examples) == evaluation["metrics"]["example_count"]

    # Every class is listed under its name, with a value or with why it has none.
    metrics, undefined = evaluation["metrics"], (evaluation["undefined_metrics"] or {}).get("overall", {})
    assert not [name for name in [*metrics, *undefined] if "classId" in name]
    for name in by_frequency:
        tp, predicted_as, of_class = pairs[(name, name)], predicted.count(name), rows[name]
        if predicted_as:
            assert metrics[f"precision[{name}]"] == pytest.approx(tp / predicted_as, abs=1e-6), name
        else:
            assert undefined[f"precision[{name}]"] == "never predicted", name
        if of_class:
            assert metrics[f"recall[{name}]"] == pytest.approx(tp / of_class, abs=1e-6), name
        else:
            assert undefined[f"recall[{name}]"] == "absent from the eval split", name
    # The rare class: rows in the eval split, never predicted (fixed data: fixed split).
    assert rows["d"] > 0 and "d" not in predicted
    assert f"  {'precision[d]':<32} n/a (never predicted)" in output

    # The run's summary names the classes, in the listing and in the matrix.
    assert f"  {'precision[b c]':<32} {metrics['precision[b c]']:.4f}" in output
    assert f"  {'recall[c]':<32} {metrics['recall[c]']:.4f}" in output
    assert f"  confusion matrix (rows: true label, columns: predicted; {len(examples)} rows):" in output
    lines = output.splitlines()
    start = lines.index(f"  confusion matrix (rows: true label, columns: predicted; {len(examples)} rows):")
    header, *table = lines[start + 1:start + 2 + len(order)]
    assert header.split() == " ".join(order).split()  # "b c" is two words
    assert [(" ".join(line.split()[:-4]), line.split()[-4:]) for line in table] == [
        (actual, [str(n) for n in counts]) for actual, counts in zip(order, expected_matrix)]

    # predict names every class with its probability, for rows of every class.
    rows_of_each = [{SIZE: CENTERS[name], COLOR: COLORS[name]} for name in ("c", "a", "b c")]
    text = cli("predict", "--dataset", str(dataset_file), "--json", json.dumps(rows_of_each), home=home)
    assert text.exit_code == 0, text.output
    lines = [line for line in text.stdout.splitlines() if line.startswith("row ")]
    for number, name in enumerate(("c", "a", "b c")):
        assert lines[number].startswith(f"row {number}: {name}  (p="), lines[number]
        # "(p=0.981; a 0.012, b c 0.007, c 0.981, d 0.000)"
        listed = dict(item.rsplit(" ", 1) for item in lines[number].split("; ", 1)[1].rstrip(")").split(", "))
        assert sorted(listed) == sorted(by_frequency), lines[number]
        assert max(listed, key=lambda other: float(listed[other])) == name, lines[number]
    as_json = cli("predict", "--dataset", str(dataset_file), "--format", "json", "--json",
                       json.dumps(rows_of_each), home=home)
    assert as_json.exit_code == 0, as_json.output
    predictions = json.loads(as_json.stdout)["predictions"]
    for name, prediction in zip(("c", "a", "b c"), predictions):
        by_class = prediction["class_probabilities"]
        assert sorted(by_class) == sorted(by_frequency)
        assert max(by_class, key=by_class.get) == name  # the row's own class, by the data
        assert sum(by_class.values()) == pytest.approx(1.0, abs=1e-4)
        assert sorted(by_class.values()) == sorted(prediction["probabilities"])

    # The same names over TF Serving's gRPC and REST APIs.
    schema = row_schema(datasets.load(str(dataset_file)))
    with FakeTfServing("mine", {1: model_dir}) as server:
        for where in ({"grpc_target": server.grpc_target}, {"rest_url": server.rest_url}):
            client = ServingClient(**where, schema=schema, model_name="mine", backoff_s=0.01)
            remote = [p.by_class() for p in client.predict(rows_of_each)]
            for local, served in zip(predictions, remote):
                assert served.keys() == local["class_probabilities"].keys(), where
                np.testing.assert_allclose([served[k] for k in served], [local["class_probabilities"][k]
                                                                         for k in served], atol=1e-5)


def test_binary_auc_is_named_by_the_positive_class_and_na_on_a_slice_without_positive_rows(tmp_path):
    rng = np.random.default_rng(3)
    plan = rng.choice(["basic", "pro", "free"], size=ROWS, p=[0.45, 0.4, 0.15])
    usage = np.round(rng.normal(0, 1, ROWS), 3)
    churn = np.where((usage + rng.normal(0, 0.3, ROWS) > 0) & (plan != "free"), "yes", "no")
    frame = pd.DataFrame({"usage": usage, "plan": plan, "churned": churn})
    assert not ((frame["plan"] == "free") & (frame["churned"] == "yes")).any()
    _, home, output = init_and_run(tmp_path, frame, "churned")

    found = lineage(home)
    evaluation = found["evaluation"]
    assert evaluation["blessing_metric"] == "auc[yes]"
    assert 0.5 < evaluation["metrics"]["auc[yes]"] <= 1.0
    examples = eval_split(found)
    plans = [tf.train.Example.FromString(e).features.feature["plan"].bytes_list.value[0].decode() for e in examples]
    assert "free" in plans  # the slice is there, with its negative rows only
    assert evaluation["undefined_metrics"]["slices"]["plan=free"]["auc[yes]"] == "no positive rows"
    assert f"    {'plan=free':<30} n/a (no positive rows)" in output
    assert "per slice (auc[yes]):" in output
    runs = json.loads(turbotfx("runs", "--format", "json", home=home).stdout)
    assert runs[0]["metric"] == "auc[yes]" and runs[0]["metric_value"] == evaluation["metrics"]["auc[yes]"]
