"""The verdict as a user reads it: which bound failed, with both numbers and the flag that
sets it, for each task; the trivial baseline as a floor under every value bound. The records
are written by the Evaluator executor's own functions into a real SQLite MLMD store and read
back as `turbotfx run` does."""

from __future__ import annotations

import json

import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format
from tfx.types import standard_artifacts

from components.reporting_evaluator import executor as reporting_evaluator
from components.reporting_evaluator import keys as evaluator_keys
from components.reporting_trainer import keys as trainer_keys
from pipeline import pipeline as pipeline_lib
from pipeline.config import PipelineConfig
from pipeline.provenance import summary
from pipeline.store.connection import open_store
from pipeline.store.url import sqlite_url
from tests.test_run_summary import Store


def _run(tmp_path, metric: str, value: float, *, trivial: float | None, bound, failures, diff=None,
         baseline_model_id: int = 0, train: float | None = None) -> summary.RunSummary:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = Store(open_store(sqlite_url(tmp_path / "metadata.sqlite")))
    run = store.run("run-1")
    model = standard_artifacts.Model()
    model.uri = "/model/1"
    if train is not None:
        model.set_float_custom_property(trainer_keys.TRAIN_METRIC, train)
    evaluation = standard_artifacts.ModelEvaluation()
    evaluation.uri = "/eval/1"
    reporting_evaluator.record_metrics(
        evaluation, reporting_evaluator.Metrics(overall={metric: value}, diff={metric: diff} if diff is not None else {}),
        metric)
    reporting_evaluator.record_verdict(
        evaluation, None if trivial is None else reporting_evaluator.Trivial(trivial, "Adelie"), bound, failures)
    blessing = standard_artifacts.ModelBlessing()
    blessing.uri = "/blessing/1"
    blessing.set_int_custom_property(evaluator_keys.BLESSED, 0 if failures else 1)
    blessing.set_int_custom_property(evaluator_keys.BASELINE_MODEL_ID, baseline_model_id)
    store.execution(run, "Trainer", outputs=[model])
    store.execution(run, "Evaluator", outputs=[evaluation, blessing])
    return summary.latest_run(store.mlmd, "turbotfx")


def test_a_value_bound_names_both_numbers_and_its_flag_for_an_error_metric(tmp_path):
    bound = reporting_evaluator.Bound(33.0, evaluator_keys.BOUND_FROM_THRESHOLD)
    run = _run(tmp_path, "root_mean_squared_error", 35.2, trivial=41.7, bound=bound,
               failures=[{"kind": "value", "value": 35.2, "bound": 33.0}])
    assert "blessed: no — rmse 35.2000 > bound 33.0000 (--blessing-threshold)" in run.format()
    assert run.verdict.reasons(run.blessing_value) == ["rmse 35.2000 > bound 33.0000 (--blessing-threshold)"]


def test_a_drop_bound_names_the_baseline_model_per_direction(tmp_path):
    run = _run(tmp_path, "auc[yes]", 0.90, trivial=0.5, bound=None, diff=-0.031, baseline_model_id=9,
               failures=[{"kind": "change", "value": -0.031, "bound": -(0.02 + 1e-10)}])
    assert "blessed: no — auc dropped 0.0310 > 0.0200 against model 9 (--max-metric-drop)" in run.format()
    # The served baseline's value is the candidate's minus the change TFMA measured.
    assert "served baseline, model 9" in run.format() and "0.9310" in run.format()
    error = _run(tmp_path / "mae", "mean_absolute_error", 3.5, trivial=5.0, bound=None, diff=0.8,
                 baseline_model_id=4, failures=[{"kind": "change", "value": 0.8, "bound": 0.5 + 1e-10}])
    assert "mae rose 0.8000 > 0.5000 against model 4 (--max-metric-drop)" in error.format()


def test_no_better_than_the_trivial_baseline_says_so(tmp_path):
    floor = 0.44 + reporting_evaluator.TIE_MARGIN
    bound = reporting_evaluator.Bound(floor, evaluator_keys.BOUND_FROM_TRIVIAL)
    run = _run(tmp_path, "sparse_categorical_accuracy", 0.44, trivial=0.44, bound=bound, train=0.46,
               failures=[{"kind": "value", "value": 0.44, "bound": floor}])
    text = run.format()
    assert ("blessed: no — accuracy 0.4400 is not above the trivial baseline 0.4400 (always 'Adelie'): "
            "no better than a constant") in text
    assert "trivial baseline (always 'Adelie')" in text and "train/eval gap +0.0200" in text
    assert "served baseline" in text and "none of this dataset yet" in text
    document = run.as_json()
    json.dumps(document, allow_nan=False)  # one JSON document for scripts
    assert document["verdict"]["trivial"] == pytest.approx(0.44) and document["verdict"]["blessed"] is False
    assert document["verdict"]["reasons"] and document["verdict"]["value"] == pytest.approx(0.44)


