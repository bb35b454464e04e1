"""`turbotfx schema infer`: propose a schema from new data for a person to curate."""

from __future__ import annotations

from pathlib import Path

from pipeline import data
from pipeline.atomic import atomic_path
from trainer_module import features


def infer_schema(data_root: Path, output: Path, dataset: str = features.PENGUINS.dataset) -> Path:
    """Infers a schema from every CSV under data_root and writes it as text proto."""
    import tensorflow_data_validation as tfdv

    data.check_data_root(data_root.resolve(), features.for_dataset(dataset))
    stats = tfdv.generate_statistics_from_csv(data_location=str(data_root.resolve() / "*.csv"))
    schema = tfdv.infer_schema(stats)
    output = output.resolve()
    with atomic_path(output) as tmp:
        tfdv.write_schema_text(schema, tmp)
    return output
