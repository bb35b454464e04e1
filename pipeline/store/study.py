"""The tuning study's storage (--tune-storage), reached before a run does any work, as the
metadata store is: a server that does not answer, or an SQLite file in a folder that is not
there, fails the run in one line, not the Tuner minutes later."""

from __future__ import annotations

import os
from pathlib import Path

from pipeline.errors import ConfigError
from pipeline.store.url import PASSWORD_ENV_VAR, parse_url, sqlalchemy_url

# Seconds to wait for a study server before saying it does not answer.
CONNECT_TIMEOUT_S = 10


class StudyStorageError(ConfigError):
    """The study's storage cannot be used; the message names the URL (no password) and the fix."""


def check_storage(url: str) -> None:
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        folder = Path(parsed.path).parent
        if not folder.is_dir():
            raise StudyStorageError(f"--tune-storage {url}: the folder {folder} does not exist; create it or "
                                    "name a file in a folder that does")
        return
    import sqlalchemy

    address = sqlalchemy.engine.make_url(sqlalchemy_url(url))
    password = os.environ.get(PASSWORD_ENV_VAR)
    if password:
        address = address.set(password=password)
    engine = sqlalchemy.create_engine(address, connect_args={"connect_timeout": CONNECT_TIMEOUT_S})
    try:
        with engine.connect() as connection:
            connection.execute(sqlalchemy.text("SELECT 1"))
    except sqlalchemy.exc.SQLAlchemyError as err:
        reason = str(getattr(err, "orig", err)).splitlines()[0]
        if password:
            reason = reason.replace(password, "***")
        raise StudyStorageError(f"--tune-storage {url} cannot be reached ({reason}); start the server, or fix "
                                f"the URL or ${PASSWORD_ENV_VAR}") from None
    finally:
        engine.dispose()
