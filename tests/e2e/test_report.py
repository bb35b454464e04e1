"""The run report (pipeline/report): what a person looks for on the page of a real run.

Expected values come from elsewhere than the report code: MLMD's records read here directly,
the examples ExampleGen wrote (tf.train.Example), the embedded CSV, the dataset file's bytes,
and TensorFlow's own reader of the Trainer's TensorBoard logs.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import tensorflow as tf

from components.reporting_evaluator import keys as evaluator_keys
from components.reporting_trainer.keys import from_json_property
from components.serving_check import keys as check_keys
from pipeline import datasets
from tests.conftest import ONE_MODEL_ARGS, cli, turbotfx
from tests.e2e.test_yardsticks import feature_value, latest_artifact, split_examples
from tests.report_page import Page, read_page
from trainer_module.config import TrainingConfig

pytestmark = pytest.mark.e2e

HEADINGS = ["Summary", "Dataset", "Data", "Training", "Evaluation", "Which features matter", "Serving", "Lineage"]
PENGUIN_CLASSES = {"Adelie", "Chinstrap", "Gentoo"}


def report_of(run_output: str) -> Path:
    """The page the run's summary names."""
    found = [line.split("report: ", 1)[1] for line in run_output.splitlines() if line.startswith("report: ")]
    assert len(found) == 1, run_output
    return Path(found[0])


def tensorflow_curve(model_run_uri: str, phase: str, tag: str) -> list[float]:
    """A scalar per epoch as TensorFlow's own event reader reads it."""
    [events_file] = tf.io.gfile.glob(f"{model_run_uri}/{phase}/events.out.tfevents.*")
    values = []
    for event in tf.compat.v1.train.summary_iterator(events_file):
        values += [float(tf.make_ndarray(v.tensor)) for v in event.summary.value if v.tag == tag]
    return values


def test_a_penguins_run_writes_a_report_with_what_a_person_looks_for(first_run):
    path = report_of(first_run.stdout)
    assert path.parent == first_run.home / "reports" / "turbotfx" and path.is_file()
    page = read_page(path)
    assert [h for h in page.headings if h in HEADINGS] == HEADINGS

    # The dataset file: its path and the hash of its bytes.
    dataset_file = Path(datasets.__file__).with_name("penguins.toml")
    facts = page.table("Dataset").as_dict()
    assert facts["dataset file"] == str(dataset_file)
    assert facts["content hash (sha256, first 16 digits)"] == hashlib.sha256(dataset_file.read_bytes()).hexdigest()[:16]

    # Every column, and each split's missing shares, which add up to the CSV's blanks.
    csv = pd.read_csv(first_run.home / "data" / "penguins" / "penguins.csv")
    data = page.table("Data", "data")
    assert set(data.column("feature")) == set(csv.columns)
    assert data.rows[1 + data.column("feature").index("species")][1] == "categorical (label)"
    train_rows, eval_rows = len(split_examples(first_run.home, "train")), len(split_examples(first_run.home, "eval"))
    assert f"train: {train_rows:,} rows, eval: {eval_rows:,} rows" in page.section_html("data")
    for column in ("sex", "bill_length_mm"):
        row = data.rows[1 + data.column("feature").index(column)]
        train_share, eval_share = (float(cell.rstrip("%")) / 100 for cell in row[2:4])
        blanks = train_share * train_rows + eval_share * eval_rows
        assert blanks == pytest.approx(csv[column].isna().sum(), abs=0.5), (column, row)
    assert int(csv["sex"].isna().sum()) > 0  # the check above saw blanks to count

    # The headline metrics, as MLMD recorded them on the evaluation.
    evaluation = latest_artifact(first_run.home, "ModelEvaluation", "Evaluator").custom_properties
    shown = {row[0]: row[1] for row in page.table("Metrics on the eval split").rows[1:]}
    recorded = {name[len(evaluator_keys.METRIC_PREFIX):]: value.double_value for name, value in evaluation.items()
                if name.startswith(evaluator_keys.METRIC_PREFIX)}
    assert recorded and {name: f"{value:.4f}" for name, value in recorded.items()} == shown

    # The confusion matrix names the classes; each row sums to that class's eval rows.
    matrix = page.table("Confusion matrix")
    classes = matrix.rows[0][1:]
    assert set(classes) == PENGUIN_CLASSES
    eval_labels = collections.Counter(feature_value(row, "species") for row in split_examples(first_run.home, "eval"))
    for row in matrix.rows[1:]:
        assert sum(int(n) for n in row[1:]) == eval_labels[row[0]], (row, eval_labels)
    correct = sum(int(row[1 + classes.index(row[0])]) for row in matrix.rows[1:])
    assert correct / eval_rows == pytest.approx(recorded["sparse_categorical_accuracy"], abs=1e-6)
    assert PENGUIN_CLASSES <= set(page.svg_text)  # the chart's axes name them too

    # Training: the learning curves' tags, and the config the Trainer recorded.
    assert "loss" in page.svg_text and "accuracy" in page.svg_text
    knobs = page.table("Training configuration").as_dict()
    assert knobs["epochs"] == "5"  # FAST_RUN_ARGS

    # Which features matter: every feature, with the drop MLMD recorded for it.
    importance = {row[0]: row[1] for row in page.table("Which features matter").rows[1:]}
    recorded_drops = from_json_property(evaluation[evaluator_keys.PERMUTATION_IMPORTANCE].string_value)
    assert set(importance) == set(csv.columns) - {"species"}
    assert importance == {item["feature"]: f"{item['drop']:.4f}" for item in recorded_drops}
    assert {"ROC", "precision and recall", "calibration"} <= set(page.svg_text)

    # Serving: the check's latencies as the InfraBlessing holds them, the version, the labels.
    blessing = latest_artifact(first_run.home, "InfraBlessing", "ServingCheck").custom_properties
    p50 = blessing[check_keys.LATENCY_KEYS[0]].double_value
    assert f"{p50:.2f} ms" in page.svg_text
    served = page.table("Serving").as_dict()
    assert f"pushed: {first_run.home}/serving/penguins/{served['pushed version']}" in first_run.stdout
    assert served["label stable"] == served["pushed version"]

    # Lineage: the graph names the model artifact.
    model = latest_artifact(first_run.home, "Model", "Trainer")
    assert f"Model {model.id}" in page.svg_text


