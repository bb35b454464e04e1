"""The push as one step over the serving directory and models.config, and the rules that
bring the two back into agreement with the push records after a failure between steps."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from serving import model_config, publish, push, reconcile
from serving.errors import ServingConfigError
from tests.test_serving_push import saved_model

MODEL = "penguins"


def _push(root: Path, source: Path) -> int:
    version, _, _ = publish.push_and_label(source, root / MODEL, {})
    return version


def test_a_push_labels_its_version_in_the_same_step(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    first = _push(root, source)
    version, path, labels = publish.push_and_label(source, root / MODEL, {})
    assert path == root / MODEL / str(version) and version > first
    assert labels == {"stable": first, "canary": version}
    current = model_config.status(root, MODEL)
    assert (current.stable, current.canary, current.versions) == (first, version, [first, version])


def test_a_config_write_that_fails_after_the_rename_leaves_no_version(tmp_path, monkeypatch) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    first = _push(root, source)
    config_before = (root / "models.config").read_bytes()

    def disk_full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(model_config, "write_config", disk_full)
    with pytest.raises(OSError, match="No space left"):
        publish.push_and_label(source, root / MODEL, {})
    assert push.versions(root / MODEL) == [first]
    assert (root / "models.config").read_bytes() == config_before
    assert sorted(p.name for p in (root / MODEL).iterdir()) == [str(first)]  # no staging, no leftovers


def test_a_failure_after_the_config_was_written_puts_the_old_config_back(tmp_path, monkeypatch) -> None:
    """The new config is on disk (TF Serving may already read it) when the push fails: the
    config is restored, then the version removed, so nothing names a missing version."""
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    first = _push(root, source)
    config_before = (root / "models.config").read_bytes()
    real_write = model_config.write_config
    written = []

    def write_then_fail(serving_root, config):
        real_write(serving_root, config)
        written.append((root / "models.config").read_bytes())
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(model_config, "write_config", write_then_fail)
    with pytest.raises(OSError, match="Input/output error"):
        publish.push_and_label(source, root / MODEL, {})
    assert written and written[0] != config_before  # the failure came after a real write
    assert (root / "models.config").read_bytes() == config_before
    assert push.versions(root / MODEL) == [first]


@pytest.mark.parametrize("garbage", [b"\xb0\x93\x00\xff binary", b"model_config_list { config { nme: 'x' } }"],
                         ids=["binary", "text"])
def test_a_damaged_config_is_refused_before_anything_is_copied(tmp_path, garbage) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    root.mkdir()
    (root / "models.config").write_bytes(garbage)
    for _ in range(2):  # every retry, too
        with pytest.raises(ServingConfigError, match="not a valid TF Serving model config"):
            publish.push_and_label(source, root / MODEL, {})
    assert not (root / MODEL).exists() or list((root / MODEL).iterdir()) == []
    assert (root / "models.config").read_bytes() == garbage


def test_a_version_no_record_accounts_for_is_set_aside_and_unserved(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    recorded = _push(root, source)
    orphan = _push(root, source)  # pushed, but its MLMD record never came
    assert model_config.status(root, MODEL).canary == orphan

    result = reconcile.reconcile(root, MODEL, recorded_versions={recorded}, recorded_labels=None)

    assert [version for version, _ in result.set_aside] == [orphan]
    assert (root / MODEL / push.SET_ASIDE_DIR / str(orphan) / "saved_model.pb").is_file()  # kept, out of sight
    current = model_config.status(root, MODEL)
    assert (current.versions, current.stable, current.canary, current.served) == ([recorded], recorded, recorded,
                                                                                  [recorded])
    with pytest.raises(ServingConfigError, match=f"version {orphan} of 'penguins' is not in"):
        model_config.promote(root, MODEL, orphan)
    assert "set aside version" in result.messages()[0]


def test_retention_counts_only_recorded_versions(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    recorded = [_push(root, source) for _ in range(3)]
    orphans = [_push(root, source) for _ in range(2)]
    labels = {"stable": recorded[0], "canary": recorded[2]}
    reconcile.reconcile(root, MODEL, recorded_versions=set(recorded), recorded_labels=labels)
    current = model_config.status(root, MODEL)
    assert (current.stable, current.canary) == (recorded[0], recorded[2])  # the orphan's canary label went back
    deleted = push.apply_retention(root / MODEL, keep=1, protected=model_config.protected_versions(root, MODEL))
    assert deleted == [recorded[1]]  # counted, the newest orphan would have kept the only slot
    assert push.versions(root / MODEL) == [recorded[0], recorded[2]]
    assert sorted(int(p.name) for p in (root / MODEL / push.SET_ASIDE_DIR).iterdir()) == orphans


def test_a_lost_config_is_rebuilt_with_the_recorded_labels(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    versions = [_push(root, source) for _ in range(3)]
    (root / "models.config").unlink()
    recorded = {"stable": versions[0], "canary": versions[2]}  # not what a fresh push would pick

    result = reconcile.reconcile(root, MODEL, recorded_versions=set(versions), recorded_labels=recorded)

    current = model_config.status(root, MODEL)
    assert (current.stable, current.canary, current.served) == (versions[0], versions[2], [versions[0], versions[2]])
    assert result.rebuilt_labels == recorded and result.set_aside == []
    # The next push is the canary; stable stays where the records had it.
    after = _push(root, source)
    assert (model_config.status(root, MODEL).stable, model_config.status(root, MODEL).canary) == (versions[0], after)


def test_rebuilt_labels_fall_back_when_their_versions_are_gone(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    versions = [_push(root, source) for _ in range(2)]
    (root / "models.config").unlink()
    reconcile.reconcile(root, MODEL, recorded_versions=set(versions), recorded_labels={"stable": 12, "canary": 13})
    current = model_config.status(root, MODEL)
    assert (current.stable, current.canary) == (versions[-1], versions[-1])


def test_a_push_in_flight_is_left_alone(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    recorded = _push(root, source)
    in_flight = _push(root, source)  # another run's push, its record not written yet
    result = reconcile.reconcile(root, MODEL, recorded_versions={recorded}, recorded_labels=None,
                                 in_flight_since=in_flight)
    assert result.set_aside == [] and result.in_flight == [in_flight]
    assert push.versions(root / MODEL) == [recorded, in_flight]
    assert model_config.status(root, MODEL).canary == in_flight


def test_agreement_changes_nothing(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    versions = [_push(root, source) for _ in range(2)]
    before = (root / "models.config").read_bytes()
    result = reconcile.reconcile(root, MODEL, recorded_versions=set(versions), recorded_labels=None)
    assert result.messages() == []
    assert (root / "models.config").read_bytes() == before


def test_versions_no_record_knows_at_all_are_left_in_place(tmp_path) -> None:
    """A new store, or another one than pushed them: setting everything aside would take
    down all that serves on the word of a store that never saw it."""
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    versions = [_push(root, source) for _ in range(2)]
    before = (root / "models.config").read_bytes()
    result = reconcile.reconcile(root, MODEL, recorded_versions={12345}, recorded_labels=None)
    assert result.set_aside == [] and result.unaccounted == versions
    assert push.versions(root / MODEL) == versions and (root / "models.config").read_bytes() == before
    assert "nothing set aside" in result.messages()[0]


def test_an_unlabelled_orphan_leaves_the_current_labels_alone(tmp_path) -> None:
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    first, second = _push(root, source), _push(root, source)
    orphan = first - 1  # unlabelled, older than both
    (root / MODEL / str(orphan)).mkdir()
    model_config.promote(root, MODEL, second)  # a promote the records never saw
    reconcile.reconcile(root, MODEL, recorded_versions={first, second},
                        recorded_labels={"stable": first, "canary": second})
    current = model_config.status(root, MODEL)
    assert (current.stable, current.canary) == (second, second)
    assert push.versions(root / MODEL) == [first, second]


def test_one_change_of_the_serving_root_at_a_time(tmp_path) -> None:
    """A push, a promote and a reconciliation each read, change and write models.config."""
    import subprocess
    import sys

    probe = ("import fcntl, sys; f = open(sys.argv[1], 'a')\n"
             "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
             "except BlockingIOError:\n    print('held')")
    lock = tmp_path / model_config.LOCK_FILE
    with model_config.changing(tmp_path):
        held = subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True).stdout
    free = subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True).stdout
    assert (held.strip(), free.strip()) == ("held", "free")


def test_a_serving_root_that_does_not_exist_is_not_created_by_a_reader(tmp_path) -> None:
    with model_config.changing(tmp_path / "serving"):
        result = reconcile.reconcile(tmp_path / "serving", MODEL, recorded_versions=set(), recorded_labels=None)
    assert result.messages() == [] and not (tmp_path / "serving").exists()


def test_versions_older_than_the_stores_first_record_stay_served(tmp_path) -> None:
    """The README's recovery moves a damaged store aside; the next run's new store records only
    its own push. What was served before that store existed stays, labels and all; an orphan
    of the new store's own time is still set aside."""
    source = saved_model(tmp_path / "model")
    root = tmp_path / "serving"
    old_stable = _push(root, source)
    old_canary = _push(root, source)
    model_config.set_labels(root, MODEL, {"stable": old_stable, "canary": old_canary})
    new = _push(root, source)  # the new store's first push, which left stable where it was
    orphan = _push(root, source)  # then a push whose record never came
    labels = {"stable": old_stable, "canary": new}
    model_config.set_labels(root, MODEL, {"stable": old_stable, "canary": orphan})

    result = reconcile.reconcile(root, MODEL, recorded_versions={new}, recorded_labels=labels, records_since=new)

    assert [version for version, _ in result.set_aside] == [orphan]
    assert result.unaccounted == [old_canary]  # old_stable: the new push's recorded labels name it
    current = model_config.status(root, MODEL)
    assert current.versions == [old_stable, old_canary, new]
    assert (current.stable, current.canary) == (old_stable, new)
    assert "predate this metadata store's records" in " ".join(result.messages())
