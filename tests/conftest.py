"""Shared fixtures: real pipeline runs on penguins, as a user runs them (a process of their
own) or in the test process where the process is not what is tested."""

from __future__ import annotations

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import contextlib  # noqa: E402
import dataclasses  # noqa: E402
import fcntl  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Iterator  # noqa: E402

import psutil  # noqa: E402
import pytest  # noqa: E402

from pipeline.config import PipelineConfig  # noqa: E402

pytest_plugins = ["tests.doubles.db_fixtures", "tests.shuffle", "pytester"]

# Few epochs: the tests check wiring and contracts, not model quality.
FAST_RUN_ARGS = ("--epochs", "5", "--min-accuracy", "0.5")
# An own table of a few hundred rows bags five models by default: one, where a test asserts
# nothing about bagging (those that do say --bag-folds themselves, or leave the default).
ONE_MODEL_ARGS = ("--bag-folds", "1")


@dataclasses.dataclass
class CliResult:
    home: Path
    exit_code: int
    output: str  # stdout and stderr
    stdout: str = ""

    @property
    def config(self) -> PipelineConfig:
        return PipelineConfig(home=str(self.home))


def turbotfx(*args: str, home: Path, timeout: int = 600, env: dict[str, str] | None = None) -> CliResult:
    """Runs the `turbotfx` CLI in a fresh interpreter, as a user would."""
    completed = subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "TURBOTFX_HOME": str(home), **(env or {})},
    )
    return CliResult(home=home, exit_code=completed.returncode, output=completed.stdout + completed.stderr,
                     stdout=completed.stdout)


def cli(*args: str, home: Path, env: dict[str, str] | None = None) -> CliResult:
    """`turbotfx` in this process (pipeline.cli.main), where the CLI's own process is not what
    is tested (parse and error cases, the init and the pipeline runs a test builds on): the
    exit code and lines turbotfx() would give, without a fresh interpreter's imports (seconds
    each for TF, TFX, TFDV and kfp; a run here takes about 12 s where a process takes 21).
    Signals, kills, the first import's warnings and concurrent runs stay with turbotfx(). A
    command that leaves this process changed (its environment, signal handlers, logging, the
    Keras precision policy, the working directory, a child process) fails the test: the next
    test would inherit it."""
    from pipeline.cli import main as cli_main  # the package's main(argv)

    before = _process_state()
    saved_env = dict(os.environ)
    expected_env = {**saved_env, "TURBOTFX_HOME": str(home), **(env or {})}
    os.environ.update(expected_env)
    out, err = io.StringIO(), io.StringIO()
    try:
        # The console writes to the terminal's descriptors (a duplicate of fd 1), not sys.stdout.
        with _fd_written(1) as out_fd, _fd_written(2) as err_fd, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            try:
                code = cli_main(list(args))
            except SystemExit as exit_:  # argparse: usage errors (2) and --help (0)
                code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        changed_env = sorted(k for k in {*os.environ, *expected_env}
                             if os.environ.get(k) != expected_env.get(k) and k not in _ENV_THE_CLI_MAY_SET)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
    assert not changed_env, f"turbotfx {' '.join(args)} left the environment changed: {changed_env}"
    after = _process_state()
    assert after == before, f"turbotfx {' '.join(args)} left this process changed: {before} -> {after}"
    stdout, stderr = "".join(out_fd) + out.getvalue(), "".join(err_fd) + err.getvalue()
    return CliResult(home=home, exit_code=code, output=stdout + stderr, stdout=stdout)


@contextlib.contextmanager
def _fd_written(fd: int) -> Iterator[list[str]]:
    """What the body writes to a file descriptor, in the list yielded once the body ends."""
    written: list[str] = []
    with tempfile.TemporaryFile() as sink:
        saved = os.dup(fd)
        os.dup2(sink.fileno(), fd)
        try:
            yield written
        finally:
            os.dup2(saved, fd)
            os.close(saved)
            sink.seek(0)
            written.append(sink.read().decode(errors="replace"))


# Set once a process: by the CLI before MLMD's or TF's C++ logging loads (to keep it off the
# terminal), and by TensorFlow's first import (OpenMP, v2 behaviour, platform). Harmless later.
_ENV_THE_CLI_MAY_SET = frozenset({"GLOG_minloglevel", "TF_CPP_MIN_LOG_LEVEL", "KMP_DUPLICATE_LIB_OK",
                                  "KMP_INIT_AT_FORK", "TF2_BEHAVIOR", "TPU_ML_PLATFORM"})


def _live_children() -> list[int]:
    """This process's own children: a server a fixture started keeps its children to itself
    (a PostgreSQL backend per connection)."""
    live = []
    for child in psutil.Process().children():
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                live.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return sorted(live)


def _process_state() -> dict[str, object]:
    """What a command run in this process could leave behind for the next test."""
    import sys as sys_

    umask = os.umask(0o022)
    os.umask(umask)
    state: dict[str, object] = {
        "cwd": os.getcwd(),
        "umask": umask,
        "signals": {s.name: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE)},
        "root_logging": (logging.getLogger().level, len(logging.getLogger().handlers)),
        "streams": (sys_.stdout, sys_.stderr),
    }
    # A run starts Beam workers, tuning trials and model servers: none may outlive it.
    state["children"] = _live_children()
    # A Trainer sets a global mixed-precision policy; float32 until tf_keras is loaded.
    keras = sys_.modules.get("tf_keras")
    state["precision"] = keras.mixed_precision.global_policy().name if keras else "float32"
    return state


