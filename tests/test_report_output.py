"""Where `turbotfx report --output` may write: never over the workspace's own files (the
store and its copy, models.config, a served model, the log, the pipelines' outputs, the
data), never into a folder that is not there, over an existing file only if it is a page
turbotfx wrote or with --force. Checked before the store is opened: the workspaces here
have no store, so a command that got past the check would fail for another reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.report import markup, write
from pipeline.store import backup
from serving import model_config
from tests.conftest import cli


def workspace(home: Path) -> dict[str, Path]:
    """A workspace's own files, as a run leaves them (their contents need not be real)."""
    config = PipelineConfig(home=str(home))
    files = {
        "store": config.metadata_path,
        "store copy": backup.last_good_path(config.metadata_path),
        "models.config": config.serving_dir.parent / model_config.CONFIG_FILE,
        "served model": config.serving_dir / "1" / "saved_model.pb",
        "log": config.log_path,
        "pipeline output": config.pipeline_root / "Trainer" / "model" / "7" / "Format-Serving" / "saved_model.pb",
        "data": home / "data" / "penguins" / "penguins.csv",
    }
    for name, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f"the workspace's {name}".encode())
    return files


@pytest.mark.parametrize("name", ["store", "store copy", "models.config", "served model", "log", "pipeline output",
                                  "data"])
def test_a_file_of_the_workspaces_own_is_never_replaced_even_with_force(tmp_path, name):
    files = workspace(tmp_path / "ws")
    result = cli("report", "--output", str(files[name]), "--force", home=tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "only turbotfx writes" in result.output, result.output
    assert files[name].read_bytes() == f"the workspace's {name}".encode()


def test_a_new_file_in_a_workspace_folder_is_refused_too(tmp_path):
    files = workspace(tmp_path / "ws")
    config = PipelineConfig(home=str(tmp_path / "ws"))
    for folder in (files["store"].parent, files["models.config"].parent, config.pipeline_root):
        with pytest.raises(ConfigError, match="only turbotfx writes"):
            write.checked_output(folder / "page.html", config, force=True)
        assert not (folder / "page.html").exists()


def test_a_link_into_the_workspace_is_followed_to_where_it_would_write(tmp_path):
    files = workspace(tmp_path / "ws")
    (tmp_path / "innocent.html").symlink_to(files["store"])
    result = cli("report", "--output", str(tmp_path / "innocent.html"), "--force", home=tmp_path / "ws")
    assert result.exit_code == 2 and "metadata store folder" in result.output, result.output
    assert files["store"].read_bytes() == b"the workspace's store"


def test_missing_folders_are_not_made(tmp_path):
    workspace(tmp_path / "ws")
    target = tmp_path / "typo" / "deeper" / "page.html"
    result = cli("report", "--output", str(target), home=tmp_path / "ws")
    assert result.exit_code == 2, result.output
    assert f"{target.parent} is not a folder: create it first" in result.output
    assert not (tmp_path / "typo").exists()


def test_an_existing_file_is_replaced_only_if_turbotfx_wrote_it_or_with_force(tmp_path):
    config = PipelineConfig(home=str(tmp_path / "ws"))
    notes = tmp_path / "notes.html"
    notes.write_text("<html>my own notes</html>")
    with pytest.raises(ConfigError, match="exists and is not a report page turbotfx wrote.*--force"):
        write.checked_output(notes, config)
    assert write.checked_output(notes, config, force=True) == notes
    page = tmp_path / "page.html"
    page.write_text(markup.document("turbotfx run 1", ["<h1>turbotfx run 1</h1>"]))
    assert write.checked_output(page, config) == page
    assert write.checked_output(tmp_path / "new.html", config) == tmp_path / "new.html"
    result = cli("report", "--output", str(notes), home=tmp_path / "ws")
    assert result.exit_code == 2 and "--force" in result.output, result.output
    assert notes.read_text() == "<html>my own notes</html>"


def test_force_without_output_is_named(tmp_path):
    result = cli("report", "--force", home=tmp_path / "ws")
    assert result.exit_code == 2 and "--force lets --output replace a file" in result.output, result.output
