"""`turbotfx predict`: rows in (JSON or CSV), label and probabilities out — from the latest
pushed model in-process, or from a TF Serving server over gRPC or REST."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

from pipeline import config as config_lib
from pipeline.config import ConfigError, PipelineConfig
from serving import push
from serving.client import Prediction, RowSchema, ServingClient
from serving.commands import workspace_config


def add_parser(commands: argparse._SubParsersAction) -> None:
    predict = commands.add_parser("predict", help="predict rows with the latest pushed model or a TF Serving server")
    rows = predict.add_mutually_exclusive_group(required=True)
    rows.add_argument("--json", help='one row or a list of rows: \'{"island": "Biscoe", "bill_length_mm": 46.5}\'')
    rows.add_argument("--csv", help="CSV file with a header of feature names (empty cell: missing)")
    server = predict.add_mutually_exclusive_group()
    server.add_argument("--grpc", help="TF Serving gRPC target HOST:PORT (default: in-process, no server)")
    server.add_argument("--rest", help="TF Serving REST URL, e.g. http://localhost:8501")
    which = predict.add_mutually_exclusive_group()
    which.add_argument("--label", help="server version label, e.g. stable or canary")
    which.add_argument("--version", type=int, help="server model version")
    predict.add_argument("--home", help=f"workspace (default: ${config_lib.HOME_ENV_VAR} or ./workspace)")
    predict.add_argument("--dataset", default="penguins", help="whose features the rows have (default: penguins)")
    predict.add_argument("--model-name", help="model name (default: the dataset's)")
    predict.add_argument("--timeout", type=float, default=10.0, help="seconds per server request (default: 10)")
    predict.add_argument("--format", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    config = workspace_config(args)
    rows = _rows(args, config)
    if args.grpc or args.rest:
        client = ServingClient(grpc_target=args.grpc, rest_url=args.rest, model_name=config.model_name,
                               dataset=config.dataset, version=args.version, label=args.label,
                               timeout_s=args.timeout)
        predictions, source = client.predict(rows), args.grpc or args.rest
    else:
        if args.label or args.version:
            raise ConfigError("--label and --version pick a version on a server: add --grpc or --rest")
        predictions, source = predict_in_process(config, rows)
    if args.format == "json":
        print(json.dumps({"model": source, "predictions": [p.__dict__ for p in predictions]}, indent=2))
    else:
        print(f"model: {source}")
        for number, prediction in enumerate(predictions):
            probabilities = ", ".join(f"{p:.3f}" for p in prediction.probabilities)
            print(f"row {number}: {prediction.label}  "
                  f"(p={prediction.probabilities[prediction.class_id]:.3f}; probabilities [{probabilities}])")
    return 0


def predict_in_process(config: PipelineConfig, rows: list[dict[str, Any]]) -> tuple[list[Prediction], str]:
    """serving_default of the newest pushed version, with serialized tf.Examples, as TF Serving runs it."""
    versions = push.versions(config.serving_dir)
    if not versions:
        raise ConfigError(f"no pushed model under {config.serving_dir}: run the pipeline first (`turbotfx run`)")
    schema = RowSchema.for_dataset(config.dataset)
    schema.check(rows)
    import tensorflow as tf

    model_dir = config.serving_dir / str(versions[-1])
    signature = tf.saved_model.load(str(model_dir)).signatures["serving_default"]
    outputs = signature(examples=tf.constant([schema.to_example(row) for row in rows]))
    predictions = [Prediction(label.decode(), int(class_id), [float(p) for p in row])
                   for label, class_id, row in zip(outputs["label"].numpy(), outputs["class_id"].numpy(),
                                                   outputs["probabilities"].numpy())]
    return predictions, str(model_dir)


def _rows(args: argparse.Namespace, config: PipelineConfig) -> list[dict[str, Any]]:
    from trainer_module import features

    label_key = features.for_dataset(config.dataset).label_key
    if args.json is not None:
        try:
            parsed = json.loads(args.json)
        except ValueError as err:
            raise ConfigError(f"--json is not valid JSON ({err}); give an object or a list of objects") from None
        rows = parsed if isinstance(parsed, list) else [parsed]
    else:
        path = Path(args.csv)
        if not path.is_file():
            raise ConfigError(f"--csv {path}: no such file")
        schema = RowSchema.for_dataset(config.dataset)
        with open(path, newline="") as handle:
            rows = [{key: _csv_value(value, schema.types.get(key)) for key, value in row.items()}
                    for row in csv.DictReader(handle)]
    # The label may come along (a row copied from the training data); the model ignores it.
    return [{k: v for k, v in row.items() if k != label_key} if isinstance(row, dict) else row for row in rows]


def _csv_value(text: str | None, kind) -> Any:
    from tensorflow_metadata.proto.v0 import schema_pb2

    if text is None or text.strip() in ("", "NA"):
        return None
    if kind in (schema_pb2.FLOAT, schema_pb2.INT):
        try:
            return float(text)
        except ValueError:
            return text  # left for the schema check to name
    return text