def test_the_report_reads_the_learning_curves_tensorflow_wrote(first_run):
    from pipeline.report import files

    model_run = latest_artifact(first_run.home, "ModelRun", "Trainer")
    curves = files.read_curves(model_run.uri)
    for phase in ("train", "validation"):
        for metric in ("loss", "accuracy"):
            expected = tensorflow_curve(model_run.uri, phase, f"epoch_{metric}")
            assert len(expected) == 5  # one per epoch (FAST_RUN_ARGS)
            assert [value for _, value in curves[metric][phase]] == pytest.approx(expected, rel=1e-6)
            assert [epoch for epoch, _ in curves[metric][phase]] == list(range(5))


def test_report_command_renders_a_chosen_run_and_names_bad_input_in_one_line(first_run_copy, tmp_path):
    home = first_run_copy.home
    # The first run's page, in the copy of its workspace.
    first_page = home / "reports" / "turbotfx" / report_of(first_run_copy.stdout).name
    pushed_version = read_page(first_page).table("Serving").as_dict()["pushed version"]
    # A second run that is not blessed: the newest run now has no push.
    second = cli("run", "--epochs", "1", "--learning-rate", "1e-6", "--min-accuracy", "0.99", home=home)
    assert second.exit_code == 3, second.output
    second_page = report_of(second.stdout)
    assert second_page != first_page and second_page.is_file()
    assert read_page(second_page).table("Serving").as_dict()["pushed version"] == "nothing"

    # The newest run by default; --model-version finds the run that trained that version.
    newest = turbotfx("report", "--output", str(tmp_path / "newest.html"), home=home)
    assert newest.exit_code == 0 and newest.stdout.strip() == str(tmp_path / "newest.html"), newest.output
    assert _run_id(read_page(tmp_path / "newest.html")) == _run_id(read_page(second_page))
    by_version = cli("report", "--model-version", pushed_version, "--output", str(tmp_path / "v.html"),
                          home=home)
    assert by_version.exit_code == 0, by_version.output
    assert _run_id(read_page(tmp_path / "v.html")) == _run_id(read_page(first_page))
    # --run: the id `turbotfx runs` prints; the default file name is the run's.
    run_id = _run_id(read_page(first_page))
    by_id = cli("report", "--run", run_id, home=home)
    assert by_id.exit_code == 0 and Path(by_id.stdout.strip()) == first_page, by_id.output

    # --diff: the two models side by side, each metric as MLMD recorded it on its evaluation.
    runs = json.loads(turbotfx("runs", "--format", "json", home=home).stdout)
    first_model, second_model = runs[1]["model_id"], runs[0]["model_id"]
    compared = cli("report", "--diff", str(first_model), str(second_model), home=home)
    assert compared.exit_code == 0, compared.output
    assert Path(compared.stdout.strip()) == home / "reports" / "turbotfx" / f"diff-{first_model}-{second_model}.html"
    diff = read_page(Path(compared.stdout.strip()))
    assert diff.headings[:2] == ["Summary", "What differs"]
    changed = {row[0]: row[1:] for row in diff.table("hyperparameters").rows[1:]}
    default_rate = TrainingConfig().learning_rate  # FAST_RUN_ARGS leave it; the second run set 1e-6
    assert changed["epochs"] == ["5", "1"] and changed["learning_rate"] == [str(default_rate), "1e-06"], changed
    metrics = diff.table("Metrics")
    for column, model_id in ((1, first_model), (2, second_model)):
        recorded, undefined = _recorded_metrics(home, model_id)
        shown = {row[0]: row[column] for row in metrics.rows[1:]}
        expected = {name: f"{value:.4f}" for name, value in recorded.items() if name != "example_count"}
        expected.update({name: f"n/a ({reason})" for name, reason in undefined.items()})
        assert shown and shown == expected
    assert f"A: model {first_model}" in diff.svg_text and f"B: model {second_model}" in diff.svg_text
    by_versions = cli("report", "--diff", pushed_version, pushed_version, "--versions", "--output",
                           str(tmp_path / "same.html"), home=home)
    assert by_versions.exit_code == 0, by_versions.output
    assert "the same" in read_page(tmp_path / "same.html").section_html("changes")

    unknown = cli("report", "--run", "2001-01-01T00:00:00", "--output", str(tmp_path / "u.html"), home=home)
    assert unknown.exit_code == 2 and len(unknown.output.strip().splitlines()) == 1, unknown.output
    assert "no run '2001-01-01T00:00:00'" in unknown.output and "turbotfx runs" in unknown.output
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    refused = cli("report", "--output", str(blocked / "page.html"), home=home)
    assert refused.exit_code == 2 and f"{blocked} is not a folder: create it first" in refused.output, refused.output
    assert len(refused.output.strip().splitlines()) == 1, refused.output
    assert not (tmp_path / "u.html").exists() and blocked.read_text() == ""
    # A device is never replaced by a page; a link to a page is followed and stays a link.
    device = cli("report", "--output", "/dev/null", home=home)
    assert device.exit_code == 2 and "is not a regular file" in device.output, device.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    (tmp_path / "real.html").write_text((tmp_path / "v.html").read_text())  # a page turbotfx wrote
    (tmp_path / "link.html").symlink_to(tmp_path / "real.html")
    linked = cli("report", "--output", str(tmp_path / "link.html"), home=home)
    assert linked.exit_code == 0, linked.output
    assert (tmp_path / "link.html").is_symlink()
    assert _run_id(read_page(tmp_path / "real.html")) == _run_id(read_page(second_page))  # replaced: the newest
    # A file of one's own is replaced only with --force; the workspace's store never.
    (tmp_path / "notes.html").write_text("my own notes")
    kept = cli("report", "--output", str(tmp_path / "notes.html"), home=home)
    assert kept.exit_code == 2 and "--force" in kept.output and (tmp_path / "notes.html").read_text() == "my own notes"
    forced = cli("report", "--output", str(tmp_path / "notes.html"), "--force", home=home)
    assert forced.exit_code == 0 and "<h1>turbotfx run " in (tmp_path / "notes.html").read_text(), forced.output
    store = first_run_copy.config.metadata_path
    store_bytes = store.read_bytes()
    spared = cli("report", "--output", str(store), "--force", home=home)
    assert spared.exit_code == 2 and "only turbotfx writes" in spared.output, spared.output
    assert store.read_bytes() == store_bytes
    assert json.loads(turbotfx("runs", "--format", "json", home=home).stdout)[0]["run_id"] == runs[0]["run_id"]
    lone = cli("report", "--versions", home=home)
    assert lone.exit_code == 2 and "--diff" in lone.output, lone.output


