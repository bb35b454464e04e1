"""`turbotfx score` throughput: rows/s at 100k and 1M rows (penguins rows drawn with
replacement, an id column added) in each Beam mode, each scoring in a fresh interpreter as a
user runs it, beside in-process `predict --csv` on the same rows (the smaller sizes only:
predict holds every row in memory). Runs the pipeline first when the workspace has no
pushed penguins model. Last line: one JSON object, `rows_per_s` per mode and size and
`predict_rows_per_s` per size.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import _harness as harness

SIZES = (100_000, 1_000_000)
MODES = ("in_memory", "multi_process")
# predict reads the whole file into Python rows before scoring: past this, minutes and GiBs.
PREDICT_MAX_ROWS = 100_000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="workspace with a pushed penguins model (default: a temporary one)")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="row counts, comma-separated")
    parser.add_argument("--modes", default=",".join(MODES), help="Beam modes, comma-separated")
    args = parser.parse_args()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="score-bench-"))
    from pipeline.config import PipelineConfig
    from serving import push

    config = PipelineConfig(home=str(home))
    if not push.versions(config.serving_dir):
        harness.run_cli("run", "--epochs", "5", home=home)
    print(harness.cpu_summary())
    result: dict[str, dict[str, float]] = {"rows_per_s": {}, "predict_rows_per_s": {}}
    for size in (int(s) for s in args.sizes.split(",")):
        table = _table(home, size)
        for mode in args.modes.split(","):
            output = home / f"scores-{mode}-{size}"
            seconds = harness.run_cli("score", "--data", str(table), "--output", str(output), "--id", "penguin_id",
                                      "--beam-mode", mode, "--force", home=home)
            result["rows_per_s"][f"{mode}@{size}"] = round(size / seconds)
            print(f"score {size:>9} rows {mode:<14} {seconds:7.1f} s  {size / seconds:9.0f} rows/s (process wall)")
        if size <= PREDICT_MAX_ROWS:
            seconds = harness.run_cli("predict", "--csv", str(_table(home, size, ids=False)), "--format", "json",
                                      home=home)
            result["predict_rows_per_s"][str(size)] = round(size / seconds)
            print(f"predict {size:>7} rows {'in process':<14} {seconds:7.1f} s  {size / seconds:9.0f} rows/s")
    harness.print_result(result)
    return 0


def _table(home: Path, size: int, ids: bool = True) -> Path:
    """size penguins rows, drawn with replacement (seeded), ids first (predict takes features
    only), the label dropped."""
    path = home / f"penguins-{size}{'' if ids else '-features'}.csv"
    if path.exists():
        return path
    from palmerpenguins import load_penguins

    started = time.perf_counter()
    rows = load_penguins().drop(columns=["species", "year"], errors="ignore").sample(n=size, replace=True,
                                                                                   random_state=0)
    if ids:
        rows.insert(0, "penguin_id", [f"p{i:07d}" for i in range(size)])
    rows.to_csv(path, index=False)
    print(f"wrote {path} ({size} rows) in {time.perf_counter() - started:.1f} s")
    return path


if __name__ == "__main__":
    raise SystemExit(main())
