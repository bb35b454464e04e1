"""One drift check, start to end, as a library call that never prints: the batch against
the training split of the served version that would score it, per feature (TFDV's
distance beside a null band at the batch's own size), what the model sees after
Transform (out-of-vocabulary and out-of-range shares), and for a classifier the blessing
metric estimated on the unlabelled batch (performance_estimate)."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from pathlib import Path
from typing import Any

from pipeline import datasets
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.scoring import drift_data, inputs

# Rows the model scores at once for the estimate (the eval split's and the batch's).
PREDICT_ROWS = 4096


@dataclasses.dataclass(frozen=True)
class DriftOutcome:
    model_version: int
    model_dir: Path
    files: list[Path]
    rows: int  # the batch's rows
    reference_rows: int  # the training split's rows compared with (a sample beyond REFERENCE_ROWS)
    features: list[Any]  # drift_stats.FeatureDrift, one a compared feature
    vocabulary_oov: dict[str, float]  # categorical -> the batch's share outside the model's vocabulary
    estimate: dict[str, Any] | None  # the blessing metric estimated without labels (a classifier)
    seconds: float

    @property
    def drifted(self) -> list[str]:
        return [f.feature for f in self.features if f.flagged]

    def as_json(self) -> dict[str, Any]:
        """Every field as JSON data (NaN, a feature without values, as null)."""
        return _finite({
            "model_version": self.model_version, "model_dir": str(self.model_dir),
            "files": [str(f) for f in self.files], "rows": self.rows, "reference_rows": self.reference_rows,
            "drifted": self.drifted, "features": [dataclasses.asdict(f) for f in self.features],
            "vocabulary_oov": self.vocabulary_oov, "estimate": self.estimate, "seconds": round(self.seconds, 3)})


def drift(config: PipelineConfig, data: str, *, version: int | None = None, label: str | None = None,
          seed: int = 0) -> DriftOutcome:
    from pipeline.scoring import drift_stats
    from pipeline.scoring.score import chosen_version

    started = time.monotonic()
    started_ms = time.time_ns() // 1_000_000
    spec = config.spec
    files, input_format = inputs.input_files(data)
    inputs.checked_columns(files, input_format, spec, ())
    fingerprints = tuple(inputs.fingerprint(f, input_format) for f in files)
    model_version, model_dir = chosen_version(config, version, label)
    from pipeline.store import connection

    store = connection.open_store(config.metadata_store_url, create=False)
    examples_uri = _training_examples(store, config, model_version)
    kinds = drift_data.feature_kinds(spec)
    model_features = [f.name for f in spec.model_features]
    from pipeline.scoring import guard

    with guard.guarded("the drift check", config.log_path) as stopped:
        reference = drift_data.read_split(examples_uri, "train", kinds)
        batch = drift_data.read_batch(files, input_format, {name: kinds.get(name, "text") for name in model_features})
        rows = len(next(iter(batch.values())))
        features = drift_stats.compare(reference.columns, {n: batch[n] for n in kinds}, kinds, seed=seed)
        vocabulary_oov = _vocabulary_oov(spec, model_dir, batch)
        estimate = None
        if spec.task != datasets.REGRESSION:
            estimate = _estimate(config, model_dir, examples_uri, batch, rows)
        outcome = DriftOutcome(model_version=model_version, model_dir=model_dir, files=files, rows=rows,
                               reference_rows=reference.rows, features=features, vocabulary_oov=vocabulary_oov,
                               estimate=estimate, seconds=time.monotonic() - started)
        stopped.check()
        _record(store, config, outcome, fingerprints, started_ms)
    return outcome


def _record(store, config: PipelineConfig, outcome: DriftOutcome, fingerprints: tuple, started_ms: int) -> None:
    from pipeline.provenance import scorings

    scorings.record_drift(store, model_name=config.serving_dir.name, model_version=outcome.model_version,
                          inputs=fingerprints, rows=outcome.rows,
                          drifted=outcome.drifted, result=json.dumps(outcome.as_json()), started_ms=started_ms,
                          ended_ms=time.time_ns() // 1_000_000, pipeline_name=config.pipeline_name)


def _training_examples(store, config: PipelineConfig, version: int) -> str:
    """ExampleGen's output the version's model was trained on, from the store's lineage."""
    from pipeline.provenance import lineage

    try:
        found = lineage.model_lineage(store, lineage.find_model(store, model_version=str(version)))
    except lineage.LineageError:
        raise ConfigError(f"the metadata store ({config.metadata_store_url}) does not record version {version}'s "
                          "training data, which drift compares with; drift a version a run of this workspace "
                          "pushed (`turbotfx runs`)") from None
    if not found.get("examples"):
        raise ConfigError(f"the metadata store records no training data for version {version}; rerun the pipeline")
    return found["examples"]["uri"]


