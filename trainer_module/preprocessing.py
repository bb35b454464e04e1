"""preprocessing_fn for Transform: impute and z-score numerics, vocabularies for categoricals,
dates expanded into scaled and cyclic parts, a label vocabulary for classification and the
float label for regression."""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping

import numpy as np
import tensorflow as tf
import tensorflow_transform as tft

from trainer_module import autograph, dates, features

autograph.skip_library_conversion()

def preprocessing_fn(inputs: dict, custom_config: Mapping[str, Any] | None = None) -> dict:
    """Maps raw features to model-ready ones; Transform's custom_config carries the spec.

    Analyzers (means, variances, vocabularies) run over the train split only; the same
    graph then serves, so training and serving cannot skew.
    """
    spec = features.from_custom_config(custom_config)
    outputs = {}
    outputs.update(_impute_and_z_score_columns(spec, inputs))
    for key, values in spec.missing_values:
        outputs[features.indicator_name(key)] = _marked(inputs[key], values)
    outputs.update(_packed_vocabulary_ids(spec, inputs))
    packed = set(spec.packed_categoricals)
    for categorical in (c for c in spec.categoricals if c not in packed):
        value = inputs[categorical.key]
        outputs[features.transformed_name(categorical.key)] = tft.compute_and_apply_vocabulary(
            _to_dense(value, default=_missing(value)),
            top_k=categorical.max_tokens,
            frequency_threshold=categorical.frequency_threshold,
            num_oov_buckets=spec.num_oov_buckets,
            vocab_filename=features.vocabulary_name(categorical.key),
        )
    for key in spec.date_keys:
        outputs.update(_date_parts(key, inputs[key]))
    for key in spec.text_keys:
        outputs[features.transformed_name(key)] = _word_ids(key, inputs[key])
    label = inputs[spec.label_key]
    if spec.task == features.BINARY and spec.positive is not None:
        # The named positive class is id 1 (what TFMA's binary metrics are about); the
        # vocabulary still names both classes for decoding (signatures.py orders it).
        text = _as_text(_to_dense(label, default=_missing(label)))
        tft.vocabulary(text, vocab_filename=features.vocabulary_name(spec.label_key))
        outputs[spec.transformed_label_key] = tf.cast(tf.equal(text, spec.positive), tf.int64)
    elif spec.is_classification:
        outputs[spec.transformed_label_key] = tft.compute_and_apply_vocabulary(
            _to_dense(label, default=_missing(label)),
            vocab_filename=features.vocabulary_name(spec.label_key),
        )
    else:
        outputs[spec.transformed_label_key] = _to_dense(tf.cast(label, tf.float32), default=0.0)
    return outputs


def _packed_vocabulary_ids(spec: features.FeatureSpec, inputs: dict) -> dict[str, tf.Tensor]:
    """Each packed categorical's ids over its own values, as its own vocabulary would give
    them (most frequent first; a value unseen in training is the column's size), from one
    vocabulary of every packed column's values (features.PACKED_VOCABULARY)."""
    packed = spec.packed_categoricals
    if not packed:
        return {}
    assert spec.num_oov_buckets == 1, "a packed column's out-of-vocabulary id is its size"
    text = _columns_matrix([inputs[c.key] for c in packed], _missing, _as_text)
    prefixes = tf.constant([f"{index}{features.PACKED_SEPARATOR}" for index in range(len(packed))])
    tokens = tf.add(prefixes[tf.newaxis, :], text)  # [batch, columns]
    path = tft.vocabulary(tokens, vocab_filename=features.PACKED_VOCABULARY)
    joint = tft.apply_vocabulary(tokens, path, num_oov_buckets=1)  # [batch, columns]; unseen: the size
    # The vocabulary's lines, the column of each, and its rank among its column's lines.
    lines = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        path, key_dtype=tf.int64, key_index=tf.lookup.TextFileIndex.LINE_NUMBER,
        value_dtype=tf.string, value_index=tf.lookup.TextFileIndex.WHOLE_LINE), default_value="")
    size = lines.size()
    line_text = lines.lookup(tf.range(size))
    line_column = tf.strings.to_number(
        tf.strings.regex_replace(line_text, f"{features.PACKED_SEPARATOR}.*", ""), tf.int32)
    in_column = tf.one_hot(line_column, len(packed), dtype=tf.int64)  # [lines, columns]
    rank = tf.gather_nd(tf.cumsum(in_column, axis=0) - 1,
                        tf.stack([tf.range(tf.cast(size, tf.int32)), line_column], axis=1))
    column_sizes = tf.reduce_sum(in_column, axis=0)
    ids = tf.where(joint < size, tf.gather(rank, tf.minimum(joint, size - 1)), column_sizes[tf.newaxis, :])
    return dict(zip((features.transformed_name(c.key) for c in packed), tf.unstack(ids, len(packed), axis=1)))


