"""Names the Trainer's records in MLMD go by: written by the executor and the pipeline
definition, read by the provenance queries. No TFX import: the CLI reads these."""

from __future__ import annotations

# Custom property per training-report entry on the Model artifact: training_<key>.
TRAINING_PREFIX = "training_"
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
