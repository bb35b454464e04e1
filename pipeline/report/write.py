"""Writes a run's report page: where it goes, and whole or not at all."""

from __future__ import annotations

import re
from pathlib import Path

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline.atomic import atomic_path
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.report import diff_page, markup, page, records


def report_path(reports_dir: Path, run_id: str) -> Path:
    """reports/<pipeline>/<run id>.html; a run id is TFX's local start time, whose colons a
    file name had better not hold (they break a Windows share and a `scp` path)."""
    return reports_dir / (re.sub(r"[^A-Za-z0-9._-]", "-", run_id) + ".html")


def diff_path(reports_dir: Path, model_a: int, model_b: int) -> Path:
    """reports/<pipeline>/diff-<A>-<B>.html, by model artifact ids."""
    return reports_dir / f"diff-{model_a}-{model_b}.html"


def checked_output(target: Path, workspace: PipelineConfig, force: bool = False) -> Path:
    """target, where --output may write a page; ConfigError before any work where it may not.

    Never inside the folders turbotfx keeps for itself (the store and its copy, serving,
    pipelines, logs, data), even with force; never into a folder that is not there (a typo
    makes no folders); an existing file only if it is a page turbotfx wrote, or with force.
    """
    landing = target.expanduser().resolve()  # through links: where the bytes would go
    for what, folder in _kept_folders(workspace):
        folder = folder.resolve()
        if landing == folder or folder in landing.parents:
            raise ConfigError(f"{target} is in the workspace's {what} folder ({folder}), which only turbotfx "
                              "writes: name a file elsewhere (--output)")
    if not landing.parent.is_dir():
        raise ConfigError(f"{target.parent} is not a folder: create it first, or name a file in one that is "
                          "(--output)")
    if landing.is_file() and not force and not _is_report_page(landing):
        raise ConfigError(f"{target} exists and is not a report page turbotfx wrote: name a new file, or "
                          "replace it with --force")
    return target


def _kept_folders(workspace: PipelineConfig) -> list[tuple[str, Path]]:
    return [("metadata store", workspace.metadata_path.parent), ("serving", workspace.serving_dir.parent),
            ("pipelines", workspace.pipeline_root.parent), ("logs", workspace.log_path.parent),
            ("data", workspace.home_path / "data")]


def _is_report_page(path: Path) -> bool:
    try:
        with open(path, "rb") as existing:
            head = existing.read(4096)
    except OSError:
        return False
    return markup.GENERATOR_MARK.encode() in head


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
