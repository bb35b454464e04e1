"""A TEST DOUBLE of TF Serving, for the client's tests and the serving benchmark.

tensorflow_model_server cannot be installed on these machines (no PyPI or Debian
package, no Docker engine), so this serves pushed SavedModels with TF's Python runtime
behind the same gRPC services (PredictionService, ModelService) and REST routes
(/v1/models/<name>[/versions/N | /labels/L][:predict | /metadata]) on 127.0.0.1.
What is under test is the client's requests and error handling, not this server.
Faults on demand: the first N requests answer UNAVAILABLE (gRPC) / 503 (REST), or
every request waits before answering.

Versions load and unload as TF Serving's manager moves them (server_core.cc,
basic_manager.cc, get_model_status_impl.cc, TF Serving 2.16): a version that appears
(`loading_s`, `add_version`) is START, then LOADING, then AVAILABLE; a dropped one
(`drop_version`) UNLOADING, then END. GetModelStatus and GET /v1/models/NAME report that
state (a label in the request is ignored, as TF Serving does); Predict and metadata reach
AVAILABLE versions only: any other answers NOT_FOUND / 404 "Servable not found for
request: Specific(NAME, VERSION)", the latest is the newest AVAILABLE version, and a label
may name a version still loading (--allow_version_labels_for_unavailable_models). An
unknown label is INVALID_ARGUMENT / 400. Default: every version AVAILABLE at once.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Mapping

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    get_model_status_pb2,
    model_service_pb2_grpc,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from serving import forest_ops

# Of a version's load, the first tenth (at most this long) is START: the manager has seen
# the version, its loader has not begun.
START_S = 0.1
# The HTTP status of each gRPC code, as TF Serving's REST server maps them (http_server.cc).
HTTP_STATUS = {grpc.StatusCode.NOT_FOUND: 404, grpc.StatusCode.INVALID_ARGUMENT: 400,
               grpc.StatusCode.UNAVAILABLE: 503}


class Refused(Exception):
    """A request the server answers with an error: the gRPC code and TF Serving's message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


