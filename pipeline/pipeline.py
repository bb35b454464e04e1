"""create_pipeline(config): the turbotfx TFX pipeline definition."""

from __future__ import annotations

import hashlib
from pathlib import Path

import tensorflow_model_analysis as tfma

# Modules, not `tfx.v1`: that facade also imports the Google Cloud AI Platform client,
# eight seconds of start-up that a local run never uses.
from tfx.components.evaluator.component import Evaluator
from tfx.components.example_gen.csv_example_gen.component import CsvExampleGen
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.pusher.component import Pusher
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.components.statistics_gen.component import StatisticsGen
from tfx.components.trainer.component import Trainer
from tfx.components.transform.component import Transform
from tfx.dsl.components.base import executor_spec
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, trainer_pb2, transform_pb2
from tfx.types import Channel, standard_artifacts

import trainer_module
from components.anomaly_gate.component import AnomalyGate
from components.atomic_pusher import executor as atomic_pusher
from components.reporting_evaluator import executor as reporting_evaluator
from components.reporting_trainer import executor as reporting_trainer
from components.serving_check.component import ServingCheck
from pipeline import schemas
from pipeline.config import PipelineConfig
from trainer_module import features

PREPROCESSING_FN = "trainer_module.preprocessing.preprocessing_fn"
RUN_FN = "trainer_module.train.run_fn"
ACCURACY_METRIC = "sparse_categorical_accuracy"
# What preprocessing_fn runs: an edit elsewhere (the model, run_fn) keeps Transform cached.
TRANSFORM_SOURCES = ("preprocessing.py", "features.py", "autograph.py", "__init__.py")


def create_pipeline(
    config: PipelineConfig,
    data_root: Path | None = None,
    beam_pipeline_args: list[str] | None = None,
    metadata_connection_config=None,
) -> tfx_pipeline.Pipeline:
    """The pipeline, from CSV files to a pushed model.

    Transform and Trainer get their functions by import path (not module_file), so the
    same definition runs locally and in a container without uploading code.
    """
    trainer_fingerprint = code_fingerprint()
    example_gen = CsvExampleGen(
        input_base=str(data_root or config.data_path),
        output_config=example_gen_pb2.Output(
            split_config=example_gen_pb2.SplitConfig(
                splits=[
                    example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=config.train_buckets),
                    example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=config.eval_buckets),
                ]
            )
        ),
    )
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])
    schema_file = schemas.content_addressed_copy(
        schemas.schema_file(config.dataset), config.pipeline_root / "curated_schemas"
    )
    schema_gen = ImportSchemaGen(schema_file=str(schema_file))
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    anomaly_gate = AnomalyGate(anomalies=example_validator.outputs["anomalies"])
    transform = Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn=PREPROCESSING_FN,
        custom_config={
            "dataset": config.dataset,
            "code_fingerprint": code_fingerprint(TRANSFORM_SOURCES),
        },
        splits_config=transform_pb2.SplitsConfig(analyze=["train"], transform=["train", "eval"]),
        # TFDV statistics of the transformed data: not used downstream, and the slowest
        # part of Transform on small data.
        disable_statistics=True,
        force_tf_compat_v1=True,
    )
    # ExampleValidator only records anomalies; the gate stops the run before Transform.
    transform.add_upstream_node(anomaly_gate)
    trainer = Trainer(
        run_fn=RUN_FN,
        # Records the training report on the Model artifact (see the executor).
        custom_executor_spec=executor_spec.ExecutorClassSpec(reporting_trainer.Executor),
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        train_args=trainer_pb2.TrainArgs(),
        eval_args=trainer_pb2.EvalArgs(),
        custom_config={
            "dataset": config.dataset,
            "epochs": config.epochs,
            "batch_size": config.batch_size,
            "learning_rate": config.learning_rate,
            "hidden_units": list(config.hidden_units),
            "strategy": config.strategy,
            "precision": config.precision,
            "xla": config.xla,
            "steps_per_execution": config.steps_per_execution,
            "accumulation_steps": config.accumulation_steps,
            "scale_learning_rate": config.scale_learning_rate,
            "tensorboard_histogram_freq": config.tensorboard_histogram_freq,
            "profile_batches": config.profile_batches,
            "code_fingerprint": trainer_fingerprint,
        },
    )
    model_resolver = Resolver(
        strategy_class=LatestBlessedModelStrategy,
        model=Channel(type=standard_artifacts.Model),
        model_blessing=Channel(type=standard_artifacts.ModelBlessing),
    ).with_id("latest_blessed_model_resolver")
    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=model_resolver.outputs["model"],
        eval_config=eval_config(config),
    )
    # Records the overall metrics on the ModelEvaluation artifact (see the executor).
    evaluator.executor_spec = executor_spec.BeamExecutorSpec(reporting_evaluator.Executor)
    serving_check = ServingCheck(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        dataset=config.dataset,
        model_name=config.model_name,
    )
    pusher = Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=serving_check.outputs["blessing"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=str(config.serving_dir))
        ),
        custom_config={atomic_pusher.KEEP_VERSIONS_KEY: config.keep_versions},
    )
    # Atomic push, stable/canary labels in models.config, retention (see the executor).
    pusher.executor_spec = executor_spec.ExecutorClassSpec(atomic_pusher.Executor)
    return tfx_pipeline.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=str(config.pipeline_root),
        components=[
            example_gen,
            statistics_gen,
            schema_gen,
            example_validator,
            anomaly_gate,
            transform,
            trainer,
            model_resolver,
            evaluator,
            serving_check,
            pusher,
        ],
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_pipeline_args or [],
    )


