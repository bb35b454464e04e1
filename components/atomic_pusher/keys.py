"""Names the Pusher's settings and records in MLMD go by: read by the pipeline definition,
the config and the provenance queries. No TFX import: the CLI reads these."""

from __future__ import annotations

from pathlib import PurePath

# custom_config key of the Pusher: how many versions stay on disk (labelled ones always do).
KEEP_VERSIONS_KEY = "keep_versions"
DEFAULT_KEEP_VERSIONS = 5
# TFX's own names on the PushedModel (tfx.components.pusher.executor).
PUSHED = "pushed"
PUSHED_VERSION = "pushed_version"
PUSHED_DESTINATION = "pushed_destination"
# JSON {"stable": version, "canary": version} on the PushedModel: the labels the push left.
SERVING_LABELS = "serving_labels"
# The execution type `turbotfx serving promote | rollback` records label changes under.
LABEL_CHANGE_TYPE = "turbotfx.ServingLabelChange"


def model_name_of(destination: str) -> str:
    """The model a push served: its version directory is <serving>/<model>/<version>."""
    return PurePath(destination.rstrip("/")).parent.name
