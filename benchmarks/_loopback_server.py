"""A minimal stand-in for TF Serving's gRPC Predict, for the serving benchmark.

tensorflow_model_server cannot be installed here, so this serves one SavedModel's
serving_default with TF's Python runtime behind PredictionService.Predict on 127.0.0.1,
answering as TF Serving does: every signature output as a typed TensorProto (float_val,
int64_val, string_val) with its shape. `serving.client.ServingClient(schema=..., grpc_target=...)`
talks to it unchanged. Nothing else of TF Serving is here (no REST, no model status or
metadata, no versions policy): the benchmark times Predict only.
"""

from __future__ import annotations

from concurrent import futures
from pathlib import Path

import grpc
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving import forest_ops
from serving.contract import EXAMPLES_INPUT, SERVING_DEFAULT

# The TensorProto field TF Serving fills for each dtype the signature returns.
_VALUE_FIELDS = {tf.float32: "float_val", tf.int64: "int64_val", tf.string: "string_val"}


class LoopbackServing:
    """`with LoopbackServing(name, version, model_dir) as server:` serves at server.grpc_target."""

    def __init__(self, model_name: str, version: int, model_dir: Path) -> None:
        self.model_name, self.version = model_name, version
        self.signature = forest_ops.load(str(model_dir)).signatures[SERVING_DEFAULT]
        # The benchmark sends one request at a time: a few threads are plenty.
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(_Predictor(self), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")  # 0: the OS picks a free port
        self.grpc_target = f"127.0.0.1:{port}"

    def __enter__(self) -> LoopbackServing:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)


class _Predictor(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, serving: LoopbackServing) -> None:
        self.serving = serving

    def Predict(self, request: predict_pb2.PredictRequest,
                context: grpc.ServicerContext) -> predict_pb2.PredictResponse:
        spec = request.model_spec
        # Refused as TF Serving refuses them, so a wrong request fails the benchmark loudly.
        if spec.name != self.serving.model_name:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: Latest({spec.name})")
        if spec.signature_name not in ("", SERVING_DEFAULT) or set(request.inputs) != {EXAMPLES_INPUT}:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"this server takes only {SERVING_DEFAULT} with one input, {EXAMPLES_INPUT!r}")
        # Serialized tf.Examples straight from string_val: tf.make_ndarray goes through numpy objects.
        examples = tf.constant(list(request.inputs[EXAMPLES_INPUT].string_val))
        outputs = self.serving.signature(**{EXAMPLES_INPUT: examples})
        response = predict_pb2.PredictResponse()
        response.model_spec.name = self.serving.model_name
        response.model_spec.version.value = self.serving.version
        response.model_spec.signature_name = SERVING_DEFAULT
        for key, tensor in outputs.items():
            proto = response.outputs[key]
            proto.dtype = tensor.dtype.as_datatype_enum
            for size in tensor.shape:
                proto.tensor_shape.dim.add().size = size
            getattr(proto, _VALUE_FIELDS[tensor.dtype]).extend(tensor.numpy().ravel().tolist())
        return response
