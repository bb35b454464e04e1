"""Custom TFX components: each has its component, executor and test."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
