"""Serving latency: in-process p50/p99 through serving_default, and the client's overhead.

Measures, on the newest pushed penguins model (running the pipeline first when the
workspace has none):
  - p50/p99 of one serving_default call with serialized tf.Examples, batch 1 and 64
    (TF's runtime in this process: no server, no network);
  - the client path (ServingClient over gRPC to the loopback test double of TF Serving,
    tests/serving_test_server.py, which runs the same signature) divided by the raw
    signature call for the same batch: what the client, the protocol and the server's
    plumbing add.
Last line: one JSON object with p50_ms_b1, p99_ms_b1, p50_ms_b64, client_overhead.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests/serving_test_server.py, the test double

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow_metadata.proto.v0 import schema_pb2  # noqa: E402

from pipeline import data  # noqa: E402
from pipeline.config import PipelineConfig  # noqa: E402
from serving import push  # noqa: E402
from serving.client import RowSchema, ServingClient  # noqa: E402
from tests.serving_test_server import FakeTfServing  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="workspace with a pushed penguins model (default: a temporary one)")
    parser.add_argument("--runs", type=int, default=300, help="timed calls per measurement (default: 300)")
    args = parser.parse_args()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="serving-bench-"))
    config = PipelineConfig(home=str(home))
    model_dir = pushed_model(config)
    rows = penguin_rows(config)
    schema = RowSchema.for_dataset("penguins")
    serialized = [schema.to_example(row) for row in rows]
    signature = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    print(f"model {model_dir}; {len(rows)} eval rows")

    results = {}
    raw_median = {}
    for batch_size in (1, 64):
        batch = tf.constant([serialized[i % len(serialized)] for i in range(batch_size)])
        seconds = timed(lambda batch=batch: signature(examples=batch), args.runs)
        results[f"p50_ms_b{batch_size}"] = round(np.percentile(seconds, 50) * 1000, 3)
        results[f"p99_ms_b{batch_size}"] = round(np.percentile(seconds, 99) * 1000, 3)
        raw_median[batch_size] = statistics.median(seconds)
        print(f"in-process serving_default, batch {batch_size:>2}: p50 {results[f'p50_ms_b{batch_size}']:.3f} ms, "
              f"p99 {results[f'p99_ms_b{batch_size}']:.3f} ms")

    with FakeTfServing("penguins", {1: str(model_dir)}) as server:
        client = ServingClient(grpc_target=server.grpc_target)
        stub = client._stub()[0]
        for batch_size in (1, 64):
            batch_rows = [rows[i % len(rows)] for i in range(batch_size)]
            seconds = timed(lambda batch_rows=batch_rows: client.predict(batch_rows), args.runs)
            overhead = statistics.median(seconds) / raw_median[batch_size]
            results[f"client_overhead_b{batch_size}"] = round(overhead, 2)
            # The same request, prebuilt and sent with the bare gRPC stub: what transport and
            # the test double cost, apart from the client's own work.
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
    print(json.dumps(results))
    return 0


def bare_request(serialized: list[bytes]):
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = "penguins", "serving_default"
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto(serialized, dtype=tf.string))
    return request


def pushed_model(config: PipelineConfig) -> Path:
    if not push.versions(config.serving_dir):
        print(f"no pushed model in {config.home_path}: running the pipeline once (about a minute)")
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", "run", "--home", str(config.home_path)],
                              capture_output=True, text=True, env={**os.environ})
        if done.returncode != 0:
            sys.exit(f"the pipeline run failed:\n{done.stdout}{done.stderr}")
    return config.serving_dir / str(push.versions(config.serving_dir)[-1])


def penguin_rows(config: PipelineConfig) -> list[dict]:
    """Rows of the embedded penguins data, as a client would send them (label left out)."""
    import csv

    data_root = data.prepare_data(config)
    schema = RowSchema.for_dataset("penguins")
    with open(next(Path(data_root).glob("*.csv")), newline="") as handle:
        rows = []
        for row in csv.DictReader(handle):
            rows.append({key: (None if value in ("", "NA") else
                               value if schema.types[key] == schema_pb2.BYTES else float(value))
                         for key, value in row.items() if key in schema.types})
    return rows[:200]


def timed(call, runs: int) -> list[float]:
    for _ in range(10):  # warm-up: first calls trace and allocate
        call()
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - started)
    return seconds


if __name__ == "__main__":
    sys.exit(main())
