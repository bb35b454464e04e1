"""A client for TF Serving over gRPC and REST, with rows checked against the schema first.

gRPC sends `PredictionService.Predict` to `serving_default` with serialized tf.Examples
(tensorflow-serving-api); REST posts `instances` rows of named features to
`serving_raw` at /v1/models/<name>[/versions/N | /labels/L]:predict. Both retry with
backoff when the server is unavailable (starting, reloading), and both fail a bad row
before anything is sent, naming the row and the feature.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import json
import math
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from tensorflow_metadata.proto.v0 import schema_pb2

from pipeline.errors import ConfigError
from serving.contract import (
    EXAMPLES_INPUT,
    OUTPUT_CLASS_ID,
    OUTPUT_CLASSES,
    OUTPUT_LABEL,
    OUTPUT_PREDICTION,
    OUTPUT_PROBABILITIES,
    SERVING_DEFAULT,
    SERVING_RAW,
)
from trainer_module.features import identifier

DEFAULT_GRPC_PORT = 8500
DEFAULT_REST_PORT = 8501
DEFAULT_MODEL_NAME = "penguins"


class ServingClientError(ConfigError):
    """A request that could not be made or answered; the message names the cause."""


@dataclasses.dataclass(frozen=True)
class Prediction:
    """A classifier's label (as in the data), class id and probabilities, and the label
    value of each probability (`classes`; None from a model exported before it said); a
    regression model's value."""

    label: str | None = None
    class_id: int | None = None
    probabilities: list[float] | None = None
    value: float | None = None
    classes: list[str] | None = None

    def by_class(self) -> dict[str, float] | None:
        """{label value: probability}; None where the model does not name its classes."""
        if self.classes is None or self.probabilities is None:
            return None
        return dict(zip(self.classes, self.probabilities))


class RowError(ServingClientError):
    """Rows that do not fit the curated schema: one line per problem (`problems`), each
    naming the row, the feature, the value, what the schema allows and the fix."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:MAX_PROBLEMS_SHOWN]
        more = len(self.problems) - len(shown)
        super().__init__("\n".join(shown + ([f"... and {more} more problems"] if more else [])))


# A CSV file of bad rows would otherwise bury the first problems.
MAX_PROBLEMS_SHOWN = 20
# tf.Example and the model hold FLOAT features as float32: a larger value becomes inf.
FLOAT32_MAX = 3.4028234663852886e38
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
# Domain values listed in a message; a longer domain is cut short with its size.
MAX_VALUES_SHOWN = 12


@dataclasses.dataclass(frozen=True)
class _Column:
    """What the curated schema allows in one column of a row."""

    name: str
    type: int  # schema_pb2.BYTES, INT, FLOAT (or TYPE_UNKNOWN: not checked)
    required: bool
    values: frozenset[str] | None = None  # a string domain; None: open
    domain: str = ""  # the domain's name, for the message
    low: float | None = None
    high: float | None = None


def _columns(schema: schema_pb2.Schema, label_key: str) -> dict[str, _Column]:
    """Each feature's type, presence and domain, global domains (`domain: "name"`) resolved."""
    global_domains: dict[str, Any] = {}
    for domains in (schema.string_domain, schema.int_domain, schema.float_domain):
        global_domains.update((d.name, d) for d in domains)
    columns = {}
    for feature in schema.feature:
        if feature.name == label_key:
            continue
        kind = feature.WhichOneof("domain_info")
        domain = global_domains.get(feature.domain) if kind == "domain" else getattr(feature, kind) if kind else None
        # A fixed shape makes the feature a FixedLenFeature in the model's parsing spec: a
        # row without it cannot be parsed. min_count (penguins' features) only asks that some
        # example has it, so such a feature may be missing from a row.
        required = feature.presence.min_fraction >= 1.0 or feature.HasField("shape")
        values = low = high = None
        if isinstance(domain, schema_pb2.StringDomain) and feature.type == schema_pb2.BYTES:
            values = frozenset(domain.value)
        elif isinstance(domain, (schema_pb2.IntDomain, schema_pb2.FloatDomain)):
            low = domain.min if domain.HasField("min") else None
            high = domain.max if domain.HasField("max") else None
        columns[feature.name] = _Column(feature.name, feature.type, required, values,
                                        getattr(domain, "name", "") or feature.name, low, high)
    return columns


