"""Opens the ML Metadata store a URL names (ml_metadata lives here), and holds a SQLite
store for one pipeline run at a time.

The password comes from the environment variable TURBOTFX_METADATA_PASSWORD (see
pipeline/store/url.py), and no message or log line carries it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Mapping

from ml_metadata.proto import metadata_store_pb2

from pipeline.errors import ConfigError, first_line
from pipeline.store.url import PASSWORD_ENV_VAR, MetadataUrl, parse_url

if TYPE_CHECKING:
    from ml_metadata.metadata_store import metadata_store


class MetadataConnectionError(ConfigError):
    """The store at a URL could not be opened; the message names the URL and the cause."""


def connection_config(
    url: str | MetadataUrl, environ: Mapping[str, str] | None = None
) -> metadata_store_pb2.ConnectionConfig:
    """The MLMD ConnectionConfig for a URL, with the password from the environment."""
    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    environ = os.environ if environ is None else environ
    config = metadata_store_pb2.ConnectionConfig()
    if parsed.scheme == "sqlite":
        Path(parsed.path).parent.mkdir(parents=True, exist_ok=True)
        config.sqlite.filename_uri = parsed.path
        config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READWRITE_OPENCREATE
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


def open_store(url: str | MetadataUrl, environ: Mapping[str, str] | None = None) -> metadata_store.MetadataStore:
    """A MetadataStore for the URL, or one MetadataConnectionError naming the URL and cause."""
    from ml_metadata.metadata_store import metadata_store

    parsed = url if isinstance(url, MetadataUrl) else parse_url(url)
    config = connection_config(parsed, environ)
    try:
        return metadata_store.MetadataStore(config)
    except Exception as err:  # MLMD raises its own error types per backend
        password = (environ if environ is not None else os.environ).get(PASSWORD_ENV_VAR, "")
        cause = first_line(err)
        if parsed.scheme != "sqlite":
            cause = _server_cause(parsed, cause)
        if password:
            cause = cause.replace(password, "***")
        raise MetadataConnectionError(
            f"cannot open the metadata store at {parsed}: {cause}; check that the server is up and "
            f"reachable, the database exists and the user (password in {PASSWORD_ENV_VAR}) may use it"
        ) from None


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
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+") as lock_file:
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
