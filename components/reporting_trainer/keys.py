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
# Trainer custom_config entries, copied onto the Model artifact as custom properties of the
# same names: the model (serving directory) it is trained for, and a hash of the feature
# contract its signatures take (label, task, feature roles, schema types). The Evaluator's
# baseline must match both: another dataset's model cannot score this one's rows.
MODEL_NAME_KEY = "model_name"
FEATURE_CONTRACT_KEY = "feature_contract"
