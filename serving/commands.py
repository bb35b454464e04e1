"""`turbotfx serving promote | rollback | status`: the labels TF Serving routes by."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pipeline import config as config_lib
from pipeline.config import PipelineConfig
from serving import model_config


def add_parser(commands: argparse._SubParsersAction) -> None:
    serving = commands.add_parser("serving", help="serving labels: promote the canary, roll it back, status")
    actions = serving.add_subparsers(dest="serving_command", required=True, metavar="SUBCOMMAND")
    for name, text in (("promote", "label a version stable (default: the canary)"),
                       ("rollback", "send the canary label back to the stable version"),
                       ("status", "versions on disk, labels, and the run each came from (MLMD)")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--home", help=f"workspace (default: ${config_lib.HOME_ENV_VAR} or ./workspace)")
        action.add_argument("--dataset", help="whose model (default: penguins)")
        action.add_argument("--model-name", help="model directory under the serving root (default: the dataset's)")
        if name == "promote":
            action.add_argument("version", nargs="?", type=int, help="version to label stable (default: the canary)")
        if name == "status":
            action.add_argument("--metadata-url", help="MLMD store to look the versions up in "
                                                       "(default: the workspace's SQLite store)")
            action.add_argument("--format", choices=("text", "json"), default="text")


def workspace_config(args: argparse.Namespace) -> PipelineConfig:
    """The workspace's config from --home, --dataset and --model-name (the rest: defaults)."""
    given = {"home": args.home or config_lib.default_home(), "dataset": args.dataset, "model_name": args.model_name}
    return PipelineConfig(**{key: value for key, value in given.items() if value is not None})


def run(args: argparse.Namespace) -> int:
    config = workspace_config(args)
    serving_root, name = config.serving_dir.parent, config.serving_dir.name
    if args.serving_command == "promote":
        current = model_config.promote(serving_root, name, args.version)
    elif args.serving_command == "rollback":
        current = model_config.rollback(serving_root, name)
    else:
        current = model_config.status(serving_root, name)
    report = _report(current, _origins(args, config, current.versions) if args.serving_command == "status" else {})
    print(json.dumps(report, indent=2) if getattr(args, "format", "text") == "json" else _text(report, serving_root))
    return 0


def _origins(args: argparse.Namespace, config: PipelineConfig, versions: list[int]) -> dict[int, dict[str, Any]]:
    """Model artifact and pipeline run of each version, from MLMD (when a store exists)."""
    from pipeline import lineage, metadata

    url = metadata.existing_store_url(args.metadata_url, config.metadata_path)
    if url is None:
        return {}
    store = metadata.open_store(url)
    types = lineage.TypeNames(store)
    origins = {}
    for version in versions:
        try:
            model = lineage.find_model(store, model_version=str(version), types=types)
        except lineage.LineageError:
            continue  # pushed by another store, or before MLMD kept it
        run_ids = [c.name for c in store.get_contexts_by_artifact(model.id)
                   if types.context(c.type_id) == lineage.RUN_CONTEXT]
        origins[version] = {"model_id": model.id, "run_id": run_ids[0] if run_ids else None}
    return origins


def _report(current: model_config.ModelStatus, origins: dict[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": current.name,
        "stable": current.stable,
        "canary": current.canary,
        "served": current.served,
        "versions": [{"version": v, **origins.get(v, {})} for v in current.versions],
    }


def _text(report: dict[str, Any], serving_root: Path) -> str:
    lines = [f"{report['model']}: stable {report['stable']}, canary {report['canary']}  "
             f"({model_config.config_path(serving_root)})"]
    for entry in report["versions"]:
        labels = [label for label in (model_config.STABLE, model_config.CANARY) if report[label] == entry["version"]]
        origin = f"model {entry['model_id']}, run {entry['run_id']}" if "model_id" in entry else ""
        lines.append(f"  {entry['version']:<12} {','.join(labels):<14} {origin}")
    return "\n".join(lines)
