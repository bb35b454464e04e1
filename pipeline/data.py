"""Datasets: where a run's input CSV comes from, the checks made before TFX sees it, and the
schema inferred from new data for a person to curate (`turbotfx schema infer`)."""

from __future__ import annotations

import csv
from pathlib import Path

from pipeline import synthetic
from pipeline.atomic import atomic_path
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from trainer_module import features
from trainer_module.features import FeatureSpec

PENGUINS_FILE = "penguins.csv"


def prepare_data(config: PipelineConfig) -> Path:
    """Returns the directory of CSV files to ingest, writing the embedded dataset if needed."""
    spec = features.for_dataset(config.dataset)
    if config.data_root:
        return check_data_root(config.data_path, spec)
    target = config.data_path
    if config.dataset == "synthetic":
        # The directory appears whole (one rename), so its presence means complete.
        if not target.is_dir():
            synthetic.generate(target, config.rows)
    elif not (target / PENGUINS_FILE).exists():
        write_penguins_csv(target / PENGUINS_FILE)
    return check_data_root(target, spec)


def write_penguins_csv(path: Path) -> int:
    """Writes the palmerpenguins dataset as CSV; missing values stay empty cells.

    Returns the number of rows written. The file appears atomically, so an interrupted
    write never leaves a truncated CSV for ExampleGen to ingest.
    """
    from palmerpenguins import load_penguins

    frame = load_penguins()[list(features.PENGUINS.csv_columns)]
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False, na_rep="")
    return len(frame)


def check_data_root(root: Path, spec: FeatureSpec = features.PENGUINS) -> Path:
    """Fails clearly unless root holds CSV files whose headers carry the label column.

    ExampleGen would otherwise fail deep inside Beam, or ingest files whose columns
    disagree with each other.
    """
    if not root.is_dir():
        raise ConfigError(f"data root {root} does not exist; pass a directory of CSV files with --data-root")
    csv_files = sorted(p for p in root.iterdir() if p.suffix == ".csv" and p.is_file())
    if not csv_files:
        raise ConfigError(
            f"data root {root} holds no .csv file; put CSV files with a header row there "
            f"(columns: {', '.join(spec.csv_columns)})"
        )
    first_header = None
    for csv_file in csv_files:
        header = read_header(csv_file)
        if spec.label_key not in header:
            raise ConfigError(
                f"{csv_file} has no label column {spec.label_key!r} (header: {', '.join(header)}); "
                f"add it, the expected columns are: {', '.join(spec.csv_columns)}"
            )
        if first_header is None:
            first_header = header
        elif header != first_header:
            raise ConfigError(
                f"{csv_file} has columns {header} but {csv_files[0]} has {first_header}; "
                "give every CSV file in the data root the same header"
            )
    return root


def read_header(csv_file: Path) -> list[str]:
    with open(csv_file, newline="") as handle:
        try:
            return next(csv.reader(handle))
        except StopIteration:
            raise ConfigError(f"{csv_file} is empty; remove it or give it a header row") from None


def data_size_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*.csv"))


def infer_schema(data_root: Path, output: Path, dataset: str) -> Path:
    """Infers a schema from every CSV under data_root and writes it as text proto."""
    import tensorflow_data_validation as tfdv

    check_data_root(data_root.resolve(), features.for_dataset(dataset))
    stats = tfdv.generate_statistics_from_csv(data_location=str(data_root.resolve() / "*.csv"))
    schema = tfdv.infer_schema(stats)
    output = output.resolve()
    with atomic_path(output) as tmp:
        tfdv.write_schema_text(schema, tmp)
    return output