def _number(value: tf.Tensor | tf.SparseTensor, number_format: str | None = None) -> tf.Tensor | tf.SparseTensor:
    """A numeric column as float32; one held as text (a number column with a few text values,
    or numbers with digit grouping) parsed, each text that is no number in its format
    (features.number_pattern) missing."""
    if value.dtype != tf.string:
        return tf.cast(value, tf.float32)
    text = tf.strings.strip(_to_dense(value, default=""))
    readable = tf.strings.regex_full_match(text, features.number_pattern(number_format))
    if number_format is not None:  # the grouping dropped, the decimal mark a point
        grouping, decimal = features.NUMBER_FORMATS[number_format]
        text = tf.strings.regex_replace(tf.strings.regex_replace(text, re.escape(grouping), ""),
                                        re.escape(decimal), ".")
    return _present_only(tf.strings.to_number(tf.where(readable, text, "0"), tf.float32), readable)


def _marked(value: tf.Tensor | tf.SparseTensor, missing_values: tuple[str, ...]) -> tf.Tensor:
    """1.0 where a row holds one of the column's missing_values (a trace of rain is not no
    rain: the model may tell them apart), else 0.0; all 0.0 for a column held as numbers."""
    if value.dtype != tf.string:
        return tf.zeros_like(tf.reshape(_to_dense(tf.cast(value, tf.float32), default=0.0), [-1]))
    text = tf.strings.strip(_to_dense(value, default=""))
    named = tf.reduce_any(tf.equal(text[:, tf.newaxis], tf.constant(missing_values)[tf.newaxis, :]), axis=1)
    return tf.cast(named, tf.float32)


