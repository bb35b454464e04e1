"""Provenance end to end, on SQLite, MariaDB and PostgreSQL: two real pipeline runs with
different learning rates, then `turbotfx lineage | runs | diff` as a user runs them."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline.cli.run import NOT_BLESSED_EXIT
from pipeline.store.url import PASSWORD_ENV_VAR
from tests.conftest import FAST_RUN_ARGS, CliResult, cli, turbotfx

pytestmark = pytest.mark.e2e

BACKENDS = ["sqlite", "mysql", "postgresql"]
# Far too small to learn anything in 5 epochs: the second model is not blessed.
TINY_LEARNING_RATE = "0.00001"


@dataclasses.dataclass
class Workspace:
    """A workspace whose store (SQLite in it, or a database on a server) holds two runs."""

    backend: str
    home: Path
    store_args: tuple[str, ...]
    env: dict[str, str]

    def cli(self, *args: str) -> CliResult:
        return turbotfx(*args, *self.store_args, home=self.home, env=self.env)

    def run(self, *args: str) -> CliResult:
        """`turbotfx run` in this process; the queries (cli) run in processes of their own, as a user's do."""
        return cli("run", *args, *self.store_args, home=self.home, env=self.env)

    def json(self, *args: str):
        result = self.cli(*args, "--format", "json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)


@pytest.fixture(scope="module", params=BACKENDS)
def two_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    backend = request.param
    store_args: tuple[str, ...] = ()
    env: dict[str, str] = {}
    if backend != "sqlite":
        server = request.getfixturevalue("mariadb_server" if backend == "mysql" else "postgresql_server")
        database = server.create_database()
        store_args, env = ("--metadata-url", database.url()), {PASSWORD_ENV_VAR: database.password}
    workspace = Workspace(backend, tmp_path_factory.mktemp(f"lineage-{backend}"), store_args, env)
    for extra, exit_code in (((), 0), (("--learning-rate", TINY_LEARNING_RATE), NOT_BLESSED_EXIT)):
        result = workspace.run(*FAST_RUN_ARGS, *extra)
        assert result.exit_code == exit_code, result.output  # the second model is not blessed
        assert ("cache: off on a PostgreSQL store" in result.output) == (backend == "postgresql")
    return workspace


@pytest.fixture(scope="module")
def models(two_runs: Workspace) -> tuple[dict, dict]:
    """The lineage of the first (blessed) and the second (not blessed) run's models."""
    runs = two_runs.json("runs")
    assert [run["status"] for run in runs] == ["COMPLETE", "COMPLETE"]
    second, first = runs  # newest first
    return (two_runs.json("lineage", "--artifact-id", str(first["model_id"])),
            two_runs.json("lineage", "--artifact-id", str(second["model_id"])))


def test_each_model_carries_its_own_hyperparameters(models: tuple[dict, dict]) -> None:
    first, second = models
    assert first["trainer"]["hyperparameters"]["learning_rate"] == 0.01
    assert second["trainer"]["hyperparameters"]["learning_rate"] == float(TINY_LEARNING_RATE)
    for lineage in models:
        assert lineage["trainer"]["state"] == "COMPLETE"
        assert lineage["trainer"]["hyperparameters"]["epochs"] == 5
        assert lineage["trainer"]["training_report"]["train_steps"] > 0
        assert lineage["trainer"]["effective"]["replicas"] == 1
    assert first["pipeline"]["run_id"] != second["pipeline"]["run_id"]
    assert first["pipeline"]["name"] == second["pipeline"]["name"] == "turbotfx"


def test_unchanged_data_means_the_same_examples(two_runs: Workspace, models: tuple[dict, dict]) -> None:
    first, second = models
    assert first["examples"]["fingerprint"] == second["examples"]["fingerprint"]
    if two_runs.backend == "postgresql":
        # No cached reruns on PostgreSQL (pipeline/runners/local.py): ExampleGen ran again
        # and made new examples from the same files.
        assert first["examples"]["id"] != second["examples"]["id"]
        return
    assert first["examples"]["id"] == second["examples"]["id"]
    assert first["examples"]["splits"] == ["train", "eval"]
    assert first["examples"]["span"] == 0
    assert first["schema"]["id"] == second["schema"]["id"]
    assert first["statistics"] is not None and first["anomalies"]["found"] is False
    assert first["transform"]["transform_graph_uri"] == second["transform"]["transform_graph_uri"]


def test_latest_is_the_pushed_model(two_runs: Workspace, models: tuple[dict, dict]) -> None:
    first, _ = models
    latest = two_runs.json("lineage", "--latest")
    assert latest["model"] == first["model"]
    pushed = latest["pushed_model"]
    assert Path(pushed["destination"]).name == pushed["version"]
    assert (Path(pushed["destination"]) / "saved_model.pb").is_file()
    evaluation = latest["evaluation"]
    assert evaluation["blessed"] is True and evaluation["baseline_model_id"] is None
    assert evaluation["metrics"]["sparse_categorical_accuracy"] >= 0.5
    assert evaluation["metrics"]["example_count"] > 0
    assert latest["serving_check"]["passed"] is True and latest["serving_check"]["p50_ms_b1"] > 0
    by_version = two_runs.json("lineage", "--model-version", pushed["version"])
    assert by_version["model"] == first["model"]
    runs = two_runs.json("runs")
    assert runs[1]["pushed_version"] == pushed["version"]
    assert runs[1]["metric_value"] == pytest.approx(evaluation["metrics"]["sparse_categorical_accuracy"])


def test_a_model_that_was_not_blessed(models: tuple[dict, dict]) -> None:
    first, second = models
    assert second["evaluation"]["blessed"] is False
    assert second["pushed_model"] is None
    assert second["evaluation"]["baseline_model_id"] == first["model"]["id"]


def test_unknown_model_version_is_a_clear_error(two_runs: Workspace) -> None:
    result = two_runs.cli("lineage", "--model-version", "999")
    assert result.exit_code == 2
    assert "no pushed model has version 999" in result.output
    assert "Traceback" not in result.output


def test_diff_names_exactly_the_changed_hyperparameter(two_runs: Workspace, models: tuple[dict, dict]) -> None:
    first, second = models
    diff = two_runs.json("diff", str(first["model"]["id"]), str(second["model"]["id"]))
    assert diff["hyperparameters"] == {
        "learning_rate": {"a": 0.01, "b": float(TINY_LEARNING_RATE)}
    }
    assert set(diff["effective"]) == {"effective_learning_rate"}
    assert diff["code"] == {}
    if two_runs.backend == "postgresql":  # everything re-ran: new artifacts, same content
        assert set(diff["data"]) <= {"examples.id", "examples.uri"} and set(diff["schema"]) <= {"id", "uri"}
    else:
        assert diff["data"] == {} and diff["schema"] == {}
    assert diff["evaluation"]["blessed"] == {"a": True, "b": False}
    assert "sparse_categorical_accuracy" in diff["metrics"]
    text = two_runs.cli("diff", str(first["model"]["id"]), str(second["model"]["id"]))
    assert "learning_rate: 0.01 -> 1e-05" in text.stdout


def test_text_and_dot(two_runs: Workspace, models: tuple[dict, dict]) -> None:
    first, _ = models
    text = two_runs.cli("lineage", "--latest")
    assert text.exit_code == 0, text.output
    assert f"model {first['model']['id']}" in text.output
    assert f"pushed: version {first['pushed_model']['version']}" in text.output
    assert "learning_rate=0.01" in text.output
    dot = two_runs.cli("lineage", "--latest", "--format", "dot")
    assert dot.exit_code == 0, dot.output
    assert f"-> a{first['model']['id']} " in dot.output
    # The graph really renders: make test installs graphviz, so a missing `dot` is a broken setup.
    assert shutil.which("dot"), "graphviz's `dot` is not on PATH: run tests/doubles/install_test_packages.sh"
    svg = subprocess.run(["dot", "-Tsvg"], input=dot.stdout, capture_output=True, text=True, check=True)
    assert "<svg" in svg.stdout


def test_the_store_password_reaches_no_log_line(two_runs: Workspace) -> None:
    log = two_runs.home / "logs" / "turbotfx.log"
    text = log.read_text(errors="replace")
    # TFX logs the connection config at each run: the line is there, its password is not.
    assert text.count("Using connection config") >= 2
    password = two_runs.env.get(PASSWORD_ENV_VAR)
    assert (password is None) == (two_runs.backend == "sqlite")
    if password:
        assert password not in text and "password: \"***\"" in text
    assert log.stat().st_mode & 0o777 == 0o600
