"""Small tables for the tests of init's column decisions and of a dataset file's feature
settings: the decisions init makes on columns given as lists, and a regression dataset file
of one feature whose setting a test writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from pipeline.datasets import infer
from pipeline.datasets import table as tables


def decisions(columns: dict[str, list]) -> dict[str, infer.Decision]:
    """Each column's role and reason, as `turbotfx init` decides them."""
    rows = pa.table(columns)
    return {column.name: infer.role_of(column) for column in infer.profile(rows, tables.statistics(rows))}


def dataset_file(folder: Path, column: str, setting: str, schema_type: str = "BYTES") -> str:
    """A dataset file (label y, a regression) whose one feature, column, is `setting` (TOML:
    a role, or an inline table), and its schema, where the column has schema_type."""
    (folder / "data").mkdir(exist_ok=True)
    (folder / "d.schema.pbtxt").write_text(
        f'feature {{ name: "y" type: FLOAT }}\nfeature {{ name: "{column}" type: {schema_type} }}\n')
    (folder / "d.toml").write_text(
        'name = "d"\ndata_root = "data"\nlabel = "y"\ntask = "regression"\nschema = "d.schema.pbtxt"\n'
        f'[features]\n"{column}" = {setting}\n[blessing]\nmetric = "rmse"\nthreshold = 1.0\n')
    return str(folder / "d.toml")
