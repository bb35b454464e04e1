"""`turbotfx report`: a run's report as one HTML page (every run writes its own; this
renders it again, for any recorded run, wherever asked)."""

from __future__ import annotations

import argparse
import dataclasses
import webbrowser
from pathlib import Path

from pipeline.cli import args as cli_args


def add_parser(commands: argparse._SubParsersAction) -> None:
    report = commands.add_parser("report", help="a run's report: one HTML page that opens offline")
    cli_args.add_store_args(report)
    report.add_argument("--pipeline-name", help="the pipeline whose store and runs to read (default: the default "
                                                "pipeline's)")
    which = report.add_mutually_exclusive_group()
    which.add_argument("--run", dest="run_id", metavar="ID", help="a run by its id (`turbotfx runs`; default: "
                                                                  "the newest run)")
    which.add_argument("--model-version", help="the run that trained this pushed serving version")
    which.add_argument("--diff", nargs=2, type=int, metavar=("A", "B"),
                       help="two models side by side: model artifact ids (`turbotfx runs`), or serving "
                            "versions with --versions")
    report.add_argument("--versions", action="store_true", help="with --diff: A and B are serving versions")
    report.add_argument("--output", type=Path, help="where to write the page (default: "
                                                    "reports/<pipeline>/<run>.html in the workspace)")
    report.add_argument("--force", action="store_true",
                        help="replace --output even if it is not a page turbotfx wrote (never a file in the "
                             "workspace's store, serving, pipelines, logs or data folders)")
    report.add_argument("--open", action="store_true", help="open the page in the default web browser")
    report.add_argument("--artifact-root", type=_artifact_root, metavar="RECORDED=LOCAL",
                        help="read the artifacts MLMD records under RECORDED (a compiled pipeline's root, e.g. "
                             "gs://bucket/root) from the folder LOCAL they were copied to")
    report.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pipeline.errors import ConfigError
    from pipeline.report import records, write

    config = cli_args.workspace_config(args)
    if args.pipeline_name:
        config = dataclasses.replace(config, pipeline_name=args.pipeline_name)
    if args.versions and not args.diff:
        raise ConfigError("--versions says what --diff's A and B are; use it with --diff A B")
    if args.output:
        write.checked_output(args.output, config, args.force)
    elif args.force:
        raise ConfigError("--force lets --output replace a file; without --output the page goes to the "
                          "workspace's reports folder, which needs no --force")
    store = cli_args.store_from_args(args, config)
    if args.diff:
        from pipeline.provenance import lineage

        first, second = (lineage.find_model(store, **({"model_version": str(reference)} if args.versions
                                                      else {"artifact_id": reference})) for reference in args.diff)
        target = args.output or write.diff_path(config.reports_dir, first.id, second.id)
        return _done(write.write_diff(store, first, second, target, args.artifact_root), args.open)
    run = records.find_run(store, run_id=args.run_id, model_version=args.model_version,
                           pipeline_name=args.pipeline_name)
    target = args.output or write.report_path(config.reports_dir, run.name)
    # Labels are the workspace's; a store elsewhere (--metadata-url) may not be this workspace's runs.
    serving_root = config.serving_dir.parent if not args.metadata_url else None
    return _done(write.write_report(store, run, target, serving_root, args.artifact_root), args.open)


def _done(target: Path, open_it: bool) -> int:
    print(target)
    if open_it and not webbrowser.open(target.resolve().as_uri()):
        print(f"turbotfx: no web browser to open it with here; open {target} where there is one")
    return 0



def _artifact_root(text: str):
    from pipeline.report.records import ArtifactRoot

    recorded, equals, local = text.partition("=")
    if not equals or not recorded or not local:
        raise argparse.ArgumentTypeError(f"expected RECORDED=LOCAL (e.g. gs://bucket/root=./copied), got {text!r}")
    return ArtifactRoot(recorded, Path(local).expanduser().resolve())
