"""The curated schema a dataset file names, checked when the file loads: it parses, holds the
label and every feature, and types each feature as its role needs. ImportSchemaGen and
Transform would otherwise fail deep in TFX."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

from pipeline.datasets import names


class Feature(Protocol):
    """What the checks read of a dataset file's feature (pipeline.datasets.Feature)."""

    @property
    def name(self) -> str: ...

    @property
    def role(self) -> str: ...

    @property
    def missing_values(self) -> tuple[str, ...]: ...

    @property
    def number_format(self) -> str | None: ...

# A curated schema of thousands of columns is a few MB; more is not a schema (and reading
# an endless file would take the machine's memory).
MAX_SCHEMA_BYTES = 64 * 1024 * 1024


class SchemaProblem(Exception):
    """What is wrong, under which key of the dataset file, and the fix."""

    def __init__(self, key: str, problem: str, fix: str) -> None:
        super().__init__(f"{key}: {problem}; {fix}")
        self.key, self.problem, self.fix = key, problem, fix


def check_schema(path: Path, label: str, feature_list: Sequence[Feature]) -> None:
    """The curated schema parses, holds the label and every feature, and types each numeric
    feature as a number: ImportSchemaGen and Transform would otherwise fail deep in TFX."""
    from google.protobuf import text_format
    from tensorflow_metadata.proto.v0 import schema_pb2

    if path.stat().st_size > MAX_SCHEMA_BYTES:
        raise SchemaProblem("schema", f"{path} is {path.stat().st_size:,} bytes, not a schema (at most "
                            f"{MAX_SCHEMA_BYTES:,})", "give the schema file `turbotfx init` wrote")
    try:
        schema = text_format.Parse(path.read_text(), schema_pb2.Schema())
    except (text_format.ParseError, UnicodeDecodeError) as err:
        raise SchemaProblem("schema", f"{path} is not a schema text proto ({str(err).splitlines()[0]})",
                            "fix it, or write a draft with `turbotfx init`") from None
    types = {feature.name: feature.type for feature in schema.feature}
    refused = names.transform_refuses(list(types))
    if refused is not None:
        raise SchemaProblem("schema", f"{path} has a column {refused[0]!r}, which becomes {refused[1]!r} in "
                                      "Transform's graph, refused by TensorFlow", names.TRANSFORM_NAME_FIX)
    for column in (label, *(f.name for f in feature_list)):
        if column not in types:
            raise SchemaProblem("schema", f"{path} has no feature {column!r}",
                                "add it to the schema (every column of the data is in it)")
    for feature in feature_list:
        held_as_text = feature.missing_values or feature.number_format is not None
        if feature.role == "numeric" and not held_as_text and \
                types[feature.name] not in (schema_pb2.INT, schema_pb2.FLOAT):
            raise SchemaProblem(f"features.{feature.name}",
                                f"numeric, but the schema types it {schema_pb2.FeatureType.Name(types[feature.name])}",
                                "make it categorical or ignore (text cannot be scaled), name the text values "
                                "that stand for no number: {role = \"numeric\", missing_values = [\"T\"]}, or "
                                "the way its numbers are written: {role = \"numeric\", number_format = \"1,234.56\"}")
        if feature.role in ("date", "text") and types[feature.name] != schema_pb2.BYTES:
            what = ("dates are text such as 2024-03-15 (or Parquet timestamps)" if feature.role == "date"
                    else "a text feature's words need text")
            raise SchemaProblem(f"features.{feature.name}",
                                f"{feature.role}, but the schema types it "
                                f"{schema_pb2.FeatureType.Name(types[feature.name])}",
                                f"{what}: make it numeric, categorical or ignore")

