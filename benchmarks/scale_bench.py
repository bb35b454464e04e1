"""The scale curve: the synthetic dataset at growing sizes through preprocessing and a
one-epoch Trainer, in each Beam mode, and whether `auto` picks the fastest.

For each size (rows) the data is generated once; then each mode runs the pipeline up to
Transform plus the Trainer (one epoch) from an empty store, in a fresh interpreter. Printed
per run: each component's seconds and rows/s (from MLMD), preprocessing (CsvExampleGen to
Transform) seconds and rows/s, and the peak memory of the run's process tree (sampled).
`auto` is the mode pipeline/runners/local.py's beam_mode picks for that data; its time is
that mode's run.

Last line: one JSON object with rows_per_s_at_max (preprocessing rows/s at the largest size
in auto's mode), auto_vs_best (the worst, over sizes, of auto's preprocessing seconds over
the fastest mode's), and every run.

    .venv/bin/python benchmarks/scale_bench.py [--sizes 10000,100000,1000000]
        [--modes in_memory,multi_process] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path

import _harness as harness
from pipeline_bench import component_seconds

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)
# Beam modes: the DirectRunner's two, and "cluster": a Spark standalone cluster on loopback
# (pipeline/runners/spark/local_cluster.py, one master, one worker with this machine's cores), started
# once for all sizes. Not in the default: it measures Beam's portable-runner overhead on
# the same cores, not more machines.
MODES = ("in_memory", "multi_process", "cluster")
DEFAULT_MODES = ("in_memory", "multi_process")
# The cluster's address, from the parent to each child run: "MASTER_URL WORKER_POOL".
CLUSTER_ENV_VAR = "SCALE_BENCH_CLUSTER"
PREPROCESSING = ("CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "AnomalyGate", "Transform")
SHOWN = ("CsvExampleGen", "StatisticsGen", "Transform", "Trainer")
EPOCHS = 1
# How often the process tree's memory is sampled.
SAMPLE_S = 0.25


def beam_args(mode: str) -> list[str]:
    from pipeline.runners import cluster, local
    from pipeline.runners.beam_args import BeamOptions

    if mode == "cluster":
        master, pool = os.environ[CLUSTER_ENV_VAR].split()
        return cluster.pipeline_args(BeamOptions(runner="spark", spark_master=master, worker_pool=pool))
    return local.beam_pipeline_args(mode)


class PeakMemory:
    """The largest total resident memory of this process and its descendants (Beam's
    worker processes), sampled in a thread."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for process in [self._process, *self._process.children(recursive=True)]:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    pass  # ended between the listing and the reading
            self.peak_bytes = max(self.peak_bytes, total)
            self._stop.wait(SAMPLE_S)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()


def run_one(size: int, mode: str, data_root: Path, home: Path) -> dict:
    """The pipeline up to Transform plus the Trainer, in this process; its measurements."""
    from tfx.orchestration import pipeline as tfx_pipeline
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import workspace
    from pipeline.config import PipelineConfig
    from pipeline.pipeline import create_pipeline
    from pipeline.runners import beam_tuning, local

    config = PipelineConfig(home=str(home), dataset="synthetic", rows=size, data_root=str(data_root),
                            knobs={"epochs": EPOCHS}, beam_mode="auto" if mode == "cluster" else mode, enable_cache=False)
    root = workspace.prepare_input(config)
    if mode != "cluster":
        beam_tuning.tune(mode)
    connection = local.metadata_config(config)
    whole = create_pipeline(config, root, beam_args(mode), connection)
    keep = (*PREPROCESSING, "Trainer")
    kept = [c for c in whole.components if c.id in keep]
    for component in kept:  # cut the links to the Evaluator and after
        for downstream in list(component.downstream_nodes):
            if downstream.id not in keep:
                component.remove_downstream_node(downstream)
    partial = tfx_pipeline.Pipeline(
        pipeline_name=whole.pipeline_info.pipeline_name, pipeline_root=whole.pipeline_info.pipeline_root,
        components=kept, enable_cache=False, metadata_connection_config=connection,
        beam_pipeline_args=whole.beam_pipeline_args)
    with PeakMemory() as memory:
        started = time.perf_counter()
        LocalDagRunner().run(partial)
        wall = time.perf_counter() - started
    return {"wall_s": wall, "peak_rss_mb": memory.peak_bytes / 2**20,
            "components": component_seconds(config.metadata_path)}


def run_child(size: int, mode: str, data_root: Path, workdir: Path, cluster_env: dict[str, str]) -> dict:
    home = workdir / f"rows-{size}-{mode}"
    home.mkdir(parents=True)
    result_file = home / "result.json"
    harness.run_python([__file__, "--child", mode, "--sizes", str(size), "--data", str(data_root),
                        "--workdir", str(home), "--result", str(result_file)],
                       f"{mode} at {size} rows", log=home / "run.log", env=cluster_env)
    result = json.loads(result_file.read_text())
    result["preprocessing_s"] = sum(result["components"].get(name, 0.0) for name in PREPROCESSING)
    return result


