"""Training speed on one machine: our Trainer's choices against the way TFX examples train.

All variants train the same model (the synthetic dataset's MLP with embeddings) for the
same epochs on the same transformed data: the pipeline's own Transform output for the
synthetic dataset (1M rows by default), produced once and cached in the work directory.
Each prints examples/second over its whole fit() call (tracing and XLA compilation
included, as a real run pays them) and the accuracy on the eval split:

  anchor         TFX examples' way: their input_fn (tf_dataset_factory(...).repeat(),
                 steps_per_epoch), Adam, float32, no XLA, steps_per_execution=1, under
                 MirroredStrategy
  eager          run_eagerly=True, our input pipeline, Adam
  graph          tf.function training step, our input pipeline, Adam
  graph_xla      + jit_compile
  spe_N          + steps_per_execution=N (N tuned on a short run)
  bf16           + mixed_bfloat16 (Adam)
  sparse         spe_N with lazy_adam: Adam on the embedding rows a batch touches
  sparse_adagrad spe_N with adagrad_adam: Adagrad on touched embedding rows, Adam elsewhere
  sparse_xla     sparse + jit_compile
  sparse_bf16    sparse + mixed_bfloat16
  auto           what run_fn does on this machine: optimizer_choice and hardware.choose
                 with the config defaults, timed from the uncached files as run_fn
                 trains: the step count (which reads the files once, filling the cache)
                 and fit
  input          the input pipeline alone: one epoch of batches, nothing trained

Each variant runs in a fresh interpreter (--in-process: all in this one), so none inherits
another's memory or thread state. Every variant's data is read from the files (uncached) in its timed run: the others read
while they train their first epoch. Each also prints ms/step (from
its fit) and the optimizer's share of a step: a timed split over cached batches of the
training step with and without applying the gradients. `auto` is also trained for two
epochs on a fresh model: its first (uncached) epoch's rate against its second (cached).

Last line: one JSON object (anchor_eps, auto_eps, ratio_vs_anchor, input_eps,
input_vs_train, auto_accuracy, anchor_accuracy, accuracy_delta_points,
auto_first_epoch_eps, auto_cached_epoch_eps, first_epoch_vs_cached, and every variant).

    .venv/bin/python benchmarks/trainer_bench.py [--rows N] [--epochs N] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import sys
import tempfile
import time
from typing import Callable, Iterator

import _harness as harness

from pipeline import datasets
from pipeline.config import PipelineConfig

PIPELINE_NAME = "trainer-bench"
UP_TO_TRANSFORM = ("CsvExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator",
                   "AnomalyGate", "Transform")
SPE_CANDIDATES = (8, 32, 128)
# XLA on this CPU kind takes about 1.6 s a step: enough steps to measure, not an hour.
SLOW_STEPS = 40
TUNING_STEPS = 512


def transformed_data(config: PipelineConfig):
    """Runs the pipeline up to Transform (cached after the first time); returns the
    transformed Examples artifact and the transform graph URI from MLMD."""
    from ml_metadata.metadata_store import metadata_store
    from tfx.orchestration import pipeline as tfx_pipeline
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import workspace
    from pipeline.pipeline import create_pipeline
    from pipeline.runners import beam_tuning, local

    data_root = workspace.prepare_input(config)
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
        import tensorflow as tf
        import tensorflow_transform as tft
        from tfx.components.trainer.fn_args_utils import DataAccessor
        from tfx.components.util import tfxio_utils
        from tfx.types import artifact_utils
        from tfx.utils import io_utils

        from trainer_module import input, train

        self.spec = datasets.load("synthetic").feature_spec()
        self.epochs = epochs
        self.slow_steps = slow_steps  # steps the eager and XLA variants train
        self.config = config
        self.tf_transform_output = tft.TFTransformOutput(transform_graph_uri)
        # The anchor reads through tfxio, as TFX's examples do.
        self.data_accessor = DataAccessor(
            tf_dataset_factory=tfxio_utils.get_tf_dataset_factory_from_artifact([examples], []),
            record_batch_factory=None,
            data_view_decode_fn=None,
        )
        self.train_files = [io_utils.all_files_pattern(u) for u in artifact_utils.get_split_uris([examples], "train")]
        self.eval_files = [io_utils.all_files_pattern(u) for u in artifact_utils.get_split_uris([examples], "eval")]
        vocab_sizes, num_classes = train.vocabulary_sizes(self.tf_transform_output, self.spec)
        self.vocab_sizes = vocab_sizes
        self.model_args = (self.spec, vocab_sizes, num_classes, config.training.hidden_units,
                           config.training.learning_rate)
        self.batch_size = config.training.batch_size
        self.eval_steps = input.batches_per_epoch(self.our_dataset(self.eval_files, shuffle=False),
                                                  self.eval_files, self.batch_size)
        self.train_records = int(self.our_dataset(self.train_files, shuffle=False).reduce(
            tf.constant(0), lambda count, batch: count + tf.shape(batch[1])[0]))
        self.train_steps = -(-self.train_records // self.batch_size)
        self.results: dict[str, dict] = {}

    def our_dataset(self, files, shuffle: bool, drop_remainder: bool = False, batch_size: int | None = None,
                    part=None):
        from trainer_module import input

        return input.input_dataset(
            files, self.tf_transform_output, self.spec.transformed_label_key,
            batch_size or self.batch_size, shuffle=shuffle, drop_remainder=drop_remainder,
            part=part or input.WHOLE_SPLIT,
        )

    def steps_for(self, dataset) -> int:
        """Batches in one epoch of a training dataset: whole ones only where its batch
        dimension is static (drop_remainder)."""
        if dataset.element_spec[1].shape[0] is not None:
            return self.train_records // self.batch_size
        return self.train_steps

    def anchor_dataset(self, files):
        """TFX penguin example's _input_fn: the factory's defaults, then .repeat()."""
        from tfx_bsl.public import tfxio

        return self.data_accessor.tf_dataset_factory(
            files,
            tfxio.TensorFlowDatasetOptions(batch_size=self.batch_size, label_key=self.spec.transformed_label_key),
            self.tf_transform_output.transformed_metadata.schema,
        ).repeat()

    def measure(self, name: str, build: Callable, train_ds, eval_ds, repeat: bool,
                steps: int | None = None, split: dict | None = None, spe: int = 1) -> dict:
        """Builds a model, times its training, evaluates it, then times the split of its
        step (split: the step_split arguments; None: not measured).

        steps: train only that many steps (one epoch, rounded up to whole executions of
        spe steps) instead of the full epochs, for variants too slow to finish, after one
        untimed execution that traces (and XLA-compiles) the step; the result says so.
        """
        import tf_keras as keras

        epochs = self.epochs if steps is None else 1
        if steps:
            steps = -(-steps // spe) * spe
        steps_per_epoch = steps or self.steps_for(train_ds)
        compile_s = None
        with policy_reset():
            classifier = build()
            if steps:
                started = time.perf_counter()
                classifier.fit(train_ds.repeat(), epochs=1, steps_per_epoch=spe, verbose=0)
                compile_s = round(time.perf_counter() - started, 2)
            started = time.perf_counter()
            classifier.fit(train_ds.repeat() if steps else train_ds, epochs=epochs,
                           steps_per_epoch=steps_per_epoch if (repeat or steps) else None, verbose=0)
            seconds = time.perf_counter() - started
            classifier.jit_compile = False  # as run_fn: XLA for the training step only
            accuracy = classifier.evaluate(eval_ds, steps=self.eval_steps, verbose=0, return_dict=True)["accuracy"]
            trained = steps_per_epoch * epochs
            result = {"eps": round(trained * self.batch_size / seconds), "seconds": round(seconds, 2),
                      "accuracy": round(float(accuracy), 4), "trained_steps": trained,
                      "ms_per_step": round(1000 * seconds / trained, 2)}
            if compile_s is not None:
                result["compile_s"] = compile_s
            if split is not None:
                result.update(step_split(classifier, self.cached_batches(), **split))
        keras.backend.clear_session()
        self.results[name] = result
        print_variant(name, result, f"  ({steps} steps after a first execution of {compile_s}s)" if steps else "")
        return result

    def cached_batches(self):
        """SPLIT_BATCHES training batches held in memory, for timing steps without input."""
        if not hasattr(self, "_cached_batches"):
            self._cached_batches = self.our_dataset(self.train_files, shuffle=False, drop_remainder=True).take(
                SPLIT_BATCHES).cache()
            for _ in self._cached_batches:
                pass
        return self._cached_batches


# Batches (cached in memory) each round of a step split is timed over; the median of the
# rounds counts.
SPLIT_BATCHES = 128
SPLIT_ROUNDS = 5


def print_variant(name: str, result: dict, suffix: str = "") -> None:
    share = f"  optimizer {result['optimizer_share']:5.1%} of {result['step_ms_cached']:.2f} ms" if (
        "optimizer_share" in result) else ""
    print(f"  {name:<14} {result['eps']:>9,} examples/s  {result['ms_per_step']:7.2f} ms/step"
          f"  {result['seconds']:7.1f}s  accuracy {result['accuracy']:.4f}{share}{suffix}", flush=True)


def step_split(classifier, batches, steps_per_execution: int = 32, xla: bool = False) -> dict:
    """ms per training step over cached batches, and the share of it the optimizer's update
    takes: the same forward and backward pass timed with and without apply_gradients.

    As in fit(), each call runs steps_per_execution steps in a loop over the batches, the
    step itself XLA-compiled where the variant is; the gradient-only step returns a sum of
    every gradient, so none is pruned away.
    """
    import tensorflow as tf

    variables = classifier.trainable_variables
    optimizer = classifier.optimizer
    strategy = classifier.distribute_strategy  # the anchor's is MirroredStrategy

    def gradients(x, y):
        with tf.GradientTape() as tape:
            loss = classifier.compute_loss(x, y, classifier(x, training=True))
        return tape.gradient(loss, variables)

    def touch(grads) -> tf.Tensor:
        return tf.add_n([tf.reduce_sum(tf.cast(g.values if isinstance(g, tf.IndexedSlices) else g, tf.float32))
                         for g in grads])

    def gradients_only(x, y):
        return touch(gradients(x, y))

    def full_step(x, y):
        grads = gradients(x, y)
        optimizer.apply_gradients(zip(grads, variables))
        return touch(grads)

    def executions(step):
        compiled = tf.function(step, jit_compile=xla)

        @tf.function
        def run(iterator):
            total = tf.constant(0.0)
            for _ in tf.range(steps_per_execution):
                x, y = next(iterator)
                total += strategy.reduce("SUM", strategy.run(compiled, args=(x, y)), axis=None)
            return total
        return run

    calls = max(1, SPLIT_BATCHES // steps_per_execution)
    runs = {name: (executions(step), iter(batches.repeat()))
            for name, step in (("gradients", gradients_only), ("full", full_step))}
    for run, iterator in runs.values():
        run(iterator)  # trace and warm up
    timings: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(SPLIT_ROUNDS):  # alternated, so drift on this shared machine hits both alike
        for name, (run, iterator) in runs.items():
            started = time.perf_counter()
            for _ in range(calls):
                run(iterator)
            timings[name].append(1000 * (time.perf_counter() - started) / (calls * steps_per_execution))
    timings = {name: statistics.median(values) for name, values in timings.items()}
    return {"step_ms_cached": round(timings["full"], 2),
            "optimizer_share": round(max(0.0, 1 - timings["gradients"] / timings["full"]), 3)}


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
    parser.add_argument("--slow-steps", type=int, default=SLOW_STEPS,
                        help=f"steps the eager and XLA variants train (default: {SLOW_STEPS}; "
                             "a full epoch can take hours)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the variants in this process (default: each in a fresh one)")
    # Set by the parent for a variant that builds on earlier results.
    parser.add_argument("--base-spe", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--base-xla", choices=("on", "off"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    config = PipelineConfig(home=args.workdir, dataset="synthetic", rows=args.rows, pipeline_name=PIPELINE_NAME)
    examples, graph_uri = transformed_data(config)
    only = set(args.only.split(",")) if args.only else None
    if args.in_process:
        bench = Bench(examples, graph_uri, config, args.epochs, args.slow_steps)
        print(f"train: {bench.train_steps} batches of {bench.batch_size} x {args.epochs} epoch(s); "
              f"eval: {bench.eval_steps} batches; CPU: {cpu_model()}", flush=True)
        base_xla = None if args.base_xla is None else args.base_xla == "on"
        run_variants(bench, only, base_spe=args.base_spe, base_xla=base_xla)
        results = bench.results
    else:
        print(f"each variant in a fresh process; CPU: {cpu_model()}", flush=True)
        results = run_isolated(args, only)
    harness.print_result(summarize(results), sort_keys=True)
    return 0


# The order variants run in; each later one builds on the faster of graph and graph_xla
# and on the tuned steps_per_execution ("spe").
VARIANTS = ("input", "anchor", "eager", "graph", "graph_xla", "spe", "bf16", "sparse", "sparse_adagrad",
            "sparse_xla", "sparse_bf16", "auto")


def run_isolated(args: argparse.Namespace, only: set[str] | None) -> dict[str, dict]:
    """Each variant in its own interpreter: what one variant leaves behind in a process
    (memory, thread pools, traced functions) cannot slow or speed up the next."""
    import json
    import subprocess

    results: dict[str, dict] = {}
    base_spe: int | None = None
    for name in VARIANTS:
        if only is not None and name not in only:
            continue
        base_xla = "graph_xla" in results and results["graph_xla"]["eps"] > results.get("graph", {"eps": 0})["eps"]
        command = [sys.executable, __file__, "--in-process", "--only", name, "--rows", str(args.rows),
                   "--epochs", str(args.epochs), "--workdir", args.workdir, "--slow-steps", str(args.slow_steps),
                   "--base-xla", "on" if base_xla else "off"]
        if base_spe:
            command += ["--base-spe", str(base_spe)]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                              cwd=harness.REPO)
        lines = done.stdout.splitlines()
        for line in lines:
            if line.startswith("  "):
                print(line, flush=True)
        if done.returncode != 0 or not lines or not lines[-1].startswith("{"):
            sys.exit(f"variant {name} failed (exit {done.returncode}); rerun it with --in-process --only {name}")
        results.update(json.loads(lines[-1])["variants"])
        base_spe = base_spe or next((int(key[4:]) for key in results if key.startswith("spe_")), None)
    return results


def cpu_model() -> str:
    from trainer_module import hardware

    return f"{harness.cpu_name()}, native bfloat16: {'yes' if hardware.cpu_has_bfloat16() else 'no'}"


def run_variants(bench: Bench, only: set[str] | None, base_spe: int | None = None,
                 base_xla: bool | None = None) -> None:
    import tensorflow as tf

    from trainer_module import model

    def wanted(name: str) -> bool:
        return only is None or name in only or (name.startswith("spe_") and "spe" in only)

    def build(precision: str = "float32", xla: bool = False, spe: int = 1, eager: bool = False,
              strategy: tf.distribute.Strategy | None = None, optimizer: str = "adam",
              shape: model.Shape = model.PLAIN, weight_decay: float = 0.0) -> Callable:
        def make():
            import tf_keras as keras

            keras.mixed_precision.set_global_policy(precision)
            with (strategy or tf.distribute.get_strategy()).scope():
                classifier = model.build_model(*bench.model_args, shape=shape, weight_decay=weight_decay,
                                               jit_compile=xla, steps_per_execution=spe, optimizer=optimizer)
            classifier.run_eagerly = eager
            return classifier
        return make

    def train_ds(xla: bool = False):
        """A fresh dataset object per variant: each reads the files again (no shared cache)."""
        return bench.our_dataset(bench.train_files, shuffle=True, drop_remainder=xla)

    eval_ds = bench.our_dataset(bench.eval_files, shuffle=False)

    if wanted("input"):
        bench.results["input"] = input_only(train_ds(), bench.batch_size)
        print(f"  {'input':<14} {bench.results['input']['eps']:>9,} examples/s  (first, uncached epoch; "
              f"cached: {bench.results['input']['cached_eps']:,})", flush=True)
    if wanted("anchor"):
        bench.measure("anchor", build(strategy=tf.distribute.MirroredStrategy()),
                      bench.anchor_dataset(bench.train_files), bench.anchor_dataset(bench.eval_files), repeat=True,
                      split={"steps_per_execution": 1})
    if wanted("eager"):
        bench.measure("eager", build(eager=True), train_ds(), eval_ds, repeat=False, steps=bench.slow_steps)
    if wanted("graph"):
        bench.measure("graph", build(), train_ds(), eval_ds, repeat=False, split={"steps_per_execution": 1})
    if wanted("graph_xla"):
        bench.measure("graph_xla", build(xla=True), train_ds(xla=True), eval_ds, repeat=False,
                      steps=bench.slow_steps)
    # Each later variant adds its change to the faster of graph and graph + XLA.
    xla = base_xla if base_xla is not None else (
        "graph_xla" in bench.results and bench.results["graph_xla"]["eps"] > bench.results.get(
            "graph", {"eps": 0})["eps"])
    spe = tune_steps_per_execution(bench, build, xla) if wanted("spe") else None
    if spe:
        bench.measure(f"spe_{spe}", build(xla=xla, spe=spe), train_ds(xla).repeat(), eval_ds, repeat=True,
                      split={"steps_per_execution": spe, "xla": xla})
    spe = spe or base_spe or bench.config.training.steps_per_execution
    if wanted("bf16"):
        bench.measure("bf16", build("mixed_bfloat16", xla=xla, spe=spe), train_ds(xla).repeat(), eval_ds,
                      repeat=True, split={"steps_per_execution": spe, "xla": xla})
    for name, optimizer in (("sparse", "lazy_adam"), ("sparse_adagrad", "adagrad_adam")):
        if wanted(name):
            bench.measure(name, build(spe=spe, optimizer=optimizer), train_ds().repeat(), eval_ds, repeat=True,
                          split={"steps_per_execution": spe})
    if wanted("sparse_xla"):
        bench.measure("sparse_xla", build(xla=True, spe=spe, optimizer="lazy_adam"), train_ds(True), eval_ds,
                      repeat=False, steps=bench.slow_steps, spe=spe)
    if wanted("sparse_bf16"):
        bench.measure("sparse_bf16", build("mixed_bfloat16", spe=spe, optimizer="lazy_adam"),
                      train_ds().repeat(), eval_ds, repeat=True, split={"steps_per_execution": spe})
    if wanted("auto"):
        measure_auto(bench, build)


def measure_auto(bench: Bench, build: Callable) -> None:
    """run_fn's choices and its way of training, timed from the uncached files: the step
    count (for data the pipeline caches, the one read of the files, filling the cache)
    and fit. Then a fresh model trains two epochs the same way: its first epoch, the count
    included, against its second."""
    from trainer_module import config as training_config
    from trainer_module import hardware, input, members, model, optimizer_choice, train

    knobs = bench.config.training
    devices = hardware.detect()
    optimizer = optimizer_choice.choose(knobs.optimizer, model.has_embeddings(bench.spec, bench.vocab_sizes),
                                        on_tpu=devices.has_tpu)
    choice = hardware.choose(devices, knobs.strategy, knobs.precision, knobs.xla,
                             sparse_updates=optimizer in optimizer_choice.SPARSE_OPTIMIZERS)
    spe = knobs.steps_per_execution
    strategy = hardware.build_strategy(choice.strategy)
    global_batch = bench.batch_size * strategy.num_replicas_in_sync  # as run_fn
    # The model run_fn builds (dropout by the table's size, the linear term, weight decay: the
    # dataset's knobs).
    shape = model.Shape(dropout=training_config.dropout_rate(knobs, bench.train_records),
                        numeric_encoding=knobs.numeric_encoding, linear=knobs.linear)
    make = build(choice.precision, choice.xla, spe, strategy=strategy, optimizer=optimizer, shape=shape,
                 weight_decay=knobs.weight_decay)
    # run_fn's other knobs as the dataset sets them; no histograms to time.
    training = dataclasses.replace(knobs, epochs=bench.epochs, steps_per_execution=spe, tensorboard_histogram_freq=0)

    def run_fn_training(classifier, epochs: int, run_dir: str) -> tuple[dict, float]:
        """As run_fn: fit on the train split less its validation slice, which early stopping
        watches after every epoch (its counting, reading and evaluation are timed). The eval
        split's count serves the evaluation after training, which the anchor's time leaves out
        too: it is counted before the clock starts."""
        eval_ds = bench.our_dataset(bench.eval_files, shuffle=False, batch_size=global_batch)
        eval_steps = input.batches_per_epoch(eval_ds, bench.eval_files, global_batch)
        started = time.perf_counter()
        fit_part = input.Part(input.FIT, training.validation_share)
        train_ds = bench.our_dataset(bench.train_files, shuffle=True, drop_remainder=choice.xla,
                                     batch_size=global_batch, part=fit_part)
        steps = input.EpochSteps(train=input.batches_per_epoch(train_ds, bench.train_files, global_batch, fit_part),
                                 eval=eval_steps)
        validation_ds, steps = members.validation_slice(bench.train_files, bench.tf_transform_output,
                                                        bench.spec.transformed_label_key, global_batch,
                                                        input.Part(input.VALIDATION, training.validation_share),
                                                        steps)
        counted = time.perf_counter() - started
        return train.fit_and_evaluate(classifier, train_ds, eval_ds, dataclasses.replace(training, epochs=epochs),
                                      run_dir, global_batch, steps, task=bench.spec.task,
                                      validation_ds=validation_ds), counted

    with policy_reset(), tempfile.TemporaryDirectory() as run_dir:
        classifier = make()
        report, counted = run_fn_training(classifier, bench.epochs, run_dir)
        seconds = counted + report["fit_wall_s"]
        trained = report["train_steps"]
        result = {"eps": round(trained * global_batch / seconds), "seconds": round(seconds, 2),
                  "count_s": round(counted, 2), "accuracy": round(report["final_eval_accuracy"], 4),
                  "trained_steps": trained, "ms_per_step": round(1000 * seconds / trained, 2),
                  **step_split(classifier, bench.cached_batches(), spe, choice.xla),
                  "strategy": choice.strategy, "precision": choice.precision, "xla": choice.xla,
                  "optimizer": optimizer, "steps_per_execution": spe, "dropout": shape.dropout}
        bench.results["auto"] = result
        print_variant("auto", result, f"  ({optimizer}, {choice.precision}, xla {choice.xla}, "
                                      f"{choice.strategy}, dropout {shape.dropout}; counting the batches took "
                                      f"{counted:.1f}s)")

        report, counted = run_fn_training(make(), 2, run_dir)
        examples = report["train_steps"] / 2 * global_batch
        first_epoch_s = counted + examples / report["first_epoch_examples_per_second"]
        result.update(first_epoch_eps=round(examples / first_epoch_s),
                      cached_epoch_eps=round(report["later_epochs_examples_per_second"]))
        print(f"  {'auto epochs':<14} first (count and fit, from the files) {result['first_epoch_eps']:,} "
              f"examples/s, second (cached) {result['cached_epoch_eps']:,}", flush=True)


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
    """The candidate with the most examples/second over a short run (float32, Adam)."""
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
    if "auto" in results:
        auto = results["auto"]
        summary.update(auto_first_epoch_eps=auto["first_epoch_eps"], auto_cached_epoch_eps=auto["cached_epoch_eps"],
                       first_epoch_vs_cached=round(auto["first_epoch_eps"] / auto["cached_epoch_eps"], 2))
    if "input" in results and "auto" in results:
        summary.update(input_eps=results["input"]["eps"],
                       input_vs_train=round(results["input"]["eps"] / results["auto"]["eps"], 2))
    return summary


if __name__ == "__main__":
    sys.exit(main())
