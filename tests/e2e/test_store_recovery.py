"""The README's recovery from a damaged store, followed as written: move the store aside and
run again. The new store restarts TFX's execution ids, whose folders the old runs left in the
pipeline root; and it has no record of the versions being served."""

from __future__ import annotations

import json

import pytest

from pipeline.provenance import summary
from pipeline.store.connection import open_store
from pipeline.store.url import sqlite_url
from serving import model_config, push
from tests.conftest import FAST_RUN_ARGS, cli, turbotfx

pytestmark = pytest.mark.e2e

PENGUIN = {"island": "Biscoe", "bill_length_mm": 46.5, "bill_depth_mm": 14.8, "flipper_length_mm": 217,
           "body_mass_g": 5200, "sex": "female"}


def test_a_store_moved_aside_neither_breaks_the_next_run_nor_unserves_production(first_run_copy):
    home, config = first_run_copy.home, first_run_copy.config
    serving_root = config.serving_dir.parent
    served = model_config.status(serving_root, "penguins")
    assert served.stable is not None
    store = config.metadata_path
    store.rename(store.with_name(store.name + ".damaged"))  # the README's first command

    rerun = cli("run", *FAST_RUN_ARGS, home=home)
    assert rerun.exit_code == 0, rerun.output
    assert "set aside" in rerun.output and "artifact folders" in rerun.output, rerun.output
    assert "set aside version" not in rerun.output, rerun.output
    after = model_config.status(serving_root, "penguins")
    # The old version is still on disk and served; the new run pushed beside it.
    assert served.stable in after.versions and served.stable in after.served
    assert len(push.versions(config.serving_dir)) == 2
    # A serving command on the new store takes nothing down either.
    status = turbotfx("serving", "status", home=home)
    assert status.exit_code == 0, status.output
    assert "set aside version" not in status.output, status.output
    assert model_config.status(serving_root, "penguins").versions == after.versions
    again = cli("run", *FAST_RUN_ARGS, home=home)  # and the new store's cache works
    assert again.exit_code == 0 and "set aside" not in again.output and "predate" not in again.output, again.output


def test_a_damaged_sibling_store_is_named_where_a_command_skips_it(first_run_copy):
    """Each --pipeline-name keeps its own store; commands that read every store skip one that
    cannot be read, and say so, rather than answer as if it held nothing."""
    home, config = first_run_copy.home, first_run_copy.config
    sibling = config.metadata_path.with_name("nightly.sqlite")
    sibling.write_bytes(b"not a database, a cut copy " * 200)
    warning = f"turbotfx: warning: skipped a store: the metadata store {sibling} is damaged (not a SQLite database"
    listed = cli("runs", "--format", "json", home=home)
    assert listed.exit_code == 0 and warning in listed.output, listed.output
    # The default store's one run, read from the store itself.
    latest_run = summary.latest_run(open_store(sqlite_url(config.metadata_path)), config.pipeline_name)
    assert [run["run_id"] for run in json.loads(listed.stdout)] == [latest_run.run_id]
    latest = cli("lineage", "--latest", home=home)
    assert latest.exit_code == 0 and warning in latest.output, latest.output
    answered = cli("predict", "--format", "json", "--json", json.dumps(PENGUIN), home=home)
    assert answered.exit_code == 0 and warning in answered.output, answered.output
    assert json.loads(answered.stdout)["predictions"][0]["label"] in ("Adelie", "Chinstrap", "Gentoo")
