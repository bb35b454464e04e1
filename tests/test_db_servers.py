"""ML Metadata works against real MariaDB and PostgreSQL servers through the project's URLs."""

from __future__ import annotations

import pytest
from ml_metadata.proto import metadata_store_pb2

from pipeline.store.connection import MetadataConnectionError, open_store
from pipeline.store.url import PASSWORD_ENV_VAR
from tests.doubles.db_servers import DbServer

SERVERS = ["mariadb_server", "postgresql_server"]


@pytest.fixture(params=SERVERS)
def server(request: pytest.FixtureRequest) -> DbServer:
    return request.getfixturevalue(request.param)


def test_store_round_trips_an_artifact(server: DbServer) -> None:
    database = server.create_database()  # a fresh database: nothing left from other tests
    store = open_store(database.url(), {PASSWORD_ENV_VAR: database.password})

    artifact_type = metadata_store_pb2.ArtifactType(name="Examples")
    artifact_type.properties["split"] = metadata_store_pb2.STRING
    type_id = store.put_artifact_type(artifact_type)
    artifact = metadata_store_pb2.Artifact(type_id=type_id, uri="/data/examples/1")
    artifact.properties["split"].string_value = "train"
    [artifact_id] = store.put_artifacts([artifact])

    # A second connection sees what the first wrote: it is really in the server's database.
    reopened = open_store(database.url(), {PASSWORD_ENV_VAR: database.password})
    [stored] = reopened.get_artifacts_by_id([artifact_id])
    assert stored.type_id == type_id
    assert stored.uri == "/data/examples/1"
    assert stored.properties["split"].string_value == "train"
    assert [t.name for t in reopened.get_artifact_types()] == ["Examples"]


def test_databases_are_separate(server: DbServer) -> None:
    first, second = server.create_database(), server.create_database()
    assert first.database != second.database
    open_store(first.url(), {PASSWORD_ENV_VAR: first.password}).put_artifact_type(
        metadata_store_pb2.ArtifactType(name="OnlyInFirst")
    )
    store = open_store(second.url(), {PASSWORD_ENV_VAR: second.password})
    assert store.get_artifact_types() == []


def test_wrong_password_names_the_url_not_the_password(server: DbServer) -> None:
    wrong = "not-" + server.password
    with pytest.raises(MetadataConnectionError) as caught:
        open_store(server.url(), {PASSWORD_ENV_VAR: wrong})
    message = str(caught.value)
    assert server.url() in message
    assert wrong not in message
    assert server.password not in message
