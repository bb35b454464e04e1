"""Writes a run's report page: where it goes, and whole or not at all."""

from __future__ import annotations

import re
from pathlib import Path

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline.atomic import atomic_path
from pipeline.errors import ConfigError
from pipeline.report import diff_page, page, records


def report_path(reports_dir: Path, run_id: str) -> Path:
    """reports/<pipeline>/<run id>.html; a run id is TFX's local start time, whose colons a
    file name had better not hold (they break a Windows share and a `scp` path)."""
    return reports_dir / (re.sub(r"[^A-Za-z0-9._-]", "-", run_id) + ".html")


def diff_path(reports_dir: Path, model_a: int, model_b: int) -> Path:
    """reports/<pipeline>/diff-<A>-<B>.html, by model artifact ids."""
    return reports_dir / f"diff-{model_a}-{model_b}.html"


def write_report(store: metadata_store.MetadataStore, run: mlmd_pb.Context, target: Path,
                 serving_root: Path | None = None, artifact_root: records.ArtifactRoot | None = None) -> Path:
    """Renders the run's report into target (replaced whole); returns target."""
    return _write(target, page.render_page(records.collect(store, run, serving_root, artifact_root)))


def write_diff(store: metadata_store.MetadataStore, model_a: mlmd_pb.Artifact, model_b: mlmd_pb.Artifact,
               target: Path, artifact_root: records.ArtifactRoot | None = None) -> Path:
    """Renders the page comparing two models into target (replaced whole); returns target."""
    from pipeline.provenance import diff, lineage

    first, second = (records.collect(store, records.run_of_model(store, model), artifact_root=artifact_root)
                     for model in (model_a, model_b))
    changes = diff.diff_models(lineage.model_lineage(store, model_a), lineage.model_lineage(store, model_b))
    return _write(target, diff_page.render_diff(first, second, changes))


def _write(target: Path, text: str) -> Path:
    """The page written whole beside target, then renamed over it. Through a symbolic link
    the file it points at is replaced (the link stays); a device, a pipe or a folder at the
    path is never replaced."""
    if target.is_symlink() and target.resolve().is_file():
        target = target.resolve()
    if target.exists() and not target.is_file() or target.is_symlink():
        raise ConfigError(f"{target} is not a regular file: the report replaces a file whole, so name a new "
                          "file or an existing page (--output)")
    try:
        with atomic_path(target) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
    except OSError as err:
        # The temporary file's name in the message would send the reader looking for it.
        raise OSError(err.errno, err.strerror, str(target)) from None
    return target