def _word_ids(key: str, value: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """A text column as [batch, TEXT_MAX_WORDS] word ids: 0 pads a shorter text, 1 to the
    vocabulary's size are its words (most frequent first), one more is out of vocabulary."""
    text = tf.strings.lower(_to_dense(value, default=""), encoding="utf-8")
    words = tf.strings.split(tf.strings.strip(tf.strings.regex_replace(text, features.TEXT_WORD_PATTERN, " ")))
    ids = tft.compute_and_apply_vocabulary(
        words, top_k=features.TEXT_VOCABULARY_SIZE, frequency_threshold=features.TEXT_MIN_WORD_COUNT,
        num_oov_buckets=1, vocab_filename=features.vocabulary_name(key))
    return (ids + 1).to_tensor(default_value=0, shape=[None, features.TEXT_MAX_WORDS])


def _date_parts(key: str, value: tf.Tensor | tf.SparseTensor) -> dict[str, tf.Tensor]:
    """A date column's features.DATE_PARTS: the days and the year z-scored over the training
    dates that parse (others imputed, as a missing number), each cycle as sine and cosine."""
    parsed = dates.parse(_to_dense(value, default=""))
    parts = {
        features.date_part_name(key, part): _impute_and_z_score(_present_only(number, parsed.valid))
        for part, number in zip(features.DATE_SCALED_PARTS, (parsed.days, parsed.year))
    }
    for cycle in features.DATE_CYCLES:
        sine, cosine = dates.cyclic(parsed, cycle)
        parts[features.date_part_name(key, f"{cycle}_sin")] = sine
        parts[features.date_part_name(key, f"{cycle}_cos")] = cosine
    return parts


def _present_only(value: tf.Tensor, present: tf.Tensor) -> tf.SparseTensor:
    """A [batch] tensor as a [batch, 1] SparseTensor holding only the present values, as
    Transform reads a column that may be missing."""
    rows = tf.where(present)
    return tf.SparseTensor(tf.concat([rows, tf.zeros_like(rows)], axis=1), tf.boolean_mask(value, present),
                           tf.stack([tf.shape(value, out_type=tf.int64)[0], tf.constant(1, tf.int64)]))


def _as_text(value: tf.Tensor) -> tf.Tensor:
    """A label as the vocabulary writes it: integers in decimal, text as it is."""
    return value if value.dtype == tf.string else tf.strings.as_string(value)


def _missing(value: tf.Tensor | tf.SparseTensor):
    """What a missing categorical becomes: its own vocabulary entry ('' or -1)."""
    return "" if value.dtype == tf.string else -1


def _impute_and_z_score_columns(spec: features.FeatureSpec, inputs: dict) -> dict[str, tf.Tensor]:
    """_impute_and_z_score for every numeric column at once: their present values side by
    side in one [batch, columns] SparseTensor, so Transform analyzes one mean and one
    variance vector instead of a pair per column (each analyzer's graph and Beam nodes cost
    the same however small: on a wide table they were most of Transform)."""
    keys = spec.numeric_keys
    if not keys:
        return {}
    # Numbers held as text are parsed one by one; the rest go side by side as they are.
    formats = dict(spec.number_formats)
    numbers = [_number(inputs[key], formats.get(key)) if inputs[key].dtype == tf.string else inputs[key]
               for key in keys]
    stacked = _columns_matrix(numbers, lambda _: 0, lambda matrix: tf.cast(matrix, tf.float32))
    mask = _dense_matrix([_presence(number) for number in numbers], False)
    where = tf.where(mask)
    sparse = tf.SparseTensor(where, tf.gather_nd(stacked, where), tf.shape(stacked, out_type=tf.int64))
    mean = tft.mean(sparse, reduce_instance_dims=False)
    std = tf.sqrt(tft.var(sparse, reduce_instance_dims=False))
    # A missing value becomes the mean: 0 once centred.
    centered = tf.where(mask, stacked - mean, tf.zeros_like(stacked))
    scaled = tf.where(std > 0, centered / tf.where(std > 0, std, tf.ones_like(std)), centered)
    return dict(zip((features.transformed_name(key) for key in keys), tf.unstack(scaled, len(keys), axis=1)))


def _impute_and_z_score(value: tf.Tensor | tf.SparseTensor) -> tf.Tensor:
    """z-scores with the mean and variance of the present training values; missing -> 0.

    A missing value becomes the mean, so it carries no signal. Both statistics come from
    one analysis pass: imputing first and then calling tft.scale_to_z_score would need a
    second pass over the data (an extra Beam phase) for the same result.
    """
    mean, variance = tft.mean(value), tft.var(value)
    std = tf.sqrt(variance)
    centered = _to_dense(value, default=mean) - mean
    return tf.where(std > 0, centered / tf.where(std > 0, std, 1.0), centered)


# Wide tables: a column costs a dozen graph ops when handled alone, and Transform traces the
# graph six times per run (then Beam runs it per batch and serving loads it), so columns
# of one dtype are handled as one [batch, columns] matrix in a few ops, whatever their count.

def _columns_matrix(columns: list, default: Callable[[Any], Any],
                    convert: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """[batch, len(columns)] from [batch] or [batch, 1] columns of any dtypes: each dtype's
    columns as one matrix (a missing value is default(a column of that dtype)), made one
    dtype by convert, back in the columns' order."""
    dtypes = sorted({column.dtype.name for column in columns})
    groups = [[index for index, column in enumerate(columns) if column.dtype.name == dtype] for dtype in dtypes]
    matrices = [convert(_dense_matrix([columns[index] for index in group], default(columns[group[0]])))
                for group in groups]
    return _in_order(matrices, [index for group in groups for index in group])


def _dense_matrix(columns: list, default: Any) -> tf.Tensor:
    """[batch, len(columns)] from columns of one dtype, sparse ones (that may be missing)
    joined as one SparseTensor first."""
    sparse = [index for index, column in enumerate(columns) if isinstance(column, tf.SparseTensor)]
    dense = [index for index, column in enumerate(columns) if not isinstance(column, tf.SparseTensor)]
    parts = []
    if sparse:
        one_wide = tf.stack([columns[sparse[0]].dense_shape[0], tf.constant(1, tf.int64)])
        joined = tf.sparse.concat(1, [tf.SparseTensor(columns[i].indices, columns[i].values, one_wide) for i in sparse])
        parts.append(tf.sparse.to_dense(joined, default_value=tf.cast(default, joined.dtype)))
    if dense:
        parts.append(tf.stack([tf.reshape(columns[index], [-1]) for index in dense], axis=1))
    return _in_order(parts, sparse + dense)


def _in_order(matrices: list[tf.Tensor], positions: list[int]) -> tf.Tensor:
    """The matrices side by side, whose columns hold the original positions listed, with
    the columns put back in position order."""
    matrix = tf.concat(matrices, axis=1) if len(matrices) > 1 else matrices[0]
    if positions == sorted(positions):
        return matrix
    return tf.gather(matrix, np.argsort(positions), axis=1)


def _presence(column: tf.Tensor | tf.SparseTensor) -> tf.Tensor | tf.SparseTensor:
    """True where the column holds a value, as the same kind of tensor."""
    if isinstance(column, tf.SparseTensor):
        return tf.SparseTensor(column.indices, tf.ones_like(column.values, dtype=tf.bool), column.dense_shape)
    return tf.ones_like(column, dtype=tf.bool)


def _to_dense(value: tf.Tensor | tf.SparseTensor, default) -> tf.Tensor:
    """A [batch] tensor from a feature that may be missing in some rows."""
    if isinstance(value, tf.SparseTensor):
        batch_size = value.dense_shape[0]
        value = tf.sparse.to_dense(
            tf.SparseTensor(value.indices, value.values, [batch_size, 1]),
            default_value=tf.cast(default, value.dtype),
        )
    return tf.reshape(value, [-1])
