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


def check_storage(url: str, study_name: str | None = None, owner: str = "") -> None:
    """The storage answers (an SQLite file's folder is there); and a study of that name, if
    it exists, holds owner's trials (search_space.study_owner), not another dataset's."""
    parsed = parse_url(url)
    if parsed.scheme == "sqlite":
        folder = Path(parsed.path).parent
        if not folder.is_dir():
            raise StudyStorageError(f"--tune-storage {url}: the folder {folder} does not exist; create it or "
                                    "name a file in a folder that does")
        if study_name and Path(parsed.path).is_file():
            _check_owner(sqlalchemy_url(url), url, study_name, owner)
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
        if study_name:
            _check_owner(address.render_as_string(hide_password=False), url, study_name, owner)
    except sqlalchemy.exc.SQLAlchemyError as err:
        reason = str(getattr(err, "orig", err)).splitlines()[0]
        if password:
            reason = reason.replace(password, "***")
        raise StudyStorageError(f"--tune-storage {url} cannot be reached ({reason}); start the server, or fix "
                                f"the URL or ${PASSWORD_ENV_VAR}") from None
    finally:
        engine.dispose()


def _check_owner(connect_url: str, url: str, study_name: str, owner: str) -> None:
    import optuna

    from trainer_module.search_space import STUDY_OWNER_ATTR

    storage = optuna.storages.RDBStorage(connect_url, skip_table_creation=True) \
        if _has_optuna_tables(connect_url) else None
    if storage is None:
        return  # a database no study was ever kept in
    try:
        study_id = storage.get_study_id_from_name(study_name)
    except KeyError:
        return  # a new study: this run claims it
    claimed = storage.get_study_user_attrs(study_id).get(STUDY_OWNER_ATTR)
    if claimed is not None and claimed != owner:
        raise StudyStorageError(f"--tune-study {study_name!r} in {url} holds the trials of {claimed}, not of "
                                f"{owner}; name another study (--tune-study)")


def _has_optuna_tables(connect_url: str) -> bool:
    import sqlalchemy

    engine = sqlalchemy.create_engine(connect_url)
    try:
        return "studies" in sqlalchemy.inspect(engine).get_table_names()
    finally:
        engine.dispose()