def _recorded_metrics(home: Path, model_id: int) -> tuple[dict[str, float], dict[str, str]]:
    """The metrics MLMD holds on the evaluation of one model, and those without a value with
    why, read with MLMD alone."""
    from ml_metadata.metadata_store import metadata_store
    from ml_metadata.proto import metadata_store_pb2

    from pipeline.config import PipelineConfig
    from pipeline.runners import local

    store = metadata_store.MetadataStore(local.metadata_config(PipelineConfig(home=str(home))))
    evaluators = [e.execution_id for e in store.get_events_by_artifact_ids([model_id])
                  if e.type == metadata_store_pb2.Event.INPUT and e.path.steps[0].key == "model"]
    outputs = [e.artifact_id for e in store.get_events_by_execution_ids(evaluators)
               if e.type == metadata_store_pb2.Event.OUTPUT]
    [evaluation] = [a for a in store.get_artifacts_by_id(outputs)
                    if evaluator_keys.METRIC_PREFIX + "example_count" in a.custom_properties]
    prefix = evaluator_keys.METRIC_PREFIX
    properties = evaluation.custom_properties
    undefined = properties[evaluator_keys.UNDEFINED_METRICS].string_value if evaluator_keys.UNDEFINED_METRICS in \
        properties else ""
    return ({name[len(prefix):]: value.double_value for name, value in properties.items() if name.startswith(prefix)},
            (from_json_property(undefined) if undefined else {}).get("overall", {}))


