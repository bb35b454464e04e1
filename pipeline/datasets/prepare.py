"""Datasets: where a run's input CSV comes from, the checks made before TFX sees it, and the
schema inferred from new data for a person to curate (`turbotfx schema infer`)."""

from __future__ import annotations

from pathlib import Path

from pipeline.atomic import atomic_path
from pipeline.config import PipelineConfig
from pipeline.datasets import Dataset, synthetic
from pipeline.datasets import table as tables
from pipeline.errors import ConfigError
from trainer_module.features import MULTICLASS

PENGUINS_FILE = "penguins.csv"


def prepare_data(config: PipelineConfig) -> Path:
    """Returns the directory of files to ingest, generating a built-in dataset if needed,
    after checking them against the dataset file (pipeline/tables.py)."""
    spec = config.spec
    target = config.data_path
    if not config.data_root and spec.data_root is None:
        if spec.generate == "synthetic":
            # The directory appears whole (one rename), so its presence means complete.
            if not target.is_dir():
                synthetic.generate(target, config.rows)
        elif not (target / PENGUINS_FILE).exists():
            write_penguins_csv(target / PENGUINS_FILE, spec)
    return check_data_root(target, spec)


def check_data_root(root: Path, spec: Dataset) -> Path:
    """Fails with one line naming the cause and the fix unless root holds data the dataset
    file describes: ExampleGen would otherwise fail deep inside Beam, or train on rubbish."""
    try:
        tables.check_data(root, spec.format, spec.label, spec.task, [f.name for f in spec.features])
    except ConfigError as err:
        # The data and the dataset file disagree: say which file described it.
        raise ConfigError(f"{err} (dataset file: {spec.path})") from None
    if spec.task == MULTICLASS:
        # TFMA reports precision and recall for `classes` class ids: a count that disagrees
        # with the data would leave classes out or report ones that do not exist.
        count = len(tables.read_label(root, spec.format, spec.label).classes)
        if count != spec.classes:
            raise ConfigError(f"{spec.path}: classes: {spec.classes}, but label {spec.label!r} has {count} "
                              f"values in {root}; set classes = {count}")
    if spec.positive is not None:
        values = {tables.label_text(value) for value in tables.read_label(root, spec.format, spec.label).classes}
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


def data_size_bytes(root: Path, spec: Dataset) -> int:
    return tables.data_size_bytes(root, spec.format)


def infer_schema(data_root: Path, output: Path, fmt: str | None = None) -> Path:
    """Infers a schema (TFDV) from every CSV or Parquet file under data_root, read with the
    types ExampleGen will give it (pipeline/datasets/infer.py), and writes it as text proto.
    fmt None: from the files' suffix."""
    import tensorflow_data_validation as tfdv

    from pipeline.datasets import infer

    root = data_root.expanduser().resolve()
    schema = tfdv.infer_schema(infer.statistics_of(root, fmt or tables.detect_format(root)))
    output = output.resolve()
    with atomic_path(output) as tmp:
        tfdv.write_schema_text(schema, tmp)
    return output
