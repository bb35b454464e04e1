"""Curated schemas kept in the repo, one per dataset (SchemaGen only proposes one)."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from pipeline.atomic import atomic_path

SCHEMA_DIR = Path(__file__).resolve().parent


def schema_file(dataset: str) -> Path:
    return SCHEMA_DIR / dataset / "schema.pbtxt"


def content_addressed_copy(schema: Path, directory: Path) -> Path:
    """A copy of schema at a path derived from its content.

    ImportSchemaGen's cache key is the file path, not the content: without this, an
    edited schema would be ignored on the next run in favour of the cached artifact.
    """
    digest = hashlib.sha256(schema.read_bytes()).hexdigest()[:16]
    target = directory / digest / schema.name
    if not target.exists():
        with atomic_path(target) as tmp:
            shutil.copyfile(schema, tmp)
    return target
