"""A local run whose Beam components execute on a Flink or Spark cluster: the Beam args, and
the checks that turn a cluster that is not there into one line before any work starts."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import socket
from pathlib import Path
from typing import Iterator
from urllib.parse import urlsplit

from pipeline.errors import ConfigError
from pipeline.runners import beam_args
from pipeline.runners.beam_args import BeamOptions
from pipeline.runners.spark import jars, probe

LOCAL_RUNNERS = ("direct", "spark", "flink")
CONNECT_TIMEOUT_S = 5.0
# Spark's driver (inside the job server Beam starts) binds this address, and so does its UI;
# unset, the UI listens on every interface (*:4040) and the driver on the external address.
SPARK_LOCAL_IP = "SPARK_LOCAL_IP"
LOOPBACK = "127.0.0.1"


def pipeline_args(options: BeamOptions) -> list[str]:
    """The Beam args for options, once the cluster's parts answer."""
    if options.runner not in LOCAL_RUNNERS:
        raise ConfigError(f"`turbotfx run` takes --beam-runner {', '.join(LOCAL_RUNNERS)}; Dataflow runs a "
                          "compiled pipeline: turbotfx compile --beam-runner dataflow, then turbotfx submit")
    args = beam_args.pipeline_args(options)  # raises on missing flags first
    if options.runner == "spark" and options.spark_master:
        _check_job_server_jar(Path(options.spark_job_server_jar or beam_args.default_spark_job_server_jar()))
        host, port = _host_port(urlsplit(options.spark_master).netloc, "--spark-master")
        if not options.spark_driver_host and not _is_loopback(host):
            raise ConfigError(f"the Spark master at {options.spark_master} is on another machine, whose executors "
                              "connect back to the driver here, which listens on loopback only by default: give "
                              "--spark-driver-host with this machine's address on the cluster's network")
        _check_listening(host, port, f"the Spark master at {options.spark_master}",
                         "start the cluster or fix --spark-master")
        foreign = probe.foreign_answer(host, port, CONNECT_TIMEOUT_S)
        if foreign is not None:
            raise ConfigError(f"{options.spark_master} answers, but not as a Spark master ({foreign!r}): give the "
                              "master's RPC port (7077 unless changed; the web UI's 8080 is not it)")
    if options.job_endpoint:
        host, port = _host_port(options.job_endpoint, "--job-endpoint")
        _check_listening(host, port, f"the Beam job server at {options.job_endpoint}",
                         "start it or fix --job-endpoint")
    if options.worker_pool:
        host, port = _host_port(options.worker_pool, "--worker-pool")
        _check_listening(host, port, f"the Beam worker pool at {options.worker_pool}",
                         "start it (python -m pipeline.runners.worker_pool --service_port=PORT, where "
                         "turbotfx is installed) or fix --worker-pool")
    return args


@contextlib.contextmanager
def spark_driver_address(options: BeamOptions) -> Iterator[None]:
    """While the run lasts, the address the Spark job server Beam starts from this process binds
    its driver and UI to: --spark-driver-host, else loopback."""
    if options.runner != "spark" or not options.spark_master:
        yield
        return
    saved = os.environ.get(SPARK_LOCAL_IP)
    os.environ[SPARK_LOCAL_IP] = options.spark_driver_host or LOOPBACK
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(SPARK_LOCAL_IP, None)
        else:
            os.environ[SPARK_LOCAL_IP] = saved


def describe(options: BeamOptions) -> str:
    """How Beam runs, for the run's summary."""
    where = options.spark_master if options.runner == "spark" and options.spark_master else options.job_endpoint
    workers = f", Python workers at {options.worker_pool}" if options.worker_pool else ""
    return f"{options.runner} cluster at {where}{workers}"


def _check_job_server_jar(jar: Path) -> None:
    if not jar.is_file():
        raise ConfigError(f"Beam's Spark job server jar is missing ({jar}): run `make cluster-deps` "
                          "(fetches it from Maven Central) or give --spark-job-server-jar")
    jars.check(jar)
    if shutil.which("java") is None:
        raise ConfigError("java was not found: Beam's Spark job server runs on Java 17; install it "
                          "(apt-get install openjdk-17-jre-headless) and put it on PATH")


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


def _host_port(address: str, flag: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"{flag} must name HOST:PORT, got {address!r}")
    return host, int(port)


def _check_listening(host: str, port: int, what: str, fix: str) -> None:
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S).close()  # a probe: connect, leave
    except OSError as error:
        raise ConfigError(f"cannot reach {what} ({error.strerror or error}): {fix}") from None
