"""One regression run on the homes table (tests/e2e/test_yardsticks.homes_dataset: a price
from a size and a kind of home, ~320 train rows, so five bagged models), read by two sets of
checks: the Trainer's yardsticks in MLMD, and the run's report page. One run serves both (it
was two, alike but for the epochs).

Expected values come from the examples ExampleGen wrote for each split (tf.train.Example),
the exported model's predictions on them, MLMD's records read here directly and TensorFlow's
own reader of the Trainer's TensorBoard logs, never from the training report.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from components.reporting_evaluator import keys as evaluator_keys
from components.reporting_trainer import keys
from tests.conftest import CliResult, cli
from tests.e2e.test_report import HEADINGS, evaluation_artifact, report_of, tensorflow_curve
from tests.e2e.test_yardsticks import (
    HOMES_ROWS,
    epoch_lines,
    feature_value,
    homes_dataset,
    latest_artifact,
    model_epoch_lines,
    predict,
    split_examples,
)
from tests.report_page import read_page

pytestmark = pytest.mark.e2e

# Enough epochs to beat the mean by far: the run is blessed (a verdict may refuse a model no
# better than the trivial baseline, whatever the threshold).
EPOCHS = 10


@dataclasses.dataclass(frozen=True)
class HomesRun:
    home: Path
    result: CliResult


@pytest.fixture(scope="module")
def homes_run(tmp_path_factory: pytest.TempPathFactory) -> HomesRun:
    home, dataset_file = homes_dataset(tmp_path_factory.mktemp("homes"))
    result = cli("run", "--dataset", str(dataset_file), "--epochs", str(EPOCHS), "--blessing-threshold", "1e9",
                 home=home)
    assert result.exit_code == 0, result.output
    return HomesRun(home=home, result=result)


def test_a_regression_records_the_train_mean_as_its_trivial_baseline(homes_run: HomesRun):
    rows, home, run = HOMES_ROWS, homes_run.home, homes_run.result
    # ~320 train rows: five bagged models by default, each stopping early on its own fold.
    per_model = model_epoch_lines(run.stdout, 5, EPOCHS, "rmse")
    assert sorted(per_model) == [1, 2, 3, 4, 5], run.stdout
    assert all(epochs == list(range(1, len(epochs) + 1)) for epochs in per_model.values()), per_model
    assert epoch_lines(run.stdout, EPOCHS, "rmse") == [], run.stdout

    props = latest_artifact(home, "Model", "Trainer").custom_properties
    train_rows, eval_rows = (split_examples(home, split) for split in ("train", "eval"))
    train_price = np.array([feature_value(row, "price") for row in train_rows], dtype=np.float64)
    eval_price = np.array([feature_value(row, "price") for row in eval_rows], dtype=np.float64)
    assert len(train_price) + len(eval_price) == rows
    mean = train_price.mean()
    assert props[keys.BLESSING_METRIC_NAME].string_value == "rmse"
    assert props[keys.TRIVIAL_METRIC].double_value == pytest.approx(np.sqrt(np.mean((eval_price - mean) ** 2)),
                                                                    rel=2e-5)
    assert props[keys.TRIVIAL_PREDICTION].string_value == f"{mean:.4g}"
    predicted = predict(home, train_rows)["prediction"].ravel()
    train_rmse = np.sqrt(np.mean((predicted - train_price) ** 2))
    assert props[keys.TRAIN_METRIC].double_value == pytest.approx(train_rmse, rel=0.02)
    assert props[keys.EVAL_METRIC].double_value < 0.5 * props[keys.TRIVIAL_METRIC].double_value


def test_a_regression_report_shows_its_yardsticks_and_each_bagged_models_curves(homes_run: HomesRun, tmp_path):
    home, run = homes_run.home, homes_run.result
    page = read_page(report_of(run.stdout))
    assert [h for h in page.headings if h in HEADINGS] == HEADINGS
    assert "Confusion matrix" not in page.headings

    # The trivial baseline is the train split's mean, scored on the eval split's prices.
    train_price = np.array([feature_value(r, "price") for r in split_examples(home, "train")], dtype=np.float64)
    eval_price = np.array([feature_value(r, "price") for r in split_examples(home, "eval")], dtype=np.float64)
    trivial = np.sqrt(np.mean((eval_price - train_price.mean()) ** 2))
    assert f"trivial baseline (always {train_price.mean():.4g})" in page.svg_text
    assert f"{trivial:.4g}" in page.svg_text
    evaluation = evaluation_artifact(home).custom_properties
    rmse = evaluation[evaluator_keys.METRIC_PREFIX + "root_mean_squared_error"].double_value
    assert page.table("Metrics on the eval split").rows[1:] and f"{rmse:.4g}" in page.svg_text

    # Residuals: every eval row counted; their mean as the served model's predictions give it.
    insights = json.loads((Path(evaluation_artifact(home).uri) / evaluator_keys.INSIGHTS_FILE).read_text())
    eval_rows = split_examples(home, "eval")
    assert sum(insights["residuals"]["counts"]) == len(eval_rows)
    predicted = predict(home, eval_rows)["prediction"].ravel()
    assert insights["residuals"]["mean"] == pytest.approx(float(np.mean(predicted - eval_price)), rel=1e-4, abs=1e-3)
    assert {"residuals", "prediction against label"} <= set(page.svg_text)
    assert set(page.table("Which features matter").column("feature")) == {"size", "kind"}

    # ~320 train rows bag five models: each has its own curve, as TensorFlow reads its logs.
    from pipeline.report import files

    model_run = latest_artifact(home, "ModelRun", "Trainer")
    curves = files.read_curves(model_run.uri)
    members = sorted(Path(model_run.uri).glob("member_*"))
    assert len(members) == 5
    for member in members:
        name = f"train, model {member.name.split('_')[1]}"
        assert [v for _, v in curves["loss"][name]] == pytest.approx(
            tensorflow_curve(str(member), "train", "epoch_loss"), rel=1e-6)
    assert {"size", "kind", "price"} <= set(page.table("Data", "data").column("feature"))

    # The artifacts copied elsewhere (a compiled pipeline's, fetched from its bucket): the
    # page names what it cannot find, and --artifact-root says where they went.
    # (The workspace is put back as the run left it afterwards: this module's other test reads it.)
    copied = tmp_path / "copied"
    insights_file = next((home / "pipelines").glob(f"*/Evaluator/evaluation/*/{evaluator_keys.INSIGHTS_FILE}"))
    insights_text = insights_file.read_text()
    (home / "pipelines").rename(copied)
    try:
        without = cli("report", "--output", str(tmp_path / "without.html"), home=home)
        assert without.exit_code == 0, without.output
        lost = read_page(tmp_path / "without.html")
        assert "Not on this machine" in lost.html and "ExampleStatistics" in lost.html
        assert "No statistics to show" in lost.section_html("data")
        found = cli("report", "--output", str(tmp_path / "found.html"), "--artifact-root",
                         f"{home / 'pipelines'}={copied}", home=home)
        assert found.exit_code == 0, found.output
        again = read_page(tmp_path / "found.html")
        assert "Not on this machine" not in again.html
        assert again.table("Data", "data").rows == page.table("Data", "data").rows
        assert again.table("Which features matter").rows == page.table("Which features matter").rows
        # A damaged file leaves its part out, named, and the rest of the page stands.
        damaged_file = next(copied.glob(f"*/Evaluator/evaluation/*/{evaluator_keys.INSIGHTS_FILE}"))
        damaged_file.write_text(insights_text[:40])
        damaged = cli("report", "--output", str(tmp_path / "damaged.html"), "--artifact-root",
                           f"{home / 'pipelines'}={copied}", home=home)
        assert damaged.exit_code == 0, damaged.output
        partial = read_page(tmp_path / "damaged.html")
        assert "could not be read" in partial.html and "ModelEvaluation" in partial.html
        assert partial.table("Data", "data").rows == page.table("Data", "data").rows
        assert "Which features matter" in partial.headings and "could not be read" in partial.section_html("importance")
    finally:
        copied.rename(home / "pipelines")
        insights_file.write_text(insights_text)
