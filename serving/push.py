"""Atomic, versioned pushes into a TF Serving model directory, and version retention.

TF Serving polls `<model_dir>/<integer>/` and may load a version the moment its
directory appears. TFX's Pusher copies file by file into the final directory, so a
server can load a half-copied model. Here the copy goes to a hidden temporary
directory beside the versions (TF Serving ignores names that are not integers) and is
renamed into place in one step once complete.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Iterable

from serving.errors import PushError

TEMP_PREFIX = ".push-"
# Where versions no push record accounts for are moved: a hidden name TF Serving never loads.
SET_ASIDE_DIR = ".set-aside"


def versions(model_dir: str | os.PathLike) -> list[int]:
    """The complete versions in a model directory, oldest first."""
    path = Path(model_dir)
    if not path.is_dir():
        return []
    return sorted(int(p.name) for p in path.iterdir() if p.is_dir() and p.name.isdigit())


def next_version(model_dir: str | os.PathLike, now: float | None = None) -> int:
    """Seconds since the epoch, like TFX's versions, but always above every existing one."""
    stamp = int(time.time() if now is None else now)
    existing = versions(model_dir)
    return max(stamp, existing[-1] + 1) if existing else stamp


def push(source_dir: str | os.PathLike, model_dir: str | os.PathLike, version: int | None = None,
         extra_files: dict[str, str] | None = None) -> tuple[int, Path]:
    """Copies a SavedModel into <model_dir>/<version>/ atomically; returns (version, path).

    extra_files: {path inside the version: source file}, e.g. the warmup requests, added
    before the version appears.
    """
    source, target_root = Path(source_dir), Path(model_dir)
    if not (source / "saved_model.pb").is_file():
        raise PushError(f"{source} holds no SavedModel (no saved_model.pb); nothing was pushed")
    target_root.mkdir(parents=True, exist_ok=True)
    version = next_version(target_root) if version is None else version
    final = target_root / str(version)
    if final.exists():
        raise PushError(f"version {version} already exists in {target_root}; nothing was pushed")
    staging = target_root / f"{TEMP_PREFIX}{version}-{uuid.uuid4().hex[:8]}"
    try:
        shutil.copytree(source, staging)
        for relative, source_file in (extra_files or {}).items():
            (staging / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source_file, staging / relative)
        _fsync_tree(staging)
        os.rename(staging, final)  # atomic on one filesystem; fails if final appeared meanwhile
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return version, final


def remove_stale_staging(model_dir: str | os.PathLike) -> list[Path]:
    """Removes temporary directories a killed push left behind (never a version)."""
    path = Path(model_dir)
    stale = [p for p in path.iterdir() if p.is_dir() and p.name.startswith(TEMP_PREFIX)] if path.is_dir() else []
    for directory in stale:
        shutil.rmtree(directory, ignore_errors=True)
    return stale


def remove_version(model_dir: str | os.PathLike, version: int) -> None:
    """Deletes one version; it leaves the served names in one rename, never half-deleted."""
    doomed = Path(model_dir) / f"{TEMP_PREFIX}delete-{version}-{uuid.uuid4().hex[:8]}"
    os.rename(Path(model_dir) / str(version), doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def set_aside(model_dir: str | os.PathLike, version: int) -> Path:
    """Moves a version out of TF Serving's sight, intact, for a person to inspect or delete."""
    aside = Path(model_dir) / SET_ASIDE_DIR
    aside.mkdir(exist_ok=True)
    target = aside / str(version)
    if target.exists():
        target = aside / f"{version}-{uuid.uuid4().hex[:8]}"
    os.rename(Path(model_dir) / str(version), target)
    return target


def apply_retention(model_dir: str | os.PathLike, keep: int, protected: Iterable[int] = ()) -> list[int]:
    """Deletes the oldest versions beyond the newest `keep`, never a protected one
    (the versions labelled stable or canary); returns the deleted versions."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    protected = set(protected)
    existing = versions(model_dir)
    kept = set(existing[-keep:]) | protected
    deleted = [v for v in existing if v not in kept]
    for version in deleted:
        remove_version(model_dir, version)
    return deleted


def _fsync_tree(root: Path) -> None:
    """Flushes the copied files to disk before the rename publishes them."""
    for directory, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(directory, name), "rb") as handle:
                os.fsync(handle.fileno())
