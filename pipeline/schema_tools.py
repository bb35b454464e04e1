"""`turbotfx schema infer`: propose a schema from new data for a person to curate."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pipeline import data


def infer_schema(data_root: Path, output: Path) -> Path:
    """Infers a schema from every CSV under data_root and writes it as text proto."""
    import tensorflow_data_validation as tfdv

    data.check_data_root(data_root.resolve())
    stats = tfdv.generate_statistics_from_csv(data_location=str(data_root.resolve() / "*.csv"))
    schema = tfdv.infer_schema(stats)
    output = output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=".schema-", suffix=".tmp")
    os.close(fd)
    try:
        tfdv.write_schema_text(schema, tmp)
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return output
