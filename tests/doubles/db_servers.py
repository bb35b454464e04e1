"""Throwaway MariaDB and PostgreSQL servers for tests, on a free 127.0.0.1 port.

Each server gets a fresh data directory, reads no system configuration, and keeps its unix
socket next to its data. The application user (`mlmd`, random password) is not the admin, as
in a real deployment; the admin is only used over the unix socket to create databases.
The binaries come from Debian packages: run tests/doubles/install_test_packages.sh if they are missing.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import itertools
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

APP_USER = "mlmd"
DATABASE = "mlmd"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
_INSTALL_HINT = "run tests/doubles/install_test_packages.sh (as root, or with sudo) to install it"
_unique = itertools.count()


class DbServerError(RuntimeError):
    """A test database server could not be set up; the message says why (and the log tail)."""


@dataclasses.dataclass
class _Process:
    """A running server process and how to shut it down; shared by all DbServers of one server."""

    popen: subprocess.Popen
    log: Path
    stop_signal: signal.Signals
    admin_sql: Callable[[str], None]  # runs one statement as the admin, over the unix socket
    cleanup_dir: Path | None = None  # a directory of ours outside the caller's workdir

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(self.stop_signal)
            try:
                self.popen.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(STOP_TIMEOUT_S)
        if self.cleanup_dir is not None:
            shutil.rmtree(self.cleanup_dir, ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class DbServer:
    scheme: str  # "mysql" or "postgresql", as in the metadata URL
    host: str
    port: int
    user: str
    password: str = dataclasses.field(repr=False)  # for TURBOTFX_METADATA_PASSWORD; never in url()
    database: str
    _process: _Process = dataclasses.field(repr=False, compare=False)

    def url(self) -> str:
        return f"{self.scheme}://{self.user}@{self.host}:{self.port}/{self.database}"

    def create_database(self, name: str | None = None) -> DbServer:
        """A new, empty database on the same server that the same user owns."""
        name = name or f"{DATABASE}_{os.getpid()}_{next(_unique)}"
        if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
            raise ValueError(f"database name {name!r}: use lowercase letters, digits and _")
        if self.scheme == "mysql":
            self._process.admin_sql(
                f"CREATE DATABASE `{name}`; GRANT ALL PRIVILEGES ON `{name}`.* TO '{self.user}'@'127.0.0.1'; "
                f"GRANT ALL PRIVILEGES ON `{name}`.* TO '{self.user}'@'%'"
            )
        else:
            self._process.admin_sql(f'CREATE DATABASE "{name}" OWNER "{self.user}"')
        return dataclasses.replace(self, database=name)

    def stop(self) -> None:
        """Stops the server (every database on it); safe to call twice."""
        self._process.stop()


def start_mariadb(workdir: Path) -> DbServer:
    """A MariaDB server with its data, socket and log under workdir."""
    mariadbd = Path("/usr/sbin/mariadbd")
    install_db, client = shutil.which("mariadb-install-db"), shutil.which("mariadb")
    if not (mariadbd.exists() and install_db and client):
        raise DbServerError(
            f"MariaDB not found (/usr/sbin/mariadbd, mariadb-install-db, mariadb); {_INSTALL_HINT}"
        )
    workdir = workdir.resolve()
    data, sock, log = workdir / "data", workdir / "mysqld.sock", workdir / "mariadbd.log"
    # mariadbd refuses to run as root unless told to; as anyone else --user only gets a warning.
    as_user = ["--user=root"] if os.geteuid() == 0 else []
    # `normal` auth: root@localhost with no password over the socket, whoever the OS user is.
    _run([install_db, "--no-defaults", f"--datadir={data}", "--auth-root-authentication-method=normal",
          "--skip-test-db", "--skip-name-resolve", *as_user], what="mariadb-install-db")
    port = _free_port()
    popen = _spawn(
        [str(mariadbd), "--no-defaults", *as_user, f"--datadir={data}", f"--port={port}",
         "--bind-address=127.0.0.1", f"--socket={sock}", f"--pid-file={workdir / 'mariadbd.pid'}",
         f"--tmpdir={workdir}", f"--log-error={log}", "--skip-name-resolve"],
        log=log, death_signal=signal.SIGKILL)
    admin = [client, "--no-defaults", f"--socket={sock}", "--user=root", "--batch"]

    def admin_sql(sql: str) -> None:
        _run([*admin, "-e", sql], what="mariadb", log=log)

    process = _Process(popen, log, signal.SIGTERM, admin_sql)
    password = secrets.token_urlsafe(16)
    try:
        _wait_ready(popen, log, [*admin, "-e", "SELECT 1"])
        # IDENTIFIED BY gives MariaDB's default mysql_native_password, which MLMD's bundled client
        # (MariaDB Connector/C) speaks; MySQL 8's caching_sha2_password default is what trips MLMD.
        admin_sql(f"CREATE USER '{APP_USER}'@'127.0.0.1' IDENTIFIED BY '{password}'; "
                  f"CREATE USER '{APP_USER}'@'%' IDENTIFIED BY '{password}'")
        server = DbServer("mysql", "127.0.0.1", port, APP_USER, password, "", process)
        return server.create_database(DATABASE)
    except BaseException:
        process.stop()
        raise


def start_postgresql(workdir: Path) -> DbServer:
    """A PostgreSQL server with its log under workdir and its data in a temporary dir of its own."""
    bin_dir = _postgresql_bin_dir()
    workdir = workdir.resolve()
    log = workdir / "postgres.log"
    # postgres refuses to run as root: run it as the `postgres` system user, in a directory of its
    # own, since pytest's tmp dirs sit under a root-only (0700) /tmp/pytest-of-root. The data dir
    # stays out of workdir anyway: the socket path must fit in 107 characters.
    run_as = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
    root = Path(tempfile.mkdtemp(prefix="turbotfx-postgresql-"))
    try:
        if run_as:
            os.chown(root, run_as.pw_uid, run_as.pw_gid)
        return _start_postgresql(bin_dir, root, log, run_as)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _start_postgresql(bin_dir: Path, root: Path, log: Path, run_as: pwd.struct_passwd | None) -> DbServer:
    data, pwfile, admin_password = root / "data", root / "admin-password", secrets.token_urlsafe(16)
    pwfile.write_text(admin_password + "\n")
    if run_as:
        os.chown(pwfile, run_as.pw_uid, run_as.pw_gid)
    try:
        _run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", f"--pwfile={pwfile}",
              "--auth=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
             what="initdb", run_as=run_as)
    finally:
        pwfile.unlink()
    port = _free_port()
    # Durability is pointless for throwaway data: no fsync keeps the tests fast.
    popen = _spawn(
        [str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(root),
         "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
         "-c", "full_page_writes=off"],
        log=log, run_as=run_as, death_signal=signal.SIGQUIT)  # SIGQUIT: immediate shutdown
    admin = [str(bin_dir / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(root), "-p", str(port),
             "-U", "postgres", "-d", "postgres"]
    env = {**os.environ, "PGPASSWORD": admin_password}

    def admin_sql(sql: str) -> None:
        _run([*admin, "-c", sql], what="psql", log=log, env=env)

    # SIGINT: fast shutdown, which disconnects clients instead of waiting for them.
    process = _Process(popen, log, signal.SIGINT, admin_sql, cleanup_dir=root)
    password = secrets.token_urlsafe(16)
    try:
        _wait_ready(popen, log, [*admin, "-c", "SELECT 1"], env=env)
        admin_sql(f"CREATE ROLE \"{APP_USER}\" LOGIN PASSWORD '{password}'")
        server = DbServer("postgresql", "127.0.0.1", port, APP_USER, password, "", process)
        return server.create_database(DATABASE)
    except BaseException:
        process.stop()
        raise


def _postgresql_bin_dir() -> Path:
    """The newest installed PostgreSQL's binaries (Debian keeps them off PATH, one dir per version)."""
    dirs = [Path(d) for d in glob.glob("/usr/lib/postgresql/*/bin")
            if all(os.access(Path(d) / b, os.X_OK) for b in ("initdb", "postgres", "psql"))]
    if not dirs:
        raise DbServerError(f"PostgreSQL not found (/usr/lib/postgresql/*/bin/postgres); {_INSTALL_HINT}")
    return max(dirs, key=lambda d: [int(n) for n in re.findall(r"\d+", d.parent.name)] or [0])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _user_kwargs(run_as: pwd.struct_passwd | None) -> dict:
    if run_as is None:
        return {}
    return {"user": run_as.pw_uid, "group": run_as.pw_gid, "extra_groups": []}


