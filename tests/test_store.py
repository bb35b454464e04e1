"""The metadata store: URLs parsed, passwords from the environment only, clear failures, one run at a time on SQLite."""

from __future__ import annotations

import concurrent.futures
import os
import threading

import portpicker
import pytest

from pipeline.errors import ConfigError
from pipeline.store import connection
from pipeline.store import url as store_url


def test_sqlite_url_opens_a_real_store(tmp_path):
    url = store_url.sqlite_url(tmp_path / "md" / "store.sqlite")
    store = connection.open_store(url)
    assert store.get_artifacts() == []
    assert (tmp_path / "md" / "store.sqlite").exists()
    assert str(store_url.parse_url(url)) == url


@pytest.mark.parametrize(
    "url, expected",
    [
        ("mysql://mlmd@127.0.0.1/metadata", store_url.MetadataUrl("mysql", user="mlmd", host="127.0.0.1",
                                                                 port=3306, database="metadata")),
        ("postgresql://ml@db.local:6543/md", store_url.MetadataUrl("postgresql", user="ml", host="db.local",
                                                                  port=6543, database="md")),
        ("postgres://ml@localhost/md", store_url.MetadataUrl("postgresql", user="ml", host="localhost",
                                                            port=5432, database="md")),
        ("sqlite://relative/store.sqlite", store_url.MetadataUrl("sqlite", path="relative/store.sqlite")),
        ("sqlite:///abs/store.sqlite", store_url.MetadataUrl("sqlite", path="/abs/store.sqlite")),
        # SQLAlchemy's form of an absolute path: the same file, with one leading slash (a
        # '//abs' path reads as a host to the file APIs the last good copy goes through).
        ("sqlite:////abs/store.sqlite", store_url.MetadataUrl("sqlite", path="/abs/store.sqlite")),
    ],
)
def test_urls_parse(url, expected):
    assert store_url.parse_url(url) == expected


@pytest.mark.parametrize(
    "url, message",
    [
        ("mongodb://u@h/db", "unsupported scheme"),
        ("mysql://u:hunter2@h/db", f"set it in the environment variable {store_url.PASSWORD_ENV_VAR}"),
        # Characters that end a URL's host part for urlsplit, inside the password.
        ("mysql://u:hun#ter2@h/db", "carries a password"),
        ("postgresql://u:hun?ter2@h/db", "carries a password"),
        ("mysql://u:hu/nter2@h:3306/db", "carries a password"),
        ("mongodb://u:hu/nter2@h/db", "unsupported scheme"),
        ("mysql://h/db", "needs a user, a host and a database"),
        ("postgresql://u@h", "needs a user, a host and a database"),
        ("mysql://u@h:notaport/db", "invalid port"),
        ("sqlite://", "names no file"),
    ],
)
def test_bad_urls_name_the_fix(url, message):
    with pytest.raises(ConfigError) as err:
        store_url.parse_url(url)
    assert message in str(err.value)
    assert not any(part in str(err.value) for part in ("hunter2", "hun#ter2", "hun?ter2", "hu/nter2", "nter2"))


def test_password_comes_from_the_environment_and_stays_out_of_text():
    env = {store_url.PASSWORD_ENV_VAR: "s3cret"}
    mysql = connection.connection_config("mysql://mlmd@127.0.0.1:3307/md", env)
    assert (mysql.mysql.host, mysql.mysql.port, mysql.mysql.user, mysql.mysql.password) == (
        "127.0.0.1", 3307, "mlmd", "s3cret")
    postgres = connection.connection_config("postgresql://ml@127.0.0.1/md", env)
    assert (postgres.postgresql.port, postgres.postgresql.dbname, postgres.postgresql.password) == ("5432", "md", "s3cret")
    assert "s3cret" not in str(store_url.parse_url("postgresql://ml@127.0.0.1/md"))


def test_an_unreachable_server_is_one_clear_error_naming_the_url():
    port = portpicker.pick_unused_port()  # nothing listens there
    env = {store_url.PASSWORD_ENV_VAR: "s3cret"}
    with pytest.raises(connection.MetadataConnectionError) as err:
        connection.open_store(f"mysql://mlmd@127.0.0.1:{port}/md", env)
    message = str(err.value)
    assert f"mysql://mlmd@127.0.0.1:{port}/md" in message
    assert "check that the server is up" in message
    assert "s3cret" not in message


def test_one_run_at_a_time_on_a_sqlite_store(tmp_path) -> None:
    url = store_url.sqlite_url(tmp_path / "store.sqlite")
    with connection.exclusive_run(url):
        with pytest.raises(connection.StoreBusyError, match=rf"pid {os.getpid()}.*MySQL or PostgreSQL"):
            with connection.exclusive_run(url):
                pass
    with connection.exclusive_run(url):  # released: the next run goes ahead
        pass


@pytest.mark.parametrize("url", ["mysql://mlmd@127.0.0.1:3306/md", "postgresql://ml@127.0.0.1:5432/md"])
def test_server_stores_are_not_locked(tmp_path, monkeypatch, url) -> None:
    monkeypatch.chdir(tmp_path)  # a lock file a server URL named relative to here would show
    inside = {name: threading.Event() for name in ("first", "second")}

    def run(me: str, other: str) -> None:
        with connection.exclusive_run(url):
            inside[me].set()
            assert connection.run_may_be_live(url) is True
            # Both runs hold the store at once: neither waits for the other to end.
            assert inside[other].wait(timeout=5), f"the {other} run did not get in while the {me} held the store"

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(run, "first", "second"), pool.submit(run, "second", "first")]
        for done in concurrent.futures.as_completed(runs, timeout=15):
            done.result()  # a StoreBusyError, or the assertion above
    # Runs on other machines are invisible here: one may always be live.
    assert connection.run_may_be_live(url) is True
    assert list(tmp_path.iterdir()) == []


def test_a_lock_path_that_is_a_directory_is_one_clear_error(tmp_path) -> None:
    (tmp_path / "store.sqlite.lock").mkdir()
    with pytest.raises(connection.StoreLockError) as err:
        with connection.exclusive_run(store_url.sqlite_url(tmp_path / "store.sqlite")):
            pass
    assert str(err.value) == (f"the lock file {tmp_path}/store.sqlite.lock of the SQLite metadata store is a "
                              f"directory; remove it (rmdir {tmp_path}/store.sqlite.lock) and run again")


def test_a_store_named_with_four_slashes_gets_its_last_good_copy(tmp_path):
    """sqlite:////abs/path: the copy failed with 'invalid uri authority' when the path kept '//'."""
    from pipeline.store import backup

    url = f"sqlite:///{tmp_path}/store.sqlite"  # tmp_path is absolute: four slashes
    connection.open_store(store_url.parse_url(url))
    copy = backup.keep_last_good_copy(url)
    assert copy is not None and copy.is_file() and copy.parent == tmp_path