def _vocabulary_oov(spec, model_dir: Path, batch: dict[str, list[Any]]) -> dict[str, float]:
    """Each categorical's share of present batch values its Transform vocabulary lacks, read
    from the served version's own assets (a value kept out by max_tokens or
    frequency_threshold counts: the model sees it as out of vocabulary too)."""
    from trainer_module import features

    feature_spec = spec.feature_spec()
    packed = {c.key: index for index, c in enumerate(feature_spec.packed_categoricals)}
    packed_lines = _lines(model_dir / "assets" / features.PACKED_VOCABULARY) if packed else []
    shares = {}
    for categorical in feature_spec.categoricals:
        key = categorical.key
        if key in packed:
            prefix = f"{packed[key]}{features.PACKED_SEPARATOR}"
            vocabulary = {line[len(prefix):] for line in packed_lines if line.startswith(prefix)}
        else:
            vocabulary = set(_lines(model_dir / "assets" / features.vocabulary_name(key)))
        present = [v for v in batch[key] if v is not None]
        shares[key] = sum(v not in vocabulary for v in present) / len(present) if present else float("nan")
    return shares


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1] if path.exists() else []


def _estimate(config: PipelineConfig, model_dir: Path, examples_uri: str, batch: dict[str, list[Any]],
              rows: int) -> dict[str, Any]:
    """Accuracy on the batch estimated from the served model's probabilities, calibrated on
    the eval split (whose labels are known), with the blessing bound it is held to."""
    import numpy as np

    from pipeline.scoring import performance_estimate

    spec = config.spec
    kinds = drift_data.feature_kinds(spec)
    evaluation = drift_data.read_split(examples_uri, "eval", kinds, extra=(spec.label,))
    signature = _signature(model_dir)
    eval_probabilities, classes = _probabilities(signature, evaluation.serialized)
    index = {name: i for i, name in enumerate(classes)}
    known = [i for i, value in enumerate(evaluation.columns[spec.label]) if value in index]
    labels = np.array([index[evaluation.columns[spec.label][i]] for i in known])
    calibration = performance_estimate.fit(eval_probabilities[known], labels)
    schema = inputs.row_schema(spec)
    examples = [schema.to_example(_model_row(schema, batch, i)) for i in range(rows)]
    batch_probabilities, _ = _probabilities(signature, examples)
    estimated = performance_estimate.estimate(calibration, batch_probabilities)
    metric = spec.blessing.metric
    bound = config.blessing_threshold if metric == "accuracy" else None
    return {"metric": "accuracy", "estimate": estimated.accuracy, "margin": estimated.margin,
            "eval_rows": len(known), "blessing_metric": metric, "bound": bound,
            "verdict": performance_estimate.verdict(estimated, bound) if bound is not None else
            f"accuracy estimated {estimated.accuracy:.2f} ± {estimated.margin:.2f} (the blessing metric is "
            f"{metric}, not estimated)"}


def _model_row(schema, batch: dict[str, list[Any]], index: int) -> dict[str, Any]:
    """Row `index` of the batch as the schema encodes it: a category the schema's type says is
    a number but is not one is left missing (drift reports it; the model sees it missing)."""
    from tensorflow_metadata.proto.v0 import schema_pb2

    row = {}
    for name in schema.features:
        value = batch[name][index]
        if value is not None and schema.types[name] != schema_pb2.BYTES:
            try:
                value = float(value)
            except ValueError:
                value = None
        row[name] = value
    return row


def _signature(model_dir: Path):
    from serving import forest_ops
    from serving.contract import SERVING_DEFAULT

    return forest_ops.load(str(model_dir)).signatures[SERVING_DEFAULT]


def _probabilities(signature, serialized: list[bytes]):
    """serving_default over serialized tf.Examples, in chunks: probabilities, class names."""
    import numpy as np
    import tensorflow as tf

    from serving.contract import EXAMPLES_INPUT, OUTPUT_CLASSES, OUTPUT_PROBABILITIES

    chunks, classes = [], []
    for start in range(0, len(serialized), PREDICT_ROWS):
        outputs = signature(**{EXAMPLES_INPUT: tf.constant(serialized[start:start + PREDICT_ROWS])})
        chunks.append(outputs[OUTPUT_PROBABILITIES].numpy())
        classes = [c.decode() for c in outputs[OUTPUT_CLASSES].numpy()[0].tolist()]
    return np.concatenate(chunks), classes


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value
