"""TF Serving warmup requests: PredictionLog records built from real eval examples.

TF Serving replays `assets.extra/tf_serving_warmup_requests` when it loads a version,
so the first real request does not pay for graph initialisation. TFX writes them only
inside InfraValidator; here the serving check writes them (after replaying them itself)
and the Pusher ships them in every pushed SavedModel.
"""

from __future__ import annotations

import glob
import os
from typing import Iterable, Iterator, Sequence

import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from serving.contract import EXAMPLES_INPUT, SERVING_DEFAULT

WARMUP_FILE = "tf_serving_warmup_requests"
# Where TF Serving looks for the warmup file inside a SavedModel.
IN_SAVED_MODEL = os.path.join("assets.extra", WARMUP_FILE)


def read_examples(examples_uri: str, split: str = "eval", limit: int = 64) -> list[bytes]:
    """Up to `limit` serialized tf.Examples of one split of an ExampleGen output."""
    files = sorted(glob.glob(os.path.join(examples_uri, f"Split-{split}", "*")))
    if not files:
        raise FileNotFoundError(f"no {split} split under {examples_uri}")
    records = tf.data.TFRecordDataset(files, compression_type="GZIP").take(limit)
    return [record.numpy() for record in records]


def prediction_logs(serialized: Sequence[bytes], model_name: str,
                    batch_sizes: Iterable[int] = (1, 8, 64)) -> list[prediction_log_pb2.PredictionLog]:
    """One Predict request per batch size (examples reused when there are too few)."""
    logs = []
    for batch_size in batch_sizes:
        batch = [serialized[i % len(serialized)] for i in range(batch_size)]
        request = predict_pb2.PredictRequest(
            model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SERVING_DEFAULT))
        request.inputs[EXAMPLES_INPUT].CopyFrom(tf.make_tensor_proto(batch, dtype=tf.string))
        logs.append(prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request)))
    return logs


def write(path: str, logs: Sequence[prediction_log_pb2.PredictionLog]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for log in logs:
            writer.write(log.SerializeToString())


def read(path: str) -> Iterator[prediction_log_pb2.PredictionLog]:
    for record in tf.data.TFRecordDataset([path]):
        yield prediction_log_pb2.PredictionLog.FromString(record.numpy())

