"""The Trainer's input pipeline: transformed TFRecord shards read into batches, counted,
and the label statistics and values read from them."""

from __future__ import annotations

import dataclasses
import os

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft

# Records parsed (and, when shuffling, permuted) together, in batches: 16 x 256 = 4,096
# records shuffle as well as tfxio's 1,024-record buffer did, at a fraction of the cost.
CHUNK_BATCHES = 16
# Shards read at once; more only helps with more cores than tf.data's parsing uses.
READ_PARALLELISM = 4
# Transformed training data up to this size (compressed TFRecords) is cached in memory
# after the first epoch.
CACHE_LIMIT_BYTES = 256 * 1024 * 1024
CACHED_BATCHES_SHUFFLE_BUFFER = 256
# Records whose labels one parse_example reads (label_values).
LABEL_CHUNK_RECORDS = 4096
# The parts of a train split (the validation slice is carved from it; the eval split stays
# whole for the Evaluator's blessing).
WHOLE, FIT, VALIDATION = "whole", "fit", "validation"
# A record's part is decided by a hash of its bytes into this many buckets: the same part in
# every epoch and every run, with no index to keep.
_PART_BUCKETS = 1000


@dataclasses.dataclass(frozen=True)
class Part:
    """Which records of a split a dataset reads: all (WHOLE), or the FIT or VALIDATION side
    of a `share`-sized validation slice. fold picks which slice: the fold-th of the
    1 / share slices that tile the split (k-fold bagging trains one model per fold)."""

    side: str = WHOLE
    share: float = 0.0
    fold: int = 0

    def keep(self, serialized: tf.Tensor) -> tf.Tensor:
        """A boolean mask over a batch of serialized records."""
        bucket = tf.strings.to_hash_bucket_fast(serialized, _PART_BUCKETS)
        first, end = round(self.fold * self.share * _PART_BUCKETS), round((self.fold + 1) * self.share * _PART_BUCKETS)
        in_validation = tf.logical_and(bucket >= first, bucket < end)
        return in_validation if self.side == VALIDATION else tf.logical_not(in_validation)

    @property
    def everything(self) -> bool:
        return self.side == WHOLE or (self.side == FIT and self.share == 0)


WHOLE_SPLIT = Part()


def input_dataset(
    file_pattern: list[str],
    tf_transform_output: tft.TFTransformOutput,
    label_key: str,
    batch_size: int,
    shuffle: bool,
    drop_remainder: bool = False,
    part: Part = WHOLE_SPLIT,
) -> tf.data.Dataset:
    """One epoch of (transformed features, label) batches, prefetched.

    Each shard is read in chunks of CHUNK_BATCHES batches' records; a chunk is parsed by
    one vectorized parse_example, its rows permuted when shuffling, and cut into batches.
    Nothing runs per example in Python or per record in tf.data: several times the
    examples/s of tfxio's path (../shared/notes/trainer-input-and-optimizer.md), so the
    first, uncached epoch keeps up with training. Shards are read in parallel, in
    non-deterministic order when shuffling. Data small enough is cached after the first
    epoch; later epochs then reshuffle the cached batches (their composition stays fixed).
    drop_remainder gives every batch the same static shape, which XLA needs to compile
    the training step once instead of once per batch shape. part: the records read, by a
    hash of their bytes (the validation slice and the rest of a train split).
    """
    files = matching_files(file_pattern)
    feature_spec = tf_transform_output.transformed_feature_spec()

    def parse(serialized: tf.Tensor) -> dict[str, tf.Tensor]:
        if not part.everything:
            serialized = tf.boolean_mask(serialized, part.keep(serialized))
        if shuffle:
            # The records, not the parsed columns, are permuted: one gather, not one per
            # column (a wide table's parse traces and runs in a fraction of the time).
            serialized = tf.random.shuffle(serialized)
        return tf.io.parse_example(serialized, feature_spec)

    paths = tf.data.Dataset.from_tensor_slices(files)
    if shuffle:
        paths = paths.shuffle(len(files), reshuffle_each_iteration=True)
    chunks = paths.interleave(
        lambda path: tf.data.TFRecordDataset(path, compression_type=compression_of(files)).batch(
            CHUNK_BATCHES * batch_size),
        cycle_length=min(len(files), READ_PARALLELISM),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle,
    )
    dataset = (
        chunks.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=not shuffle)
        .rebatch(batch_size, drop_remainder=drop_remainder)
        .map(lambda batch: split_label(batch, label_key))
    )
    if files_size(files) <= CACHE_LIMIT_BYTES:
        dataset = dataset.cache()
        if shuffle:
            dataset = dataset.shuffle(CACHED_BATCHES_SHUFFLE_BUFFER, reshuffle_each_iteration=True)
    return dataset.prefetch(tf.data.AUTOTUNE)


