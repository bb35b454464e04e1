"""Pipeline runs and scorings as MLMD records them, newest first: `turbotfx runs`."""

from __future__ import annotations

from typing import Any

from ml_metadata.metadata_store import metadata_store

from pipeline.provenance import scorings
from pipeline.provenance.graph import RUN_CONTEXT, TypeNames
from pipeline.provenance.summary import pipeline_of, summarize


def list_runs(
    store: metadata_store.MetadataStore, pipeline_name: str | None = None, limit: int | None = None,
    live_runs_possible: bool = True,
) -> list[dict[str, Any]]:
    """The pipeline runs (status, timing, key metric, blessing, pushed version), the scorings
    (`turbotfx score`: rows scored, the version that scored them) and the drift checks
    (features drifted, the version compared with), newest first.
    live_runs_possible: False when no run can be executing, so unfinished means aborted."""
    types = TypeNames(store)
    runs = sorted(store.get_contexts_by_type(RUN_CONTEXT), key=lambda c: c.id, reverse=True)
    listed = []
    for run in runs:
        pipeline = pipeline_of(store, types, run)
        if pipeline_name and pipeline != pipeline_name:
            continue
        listed.append({"kind": "run", **summarize(store, run, types, pipeline=pipeline,
                                                  live_runs_possible=live_runs_possible).as_row()})
        if limit and len(listed) >= limit:
            break
    listed += [scorings.as_run_row(s) for s in scorings.list_scorings(store, pipeline_name)]
    listed += scorings.drift_run_rows(store, pipeline_name)
    listed.sort(key=lambda row: row["start"], reverse=True)
    return listed[:limit] if limit else listed
