"""A Spark standalone cluster on loopback, for the tests, the benchmarks and a first try of
`turbotfx run --beam-runner spark` on one machine: a master and a worker
(separate JVMs, the worker starting executor JVMs as on a real cluster) and a Beam Python
worker pool (EXTERNAL environment) that the executors hand Python stages to, all listening on
loopback only. The pool runs in
this project's virtualenv, where turbotfx is installed, from a folder outside the source tree,
so workers import the project as a real worker machine would: from the installed package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

from pipeline.runners.spark import jars

START_TIMEOUT_S = 120
# For a cluster that lives minutes: JIT compilation by C1 only, one GC thread. The JVMs of a short
# run spend more CPU compiling (C2) than the code it compiles saves: the penguins run on this
# cluster took 161 s of CPU with the JVMs' defaults and 107 s with these (2-core Xeon).
SHORT_LIVED_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclasses.dataclass(frozen=True)
class SparkCluster:
    master_url: str  # spark://127.0.0.1:PORT
    worker_pool: str  # 127.0.0.1:PORT, the Beam EXTERNAL environment
    log_dir: Path
    # The environment a run against this cluster adds to its own: it reaches the job server
    # the run starts (a JVM of its own); empty unless the cluster's JVMs are short-lived.
    client_env: dict[str, str] = dataclasses.field(default_factory=dict)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _spark_home(root: Path) -> Path:
    """A SPARK_HOME the worker builds executor command lines from: jars/ and a RELEASE file."""
    home = root / "spark-home"
    home.mkdir(parents=True, exist_ok=True)
    (home / "jars").symlink_to(jars.jars_dir())
    (home / "RELEASE").write_text("Spark 3.5.1 (jars resolved by pipeline/runners/spark/pom.xml)\n")
    return home


def _start(command: list[str], log: Path, env: dict[str, str], cwd: Path) -> subprocess.Popen:
    # A session of its own, so that stopping it also stops what it started (executors, SDK workers).
    return subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except OSError:
        return 0


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


def _wait(ready, what: str, processes: list[subprocess.Popen], log_dir: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if any(process.poll() is not None for process in processes):
            raise RuntimeError(f"the {what} exited during start-up; see the logs in {log_dir}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the {what} did not come up within {START_TIMEOUT_S} s; see {log_dir}")
        time.sleep(0.5)


@contextlib.contextmanager
def spark_cluster(root: Path, worker_cores: int = 2, worker_memory: str = "4g",
                  short_lived: bool = False) -> Iterator[SparkCluster]:
    """Starts the cluster under root (logs, SPARK_HOME, executors' work dirs); stops all of it.
    short_lived: its JVMs (master, worker, the executors it starts) run with
    SHORT_LIVED_JAVA_OPTIONS, as should the job server of a run against it (client_env)."""
    jars.fetch()
    root.mkdir(parents=True, exist_ok=True)
    log_dir = root / "logs"
    log_dir.mkdir(exist_ok=True)
    home = _spark_home(root)
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_SCALA_VERSION": "2.12",
           "SPARK_LOCAL_IP": "127.0.0.1"}
    # JAVA_TOOL_OPTIONS, not flags: the worker passes its environment on to the executor JVMs.
    client_env = {"JAVA_TOOL_OPTIONS": SHORT_LIVED_JAVA_OPTIONS} if short_lived else {}
    env |= client_env
    java = ["java", *jars.java_open_flags(), "-Xmx256m", "-cp", f"{jars.jars_dir()}/*"]
    master_port, master_ui, worker_ui, pool_port = (free_port() for _ in range(4))
    master_url = f"spark://127.0.0.1:{master_port}"
    processes: list[subprocess.Popen] = []
    try:
        processes.append(_start(
            [*java, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
             "--port", str(master_port), "--webui-port", str(master_ui)], log_dir / "master.log", env, root))
        processes.append(_start(
            [*java, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
             "--cores", str(worker_cores), "--memory", worker_memory, "--webui-port", str(worker_ui),
             "--work-dir", str(root / "work")], log_dir / "worker.log", env, root))
        # The pool starts each SDK worker as `python -c ...` from PATH: this interpreter's first.
        pool_env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
        pool_env.pop("PYTHONPATH", None)
        processes.append(_start(
            [sys.executable, "-m", "pipeline.runners.worker_pool", f"--service_port={pool_port}"], log_dir / "worker-pool.log", pool_env, root))
        _wait(lambda: _alive_workers(master_ui) >= 1, "Spark master and worker", processes, log_dir)
        _wait(lambda: _accepts(pool_port), "Beam worker pool", processes, log_dir)
        yield SparkCluster(master_url=master_url, worker_pool=f"127.0.0.1:{pool_port}", log_dir=log_dir,
                           client_env=client_env)
    finally:
        for process in reversed(processes):
            _stop(process)
