"""A run's input: the built-ins' rows written into the workspace when no data root is
given, the files checked against the dataset file before TFX sees them, and the curated
schema copied where ImportSchemaGen's cache sees its content."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from pipeline.atomic import atomic_path
from pipeline.datasets import Dataset, checks, synthetic, table
from pipeline.errors import ConfigError
from trainer_module.features import MULTICLASS

PENGUINS_FILE = "penguins.csv"


def prepare_data(spec: Dataset, directory: Path, rows: int | None = None, generate: bool = True) -> Path:
    """Returns directory, the files to ingest, after checking them against the dataset file
    (checks.py). generate: a built-in without a data root writes its rows there first
    (rows: the synthetic dataset's size); False when the user named the directory."""
    if generate and spec.data_root is None:
        if spec.generate == "synthetic":
            # The directory appears whole (one rename), so its presence means complete.
            if not directory.is_dir():
                count = rows if rows is not None else spec.rows
                assert count is not None, "synthetic.toml sets rows"
                synthetic.generate(directory, count)
        elif not (directory / PENGUINS_FILE).exists():
            write_penguins_csv(directory / PENGUINS_FILE, spec)
    return check_data_root(directory, spec)


def check_data_root(root: Path, spec: Dataset) -> Path:
    """Fails with one line naming the cause and the fix unless root holds data the dataset
    file describes: ExampleGen would otherwise fail deep inside Beam, or train on rubbish."""
    try:
        label = checks.check_data(root, spec.format, spec.label, spec.task, [f.name for f in spec.features])
    except ConfigError as err:
        # The data and the dataset file disagree: say which file described it.
        raise ConfigError(f"{err} (dataset file: {spec.path})") from None
    if spec.task == MULTICLASS:
        # TFMA reports precision and recall for `classes` class ids: a count that disagrees
        # with the data would leave classes out or report ones that do not exist.
        count = len(label.classes)
        if count != spec.classes:
            raise ConfigError(f"{spec.path}: classes: {spec.classes}, but label {spec.label!r} has {count} "
                              f"values in {root}; set classes = {count}")
    if spec.positive is not None:
        values = {table.label_text(value) for value in label.classes}
        if spec.positive not in values:
            raise ConfigError(f"{spec.path}: positive: {spec.positive!r} is not a value of label {spec.label!r} "
                              f"in {root} ({', '.join(sorted(values))}); name one of them")
    return root


def write_penguins_csv(path: Path, spec: Dataset) -> int:
    """Writes the palmerpenguins dataset as CSV (the dataset file's columns); missing values
    stay empty cells.

    Returns the number of rows written. The file appears atomically, so an interrupted
    write never leaves a truncated CSV for ExampleGen to ingest.
    """
    from palmerpenguins import load_penguins

    frame = load_penguins()[[spec.label, *(f.name for f in spec.features)]]
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, na_rep="")
    return len(frame)


def content_addressed_copy(schema: Path, directory: Path) -> Path:
    """A copy of schema at a path derived from its content.

    ImportSchemaGen's cache key is the file path, not the content: without this, an
    edited schema would be ignored on the next run in favour of the cached artifact.
    """
    digest = hashlib.sha256(schema.read_bytes()).hexdigest()[:16]
    target = directory / digest / schema.name
    if not target.exists():
        with atomic_path(target) as tmp:
            shutil.copyfile(schema, tmp)
    return target
