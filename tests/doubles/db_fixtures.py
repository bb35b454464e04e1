"""Pytest plugin: one real MariaDB and one real PostgreSQL server per test session, on loopback.

Register with `pytest_plugins = ["tests.doubles.db_fixtures"]` in the top conftest. A test that needs a
database of its own calls `server.create_database()` on the fixture's value.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from tests.doubles.db_servers import DbServer, start_mariadb, start_postgresql


@pytest.fixture(scope="session")
def mariadb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DbServer]:
    server = start_mariadb(tmp_path_factory.mktemp("mariadb"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgresql_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DbServer]:
    server = start_postgresql(tmp_path_factory.mktemp("postgresql"))
    try:
        yield server
    finally:
        server.stop()