class FakeTfServing:
    """`versions`: {version: SavedModel directory}; `labels`: {label: version} (may be
    changed while serving, as a reloaded models.config does); `loading_s`: {version:
    seconds} a version takes to load, from the server's start (default: AVAILABLE at once)."""

    def __init__(self, model_name: str, versions: dict[int, str], labels: dict[str, int] | None = None,
                 loading_s: Mapping[int, float] | None = None) -> None:
        self.model_name = model_name
        self.models = {version: forest_ops.load(path) for version, path in versions.items()}
        self.signature_defs = {version: _signature_defs(path) for version, path in versions.items()}
        self.labels = labels or {}
        self.requests: list[dict] = []  # what arrived: protocol, call, label/version asked, version served
        self.unavailable_first = 0
        self.delay_s = 0.0
        self._loading_s = dict(loading_s or {})
        # version: (when it appeared, when it is AVAILABLE); dropped ones: when they reach END.
        self._timeline: dict[int, tuple[float, float]] = {}
        self._dropped: dict[int, float] = {}
        self._lock = threading.Lock()
        self._grpc = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(_PredictionService(self), self._grpc)
        model_service_pb2_grpc.add_ModelServiceServicer_to_server(_ModelService(self), self._grpc)
        self.grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), _rest_handler(self))
        self.rest_port = self._http.server_address[1]

    @property
    def grpc_target(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def rest_url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def __enter__(self) -> FakeTfServing:
        now = time.monotonic()
        self._timeline = {version: (now, now + self._loading_s.get(version, 0.0)) for version in self.models}
        self._grpc.start()
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._grpc.stop(grace=None)
        self._http.shutdown()
        self._http.server_close()

    # --- versions coming and going -------------------------------------------------

    def add_version(self, version: int, path: str, loading_s: float = 0.0) -> None:
        """A new version directory appears (a push, a models.config naming it): START, then
        LOADING, AVAILABLE loading_s seconds from now."""
        model, signature_defs = forest_ops.load(path), _signature_defs(path)
        with self._lock:
            self.models[version], self.signature_defs[version] = model, signature_defs
            self._dropped.pop(version, None)
            now = time.monotonic()
            self._timeline[version] = (now, now + loading_s)

    def drop_version(self, version: int, unloading_s: float = 0.0) -> None:
        """The version leaves the served set: no request reaches it from now on; its state is
        UNLOADING for unloading_s seconds, then END (TF Serving keeps reporting it)."""
        with self._lock:
            self._dropped[version] = time.monotonic() + unloading_s

    def state(self, version: int) -> str:
        """START, LOADING, AVAILABLE, UNLOADING or END: what GetModelStatus reports."""
        now = time.monotonic()
        if version in self._dropped:
            return "UNLOADING" if now < self._dropped[version] else "END"
        appeared, available = self._timeline[version]
        if now >= available:
            return "AVAILABLE"
        return "START" if now < appeared + min(START_S, (available - appeared) / 10) else "LOADING"

    # --- requests -------------------------------------------------------------------

    def _arrive(self, record: dict) -> None:
        """Logs a request and applies the faults asked for (they come before any lookup)."""
        with self._lock:
            self.requests.append(record)
            if self.unavailable_first > 0:
                self.unavailable_first -= 1
                record["error"] = "UNAVAILABLE"
                raise Refused(grpc.StatusCode.UNAVAILABLE, "the model is loading")
        if self.delay_s:
            time.sleep(self.delay_s)

    # Shared by both protocols: the version that serves a Predict or metadata request.
    def admit(self, protocol: str, name: str, version: int | None, label: str | None,
              call: str = "predict") -> int:
        record = {"protocol": protocol, "call": call, "version": version, "label": label}
        self._arrive(record)
        try:
            if label is not None:  # ServerCore::GetModelVersionForLabel
                if name != self.model_name or label not in self.labels:
                    raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"Unrecognized servable version label: {label}")
                version = self.labels[label]
            # BasicManager's serving map holds AVAILABLE versions only.
            available = [v for v in self._timeline if self.state(v) == "AVAILABLE"] if name == self.model_name else []
            wanted = f"Latest({name})" if version is None else f"Specific({name}, {version})"
            version = max(available, default=None) if version is None else version
            if version not in available:
                raise Refused(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: {wanted}")
        except Refused as refused:
            record["error"] = refused.code.name
            raise
        record["served"] = version
        return version

    def status(self, protocol: str, name: str, version: int | None) -> list[tuple[int, str]]:
        """[(version, state)] as GetModelStatus answers: the version asked for, else every
        version the server has seen (a label in the request is ignored)."""
        self._arrive({"protocol": protocol, "call": "status", "version": version, "label": None})
        known = sorted(self._timeline) if name == self.model_name else []
        if version is not None:
            if version not in known:
                raise Refused(grpc.StatusCode.NOT_FOUND, f"Could not find version {version} of model {name}")
            return [(version, self.state(version))]
        if not known:
            raise Refused(grpc.StatusCode.NOT_FOUND, f"Could not find any versions of model {name}")
        return [(v, self.state(v)) for v in known]


class _PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, server: FakeTfServing) -> None:
        self.server = server

    def _version(self, spec, context, call: str) -> int:
        try:
            return self.server.admit("grpc", spec.name, spec.version.value if spec.HasField("version") else None,
                                     spec.version_label or None, call)
        except Refused as refused:
            context.abort(refused.code, refused.message)
            raise AssertionError("unreachable: abort raises") from None

    def Predict(self, request, context):
        version = self._version(request.model_spec, context, "predict")
        signature = self.server.models[version].signatures[request.model_spec.signature_name or "serving_default"]
        outputs = signature(**{key: _tensor(value) for key, value in request.inputs.items()})
        response = predict_pb2.PredictResponse()
        response.model_spec.name = self.server.model_name
        response.model_spec.version.value = version
        for key, value in outputs.items():
            _fill(response.outputs[key], value.numpy())
        return response

    def GetModelMetadata(self, request, context):
        version = self._version(request.model_spec, context, "metadata")
        signatures = get_model_metadata_pb2.SignatureDefMap()
        for name, signature in self.server.signature_defs[version].items():
            signatures.signature_def[name].CopyFrom(signature)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = self.server.model_name
        response.metadata["signature_def"].Pack(signatures)
        return response


