"""notebooks/provenance.ipynb: committed clean, and runs top to bottom on a finished workspace."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests import REPO

if TYPE_CHECKING:  # Jupyter's packages load in seconds: imported where a test uses them
    import nbformat

NOTEBOOKS = REPO / "notebooks"
NOTEBOOK = NOTEBOOKS / "provenance.ipynb"
ISLANDS = ("Biscoe", "Dream", "Torgersen")
NUMERIC_FEATURES = ("bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g")


def test_committed_notebook_is_valid_and_has_no_outputs():
    import nbformat

    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "python3"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code, "the notebook has no code cells"
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, f"cell {cell.id} has saved outputs"


@pytest.fixture(scope="module")
def executed(first_run, tmp_path_factory) -> nbformat.NotebookNode:
    """The notebook executed in memory on the first_run workspace; the file is never written."""
    import nbformat
    from ipykernel.kernelspec import write_kernel_spec
    from nbclient import NotebookClient

    before = hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest()
    jupyter = tmp_path_factory.mktemp("jupyter")
    # A `python3` kernelspec whose argv is this interpreter (the venv's), found first on
    # JUPYTER_PATH: a user-level or system `python3` kernelspec cannot take its place.
    write_kernel_spec(jupyter / "kernels" / "python3")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TURBOTFX_HOME", str(first_run.home))
        env.setenv("JUPYTER_PATH", str(jupyter))
        env.setenv("IPYTHONDIR", str(jupyter / "ipython"))  # no user profile or startup files
        env.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)  # the notebook's own setting, as for a user
        client = NotebookClient(
            nb, timeout=300, startup_timeout=120, kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )
        client.execute()  # a failing cell raises CellExecutionError with its traceback
    assert hashlib.sha256(NOTEBOOK.read_bytes()).hexdigest() == before
    return nb


def cell_by_id(nb: nbformat.NotebookNode, cell_id: str) -> nbformat.NotebookNode:
    found = [cell for cell in nb.cells if cell.get("id") == cell_id]
    assert found, f"no cell with id {cell_id!r} in {NOTEBOOK.name}"
    return found[0]


def text_of(cell: nbformat.NotebookNode) -> str:
    """stdout and text/plain outputs of a cell."""
    parts = []
    for output in cell.outputs:
        if output.output_type == "stream" and output.name == "stdout":
            parts.append(output.text)
        elif output.output_type in ("execute_result", "display_data"):
            parts.append(output.data.get("text/plain", ""))
    return "\n".join(parts)


@pytest.mark.e2e
def test_notebook_runs_without_errors_in_the_venv_kernel(executed):
    errors = [o for cell in executed.cells if cell.cell_type == "code" for o in cell.outputs
              if o.output_type == "error"]
    assert not errors, errors
    setup = text_of(cell_by_id(executed, "setup"))
    assert f"kernel python: {sys.executable}\n" in setup, setup
    assert f"kernel prefix: {sys.prefix}\n" in setup, setup


@pytest.mark.e2e
def test_notebook_shows_the_lineage_of_the_pushed_model(executed, first_run):
    text = text_of(cell_by_id(executed, "lineage"))
    assert text.startswith("model "), text
    assert "pushed: version " in text, text
    assert str(Path(first_run.home).resolve()) in text, text


@pytest.mark.e2e
def test_notebook_shows_data_statistics(executed):
    facets = cell_by_id(executed, "statistics-facets")
    assert any("facets" in o.get("data", {}).get("text/html", "") for o in facets.outputs)
    assert "train: " in text_of(facets) and "eval: " in text_of(facets)
    table = text_of(cell_by_id(executed, "statistics-table"))
    for feature in NUMERIC_FEATURES:
        assert feature in table, table
    for column in ("mean", "std", "min", "max", "missing"):
        assert column in table, table
    assert "anomalies: none" in text_of(cell_by_id(executed, "anomalies"))


@pytest.mark.e2e
def test_notebook_shows_the_evaluation_by_island(executed):
    table = text_of(cell_by_id(executed, "evaluation"))
    for island in ISLANDS:
        assert island in table, table
    assert "accuracy" in table, table
    overall = text_of(cell_by_id(executed, "evaluation-overall"))
    assert "sparse_categorical_accuracy" in overall, overall
    assert "blessed: yes" in overall, overall


@pytest.mark.e2e
def test_notebook_draws_the_lineage_graph(executed):
    cell = cell_by_id(executed, "graph")
    svgs = [o.data["image/svg+xml"] for o in cell.outputs
            if o.output_type == "display_data" and "image/svg+xml" in o.data]
    if shutil.which("dot") is None:  # no Graphviz: the DOT source and how to install it
        assert not svgs
        assert "digraph lineage {" in text_of(cell) and "install Graphviz" in text_of(cell)
        return
    assert len(svgs) == 1, text_of(cell)
    assert "<svg" in svgs[0] and "Model" in svgs[0] and "Trainer" in svgs[0]
