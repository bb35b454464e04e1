"""Serving latency: in-process p50/p99 through serving_default, and the client's overhead.

Measures, on the newest pushed penguins model (running the pipeline first when the
workspace has none):
  - p50/p99 of one serving_default call with serialized tf.Examples, batch 1 and 64
    (TF's runtime in this process: no server, no network);
  - the client path (ServingClient over gRPC to a loopback stand-in for TF Serving's
    Predict, benchmarks/_loopback_server.py, which runs the same signature) divided by
    the raw signature call for the same batch: what the client, the protocol and the
    server's plumbing add.
Last line: one JSON object with p50_ms_b1, p99_ms_b1, p50_ms_b64, client_overhead.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Callable

import _harness as harness
import numpy as np
import tensorflow as tf
from _loopback_server import LoopbackServing

from pipeline import workspace
from pipeline.config import PipelineConfig
from pipeline.scoring.inputs import row_schema
from serving import forest_ops, push
from serving.client import ServingClient
from serving.contract import EXAMPLES_INPUT, LATENCY_BATCH_SIZES, SERVING_DEFAULT, latency_key


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="workspace with a pushed penguins model (default: a temporary one)")
    parser.add_argument("--runs", type=int, default=300, help="timed calls per measurement (default: 300)")
    args = parser.parse_args()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="serving-bench-"))
    config = PipelineConfig(home=str(home))
    model_dir = pushed_model(config)
    rows = penguin_rows(config)
    schema = row_schema(config.spec)
    serialized = [schema.to_example(row) for row in rows]
    signature = forest_ops.load(str(model_dir)).signatures[SERVING_DEFAULT]
    print(f"model {model_dir}; {len(rows)} eval rows")

    results = {}
    raw_median = {}
    # The batch sizes and names the pipeline's serving check reports, to compare with it.
    for batch_size in LATENCY_BATCH_SIZES:
        batch = tf.constant([serialized[i % len(serialized)] for i in range(batch_size)])
        seconds = timed(lambda batch=batch: signature(**{EXAMPLES_INPUT: batch}), args.runs)
        p50, p99 = latency_key(50, batch_size), latency_key(99, batch_size)
        results[p50] = round(np.percentile(seconds, 50) * 1000, 3)
        results[p99] = round(np.percentile(seconds, 99) * 1000, 3)
        raw_median[batch_size] = statistics.median(seconds)
        print(f"in-process serving_default, batch {batch_size:>2}: p50 {results[p50]:.3f} ms, "
              f"p99 {results[p99]:.3f} ms")

    with LoopbackServing("penguins", int(model_dir.name), model_dir) as server:
        client = ServingClient(schema=schema, grpc_target=server.grpc_target)
        stub = client._stub()[0]
        for batch_size in LATENCY_BATCH_SIZES:
            batch_rows = [rows[i % len(rows)] for i in range(batch_size)]
            seconds = timed(lambda batch_rows=batch_rows: client.predict(batch_rows), args.runs)
            overhead = statistics.median(seconds) / raw_median[batch_size]
            results[f"client_overhead_b{batch_size}"] = round(overhead, 2)
            # The same request, prebuilt and sent with the bare gRPC stub: what transport and
            # the loopback server cost, apart from the client's own work.
            request = bare_request(serialized[:batch_size])  # the same rows as the client sends
            stub_seconds = timed(lambda request=request: stub.Predict(request, timeout=10), args.runs)
            results[f"client_vs_bare_stub_b{batch_size}"] = round(statistics.median(seconds)
                                                                  / statistics.median(stub_seconds), 2)
            print(f"client over gRPC to the test server, batch {batch_size:>2}: p50 "
                  f"{statistics.median(seconds) * 1000:.3f} ms = {overhead:.2f}x the raw signature call; "
                  f"bare stub with a prebuilt request {statistics.median(stub_seconds) * 1000:.3f} ms "
                  f"(client = {results[f'client_vs_bare_stub_b{batch_size}']:.2f}x the bare stub)")
    results["client_overhead"] = results["client_overhead_b1"]
    results["targets"] = {"p50_ms_b1": 2.0, "client_overhead": 1.5}
    harness.print_result(results)
    return 0


def bare_request(serialized: list[bytes]):
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = "penguins", SERVING_DEFAULT
    request.inputs[EXAMPLES_INPUT].CopyFrom(tf.make_tensor_proto(serialized, dtype=tf.string))
    return request


def pushed_model(config: PipelineConfig) -> Path:
    if not push.versions(config.serving_dir):
        print(f"no pushed model in {config.home_path}: running the pipeline once (about a minute)")
        harness.run_cli("run", home=config.home_path)
    return config.serving_dir / str(push.versions(config.serving_dir)[-1])


def penguin_rows(config: PipelineConfig) -> list[dict]:
    """Rows of the embedded penguins data, as a client would send them (label left out)."""
    schema = row_schema(config.spec)
    rows = schema.rows_from_csv(next(workspace.prepare_input(config).glob("*.csv")))
    return schema.without_label(rows)[:200]


def timed(call: Callable[[], object], runs: int) -> list[float]:
    """Seconds of each of `runs` calls, after 10 untimed ones (first calls trace and allocate)."""
    return harness.timed({"call": call}, runs, warmup=10)["call"]


if __name__ == "__main__":
    sys.exit(main())
