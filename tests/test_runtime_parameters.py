"""Runtime parameters reach the executors that read them; Beam args per runner."""

from __future__ import annotations

import json

import pytest
import tensorflow_model_analysis as tfma
from google.protobuf import json_format

from components.reporting_evaluator import executor as reporting_evaluator
from components.reporting_trainer import executor as reporting_trainer
from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.pipeline import eval_config
from pipeline.runners import beam_args


def bounds(config_json: str, class_name: str, side: str = "lower_bound") -> list[float]:
    config = tfma.EvalConfig()
    json_format.Parse(config_json, config)
    return [getattr(per_slice.threshold.value_threshold, side).value
            for spec in config.metrics_specs for metric in spec.metrics
            if metric.class_name == class_name
            for per_slice in metric.per_slice_thresholds]


def test_blessing_threshold_replaces_the_compiled_threshold():
    compiled = json_format.MessageToJson(eval_config(PipelineConfig(blessing_threshold=0.6)))
    assert bounds(compiled, "SparseCategoricalAccuracy") == [0.6]
    props = {"eval_config": compiled, reporting_evaluator.THRESHOLD_KEY: 0.93}
    overridden = reporting_evaluator.with_runtime_threshold(props)
    assert bounds(overridden["eval_config"], "SparseCategoricalAccuracy") == [0.93]
    # The change threshold against the baseline stays as compiled.
    assert "changeThreshold" in overridden["eval_config"] or "change_threshold" in overridden["eval_config"]
    assert props["eval_config"] == compiled  # the caller's dict is not changed
    assert reporting_evaluator.with_runtime_threshold({"eval_config": compiled}) == {"eval_config": compiled}


def test_blessing_threshold_out_of_range_names_the_parameter():
    compiled = json_format.MessageToJson(eval_config(PipelineConfig()))
    with pytest.raises(ValueError, match="set the 'blessing_threshold' pipeline parameter"):
        reporting_evaluator.with_runtime_threshold({"eval_config": compiled, "blessing_threshold": 1.5})


def test_epochs_replaces_custom_config_epochs():
    props = {"custom_config": json.dumps({"epochs": 20, "learning_rate": 0.01}), "epochs": 3.0}
    overridden = reporting_trainer.with_runtime_epochs(props)
    assert json.loads(overridden["custom_config"]) == {"epochs": 3, "learning_rate": 0.01}
    assert reporting_trainer.with_runtime_epochs({"custom_config": "{}"}) == {"custom_config": "{}"}
    decoded = reporting_trainer.with_runtime_epochs({"custom_config": {"epochs": 20}, "epochs": 7})
    assert json.loads(decoded["custom_config"]) == {"epochs": 7}
    with pytest.raises(ValueError, match="'epochs' pipeline parameter"):
        reporting_trainer.with_runtime_epochs({"custom_config": "{}", "epochs": 0})


def test_beam_args_per_runner():
    assert beam_args.pipeline_args(beam_args.BeamOptions()) == []
    dataflow = beam_args.pipeline_args(beam_args.BeamOptions(
        runner="dataflow", project="p", region="europe-west4", temp_location="gs://b/tmp",
        requirements_file="requirements.txt", extra=("--max_num_workers=5",)), image="img:1")
    assert dataflow == ["--runner=DataflowRunner", "--project=p", "--region=europe-west4",
                        "--temp_location=gs://b/tmp", "--sdk_container_image=img:1",
                        "--experiments=use_runner_v2", "--requirements_file=requirements.txt",
                        "--max_num_workers=5"]
    spark = beam_args.pipeline_args(beam_args.BeamOptions(runner="spark", job_endpoint="spark:8099",
                                                          worker_image="worker:2"), image="img:1")
    assert spark == ["--runner=PortableRunner", "--job_endpoint=spark:8099", "--environment_cache_millis=300000",
                     "--environment_type=DOCKER", "--environment_config=worker:2"]
    # A Spark master: Beam's SparkRunner starts the job server from the jar; workers from a pool.
    on_master = beam_args.pipeline_args(beam_args.BeamOptions(
        runner="spark", spark_master="spark://10.0.0.5:7077", spark_job_server_jar="/jars/server.jar",
        worker_pool="10.0.0.6:50000"), image="img:1")
    assert on_master == ["--runner=SparkRunner", "--spark_master_url=spark://10.0.0.5:7077",
                         "--spark_job_server_jar=/jars/server.jar", "--environment_cache_millis=300000",
                         "--environment_type=EXTERNAL", "--environment_config=10.0.0.6:50000"]


@pytest.mark.parametrize("options, message", [
    (beam_args.BeamOptions(runner="samza"), "unknown Beam runner 'samza'"),
    (beam_args.BeamOptions(runner="dataflow", project="p", region="r", temp_location="/tmp"),
     "temp location must be a gs:// path"),
    (beam_args.BeamOptions(runner="flink"), "the Flink runner needs --job-endpoint"),
    (beam_args.BeamOptions(runner="spark", spark_master="10.0.0.5:7077", worker_pool="h:1"),
     "--spark-master must look like spark://HOST:PORT"),
    (beam_args.BeamOptions(runner="spark", spark_master="spark://h:7077"),
     "the Spark runner needs Python workers with turbotfx installed: give --worker-pool"),
])
def test_bad_beam_options(options, message):
    with pytest.raises(ConfigError, match=message):
        beam_args.pipeline_args(options)
