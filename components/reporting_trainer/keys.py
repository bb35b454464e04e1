"""Names the Trainer's records in MLMD go by: written by the executor and the pipeline
definition, read by the provenance queries. No TFX import: the CLI reads these."""

from __future__ import annotations

import base64
import json
from typing import Any

# Custom property per training-report entry on the Model artifact: training_<key>.
TRAINING_PREFIX = "training_"
# The report entry naming the label values in class id order (a JSON list), as the
# Trainer's vocabulary orders them: by frequency, or the named positive class as id 1.
# trainer_module/train.py spells it too (it imports nothing of ours; tests/test_keys.py).
CLASS_NAMES_KEY = "class_names"
# Top-level exec property (a runtime parameter in a compiled pipeline) that overrides the
# epochs in custom_config: runtime parameters cannot live inside a dict property.
EPOCHS_KEY = "epochs"
# The custom_config entry of Transform and the Trainer with a hash of the trainer_module
# sources each runs: part of the cache key, not a hyperparameter.
CODE_FINGERPRINT_KEY = "code_fingerprint"
# Trainer custom_config entries naming the dataset file a model was trained from, its
# content and a hash of it: lineage shows the file, diff shows when it changed. The content
# is base64: MLMD 1.16's PostgreSQL store fails on a string property holding JSON escapes
# (a newline or quote inside a JSON string).
DATASET_FILE_KEY = "dataset_file"
DATASET_TEXT_KEY = "dataset_file_base64"
DATASET_FINGERPRINT_KEY = "dataset_fingerprint"
# Trainer custom_config entries, copied onto the Model artifact as custom properties of the
# same names: the model (serving directory) it is trained for, and a hash of the feature
# contract its signatures take and answer (the schema's columns and types; label, task,
# classes). The Evaluator's baseline must match both: another dataset's model cannot score
# this one's rows.
MODEL_NAME_KEY = "model_name"
FEATURE_CONTRACT_KEY = "feature_contract"
# The Trainer's yardsticks (trainer_module/train.py, yardsticks.py write the report entries
# without the prefix): the blessing metric's name, its value on the whole train and eval
# splits, and the trivial baseline on eval (a constant learned from the train labels: the
# majority class, the mean or the median) with that constant as text. A trivial metric the
# data leaves undefined (AUC on a one-class eval split) is absent; the note says why.
BLESSING_METRIC_NAME = TRAINING_PREFIX + "blessing_metric"
TRAIN_METRIC = TRAINING_PREFIX + "train_metric"
EVAL_METRIC = TRAINING_PREFIX + "eval_metric"
TRIVIAL_METRIC = TRAINING_PREFIX + "trivial_metric"
TRIVIAL_PREDICTION = TRAINING_PREFIX + "trivial_prediction"
TRIVIAL_NOTE = TRAINING_PREFIX + "trivial_note"
# The model family the Trainer trained (TrainingConfig.model_family: dnn or gbt).
MODEL_FAMILY = TRAINING_PREFIX + "model_family"

# A JSON property value holding a backslash (a JSON escape: a label with a quote, a
# backslash or a control character) goes base64 behind this prefix: MLMD 1.16's
# PostgreSQL store fails on any backslash in a property (see DATASET_TEXT_KEY).
BASE64_JSON_PREFIX = "base64:"


def json_property(value: Any) -> str:
    """JSON text for a string property, readable in MLMD unless it would hold a backslash."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    if "\\" in text:
        return BASE64_JSON_PREFIX + base64.b64encode(text.encode()).decode("ascii")
    return text


def from_json_property(text: str) -> Any:
    """The value json_property wrote (or plain JSON text)."""
    if text.startswith(BASE64_JSON_PREFIX):
        text = base64.b64decode(text[len(BASE64_JSON_PREFIX):]).decode()
    return json.loads(text)
