"""The exec properties that run a CSV ExampleGen executor directly on a folder of CSV files:
every *.csv as one input, hash-split into train and eval."""

from __future__ import annotations

from pathlib import Path

from tfx.proto import example_gen_pb2
from tfx.types import standard_component_specs
from tfx.utils import proto_utils

SPLITS = ("train", "eval")


def csv_properties(data: Path, buckets: tuple[int, int] = (3, 2)) -> dict:
    splits = [example_gen_pb2.SplitConfig.Split(name=n, hash_buckets=b) for n, b in zip(SPLITS, buckets)]
    return {
        standard_component_specs.INPUT_BASE_KEY: str(data),
        standard_component_specs.INPUT_CONFIG_KEY: proto_utils.proto_to_json(example_gen_pb2.Input(
            splits=[example_gen_pb2.Input.Split(name="single_split", pattern="*.csv")])),
        standard_component_specs.OUTPUT_CONFIG_KEY: proto_utils.proto_to_json(example_gen_pb2.Output(
            split_config=example_gen_pb2.SplitConfig(splits=splits))),
    }
