"""create_pipeline(config): the turbotfx TFX pipeline definition."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Mapping

import tensorflow_model_analysis as tfma
from tensorflow_model_analysis import constants as tfma_constants

# Modules, not `tfx.v1`: that facade also imports the Google Cloud AI Platform client,
# eight seconds of start-up that a local run never uses.
from tfx.components.evaluator.component import Evaluator
from tfx.components.example_gen.component import FileBasedExampleGen
from tfx.components.example_validator.component import ExampleValidator
from tfx.components.pusher.component import Pusher
from tfx.components.schema_gen.import_schema_gen.component import ImportSchemaGen
from tfx.components.statistics_gen.component import StatisticsGen
from tfx.components.trainer.component import Trainer
from tfx.components.transform.component import Transform
from tfx.dsl.components.base import base_component, executor_spec
from tfx.dsl.components.common.resolver import Resolver
from tfx.dsl.input_resolution.strategies.latest_blessed_model_strategy import LatestBlessedModelStrategy
from tfx.orchestration import pipeline as tfx_pipeline
from tfx.proto import example_gen_pb2, pusher_pb2, trainer_pb2, transform_pb2
from tfx.types import Channel, standard_artifacts

import trainer_module
from components.anomaly_gate.component import AnomalyGate
from components.atomic_pusher import executor as atomic_pusher
from components.atomic_pusher import keys as pusher_keys
from components.baseline_model import strategy as baseline_strategy
from components.baseline_model.strategy import LatestPushedModelStrategy
from components.csv_example_gen.component import CsvExampleGen
from components.parquet_example_gen import executor as parquet_executor
from components.reporting_evaluator import executor as reporting_evaluator
from components.reporting_evaluator import keys as evaluator_keys
from components.reporting_trainer import executor as reporting_trainer
from components.reporting_trainer import keys as trainer_keys
from components.serving_check.component import ServingCheck
from components.tuner import keys as tuner_keys
from components.tuner import strategy as tuning_strategy
from components.tuner.component import Tuner
from components.tuner.strategy import LatestTuningStrategy
from pipeline import datasets, vertex
from pipeline import deployment as deployment_lib
from pipeline.config import PipelineConfig
from pipeline.datasets.table import SUFFIXES
from pipeline.deployment import Deployment, Setting
from pipeline.errors import ConfigError
from pipeline.store.url import PASSWORD_ENV_VAR, sqlalchemy_url
from serving import contract
from trainer_module import features, search_space

PREPROCESSING_FN = "trainer_module.preprocessing.preprocessing_fn"
RUN_FN = "trainer_module.families.run_fn"
# The node id kept from TFX's examples: runs, caches and compiled task names refer to it.
BASELINE_RESOLVER_ID = "latest_blessed_model_resolver"
# The resolver of a reusable tuning result (components/tuner/strategy.py).
TUNING_RESOLVER_ID = "latest_tuning_resolver"
# What preprocessing_fn runs: an edit elsewhere (the model, run_fn) keeps Transform cached.
# Transform traces the preprocessing_fn in TF1 graph mode (tests analyze the same way).
TRANSFORM_FORCE_TF_COMPAT_V1 = True
TRANSFORM_SOURCES = ("preprocessing.py", "features.py", "dates.py", "autograph.py", "__init__.py")


def create_pipeline(
    config: PipelineConfig,
    data_root: Path | None = None,
    beam_pipeline_args: list[str] | None = None,
    metadata_connection_config=None,
    deployment: Deployment | None = None,
) -> tfx_pipeline.Pipeline:
    """The pipeline, from CSV files to a pushed model.

    Transform and Trainer get their functions by import path (not module_file), so the
    same definition runs locally and in a container without uploading code. deployment
    (default: a local run) says where things live and which settings are runtime
    parameters (see pipeline/deployment.py).
    """
    deployment = deployment or deployment_lib.local(config, data_root)
    trainer_fingerprint = code_fingerprint()
    spec = config.spec
    feature_config = {features.CONFIG_KEY: spec.feature_spec().to_config()}
    example_gen = example_gen_for(spec.format, deployment.data_root, example_gen_pb2.Output(
        split_config=example_gen_pb2.SplitConfig(
            splits=[
                example_gen_pb2.SplitConfig.Split(name="train", hash_buckets=config.train_buckets),
                example_gen_pb2.SplitConfig.Split(name="eval", hash_buckets=config.eval_buckets),
            ]
        )
    ))
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])
    schema_gen = ImportSchemaGen(schema_file=deployment.schema_file)
    example_validator = ExampleValidator(
        statistics=statistics_gen.outputs["statistics"], schema=schema_gen.outputs["schema"]
    )
    anomaly_gate = AnomalyGate(anomalies=example_validator.outputs["anomalies"])
    transform = Transform(
        examples=example_gen.outputs["examples"],
        schema=schema_gen.outputs["schema"],
        preprocessing_fn=PREPROCESSING_FN,
        custom_config=feature_config | {
            trainer_keys.CODE_FINGERPRINT_KEY: code_fingerprint(TRANSFORM_SOURCES),
        },
        splits_config=transform_pb2.SplitsConfig(analyze=["train"], transform=["train", "eval"]),
        # TFDV statistics of the transformed data: not used downstream, and the slowest
        # part of Transform on small data.
        disable_statistics=True,
        force_tf_compat_v1=TRANSFORM_FORCE_TF_COMPAT_V1,
    )
    # ExampleValidator only records anomalies; the gate stops the run before Transform.
    transform.add_upstream_node(anomaly_gate)
    trainer_config = vertex.training_config(deployment.vertex_training) | feature_config | {
        # Names the dataset file and tells its versions apart (lineage, diff).
        trainer_keys.DATASET_FILE_KEY: str(spec.path),
        trainer_keys.DATASET_TEXT_KEY: base64.b64encode(spec.path.read_bytes()).decode("ascii"),
        trainer_keys.DATASET_FINGERPRINT_KEY: spec.fingerprint(),
        trainer_keys.MODEL_NAME_KEY: config.model_name,
        trainer_keys.FEATURE_CONTRACT_KEY: spec.feature_contract(),
        # Compiled as a training metric too: the report holds it on train and eval, and the
        # trivial baseline's score on it.
        features.BLESSING_METRIC_KEY: spec.blessing.metric,
        trainer_keys.CODE_FINGERPRINT_KEY: trainer_fingerprint,
    } | config.training.to_config()
    tuning_node = tuning_step(config, deployment, transform, schema_gen, trainer_config)
    trainer = Trainer(
        run_fn=RUN_FN,
        examples=transform.outputs["transformed_examples"],
        transform_graph=transform.outputs["transform_graph"],
        schema=schema_gen.outputs["schema"],
        hyperparameters=tuning_node.outputs[tuning_output(tuning_node)] if tuning_node else None,
        train_args=trainer_pb2.TrainArgs(),
        eval_args=trainer_pb2.EvalArgs(),
        custom_config=trainer_config,
    )
    # Records the training report on the Model artifact (see the executor), here or
    # after a Vertex AI Training job.
    trainer.executor_spec = executor_spec.ExecutorClassSpec(trainer_executor(deployment))
    add_exec_property(trainer, trainer_keys.EPOCHS_KEY, deployment.epochs)
    model_resolver = baseline_resolver(deployment, trainer)
    evaluator = Evaluator(
        examples=example_gen.outputs["examples"],
        model=trainer.outputs["model"],
        baseline_model=model_resolver.outputs["model"],
        eval_config=eval_config(config),
    )
    # Records the metrics (overall, against the baseline, per slice) on the ModelEvaluation
    # artifact (see the executor).
    evaluator.executor_spec = executor_spec.BeamExecutorSpec(reporting_evaluator.Executor)
    if deployment.blessing_threshold is not None:
        add_exec_property(evaluator, evaluator_keys.THRESHOLD_KEY, deployment.blessing_threshold)
    serving_check = ServingCheck(
        model=trainer.outputs["model"],
        examples=example_gen.outputs["examples"],
        transform_graph=transform.outputs["transform_graph"],
        label_vocabulary=features.vocabulary_name(spec.label) if spec.task != features.REGRESSION else "",
        model_name=config.model_name,
    )
    pusher = Pusher(
        model=trainer.outputs["model"],
        model_blessing=evaluator.outputs["blessing"],
        infra_blessing=serving_check.outputs["blessing"],
        push_destination=pusher_pb2.PushDestination(
            filesystem=pusher_pb2.PushDestination.Filesystem(base_directory=deployment.serving_dir)
        ),
        custom_config={pusher_keys.KEEP_VERSIONS_KEY: config.keep_versions},
    )
    if deployment.serving_on_filesystem:
        # Atomic push, stable/canary labels in models.config, retention (see the executor).
        # An object store has no atomic rename: there TFX's own Pusher copies the model.
        pusher.executor_spec = executor_spec.ExecutorClassSpec(atomic_pusher.Executor)
    components = [
        example_gen,
        statistics_gen,
        schema_gen,
        example_validator,
        anomaly_gate,
        transform,
        *([tuning_node] if tuning_node else []),
        trainer,
        model_resolver,
        evaluator,
        serving_check,
        pusher,
    ]
    if deployment.vertex_endpoint:
        components.append(vertex.endpoint_pusher(
            deployment.vertex_endpoint, trainer, evaluator, serving_check))
    apply_resources(components, deployment.resources)
    return tfx_pipeline.Pipeline(
        pipeline_name=config.pipeline_name,
        pipeline_root=deployment.pipeline_root,
        components=components,
        enable_cache=config.enable_cache,
        metadata_connection_config=metadata_connection_config,
        beam_pipeline_args=beam_pipeline_args or [],
    )


def tuning_step(config: PipelineConfig, deployment: Deployment, transform: Transform,
                schema_gen: ImportSchemaGen, trainer_config: dict) -> Tuner | Resolver | None:
    """What hands the Trainer its tuned knobs: a Tuner when the run tunes; else, locally, a
    resolver of the latest tuning result of this model and feature contract over the same
    search space (none: the Trainer trains with its knobs as given)."""
    tuning = config.tuning
    family = config.training.model_family
    space_fingerprint = search_space.fingerprint(family, search_space.space(family, tuning.knobs))
    if tuning.tunes:
        return Tuner(
            examples=transform.outputs["transformed_examples"],
            transform_graph=transform.outputs["transform_graph"],
            schema=schema_gen.outputs["schema"],
            custom_config=json.dumps(trainer_config, sort_keys=True),
            train_args="{}", eval_args="{}",
            **{tuner_keys.TRIALS: tuning.trials or 0, tuner_keys.MINUTES: float(tuning.minutes or 0),
               tuner_keys.KNOBS: json.dumps(list(tuning.knobs)),
               tuner_keys.STORAGE: sqlalchemy_url(tuning.storage) if tuning.storage else "",
               tuner_keys.PASSWORD_ENV: PASSWORD_ENV_VAR,
               tuner_keys.STUDY_NAME: tuning.study or "", tuner_keys.PARALLELISM: tuning.parallelism,
               tuner_keys.SEARCH_SPACE: space_fingerprint},
        )
    if not tuning.reuses or not deployment.python_resolvers:
        return None
    return Resolver(
        strategy_class=LatestTuningStrategy,
        config={tuner_keys.SEARCH_SPACE: space_fingerprint,
                tuner_keys.FEATURE_CONTRACT: trainer_config[trainer_keys.FEATURE_CONTRACT_KEY],
                tuner_keys.MODEL_NAME: config.model_name},
        **{tuning_strategy.HYPERPARAMETERS_KEY: Channel(type=standard_artifacts.HyperParameters)},
    ).with_id(TUNING_RESOLVER_ID)


def tuning_output(node: Tuner | Resolver) -> str:
    return "best_hyperparameters" if isinstance(node, Tuner) else tuning_strategy.HYPERPARAMETERS_KEY


def baseline_resolver(deployment: Deployment, trainer: Trainer) -> Resolver:
    """The Evaluator's baseline: the latest blessed and pushed model other than the candidate
    (components/baseline_model); compiled pipelines get TFX's latest blessed model."""
    if deployment.python_resolvers:
        resolver = Resolver(
            strategy_class=LatestPushedModelStrategy,
            **{baseline_strategy.MODEL_KEY: Channel(type=standard_artifacts.Model),
               baseline_strategy.PUSHED_MODEL_KEY: Channel(type=standard_artifacts.PushedModel),
               baseline_strategy.CANDIDATE_KEY: trainer.outputs["model"]},
        )
    else:
        resolver = Resolver(
            strategy_class=LatestBlessedModelStrategy,
            model=Channel(type=standard_artifacts.Model),
            model_blessing=Channel(type=standard_artifacts.ModelBlessing),
        )
    return resolver.with_id(BASELINE_RESOLVER_ID)


