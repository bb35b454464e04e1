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
    which.add_argument("--uri", help="a model's URI, a pushed model's URI or its serving directory, or a folder "
                                     "of scores `turbotfx score` wrote (or a file in it)")
    cli_args.add_model_name(lineage, "with --latest: the latest pushed model of this model (a dataset's name; "
                                     "default: of any dataset in the workspace)")
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
    if args.command == "runs" and not args.metadata_url and cli_args.query_store_urls(args):
        from pipeline.provenance import render

        listed = _runs_of_every_store(args)
        print(_json(listed) if args.format == "json" else render.runs_text(listed))
        return 0
    if args.command == "lineage" and (args.latest or args.model_version) and not args.metadata_url:
        store = _store_with_push(args)
    else:
        store = cli_args.store_from_args(args)
    from pipeline.provenance import diff, graph, lineage, render, runs

    if args.command == "lineage":
        from pipeline.provenance import scorings

        # A folder of scores (or a file in it) leads to the version that scored it.
        scoring = scorings.scoring_of_output(store, args.uri) if args.uri else None
        if scoring is not None:
            if not scoring["pushed_model_id"]:
                raise lineage.unrecorded_push(scoring["model_version"])
            model = lineage.find_model(store, artifact_id=scoring["pushed_model_id"])
        else:
            model = lineage.find_model(store, latest=args.latest, model_version=args.model_version,
                                       artifact_id=args.artifact_id, uri=args.uri, model_name=args.model_name)
        found = {**({"scoring": scoring} if scoring else {}), **lineage.model_lineage(store, model)}
        formats = {"json": _json, "dot": render.lineage_dot, "text": render.lineage_text}
        print(formats[args.format](found))
    elif args.command == "runs":
        from pipeline.store import connection

        # A run still RUNNING whose process is gone was killed: shown as ABORTED.
        url = cli_args.query_store_url(args)
        assert url is not None  # store_from_args above raised otherwise
        live = connection.run_may_be_live(url)
        listed = runs.list_runs(store, args.pipeline_name, args.limit or None, live_runs_possible=live)
        print(_json(listed) if args.format == "json" else render.runs_text(listed))
    else:
        types = graph.TypeNames(store)
        pair = []
        for reference in (args.model_a, args.model_b):
            selector = {"model_version": str(reference)} if args.versions else {"artifact_id": reference}
            model = lineage.find_model(store, types=types, **selector)
            pair.append(lineage.model_lineage(store, model, types))
        changes = diff.diff_models(*pair)
        print(_json(changes) if args.format == "json" else render.diff_text(changes))
    return 0


def _runs_of_every_store(args: argparse.Namespace) -> list[dict]:
    """Runs of every store the workspace holds, newest first: each --pipeline-name keeps one."""
    from pipeline.provenance import runs
    from pipeline.store import connection

    listed = []
    default_url = cli_args.query_store_url(args)
    for url in cli_args.query_store_urls(args):
        # The default store damaged stops the command, as before; a sibling's is skipped.
        store = cli_args.open_query_store(url) if url == default_url else _workspace_store(url)
        if store is None:
            continue
        # A run still RUNNING whose process is gone was killed: shown as ABORTED.
        live = connection.run_may_be_live(url)
        listed += runs.list_runs(store, args.pipeline_name, args.limit or None, live_runs_possible=live)
    listed.sort(key=lambda row: row["start"], reverse=True)
    return listed[:args.limit] if args.limit else listed


def _store_with_push(args: argparse.Namespace):
    """Of the workspace's stores, the one holding the push asked for: the newest push (of
    --model-name) for --latest, the push of --model-version; else the default store, whose
    answer names what is missing."""
    from pipeline.provenance import lineage

    default_url = cli_args.query_store_url(args)
    default = cli_args.open_query_store(default_url) if default_url else None
    found, newest = None, -1
    for url in cli_args.query_store_urls(args):
        store = default if url == default_url else _workspace_store(url)
        if store is None:
            continue
        if args.latest:
            pushed = lineage.latest_push(store, args.model_name)
            if pushed is not None and pushed.create_time_since_epoch > newest:
                found, newest = store, pushed.create_time_since_epoch
        elif lineage.has_push_version(store, args.model_version):
            return store
    return found or default or cli_args.store_from_args(args)


def _workspace_store(url: str):
    """One of the workspace's stores; a damaged one is named on stderr and skipped."""
    from pipeline.errors import ConfigError

    try:
        return cli_args.open_query_store(url)
    except ConfigError as err:
        cli_args.warn_skipped_store(str(err))
        return None


def _json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=False, allow_nan=False)
