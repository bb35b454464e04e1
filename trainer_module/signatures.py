"""Serving signatures: what TF Serving, JSON clients and TFMA call on the exported model."""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras
from tensorflow_transform.saved import saved_transform_io_v2

from trainer_module import autograph, features
from trainer_module.features import FeatureSpec

autograph.skip_library_conversion()

SERVING_DEFAULT = "serving_default"
SERVING_RAW = "serving_raw"
TRANSFORM_FEATURES = "transform_features"
EXAMPLES_INPUT = "examples"
OUTPUT_PROBABILITIES = "probabilities"
OUTPUT_CLASS_ID = "class_id"
OUTPUT_LABEL = "label"
# Every class's label value, in the order of `probabilities`: [batch, classes]. A client of
# TF Serving (gRPC or REST) has no other way to the names; TF's Classify API does the same.
OUTPUT_CLASSES = "classes"
OUTPUT_PREDICTION = "prediction"


class ServingModule(tf.Module):
    """Holds the model and the Transform graph so one SavedModel carries both.

    Every tf.function has a fixed input signature, so serving never retraces, and none
    is XLA-compiled (TF Serving GPU builds reject some XLA ops). None holds control flow
    on tensors, so AutoGraph stays off: it rewrote each column's ops of serving_raw, 2.7 s
    of a 100-column export.
    """

    def __init__(
        self, model: keras.Model, tf_transform_output: tft.TFTransformOutput, spec: FeatureSpec
    ) -> None:
        super().__init__()
        if isinstance(model, keras.Model):
            # The weights are saved, not the Keras model: Keras would trace and save every
            # layer's call as well, which the signatures never use (a 5-member ensemble of a
            # 100-column table: save 13.4 s and load 3.2 s, against 3.0 s and 0.8 s).
            self.model_weights = list(model.variables)
            self._model = _Unsaved(model)
        else:
            self.model = model  # a tf.Module (gbt.Forest): its own resources are saved with it
            self._model = _Unsaved(model)
        self._model_inputs = tuple(model.input_names)
        # The transform graph as TFT's own Keras layer loads and tracks it (its tables and
        # vocabulary assets go into the SavedModel), without the layer: saving a Keras layer
        # also traces its call twice more through the whole transform graph, which no
        # signature uses (3 s a trace for a 100-column table).
        self._transform = saved_transform_io_v2.SavedModelLoader(tf_transform_output.transform_savedmodel_dir)
        self.transform_graph = vars(self._transform)
        self._task = spec.task
        self._raw_spec = tf_transform_output.raw_feature_spec()
        # The model's features only: the label, ignored columns (IDs, free text) and anything
        # else a client sends are not parsed.
        self._serving_spec = {k: v for k, v in self._raw_spec.items() if k in spec.feature_keys}
        self._label_names: Any = None  # a string tensor for a classifier
        if spec.is_classification:
            self._label_names = tf.constant(label_names(tf_transform_output, spec), dtype=tf.string)

        examples_spec = tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)
        self.serve_examples = tf.function(self._serve_examples, input_signature=[examples_spec], autograph=False)
        self.transform_features = tf.function(
            self._transform_features, input_signature=[examples_spec], autograph=False
        )
        # Keyed by identifier (TF signature arguments cannot hold spaces or slashes; clients
        # map the column names). Every number is float32 here, integer columns included:
        # JSON clients send numbers, and NaN can mark a missing value.
        self._raw_names = {features.identifier(key): key for key in spec.feature_keys}
        raw_specs = {
            name: tf.TensorSpec([None], tf.string if self._raw_spec[key].dtype == tf.string else tf.float32,
                                name=name)
            for name, key in self._raw_names.items()
        }
        self.serve_raw = tf.function(self._serve_raw, input_signature=[raw_specs], autograph=False)
        # serving_default and serving_raw both end here, on features as parse_example gives
        # them: one trace through the transform graph and the model serves both.
        parsed_specs = {
            key: tf.TensorSpec([None, *feature.shape], feature.dtype) if isinstance(feature, tf.io.FixedLenFeature)
            else tf.SparseTensorSpec([None, None], feature.dtype)
            for key, feature in self._serving_spec.items()
        }
        self._predict_parsed = _Unsaved(tf.function(self._predict, input_signature=[parsed_specs], autograph=False))

    def signatures(self) -> dict:
        """The tf.functions, not their concrete functions: tf.saved_model.save traces each
        inside its save context, whose cache key differs from a trace made before it, so a
        concrete function traced here would be traced a second time while saving."""
        return {
            SERVING_DEFAULT: self.serve_examples,
            SERVING_RAW: self.serve_raw,
            TRANSFORM_FEATURES: self.transform_features,
        }

    def _serve_examples(self, examples: tf.Tensor) -> dict:
        return self._predict_parsed.held(tf.io.parse_example(examples, self._serving_spec))

    def _serve_raw(self, rows: dict) -> dict:
        """Named features, one value per row; NaN or '' mark a missing value.

        Features the schema marks required (a fixed shape) must be present in every row;
        a missing one fails the request with a message naming it. Columns that arrive and
        parse alike go side by side as one [batch, columns] matrix: a few graph ops
        whatever their number (a wide table's trace and every request pay per op).
        """
        alike: dict[tuple, list[tuple[str, tf.Tensor]]] = {}
        for name, value in rows.items():
            key = self._raw_names[name]
            feature_spec = self._raw_spec[key]
            fixed = isinstance(feature_spec, tf.io.FixedLenFeature)
            alike.setdefault((value.dtype, feature_spec.dtype, fixed), []).append((key, value))
        raw: dict[str, tf.Tensor | tf.SparseTensor] = {}
        for (_, dtype, fixed), columns in alike.items():
            keys = [key for key, _ in columns]
            values = tf.stack([value for _, value in columns], axis=1)
            present = tf.math.is_finite(values) if values.dtype.is_floating else tf.not_equal(values, "")
            typed = tf.cast(values, dtype)
            if fixed:
                raw.update(zip(keys, self._required_columns(keys, typed, present)))
            else:
                raw.update(zip(keys, _sparse_columns(typed, present)))
        return self._predict_parsed.held(raw)

    def _required_columns(self, keys: list[str], typed: tf.Tensor, present: tf.Tensor) -> list[tf.Tensor]:
        """Each column of typed shaped as tf.Example parsing gives it, once every row holds
        a value; else the request fails naming each column that lacks one."""
        lacking = tf.logical_not(tf.reduce_all(present, axis=0))
        messages = tf.constant([f"{key} is required" for key in keys])
        check = tf.debugging.Assert(tf.logical_not(tf.reduce_any(lacking)),
                                    [tf.strings.reduce_join(tf.boolean_mask(messages, lacking), separator="; ")])
        with tf.control_dependencies([check]):
            columns = tf.split(typed, len(keys), axis=1)  # [batch, 1] each
        return [column if list(self._raw_spec[key].shape) == [1] else
                tf.reshape(column, [-1, *self._raw_spec[key].shape]) for key, column in zip(keys, columns)]

    def _transform_features(self, examples: tf.Tensor) -> dict:
        return self._transform.apply_transform_model(tf.io.parse_example(examples, self._raw_spec))

    def _predict(self, raw_features: dict) -> dict:
        transformed = self._transform.apply_transform_model(raw_features)
        model_inputs = {name: transformed[name] for name in self._model_inputs}
        output = tf.cast(self._model.held(model_inputs, training=False), tf.float32)
        if self._task == features.REGRESSION:
            return {OUTPUT_PREDICTION: tf.reshape(output, [-1])}
        if self._task == features.BINARY:
            # The sigmoid gives the second label's probability; clients get both, as for
            # any classifier.
            output = tf.concat([1.0 - output, output], axis=-1)
        class_id = tf.argmax(output, axis=-1)
        return {
            OUTPUT_PROBABILITIES: output,
            OUTPUT_CLASS_ID: class_id,
            OUTPUT_LABEL: tf.gather(self._label_names, class_id),
            OUTPUT_CLASSES: tf.tile(self._label_names[tf.newaxis, :], [tf.shape(output)[0], 1]),
        }


