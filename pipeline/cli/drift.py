"""`turbotfx drift`: a batch of new rows against the training split of the served version
(pipeline/scoring/drift.py), rendered here as a table or JSON."""

from __future__ import annotations

import argparse
import json
import math

from pipeline.cli import args as cli_args
from pipeline.cli import console
from pipeline.cli.serve import chosen_models
from pipeline.scoring.score import LABELS

# The exit status of --fail-on-drift when a feature drifted (2 is bad input).
DRIFTED_EXIT = 1


def add_parser(commands: argparse._SubParsersAction) -> None:
    drift = commands.add_parser("drift", help="compare new rows with the training data of a served model version")
    drift.add_argument("--data", required=True, help="a CSV or Parquet file, or a glob of them, with the model's "
                                                    "feature columns")
    which = drift.add_mutually_exclusive_group()
    which.add_argument("--model-version", type=int, help="the served version whose training data to compare with")
    which.add_argument("--label", choices=LABELS, help="the version this serving label names (default: stable)")
    drift.add_argument("--seed", type=int, default=0, help="the null band's random draws (default: 0)")
    drift.add_argument("--fail-on-drift", action="store_true",
                       help=f"exit with status {DRIFTED_EXIT} when a feature drifted (for a scheduled check)")
    cli_args.add_served_model_args(drift, "show TF logs")
    drift.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from pipeline.scoring import drift

    [config] = chosen_models(args, needs_dataset=True)
    with console.session(config.log_path, verbose=args.verbose) as out:
        outcome = drift.drift(config, args.data, version=args.model_version, label=args.label, seed=args.seed)
        if args.format == "json":
            out.line(json.dumps(outcome.as_json(), indent=2))
        else:
            for line in as_text(outcome):
                out.line(line)
    return DRIFTED_EXIT if args.fail_on_drift and outcome.drifted else 0


def as_text(outcome) -> list[str]:
    files = ", ".join(f.name for f in outcome.files)
    rows = console.counted(outcome.rows, "row")
    lines = [f"{files}: {rows} against the training split of model version {outcome.model_version} "
             f"({console.counted(outcome.reference_rows, 'row')}); a feature drifted where its distance is beyond "
             f"what chance gives at {rows}"]
    width = max(len("feature"), *(len(f.feature) for f in outcome.features))
    lines.append(f"  {'feature':<{width}}  {'kind':<11}  {'distance':>8}  {'by chance':>9}  {'flag above':>10}  "
                 f"{'drift':<5}  outside training")
    for f in outcome.features:
        outside = (f"{_percent(outcome.vocabulary_oov.get(f.feature, f.oov_share))} out of vocabulary"
                   if f.kind == "categorical" else f"{_percent(f.out_of_range_share)} out of range")
        lines.append(f"  {f.feature:<{width}}  {f.kind:<11}  {f.distance:>8.4f}  {f.null_median:>9.4f}  "
                     f"{f.null_high:>10.4f}  {'YES' if f.flagged else 'no':<5}  {outside}")
    drifted = outcome.drifted
    lines.append(f"drift: {', '.join(drifted)} beyond the null band" if drifted else
                 "drift: none; every feature is within what sampling alone gives at this size")
    if outcome.estimate:
        lines.append(f"estimate: {outcome.estimate['verdict']} (calibrated on {outcome.estimate['eval_rows']} "
                     "eval rows)")
    lines.append(f"  (distance: L-infinity for categories, Jensen-Shannon for numbers, as TFDV computes them; "
                 f"{outcome.seconds:.1f}s)")
    return lines


def _percent(share: float | None) -> str:
    return "-" if share is None or math.isnan(share) else f"{100 * share:.1f}%"
