"""Model quality on public tables, as a new user would get it: for each table, `turbotfx
init --label L` and `turbotfx run --dataset FILE` with defaults in a fresh workspace; then
the pushed model (the trained one where nothing was pushed) scored on the run's own eval
split, beside scikit-learn's HistGradientBoosting and a linear model fitted on the run's own
train split, and the trivial baseline (issue 26).

The splits are read back from ExampleGen's output, so every model sees the same rows; the
model is fed the eval split's serialized tf.Examples through serving_default, as TF Serving
and TFMA feed it. The baselines get the columns our model gets (init's "ignore" columns
left out), numbers as numbers and text as categories, whatever role init gave them.
Metrics: binary AUC (and accuracy), multiclass accuracy, regression RMSE. The last line is
one JSON object: per table the ratio to the best baseline, tables_within (AUC/accuracy >=
best - 0.01, RMSE <= 1.05 x best), worst_gap and the wall seconds.

    .venv/bin/python benchmarks/quality_bench.py [--tables caravan,oj] [--workdir DIR] [--model gbt]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness
import _quality_score as score
from _quality_tables import TABLES, Table

from trainer_module.config import MODEL_FAMILIES

PREDICT_BATCH = 1024


def cli(args: list[str], log: Path) -> tuple[float, str]:
    """`turbotfx ARGS` in a fresh interpreter (python -m pipeline.cli from the repository, as
    _harness.run_cli); its stderr (the progress lines) to `log`. Returns (seconds, stdout);
    raises RuntimeError naming the log when it fails."""
    started = time.perf_counter()
    with open(log, "a") as handle:
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=harness.REPO,
                              stdout=subprocess.PIPE, stderr=handle, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"turbotfx {args[0]} exited {done.returncode}; see {log}")
    return seconds, done.stdout


def only(paths: list[Path], what: str) -> Path:
    """The one path a fresh workspace holds (a second would mean a reused workspace)."""
    if len(paths) != 1:
        raise RuntimeError(f"expected one {what}, found {[str(p) for p in paths]}")
    return paths[0]


def run_table(table: Table, root: Path, family: str | None = None, tune_trials: int | None = None) -> dict[str, Any]:
    """init + run in a fresh workspace under root (family: `run --model`; None: the run's
    default; tune_trials: `run --tune-trials`); what the scoring needs from it."""
    data, home, log = root / "data", root / "home", root / "turbotfx.log"
    data.mkdir(parents=True)
    frame = table.frame()
    frame.to_csv(data / f"{table.name}.csv", index=False)
    dataset_file = root / f"{table.name}.toml"
    cli(["init", "--data-root", str(data), "--label", table.label, "--output", str(dataset_file),
         "--home", str(home)], log)
    # --json: the summary to read back; --allow-unblessed: exit 0 for an unblessed model too.
    seconds, out = cli(["run", "--dataset", str(dataset_file), "--home", str(home), "--json",
                        "--allow-unblessed", *(["--model", family] if family else []),
                        *(["--tune-trials", str(tune_trials)] if tune_trials is not None else [])], log)
    (root / "run.json").write_text(out)
    summary = json.loads(out)
    pipeline_root = only(sorted((home / "pipelines").iterdir()), "pipeline root")
    if summary.get("pushed_path"):
        model_dir, model = Path(summary["pushed_path"]), "pushed"
    else:
        model_dir = only(sorted(pipeline_root.glob("Trainer/model/*/Format-Serving")), "trained model")
        model = "trained"
    return {"rows": len(frame), "cols": frame.shape[1] - 1, "dataset_file": dataset_file, "run_s": seconds,
            "examples": only(sorted(pipeline_root.glob("CsvExampleGen/examples/*")), "Examples artifact"),
            "model_dir": model_dir, "model": model,
            # The run's own Evaluator (TFMA) on the same eval split: a check on the reading here.
            "evaluator": (summary.get("metric"), summary.get("metric_value"))}


def our_predictions(model_dir: Path, records: list[bytes], task: str,
                    positive: str | None) -> tuple[list[Any], list[float] | None]:
    """The model's predicted label (or value) per record and, for binary, the positive
    class's probability, from its serving_default signature."""
    import numpy as np
    import tensorflow as tf

    from serving import forest_ops
    from serving.contract import (
        EXAMPLES_INPUT,
        OUTPUT_CLASSES,
        OUTPUT_PREDICTION,
        OUTPUT_PROBABILITIES,
        SERVING_DEFAULT,
    )

    logging.getLogger("absl").setLevel(logging.ERROR)  # a line per sanitized column name on load
    signature = forest_ops.load(str(model_dir)).signatures[SERVING_DEFAULT]
    predicted: list[Any] = []
    positive_score: list[float] = []
    for start in range(0, len(records), PREDICT_BATCH):
        outputs = signature(**{EXAMPLES_INPUT: tf.constant(records[start:start + PREDICT_BATCH])})
        if task == score.REGRESSION:
            predicted.extend(outputs[OUTPUT_PREDICTION].numpy().reshape(-1).tolist())
            continue
        probabilities = outputs[OUTPUT_PROBABILITIES].numpy()
        classes = [[c.decode() for c in row] for row in outputs[OUTPUT_CLASSES].numpy().tolist()]
        best = np.argmax(probabilities, axis=1)
        predicted.extend(row[i] for row, i in zip(classes, best))
        if task == score.BINARY:
            positive_score.extend(p[row.index(positive)] for p, row in zip(probabilities.tolist(), classes))
    return predicted, (positive_score if task == score.BINARY else None)


