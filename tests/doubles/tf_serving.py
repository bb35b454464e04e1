"""A TEST DOUBLE of TF Serving, for the client's tests and the serving benchmark.

tensorflow_model_server cannot be installed on these machines (no PyPI or Debian
package, no Docker engine), so this serves pushed SavedModels with TF's Python runtime
behind the same gRPC services (PredictionService, ModelService) and REST routes
(/v1/models/<name>[/versions/N | /labels/L][:predict | /metadata]) on 127.0.0.1.
What is under test is the client's requests and error handling, not this server.
Faults on demand: the first N requests answer UNAVAILABLE (gRPC) / 503 (REST), or
every request waits before answering.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

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


class FakeTfServing:
    def __init__(self, model_name: str, versions: dict[int, str], labels: dict[str, int] | None = None) -> None:
        self.model_name = model_name
        self.models = {version: forest_ops.load(path) for version, path in versions.items()}
        self.signature_defs = {version: _signature_defs(path) for version, path in versions.items()}
        self.labels = labels or {}
        self.requests: list[dict] = []  # what arrived: protocol, label/version asked, version served
        self.unavailable_first = 0
        self.delay_s = 0.0
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
        self._grpc.start()
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._grpc.stop(grace=None)
        self._http.shutdown()
        self._http.server_close()

    # Shared by both protocols: a version for the request, or an error message.
    def admit(self, protocol: str, name: str, version: int | None, label: str | None) -> tuple[int | None, str]:
        record = {"protocol": protocol, "version": version, "label": label}
        with self._lock:
            self.requests.append(record)
            if self.unavailable_first > 0:
                self.unavailable_first -= 1
                return None, "unavailable"
        if self.delay_s:
            time.sleep(self.delay_s)
        if name != self.model_name:
            return None, f"Servable not found for request: Latest({name})"
        if label is not None:
            if label not in self.labels:
                return None, f"Unrecognized servable version label: {label}"
            version = self.labels[label]
        version = max(self.models) if version is None else version
        if version not in self.models:
            return None, f"Servable not found for request: Specific({name}, {version})"
        record["served"] = version
        return version, ""


class _PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, server: FakeTfServing) -> None:
        self.server = server

    def _version(self, spec, context) -> int:
        version, error = self.server.admit(
            "grpc", spec.name, spec.version.value if spec.HasField("version") else None,
            spec.version_label or None)
        if error == "unavailable":
            context.abort(grpc.StatusCode.UNAVAILABLE, "the model is loading")
        if error:
            context.abort(grpc.StatusCode.NOT_FOUND, error)
        return version

    def Predict(self, request, context):
        version = self._version(request.model_spec, context)
        signature = self.server.models[version].signatures[request.model_spec.signature_name or "serving_default"]
        outputs = signature(**{key: _tensor(value) for key, value in request.inputs.items()})
        response = predict_pb2.PredictResponse()
        response.model_spec.name = self.server.model_name
        response.model_spec.version.value = version
        for key, value in outputs.items():
            _fill(response.outputs[key], value.numpy())
        return response

    def GetModelMetadata(self, request, context):
        version = self._version(request.model_spec, context)
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
        _PredictionService(self.server)._version(request.model_spec, context)
        response = get_model_status_pb2.GetModelStatusResponse()
        for version in sorted(self.server.models):
            status = response.model_version_status.add()
            status.version, status.state = version, get_model_status_pb2.ModelVersionStatus.AVAILABLE
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

        def _admit(self):
            name, version, label, suffix = self._route()
            served, error = server.admit("rest", name, version, label)
            if error:
                self._reply(503 if error == "unavailable" else 404, {"error": error})
                return None, suffix
            return served, suffix

        def do_GET(self) -> None:
            version, suffix = self._admit()
            if version is None:
                return
            if suffix == "metadata":
                signatures = {name: {"inputs": {k: {} for k in s.inputs}, "outputs": {k: {} for k in s.outputs}}
                              for name, s in server.signature_defs[version].items()}
                self._reply(200, {"model_spec": {"name": server.model_name, "version": str(version)},
                                  "metadata": {"signature_def": {"signature_def": signatures}}})
            else:
                self._reply(200, {"model_version_status": [
                    {"version": str(v), "state": "AVAILABLE", "status": {"error_code": "OK"}}
                    for v in sorted(server.models)]})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))  # takes bare NaN, like TF Serving
            version, suffix = self._admit()
            if version is None:
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
