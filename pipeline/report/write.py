"""Writes a run's report page: where it goes, and whole or not at all."""

from __future__ import annotations

import re
from pathlib import Path

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline.atomic import atomic_path
from pipeline.report import page, records


def report_path(reports_dir: Path, run_id: str) -> Path:
    """reports/<pipeline>/<run id>.html; a run id is TFX's local start time, whose colons a
    file name had better not hold (they break a Windows share and a `scp` path)."""
    return reports_dir / (re.sub(r"[^A-Za-z0-9._-]", "-", run_id) + ".html")


def write_report(store: metadata_store.MetadataStore, run: mlmd_pb.Context, target: Path,
                 serving_root: Path | None = None) -> Path:
    """Renders the run's report into target (replaced whole); returns target."""
    text = page.render_page(records.collect(store, run, serving_root))
    with atomic_path(target) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
    return target