def _run(cmd: Sequence[str], what: str, log: Path | None = None,
         run_as: pwd.struct_passwd | None = None, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env,
                            **_user_kwargs(run_as))
    if result.returncode != 0:
        tail = f"\nserver log {log}:\n{_tail(log)}" if log else ""
        output = result.stdout + result.stderr
        raise DbServerError(f"{what} failed (exit {result.returncode}):\n{output}{tail}")


def _spawn(cmd: list[str], log: Path, death_signal: signal.Signals,
           run_as: pwd.struct_passwd | None = None) -> subprocess.Popen:
    """Starts a server that dies with the test process, however that ends (even by SIGKILL)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def die_with_parent() -> None:  # runs in the child after the uid switch, which would reset it
        prctl(1, int(death_signal))  # PR_SET_PDEATHSIG

    with open(log, "ab") as out:
        # A session of its own: a Ctrl-C in the terminal reaches pytest, whose teardown stops it.
        return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=die_with_parent,
                                **_user_kwargs(run_as))


def _wait_ready(popen: subprocess.Popen, log: Path, probe: list[str],
                env: dict[str, str] | None = None) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise DbServerError(
                f"{popen.args[0]} exited with {popen.returncode} at start; log {log}:\n{_tail(log)}"
            )
        if subprocess.run(probe, capture_output=True, env=env, timeout=10).returncode == 0:
            return
        time.sleep(0.05)
    raise DbServerError(
        f"{popen.args[0]} did not accept connections in {START_TIMEOUT_S:.0f} s; log {log}:\n{_tail(log)}"
    )


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as err:
        return f"(unreadable: {err})"
