"""A client for TF Serving over gRPC and REST, with rows checked against the schema first.

gRPC sends `PredictionService.Predict` to `serving_default` with serialized tf.Examples
(tensorflow-serving-api); REST posts `instances` rows of named features to
`serving_raw` at /v1/models/<name>[/versions/N | /labels/L]:predict. Both retry with
backoff when the server is unavailable (starting, reloading) and while the version asked
for is still loading (TF Serving answers NOT_FOUND / 404 until it is AVAILABLE: the
client tells that from a version that is not there by the model's status), and both fail
a bad row before anything is sent, naming the row and the feature (serving/rows.py).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from serving import forest_ops
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
from serving.errors import ServingClientError
from serving.rows import RowSchema

DEFAULT_GRPC_PORT = 8500
DEFAULT_REST_PORT = 8501
DEFAULT_MODEL_NAME = "penguins"
# GetModelStatus states of a version TF Serving has seen but not yet loaded.
LOADING_STATES = ("START", "LOADING")


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


def predict_in_process(model_dir: Path, schema: RowSchema,
                       rows: Sequence[Mapping[str, Any]]) -> list[Prediction]:
    """serving_default of a SavedModel in this process, fed serialized tf.Examples as TF
    Serving feeds it: no server needed."""
    rows = schema.without_label(rows)
    schema.check(rows)
    import tensorflow as tf

    signature = forest_ops.load(str(model_dir)).signatures[SERVING_DEFAULT]
    outputs = signature(**{EXAMPLES_INPUT: tf.constant([schema.to_example(row) for row in rows])})
    if OUTPUT_PREDICTION in outputs:
        return _values(outputs[OUTPUT_PREDICTION].numpy().tolist())
    classes = outputs[OUTPUT_CLASSES].numpy().tolist() if OUTPUT_CLASSES in outputs else None
    return _predictions(outputs[OUTPUT_LABEL].numpy().tolist(), outputs[OUTPUT_CLASS_ID].numpy().tolist(),
                        outputs[OUTPUT_PROBABILITIES].numpy().tolist(), classes)


class ServingClient:
    """Predictions, model status and metadata from a TF Serving server.

    Exactly one of grpc_target ("host:port") or rest_url ("http://host:port"). `schema`
    (serving/rows.py) checks and encodes the rows of the model. `version` or `label`
    (e.g. "canary") picks a version; neither: the server's default (latest).
    """

    def __init__(
        self,
        *,
        schema: RowSchema,
        grpc_target: str | None = None,
        rest_url: str | None = None,
        model_name: str = DEFAULT_MODEL_NAME,
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
        self.schema = schema
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
        """[{version, state}] of the versions the server knows (state: START, LOADING,
        AVAILABLE, UNLOADING or END)."""
        return self._with_retries(self._status)

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
                reason = str(err)
            except _NotFound as err:
                loading = self._still_loading(err.details)
                if loading is None:
                    raise ServingClientError(err.refusal) from None
                reason = loading
            if attempt == self.retries:
                raise ServingClientError(f"{self._where()} is unavailable after {attempt + 1} tries: {reason}; "
                                         "check that the server is up and has loaded the model") from None
            time.sleep(self.backoff_s * 2 ** attempt)
        raise AssertionError("unreachable")

    def _still_loading(self, details: str) -> str | None:
        """Why a "Servable not found" is worth another try: the version it names (a label
        resolves to one: Specific(name, version)), or for the latest any version, is START
        or LOADING in the model's status. None when not (no such version, one unloaded)."""
        specific = re.search(rf"Servable not found for request: Specific\({re.escape(self.model_name)}, (\d+)\)",
                             details)
        if specific is None and f"Servable not found for request: Latest({self.model_name})" not in details:
            return None
        try:
            states = self._status()
        except (ServingClientError, _Unavailable, _NotFound):
            return None
        loading = [s for s in states if s["state"] in LOADING_STATES
                   and (specific is None or s["version"] == int(specific.group(1)))]
        if not loading:
            return None
        return f"version {loading[0]['version']} of '{self.model_name}' is not loaded yet ({loading[0]['state']})"

    def _status(self) -> list[dict[str, Any]]:
        if self.grpc_target:
            return self._grpc_status()
        body = self._rest("GET", self._rest_path(""))
        return [{"version": int(v["version"]), "state": v["state"]} for v in body["model_version_status"]]

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
            if code == grpc.StatusCode.NOT_FOUND:
                raise _NotFound(f"{self._where()} refused the request ({code.name}): {details}", details) from None
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
        assert self.rest_url is not None, "a REST call on a gRPC client"
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
            if err.code == 404:
                raise _NotFound(f"{self._where()} refused the request (HTTP 404): {message}", message) from None
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


class _NotFound(Exception):
    """NOT_FOUND / 404: the version asked for is not served, perhaps only not yet (loading)."""

    def __init__(self, refusal: str, details: str) -> None:
        super().__init__(refusal)
        self.refusal, self.details = refusal, details


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