class RowSchema:
    """The columns a model's rows may have, from the pipeline's curated schema (label left
    out), and the features it uses (`features`, default: all of them). `source` names the
    schema file in messages."""

    def __init__(self, schema: schema_pb2.Schema, label_key: str, features: Sequence[str] | None = None,
                 source: str = "the curated schema") -> None:
        self.label_key = label_key
        self.source = source
        self.columns = _columns(schema, label_key)
        self.types = {name: column.type for name, column in self.columns.items()}
        self.required = {name for name, column in self.columns.items() if column.required}
        self.features = tuple(features) if features is not None else tuple(self.types)
        self._used = frozenset(self.features)
        self._required_sorted = tuple(sorted(self.required))

    @classmethod
    def for_dataset(cls, dataset: str) -> RowSchema:
        """The rows of a dataset: a built-in's name or a dataset file's path."""
        from google.protobuf import text_format

        from pipeline import datasets

        spec = datasets.load(dataset)
        schema = text_format.Parse(spec.schema.read_text(), schema_pb2.Schema())
        return cls(schema, spec.label, [f.name for f in spec.model_features], source=str(spec.schema))

    def rows_from_csv(self, path: Path) -> list[dict[str, Any]]:
        """The rows of a CSV file with a header of feature names; an empty or NA cell is missing."""
        with open(path, newline="") as handle:
            return [{key: _csv_value(value, self.types.get(key)) for key, value in row.items()}
                    for row in csv.DictReader(handle)]

    def without_label(self, rows: Sequence[Any]) -> list[Any]:
        """Rows copied from the training data may carry the label; the model ignores it."""
        return [{k: v for k, v in row.items() if k != self.label_key} if isinstance(row, Mapping) else row
                for row in rows]

    def check(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Raises RowError naming every bad value (row, feature, value, what is allowed, the
        fix) before anything is sent: the model would otherwise answer for a row the
        curated schema forbids (an unknown category, an impossible or infinite number)."""
        if not rows:
            raise ServingClientError("no rows to predict; give at least one row of feature values")
        problems = [problem for number, row in enumerate(rows) for problem in self.problems(number, row)]
        if problems:
            raise RowError(problems)

    def problems(self, number: int, row: Any) -> list[str]:
        """What is wrong with row `number`, one line each; [] when the schema allows it."""
        where = f"row {number}"
        if not isinstance(row, Mapping):
            return [f"{where} is {type(row).__name__} {_show(row)}, not an object of feature: value; "
                    'give each row as {"feature": value, ...}']
        problems = []
        for name in row:
            if name not in self.columns and name != self.label_key:  # the label is dropped, not sent
                near = difflib.get_close_matches(str(name), self.columns, n=1)
                hint = f"did you mean {near[0]!r}? " if near else ""
                problems.append(f"{where}: unknown feature {name!r} (value {_show(row[name])}); {hint}the schema "
                                f"({self.source}) has {', '.join(sorted(self.columns))}")
        if not any(name in self._used and not _missing(value) for name, value in row.items()):
            return problems or [f"{where} has no feature values (the model uses {', '.join(self.features)}); "
                                "give at least one"]
        for name in self._required_sorted:
            if _missing(row.get(name)):
                problems.append(f"{where}: feature {name!r} is missing; the schema ({self.source}) requires it "
                                "in every row: give a value")
        for name, value in row.items():
            column = self.columns.get(name)
            if column is not None and not _missing(value):
                problem = _value_problem(column, value, self.source)
                if problem:
                    problems.append(f"{where}: feature {name!r} {problem}")
        return problems

    def to_example(self, row: Mapping[str, Any]) -> bytes:
        """A serialized tf.Example; missing values are left out, as in the CSV data."""
        from tensorflow.core.example import example_pb2

        example = example_pb2.Example()
        features = example.features.feature
        for name, value in row.items():
            if _missing(value):
                continue
            kind = self.types[name]
            if kind == schema_pb2.BYTES:
                features[name].bytes_list.value.append(value.encode())
            elif kind == schema_pb2.INT:
                features[name].int64_list.value.append(int(value))
            else:
                features[name].float_list.value.append(float(value))
        return example.SerializeToString()

    def to_instance(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """A serving_raw row: every feature the model uses, keyed by its TF identifier (TF
        signature arguments cannot hold spaces or slashes); NaN or "" where missing. TF
        Serving's JSON parser takes a bare NaN token (its JSON conformance notes), as
        json.dumps writes it."""
        instance: dict[str, Any] = {}
        for name in self.features:
            value = row.get(name)
            if self.types[name] == schema_pb2.BYTES:
                instance[identifier(name)] = "" if _missing(value) else value
            else:
                instance[identifier(name)] = math.nan if _missing(value) else float(value)
        return instance


def _csv_value(text: str | None, kind: int | None) -> Any:
    if text is None or text.strip() in ("", "NA"):
        return None
    if kind in (schema_pb2.FLOAT, schema_pb2.INT):
        try:
            return float(text)
        except ValueError:
            return text  # left for the schema check to name
    return text


def predict_in_process(model_dir: Path, schema: RowSchema,
                       rows: Sequence[Mapping[str, Any]]) -> list[Prediction]:
    """serving_default of a SavedModel in this process, fed serialized tf.Examples as TF
    Serving feeds it: no server needed."""
    rows = schema.without_label(rows)
    schema.check(rows)
    import tensorflow as tf

    signature = tf.saved_model.load(str(model_dir)).signatures[SERVING_DEFAULT]
    outputs = signature(**{EXAMPLES_INPUT: tf.constant([schema.to_example(row) for row in rows])})
    if OUTPUT_PREDICTION in outputs:
        return _values(outputs[OUTPUT_PREDICTION].numpy().tolist())
    classes = outputs[OUTPUT_CLASSES].numpy().tolist() if OUTPUT_CLASSES in outputs else None
    return _predictions(outputs[OUTPUT_LABEL].numpy().tolist(), outputs[OUTPUT_CLASS_ID].numpy().tolist(),
                        outputs[OUTPUT_PROBABILITIES].numpy().tolist(), classes)


def _missing(value: Any) -> bool:
    """None or "" (an empty CSV cell, JSON null) is a missing value. NaN is not: the check
    refuses it, so that a computed NaN is not quietly imputed."""
    return value is None or (isinstance(value, str) and value == "")


def _value_problem(column: _Column, value: Any, source: str) -> str | None:
    """Why the schema forbids a (present) value of the column, and the fix; None: allowed."""
    if column.type == schema_pb2.BYTES:
        if not isinstance(value, str):
            return f"must be text, got {type(value).__name__} {_show(value)}; give one quoted value"
        if column.values is not None and value not in column.values:
            near = difflib.get_close_matches(value, column.values, n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            return (f"is {_show(value)}, not in the schema's domain {column.domain!r} "
                    f"({_listed(sorted(column.values))}); {hint}use one of those values (they are case-sensitive), "
                    f"or add it to the domain in {source} and run the pipeline again")
        return None
    if column.type not in (schema_pb2.FLOAT, schema_pb2.INT):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return (f"must be a number, got {type(value).__name__} {_show(value)}; give a number without quotes, "
                "or null (None) where it is missing")
    if isinstance(value, float) and not math.isfinite(value):
        return (f"is {value!r}, not a finite number; give a finite number, or null (None) where it is "
                "missing")
    if column.type == schema_pb2.FLOAT and abs(value) > FLOAT32_MAX:
        return (f"is {_show(value)}, beyond a 32-bit float (at most ±{FLOAT32_MAX:.7g}: the model would see "
                "infinity); check the value and its unit")
    if column.type == schema_pb2.INT:
        if isinstance(value, float) and not value.is_integer():
            return f"must be a whole number, got {value!r}; round it"
        if not INT64_MIN <= value <= INT64_MAX:
            return f"is {_show(value)}, beyond a 64-bit integer; check the value and its unit"
    if (column.low is not None and value < column.low) or (column.high is not None and value > column.high):
        allowed = (f"from {column.low:g} to {column.high:g}" if column.low is not None and column.high is not None
                   else f"at least {column.low:g}" if column.low is not None else f"at most {column.high:g}")
        return (f"is {_show(value)}, outside the schema's range ({allowed}, {source}); check the value and its "
                "unit, or widen the range there and run the pipeline again")
    return None


def _listed(values: Sequence[str]) -> str:
    shown = ", ".join(values[:MAX_VALUES_SHOWN])
    return shown + (f", ... ({len(values)} values)" if len(values) > MAX_VALUES_SHOWN else "")


def _show(value: Any) -> str:
    """A value as in the row, cut short: a row may hold a long text by mistake."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class ServingClient:
    """Predictions, model status and metadata from a TF Serving server.

    Exactly one of grpc_target ("host:port") or rest_url ("http://host:port"). `version`
    or `label` (e.g. "canary") picks a version; neither: the server's default (latest).
    """

    def __init__(
        self,
        *,
        grpc_target: str | None = None,
        rest_url: str | None = None,
        model_name: str = DEFAULT_MODEL_NAME,
        dataset: str = "penguins",
        version: int | None = None,
        label: str | None = None,
        timeout_s: float = 10.0,
        retries: int = 3,
        backoff_s: float = 0.2,
    ) -> None:
        if (grpc_target is None) == (rest_url is None):
            raise ServingClientError("give exactly one server: a gRPC target (host:port) or a REST URL")
        if version is not None and label is not None:
            raise ServingClientError("give a version or a label, not both")
        self.grpc_target, self.rest_url = grpc_target, (rest_url or "").rstrip("/") or None
        self.model_name, self.version, self.label = model_name, version, label
        self.timeout_s, self.retries, self.backoff_s = timeout_s, retries, backoff_s
        self.schema = RowSchema.for_dataset(dataset)
        self._stubs: tuple | None = None

    # --- public ---------------------------------------------------------------

    def predict(self, rows: Sequence[Mapping[str, Any]]) -> list[Prediction]:
        """Predictions for rows of feature: value (the label, if there, is dropped), checked
        against the curated schema first: RowError names each bad value."""
        rows = self.schema.without_label(rows)
        self.schema.check(rows)
        if self.grpc_target:
            return self._with_retries(lambda: self._grpc_predict(rows))
        return self._with_retries(lambda: self._rest_predict(rows))

    def model_status(self) -> list[dict[str, Any]]:
        """[{version, state}] of the versions the server knows."""
        if self.grpc_target:
            return self._with_retries(self._grpc_status)
        body = self._with_retries(lambda: self._rest("GET", self._rest_path("")))
        return [{"version": int(v["version"]), "state": v["state"]} for v in body["model_version_status"]]

    def model_metadata(self) -> dict[str, Any]:
        """The signatures the server exposes: {name: {inputs: [...], outputs: [...]}}."""
        if self.grpc_target:
            return self._with_retries(self._grpc_metadata)
        body = self._with_retries(lambda: self._rest("GET", self._rest_path("/metadata")))
        signatures = body["metadata"]["signature_def"]["signature_def"]
        return {name: {"inputs": sorted(sig.get("inputs", {})), "outputs": sorted(sig.get("outputs", {}))}
                for name, sig in signatures.items()}

    # --- retries ----------------------------------------------------------------

    def _with_retries(self, call: Callable[[], Any]) -> Any:
        for attempt in range(self.retries + 1):
            try:
                return call()
            except _Unavailable as err:
                if attempt == self.retries:
                    raise ServingClientError(f"{self._where()} is unavailable after {attempt + 1} tries: {err}; "
                                             "check that the server is up and has loaded the model") from None
                time.sleep(self.backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")

    def _where(self) -> str:
        return f"gRPC {self.grpc_target}" if self.grpc_target else f"REST {self.rest_url}"

    # --- gRPC -------------------------------------------------------------------

    def _stub(self):
        if self._stubs is None:
            import grpc
            from tensorflow_serving.apis import model_service_pb2_grpc, prediction_service_pb2_grpc

            channel = grpc.insecure_channel(self.grpc_target)
            self._stubs = (prediction_service_pb2_grpc.PredictionServiceStub(channel),
                           model_service_pb2_grpc.ModelServiceStub(channel))
        return self._stubs

    def _model_spec(self, spec, signature: str | None = None) -> None:
        spec.name = self.model_name
        if signature:
            spec.signature_name = signature
        if self.version is not None:
            spec.version.value = self.version
        elif self.label is not None:
            spec.version_label = self.label

    def _grpc_call(self, method, request):
        import grpc

        try:
            return method(request, timeout=self.timeout_s)
        except grpc.RpcError as err:
            code, details = err.code(), err.details()
            if code == grpc.StatusCode.UNAVAILABLE:
                raise _Unavailable(details) from None
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ServingClientError(f"{self._where()} did not answer within {self.timeout_s} s") from None
            raise ServingClientError(f"{self._where()} refused the request ({code.name}): {details}") from None

    def _grpc_predict(self, rows) -> list[Prediction]:
        from tensorflow.core.framework import types_pb2
        from tensorflow_serving.apis import predict_pb2

        request = predict_pb2.PredictRequest()
        self._model_spec(request.model_spec, SERVING_DEFAULT)  # serialized tf.Examples
        # The TensorProto is filled directly: tf.make_tensor_proto goes through numpy object
        # arrays and costs more than the model call for small batches.
        examples = request.inputs[EXAMPLES_INPUT]
        examples.dtype = types_pb2.DT_STRING
        examples.tensor_shape.dim.add().size = len(rows)
        examples.string_val.extend(self.schema.to_example(r) for r in rows)
        outputs = self._grpc_call(self._stub()[0].Predict, request).outputs
        if OUTPUT_PREDICTION in outputs:
            return _values(list(outputs[OUTPUT_PREDICTION].float_val))
        width = len(outputs[OUTPUT_PROBABILITIES].float_val) // max(len(rows), 1)
        values = list(outputs[OUTPUT_PROBABILITIES].float_val)
        probabilities = [values[i * width:(i + 1) * width] for i in range(len(rows))]
        classes = None
        if OUTPUT_CLASSES in outputs:
            names = list(outputs[OUTPUT_CLASSES].string_val)
            classes = [names[i * width:(i + 1) * width] for i in range(len(rows))]
        return _predictions(list(outputs[OUTPUT_LABEL].string_val), list(outputs[OUTPUT_CLASS_ID].int64_val),
                            probabilities, classes)

    def _grpc_status(self) -> list[dict[str, Any]]:
        from tensorflow_serving.apis import get_model_status_pb2

        request = get_model_status_pb2.GetModelStatusRequest()
        self._model_spec(request.model_spec)
        response = self._grpc_call(self._stub()[1].GetModelStatus, request)
        states = get_model_status_pb2.ModelVersionStatus.State
        return [{"version": s.version, "state": states.Name(s.state)} for s in response.model_version_status]

    def _grpc_metadata(self) -> dict[str, Any]:
        from tensorflow_serving.apis import get_model_metadata_pb2

        request = get_model_metadata_pb2.GetModelMetadataRequest(metadata_field=["signature_def"])
        self._model_spec(request.model_spec)
        response = self._grpc_call(self._stub()[0].GetModelMetadata, request)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signatures)
        return {name: {"inputs": sorted(sig.inputs), "outputs": sorted(sig.outputs)}
                for name, sig in signatures.signature_def.items()}

    # --- REST -------------------------------------------------------------------

    def _rest_path(self, suffix: str) -> str:
        path = f"/v1/models/{self.model_name}"
        if self.version is not None:
            path += f"/versions/{self.version}"
        elif self.label is not None:
            path += f"/labels/{self.label}"
        return path + suffix

    def _rest(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.rest_url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            message = err.read().decode(errors="replace")
            try:
                message = json.loads(message).get("error", message)
            except ValueError:
                pass
            if err.code == 503:
                raise _Unavailable(message) from None
            raise ServingClientError(f"{self._where()} refused the request (HTTP {err.code}): {message}") from None
        except (urllib.error.URLError, ConnectionError) as err:
            reason = getattr(err, "reason", err)
            if isinstance(reason, TimeoutError) or "timed out" in str(reason):
                raise ServingClientError(f"{self._where()} did not answer within {self.timeout_s} s") from None
            raise _Unavailable(str(reason)) from None
        except TimeoutError:
            raise ServingClientError(f"{self._where()} did not answer within {self.timeout_s} s") from None

    def _rest_predict(self, rows) -> list[Prediction]:
        body = {"signature_name": SERVING_RAW, "instances": [self.schema.to_instance(r) for r in rows]}
        predictions = self._rest("POST", self._rest_path(":predict"), body)["predictions"]
        if predictions and not isinstance(predictions[0], Mapping):
            return _values(predictions)  # one output: TF Serving's row format gives the bare value
        classes = [p[OUTPUT_CLASSES] for p in predictions] if OUTPUT_CLASSES in predictions[0] else None
        return _predictions([p[OUTPUT_LABEL] for p in predictions], [p[OUTPUT_CLASS_ID] for p in predictions],
                            [p[OUTPUT_PROBABILITIES] for p in predictions], classes)


class _Unavailable(Exception):
    """The server is not (yet) there: worth another try."""


def _values(values: list) -> list[Prediction]:
    return [Prediction(value=float(value)) for value in values]


def _predictions(labels: list, class_ids: list, probabilities: list,
                 classes: list | None = None) -> list[Prediction]:
    """classes: each row's label values (the `classes` output), None from an older model."""
    return [Prediction(_text(label), int(class_id), [float(p) for p in row],
                       classes=None if classes is None else [_text(name) for name in classes[number]])
            for number, (label, class_id, row) in enumerate(zip(labels, class_ids, probabilities))]


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
