"""Our pipeline against TFX's own penguin example, on the same penguins data, in one run.

Each pipeline runs in a fresh interpreter from an empty pipeline root, with the in-memory
DirectRunner (the fastest Beam setting for this data). The anchor is TFX's own
`penguin_pipeline_local.create_pipeline` with `penguin_utils_keras`, unchanged. Printed: per-component seconds
(from MLMD), each pipeline's end-to-end seconds (the LocalDagRunner run, imports excluded),
and the ratio ours / anchor. The last line is one JSON object.

    .venv/bin/python benchmarks/pipeline_bench.py [--workdir DIR] [--epochs N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import _harness as harness

# The DirectRunner's default mode is in-memory with one worker. Passed as no args at
# all: with any Beam arg, TFX builds an sdist of itself for each Beam component (about
# 2 s each), so this is the anchor's fastest in-memory setting, not a handicap.
ANCHOR_BEAM_ARGS: list[str] = []


def component_seconds(metadata_path: Path) -> dict[str, float]:
    """Seconds of each component of the store's newest run, whatever its pipeline's name."""
    from pipeline.provenance import graph, summary
    from pipeline.store import connection, url

    store = connection.open_store(url.sqlite_url(metadata_path))
    runs = store.get_contexts_by_type(graph.RUN_CONTEXT)
    newest = summary.summarize(store, max(runs, key=lambda c: c.create_time_since_epoch),
                               graph.TypeNames(store), with_components=True)
    return {c.node_id: c.seconds for c in newest.components}


def run_ours(workdir: Path, epochs: int) -> dict:
    from pipeline import workspace
    from pipeline.config import PipelineConfig
    from pipeline.runners import local

    config = PipelineConfig(home=str(workdir), knobs={"epochs": epochs}, beam_mode="in_memory")
    data_root = workspace.prepare_input(config)
    started = time.perf_counter()
    local.run(config, data_root)
    return {"wall_s": time.perf_counter() - started, "components": component_seconds(config.metadata_path)}


def anchor_data(data_root: Path) -> None:
    """The penguins rows in the columns TFX's example expects (its penguins_processed.csv)."""
    from palmerpenguins import load_penguins

    frame = load_penguins().dropna(subset=["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"])
    frame = frame.rename(columns={"bill_length_mm": "culmen_length_mm", "bill_depth_mm": "culmen_depth_mm"})
    frame["species"] = frame["species"].map({"Adelie": 0, "Chinstrap": 1, "Gentoo": 2})
    columns = ["species", "culmen_length_mm", "culmen_depth_mm", "flipper_length_mm", "body_mass_g"]
    (data_root / "labelled").mkdir(parents=True, exist_ok=True)
    frame[columns].astype({"flipper_length_mm": float, "body_mass_g": float}).to_csv(
        data_root / "labelled" / "penguins_processed.csv", index=False
    )


def run_anchor(workdir: Path) -> dict:
    from tfx import v1 as tfx
    from tfx.examples.penguin import penguin_pipeline_local, penguin_utils_keras

    data_root = workdir / "data"
    anchor_data(data_root)
    metadata_path = workdir / "metadata.sqlite"
    pipeline = penguin_pipeline_local.create_pipeline(
        pipeline_name="penguin_local",
        pipeline_root=str(workdir / "root"),
        data_root=str(data_root),
        module_file=penguin_utils_keras.__file__,
        accuracy_threshold=0.6,
        serving_model_dir=str(workdir / "serving"),
        metadata_path=str(metadata_path),
        user_provided_schema_path=None,
        enable_tuning=False,
        enable_bulk_inferrer=False,
        enable_example_diff=False,
        examplegen_input_config=None,
        examplegen_range_config_date=None,
        resolver_range_config=None,
        beam_pipeline_args=ANCHOR_BEAM_ARGS,
        enable_transform_input_cache=False,
    )
    started = time.perf_counter()
    tfx.orchestration.LocalDagRunner().run(pipeline)
    return {"wall_s": time.perf_counter() - started, "components": component_seconds(metadata_path)}


def child(which: str, workdir: Path, result_file: Path, epochs: int) -> None:
    result = run_ours(workdir, epochs) if which == "ours" else run_anchor(workdir)
    result_file.write_text(json.dumps(result))


def run_child(which: str, workdir: Path, epochs: int) -> dict:
    workdir.mkdir(parents=True)
    result_file = workdir / "result.json"
    process_s = harness.run_python(
        [__file__, "--child", which, "--workdir", str(workdir), "--result", str(result_file),
         "--epochs", str(epochs)],
        f"{which} pipeline", log=workdir / "run.log",
    )
    return {**json.loads(result_file.read_text()), "process_s": process_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", help="where both pipelines write (default: a temp dir)")
    parser.add_argument("--epochs", type=int, default=20, help="our Trainer's epochs")
    parser.add_argument("--child", choices=["ours", "anchor"], help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, Path(args.workdir), Path(args.result), args.epochs)
        return

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="pipeline-bench-"))
    anchor = run_child("anchor", workdir / "anchor", args.epochs)
    ours = run_child("ours", workdir / "ours", args.epochs)

    names = sorted(set(anchor["components"]) | set(ours["components"]))
    print(f"{'component':<32} {'anchor s':>9} {'ours s':>9}")
    for name in names:
        a, o = anchor["components"].get(name), ours["components"].get(name)
        print(f"{name:<32} {_cell(a)} {_cell(o)}")
    print(f"{'end to end (LocalDagRunner.run)':<32} {anchor['wall_s']:9.1f} {ours['wall_s']:9.1f}")
    print(f"{'process (with imports)':<32} {anchor['process_s']:9.1f} {ours['process_s']:9.1f}")
    ratio = ours["wall_s"] / anchor["wall_s"]
    print(f"ratio ours/anchor: {ratio:.2f} (target <= 0.60)")
    harness.print_result({
        "ours_s": round(ours["wall_s"], 2),
        "anchor_s": round(anchor["wall_s"], 2),
        "ratio": round(ratio, 3),
        "ours_process_s": round(ours["process_s"], 2),
        "anchor_process_s": round(anchor["process_s"], 2),
        "ours_components": {k: round(v, 2) for k, v in ours["components"].items()},
        "anchor_components": {k: round(v, 2) for k, v in anchor["components"].items()},
    })


def _cell(seconds: float | None) -> str:
    return f"{seconds:9.1f}" if seconds is not None else f"{'-':>9}"


if __name__ == "__main__":
    main()
