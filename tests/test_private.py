"""Owner-only files (pipeline.private): what a command writes is its owner's alone, the
caller's umask is back after, and a folder's default ACL (how docs/serving.md lets a TF
Serving of another user read serving/) still reaches what turbotfx writes there."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from pipeline import private
from pipeline.atomic import atomic_path
from serving import model_config


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_block_writes_owner_only_and_the_umask_is_back_after(tmp_path):
    before = current_umask()
    with private.owner_only():
        (tmp_path / "folder").mkdir()
        (tmp_path / "folder" / "rows.csv").write_text("a,b\n")
        with atomic_path(tmp_path / "page.html") as tmp:
            Path(tmp).write_text("<html>")
    assert current_umask() == before
    for path in (tmp_path / "folder", tmp_path / "folder" / "rows.csv", tmp_path / "page.html"):
        assert path.stat().st_mode & 0o077 == 0, (path, oct(path.stat().st_mode))
    with pytest.raises(RuntimeError):
        with private.owner_only():
            raise RuntimeError("a failed command")
    assert current_umask() == before


def effective(path: Path, entry: str) -> str:
    """The rights getfacl shows for entry (e.g. "user:nobody"), after the ACL's mask."""
    listing = subprocess.run(["getfacl", "--omit-header", "--absolute-names", str(path)],
                             capture_output=True, text=True, check=True).stdout
    [line] = [line for line in listing.splitlines() if line.startswith(entry + ":")]
    rights = line.split(":")[2].split()[0]
    return line.split("#effective:")[1].strip() if "#effective:" in line else rights


def test_a_default_acl_on_serving_reaches_models_config(tmp_path):
    if not shutil.which("setfacl"):
        pytest.fail("setfacl is missing: run tests/doubles/install_test_packages.sh (Debian's acl package)")
    serving_root = tmp_path / "serving"
    with private.owner_only():
        (serving_root / "penguins" / "7").mkdir(parents=True)
    # docs/serving.md's grant, for a user that exists on every Debian system.
    subprocess.run(["setfacl", "-R", "-m", "u:nobody:rX", str(serving_root)], check=True)
    subprocess.run(["setfacl", "-R", "-d", "-m", "u:nobody:rX", str(serving_root)], check=True)
    with private.owner_only():
        model_config.record_push(serving_root, "penguins", 7)
    written = model_config.config_path(serving_root)
    assert "model_config_list" in written.read_text()
    assert effective(written, "user:nobody") == "r--"
    assert effective(written, "other") == "---" and effective(written, "group") == "---"
