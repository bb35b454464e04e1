"""`turbotfx tune show`: a tuning result's trials, from MLMD (tuning itself runs inside
`turbotfx run --tune-trials N`)."""

from __future__ import annotations

import argparse
import json

from pipeline.cli import args as cli_args


def add_parser(commands: argparse._SubParsersAction) -> None:
    tune = commands.add_parser("tune", help="tuning results: `tune show` lists a study's trials")
    actions = tune.add_subparsers(dest="tune_command", required=True, metavar="show")
    show = actions.add_parser("show", help="the trials of the latest tuning result, or of the one a model used")
    cli_args.add_store_args(show)
    which = show.add_mutually_exclusive_group()
    which.add_argument("--model-version", help="the result the model pushed as this serving version trained with")
    which.add_argument("--artifact-id", type=int, help="a HyperParameters artifact by id")
    cli_args.add_model_name(show, "the latest result of this model (a dataset's name; default: of any)")
    cli_args.add_format(show)
    show.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    store = cli_args.store_from_args(args)
    from pipeline.provenance import render, tuning
    from pipeline.provenance.graph import LineageError

    if args.artifact_id is not None:
        found = store.get_artifacts_by_id([args.artifact_id])
        if not found or found[0].type_id != store.get_artifact_type(tuning.HYPERPARAMETERS_TYPE).id:
            raise LineageError(f"no tuning result (HyperParameters artifact) with id {args.artifact_id}")
        result = found[0]
    elif args.model_version:
        from pipeline.provenance.lineage import find_model

        result = tuning.result_of_model(store, find_model(store, model_version=args.model_version))
    else:
        result = tuning.latest_result(store, args.model_name)
    study = tuning.study(store, result)
    print(json.dumps(study, indent=2, allow_nan=False) if args.format == "json" else render.study_text(study))
    return 0
