"""`turbotfx lineage --latest` against a store holding many pipeline runs.

One real pipeline run on the penguins data, then its MLMD records copied (runs - 1)
times the way TFX records a rerun on unchanged data: upstream nodes (ExampleGen to
Transform) as CACHED executions whose outputs are the original artifacts, the resolver,
Trainer, Evaluator and Pusher as COMPLETE executions with new artifacts, each copy
blessed against the previous copy's model and pushed under a larger version. So the
upstream walk from the latest model meets every cached Transform and ExampleGen
execution, as it would after 100 real runs.

Timed in-process on the filled store (median over --repeats, after one warm-up):
  lineage_s  find_model(latest=True) + model_lineage(): `turbotfx lineage --latest`
             without printing
  raw_s      the one raw get_lineage_subgraph call it is built on (UPSTREAM from the
             model, UPSTREAM_HOPS hops, GRAPH_FIELDS), made with the MLMD API directly
  cli_s      the CLI as a subprocess, interpreter start-up included (median of 3;
             informational)
Target: lineage_s under 1 s and within 2x of raw_s. Last line: one JSON object.

    .venv/bin/python benchmarks/lineage_bench.py [--workdir DIR] [--runs N] [--repeats N]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import _harness as harness
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.atomic_pusher.keys import PUSHED, PUSHED_DESTINATION, PUSHED_VERSION
from pipeline.config import PipelineConfig
from pipeline.provenance import graph, lineage, runs
from pipeline.store import connection, url

RUN_ARGS = ["--epochs", "5", "--min-accuracy", "0.5"]  # tiny, but above the trivial baseline: blessed, pushed
# Nodes that run again on unchanged data; every other node is a cache hit.
FRESH_NODES = ("latest_blessed_model_resolver", "Trainer", "Evaluator", "Pusher")
TARGET_RATIO, TARGET_S, CLI_REPEATS = 2.0, 1.0, 3


# --- filling the store ---------------------------------------------------------------


def run_pipeline(home: Path) -> None:
    """One real run; its output is shown only when it fails."""
    print(f"running the pipeline once in {home} (about a minute)", flush=True)
    harness.run_cli("run", *RUN_ARGS, home=home)


class RunCopier:
    """Copies the records of one pipeline run into new runs of the same store."""

    def __init__(self, store: metadata_store.MetadataStore, source: mlmd_pb.Context) -> None:
        self.store = store
        self.source = source
        types = graph.TypeNames(store)
        self.pipeline = next(p for p in store.get_parent_contexts_by_context(source.id)
                             if types.context(p.type_id) == graph.PIPELINE_CONTEXT)
        self.executions = sorted(store.get_executions_by_context(source.id), key=lambda e: e.id)
        self.events: dict[int, list[mlmd_pb.Event]] = {e.id: [] for e in self.executions}
        for event in store.get_events_by_execution_ids(list(self.events)):
            self.events[event.execution_id].append(event)
        artifact_ids = sorted({e.artifact_id for events in self.events.values() for e in events})
        self.artifacts = {a.id: a for a in store.get_artifacts_by_id(artifact_ids)}
        self.artifact_types = {a.id: types.artifact(a.type_id) for a in self.artifacts.values()}
        # node id ("Trainer") and node context of each execution
        self.nodes: dict[int, tuple[str, mlmd_pb.Context]] = {}
        for execution in self.executions:
            node = next(c for c in store.get_contexts_by_execution(execution.id)
                        if types.context(c.type_id) == "node")
            self.nodes[execution.id] = (node.name.rsplit(".", 1)[-1], node)
        # the chain continues from whatever the store holds: a rerun adds to earlier copies
        self.previous_model = max(store.get_artifacts_by_type("Model"), key=lambda a: a.id)
        pushed = [a for a in store.get_artifacts_by_type("PushedModel") if a.custom_properties[PUSHED].int_value]
        self.version = max(int(a.custom_properties[PUSHED_VERSION].string_value) for a in pushed)

    def examples_id(self) -> int:
        """The source run's ExampleGen output: every copy trains on it."""
        return next(e.artifact_id for execution in self.executions for e in self.events[execution.id]
                    if self.nodes[execution.id][0].endswith("ExampleGen") and e.type == graph.OUTPUT)

    def copy(self, number: int) -> int:
        """Records run `number` (the store's how-many-th run); returns its new model's id."""
        run = mlmd_pb.Context()
        run.CopyFrom(self.source)
        for field in ("id", "create_time_since_epoch", "last_update_time_since_epoch"):
            run.ClearField(field)
        run.name = _run_name(self.source.name, number)
        [run.id] = self.store.put_contexts([run])
        self.store.put_parent_contexts([mlmd_pb.ParentContext(child_id=run.id, parent_id=self.pipeline.id)])
        self.version += 1
        new: dict[int, mlmd_pb.Artifact] = {}  # source artifact id -> this run's copy
        for execution in self.executions:
            node, node_context = self.nodes[execution.id]
            fresh = node in FRESH_NODES
            pairs = []
            for event in self.events[execution.id]:
                if event.type == graph.INPUT and graph.event_key(event) == "baseline_model":
                    continue  # replaced below: the baseline is the previous copy's model
                if event.type == graph.OUTPUT and fresh:
                    new[event.artifact_id] = self._new_artifact(event.artifact_id, number, new)
                artifact = new.get(event.artifact_id, self.artifacts[event.artifact_id])
                pairs.append((artifact, mlmd_pb.Event(type=event.type, path=event.path)))
            if node == "Evaluator":
                pairs.append((self.previous_model, _event(graph.INPUT, "baseline_model")))
            state = mlmd_pb.Execution.COMPLETE if fresh else mlmd_pb.Execution.CACHED
            _, artifact_ids, _ = self.store.put_execution(
                _copied_execution(execution, state), pairs, [self.pipeline, run, node_context],
                force_reuse_context=True)  # the shared contexts are not rewritten
            for (artifact, _), artifact_id in zip(pairs, artifact_ids):
                artifact.id = artifact_id  # later executions of this run refer to the copies
        model = next(a for source_id, a in new.items() if self.artifact_types[source_id] == "Model")
        self.previous_model = model
        return model.id

    def _new_artifact(self, source_id: int, number: int, new: dict[int, mlmd_pb.Artifact]) -> mlmd_pb.Artifact:
        artifact = mlmd_pb.Artifact()
        artifact.CopyFrom(self.artifacts[source_id])
        for field in ("id", "name", "external_id", "create_time_since_epoch", "last_update_time_since_epoch"):
            artifact.ClearField(field)
        artifact.uri = f"{artifact.uri}.copy{number}"  # unique, as TFX's execution-id suffix is
        properties = artifact.custom_properties
        type_name = self.artifact_types[source_id]
        if type_name == "ModelBlessing":
            model = next(a for i, a in new.items() if self.artifact_types[i] == "Model")
            properties["current_model_id"].int_value = model.id
            properties["baseline_model_id"].int_value = self.previous_model.id
        if type_name == "PushedModel" and properties[PUSHED].int_value:
            destination = properties[PUSHED_DESTINATION].string_value
            properties[PUSHED_VERSION].string_value = str(self.version)
            properties[PUSHED_DESTINATION].string_value = f"{os.path.dirname(destination)}/{self.version}"
        return artifact