def _run_id(page: Page) -> str:
    match = re.search(r"<h1>turbotfx run (\S+)</h1>", page.html)
    assert match, page.html[:300]
    return match.group(1)


def evaluation_artifact(home: Path):
    return latest_artifact(home, "ModelEvaluation", "Evaluator")


def test_a_binary_report_ranks_the_feature_the_label_depends_on_and_draws_its_curves(tmp_path):
    """A label made from one feature, beside a feature of pure noise: shuffling the first must
    cost AUC, shuffling the second next to nothing; the ROC's area is TFMA's AUC."""
    rows = 600
    rng = np.random.default_rng(11)
    signal, noise = rng.normal(size=rows).round(4), rng.normal(size=rows).round(4)
    label = np.where(signal + rng.normal(scale=0.5, size=rows) > 0, "yes", "no")
    data_root = tmp_path / "data"
    data_root.mkdir()
    # Price bands as people write them: matplotlib would read "$...$" as a TeX formula.
    band = rng.choice(["$", "$$", "$$$"], rows)
    pd.DataFrame({"signal": signal, "noise": noise, "band": band, "bought": label}).to_csv(
        data_root / "buyers.csv", index=False)
    home, dataset_file = tmp_path / "ws", tmp_path / "buyers.toml"
    init = cli("init", "--data-root", str(data_root), "--label", "bought", "--output", str(dataset_file),
               home=home)
    assert init.exit_code == 0, init.output
    run = cli("run", "--dataset", str(dataset_file), "--epochs", "10", *ONE_MODEL_ARGS, home=home)
    assert run.exit_code == 0, run.output
    page = read_page(report_of(run.stdout))
    assert [h for h in page.headings if h in HEADINGS] == HEADINGS

    drops = {row[0]: float(row[1]) for row in page.table("Which features matter").rows[1:]}
    assert drops["signal"] > 0.15 and abs(drops["noise"]) < 0.03 and abs(drops["band"]) < 0.03, drops
    assert {"$", "$$", "$$$"} <= set(page.svg_text)  # the band chart's labels, as written
    assert page.table("Which features matter").column("feature")[0] == "signal"

    evaluation = evaluation_artifact(home)
    insights = json.loads((Path(evaluation.uri) / evaluator_keys.INSIGHTS_FILE).read_text())
    tfma_auc = evaluation.custom_properties[evaluator_keys.METRIC_PREFIX + "auc[yes]"].double_value
    [(positive, roc)] = insights["roc"].items()
    assert positive == "yes" and roc["auc"] == pytest.approx(tfma_auc, abs=5e-3)
    eval_rows = split_examples(home, "eval")
    assert sum(b["rows"] for b in insights["calibration"]) == len(eval_rows)
    positives = sum(feature_value(r, "bought") == "yes" for r in eval_rows)
    assert insights["pr"]["yes"]["positive_share"] == pytest.approx(positives / len(eval_rows))
    assert {"ROC", "precision and recall", "calibration"} <= set(page.svg_text)
