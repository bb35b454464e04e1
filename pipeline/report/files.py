"""The run's artifact files the report reads, parsed with their protos alone (no TensorFlow
import: `turbotfx report` starts in a second): TFDV statistics, TFDV anomalies, and the
per-epoch scalars Keras's TensorBoard callback wrote."""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path
from typing import Iterator

from tensorflow_metadata.proto.v0 import anomalies_pb2, statistics_pb2

from components.anomaly_gate.describe import describe

# TFX's file names inside each Split-<name> folder of an artifact.
STATISTICS_FILE = "FeatureStats.pb"
ANOMALIES_FILE = "SchemaDiff.pb"
SPLIT_PREFIX = "Split-"
# The most top values kept per categorical feature.
TOP_VALUES = 8


@dataclasses.dataclass
class FeatureStatistics:
    name: str
    kind: str  # "numeric" or "categorical"
    missing_share: float
    # numeric: mean, std, min, max; bins of the equal-width histogram as (low, high, share)
    mean: float | None = None
    std: float | None = None
    minimum: float | None = None
    maximum: float | None = None
    bins: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)
    # categorical: distinct values and the most frequent ones as (value, share of rows)
    unique: int | None = None
    top_values: list[tuple[str, float]] = dataclasses.field(default_factory=list)


def splits(artifact_uri: str) -> list[str]:
    """The split names of an artifact with Split-<name> folders, train first."""
    names = [p.name[len(SPLIT_PREFIX):] for p in Path(artifact_uri).glob(SPLIT_PREFIX + "*") if p.is_dir()]
    return sorted(names, key=lambda name: (name != "train", name))


def read_statistics(artifact_uri: str, split: str) -> tuple[int, dict[str, FeatureStatistics]]:
    """One split's row count and per-feature statistics (StatisticsGen's output)."""
    path = Path(artifact_uri) / f"{SPLIT_PREFIX}{split}" / STATISTICS_FILE
    datasets = statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes()).datasets
    if not datasets:
        return 0, {}
    dataset = datasets[0]
    rows = dataset.num_examples
    features = {}
    for feature in dataset.features:
        name = ".".join(feature.path.step) or feature.name
        features[name] = _feature(name, feature, rows)
    return rows, features


def _feature(name: str, feature: statistics_pb2.FeatureNameStatistics, rows: int) -> FeatureStatistics:
    if feature.HasField("num_stats"):
        numbers = feature.num_stats
        common = numbers.common_stats
        histogram = next((h for h in numbers.histograms if h.type == statistics_pb2.Histogram.STANDARD), None)
        buckets = list(histogram.buckets) if histogram is not None else []
        total = sum(b.sample_count for b in buckets)
        bins = [(b.low_value, b.high_value, b.sample_count / total) for b in buckets] if total else []
        return FeatureStatistics(name, "numeric", _missing_share(common, rows), mean=numbers.mean,
                                 std=numbers.std_dev, minimum=numbers.min, maximum=numbers.max, bins=bins)
    strings = feature.string_stats
    common = strings.common_stats
    top = [(v.value, v.frequency / rows if rows else 0.0) for v in strings.top_values[:TOP_VALUES]]
    return FeatureStatistics(name, "categorical", _missing_share(common, rows), unique=strings.unique,
                             top_values=top)


def _missing_share(common: statistics_pb2.CommonStatistics, rows: int) -> float:
    """Rows without a value: the pipeline's examples carry an empty value list for a blank
    cell, which TFDV counts as present, so a one-valued feature's blanks are the rows less
    its values."""
    if not rows:
        return 0.0
    missing = rows - common.tot_num_values if common.max_num_values <= 1 else common.num_missing
    return missing / rows


def read_anomalies(artifact_uri: str) -> dict[str, list[tuple[str, str]]]:
    """ExampleValidator's findings per split as (feature, what is wrong); "(dataset)" names
    an anomaly of the whole split."""
    found: dict[str, list[tuple[str, str]]] = {}
    for split in splits(artifact_uri):
        path = Path(artifact_uri) / f"{SPLIT_PREFIX}{split}" / ANOMALIES_FILE
        if not path.exists():
            continue
        anomalies = anomalies_pb2.Anomalies.FromString(path.read_bytes())
        listed = []
        if anomalies.HasField("dataset_anomaly_info"):
            listed.append(("(dataset)", describe(anomalies.dataset_anomaly_info)))
        listed += [(feature, describe(info)) for feature, info in sorted(anomalies.anomaly_info.items())]
        found[split] = listed
    return found



# --- TensorBoard scalars --------------------------------------------------------------------

# Keras's TensorBoard callback writes one folder per phase under the Trainer's model_run.
CURVE_PHASES = ("train", "validation")
# Per-epoch scalars are "epoch_<metric>"; the learning rate is not a curve of the model.
EPOCH_PREFIX = "epoch_"
NOT_CURVES = ("epoch_learning_rate",)
# A bagged run's members log in folders of their own (trainer_module/members.py spells it).
MEMBER_PREFIX = "member_"


def read_curves(model_run_uri: str) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """Per-epoch scalars by metric then series: {"loss": {"train": [(epoch, value), ...]}}.
    The members of a bagged run each log under member_<n> (trainer_module/members.py):
    their series are "train, model 1", "validation, model 1", ..."""
    root = Path(model_run_uri)
    members = sorted(root.glob(MEMBER_PREFIX + "*"), key=lambda p: int(p.name[len(MEMBER_PREFIX):] or 0))
    logs = [(path, f", model {path.name[len(MEMBER_PREFIX):]}") for path in members] or [(root, "")]
    curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    for folder, member in logs:
        for phase in CURVE_PHASES:
            for path in sorted((folder / phase).glob("events.out.tfevents.*")):
                for metric, epoch, value in _epoch_scalars(path):
                    curves.setdefault(metric, {}).setdefault(phase + member, []).append((epoch, value))
    return curves


def _epoch_scalars(path: Path) -> Iterator[tuple[str, int, float]]:
    from tensorboard.compat.proto import event_pb2
    from tensorboard.util import tensor_util

    for record in _tfrecords(path):
        event = event_pb2.Event.FromString(record)
        for value in event.summary.value:
            if value.tag.startswith(EPOCH_PREFIX) and value.tag not in NOT_CURVES:
                scalar = (value.simple_value if value.HasField("simple_value")
                          else float(tensor_util.make_ndarray(value.tensor)))
                yield value.tag[len(EPOCH_PREFIX):], event.step, scalar


def _tfrecords(path: Path) -> Iterator[bytes]:
    """The records of a TFRecord file (length, its CRC, data, its CRC); a torn last record
    (a run killed mid-write) ends the file."""
    data = path.read_bytes()
    offset = 0
    while offset + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        start = offset + 12
        if start + length + 4 > len(data):
            return
        yield data[start:start + length]
        offset = start + length + 4
