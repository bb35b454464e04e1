"""The columns axis: the whole pipeline (`turbotfx init` then `turbotfx run`, defaults) on
generated tables of growing width at a fixed number of rows, beside the built-in penguins
run on the same machine.

Each table has a binary label, two thirds of its columns whole-number codes with ten values
(categoricals to init, each a vocabulary to Transform) and a third decimals; the label
follows a few of them, so the model has something to learn. Each run starts from an empty
workspace in a fresh interpreter. Printed per width: each component's seconds (from MLMD),
the run's wall seconds, its ratio to the penguins run's, and the peak memory of the run's
process tree (sampled every 0.25 s).

Last line: one JSON object with each width's run and `ratio_to_penguins` per width.

    .venv/bin/python benchmarks/columns_bench.py [--columns 10,100,300] [--rows 5000] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _harness as harness
from pipeline_bench import component_seconds
from scale_bench import PeakMemory

DEFAULT_COLUMNS = (10, 100, 300)
DEFAULT_ROWS = 5000
# The share of a table's columns that are categorical codes; the rest are decimals.
CATEGORICAL_SHARE = 2 / 3
CODE_VALUES = 10
SHOWN = ("CsvExampleGen", "StatisticsGen", "Transform", "Trainer", "ServingCheck", "Evaluator")
LABEL = "y"


def write_table(path: Path, columns: int, rows: int, seed: int = 0) -> None:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    codes = max(1, round(columns * CATEGORICAL_SHARE))
    frame = pd.DataFrame({
        **{f"code_{i}": rng.integers(0, CODE_VALUES, rows) for i in range(codes)},
        **{f"x_{i}": np.round(rng.normal(size=rows), 3) for i in range(columns - codes)},
    })
    score = rng.normal(0, 1, rows) + 0.4 * frame["code_0"]
    if columns > codes:
        score += frame["x_0"]
    frame[LABEL] = np.where(score > np.median(score), "yes", "no")
    path.parent.mkdir(parents=True)
    frame.to_csv(path, index=False)


def run_pipeline(home: Path, *run_args: str) -> dict:
    """`turbotfx run` in a fresh interpreter: wall seconds, peak memory, each component's seconds."""
    with PeakMemory() as memory:
        started = time.perf_counter()
        harness.run_cli("run", *run_args, home=home)
        wall = time.perf_counter() - started
    return {"wall_s": round(wall, 1), "peak_rss_mb": round(memory.peak_bytes / 2**20),
            "components": {k: round(v, 1) for k, v in component_seconds(home / "metadata" / "turbotfx.sqlite").items()}}


def run_width(columns: int, rows: int, workdir: Path) -> dict:
    data = workdir / f"columns-{columns}" / "data"
    write_table(data / "part-0.csv", columns, rows)
    home = workdir / f"columns-{columns}" / "ws"
    dataset = workdir / f"columns-{columns}" / "wide.toml"
    harness.run_cli("init", "--data-root", str(data), "--label", LABEL, "--output", str(dataset), home=home)
    return run_pipeline(home, "--dataset", str(dataset))


def print_row(name: str, run: dict, penguins_s: float) -> None:
    cells = "".join(f"{run['components'].get(component, 0.0):>14.1f}" for component in SHOWN)
    print(f"  {name:<10}{cells}{run['wall_s']:>10.1f}{run['wall_s'] / penguins_s:>9.1f}x{run['peak_rss_mb']:>9,}MB",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--columns", default=",".join(map(str, DEFAULT_COLUMNS)), help="widths, comma-separated")
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--workdir", help="where data and runs go (default: a temp dir)")
    args = parser.parse_args()
    try:
        widths = sorted({int(width) for width in args.columns.split(",")})
    except ValueError:
        parser.error(f"--columns: {args.columns!r} is not a comma-separated list of column counts")
    if not widths or widths[0] < 1 or args.rows < 100:
        parser.error("--columns must be positive and --rows at least 100")
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="columns-bench-"))
    print(harness.cpu_summary())
    print(f"{args.rows:,} rows; {CATEGORICAL_SHARE:.0%} of the columns codes with {CODE_VALUES} values, "
          f"the rest decimals; workdir {workdir}")
    penguins = run_pipeline(workdir / "penguins")
    print(f"\n  {'columns':<10}" + "".join(f"{name:>14}" for name in SHOWN)
          + f"{'wall':>10}{'ratio':>10}{'peak RSS':>11}")
    print_row("penguins", penguins, penguins["wall_s"])
    runs = {}
    for width in widths:
        runs[str(width)] = run_width(width, args.rows, workdir)
        print_row(str(width), runs[str(width)], penguins["wall_s"])
    harness.print_result({
        "rows": args.rows, "penguins": penguins, "runs": runs,
        "ratio_to_penguins": {width: round(run["wall_s"] / penguins["wall_s"], 2) for width, run in runs.items()},
    })


if __name__ == "__main__":
    main()
