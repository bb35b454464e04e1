"""Beam's local services listen on loopback only: the multi_process DirectRunner's control,
data, state and logging servers, and the worker pool the Spark cluster hands Python stages to
(Beam 2.59 binds them all to every interface, unauthenticated)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from pipeline.runners.spark.local_cluster import free_port
from tests.listening import ListeningSockets, wait_accepting

# A real multi_processing DirectRunner job, readied as `turbotfx run` readies it; in its own
# interpreter, so no earlier test's setup decides what this one sees.
MULTI_PROCESS_JOB = textwrap.dedent("""
    import time
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions
    from pipeline.runners import local

    def slowly(x):
        import time
        time.sleep(0.005)
        return x

    args = local.prepare_direct_runner("multi_process")
    with beam.Pipeline(options=PipelineOptions(args)) as pipeline:
        _ = pipeline | beam.Create(range(600)) | beam.Map(slowly) | beam.Map(lambda x: x * 2)
    print("done")
""")


def test_the_multi_process_direct_runner_listens_on_loopback_only():
    job = subprocess.Popen([sys.executable, "-c", MULTI_PROCESS_JOB], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
    with ListeningSockets(job.pid) as sockets:
        out, _ = job.communicate(timeout=300)
    assert job.returncode == 0 and "done" in out
    # Control, data, state and logging servers, and a logging server per worker.
    assert len({port for _, _, port in sockets.seen}) >= 5, sockets.seen
    assert not sockets.not_on_loopback(), "\n" + sockets.not_on_loopback()


def test_the_worker_pool_listens_on_loopback_only():
    port = free_port()
    pool = subprocess.Popen([sys.executable, "-m", "pipeline.runners.worker_pool", f"--service_port={port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with ListeningSockets(pool.pid) as sockets:
            wait_accepting(port, "the worker pool")
        assert {entry[2] for entry in sockets.seen} == {port}, sockets.seen
        assert not sockets.not_on_loopback(), "\n" + sockets.not_on_loopback()
    finally:
        pool.terminate()
        pool.wait(timeout=30)