def add_exec_property(component: base_component.BaseComponent, key: str, value: Setting) -> None:
    """Adds a top-level exec property that our executor reads.

    Runtime parameters can only be whole exec properties (not entries of custom_config or
    fields of a proto), so the settings that a compiled pipeline takes at submit time sit
    beside the component's own properties. Locally they hold the same fixed values.
    """
    component.exec_properties[key] = value


def trainer_executor(deployment: Deployment) -> type:
    if deployment.vertex_training:
        from components.reporting_trainer import vertex_executor  # imports the Vertex AI client

        return vertex_executor.Executor
    return reporting_trainer.Executor


def apply_resources(components: list, resources: Mapping[str, object]) -> None:
    """CPU, memory and accelerator requests per node (Kubeflow / Vertex runners only)."""
    by_id = {component.id: component for component in components}
    unknown = sorted(set(resources) - set(by_id))
    if unknown:
        raise ConfigError(f"no component named {', '.join(unknown)} to give resources to; "
                          f"components: {', '.join(by_id)}")
    for node_id, spec in resources.items():
        by_id[node_id].with_platform_config(spec)


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


def example_gen_for(fmt: str, data_root: Setting, output_config: example_gen_pb2.Output):
    """CSV through CsvExampleGen with our executor (TFX's own keeps a byte-order mark and quotes
    in the header's names: see components/csv_example_gen); Parquet through FileBasedExampleGen
    with our executor (TFX's own turns zeros into missing values: see components/parquet_example_gen).

    Only the format's files are read (TFX's default pattern, '*', would take a dataset file
    kept beside the data, a .DS_Store or a subfolder too), as pipeline/datasets/checks.py checks them.
    """
    input_config = example_gen_pb2.Input(splits=[
        example_gen_pb2.Input.Split(name="single_split", pattern=f"*{SUFFIXES[fmt]}")])
    if fmt == "parquet":
        return FileBasedExampleGen(
            input_base=data_root,
            input_config=input_config,
            output_config=output_config,
            custom_executor_spec=executor_spec.BeamExecutorSpec(parquet_executor.Executor),
        )
    return CsvExampleGen(input_base=data_root, input_config=input_config, output_config=output_config)