def split_label(batch: dict[str, tf.Tensor], label_key: str) -> tuple[dict[str, tf.Tensor], tf.Tensor]:
    features_only = dict(batch)
    return features_only, features_only.pop(label_key)


def matching_files(file_pattern: list[str]) -> list[str]:
    files = sorted(path for pattern in file_pattern for path in tf.io.gfile.glob(pattern))
    if not files:
        raise ValueError(f"no transformed examples match {', '.join(file_pattern)}; "
                         "rerun Transform (its output was moved or deleted)")
    return files


def compression_of(files: list[str]) -> str:
    """Transform writes gzip-compressed TFRecord shards (*.gz), all alike."""
    compressed = {path.endswith(".gz") for path in files}
    if len(compressed) > 1:
        raise ValueError(f"the transformed examples in {os.path.dirname(files[0])} mix gzip (*.gz) and "
                         "uncompressed shards; rerun Transform to rewrite them")
    return "GZIP" if compressed.pop() else ""


def batches_per_epoch(dataset: tf.data.Dataset, file_pattern: list[str], batch_size: int,
                      part: Part = WHOLE_SPLIT) -> int:
    """Batches in one epoch of dataset = input_dataset(file_pattern, ..., batch_size, ...)
    (Keras needs the count to run several steps per call).

    Data that input_dataset caches is counted by reading it once: that fills the cache at
    the input pipeline's full speed, which on few cores is faster than reading while
    training (fit's epochs then all come from memory). Larger data is counted from its
    records in chunks (read, not parsed).
    """
    files = matching_files(file_pattern)
    if files_size(files) <= CACHE_LIMIT_BYTES:
        return int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))
    chunks = tf.data.TFRecordDataset(
        files, compression_type=compression_of(files), num_parallel_reads=min(len(files), READ_PARALLELISM)
    ).batch(CHUNK_BATCHES * batch_size)
    def kept(chunk: tf.Tensor) -> tf.Tensor:
        return tf.size(chunk, tf.int64) if part.everything else tf.reduce_sum(tf.cast(part.keep(chunk), tf.int64))

    records = int(chunks.reduce(tf.constant(0, tf.int64), lambda count, chunk: count + kept(chunk)))
    # A static batch dimension: input_dataset dropped the last, partial batch.
    drops_remainder = dataset.element_spec[1].shape[0] is not None
    return records // batch_size if drops_remainder else -(-records // batch_size)


def files_size(files: list[str]) -> int:
    return sum(tf.io.gfile.stat(path).length for path in files)


@dataclasses.dataclass(frozen=True)
class EpochSteps:
    """Batches per epoch of each dataset; None where Keras reads until the data ends."""

    train: int | None = None
    eval: int | None = None
    validation: int | None = None


def epoch_steps(train_ds: tf.data.Dataset, train_files: list[str], eval_ds: tf.data.Dataset,
                eval_files: list[str], global_batch_size: int, train_part: Part = WHOLE_SPLIT) -> EpochSteps:
    return EpochSteps(
        train=batches_per_epoch(train_ds, train_files, global_batch_size, train_part),
        eval=batches_per_epoch(eval_ds, eval_files, global_batch_size),
    )


def label_statistics(train_ds: tf.data.Dataset) -> dict[str, float]:
    """The training labels' mean and standard deviation, which scale a regression output.

    One pass over the labels; the batches it reads are the ones the first epoch caches.
    """
    count, total, squares = train_ds.reduce(
        (0.0, 0.0, 0.0),
        lambda state, batch: (
            state[0] + tf.cast(tf.size(batch[1]), tf.float32),
            state[1] + tf.reduce_sum(batch[1]),
            state[2] + tf.reduce_sum(tf.square(batch[1])),
        ),
    )
    count, total, squares = float(count), float(total), float(squares)
    mean = total / max(count, 1.0)
    std = max(squares / max(count, 1.0) - mean * mean, 0.0) ** 0.5
    return {"label_mean": mean, "label_std": std if std > 0 else 1.0}


def label_values(file_pattern: list[str], tf_transform_output: tft.TFTransformOutput, label_key: str) -> np.ndarray:
    """Every transformed label of a split (class ids, or the regression values), in file
    order; only the label is parsed."""
    files = matching_files(file_pattern)
    label_spec = {label_key: tf_transform_output.transformed_feature_spec()[label_key]}
    chunks = tf.data.TFRecordDataset(
        files, compression_type=compression_of(files), num_parallel_reads=min(len(files), READ_PARALLELISM)
    ).batch(LABEL_CHUNK_RECORDS).map(lambda serialized: tf.io.parse_example(serialized, label_spec)[label_key])
    values = [np.ravel(chunk) for chunk in chunks.as_numpy_iterator()]
    return np.concatenate(values) if values else np.zeros((0,), np.float32)