def init_and_run(data_root: Path, label: str, dataset_file: Path, home: Path,
                 *run_args: str) -> tuple[CliResult, Path]:
    """`turbotfx init` on a user's table, then `turbotfx run` on the file it wrote, as a user
    would; both must succeed and the model be blessed and pushed. Returns init's result and
    the pushed model's directory. One model unless run_args say --bag-folds."""
    # init in this process (tests/test_init.py runs it as a user does): one TFDV import less.
    init = cli("init", "--data-root", str(data_root), "--label", label, "--output", str(dataset_file), home=home)
    assert init.exit_code == 0, init.output
    one_model = () if "--bag-folds" in run_args else ONE_MODEL_ARGS
    run = cli("run", "--dataset", str(dataset_file), *one_model, *run_args, home=home)
    assert run.exit_code == 0, run.output
    assert "blessed: yes" in run.output, run.output
    pushed = [line.split("pushed: ", 1)[1] for line in run.output.splitlines() if line.startswith("pushed: /")]
    assert pushed, run.output
    return init, Path(pushed[0])


def loader_processes(home: Path) -> list[int]:
    """Pids of the serving check's loader processes (serving.session_check) started by a run
    in this workspace and still running."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        try:
            if ("serving.session_check" in (process.info["cmdline"] or [])
                    and process.info["status"] != psutil.STATUS_ZOMBIE
                    and process.environ().get("TURBOTFX_HOME") == str(home)):
                found.append(process.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@dataclasses.dataclass
class FirstRun(CliResult):
    state: dict[str, tuple[int, int]] = dataclasses.field(default_factory=dict)  # as the run left it


@pytest.fixture(scope="session", autouse=True)
def _beam_as_a_run_has_it() -> None:
    """Beam tuned as every run tunes it (pipeline/runners/local.prepare_direct_runner) before
    any test calls a Beam executor directly: else such a test ran tuned or not by whichever
    test ran before it in its worker (a run in this process tunes it for good)."""
    from pipeline.runners import beam_tuning

    beam_tuning.tune("in_memory")


@pytest.fixture(scope="session")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> FirstRun:
    """The whole pipeline, once, on the embedded penguins data in a fresh workspace, as a
    user runs it (a process of its own).

    Shared by many tests, so read-only: a test that runs the pipeline again or changes
    serving labels takes `first_run_copy`. Every test that uses this one fails if the
    workspace is no longer as the run left it. One run serves every xdist worker: the first
    to need it runs it, the others wait for it and read what it left.
    """
    shared = session_folder(tmp_path_factory)
    with open(shared / "first-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        recorded = shared / "first-run.json"
        if not recorded.exists():
            home = shared / "first-run-workspace"
            home.mkdir()
            result = turbotfx("run", *FAST_RUN_ARGS, home=home)
            recorded.write_text(json.dumps({**dataclasses.asdict(result), "home": str(home)}))
        found = json.loads(recorded.read_text())
    result = CliResult(**{**found, "home": Path(found["home"])})
    assert result.exit_code == 0, result.output
    return FirstRun(**dataclasses.asdict(result), state=tree_state(result.home))


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this pytest session's, the same for each of its xdist workers (each has a
    base folder of its own inside the session's)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(autouse=True)
def _first_run_stays_read_only(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "first_run" in request.fixturenames:
        try:
            first_run = request.getfixturevalue("first_run")
        except Exception:  # the run itself failed: reported once, at its setup
            return
        changed = _changes(first_run.state, tree_state(first_run.home))
        assert not changed, (f"the shared first-run workspace changed ({', '.join(changed[:5])}); "
                             "a test that writes to a workspace takes first_run_copy")


@pytest.fixture
def first_run_copy(first_run: FirstRun, tmp_path: Path) -> CliResult:
    """A private copy of the first run's workspace, pushed model, labels and store included.

    The store still names the first run's artifacts, which a rerun here only reads. The cache
    keys hold the workspace's paths (its data, its schema copy), so a rerun in the copy runs
    most components again: a test of the cache runs twice in a workspace of its own.
    """
    home = tmp_path / "workspace"
    shutil.copytree(first_run.home, home, symlinks=True)
    return CliResult(home=home, exit_code=first_run.exit_code, output=first_run.output, stdout=first_run.stdout)


def module_copy_of_first_run(first_run: FirstRun, tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """A copy of the first run's workspace for one module's commands that record in its store
    (score, drift) without running the pipeline again: one copy serves the module."""
    copy = tmp_path_factory.mktemp(name) / "workspace"
    shutil.copytree(first_run.home, copy, symlinks=True)
    return copy


def open_to_others(root: Path) -> list[str]:
    """What under root a user other than its owner may read, write or enter, with its mode;
    links aside (their own mode means nothing)."""
    return [f"{path} {oct(path.lstat().st_mode & 0o777)}" for path in root.rglob("*")
            if not path.is_symlink() and path.lstat().st_mode & 0o077]


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root: (size, modification time in ns); every folder: (-1, 0)."""
    state = {}
    for directory, folders, files in os.walk(root):
        for name in folders:
            state[str((Path(directory) / name).relative_to(root)) + "/"] = (-1, 0)
        for name in files:
            path = Path(directory) / name
            stat = path.lstat()
            state[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return state


# Every command that loads TF appends its library logs here (predict, init, schema infer):
# a log that grows is not a changed workspace.
APPEND_ONLY = ("logs/",)


def _changes(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> list[str]:
    before, after = ({p: v for p, v in state.items() if not p.startswith(APPEND_ONLY)} for state in (before, after))
    return sorted({*(f"new {p}" for p in after.keys() - before.keys()),
                   *(f"gone {p}" for p in before.keys() - after.keys()),
                   *(f"changed {p}" for p in before.keys() & after.keys() if before[p] != after[p])})
