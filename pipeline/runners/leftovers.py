"""Artifact folders in the pipeline root that the metadata store does not know.

TFX names each output folder by the execution that writes it
(<root>/<node>/<output>/<execution id>, <root>/<node>/.system/executor_execution/<execution id>). A store
that starts its ids again (a damaged store moved aside, a last good copy restored after a
later run) would send a new execution into an old folder: ImportSchemaGen then fails ("file
already exists") and other components would write over artifacts another store names. So,
before a run, the folders of executions newer than the store's newest are set aside whole.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

# Beside the components' folders: TFX never names a node with a leading dot.
SET_ASIDE_DIR = ".set-aside"
# TFX's per-execution bookkeeping folders under <node>/.system/.
SYSTEM_DIR = ".system"
# (driver_execution folders are named by a clock reading, not an execution id.)
SYSTEM_KINDS = ("executor_execution",)


def execution_folders(pipeline_root: Path) -> list[tuple[int, Path]]:
    """(execution id, folder) of every per-execution folder TFX made under the root."""
    found: list[tuple[int, Path]] = []
    if not pipeline_root.is_dir():
        return found
    for node in pipeline_root.iterdir():
        if not node.is_dir() or node.name.startswith("."):
            continue
        parents = [p for p in node.iterdir() if p.is_dir() and not p.name.startswith(".")]
        parents += [node / SYSTEM_DIR / kind for kind in SYSTEM_KINDS if (node / SYSTEM_DIR / kind).is_dir()]
        for parent in parents:
            found += [(int(folder.name), folder) for folder in parent.iterdir()
                      if folder.is_dir() and folder.name.isdigit()]
    return sorted(found)


def set_aside_unknown(pipeline_root: Path, newest_execution_id: int) -> tuple[int, Path | None]:
    """Moves the folders of executions after newest_execution_id (0: an empty store) to
    <root>/.set-aside/<time>/, keeping their paths; returns how many and where."""
    unknown = [(i, folder) for i, folder in execution_folders(pipeline_root) if i > newest_execution_id]
    if not unknown:
        return 0, None
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    target_root = pipeline_root / SET_ASIDE_DIR / stamp
    for _, folder in unknown:
        target = target_root / folder.relative_to(pipeline_root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(folder, target)
    return len(unknown), target_root
