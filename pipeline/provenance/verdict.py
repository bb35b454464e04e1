"""Why a model was or was not blessed, and the yardsticks beside its metric: the trivial
baseline, the train split, the served baseline. Read from what the Evaluator and the Trainer
recorded in MLMD (components/reporting_evaluator, components/reporting_trainer)."""

from __future__ import annotations

import dataclasses
from typing import Any

from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.reporting_evaluator import keys as evaluator_keys
from components.reporting_trainer import keys as trainer_keys
from components.reporting_trainer.keys import from_json_property
from pipeline.config import BLESSING_THRESHOLD_FLAG as VALUE_FLAG
from pipeline.config import MAX_METRIC_DROP_FLAG as CHANGE_FLAG

_SHORT_NAMES = {recorded: short for short, recorded in evaluator_keys.METRIC_NAMES.items()}


@dataclasses.dataclass
class Verdict:
    metric: str | None = None  # accuracy, auc, rmse or mae
    trivial: float | None = None  # the trivial baseline's value on the eval split
    trivial_prediction: str | None = None  # what it always answers
    train: float | None = None  # the model's value on the train split
    value_bound: float | None = None
    bound_source: str | None = None  # a configured threshold or the trivial baseline
    failures: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    baseline_model_id: int | None = None  # the served model the candidate was compared with
    family: str | None = None  # the model family (dnn, gbt), when the Trainer recorded it

    @property
    def higher_is_better(self) -> bool:
        return evaluator_keys.HIGHER_IS_BETTER.get(self.metric or "", True)

    def read_evaluation(self, artifact: mlmd_pb.Artifact) -> None:
        properties = artifact.custom_properties
        if evaluator_keys.BLESSING_METRIC in properties:
            self.metric = short_name(properties[evaluator_keys.BLESSING_METRIC].string_value)
        if evaluator_keys.TRIVIAL_METRIC in properties:
            self.trivial = properties[evaluator_keys.TRIVIAL_METRIC].double_value
            self.trivial_prediction = properties[evaluator_keys.TRIVIAL_PREDICTION].string_value
        if evaluator_keys.VALUE_BOUND in properties:
            self.value_bound = properties[evaluator_keys.VALUE_BOUND].double_value
            self.bound_source = properties[evaluator_keys.VALUE_BOUND_SOURCE].string_value
        if evaluator_keys.VALIDATION_FAILURES in properties:
            self.failures = from_json_property(properties[evaluator_keys.VALIDATION_FAILURES].string_value or "[]")

    def read_model(self, artifact: mlmd_pb.Artifact) -> None:
        properties = artifact.custom_properties
        if trainer_keys.TRAIN_METRIC in properties:
            self.train = properties[trainer_keys.TRAIN_METRIC].double_value
        if trainer_keys.MODEL_FAMILY in properties:
            self.family = properties[trainer_keys.MODEL_FAMILY].string_value or None

    def read_blessing(self, artifact: mlmd_pb.Artifact) -> None:
        if evaluator_keys.BASELINE_MODEL_ID in artifact.custom_properties:
            self.baseline_model_id = artifact.custom_properties[evaluator_keys.BASELINE_MODEL_ID].int_value or None

    def reasons(self, value: float | None) -> list[str]:
        """Each bound the model broke, with both numbers and the flag that sets it."""
        metric = self.metric or "the blessing metric"
        reasons = []
        for failure in self.failures:
            if failure["value"] is None:  # NaN: a diverged model, or a metric the split leaves undefined
                flag = CHANGE_FLAG if failure["kind"] == "change" else VALUE_FLAG
                reasons.append(f"{metric} could not be computed on the eval split (n/a), so it meets no bound ({flag})")
            elif failure["kind"] == "change":
                allowed = abs(failure["bound"]) - evaluator_keys.CHANGE_TIE_MARGIN
                worse = -failure["value"] if self.higher_is_better else failure["value"]
                against = f"model {self.baseline_model_id}" if self.baseline_model_id else "the served model"
                verb = "dropped" if self.higher_is_better else "rose"
                reasons.append(f"{metric} {verb} {worse:.4f} > {allowed:.4f} against {against} ({CHANGE_FLAG})")
            elif self.bound_source == evaluator_keys.BOUND_FROM_TRIVIAL and self.trivial is not None:
                relation = "not above" if self.higher_is_better else "not below"
                reasons.append(f"{metric} {failure['value']:.4f} is {relation} the trivial baseline "
                               f"{self.trivial:.4f} ({self.trivial_answer()}): no better than a constant")
            else:
                relation = "<" if self.higher_is_better else ">"
                reasons.append(f"{metric} {failure['value']:.4f} {relation} bound {failure['bound']:.4f} "
                               f"({VALUE_FLAG})")
        return reasons

    def trivial_answer(self) -> str:
        if self.metric == "auc":
            return "a constant score"
        if not self.higher_is_better:
            return f"always {self.trivial_prediction}"
        return f"always {self.trivial_prediction!r}"

    def yardstick_lines(self, value: float | None, baseline_change: float | None) -> list[str]:
        """The model's metric beside what it is measured against."""
        if self.metric is None or value is None:
            return []
        lines = [f"against ({self.metric}, eval split unless named):"]
        this_model = f"this model ({self.family})" if self.family else "this model"
        if self.trivial is not None:
            lines.append(f"  {'trivial baseline (' + self.trivial_answer() + ')':<40} {self.trivial:.4f}")
        if self.train is not None:
            gap = self.train - value if self.higher_is_better else value - self.train
            lines.append(f"  {this_model + ', train split':<40} {self.train:.4f}")
            lines.append(f"  {this_model:<40} {value:.4f}  (train/eval gap {gap:+.4f})")
        else:
            lines.append(f"  {this_model:<40} {value:.4f}")
        served = f"served baseline, model {self.baseline_model_id}" if self.baseline_model_id else "served baseline"
        if baseline_change is not None:
            lines.append(f"  {served:<40} {value - baseline_change:.4f}  (this model {baseline_change:+.4f})")
        elif self.baseline_model_id:
            lines.append(f"  {served:<40} n/a (no change comparable with this model)")
        else:
            lines.append(f"  {'served baseline':<40} none of this dataset yet")
        return lines

    def as_dict(self, value: float | None, blessed: bool | None) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "value": value, "blessed": blessed,
                "reasons": self.reasons(value) if blessed is False else []}


def short_name(recorded: str) -> str:
    """'auc[yes]' or 'sparse_categorical_accuracy' -> auc, accuracy (the dataset file's names)."""
    base = recorded.split("[", 1)[0]
    return _SHORT_NAMES.get(base, base)
