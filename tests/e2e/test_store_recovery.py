"""The README's recovery from a damaged store, followed as written: move the store aside and
run again. The new store restarts TFX's execution ids, whose folders the old runs left in the
pipeline root; and it has no record of the versions being served."""

from __future__ import annotations

import pytest

from serving import model_config, push
from tests.conftest import FAST_RUN_ARGS, cli, turbotfx

pytestmark = pytest.mark.e2e


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