class _Unsaved:
    """Holds an object out of the SavedModel's object graph (tf.Module tracks what it holds)."""

    def __init__(self, held: Any) -> None:
        self.held = held


def label_names(tf_transform_output: tft.TFTransformOutput, spec: FeatureSpec) -> list[bytes]:
    """A classifier's label values in class id order: the label vocabulary (by frequency),
    or, for a binary label with a named positive class, the other value then the positive."""
    label_vocab = tf_transform_output.vocabulary_by_name(features.vocabulary_name(spec.label_key))
    if spec.task == features.BINARY and spec.positive is not None:
        # Class id 1 is the positive class (see preprocessing.py), whatever its frequency.
        positive = spec.positive.encode()
        label_vocab = [v for v in label_vocab if v != positive] + [positive]
    return label_vocab


def _sparse_columns(values: tf.Tensor, present: tf.Tensor) -> list[tf.SparseTensor]:
    """Each column of a [batch, columns] matrix as a [batch, 1] SparseTensor holding only
    its present values, as tf.Example parsing gives a column that may be missing."""
    indices = tf.where(present)
    matrix = tf.SparseTensor(indices, tf.gather_nd(values, indices), tf.shape(values, out_type=tf.int64))
    return tf.sparse.split(sp_input=matrix, num_split=values.shape[1], axis=1)


def export(
    model: keras.Model,
    tf_transform_output: tft.TFTransformOutput,
    spec: FeatureSpec,
    export_dir: str,
) -> Sequence[str]:
    """Writes the serving SavedModel; returns the signature names."""
    module = ServingModule(model, tf_transform_output, spec)
    signatures = module.signatures()
    tf.saved_model.save(module, export_dir, signatures=signatures)
    return sorted(signatures)