def prepare(size: int, workdir: Path) -> tuple[Path, str]:
    """The synthetic data at this size (generated once) and the mode auto picks for it."""
    from pipeline import workspace
    from pipeline.config import PipelineConfig
    from pipeline.runners import local

    config = PipelineConfig(home=str(workdir / "data-home"), dataset="synthetic", rows=size)
    root = workspace.prepare_input(config)
    return root, local.beam_mode(config, root)


def print_runs(size: int, auto: str, runs: dict[str, dict]) -> None:
    print(f"\n{size:,} rows (auto picks {auto})")
    print(f"  {'mode':<14}" + "".join(f"{name:>22}" for name in SHOWN)
          + f"{'preprocessing':>22}{'peak RSS':>10}")
    for mode, run in runs.items():
        cells = []
        for name in (*SHOWN, "preprocessing"):
            seconds = run["preprocessing_s"] if name == "preprocessing" else run["components"].get(name)
            cells.append(f"{seconds:8.1f}s {size / seconds:9,.0f}/s " if seconds else f"{'-':>22}")
        marker = " *" if mode == auto else "  "
        print(f"{marker}{mode:<14}" + "".join(cells) + f"{run['peak_rss_mb']:8,.0f}MB", flush=True)


def measure(sizes: list[int], modes: list[str], workdir: Path, cluster_env: dict[str, str]) -> dict[str, dict]:
    """Each size in each mode; per size: auto's pick, the fastest mode, and every run."""
    summary: dict[str, dict] = {}
    for size in sizes:
        data_root, auto = prepare(size, workdir)
        runs = {mode: run_child(size, mode, data_root, workdir, cluster_env) for mode in modes}
        print_runs(size, auto, runs)
        best = min(runs, key=lambda mode: runs[mode]["preprocessing_s"])
        summary[str(size)] = {
            "auto": auto, "best": best,
            "auto_vs_best": runs[auto]["preprocessing_s"] / runs[best]["preprocessing_s"] if auto in runs else None,
            "runs": {mode: {"preprocessing_s": round(run["preprocessing_s"], 2),
                            "wall_s": round(run["wall_s"], 2), "peak_rss_mb": round(run["peak_rss_mb"]),
                            "components": {k: round(v, 2) for k, v in run["components"].items()}}
                     for mode, run in runs.items()},
        }
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="rows, comma-separated")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"of {', '.join(MODES)}")
    parser.add_argument("--workdir", help="where data and runs go (default: a temp dir)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    try:
        sizes = sorted({int(size) for size in args.sizes.split(",")})
    except ValueError:
        parser.error(f"--sizes: {args.sizes!r} is not a comma-separated list of row counts")
    if not sizes or sizes[0] < 1:
        parser.error("--sizes: row counts must be positive")
    modes = [mode for mode in args.modes.split(",") if mode]
    unknown = sorted(set(modes) - set(MODES))
    if unknown or not modes:
        parser.error(f"--modes: unknown {', '.join(unknown) or 'none given'}; choose from {', '.join(MODES)}")
    if args.child:
        result = run_one(sizes[0], args.child, Path(args.data), Path(args.workdir))
        Path(args.result).write_text(json.dumps(result))
        return
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="scale-bench-"))
    print(f"workdir {workdir}; {harness.cpu_summary()}; Trainer {EPOCHS} epoch", flush=True)
    with contextlib.ExitStack() as stack:
        cluster_env = {}
        if "cluster" in modes:
            from pipeline.runners.spark.local_cluster import spark_cluster

            running = stack.enter_context(spark_cluster(workdir / "cluster"))
            cluster_env = {CLUSTER_ENV_VAR: f"{running.master_url} {running.worker_pool}"}
        summary = measure(sizes, modes, workdir, cluster_env)
    largest = summary[str(sizes[-1])]
    auto_runs = largest["runs"].get(largest["auto"])
    ratios = [s["auto_vs_best"] for s in summary.values() if s["auto_vs_best"] is not None]
    result = {
        "rows_per_s_at_max": round(sizes[-1] / auto_runs["preprocessing_s"]) if auto_runs else None,
        "auto_vs_best": round(max(ratios), 3) if ratios else None,
        "largest_rows": sizes[-1],
        "sizes": summary,
    }
    print(f"\nrows/s at {sizes[-1]:,} rows in auto's mode: {result['rows_per_s_at_max']} (target >= 6000); "
          f"auto vs best: {result['auto_vs_best']} (target <= 1.1)", flush=True)
    harness.print_result(result)


if __name__ == "__main__":
    main()
