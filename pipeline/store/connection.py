"""Opens the ML Metadata store a URL names (ml_metadata lives here), and holds a SQLite
store for one pipeline run at a time.

The password comes from the environment variable TURBOTFX_METADATA_PASSWORD (see
pipeline/store/url.py), and no message or log line carries it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

from ml_metadata.proto import metadata_store_pb2

from pipeline.errors import ConfigError, first_line
from pipeline.store import backup, integrity
from pipeline.store.url import PASSWORD_ENV_VAR, MetadataUrl, parse_url

if TYPE_CHECKING:
    from ml_metadata.metadata_store import metadata_store


class MetadataConnectionError(ConfigError):
    """The store at a URL could not be opened; the message names the URL and the cause."""


class NoStoreError(MetadataConnectionError):
    """A query named a SQLite store that does not exist: queries never create one."""


class DamagedStoreError(MetadataConnectionError):
    """The SQLite file cannot be read as an MLMD store; the message says how to recover."""


def connection_config(
    url: str | MetadataUrl, environ: Mapping[str, str] | None = None, create: bool = True
) -> metadata_store_pb2.ConnectionConfig:
    """The MLMD ConnectionConfig for a URL, with the password from the environment;
    create=False: a SQLite file is opened only if it exists."""
    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    environ = os.environ if environ is None else environ
    config = metadata_store_pb2.ConnectionConfig()
    if parsed.scheme == "sqlite":
        sqlite_modes = metadata_store_pb2.SqliteMetadataSourceConfig
        if create:
            Path(parsed.path).parent.mkdir(parents=True, exist_ok=True)
        config.sqlite.filename_uri = parsed.path
        config.sqlite.connection_mode = sqlite_modes.READWRITE_OPENCREATE if create else sqlite_modes.READWRITE
        return config
    password = environ.get(PASSWORD_ENV_VAR, "")
    if parsed.scheme == "mysql":
        config.mysql.host, config.mysql.port = parsed.host, parsed.port
        config.mysql.database, config.mysql.user = parsed.database, parsed.user
        if password:
            config.mysql.password = password
    else:
        config.postgresql.host, config.postgresql.port = parsed.host, str(parsed.port)
        config.postgresql.dbname, config.postgresql.user = parsed.database, parsed.user
        if password:
            config.postgresql.password = password
    return config


def open_store(url: str | MetadataUrl, environ: Mapping[str, str] | None = None,
               create: bool = True) -> metadata_store.MetadataStore:
    """A MetadataStore for the URL, or one MetadataConnectionError naming the URL and cause.
    create=False (queries): a missing SQLite file is a NoStoreError, never a new store."""
    from ml_metadata.metadata_store import metadata_store

    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    if parsed.scheme == "sqlite":
        check_sqlite_file(parsed.path, create)
    config = connection_config(parsed, environ, create)
    try:
        return metadata_store.MetadataStore(config)
    except Exception as err:  # MLMD raises its own error types per backend
        password = (environ if environ is not None else os.environ).get(PASSWORD_ENV_VAR, "")
        cause = first_line(err)
        if parsed.scheme == "sqlite":
            raise MetadataConnectionError(f"cannot open the metadata store at {parsed}: {cause}") from None
        cause = _server_cause(parsed, cause)
        if password:
            cause = cause.replace(password, "***")
        raise MetadataConnectionError(
            f"cannot open the metadata store at {parsed}: {cause}; check that the server is up and "
            f"reachable, the database exists and the user (password in {PASSWORD_ENV_VAR}) may use it"
        ) from None


def check_store(url: str | MetadataUrl) -> None:
    """Before a run does any work: a server store must answer, and a SQLite file must be an
    MLMD store or not exist yet (the run creates it). One error line otherwise."""
    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    if parsed.scheme == "sqlite":
        check_sqlite_file(parsed.path, create=True)
    else:
        open_store(parsed)


def check_sqlite_file(path: str | Path, create: bool) -> None:
    """The file is an MLMD store, or may become one (create, and no file or an empty one);
    else a one-line error naming the file and what to do. Never creates it."""
    path = Path(path)
    if path.is_dir():
        raise MetadataConnectionError(f"the metadata store {path} is a directory, not a SQLite file; "
                                      "give the file's path with --metadata-url sqlite:///PATH/store.sqlite")
    examined = integrity.examine(path)
    if examined.state == integrity.NEW and not create:
        raise NoStoreError(f"no metadata store at {path}; run the pipeline first (`turbotfx run`) "
                           "or fix --metadata-url")
    if examined.state == integrity.DAMAGED:
        raise DamagedStoreError(f"the metadata store {path} is damaged ({examined.reason}); {_recovery(path)}")


def _recovery(path: Path) -> str:
    """What to do about a damaged store: restore its last good copy if a readable one exists."""
    copy = backup.last_good_path(path)
    store, aside = shlex.quote(str(path)), shlex.quote(f"{path}.damaged")
    new_store = "or start a new store elsewhere with --metadata-url sqlite:///NEW/store.sqlite"
    if copy.is_file() and integrity.examine(copy).state == integrity.MLMD:
        made = time.strftime("%Y-%m-%d %H:%M", time.localtime(copy.stat().st_mtime))
        return (f"restore the last good copy, made at {made} after a completed run: "
                f"mv {store} {aside} && cp {shlex.quote(str(copy))} {store}; {new_store}")
    return (f"there is no last good copy ({copy}) to restore: move the file aside (mv {store} {aside}) "
            f"and the next run starts a new, empty store there, {new_store}")


def _server_cause(parsed: MetadataUrl, driver_message: str) -> str:
    """MLMD's MySQL and PostgreSQL errors often say little ("errno: , error:"): tell an
    unreachable server from one that refused the login or the database."""
    try:
        socket.create_connection((parsed.host, parsed.port), timeout=3).close()
    except OSError as err:
        return f"nothing answers at {parsed.host}:{parsed.port} ({err.strerror or err})"
    return (f"the server at {parsed.host}:{parsed.port} answered but refused the connection "
            f"({driver_message}): wrong user or password, or no database {parsed.database!r}")


class StoreBusyError(ConfigError):
    """Another run holds the SQLite store."""


class StoreLockError(ConfigError):
    """The lock file beside a SQLite store cannot be opened (a directory, no permission)."""


@contextlib.contextmanager
def exclusive_run(url: str | MetadataUrl) -> Iterator[None]:
    """Holds the SQLite store for one pipeline run; a second concurrent run fails at once.

    SQLite takes one writer at a time: two runs writing one store would fail somewhere in
    the middle with "database is locked". MySQL and PostgreSQL stores take concurrent
    runs, so they are not locked.
    """
    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    if parsed.scheme != "sqlite":
        yield
        return
    lock_path = Path(parsed.path + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        lock_file = open(lock_path, "a+")
    except IsADirectoryError:
        raise StoreLockError(f"the lock file {lock_path} of the SQLite metadata store is a directory; "
                             f"remove it (rmdir {lock_path}) and run again") from None
    except OSError as err:
        raise StoreLockError(f"cannot open the lock file {lock_path} of the SQLite metadata store "
                             f"({err.strerror or err}); check that its directory is writable") from None
    with lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock_file.seek(0)
            holder = lock_file.read().strip() or "unknown"
            raise StoreBusyError(
                f"another pipeline run (pid {holder}) is using the SQLite metadata store {parsed.path}; "
                "SQLite takes one run at a time: wait for that run to finish, or use a MySQL or "
                "PostgreSQL store (--metadata-url) for concurrent runs"
            ) from None
        lock_file.seek(0)
        lock_file.truncate()
        lock_file.write(str(os.getpid()))
        lock_file.flush()
        try:
            yield
        finally:
            lock_file.seek(0)
            lock_file.truncate()  # the lock itself goes with the file descriptor


def run_may_be_live(url: str | MetadataUrl) -> bool:
    """Whether a pipeline run could be writing the store now. For SQLite only the run holding
    the lock can (exclusive_run writes its pid there and clears it at the end), so no pid, or
    a pid no process has, means any unfinished run was killed. The lock is not touched: a
    read must never make a starting run fail as busy. For a server store, runs on other
    machines are invisible here, so the answer is yes."""
    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    if parsed.scheme != "sqlite":
        return True
    try:
        holder = Path(parsed.path + ".lock").read_text().strip()
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return False
    if not holder.isdigit():
        return False
    try:
        os.kill(int(holder), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True
