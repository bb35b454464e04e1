"""`workspace.run` as a library call, without the CLI: its lines go to the caller's report,
it prints nothing itself, and its outcome says how the run ended. The pipeline itself is a
stand-in here (cheap); the e2e test at the end runs the real one."""

from __future__ import annotations

import errno
import sys
import types
from pathlib import Path

import pytest

from pipeline import workspace
from pipeline.config import PipelineConfig
from pipeline.errors import Interrupted
from pipeline.provenance import run_state
from tests.conftest import FAST_RUN_ARGS


def _stand_in_runner(monkeypatch: pytest.MonkeyPatch, run) -> None:
    """pipeline.runners.local with its run replaced: no TFX is imported or run."""
    import pipeline.runners

    local = types.ModuleType("pipeline.runners.local")
    local.cache_enabled = lambda config: True
    local.run = run
    monkeypatch.setitem(sys.modules, "pipeline.runners.local", local)
    monkeypatch.setattr(pipeline.runners, "local", local, raising=False)


def _state_of(config: PipelineConfig, run_id: str) -> str | None:
    from pipeline.store import connection

    store = connection.open_store(config.metadata_store_url, create=False)
    return run_state.recorded_state(store.get_context_by_type_and_name("pipeline_run", run_id))


def test_a_run_reports_its_lines_to_the_caller_and_prints_nothing(tmp_path, monkeypatch, capfd):
    _stand_in_runner(monkeypatch, lambda config, data_root, run_id, beam: "stand-in")
    config = PipelineConfig(home=str(tmp_path / "ws"))
    lines: list[str] = []

    outcome = workspace.run(config, report=lines.append)

    assert capfd.readouterr() == ("", "")
    assert lines[0] == f"turbotfx: pipeline 'turbotfx' on {config.data_path}"
    assert lines[1] == f"  workspace {config.home_path}  (logs: {config.log_path})"
    assert "  beam: stand-in" in lines and lines[-1].startswith("wall time ")
    assert outcome.kind == workspace.COMPLETED and outcome.error is None and not outcome.pushed
    assert outcome.summary is not None and outcome.summary.run_id == outcome.run_id
    assert outcome.summary.format() in lines
    assert _state_of(config, outcome.run_id) == run_state.FINISHED
    assert Path(str(config.metadata_path) + ".last-good").is_file()  # a completed run's copy


def test_without_the_summary_text_the_outcome_still_carries_it(tmp_path, monkeypatch):
    _stand_in_runner(monkeypatch, lambda config, data_root, run_id, beam: "stand-in")
    lines: list[str] = []

    outcome = workspace.run(PipelineConfig(home=str(tmp_path)), report=lines.append, text_summary=False)

    assert outcome.summary is not None and outcome.summary.format() not in lines


def test_a_failed_component_is_the_outcome_not_an_exception(tmp_path, monkeypatch, capfd):
    def fail(config, data_root, run_id, beam):
        raise RuntimeError("Trainer said no") from OSError(errno.ENOSPC, "No space left on device")

    _stand_in_runner(monkeypatch, fail)
    config = PipelineConfig(home=str(tmp_path))
    lines: list[str] = []

    outcome = workspace.run(config, report=lines.append)

    assert capfd.readouterr() == ("", "")
    assert outcome.kind == workspace.FAILED
    assert outcome.error.startswith("a component failed: no space left on the device")
    assert lines[-3:] == ["", f"turbotfx: error: {outcome.error}", f"  details: {config.log_path}"]
    assert not Path(str(config.metadata_path) + ".last-good").exists()  # only a completed run is copied


def test_an_interrupted_run_is_marked_aborted(tmp_path, monkeypatch):
    def interrupt(config, data_root, run_id, beam):
        raise KeyboardInterrupt

    _stand_in_runner(monkeypatch, interrupt)
    config = PipelineConfig(home=str(tmp_path))

    with pytest.raises(Interrupted, match=r"is marked ABORTED") as raised:
        workspace.run(config)

    run_id = str(raised.value).split("run ", 1)[1].split(" is marked", 1)[0]
    assert _state_of(config, run_id) == run_state.ABORTED


def test_the_cause_names_what_to_do():
    missing = RuntimeError("ModuleNotFoundError: No module named 'trainer_module.train'")
    assert "cannot import 'trainer_module.train'" in workspace.cause(missing)
    assert workspace.cause(ValueError("  bad value \n")) == "bad value"
    assert workspace.cause(ValueError()) == "ValueError"


@pytest.mark.e2e
def test_a_real_run_returns_its_summary(tmp_path, capsys):
    epochs, threshold = int(FAST_RUN_ARGS[1]), float(FAST_RUN_ARGS[3])
    config = PipelineConfig(home=str(tmp_path), knobs={"epochs": epochs}, blessing_threshold=threshold)
    lines: list[str] = []

    outcome = workspace.run(config, report=lines.append)

    assert outcome.kind == workspace.COMPLETED, lines
    assert outcome.pushed and outcome.summary.status == "COMPLETE"
    assert outcome.summary.format() in lines
    printed = capsys.readouterr().out
    assert lines and not [line for line in lines if line and line in printed]  # reported, never printed
