"""Names the Tuner's records in MLMD go by: written by its executor, matched by its resolver,
read by the provenance queries (`turbotfx lineage`, `turbotfx tune show`). No TFX import."""

from __future__ import annotations

# The Tuner's exec properties (components/tuner/component.py).
TRIALS, MINUTES, KNOBS, STORAGE, STUDY_NAME, PARALLELISM = (
    "trials", "minutes", "knobs", "storage", "study_name", "parallelism")
# The environment variable holding the storage's password: the storage URL (an SQLAlchemy URL)
# never carries it, since exec properties are recorded in MLMD.
PASSWORD_ENV = "password_env"
# The file in the best_hyperparameters artifact's directory (the Trainer's executor reads the
# only file there): {"values": {knob: value}}.
HYPERPARAMETERS_FILE = "best_hyperparameters.json"
# Custom properties of the HyperParameters artifact.
TRIALS_PROPERTY = "tuning_trials"  # JSON list: number, state, score, duration_s, values, steps, ...
TRIAL_COUNT = "tuning_trial_count"
PRUNED_COUNT = "tuning_pruned_count"
FAILED_COUNT = "tuning_failed_count"
BEST_TRIAL = "tuning_best_trial"  # the best trial's number (from 0)
BEST_SCORE = "tuning_best_score"
BEST_VALUES = "tuning_best_values"  # JSON object: knob -> value
OBJECTIVE = "tuning_objective"
WALL_S = "tuning_wall_s"
STUDY = "tuning_study"
# What a result may be reused for (the resolver): the search space's fingerprint and the
# feature contract and model name of the dataset it was tuned on.
SEARCH_SPACE = "tuning_search_space"
FEATURE_CONTRACT = "tuning_feature_contract"
MODEL_NAME = "tuning_model_name"
