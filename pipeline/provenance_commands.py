"""`turbotfx lineage | runs | diff`: provenance questions answered from MLMD."""

from __future__ import annotations

import argparse
import json

from pipeline import config as config_lib
from pipeline import lineage, lineage_render, metadata, runs
from pipeline.config import ConfigError, PipelineConfig


def open_store(args: argparse.Namespace):
    """The store named by --metadata-url, else the workspace's SQLite store, which must exist:
    a query never creates an empty store."""
    path = PipelineConfig(home=args.home or config_lib.default_home()).metadata_path
    url = metadata.existing_store_url(args.metadata_url, path)
    if url is None:
        raise ConfigError(
            f"no metadata store at {path}: run the pipeline first (`turbotfx run`), or point to the "
            "workspace with --home or to another store with --metadata-url"
        )
    return metadata.open_store(url)


def run(args: argparse.Namespace) -> int:
    store = open_store(args)
    if args.command == "lineage":
        model = lineage.find_model(store, latest=args.latest, model_version=args.model_version,
                                   artifact_id=args.artifact_id, uri=args.uri)
        found = lineage.model_lineage(store, model)
        render = {"json": _json, "dot": lineage_render.lineage_dot, "text": lineage_render.lineage_text}
        print(render[args.format](found))
    elif args.command == "runs":
        listed = runs.list_runs(store, args.pipeline_name, args.limit or None)
        print(_json(listed) if args.format == "json" else lineage_render.runs_text(listed))
    else:
        types = lineage.TypeNames(store)
        found = []
        for reference in (args.model_a, args.model_b):
            selector = {"model_version": str(reference)} if args.versions else {"artifact_id": reference}
            model = lineage.find_model(store, types=types, **selector)
            found.append(lineage.model_lineage(store, model, types))
        diff = runs.diff_models(*found)
        print(_json(diff) if args.format == "json" else lineage_render.diff_text(diff))
    return 0


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=False, allow_nan=False)
