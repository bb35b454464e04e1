"""Reconciles the workspace's serving directory with the metadata store before anything
reads or changes it (`turbotfx run`, `turbotfx serving status|promote|rollback`): the
rules are in serving/reconcile.py."""

from __future__ import annotations

from ml_metadata.metadata_store import metadata_store

from pipeline.config import PipelineConfig
from pipeline.provenance import pushes
from serving import reconcile


def reconcile_serving(config: PipelineConfig, store: metadata_store.MetadataStore,
                      live_runs_possible: bool) -> reconcile.Reconciliation:
    """live_runs_possible: another run may be pushing now, so its version is left alone."""
    history = pushes.push_history(store, config.model_name, live_runs_possible)
    return reconcile.reconcile(config.serving_dir.parent, config.serving_dir.name, history.versions,
                               history.labels, history.in_flight_since)
