"""A SQLite store that is damaged, missing or healthy: checked with SQLite before MLMD opens
it, one line naming the file and the fix, the last good copy kept beside it; queries never
create a store. Real SQLite files, damaged here, and real MLMD."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from pipeline.cli.main import main
from pipeline.config import PipelineConfig
from pipeline.store import backup, connection, integrity
from pipeline.store.url import sqlite_url

RUN_CONTEXT = "pipeline_run"  # the context type TFX gives each pipeline run


def make_store(path: Path, runs: int) -> None:
    """A real MLMD store holding `runs` pipeline-run contexts (as TFX records them)."""
    store = connection.open_store(sqlite_url(path))
    add_runs(store, runs)


def add_runs(store, runs: int, first: int = 0) -> None:
    run_type = store.put_context_type(mlmd_pb.ContextType(name=RUN_CONTEXT))
    store.put_contexts([mlmd_pb.Context(type_id=run_type, name=f"run-{first + n}") for n in range(runs)])


def run_count(path: Path) -> int:
    return len(connection.open_store(sqlite_url(path), create=False).get_contexts_by_type(RUN_CONTEXT))


def truncate(path: Path) -> None:  # a copy or a disk that stopped short
    path.write_bytes(path.read_bytes()[:5000])


def overwrite_middle(path: Path) -> None:  # every page but the first and the last: random bytes
    data = bytearray(path.read_bytes())
    data[4096:-4096] = random.Random(7).randbytes(len(data) - 8192)
    path.write_bytes(bytes(data))


def replace_with_text(path: Path) -> None:
    path.write_text("model: 7\nthis is not a database\n")


def replace_with_other_sqlite(path: Path) -> None:  # a SQLite file, but not MLMD's
    path.unlink()
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
        db.execute("INSERT INTO notes VALUES ('hello')")
    db.close()


DAMAGE = {
    "truncated": (truncate, "corrupt"),
    "overwritten": (overwrite_middle, "corrupt"),
    "text file": (replace_with_text, "not a SQLite database"),
    "another SQLite database": (replace_with_other_sqlite, "not an MLMD SQLite database"),
}


@pytest.fixture
def store_path(tmp_path) -> Path:
    path = tmp_path / "metadata" / "store.sqlite"
    make_store(path, runs=3)
    return path


def test_a_healthy_store_passes_the_check_and_opens(store_path):
    assert integrity.examine(store_path) == integrity.Examined(integrity.MLMD)
    connection.check_sqlite_file(store_path, create=False)
    assert run_count(store_path) == 3


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_store_is_one_line_naming_the_file_and_the_fix(store_path, damage):
    spoil, kind = DAMAGE[damage]
    spoil(store_path)
    damaged = store_path.read_bytes()
    for create in (True, False):  # a run and a query alike
        with pytest.raises(connection.DamagedStoreError) as err:
            connection.open_store(sqlite_url(store_path), create=create)
        message = str(err.value)
        assert "\n" not in message
        assert f"the metadata store {store_path} is damaged ({kind}" in message
        assert f"no last good copy ({store_path}.last-good)" in message
        assert f"mv {store_path} {store_path}.damaged" in message and "--metadata-url" in message
    assert store_path.read_bytes() == damaged, "the check never writes to the file"


def test_a_damaged_store_names_its_last_good_copy_which_restores_it(store_path):
    copy = backup.keep_last_good_copy(sqlite_url(store_path))
    overwrite_middle(store_path)
    with pytest.raises(connection.DamagedStoreError) as err:
        connection.open_store(sqlite_url(store_path))
    message = str(err.value)
    assert f"cp {copy} {store_path}" in message and "no last good copy" not in message
    # The restore the message gives.
    store_path.rename(f"{store_path}.damaged")
    store_path.write_bytes(copy.read_bytes())
    assert run_count(store_path) == 3


def test_a_damaged_last_good_copy_is_not_offered(store_path):
    copy = backup.keep_last_good_copy(sqlite_url(store_path))
    replace_with_text(copy)
    truncate(store_path)
    with pytest.raises(connection.DamagedStoreError, match="no last good copy"):
        connection.check_sqlite_file(store_path, create=True)


def test_a_run_may_create_a_new_store_and_a_query_may_not(tmp_path):
    missing, empty = tmp_path / "new" / "store.sqlite", tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    for path in (missing, empty):
        with pytest.raises(connection.NoStoreError, match=f"no metadata store at {path}; run the pipeline first"):
            connection.open_store(sqlite_url(path), create=False)
    assert not missing.parent.exists() and empty.read_bytes() == b""
    connection.check_store(sqlite_url(missing))  # what `turbotfx run` asks first
    for path in (missing, empty):
        assert connection.open_store(sqlite_url(path)).get_contexts() == []
        assert integrity.examine(path).state == integrity.MLMD


def test_a_directory_is_not_a_store(tmp_path):
    with pytest.raises(connection.MetadataConnectionError, match="is a directory, not a SQLite file"):
        connection.open_store(sqlite_url(tmp_path))


def test_the_last_good_copy_is_a_readable_store_with_the_same_runs(store_path):
    copy = backup.keep_last_good_copy(sqlite_url(store_path))
    assert copy == store_path.parent / "store.sqlite.last-good"
    assert integrity.examine(copy).state == integrity.MLMD
    assert run_count(copy) == run_count(store_path) == 3
    # The next copy replaces it whole, leaving no temporary file behind.
    add_runs(connection.open_store(sqlite_url(store_path)), 2, first=3)
    backup.keep_last_good_copy(sqlite_url(store_path))
    assert run_count(copy) == 5
    assert sorted(p.name for p in store_path.parent.iterdir()) == ["store.sqlite", "store.sqlite.last-good"]


def test_a_damaged_store_never_replaces_the_last_good_copy(store_path):
    copy = backup.keep_last_good_copy(sqlite_url(store_path))
    good = copy.read_bytes()
    overwrite_middle(store_path)
    with pytest.raises(backup.LastGoodCopyError, match=f"no last good copy of the metadata store {store_path}"):
        backup.keep_last_good_copy(sqlite_url(store_path))
    assert copy.read_bytes() == good
    assert sorted(p.name for p in store_path.parent.iterdir()) == ["store.sqlite", "store.sqlite.last-good"]


def test_server_stores_get_no_file_copy():
    assert backup.keep_last_good_copy("mysql://mlmd@127.0.0.1:3306/md") is None


# --- through the CLI -------------------------------------------------------------------

QUERIES = {
    "runs": ["runs"],
    "lineage": ["lineage", "--latest"],
    "diff": ["diff", "1", "2"],
    "serving promote": ["serving", "promote"],
}


@pytest.fixture
def quiet_mlmd(monkeypatch):
    monkeypatch.setenv("GLOG_minloglevel", "3")  # what the CLI sets, undone after the test


@pytest.mark.parametrize("query", QUERIES, ids=list(QUERIES))
def test_queries_on_a_damaged_workspace_store_print_one_line(query, tmp_path, capsys, quiet_mlmd):
    store_path = PipelineConfig(home=str(tmp_path)).metadata_path
    make_store(store_path, runs=1)
    truncate(store_path)
    assert main([*QUERIES[query], "--home", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"turbotfx: error: the metadata store {store_path} is damaged (corrupt")


@pytest.mark.parametrize("query", QUERIES, ids=list(QUERIES))
def test_queries_never_create_a_store_at_a_mistyped_url(query, tmp_path, capsys, quiet_mlmd):
    typo = tmp_path / "metdata" / "store.sqlite"
    assert main([*QUERIES[query], "--home", str(tmp_path), "--metadata-url", sqlite_url(typo)]) == 2
    assert capsys.readouterr().err == (f"turbotfx: error: no metadata store at {typo}; run the pipeline first "
                                       "(`turbotfx run`) or fix --metadata-url\n")
    assert not typo.parent.exists()


def test_serving_status_on_a_damaged_store_still_lists_the_versions(tmp_path, capsys, quiet_mlmd):
    config = PipelineConfig(home=str(tmp_path))
    make_store(config.metadata_path, runs=1)
    truncate(config.metadata_path)
    (config.serving_dir / "1700000000").mkdir(parents=True)
    assert main(["serving", "status", "--home", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("turbotfx: warning: the metadata store")
    assert "not checked against push records" in captured.err
    assert "1700000000" in captured.out
    assert (config.serving_dir / "1700000000").is_dir()  # unchecked, so never set aside


def test_serving_status_without_a_store_lists_versions_without_origins(tmp_path, capsys, quiet_mlmd):
    assert main(["serving", "status", "--home", str(tmp_path)]) == 0
    assert "stable None, canary None" in capsys.readouterr().out
    assert not PipelineConfig(home=str(tmp_path)).metadata_path.exists()
