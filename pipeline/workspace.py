"""A workspace's life as library calls that never print. Here so far: the serving directory
reconciled with the metadata store before anything reads or changes it (`turbotfx run`,
`turbotfx serving status|promote|rollback`): the rules are in serving/reconcile.py."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ml_metadata.metadata_store import metadata_store

from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.provenance import pushes
from pipeline.store import connection
from pipeline.store.url import parse_url, sqlite_url
from serving import model_config, reconcile


def reconcile_serving(config: PipelineConfig, store: metadata_store.MetadataStore,
                      live_runs_possible: bool) -> reconcile.Reconciliation:
    """live_runs_possible: another run may be pushing now, so its version is left alone."""
    serving_root = config.serving_dir.parent
    # Under the serving lock: a push cannot start its copy between the read of the records
    # and the look at the directory.
    with model_config.changing(serving_root):
        history = pushes.push_history(store, config.model_name, live_runs_possible)
        for url, other in _other_workspace_stores(config):
            history = history.merge(pushes.push_history(other, config.model_name, connection.run_may_be_live(url)))
        return reconcile.reconcile(serving_root, config.serving_dir.name, history.versions,
                                   history.labels, history.in_flight_since)


def dataset_of_model(config: PipelineConfig, model_name: str) -> str | None:
    """The dataset file the model's newest push was trained from (its Trainer recorded the
    path), over every store of the workspace; None when no push of it is recorded."""
    from pipeline.provenance import lineage

    newest, dataset = -1, None
    for path in config.workspace_store_paths:
        try:
            store = connection.open_store(sqlite_url(path), create=False)
        except ConfigError:  # damaged: its own commands say so
            continue
        found = lineage.dataset_file_of_latest_push(store, model_name)
        if found is not None and found[0] > newest:
            newest, dataset = found
    return dataset


def _other_workspace_stores(config: PipelineConfig) -> Iterator[tuple[str, metadata_store.MetadataStore]]:
    """The workspace's other SQLite stores: each --pipeline-name keeps its own
    (metadata/<name>.sqlite) and pushes into the same serving directory."""
    current = parse_url(config.metadata_store_url)
    current_path = Path(current.path).resolve() if current.scheme == "sqlite" else None
    for path in config.workspace_store_paths:
        if path.resolve() == current_path:
            continue
        url = sqlite_url(path)
        try:
            yield url, connection.open_store(url, create=False)
        except ConfigError:  # damaged: its own commands say so; it vouches for nothing here
            continue
