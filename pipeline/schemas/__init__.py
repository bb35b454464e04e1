"""Curated schemas (one per dataset file, beside it) as ImportSchemaGen reads them."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from pipeline.atomic import atomic_path


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
