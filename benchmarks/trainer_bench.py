"""Training speed on one machine: our Trainer's choices against the way TFX examples train.

All variants train the same model (the synthetic dataset's MLP with embeddings) for the
same epochs on the same transformed data: the pipeline's own Transform output for the
synthetic dataset (1M rows by default), produced once and cached in the work directory.
Each prints examples/second over its whole fit() call (tracing and XLA compilation
included, as a real run pays them) and the accuracy on the eval split:

  anchor       TFX examples' way: their input_fn (tf_dataset_factory(...).repeat(),
               steps_per_epoch), float32, no XLA, steps_per_execution=1, under
               MirroredStrategy
  eager        run_eagerly=True, our input pipeline
  graph        tf.function training step, our input pipeline
  graph_xla    + jit_compile
  spe_N        + steps_per_execution=N (N tuned on a short run)
  bf16         + mixed_bfloat16
  auto         what our run_fn chooses on this machine (hardware.choose, config defaults)
  input        the input pipeline alone: one epoch of batches, nothing trained

Last line: one JSON object (anchor_eps, auto_eps, ratio_vs_anchor, input_eps,
input_vs_train, auto_accuracy, anchor_accuracy, and every variant).

    .venv/bin/python benchmarks/trainer_bench.py [--rows N] [--epochs N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from typing import Callable, Iterator

import _harness as harness

from pipeline import datasets
from pipeline.config import PipelineConfig

PIPELINE_NAME = "trainer-bench"
UP_TO_TRANSFORM = ("CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator",
                   "AnomalyGate", "Transform")
SPE_CANDIDATES = (8, 32, 128)
TUNING_STEPS = 512


def transformed_data(config: PipelineConfig):
    """Runs the pipeline up to Transform (cached after the first time); returns the
    transformed Examples artifact and the transform graph URI from MLMD."""
    from ml_metadata.metadata_store import metadata_store
    from tfx.orchestration import pipeline as tfx_pipeline
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import data
    from pipeline.pipeline import create_pipeline
    from pipeline.runners import beam_tuning, local

    data_root = data.prepare_data(config)
    mode = local.beam_mode(config, data_root)
    beam_tuning.tune(mode)
    connection = local.metadata_config(config)
    whole = create_pipeline(config, data_root, local.beam_pipeline_args(mode), connection)
    upstream = [c for c in whole.components if c.id in UP_TO_TRANSFORM]
    for component in upstream:  # cut the links to the Trainer and after
        for downstream in list(component.downstream_nodes):
            if downstream.id not in UP_TO_TRANSFORM:
                component.remove_downstream_node(downstream)
    started = time.perf_counter()
    LocalDagRunner().run(tfx_pipeline.Pipeline(
        pipeline_name=whole.pipeline_info.pipeline_name,
        pipeline_root=whole.pipeline_info.pipeline_root,
        components=upstream,
        enable_cache=True,
        metadata_connection_config=connection,
        beam_pipeline_args=whole.beam_pipeline_args,
    ))
    print(f"data: {config.rows} rows up to Transform in {time.perf_counter() - started:.1f}s "
          f"(cached after the first run)", flush=True)
    return latest_transform_outputs(metadata_store.MetadataStore(connection))


def latest_transform_outputs(store):
    from ml_metadata.proto import metadata_store_pb2
    from tfx.types import artifact_utils

    executions = [e for e in store.get_executions() if e.last_known_state in (
        metadata_store_pb2.Execution.COMPLETE, metadata_store_pb2.Execution.CACHED)]
    transform_type = next(t.id for t in store.get_execution_types() if t.name.endswith("Transform"))
    latest = max((e for e in executions if e.type_id == transform_type), key=lambda e: e.id)
    events = [e for e in store.get_events_by_execution_ids([latest.id])
              if e.type == metadata_store_pb2.Event.OUTPUT]
    by_key = {e.path.steps[0].key: e.artifact_id for e in events}
    # get_artifacts_by_id does not keep the order of the ids asked for.
    artifacts = {a.id: a for a in store.get_artifacts_by_id(list(by_key.values()))}
    examples_mlmd, graph = artifacts[by_key["transformed_examples"]], artifacts[by_key["transform_graph"]]
    examples_type = store.get_artifact_types_by_id([examples_mlmd.type_id])[0]
    examples = artifact_utils.deserialize_artifact(examples_type, examples_mlmd)
    return examples, graph.uri


class Bench:
    """The transformed data, the model arguments and the measurements of one run."""

    def __init__(self, examples, transform_graph_uri: str, config: PipelineConfig, epochs: int,
                 slow_steps: int):
        import tensorflow_transform as tft
        from tfx.components.trainer.fn_args_utils import DataAccessor
        from tfx.components.util import tfxio_utils
        from tfx.types import artifact_utils
        from tfx.utils import io_utils

        from trainer_module import train

        self.spec = datasets.load("synthetic").feature_spec()
        self.epochs = epochs
        self.slow_steps = slow_steps  # steps the eager and XLA variants train
        self.config = config
        self.tf_transform_output = tft.TFTransformOutput(transform_graph_uri)
        self.data_accessor = DataAccessor(
            tf_dataset_factory=tfxio_utils.get_tf_dataset_factory_from_artifact([examples], []),
            record_batch_factory=None,
            data_view_decode_fn=None,
        )
        self.train_files = [io_utils.all_files_pattern(u) for u in artifact_utils.get_split_uris([examples], "train")]
        self.eval_files = [io_utils.all_files_pattern(u) for u in artifact_utils.get_split_uris([examples], "eval")]
        vocab_sizes, num_classes = train.vocabulary_sizes(self.tf_transform_output, self.spec)
        self.model_args = (self.spec, vocab_sizes, num_classes, config.hidden_units, config.learning_rate)
        self.batch_size = config.batch_size
        eval_ds = self.our_dataset(self.eval_files, shuffle=False)
        self.eval_steps = train.count_batches(eval_ds)
        self.train_steps = train.count_batches(self.our_dataset(self.train_files, shuffle=False))
        self.train_examples = self.train_steps * self.batch_size
        self.results: dict[str, dict] = {}

    def our_dataset(self, files, shuffle: bool, drop_remainder: bool = False):
        from trainer_module import train

        return train.input_dataset(
            files, self.data_accessor, self.tf_transform_output, self.spec.transformed_label_key,
            self.batch_size, shuffle=shuffle, drop_remainder=drop_remainder,
        )

    def anchor_dataset(self, files):
        """TFX penguin example's _input_fn: the factory's defaults, then .repeat()."""
        from tfx_bsl.public import tfxio

        return self.data_accessor.tf_dataset_factory(
            files,
            tfxio.TensorFlowDatasetOptions(batch_size=self.batch_size, label_key=self.spec.transformed_label_key),
            self.tf_transform_output.transformed_metadata.schema,
        ).repeat()

    def measure(self, name: str, build: Callable, train_ds, eval_ds, repeat: bool,
                steps: int | None = None) -> dict:
        """Builds a model, times its training, evaluates it.

        steps: train only that many steps (one epoch) instead of the full epochs, for
        variants too slow to finish; the result says so.
        """
        import tf_keras as keras

        epochs = self.epochs if steps is None else 1
        steps_per_epoch = steps or self.train_steps
        classifier = build()
        with policy_reset():
            started = time.perf_counter()
            classifier.fit(train_ds.repeat() if steps else train_ds, epochs=epochs,
                           steps_per_epoch=steps_per_epoch if (repeat or steps) else None, verbose=0)
            seconds = time.perf_counter() - started
            classifier.jit_compile = False  # as run_fn: XLA for the training step only
            accuracy = classifier.evaluate(eval_ds, steps=self.eval_steps, verbose=0, return_dict=True)["accuracy"]
        keras.backend.clear_session()
        result = {"eps": round(steps_per_epoch * self.batch_size * epochs / seconds), "seconds": round(seconds, 2),
                  "accuracy": round(float(accuracy), 4), "trained_steps": steps_per_epoch * epochs}
        self.results[name] = result
        partial = f"  (stopped after {steps} steps)" if steps else ""
        print(f"  {name:<12} {result['eps']:>9,} examples/s  {seconds:7.1f}s  accuracy {accuracy:.4f}{partial}",
              flush=True)
        return result


@contextlib.contextmanager
def policy_reset() -> Iterator[None]:
    import tf_keras as keras

    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy("float32")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="synthetic rows (default: 1,000,000)")
    parser.add_argument("--epochs", type=int, default=1, help="epochs each variant trains (default: 1)")
    parser.add_argument("--workdir", default=str(harness.REPO / "workspace" / "bench"), help="cached data and runs")
    parser.add_argument("--only", help="comma-separated variants to run (default: all)")
    parser.add_argument("--slow-steps", type=int, default=100,
                        help="steps the eager and XLA variants train (default: 100; a full epoch can take hours)")
    args = parser.parse_args(argv)
    config = PipelineConfig(home=args.workdir, dataset="synthetic", rows=args.rows, pipeline_name=PIPELINE_NAME)
    examples, graph_uri = transformed_data(config)
    bench = Bench(examples, graph_uri, config, args.epochs, args.slow_steps)
    print(f"train: {bench.train_steps} batches of {bench.batch_size} x {args.epochs} epoch(s); "
          f"eval: {bench.eval_steps} batches", flush=True)
    run_variants(bench, set(args.only.split(",")) if args.only else None)
    summary = summarize(bench.results)
    harness.print_result(summary, sort_keys=True)
    return 0


def run_variants(bench: Bench, only: set[str] | None) -> None:
    import tensorflow as tf

    from trainer_module import hardware, model

    def wanted(name: str) -> bool:
        return only is None or name in only or (name.startswith("spe_") and "spe" in only)

    def build(precision: str = "float32", xla: bool = False, spe: int = 1, eager: bool = False,
              strategy: tf.distribute.Strategy | None = None) -> Callable:
        def make():
            import tf_keras as keras

            keras.mixed_precision.set_global_policy(precision)
            with (strategy or tf.distribute.get_strategy()).scope():
                classifier = model.build_model(*bench.model_args, jit_compile=xla, steps_per_execution=spe)
            classifier.run_eagerly = eager
            return classifier
        return make

    train_ds = bench.our_dataset(bench.train_files, shuffle=True)
    static_train_ds = bench.our_dataset(bench.train_files, shuffle=True, drop_remainder=True)
    eval_ds = bench.our_dataset(bench.eval_files, shuffle=False)

    if wanted("input"):
        bench.results["input"] = input_only(static_train_ds, bench.batch_size)
        print(f"  {'input':<12} {bench.results['input']['eps']:>9,} examples/s  (first, uncached epoch; "
              f"cached: {bench.results['input']['cached_eps']:,})", flush=True)
    if wanted("anchor"):
        bench.measure("anchor", build(strategy=tf.distribute.MirroredStrategy()),
                      bench.anchor_dataset(bench.train_files), bench.anchor_dataset(bench.eval_files), repeat=True)
    if wanted("eager"):
        bench.measure("eager", build(eager=True), train_ds, eval_ds, repeat=False, steps=bench.slow_steps)
    if wanted("graph"):
        bench.measure("graph", build(), train_ds, eval_ds, repeat=False)
    if wanted("graph_xla"):
        bench.measure("graph_xla", build(xla=True), static_train_ds, eval_ds, repeat=False, steps=bench.slow_steps)
    # Each later variant adds its change to the faster of graph and graph + XLA.
    xla = "graph_xla" in bench.results and bench.results["graph_xla"]["eps"] > bench.results.get(
        "graph", {"eps": 0})["eps"]
    spe = tune_steps_per_execution(bench, build, xla) if wanted("spe") else None
    base_ds = static_train_ds if xla else train_ds
    if spe:
        bench.measure(f"spe_{spe}", build(xla=xla, spe=spe), base_ds.repeat(), eval_ds, repeat=True)
    if wanted("bf16"):
        bench.measure("bf16", build("mixed_bfloat16", xla=xla, spe=spe or 1), base_ds.repeat(), eval_ds,
                      repeat=True)
    if wanted("auto"):
        choice = hardware.choose(hardware.detect(), bench.config.strategy, bench.config.precision, bench.config.xla)
        auto_spe = bench.config.steps_per_execution
        auto_ds = bench.our_dataset(bench.train_files, shuffle=True, drop_remainder=choice.xla)
        result = bench.measure(
            "auto", build(choice.precision, choice.xla, auto_spe, strategy=hardware.build_strategy(choice.strategy)),
            auto_ds.repeat() if auto_spe > 1 else auto_ds, eval_ds, repeat=auto_spe > 1,
        )
        result.update(strategy=choice.strategy, precision=choice.precision, xla=choice.xla,
                      steps_per_execution=auto_spe)


def input_only(dataset, batch_size: int) -> dict:
    """Examples/second of the input pipeline alone: the first epoch reads and parses the
    files; the second comes from the in-memory cache."""
    figures = []
    for _ in range(2):
        started, batches = time.perf_counter(), 0
        for _batch in dataset:
            batches += 1
        figures.append(batches * batch_size / (time.perf_counter() - started))
    return {"eps": round(figures[0]), "cached_eps": round(figures[1])}


def tune_steps_per_execution(bench: Bench, build: Callable, xla: bool) -> int:
    """The candidate with the most examples/second over a short run (float32)."""
    best, best_eps = SPE_CANDIDATES[0], 0.0
    dataset = bench.our_dataset(bench.train_files, shuffle=True, drop_remainder=True).repeat()
    for spe in SPE_CANDIDATES:
        classifier = build(xla=xla, spe=spe)()
        classifier.fit(dataset, epochs=1, steps_per_epoch=spe, verbose=0)  # compile once
        started = time.perf_counter()
        classifier.fit(dataset, epochs=1, steps_per_epoch=TUNING_STEPS, verbose=0)
        eps = TUNING_STEPS * bench.batch_size / (time.perf_counter() - started)
        print(f"  tuning spe={spe:<4} {eps:>9,.0f} examples/s", flush=True)
        if eps > best_eps:
            best, best_eps = spe, eps
    return best


def summarize(results: dict[str, dict]) -> dict:
    summary: dict = {"variants": results}
    if "anchor" in results and "auto" in results:
        summary.update(
            anchor_eps=results["anchor"]["eps"],
            auto_eps=results["auto"]["eps"],
            ratio_vs_anchor=round(results["auto"]["eps"] / results["anchor"]["eps"], 2),
            anchor_accuracy=results["anchor"]["accuracy"],
            auto_accuracy=results["auto"]["accuracy"],
            accuracy_delta_points=round(100 * (results["auto"]["accuracy"] - results["anchor"]["accuracy"]), 2),
        )
    if "input" in results and "auto" in results:
        summary.update(input_eps=results["input"]["eps"],
                       input_vs_train=round(results["input"]["eps"] / results["auto"]["eps"], 2))
    return summary


if __name__ == "__main__":
    sys.exit(main())
