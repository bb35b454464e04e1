"""Beam's Spark job server as one runnable jar, built from jars Maven Central serves.

Beam's SparkRunner starts its job server with `java -jar <--spark_job_server_jar>`, and
without that flag downloads the shaded beam-runners-spark-3-job-server at run time. Maven
Central serves no such jar for Beam 2.59, so `fetch` resolves the job server's parts with
mvn (pom.xml beside this file) into a cache folder and writes a launcher jar whose manifest
names them (Class-Path), the job server's main class and the module openings Spark needs on
Java 17: `java -jar` on it is the job server. Nothing is downloaded when a pipeline runs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from pipeline.errors import ConfigError

POM = Path(__file__).with_name("pom.xml")
CACHE_ENV_VAR = "TURBOTFX_CLUSTER_CACHE"
# The project's own cache folder (gitignored), beside pyproject.toml.
DEFAULT_CACHE = Path(__file__).resolve().parents[3] / ".cache" / "cluster" / "spark"
JOB_SERVER_MAIN_CLASS = "org.apache.beam.runners.spark.SparkJobServerDriver"
LAUNCHER_JAR_NAME = "beam-spark-job-server.jar"
# What Spark's own launcher opens on Java 17 (org.apache.spark.launcher.JavaModuleOptions).
JAVA_17_OPENS = (
    "java.base/java.lang", "java.base/java.lang.invoke", "java.base/java.lang.reflect",
    "java.base/java.io", "java.base/java.net", "java.base/java.nio", "java.base/java.util",
    "java.base/java.util.concurrent", "java.base/java.util.concurrent.atomic",
    "java.base/sun.nio.ch", "java.base/sun.nio.cs", "java.base/sun.security.action",
    "java.base/sun.util.calendar",
)


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV_VAR) or DEFAULT_CACHE)


def jars_dir() -> Path:
    return cache_dir() / "jars"


def job_server_jar() -> Path:
    return cache_dir() / LAUNCHER_JAR_NAME


def java_open_flags() -> list[str]:
    return [f"--add-opens={package}=ALL-UNNAMED" for package in JAVA_17_OPENS]


def _stamp() -> Path:
    return cache_dir() / "pom.sha256"


def _pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def is_fetched() -> bool:
    return job_server_jar().is_file() and _stamp().is_file() and _stamp().read_text() == _pom_digest()


def fetch() -> Path:
    """The launcher jar, resolving the jars first unless the cache already holds this pom's."""
    if is_fetched():
        return job_server_jar()
    if shutil.which("mvn") is None:
        raise ConfigError("mvn was not found: Beam's Spark job server jars come from Maven Central "
                          "through Maven; install it (apt-get install maven) and run `make cluster-deps`")
    cache = cache_dir()
    cache.parent.mkdir(parents=True, exist_ok=True)
    # Resolved beside the cache and renamed into place: an interrupted fetch leaves no half set.
    staging = Path(tempfile.mkdtemp(prefix=".spark-", dir=cache.parent))
    try:
        done = subprocess.run(
            ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging / 'jars'}"],
            capture_output=True, text=True)
        if done.returncode != 0:
            errors = [line for line in done.stdout.splitlines() if "ERROR" in line]
            raise ConfigError("Maven could not fetch the Spark job server jars "
                              f"({(errors or ['exit code ' + str(done.returncode)])[0].strip()}); "
                              "check that Maven Central is reachable, then run `make cluster-deps` again")
        write_launcher_jar(staging / "jars", staging / LAUNCHER_JAR_NAME)
        (staging / "pom.sha256").write_text(_pom_digest())
        if cache.exists():
            shutil.rmtree(cache)
        staging.rename(cache)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return job_server_jar()


def write_launcher_jar(jars: Path, destination: Path) -> None:
    """A jar holding only a manifest: the main class, the jars (relative) and the openings."""
    class_path = " ".join(f"{jars.name}/{jar.name}" for jar in sorted(jars.glob("*.jar")))
    manifest = "".join(_manifest_line(key, value) for key, value in (
        ("Manifest-Version", "1.0"),
        ("Main-Class", JOB_SERVER_MAIN_CLASS),
        ("Class-Path", class_path),
        ("Add-Opens", " ".join(JAVA_17_OPENS)),
    )) + "\r\n"
    with zipfile.ZipFile(destination, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", manifest)


def check(jar: Path) -> None:
    """Raises ConfigError naming what `java -jar` would fail on: a jar that is not a zip with
    a manifest naming its main class (a cut download, another file), or a jar its Class-Path
    names that is missing or cut short. Reads the manifest and each jar's zip directory end
    only: milliseconds, where Beam would fail after starting the job server."""
    fix = (f"remove {jar.parent} and run `make cluster-deps` again" if jar == job_server_jar()
           else "give --spark-job-server-jar a whole jar")
    try:
        with zipfile.ZipFile(jar) as archive:
            manifest = archive.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (zipfile.BadZipFile, KeyError, OSError, EOFError) as err:
        what = "no manifest" if isinstance(err, KeyError) else "not a whole jar"
        raise ConfigError(f"Beam's Spark job server jar {jar} is damaged ({what}); {fix}") from None
    attributes = dict(line.split(": ", 1) for line in manifest.replace("\r\n ", "").split("\r\n") if ": " in line)
    if "Main-Class" not in attributes:
        raise ConfigError(f"Beam's Spark job server jar {jar} names no Main-Class, so `java -jar` cannot run it; {fix}")
    for part in attributes.get("Class-Path", "").split():
        path = jar.parent / part
        if not zipfile.is_zipfile(path):
            what = "is missing" if not path.exists() else "is not a whole jar"
            raise ConfigError(f"{path}, which Beam's Spark job server jar {jar} runs with, {what}; {fix}")


def _manifest_line(key: str, value: str) -> str:
    """`key: value` wrapped as the jar spec says: 72 bytes a line, continuations start with a space."""
    text = f"{key}: {value}".encode()
    lines, width = [text[:72]], 71
    lines += [b" " + text[start:start + width] for start in range(72, len(text), width)]
    return "".join(line.decode() + "\r\n" for line in lines)


if __name__ == "__main__":
    import sys

    try:
        print(f"Spark job server: {fetch()}")
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
