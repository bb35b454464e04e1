"""Names the Evaluator's records in MLMD go by: written by the executor and the pipeline
definition, read by the provenance queries and the run summary. No TFX import: the CLI
reads these."""

from __future__ import annotations

# Custom properties of the ModelEvaluation artifact: metric_<name> holds the candidate's
# value on the whole eval split, diff_<name> its change against the baseline model, and
# slice_metrics a JSON object {"feature=value": {name: value}} per slice.
METRIC_PREFIX = "metric_"
DIFF_PREFIX = "diff_"
SLICE_METRICS = "slice_metrics"
# Top-level exec property (a runtime parameter in a compiled pipeline) that replaces the
# lower bound of the accuracy threshold in eval_config: runtime parameters cannot live
# inside a proto property.
MIN_ACCURACY_KEY = "min_accuracy"
# The blessing metric: the TFMA metric class the thresholds sit on, and its metric name.
ACCURACY_CLASS_NAME = "SparseCategoricalAccuracy"
ACCURACY_METRIC = "sparse_categorical_accuracy"
# TFX's own names on the ModelBlessing (tfx.components.evaluator.constants).
BLESSED = "blessed"
BASELINE_MODEL_ID = "baseline_model_id"
