"""A push as one step over the serving directory and models.config: the version directory
and its labels appear together, or neither does."""

from __future__ import annotations

import contextlib
from pathlib import Path

from serving import model_config, push


def push_and_label(model_path: str, model_dir: Path, extra_files: dict[str, str]) -> tuple[int, Path, dict[str, int]]:
    """The version directory and its models.config entry appear together or not at all.

    TFX records the PushedModel in MLMD after this returns; a version that record never
    reaches (a kill, a failed write) is set aside by the next start's reconciliation
    (serving/reconcile.py).
    """
    serving_root, model_name = model_dir.parent, model_dir.name
    with model_config.changing(serving_root, create=True):
        # A config that cannot be read fails the push before anything is copied.
        model_config.read_config(serving_root)
        snapshot = model_config.config_snapshot(serving_root)
        version, serving_path = push.push(model_path, model_dir, extra_files=extra_files)
        try:
            current = model_config.record_push(serving_root, model_name, version)
        except BaseException:
            # Config first, then the directory: a polling server never serves a missing version.
            with contextlib.suppress(OSError):
                model_config.restore_snapshot(serving_root, snapshot)
            with contextlib.suppress(OSError):
                push.remove_version(model_dir, version)
            raise
    labels = {label: value for label, value in ((model_config.STABLE, current.stable),
                                                (model_config.CANARY, current.canary)) if value is not None}
    return version, serving_path, labels