def code_fingerprint(sources: tuple[str, ...] | None = None) -> str:
    """A hash of trainer_module's source files (all of them, or the named ones).

    With functions given by import path, TFX's cache key holds only the path: without
    this, an edited preprocessing_fn or run_fn would silently reuse the cached outputs.
    """
    digest = hashlib.sha256()
    package = Path(trainer_module.__file__).parent
    files = [package / name for name in sources] if sources else package.glob("*.py")
    for source in sorted(files):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    """Accuracy overall and per class, sliced by the dataset's slice feature, with
    blessing thresholds."""
    spec = features.for_dataset(config.dataset)
    accuracy_threshold = tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": config.min_accuracy}),
        # Negative absolute change: a candidate may trail the baseline by this much.
        change_threshold=tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER,
            absolute={"value": -config.max_accuracy_drop - 1e-10},
        ),
    )
    return tfma.EvalConfig(
        model_specs=[
            tfma.ModelSpec(
                signature_name="serving_default",
                prediction_key="probabilities",
                label_key=spec.transformed_label_key,
                preprocessing_function_names=["transform_features"],
            )
        ],
        slicing_specs=[
            tfma.SlicingSpec(),
            tfma.SlicingSpec(feature_keys=[spec.slice_key]),
        ],
        metrics_specs=[
            tfma.MetricsSpec(
                metrics=[
                    tfma.MetricConfig(class_name="ExampleCount"),
                    # Blessing looks at the whole eval split: a slice-level threshold
                    # would gate on small, noisy slices (a few dozen rows each).
                    tfma.MetricConfig(
                        class_name="SparseCategoricalAccuracy",
                        per_slice_thresholds=[
                            tfma.PerSliceMetricThreshold(
                                slicing_specs=[tfma.SlicingSpec()], threshold=accuracy_threshold
                            )
                        ],
                    ),
                ]
            ),
            tfma.MetricsSpec(
                binarize=tfma.BinarizationOptions(class_ids={"values": list(range(spec.num_classes))}),
                metrics=[
                    tfma.MetricConfig(class_name="Precision"),
                    tfma.MetricConfig(class_name="Recall"),
                ],
            ),
        ],
    )