def score_table(table: Table, run: dict[str, Any]) -> dict[str, Any]:
    from pipeline import datasets

    dataset = datasets.load(str(run["dataset_file"]))
    task, label = dataset.task, dataset.label
    train, _ = score.read_split(run["examples"], "train")
    evaluation, records = score.read_split(run["examples"], "eval")
    columns = [f.name for f in dataset.model_features]
    numeric = [c for c in columns if score.is_numeric(train[c])]
    categorical = [c for c in columns if c not in numeric]
    positive = None
    if task == score.BINARY:
        positive = dataset.positive or score.minority(train[label])
    truth = evaluation[label].tolist()
    predicted, positive_score = our_predictions(run["model_dir"], records, task, positive)
    ours = score.scores(task, truth, predicted, positive_score, positive)
    fitted = score.fit_baselines(task, train, label, numeric, categorical)
    baselines = {name: score.baseline_scores(task, model, evaluation, label, numeric, categorical, positive)
                 for name, model in fitted.items()}
    baselines["trivial"] = score.trivial_scores(task, train[label].tolist(), truth)
    metric = score.PRIMARY[task]
    best_name, best = score.best_baseline(metric, {n: baselines[n][metric] for n in score.BASELINES})
    return {"source": table.source, "rows": run["rows"], "cols": run["cols"], "task": task, "metric": metric,
            "train_rows": len(train), "eval_rows": len(evaluation), "model": run["model"],
            "ours": ours, "baselines": baselines, "best": best_name, "run_s": run["run_s"],
            "evaluator": run["evaluator"],
            "below_trivial": score.below_trivial(ours, baselines["trivial"]),
            **score.compare(metric, ours[metric], best)}


def print_table(results: dict[str, dict[str, Any]]) -> None:
    header = (f"{'table':<14}{'rows':>6}{'cols':>5}  {'task':<11}{'metric':<9}{'ours':>8}{'HGB':>8}{'linear':>8}"
              f"{'trivial':>8}{'gap':>8}  {'within':<7}{'model':<8}{'run s':>6}")
    print(header)
    print("-" * len(header))
    for name, r in results.items():
        if "error" in r:
            print(f"{name:<14}failed: {r['error']}")
            continue
        metrics = [r["metric"]] + (["accuracy"] if r["task"] == score.BINARY else [])
        for i, metric in enumerate(metrics):
            values = [r["ours"][metric]] + [r["baselines"][n][metric] for n in (*score.BASELINES, "trivial")]
            cells = "".join(f"{v:>8.4g}" for v in values)
            if i > 0 and metric in r["below_trivial"]:
                cells += "          <triv"
            if i == 0:
                flag = "yes" if r["within"] else "NO"
                flag += " <triv" if metric in r["below_trivial"] else ""
                print(f"{name:<14}{r['rows']:>6}{r['cols']:>5}  {r['task']:<11}{metric:<9}{cells}{r['gap']:>+8.3f}  "
                      f"{flag:<7}{r['model']:<8}{r['run_s']:>6.0f}")
            else:
                print(f"{'':<14}{'':>6}{'':>5}  {'':<11}{metric:<9}{cells}")
    print("gap: best baseline - ours for AUC/accuracy, ours / best - 1 for RMSE (positive: ours is worse); "
          "within: AUC/accuracy >= best - 0.01, RMSE <= 1.05 x best; <triv: ours below the trivial baseline")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = ",".join(name for name, table in TABLES.items() if table.default)
    parser.add_argument("--tables", default=default,
                        help=f"comma-separated, of {','.join(TABLES)} (default: {default})")
    parser.add_argument("--workdir", help="keep each table's CSV, dataset file and workspace here")
    parser.add_argument("--model", choices=MODEL_FAMILIES,
                        help="the model family every run trains (`turbotfx run --model`; default: the run's)")
    parser.add_argument("--tune-trials", type=int, metavar="N",
                        help="tune each run in N trials first (`turbotfx run --tune-trials`; default: no tuning)")
    args = parser.parse_args()
    names = [n.strip() for n in args.tables.split(",") if n.strip()]
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        parser.error(f"unknown tables {unknown}; known: {', '.join(TABLES)}")
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="quality_bench_"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(harness.cpu_summary(), f"; work dir {workdir}", flush=True)
    started = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        root = workdir / name
        if root.exists():
            sys.exit(f"{root} exists: each table runs in a fresh workspace; choose an empty --workdir")
        try:
            results[name] = score_table(TABLES[name], run_table(TABLES[name], root, args.model, args.tune_trials))
        except RuntimeError as err:  # a failed run is a result too; the other tables go on
            results[name] = {"error": str(err)}
        r = results[name]
        print(f"  {name}: " + (r["error"] if "error" in r else
                               f"{r['metric']} ours {r['ours'][r['metric']]:.4f} best {r['best']} "
                               f"{r['baselines'][r['best']][r['metric']]:.4f} in {r['run_s']:.0f}s "
                               f"(the run's Evaluator: {r['evaluator'][0]} {r['evaluator'][1]})"), flush=True)
    wall = time.perf_counter() - started
    print()
    print_table(results)
    scored = {n: r for n, r in results.items() if "error" not in r}
    harness.print_result({
        "tables": {n: ({"error": r["error"]} if "error" in r else {
            "task": r["task"], "metric": r["metric"], "ours": round(r["ours"][r["metric"]], 4),
            "best": r["best"], "best_value": round(r["baselines"][r["best"]][r["metric"]], 4),
            "ratio": round(r["ratio"], 4), "gap": round(r["gap"], 4), "within": r["within"],
            "below_trivial": r["below_trivial"], "model": r["model"], "run_s": round(r["run_s"], 1)})
            for n, r in results.items()},
        **score.summarize(scored), "failed": len(results) - len(scored), "wall_s": round(wall, 1),
        "model_family": args.model or "default", "tune_trials": args.tune_trials or 0})


if __name__ == "__main__":
    main()