def _copied_execution(execution: mlmd_pb.Execution, state: int) -> mlmd_pb.Execution:
    copied = mlmd_pb.Execution()
    copied.CopyFrom(execution)
    for field in ("id", "name", "external_id", "create_time_since_epoch", "last_update_time_since_epoch"):
        copied.ClearField(field)
    copied.last_known_state = state
    return copied


def _event(event_type: int, key: str) -> mlmd_pb.Event:
    event = mlmd_pb.Event(type=event_type)
    event.path.steps.add().key = key
    event.path.steps.add().index = 0
    return event


def _run_name(source_name: str, number: int) -> str:
    """A run id like TFX's (a timestamp), `number` minutes after the source run's."""
    try:
        return (datetime.datetime.fromisoformat(source_name) + datetime.timedelta(minutes=number)).isoformat()
    except ValueError:
        return f"{source_name}.copy{number}"


def fill(store: metadata_store.MetadataStore, total_runs: int) -> int:
    """Copies the store's first run until it holds total_runs runs; returns the examples id."""
    existing = sorted(store.get_contexts_by_type(graph.RUN_CONTEXT), key=lambda c: c.id)
    if len(existing) > total_runs:
        sys.exit(f"the store already holds {len(existing)} runs, more than --runs {total_runs}; "
                 "use another --workdir")
    copier = RunCopier(store, existing[0])
    started = time.perf_counter()
    for number in range(len(existing), total_runs):
        copier.copy(number)
    if total_runs > len(existing):
        print(f"copied run {existing[0].name} {total_runs - len(existing)} times "
              f"in {time.perf_counter() - started:.1f} s")
    return copier.examples_id()


