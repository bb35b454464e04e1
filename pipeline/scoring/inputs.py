"""What a scoring job reads: its files, their columns, the id columns it passes through, and
the rows the dataset's curated schema allows (serving/rows.py)."""

from __future__ import annotations

import glob
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from pipeline.datasets import table
from pipeline.errors import ConfigError

if TYPE_CHECKING:
    from pipeline.datasets import Dataset
    from pipeline.provenance.scorings import ScoredInput
    from serving.rows import RowSchema

FORMATS = ("csv", "parquet")


def row_schema(spec: Dataset) -> RowSchema:
    """The rows of a dataset's model: its curated schema, label and model features."""
    from serving.rows import RowSchema

    return RowSchema.from_file(spec.schema, spec.label, [f.name for f in spec.model_features],
                               dates=[f.name for f in spec.features if f.role == "date"],
                               missing_values={f.name: f.missing_values for f in spec.features if f.missing_values},
                               number_formats={f.name: f.number_format for f in spec.features if f.number_format})


def input_files(pattern: str) -> tuple[list[Path], str]:
    """The files a --data FILE or GLOB names, and their one format (from the suffix)."""
    named = Path(pattern).expanduser()
    if named.is_dir():
        raise ConfigError(f"--data {pattern} is a folder; name the files in it, e.g. --data '{named}/*.csv'")
    files = sorted(Path(p) for p in glob.glob(str(named)) if Path(p).is_file())
    if not files:
        raise ConfigError(f"--data {pattern}: no file matches; name a CSV or Parquet file, or a glob of them")
    kinds = {_format_of(f) for f in files}
    if len(kinds) > 1:
        raise ConfigError(f"--data {pattern} names both CSV and Parquet files; score one format at a time")
    return files, kinds.pop()


def _format_of(path: Path) -> str:
    for fmt, suffix in table.SUFFIXES.items():
        if path.suffix == suffix:
            return fmt
    raise ConfigError(f"{path}: not a .csv or .parquet file; score CSV or Parquet files")


def checked_columns(files: Sequence[Path], fmt: str, spec: Dataset, ids: Sequence[str]) -> tuple[str, ...]:
    """The id columns to pass through (those given; else the columns the dataset file
    ignores that every file has). Fails in one line on a file without a feature the model
    needs or without a given id column."""
    needed = [f.name for f in spec.model_features]
    present_everywhere = [f.name for f in spec.features if f.role == "ignore"]
    for path in files:
        columns = table.columns_of(path, fmt)
        missing = [name for name in needed if name not in columns]
        if missing:
            raise ConfigError(f"{path} has no column {', '.join(repr(m) for m in missing)}, which the model needs "
                              f"(it reads {', '.join(needed)}); add the column, or score another file")
        absent = [name for name in ids if name not in columns]
        if absent:
            raise ConfigError(f"{path} has no id column {', '.join(repr(a) for a in absent)}; name columns it has "
                              f"with --id ({', '.join(columns)})")
        present_everywhere = [c for c in present_everywhere if c in columns]
    return tuple(ids) if ids else tuple(present_everywhere)


def fingerprint(path: Path, fmt: str) -> ScoredInput:
    """A file as the metadata store keeps it (absolute path, SHA-256, size), read once before
    any work: a CSV must be UTF-8 text without NUL bytes (what the job's reader takes), or
    one line names the line it fails on and the fix."""
    import codecs

    from pipeline.provenance.scorings import ScoredInput

    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")() if fmt == "csv" else None
    lines = 1
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
            if decoder is not None:
                _check_text(path, decoder, block, lines)
                lines += block.count(b"\n")
    if decoder is not None:
        _check_text(path, decoder, b"", lines, final=True)
    return ScoredInput(path=path.resolve(), sha256=digest.hexdigest(), size_bytes=path.stat().st_size)


def _check_text(path: Path, decoder, block: bytes, lines: int, final: bool = False) -> None:
    nul = block.find(b"\0")
    if nul >= 0:
        line = lines + block[:nul].count(b"\n")
        raise ConfigError(f"{path} line {line} holds a NUL byte, which no CSV text has; remove it "
                          "(tr -d '\\000'), or export the table again")
    try:
        decoder.decode(block, final=final)
    except UnicodeDecodeError as err:
        line = lines + block[:max(err.start, 0)].count(b"\n")
        raise ConfigError(f"{path} is not UTF-8 (byte {block[err.start]:#04x} on line {line}); save it as UTF-8 "
                          "(Excel: CSV UTF-8) and try again") from None