def eval_config(config: PipelineConfig) -> tfma.EvalConfig:
    """The task's metrics overall and per slice of the dataset file's slice features, with
    the blessing thresholds on the whole eval split."""
    spec = config.spec
    label_key = features.transformed_name(spec.label)
    slicing_specs = [tfma.SlicingSpec(), *(tfma.SlicingSpec(feature_keys=[key]) for key in spec.slices)]
    model_spec = tfma.ModelSpec(
        signature_name=contract.SERVING_DEFAULT,
        prediction_key=contract.OUTPUT_PREDICTION if spec.task == features.REGRESSION
        else contract.OUTPUT_PROBABILITIES,
        label_key=label_key,
        preprocessing_function_names=[contract.TRANSFORM_FEATURES],
        # What TFMA would decide itself, after loading each model once more as a Keras
        # model to find it is none (two extra loads of the candidate per run).
        model_type=tfma_constants.TF_GENERIC,
    )
    metrics = [tfma.MetricConfig(class_name="ExampleCount")]
    per_class: list[tfma.MetricConfig] = []
    for name in datasets.TASK_METRICS[spec.task]:
        metric = tfma.MetricConfig(class_name=evaluator_keys.METRIC_CLASS_NAMES[name])
        if name == spec.blessing.metric:
            # Blessing looks at the whole eval split: a slice-level threshold would gate on
            # small, noisy slices (a few dozen rows each).
            metric.per_slice_thresholds.append(tfma.PerSliceMetricThreshold(
                slicing_specs=[tfma.SlicingSpec()], threshold=blessing_threshold(config)))
        (per_class if name in BINARIZED_METRICS else metrics).append(metric)
    if spec.task != features.REGRESSION:
        # Counts of (true, predicted) class pairs per slice: the confusion matrix the summary
        # shows, and what tells why a per-class metric is undefined (a class never predicted,
        # a slice with no positive rows).
        metrics.append(tfma.MetricConfig(class_name="MultiClassConfusionMatrixPlot"))
    metrics_specs = [tfma.MetricsSpec(metrics=metrics)]
    if spec.task == features.MULTICLASS:
        per_class += [tfma.MetricConfig(class_name="Precision"), tfma.MetricConfig(class_name="Recall")]
        class_ids = list(range(spec.num_classes))
    elif spec.task == features.BINARY:
        # The second label (the sigmoid's) is the positive class.
        per_class += [tfma.MetricConfig(class_name=name) for name in ("Precision", "Recall", "Calibration")]
        class_ids = [1]
    if per_class:
        metrics_specs.append(tfma.MetricsSpec(
            binarize=tfma.BinarizationOptions(class_ids={"values": class_ids}), metrics=per_class))
    return tfma.EvalConfig(model_specs=[model_spec], slicing_specs=slicing_specs, metrics_specs=metrics_specs)


# Computed on the positive class of a binary model's two probabilities.
BINARIZED_METRICS = ("auc",)


def blessing_threshold(config: PipelineConfig) -> tfma.MetricThreshold:
    """A bound on the blessing metric and a change threshold against the baseline; for an
    error metric both point the other way."""
    higher = config.higher_is_better
    threshold = tfma.MetricThreshold()
    if config.blessing_threshold is not None:
        bound = {"value": config.blessing_threshold}
        threshold.value_threshold.CopyFrom(tfma.GenericValueThreshold(
            lower_bound=bound) if higher else tfma.GenericValueThreshold(upper_bound=bound))
    if config.max_metric_drop is not None:
        # A candidate may trail the baseline by this much (the epsilon keeps an exact tie in).
        allowed = config.max_metric_drop + evaluator_keys.CHANGE_TIE_MARGIN
        threshold.change_threshold.CopyFrom(tfma.GenericChangeThreshold(
            direction=tfma.MetricDirection.HIGHER_IS_BETTER if higher else tfma.MetricDirection.LOWER_IS_BETTER,
            absolute={"value": -allowed if higher else allowed},
        ))
    return threshold
