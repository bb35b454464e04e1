"""`turbotfx score`: a whole table scored with a served model version on Beam
(pipeline/scoring/), rendered here as text or JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from pipeline.cli import args as cli_args
from pipeline.cli import console
from pipeline.cli.drift import as_text
from pipeline.cli.serve import chosen_models
from pipeline.scoring.score import LABELS, OUTPUT_FORMATS


def add_parser(commands: argparse._SubParsersAction) -> None:
    score = commands.add_parser("score", help="score CSV or Parquet files with a served model version, on Beam")
    score.add_argument("--data", required=True, help="a CSV or Parquet file, or a glob of them, with the model's "
                                                    "feature columns (and any others)")
    score.add_argument("--output", required=True, help="a new folder for the scores-* and errors-* files")
    which = score.add_mutually_exclusive_group()
    which.add_argument("--model-version", type=int, help="the served version to score with")
    which.add_argument("--label", choices=LABELS, help="the version this serving label names (default: stable)")
    score.add_argument("--output-format", choices=OUTPUT_FORMATS, default=OUTPUT_FORMATS[0],
                       help=f"the scores' file format (default: {OUTPUT_FORMATS[0]})")
    score.add_argument("--id", action="append", default=[], metavar="COLUMN",
                       help="a column passed through to each scored row, repeatable (default: the columns "
                            "the dataset file ignores, where every file has them)")
    score.add_argument("--force", action="store_true", help="replace an --output folder that holds files")
    score.add_argument("--drift", action="store_true", help="then compare the rows with the version's training data "
                                                           "(as `turbotfx drift` does)")
    cli_args.add_beam_mode(score)
    cli_args.add_served_model_args(score, "show TF and Beam logs")
    score.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pipeline.scoring import score

    [config] = chosen_models(args, needs_dataset=True)
    if args.beam_mode:
        config = dataclasses.replace(config, beam_mode=args.beam_mode)
    with console.session(config.log_path, verbose=args.verbose) as out:
        outcome = score.score(config, args.data, Path(args.output).expanduser().resolve(),
                              version=args.model_version, label=args.label, output_format=args.output_format,
                              ids=args.id, force=args.force)
        checked = None
        if args.drift:
            from pipeline.scoring import drift

            checked = drift.drift(config, args.data, version=outcome.model_version)
        if args.format == "json":
            out.line(json.dumps({
                "output": str(outcome.output), "scores": [str(p) for p in outcome.scores],
                "errors": [str(p) for p in outcome.errors], "rows_scored": outcome.rows_scored,
                "rows_refused": outcome.rows_refused, "model_version": outcome.model_version,
                "model_dir": str(outcome.model_dir), "ids": list(outcome.ids), "beam": outcome.beam,
                "rows_checked": outcome.rows_checked, "seconds": round(outcome.seconds, 3),
                **({"drift": checked.as_json()} if checked else {})}, indent=2))
            return 0
        out.line(f"scored {console.counted(outcome.rows_scored, 'row')} with model version {outcome.model_version} "
                 f"({outcome.model_dir}) in {outcome.seconds:.1f}s, beam: {outcome.beam}")
        ids = ", ".join(outcome.ids) if outcome.ids else "none"
        out.line(f"  scores: {outcome.output} ({len(outcome.scores)} file(s); ids passed through: {ids})")
        if outcome.rows_refused:
            out.line(f"  refused: {console.counted(outcome.rows_refused, 'row')} the schema does not allow, each with "
                     "its reason in "
                     f"{', '.join(p.name for p in outcome.errors)}")
        out.line(f"  checked: {console.counted(outcome.rows_checked, 'row')} scored again by in-process predict, "
                 "all the same")
        if checked:
            for line in as_text(checked):
                out.line(line)
    return 0