class _ModelService(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, server: FakeTfServing) -> None:
        self.server = server

    def GetModelStatus(self, request, context):
        spec = request.model_spec
        try:
            states = self.server.status("grpc", spec.name, spec.version.value if spec.HasField("version") else None)
        except Refused as refused:
            context.abort(refused.code, refused.message)
        response = get_model_status_pb2.GetModelStatusResponse()
        for version, state in states:
            status = response.model_version_status.add()
            status.version, status.state = version, get_model_status_pb2.ModelVersionStatus.State.Value(state)
        return response


def _rest_handler(server: FakeTfServing):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # quiet: the tests read the request log instead
            pass

        def _route(self) -> tuple[str, int | None, str | None, str]:
            path, _, verb = self.path.partition(":")
            parts = path.strip("/").split("/")  # v1 models NAME [versions N | labels L] [metadata]
            suffix = "metadata" if parts[-1] == "metadata" else verb
            parts = parts[:-1] if parts[-1] == "metadata" else parts
            version = int(parts[4]) if len(parts) > 4 and parts[3] == "versions" else None
            label = parts[4] if len(parts) > 4 and parts[3] == "labels" else None
            return parts[2], version, label, suffix

        def _reply(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _refuse(self, refused: Refused) -> None:
            self._reply(HTTP_STATUS[refused.code], {"error": refused.message})

        def do_GET(self) -> None:
            name, version, label, suffix = self._route()
            try:
                if suffix != "metadata":
                    states = server.status("rest", name, version)
                    self._reply(200, {"model_version_status": [
                        {"version": str(v), "state": state, "status": {"error_code": "OK", "error_message": ""}}
                        for v, state in states]})
                    return
                served = server.admit("rest", name, version, label, "metadata")
            except Refused as refused:
                self._refuse(refused)
                return
            signatures = {name: {"inputs": {k: {} for k in s.inputs}, "outputs": {k: {} for k in s.outputs}}
                          for name, s in server.signature_defs[served].items()}
            self._reply(200, {"model_spec": {"name": server.model_name, "version": str(served)},
                              "metadata": {"signature_def": {"signature_def": signatures}}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))  # takes bare NaN, like TF Serving
            name, asked, label, _ = self._route()
            try:
                version = server.admit("rest", name, asked, label)
            except Refused as refused:
                self._refuse(refused)
                return
            signature = server.models[version].signatures[body.get("signature_name", "serving_default")]
            specs = signature.structured_input_signature[1]
            instances = body["instances"]
            inputs = {key: tf.constant(np.array([row[key] for row in instances]), dtype=spec.dtype)
                      for key, spec in specs.items()}
            outputs = {key: value.numpy() for key, value in signature(**inputs).items()}
            if len(outputs) == 1:
                # TF Serving's row format omits the name of a signature's only output.
                (only,) = outputs.values()
                predictions = [_json_value(only[i]) for i in range(len(instances))]
            else:
                predictions = [{key: _json_value(value[i]) for key, value in outputs.items()}
                               for i in range(len(instances))]
            self._reply(200, {"predictions": predictions})

    return Handler


def _json_value(value):
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value]
    return value.item() if hasattr(value, "item") else value


def _signature_defs(saved_model_dir: str) -> dict:
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((Path(saved_model_dir) / "saved_model.pb").read_bytes())
    return {name: signature for name, signature in saved_model.meta_graphs[0].signature_def.items()
            if not name.startswith("__")}


def _tensor(proto) -> tf.Tensor:
    """A request TensorProto as a tensor; string batches straight from string_val."""
    if proto.dtype == types_pb2.DT_STRING and proto.string_val:
        return tf.constant(list(proto.string_val))
    return tf.constant(tf.make_ndarray(proto))


def _fill(proto, array: np.ndarray) -> None:
    """A response TensorProto filled field by field (tf.make_tensor_proto is slower)."""
    for size in array.shape:
        proto.tensor_shape.dim.add().size = size
    if array.dtype == np.float32:
        proto.dtype = types_pb2.DT_FLOAT
        proto.float_val.extend(array.ravel().tolist())
    elif array.dtype == np.int64:
        proto.dtype = types_pb2.DT_INT64
        proto.int64_val.extend(array.ravel().tolist())
    elif array.dtype == object:
        proto.dtype = types_pb2.DT_STRING
        proto.string_val.extend(array.ravel().tolist())
    else:
        proto.CopyFrom(tf.make_tensor_proto(array))
