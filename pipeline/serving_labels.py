"""The labels TF Serving routes by (stable, canary), as library calls that never print:
`promote` and `rollback` change them, `status` reads them with the run each version came
from. Each first brings the serving directory into agreement with the push records
(workspace.reconcile_serving); a change is recorded in MLMD, so a lost models.config is
rebuilt with the labels it left.

Each hands every line meant for the user (what reconciling put right, warnings) to a
`report` callback as it happens, so a line is not lost to an error raised after it, and
returns the model's ServingStatus; `turbotfx serving` (cli/serve.py) renders it.
"""

from __future__ import annotations

import dataclasses
import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.workspace import Report

if TYPE_CHECKING:
    from ml_metadata.metadata_store import metadata_store

    from serving.model_config import ModelStatus

# A read-only workspace (a mounted copy, a locked-down folder) answers these.
_READ_ONLY_ERRNOS = (errno.EACCES, errno.EPERM, errno.EROFS)


def _ignore(line: str) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class ServedVersion:
    """A version on disk, and the Model artifact and run it came from where the store
    knows it (model_id None: pushed by another store, or before MLMD kept it)."""

    version: int
    model_id: int | None = None
    run_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        origin = {} if self.model_id is None else {"model_id": self.model_id, "run_id": self.run_id}
        return {"version": self.version, **origin}


@dataclasses.dataclass(frozen=True)
class ServingStatus:
    """One model's labels and versions, as models.config and the disk have them."""

    model: str
    stable: int | None
    canary: int | None
    served: tuple[int, ...]  # the versions models.config tells the server to load
    versions: tuple[ServedVersion, ...]  # complete versions on disk, oldest first
    config_path: Path  # the models.config holding the labels

    def labels_of(self, version: int) -> list[str]:
        """The labels on one version: stable, canary, both or none."""
        from serving.model_config import CANARY, STABLE

        return [label for label, labelled in ((STABLE, self.stable), (CANARY, self.canary)) if labelled == version]

    def as_json(self) -> dict[str, Any]:
        return {"model": self.model, "stable": self.stable, "canary": self.canary, "served": list(self.served),
                "versions": [version.as_json() for version in self.versions]}


def promote(config: PipelineConfig, version: int | None = None, report: Report = _ignore, *,
            metadata_url: str | None = None) -> ServingStatus:
    """Labels a version stable (default: the canary). metadata_url: the store whose push
    records are checked (default: the workspace's SQLite store, if a run made it). Raises
    ConfigError for a version that is not there or no push record vouches for yet."""
    from serving import model_config

    def change(store: metadata_store.MetadataStore | None) -> ModelStatus:
        if store is not None:
            _refuse_unrecorded(config, store, version)
        return model_config.promote(config.serving_dir.parent, config.serving_dir.name, version)

    return _change_labels(config, change, report, metadata_url)


def rollback(config: PipelineConfig, report: Report = _ignore, *, metadata_url: str | None = None) -> ServingStatus:
    """Sends the canary label back to the stable version (ConfigError: no canary to end)."""
    from serving import model_config

    return _change_labels(config, lambda store: model_config.rollback(config.serving_dir.parent,
                                                                      config.serving_dir.name),
                          report, metadata_url)


def status(config: PipelineConfig, report: Report = _ignore, *, metadata_url: str | None = None) -> ServingStatus:
    """The labels and versions, each with its origin where the store knows it. A question,
    so it answers from what is there when the store is damaged or the serving directory
    cannot be written (unchecked against the records, and a warning says so)."""
    from serving import model_config

    serving_root = config.serving_dir.parent
    try:
        return _status_checked(config, report, metadata_url)
    except OSError as err:
        if err.errno not in _READ_ONLY_ERRNOS:
            raise
        report(f"turbotfx: warning: {serving_root} cannot be written ({os.strerror(err.errno)}), so its versions "
               "are not checked against the push records")
    return _status(model_config.status(serving_root, config.serving_dir.name), serving_root, {})


