"""`turbotfx lineage | runs | diff`: provenance questions answered from MLMD."""

from __future__ import annotations

import argparse
import json

from pipeline.cli import args as cli_args


def add_parser(commands: argparse._SubParsersAction) -> None:
    lineage = commands.add_parser("lineage", help="where a model came from and where it went (from MLMD)")
    cli_args.add_store_args(lineage)
    which = lineage.add_mutually_exclusive_group(required=True)
    which.add_argument("--latest", action="store_true", help="the latest pushed model")
    which.add_argument("--model-version", help="a pushed model by its serving version (directory name)")
    which.add_argument("--artifact-id", type=int, help="a Model, PushedModel or ModelBlessing artifact id")
    which.add_argument("--uri", help="a model's URI, a pushed model's URI or its serving directory")
    cli_args.add_format(lineage, ("text", "json", "dot"),
                        "text: a readable tree; json: every field; dot: a Graphviz graph (default: text)")
    lineage.set_defaults(handler=handle)

    runs = commands.add_parser("runs", help="list pipeline runs: status, duration, blessing metric, blessing, push")
    cli_args.add_store_args(runs)
    runs.add_argument("--pipeline-name", help="only this pipeline's runs (default: all)")
    runs.add_argument("--limit", type=cli_args.int_at_least(0), default=20,
                      help="newest runs to show, 0 for all (default: 20)")
    cli_args.add_format(runs)
    runs.set_defaults(handler=handle)

    diff = commands.add_parser("diff", help="what differs between two models: hyperparameters, data, schema, metrics")
    cli_args.add_store_args(diff)
    diff.add_argument("model_a", type=int, help="model artifact id (see `turbotfx runs`), or a serving version "
                                                "with --versions")
    diff.add_argument("model_b", type=int, help="the other model")
    diff.add_argument("--versions", action="store_true", help="A and B are serving versions, not artifact ids")
    cli_args.add_format(diff)
    diff.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    store = cli_args.store_from_args(args)
    from pipeline.provenance import diff, lineage, render, runs

    if args.command == "lineage":
        model = lineage.find_model(store, latest=args.latest, model_version=args.model_version,
                                   artifact_id=args.artifact_id, uri=args.uri)
        found = lineage.model_lineage(store, model)
        formats = {"json": _json, "dot": render.lineage_dot, "text": render.lineage_text}
        print(formats[args.format](found))
    elif args.command == "runs":
        from pipeline.store import connection

        # A run still RUNNING whose process is gone was killed: shown as ABORTED.
        live = connection.run_may_be_live(cli_args.query_store_url(args))
        listed = runs.list_runs(store, args.pipeline_name, args.limit or None, live_runs_possible=live)
        print(_json(listed) if args.format == "json" else render.runs_text(listed))
    else:
        types = lineage.TypeNames(store)
        found = []
        for reference in (args.model_a, args.model_b):
            selector = {"model_version": str(reference)} if args.versions else {"artifact_id": reference}
            model = lineage.find_model(store, types=types, **selector)
            found.append(lineage.model_lineage(store, model, types))
        changes = diff.diff_models(*found)
        print(_json(changes) if args.format == "json" else render.diff_text(changes))
    return 0


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=False, allow_nan=False)
