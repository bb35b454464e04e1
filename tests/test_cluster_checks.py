"""`turbotfx run` on a cluster that is not there: one line naming the part and the fix, exit 2,
before any component runs (no run recorded in the store)."""

from __future__ import annotations

import dataclasses
import os
import socket
import zipfile
from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.runners.spark import jars
from tests.conftest import turbotfx


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def listening_port():
    """A loopback port that accepts connections, standing in for a part that is up."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


@pytest.fixture
def job_server_jar(tmp_path: Path) -> dict[str, str]:
    """A cache holding a launcher jar that names no other jar (no Java runs it here).

    The checks also need `java` on PATH, as the job server Beam starts runs on it: a test
    that passes this fixture gets past that check only where Java 17 is installed (the
    project's tests/doubles/install_test_packages.sh installs it); a missing java is its
    own test below."""
    cache = tmp_path / "cache"
    (cache / "jars").mkdir(parents=True)
    jars.write_launcher_jar(cache / "jars", cache / jars.LAUNCHER_JAR_NAME)
    return {jars.CACHE_ENV_VAR: str(cache)}


def assert_refused(result, message: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [lines[0]] and lines[0].startswith("turbotfx: error: "), result.output
    assert message in lines[0], lines[0]
    assert not PipelineConfig(home=str(result.home)).metadata_path.exists(), "a run was recorded"


def test_an_unreachable_spark_master(tmp_path, job_server_jar, listening_port):
    master = f"spark://127.0.0.1:{closed_port()}"
    result = turbotfx("run", "--beam-runner", "spark", "--spark-master", master,
                      "--worker-pool", f"127.0.0.1:{listening_port}", home=tmp_path / "home", env=job_server_jar)
    assert_refused(result, f"cannot reach the Spark master at {master}")
    assert "start the cluster or fix --spark-master" in result.output


def test_an_unreachable_worker_pool(tmp_path, job_server_jar, listening_port):
    pool = f"127.0.0.1:{closed_port()}"
    result = turbotfx("run", "--beam-runner", "spark", "--spark-master", f"spark://127.0.0.1:{listening_port}",
                      "--worker-pool", pool, home=tmp_path / "home", env=job_server_jar)
    assert_refused(result, f"cannot reach the Beam worker pool at {pool}")


def test_a_missing_job_server_jar(tmp_path, listening_port):
    result = turbotfx("run", "--beam-runner", "spark", "--spark-master", f"spark://127.0.0.1:{listening_port}",
                      "--worker-pool", f"127.0.0.1:{listening_port}", home=tmp_path / "home",
                      env={jars.CACHE_ENV_VAR: str(tmp_path / "empty-cache")})
    assert_refused(result, "Beam's Spark job server jar is missing")
    assert "make cluster-deps" in result.output


def _launcher_with_parts(cache: Path, parts: dict[str, bytes]) -> Path:
    (cache / "jars").mkdir(parents=True)
    for name, content in parts.items():
        (cache / "jars" / name).write_bytes(content)
    jars.write_launcher_jar(cache / "jars", cache / jars.LAUNCHER_JAR_NAME)
    return cache / jars.LAUNCHER_JAR_NAME


def _whole_jar(path: Path) -> bytes:
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")  # a library's: no Main-Class
        jar.writestr("org/example/A.class", b"\xca\xfe\xba\xbe")
    return path.read_bytes()


def test_a_damaged_job_server_jar_is_named_before_anything_starts(tmp_path, listening_port, monkeypatch):
    """`java -jar` on a cut download fails inside Beam after the job server starts; the
    check names the jar and the fix instead (run in process: the message is the point)."""
    from pipeline.runners import cluster
    from pipeline.runners.beam_args import BeamOptions

    cache = tmp_path / "cache"
    monkeypatch.setenv(jars.CACHE_ENV_VAR, str(cache))
    whole = _whole_jar(tmp_path / "whole.jar")
    launcher = _launcher_with_parts(cache, {"a-1.0.jar": whole, "b-1.0.jar": whole[: len(whole) // 2]})
    options = BeamOptions(runner="spark", spark_master=f"spark://127.0.0.1:{listening_port}",
                          worker_pool=f"127.0.0.1:{listening_port}")
    with pytest.raises(ConfigError) as raised:
        cluster.pipeline_args(options)
    assert str(raised.value) == (f"{cache}/jars/b-1.0.jar, which Beam's Spark job server jar {launcher} runs with, "
                                 f"is not a whole jar; remove {cache} and run `make cluster-deps` again")
    (cache / "jars" / "b-1.0.jar").unlink()
    with pytest.raises(ConfigError, match="b-1.0.jar, which .* runs with, is missing"):
        cluster.pipeline_args(options)
    (cache / "jars" / "b-1.0.jar").write_bytes(whole)
    assert "--runner=SparkRunner" in cluster.pipeline_args(options)  # whole again: the check passes
    launcher.write_bytes(launcher.read_bytes()[:-10])  # the launcher itself cut short
    with pytest.raises(ConfigError, match=f"jar {launcher} is damaged \\(not a whole jar\\); remove {cache}"):
        cluster.pipeline_args(options)
    # A jar of the user's own that `java -jar` cannot run: no Main-Class.
    given = dataclasses.replace(options, spark_job_server_jar=str(tmp_path / "whole.jar"))
    with pytest.raises(ConfigError, match="whole.jar names no Main-Class, so `java -jar` cannot run it; give "
                                          "--spark-job-server-jar a whole jar"):
        cluster.pipeline_args(given)


def test_no_java_is_one_line(tmp_path, job_server_jar, listening_port, monkeypatch):
    from pipeline.runners import cluster
    from pipeline.runners.beam_args import BeamOptions

    monkeypatch.setenv(jars.CACHE_ENV_VAR, job_server_jar[jars.CACHE_ENV_VAR])
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    options = BeamOptions(runner="spark", spark_master=f"spark://127.0.0.1:{listening_port}",
                          worker_pool=f"127.0.0.1:{listening_port}")
    with pytest.raises(ConfigError, match="java was not found: Beam's Spark job server runs on Java 17; install it"):
        cluster.pipeline_args(options)


def test_no_worker_pool(tmp_path, job_server_jar, listening_port):
    result = turbotfx("run", "--beam-runner", "spark", "--spark-master", f"spark://127.0.0.1:{listening_port}",
                      home=tmp_path / "home", env=job_server_jar)
    assert_refused(result, "needs Python workers with turbotfx installed: give --worker-pool")


def test_the_launcher_jar_names_every_jar_and_the_main_class(tmp_path):
    import zipfile

    lib = tmp_path / "jars"
    lib.mkdir()
    names = [f"dependency-number-{i}-with-a-long-name-1.0.jar" for i in range(30)]
    for name in names:
        (lib / name).write_bytes(b"")
    launcher = tmp_path / "launcher.jar"
    jars.write_launcher_jar(lib, launcher)
    manifest = zipfile.ZipFile(launcher).read("META-INF/MANIFEST.MF").decode()
    raw_lines = manifest.split("\r\n")
    assert all(len(line.encode()) <= 72 for line in raw_lines), "a manifest line over 72 bytes"
    # Continuation lines (a leading space) unfold into their attribute, as Java reads them.
    attributes = dict(line.split(": ", 1) for line in manifest.replace("\r\n ", "").split("\r\n") if line)
    assert attributes["Main-Class"] == "org.apache.beam.runners.spark.SparkJobServerDriver"
    assert attributes["Class-Path"].split(" ") == [f"jars/{name}" for name in sorted(names)]
    assert "java.base/sun.nio.ch" in attributes["Add-Opens"].split(" ")


def test_a_master_on_another_machine_needs_the_drivers_address(tmp_path, job_server_jar, listening_port):
    """The driver listens on loopback unless told otherwise; executors elsewhere could not reach
    it. Refused before any connection (192.0.2.1 is a documentation address, never contacted)."""
    result = turbotfx("run", "--beam-runner", "spark", "--spark-master", "spark://192.0.2.1:7077",
                      "--worker-pool", f"127.0.0.1:{listening_port}", home=tmp_path / "home", env=job_server_jar)
    assert_refused(result, "the Spark master at spark://192.0.2.1:7077 is on another machine")
    assert "give --spark-driver-host" in result.output


def test_the_drivers_address_is_set_for_the_run_only(monkeypatch):
    from pipeline.runners import cluster
    from pipeline.runners.beam_args import BeamOptions

    monkeypatch.setenv(cluster.SPARK_LOCAL_IP, "10.1.2.3")
    on_spark = BeamOptions(runner="spark", spark_master="spark://127.0.0.1:7077")
    with cluster.spark_driver_address(on_spark):
        assert os.environ[cluster.SPARK_LOCAL_IP] == "127.0.0.1"
    with cluster.spark_driver_address(dataclasses.replace(on_spark, spark_driver_host="10.9.9.9")):
        assert os.environ[cluster.SPARK_LOCAL_IP] == "10.9.9.9"
    assert os.environ[cluster.SPARK_LOCAL_IP] == "10.1.2.3"


def test_a_spark_master_port_that_is_not_spark(tmp_path, job_server_jar, listening_port):
    """A web server (the master's UI port, given by mistake) answers the probe in HTTP: one
    line in seconds, not Beam's job server failing after a minute and a page of Java."""
    import http.server
    import threading
    import time

    web = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=web.serve_forever, daemon=True).start()
    master = f"spark://127.0.0.1:{web.server_address[1]}"
    started = time.monotonic()
    try:
        result = turbotfx("run", "--beam-runner", "spark", "--spark-master", master,
                          "--worker-pool", f"127.0.0.1:{listening_port}", home=tmp_path / "home", env=job_server_jar)
    finally:
        web.shutdown()
    assert_refused(result, f"{master} answers, but not as a Spark master (")
    assert "HTML" in result.output and "7077" in result.output  # what it said; the port to give
    assert time.monotonic() - started < 60
