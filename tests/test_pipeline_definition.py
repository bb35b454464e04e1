"""What the pipeline definition builds from a dataset file, without running it."""

from __future__ import annotations

import json

import pytest

from pipeline import datasets
from pipeline.config import PipelineConfig
from pipeline.pipeline import create_pipeline


def _example_gen(config: PipelineConfig):
    return next(c for c in create_pipeline(config, data_root=config.home_path).components if "ExampleGen" in c.id)


@pytest.mark.parametrize("fmt, pattern, executor", [
    ("csv", "*.csv", "components.csv_example_gen.executor"),
    ("parquet", "*.parquet", "components.parquet_example_gen.executor"),
])
def test_example_gen_reads_only_the_formats_files(tmp_path, fmt, pattern, executor):
    # A dataset file or a .DS_Store beside the data must not be read as data.
    (tmp_path / "data").mkdir()
    schema = datasets.load("penguins").schema
    dataset_file = tmp_path / "mine.toml"
    dataset_file.write_text(datasets.load("penguins").text().replace('generate = "penguins"', 'data_root = "data"')
                            .replace('format = "csv"', f'format = "{fmt}"')
                            .replace('schema = "penguins.schema.pbtxt"', f'schema = "{schema}"'))
    example_gen = _example_gen(PipelineConfig(home=str(tmp_path / "ws"), dataset=str(dataset_file)))
    splits = json.loads(example_gen.exec_properties["input_config"])["splits"]
    assert splits == [{"name": "single_split", "pattern": pattern}]
    spec = example_gen.executor_spec
    assert executor in f"{spec.executor_class.__module__}"
