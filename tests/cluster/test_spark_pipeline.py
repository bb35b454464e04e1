"""The whole penguins pipeline with its Beam components on a real Spark standalone cluster
(master, worker and executor JVMs, a Python worker pool; all on loopback), checked against
the DirectRunner run of the same data and flags (the suite's `first_run`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from pipeline.config import PipelineConfig
from pipeline.runners.spark.local_cluster import SparkCluster, free_port, spark_cluster
from pipeline.store import connection, url
from tests.conftest import FAST_RUN_ARGS, CliResult, cli, turbotfx
from tests.listening import ListeningSockets, wait_accepting
from trainer_module import features

pytestmark = [pytest.mark.e2e, pytest.mark.cluster]

# Where the worker pool's Python finds this module first: it makes the project's packages
# unimportable there, as on a worker machine where turbotfx was never installed.
WITHOUT_PROJECT = Path(__file__).with_name("without_project")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[SparkCluster]:
    root = tmp_path_factory.mktemp("spark")
    before = _descendants()
    with spark_cluster(root, short_lived=True) as running:
        yield running
    left = [p for p in _descendants() - before if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"still running after the cluster stopped: {[p.cmdline()[:3] for p in left]}"


@pytest.fixture(scope="module")
def listening_during_the_run() -> ListeningSockets:
    """Everything this test process started (the cluster's JVMs, the worker pool, the run with
    the job server Beam starts, executors, SDK workers), sampled while the run lasts."""
    return ListeningSockets(os.getpid())


@pytest.fixture(scope="module")
def spark_run(cluster: SparkCluster, listening_during_the_run, tmp_path_factory) -> CliResult:
    home = tmp_path_factory.mktemp("spark-workspace")
    with listening_during_the_run:
        result = turbotfx("run", *FAST_RUN_ARGS, "--beam-runner", "spark", "--spark-master", cluster.master_url,
                          "--worker-pool", cluster.worker_pool, home=home, env=cluster.client_env, timeout=1200)
    assert result.exit_code == 0, result.output
    return result


def test_the_beam_components_ran_on_the_cluster(spark_run, cluster):
    assert f"beam: spark cluster at {cluster.master_url}, Python workers at {cluster.worker_pool}" in spark_run.output
    # One Spark application per Beam job: ExampleGen, StatisticsGen, Transform, Evaluator.
    applications = (cluster.log_dir / "master.log").read_text().count("Registered app BeamApp")
    assert applications >= 4, applications
    assert "Starting worker with command" in (cluster.log_dir / "worker-pool.log").read_text()
    # The workers have TFX installed: no Beam job stages an sdist of it (local.skip_tfx_sdist).
    assert "--extra_package=" not in (spark_run.home / "logs" / "turbotfx.log").read_text()


# Beam's Java Fn API servers (the job server's job and artifact services, each executor's
# control, data, state, logging services): Beam 2.59's ServerFactory advertises loopback but
# binds NettyServerBuilder.forPort, every interface, and takes no setting (README: what
# listens where). Everything else must be on loopback.
BEAM_JAVA_PROCESSES = ("CoarseGrainedExecutorBackend", "beam-spark-job-server.jar")


def test_the_cluster_and_the_run_listen_on_loopback_only(spark_run, listening_during_the_run):
    sockets = listening_during_the_run
    names = {name for name, _, _ in sockets.seen}
    assert "java" in names and "python" in names, sockets.seen  # the sampling saw them
    beyond = [line for line in sockets.not_on_loopback().splitlines()
              if not (line.startswith(":::") and any(process in line for process in BEAM_JAVA_PROCESSES))]
    assert not beyond, "\n" + "\n".join(beyond)
    # The job server's Spark driver and its UI (4040 unless taken) are on loopback.
    job_server = [port for name, address, port in sockets.seen
                  if "beam-spark-job-server.jar" in sockets.command_of_port.get(port, "") and address != "::"]
    assert job_server, sockets.seen


def test_statistics_and_splits_agree_with_the_direct_runner(spark_run, first_run):
    import tensorflow_data_validation as tfdv

    for split in ("train", "eval"):
        on_spark, direct = (tfdv.load_stats_binary(_split_file(home, "ExampleStatistics", split, "FeatureStats.pb"))
                            for home in (spark_run.home, first_run.home))
        spark_set, direct_set = on_spark.datasets[0], direct.datasets[0]
        assert spark_set.num_examples == direct_set.num_examples > 0, split
        assert _feature_summary(spark_set) == pytest.approx(_feature_summary(direct_set), rel=1e-9), split


def test_no_anomalies_on_either_runner(spark_run, first_run):
    from tensorflow_metadata.proto.v0 import anomalies_pb2

    for home in (spark_run.home, first_run.home):
        for split in ("train", "eval"):
            anomalies = anomalies_pb2.Anomalies.FromString(
                Path(_split_file(home, "ExampleAnomalies", split, "SchemaDiff.pb")).read_bytes())
            assert not anomalies.anomaly_info, (home, split)


def test_transform_outputs_agree_with_the_direct_runner(spark_run, first_run):
    vocabularies = [_vocabularies(home) for home in (spark_run.home, first_run.home)]
    assert vocabularies[0] == vocabularies[1]
    # The label's vocabulary, and the one the plain categoricals (island, sex) share.
    assert {"species_vocab", features.PACKED_VOCABULARY} <= set(vocabularies[0])
    for split in ("train", "eval"):
        counts = [_record_count(Path(_uri(home, "Examples", "transformed_examples")) / f"Split-{split}")
                  for home in (spark_run.home, first_run.home)]
        assert counts[0] == counts[1] > 0, split


def test_evaluation_agrees_with_the_direct_runner(spark_run, first_run):
    accuracy = [_metric(home, "metric_sparse_categorical_accuracy") for home in (spark_run.home, first_run.home)]
    counts = [_metric(home, "metric_example_count") for home in (spark_run.home, first_run.home)]
    assert counts[0] == counts[1] > 0
    assert abs(accuracy[0] - accuracy[1]) <= 0.02, accuracy


def test_workers_that_cannot_import_the_project_fail_in_one_line(cluster, tmp_path):
    """The CSV pipeline ships only TFX's, TFDV's, TFT's and TFMA's code to the workers (the run
    above); the Parquet ExampleGen ships a function of ours, which the workers must import."""
    from palmerpenguins import load_penguins

    data_root = tmp_path / "penguins"
    data_root.mkdir()
    load_penguins().to_parquet(data_root / "part-0.parquet", index=False)
    home, dataset_file = tmp_path / "home", tmp_path / "penguins.toml"
    init = cli("init", "--data-root", str(data_root), "--label", "species", "--output", str(dataset_file),
               home=home)
    assert init.exit_code == 0, init.output
    port = free_port()
    # A second pool, where turbotfx's packages are not importable.
    env = {**os.environ, "PYTHONPATH": str(WITHOUT_PROJECT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    pool = subprocess.Popen([sys.executable, "-m", "apache_beam.runners.worker.worker_pool_main",
                             f"--service_port={port}"], cwd=tmp_path, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_accepting(port, "the worker pool", timeout_s=60)
        result = turbotfx("run", "--dataset", str(dataset_file), *FAST_RUN_ARGS, "--beam-runner", "spark",
                          "--spark-master", cluster.master_url, "--worker-pool", f"127.0.0.1:{port}",
                          home=home, env=cluster.client_env, timeout=900)
    finally:
        os.killpg(pool.pid, 15)
        pool.wait(timeout=30)
    assert result.exit_code == 1, result.output
    errors = [line for line in result.output.splitlines() if line.startswith("turbotfx: error:")]
    assert len(errors) == 1, result.output
    assert "the Beam workers cannot import 'components" in errors[0], errors[0]
    assert "install turbotfx where the workers run" in errors[0], errors[0]
    assert "Traceback" not in result.output


def _descendants() -> set[psutil.Process]:
    return set(psutil.Process().children(recursive=True))


def _store(home: Path):
    return connection.open_store(url.sqlite_url(PipelineConfig(home=str(home)).metadata_path))


def _uri(home: Path, type_name: str, output: str | None = None) -> str:
    """The newest artifact of the type (of the output, when a component has two of one type)."""
    artifacts = _store(home).get_artifacts_by_type(type_name)
    if output:
        artifacts = [a for a in artifacts if f"/{output}/" in a.uri]
    return max(artifacts, key=lambda a: a.id).uri


def _split_file(home: Path, type_name: str, split: str, name: str) -> str:
    return os.path.join(_uri(home, type_name), f"Split-{split}", name)


def _metric(home: Path, key: str) -> float:
    evaluation = max(_store(home).get_artifacts_by_type("ModelEvaluation"), key=lambda a: a.id)
    return evaluation.custom_properties[key].double_value


def _feature_summary(dataset) -> dict[str, float]:
    """Per feature: how many rows have it, and its numeric or string summary."""
    summary = {}
    for feature in dataset.features:
        name = ".".join(feature.path.step)
        if feature.HasField("num_stats"):
            stats = feature.num_stats
            common = stats.common_stats
            summary |= {f"{name}.min": stats.min, f"{name}.max": stats.max, f"{name}.mean": stats.mean,
                        f"{name}.zeros": stats.num_zeros}
        else:
            common = feature.string_stats.common_stats
            summary[f"{name}.unique"] = feature.string_stats.unique
        summary |= {f"{name}.present": common.num_non_missing, f"{name}.missing": common.num_missing}
    return summary


def _vocabularies(home: Path) -> dict[str, bytes]:
    assets = Path(_uri(home, "TransformGraph")) / "transform_fn" / "assets"
    return {path.name: path.read_bytes() for path in assets.iterdir()}


def _record_count(folder: Path) -> int:
    import tensorflow as tf

    files = [str(path) for path in folder.iterdir()]
    return sum(1 for _ in tf.data.TFRecordDataset(files, compression_type="GZIP" if any(
        f.endswith(".gz") for f in files) else None))

