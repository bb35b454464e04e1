"""Metadata store URLs: parsed and checked without ml_metadata, printed without the password.

    sqlite:///abs/path/store.sqlite         (the default: the workspace's store;
                                             sqlite://rel/path.sqlite is relative)
    mysql://user@host[:port]/database       (port 3306 by default)
    postgresql://user@host[:port]/database  (port 5432 by default)

The password comes from the environment variable TURBOTFX_METADATA_PASSWORD, never from
the URL or the command line (both end up in shell history and process listings), and
no message or log line carries it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from pipeline.errors import ConfigError

PASSWORD_ENV_VAR = "TURBOTFX_METADATA_PASSWORD"
DEFAULT_PORTS = {"mysql": 3306, "postgresql": 5432}
SCHEMES = ("sqlite", "mysql", "postgresql")


@dataclasses.dataclass(frozen=True)
class MetadataUrl:
    scheme: str
    path: str = ""  # sqlite: the database file
    user: str = ""
    host: str = ""
    port: int = 0
    database: str = ""

    def __str__(self) -> str:
        """The URL as given, less any secret: safe to print and log."""
        if self.scheme == "sqlite":
            return f"sqlite://{self.path}"
        return f"{self.scheme}://{self.user}@{self.host}:{self.port}/{self.database}"


def parse_url(url: str) -> MetadataUrl:
    """Checks and splits a metadata URL; a bad one gets a ConfigError naming the fix."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "postgres":
        scheme = "postgresql"
    if scheme not in SCHEMES:
        raise ConfigError(
            f"metadata URL {_without_password(url)!r} has an unsupported scheme; use sqlite:///PATH, "
            "mysql://USER@HOST[:PORT]/DB or postgresql://USER@HOST[:PORT]/DB"
        )
    if parts.password is not None or (scheme != "sqlite" and _password_in(url)):
        raise ConfigError(
            f"metadata URL {_without_password(url)!r} carries a password; remove it from the URL and "
            f"set it in the environment variable {PASSWORD_ENV_VAR} instead"
        )
    if scheme == "sqlite":
        path = unquote(parts.netloc + parts.path)
        # sqlite:////abs/path (SQLAlchemy's form) is the same file as sqlite:///abs/path;
        # the doubled slash would reach file APIs that read '//tmp' as a host (the last good copy).
        path = "/" + path.lstrip("/") if path.startswith("//") else path
        if not path:
            raise ConfigError(f"metadata URL {url!r} names no file; use sqlite:///path/to/store.sqlite")
        return MetadataUrl(scheme=scheme, path=path)
    database = parts.path.lstrip("/")
    if not parts.hostname or not database or not parts.username:
        raise ConfigError(
            f"metadata URL {_without_password(url)!r} needs a user, a host and a database: "
            f"{scheme}://USER@HOST[:PORT]/DATABASE"
        )
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        raise ConfigError(f"metadata URL {_without_password(url)!r} has an invalid port") from None
    return MetadataUrl(scheme=scheme, user=unquote(parts.username), host=parts.hostname, port=port,
                       database=database)


# SQLAlchemy's driver for each server (the Tuner's Optuna study storage shares MLMD's URLs).
SQLALCHEMY_DRIVERS = {"mysql": "mysql+pymysql", "postgresql": "postgresql+psycopg2"}


def sqlalchemy_url(url: str) -> str:
    """A metadata-style URL as SQLAlchemy names it, still without the password (whoever
    connects adds PASSWORD_ENV_VAR's: components/tuner/worker.py)."""
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        return f"sqlite:///{parsed.path}"
    return (f"{SQLALCHEMY_DRIVERS[parsed.scheme]}://{quote(parsed.user, safe='')}@{parsed.host}:"
            f"{parsed.port}/{parsed.database}")


def sqlite_url(path: Path) -> str:
    return f"sqlite://{path.resolve()}"


def existing_store_url(metadata_url: str | None, sqlite_path: Path) -> str | None:
    """The store to query: the URL given, else the SQLite file if a run made it. A query
    must never create an empty store, so a missing file gives None."""
    if metadata_url:
        return metadata_url
    return sqlite_url(sqlite_path) if Path(sqlite_path).is_file() else None


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """(scheme://, user[:password], host and the rest) of a URL with a user. Up to the last @:
    a password may hold '/', '?' or '#', where urlsplit would end the host part early."""
    scheme, separator, rest = url.partition("://")
    if not separator or "@" not in rest:
        return None
    userinfo, _, after = rest.rpartition("@")
    return scheme + separator, userinfo, after


def _password_in(url: str) -> bool:
    found = _userinfo(url)
    return found is not None and ":" in found[1]


def _without_password(url: str) -> str:
    found = _userinfo(url)
    if found is None or ":" not in found[1]:
        return url
    start, userinfo, after = found
    return f"{start}{userinfo.split(':', 1)[0]}:***@{after}"