def verify(store: metadata_store.MetadataStore, total_runs: int, examples_id: int) -> dict[str, Any]:
    """Fails unless the store reads as total_runs finished runs whose latest model is the
    last copy's, pushed under the largest version: a benchmark over broken data is worthless."""
    listed = runs.list_runs(store)
    assert len(listed) == total_runs, f"list_runs shows {len(listed)} runs, expected {total_runs}"
    assert {r["status"] for r in listed} == {"COMPLETE"}, {r["run_id"]: r["status"] for r in listed}
    models = sorted(a.id for a in store.get_artifacts_by_type("Model"))
    versions = [int(a.custom_properties[PUSHED_VERSION].string_value)
                for a in store.get_artifacts_by_type("PushedModel") if a.custom_properties[PUSHED].int_value]
    found = lineage.model_lineage(store, lineage.find_model(store, latest=True))
    assert found["model"]["id"] == models[-1], (found["model"], models[-1])
    assert found["pushed_model"] and found["pushed_model"]["version"] == str(max(versions)), found["pushed_model"]
    assert found["examples"] and found["examples"]["id"] == examples_id, (found["examples"], examples_id)
    assert found["evaluation"] and found["evaluation"]["blessed"] is True, found["evaluation"]
    if total_runs > 1:
        assert found["evaluation"]["baseline_model_id"] == models[-2], (found["evaluation"], models[-2])
    print(f"store checked: {len(listed)} runs, latest model {models[-1]} pushed as version {max(versions)}, "
          f"{len(found['graph']['nodes'])} nodes in its lineage graph")
    return found


# --- timing ----------------------------------------------------------------------------


def lineage_latest(store: metadata_store.MetadataStore) -> dict[str, Any]:
    """What `turbotfx lineage --latest` computes before printing."""
    return lineage.model_lineage(store, lineage.find_model(store, latest=True))


def raw_upstream(store: metadata_store.MetadataStore, model_id: int) -> mlmd_pb.LineageGraph:
    """The upstream get_lineage_subgraph call lineage makes, built here without pipeline.provenance.lineage code."""
    options = mlmd_pb.LineageSubgraphQueryOptions(
        max_num_hops=lineage.UPSTREAM_HOPS, direction=mlmd_pb.LineageSubgraphQueryOptions.UPSTREAM)
    options.starting_artifacts.filter_query = f"id = {int(model_id)}"
    return store.get_lineage_subgraph(options, graph.GRAPH_FIELDS)


def cli_seconds(home: Path) -> float:
    """Median wall seconds of the CLI as a subprocess, interpreter start-up included."""
    return statistics.median([harness.run_cli("lineage", "--latest", home=home) for _ in range(CLI_REPEATS)])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", help="workspace to fill and keep (default: a temp dir, deleted at the end)")
    parser.add_argument("--runs", type=int, default=100, help="pipeline runs in the store (default: 100)")
    parser.add_argument("--repeats", type=int, default=20, help="timed calls per measure (default: 20)")
    args = parser.parse_args(argv)
    home = Path(args.workdir or tempfile.mkdtemp(prefix="lineage-bench-")).resolve()
    try:
        return bench(home, args.runs, args.repeats)
    finally:
        if not args.workdir:
            shutil.rmtree(home, ignore_errors=True)


def bench(home: Path, total_runs: int, repeats: int) -> int:
    store_url = url.sqlite_url(PipelineConfig(home=str(home)).metadata_path)
    store = connection.open_store(store_url)
    if not store.get_contexts_by_type(graph.RUN_CONTEXT):
        run_pipeline(home)
    examples_id = fill(store, total_runs)
    found = verify(store, total_runs, examples_id)
    del store

    store = connection.open_store(store_url)  # fresh connection: no state left from filling
    model_id = found["model"]["id"]
    raw = raw_upstream(store, model_id)
    print(f"raw upstream subgraph: {len(raw.artifacts)} artifacts, {len(raw.executions)} executions, "
          f"{len(raw.events)} events")
    timed = harness.median_seconds({"lineage": lambda: lineage_latest(store),
                                    "raw": lambda: raw_upstream(store, model_id)}, repeats)
    cli = cli_seconds(home)
    ratio = timed["lineage"] / timed["raw"]
    print(f"lineage --latest (in-process, median of {repeats}): {timed['lineage'] * 1000:8.1f} ms "
          f"(target < {TARGET_S * 1000:.0f} ms)")
    print(f"raw get_lineage_subgraph (median of {repeats}):     {timed['raw'] * 1000:8.1f} ms")
    print(f"ratio lineage/raw: {ratio:.2f} (target <= {TARGET_RATIO:.1f})")
    print(f"turbotfx lineage --latest CLI (median of {CLI_REPEATS}):   {cli:8.2f} s (with interpreter start-up)")
    harness.print_result({
        "runs": total_runs,
        "lineage_s": round(timed["lineage"], 4),
        "raw_s": round(timed["raw"], 4),
        "ratio": round(ratio, 3),
        "cli_s": round(cli, 3),
        "target_ratio": TARGET_RATIO,
        "target_s": TARGET_S,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
