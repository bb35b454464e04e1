"""Each file is read once per command: a run reads the label column once, `init` parses the
table's rows once, and a process loads each built-in dataset file once. Spies count the calls
of the reading functions on real tables; a second read anywhere makes these fail."""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest

from pipeline import datasets, workspace
from pipeline.config import PipelineConfig
from pipeline.datasets import checks, infer, prepare, table

ROWS = 60


@pytest.fixture
def calls(monkeypatch) -> Counter:
    """Counts the calls of the functions that read the user's files (each by its name)."""
    counted: Counter = Counter()

    def spy(module: Any, name: str) -> None:
        real: Callable = getattr(module, name)

        def counting(*args: Any, **kwargs: Any) -> Any:
            counted[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)

    spy(checks, "check_table")  # every CSV row parsed
    spy(table, "read_label")  # the label column of every file
    spy(table, "load_table")  # every row of every file
    spy(datasets, "_load")  # a dataset file's TOML and schema parsed
    return counted


def _write(root, frame: pd.DataFrame) -> None:
    root.mkdir()
    half = len(frame) // 2
    frame.iloc[:half].to_csv(root / "a.csv", index=False)
    frame.iloc[half:].to_csv(root / "b.csv", index=False)


def test_a_run_reads_the_label_once(tmp_path, calls):
    # penguins is multiclass: its class count is checked against the label's values too.
    config = PipelineConfig(home=str(tmp_path))
    workspace.prepare_input(config)
    assert (calls["check_table"], calls["read_label"], calls["load_table"]) == (1, 1, 0)


def test_a_positive_class_is_checked_on_the_label_already_read(tmp_path, calls):
    frame = pd.DataFrame({"churn": ["no", "yes"] * (ROWS // 2), "x": np.linspace(0, 1, ROWS)})
    _write(tmp_path / "data", frame)
    draft = infer.draft(tmp_path / "data", "churn", tmp_path / "churn.toml")
    from pipeline.datasets import draft as draft_file

    draft_file.write(draft)
    spec = datasets.load(str(tmp_path / "churn.toml"))
    assert spec.positive == "yes"
    calls.clear()
    prepare.check_data_root(tmp_path / "data", spec)
    assert (calls["check_table"], calls["read_label"]) == (1, 1)


def test_init_reads_the_table_once(tmp_path, calls):
    frame = pd.DataFrame({"label": ["a", "b", "c"] * (ROWS // 3), "x": np.linspace(0, 1, ROWS),
                          "color": ["red", "blue"] * (ROWS // 2)})
    _write(tmp_path / "data", frame)
    draft = infer.draft(tmp_path / "data", "label", tmp_path / "out.toml")
    assert draft.task == "multiclass"
    # One check (the rows parsed), one read of the label for it, one read of every row.
    assert (calls["check_table"], calls["read_label"], calls["load_table"]) == (1, 1, 1)


def test_a_built_in_dataset_file_is_loaded_once_per_process(tmp_path, calls):
    datasets._builtin.cache_clear()
    try:
        first = datasets.load("penguins")
        PipelineConfig(home=str(tmp_path))
        PipelineConfig(home=str(tmp_path), dataset="penguins", knobs={"epochs": 3})
        assert datasets.load("penguins") is first
        assert calls["_load"] == 1
        # A user's file is read each time: it may change between two commands of one process.
        user = tmp_path / "mine.toml"
        user.write_text(first.text().replace('name = "penguins"', 'name = "mine"')
                        .replace('schema = "', f'schema = "{datasets.BUILTIN_DIR}/'))
        datasets.load(str(user))
        datasets.load(str(user))
        assert calls["_load"] == 3
    finally:
        datasets._builtin.cache_clear()  # later tests get files loaded by the real reader
