"""Feature names, keys and types of the penguins dataset."""

from __future__ import annotations

LABEL_KEY = "species"
NUMERIC_FEATURE_KEYS = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")
CATEGORICAL_FEATURE_KEYS = ("island", "sex")
CSV_COLUMNS = (LABEL_KEY, *CATEGORICAL_FEATURE_KEYS, *NUMERIC_FEATURE_KEYS)

# Slots for categories Transform never saw in training (kept small: the domains are closed).
NUM_OOV_BUCKETS = 1


def transformed_name(key: str) -> str:
    return f"{key}_xf"


def vocabulary_name(key: str) -> str:
    return f"{key}_vocab"


TRANSFORMED_LABEL_KEY = transformed_name(LABEL_KEY)