def _status_checked(config: PipelineConfig, report: Report, metadata_url: str | None) -> ServingStatus:
    from serving import model_config

    serving_root = config.serving_dir.parent
    store = _reconciled_store(config, report, metadata_url, unchecked_if_damaged=True)
    with model_config.changing(serving_root):  # read as no push or promote leaves it halfway
        current = model_config.status(serving_root, config.serving_dir.name)
    _warn_of_labels_on_nothing(config, current, report)
    origins = {}
    if store is not None:
        from pipeline.provenance import lineage

        origins = lineage.pushed_origins(store, current.versions)
    return _status(current, serving_root, origins)


def _change_labels(config: PipelineConfig, change: Callable[[metadata_store.MetadataStore | None], ModelStatus],
                   report: Report, metadata_url: str | None) -> ServingStatus:
    """One label change under the serving lock, checked against the push records first and
    recorded in the store after."""
    from serving import model_config

    serving_root = config.serving_dir.parent
    # A label change checked against no records could serve an orphan: a damaged store stops it.
    store = _reconciled_store(config, report, metadata_url, unchecked_if_damaged=False)
    with model_config.changing(serving_root):
        current = change(store)
        if store is not None:
            from pipeline.provenance import pushes

            # A lost models.config is rebuilt with these labels (serving/reconcile.py).
            assert current.stable is not None and current.canary is not None  # promote and rollback set both
            pushes.record_label_change(store, config.serving_dir.name, current.stable, current.canary)
    _warn_of_labels_on_nothing(config, current, report)
    return _status(current, serving_root, {})


def _refuse_unrecorded(config: PipelineConfig, store: metadata_store.MetadataStore, version: int | None) -> None:
    """A version no push record vouches for is a push still under way (its run may yet die,
    and the version be set aside): labelling it stable would leave the label on nothing."""
    from pipeline import workspace
    from serving import model_config, push

    target = version if version is not None else model_config.status(config.serving_dir.parent,
                                                                     config.serving_dir.name).canary
    if target is None or target not in push.versions(config.serving_dir):
        return  # not there at all: promote says so
    history, damaged = workspace.recorded_pushes(config, store, live_runs_possible=True)
    if not damaged and not history.vouches_for(target):
        raise ConfigError(f"version {target} of {config.serving_dir.name!r} has no push record yet: the run "
                          "pushing it has not recorded it (it is still going, or ended before that and the next "
                          "command sets the version aside); promote it once `turbotfx runs` shows the run completed")


def _reconciled_store(config: PipelineConfig, report: Report, metadata_url: str | None,
                      unchecked_if_damaged: bool) -> metadata_store.MetadataStore | None:
    """The store (None when no run has made one), after the serving directory was brought
    into agreement with its push records; a line to report for each thing put right.
    unchecked_if_damaged: a damaged store is warned of and None returned, not raised."""
    from pipeline.store.url import existing_store_url

    # metadata_url, else the workspace's SQLite file; never a new, empty store.
    url = existing_store_url(metadata_url, config.metadata_path)
    if url is None:
        return None
    from pipeline import workspace
    from pipeline.store import connection

    try:
        store = connection.open_store(url, create=False)
    except connection.DamagedStoreError as err:
        if not unchecked_if_damaged:
            raise
        report(f"turbotfx: warning: {err}; versions below are not checked against push records")
        return None
    result = workspace.reconcile_serving(config, store, connection.run_may_be_live(url))
    for line in result.messages():
        report(f"turbotfx: {line}")
    return store


def _warn_of_labels_on_nothing(config: PipelineConfig, current: ModelStatus, report: Report) -> None:
    from serving import model_config

    for label, version in ((model_config.STABLE, current.stable), (model_config.CANARY, current.canary)):
        if version is not None and version not in current.versions:
            report(f"turbotfx: warning: the {label} label of {current.name!r} points at version {version}, which is "
                   f"not in {config.serving_dir}: TF Serving serves nothing under it; promote a version that is there")


def _status(current: ModelStatus, serving_root: Path, origins: dict[int, dict[str, Any]]) -> ServingStatus:
    from serving import model_config

    versions = tuple(ServedVersion(v, origins[v]["model_id"], origins[v]["run_id"]) if v in origins
                     else ServedVersion(v) for v in current.versions)
    return ServingStatus(model=current.name, stable=current.stable, canary=current.canary,
                         served=tuple(current.served), versions=versions,
                         config_path=model_config.config_path(serving_root))