def test_a_blessed_run_shows_its_yardsticks_without_reasons(tmp_path):
    run = _run(tmp_path, "sparse_categorical_accuracy", 0.97, trivial=0.44,
               bound=reporting_evaluator.Bound(0.6, evaluator_keys.BOUND_FROM_THRESHOLD), failures=[])
    text = run.format()
    assert "blessed: yes" in text and "trivial baseline (always 'Adelie')" in text
    assert run.as_json()["verdict"]["reasons"] == []


def _bounds(config: PipelineConfig, trivial: float | None) -> tuple[dict, reporting_evaluator.Bound | None]:
    properties = {"eval_config": json_format.MessageToJson(pipeline_lib.eval_config(config))}
    trivial_record = None if trivial is None else reporting_evaluator.Trivial(trivial, "x")
    changed, bound = reporting_evaluator.with_trivial_floor(properties, trivial_record)
    eval_config = tfma.EvalConfig()
    json_format.Parse(changed["eval_config"], eval_config)
    thresholds = [t.threshold.value_threshold for spec in eval_config.metrics_specs for m in spec.metrics
                  for t in m.per_slice_thresholds]
    return thresholds, bound


@pytest.mark.parametrize("threshold, trivial, expected, source", [
    (0.6, 0.44, 0.6, evaluator_keys.BOUND_FROM_THRESHOLD),  # the configured bound is stricter
    (0.3, 0.44, 0.44 + reporting_evaluator.TIE_MARGIN, evaluator_keys.BOUND_FROM_TRIVIAL),
    (0.3, None, 0.3, evaluator_keys.BOUND_FROM_THRESHOLD),  # no trivial baseline recorded
])
def test_the_value_bound_is_never_looser_than_the_trivial_baseline(threshold, trivial, expected, source):
    [value_threshold], bound = _bounds(PipelineConfig(blessing_threshold=threshold), trivial)
    assert value_threshold.lower_bound.value == pytest.approx(expected, abs=1e-12)
    assert (bound.value, bound.source) == (pytest.approx(expected, abs=1e-12), source)


def _regression_dataset(tmp_path, threshold: float | None):
    dataset = tmp_path / "reg.toml"
    builtin = PipelineConfig().spec
    bound = "" if threshold is None else f"threshold = {threshold}\n"
    dataset.write_text(
        f'name = "reg"\ngenerate = "penguins"\nlabel = "body_mass_g"\ntask = "regression"\n'
        f'schema = "{builtin.schema}"\n[features]\nbill_length_mm = "numeric"\n'
        f'[blessing]\nmetric = "rmse"\nmax_drop = 50.0\n{bound}')
    return PipelineConfig(dataset=str(dataset))


@pytest.mark.parametrize("threshold, expected, source", [
    (None, 800.0 - reporting_evaluator.TIE_MARGIN, evaluator_keys.BOUND_FROM_TRIVIAL),  # no threshold: the constant's
    (900.0, 800.0 - reporting_evaluator.TIE_MARGIN, evaluator_keys.BOUND_FROM_TRIVIAL),  # looser than a constant
    (600.0, 600.0, evaluator_keys.BOUND_FROM_THRESHOLD),  # stricter: kept
])
def test_an_error_metric_is_bounded_above_by_the_smaller_of_threshold_and_trivial(tmp_path, threshold, expected,
                                                                                   source):
    [value_threshold], bound = _bounds(_regression_dataset(tmp_path, threshold), 800.0)
    assert value_threshold.HasField("upper_bound") and not value_threshold.HasField("lower_bound")
    assert value_threshold.upper_bound.value == pytest.approx(expected, abs=1e-12)
    assert (bound.value, bound.source) == (pytest.approx(expected, abs=1e-12), source)


def test_a_metric_that_could_not_be_computed_still_names_its_bound(tmp_path):
    bound = reporting_evaluator.Bound(33.0, evaluator_keys.BOUND_FROM_THRESHOLD)
    run = _run(tmp_path, "root_mean_squared_error", 35.2, trivial=41.7, bound=bound,
               failures=[{"kind": "value", "value": float("nan"), "bound": 33.0}])
    assert run.verdict.reasons(None) == [
        "rmse could not be computed on the eval split (n/a), so it meets no bound (--blessing-threshold)"]
    json.dumps(summary.finite_or_none(run.as_json()), allow_nan=False)


def test_a_run_that_pushed_nothing_says_why_and_exits_not_blessed():
    from pipeline import workspace

    def completed(**fields) -> summary.RunSummary:
        return summary.RunSummary(run_id="r", pipeline="turbotfx", status="COMPLETE", start_ms=0, end_ms=1,
                                  components=[], **fields)

    failed_check = completed(blessed=True, serving_check={"passed": False, "problems": ["no serving_raw signature"]})
    assert workspace.why_nothing_was_pushed(failed_check) == "the serving check failed: no serving_raw signature"
    not_blessed = completed(blessed=False)
    assert workspace.why_nothing_was_pushed(not_blessed).startswith("not blessed")
    pushed = completed(blessed=True, serving_check={"passed": True, "problems": []}, pushed_version="17")
    assert workspace.why_nothing_was_pushed(pushed) is None
