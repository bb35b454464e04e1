"""One scoring, start to end, as a library call that never prints: the served version
chosen, the job run on Beam into a staging folder beside the output, a sample of its rows
scored again through in-process predict and compared, then the folder renamed into place.
Whatever fails, the output is either complete or not there."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Iterator, Sequence

from pipeline.config import PipelineConfig
from pipeline.errors import ConfigError
from pipeline.scoring import inputs

OUTPUT_FORMATS = ("csv", "parquet")
LABELS = ("stable", "canary")
# Rows of the output scored again in this process through serving_default, as predict does.
SAMPLE_SIZE = 32
# Relative and absolute: a few float32 units in the last place (2**-23 is about 1.2e-7).
FLOAT32_TOLERANCE = 1e-6


@dataclasses.dataclass(frozen=True)
class ScoreOutcome:
    output: Path
    scores: list[Path]
    errors: list[Path]
    rows_scored: int
    rows_refused: int
    model_version: int
    model_dir: Path
    ids: tuple[str, ...]
    beam: str
    rows_checked: int  # the sample scored again in-process, all agreeing
    seconds: float


def score(config: PipelineConfig, data: str, output: Path, *, version: int | None = None, label: str | None = None,
          output_format: str = "csv", ids: Sequence[str] = (), force: bool = False) -> ScoreOutcome:
    started = time.monotonic()
    started_ms = time.time_ns() // 1_000_000
    files, input_format = inputs.input_files(data)
    spec = config.spec
    id_columns = inputs.checked_columns(files, input_format, spec, ids)
    model_version, model_dir = chosen_version(config, version, label)
    _check_output(output, force, files, config.home_path)
    fingerprints = tuple(inputs.fingerprint(f, input_format) for f in files)
    schema = inputs.row_schema(spec)
    from pipeline.provenance import scorings
    from pipeline.runners import local
    from pipeline.scoring import guard, job

    columns = job.Columns(ids=id_columns, predicted=f"predicted_{spec.label}",
                          probabilities=tuple(f"probability_{c}" for c in _classes(model_dir)))
    _check_id_names(columns)
    mode = local.mode_for_size(config.beam_mode, sum(f.stat().st_size for f in files))
    with guard.guarded("the scoring", config.log_path) as stopped, _staging(output) as staging:
        counts = _run(local.prepare_direct_runner(mode), job.JobSpec(
            files=tuple(str(f) for f in files), input_format=input_format, output_format=output_format,
            staging=str(staging), model_dir=str(model_dir), model_version=model_version, schema=schema,
            columns=columns, sample_size=SAMPLE_SIZE))
        _check_some_scored(counts, staging, data)
        checked = _check_sample(staging / job.SAMPLE_NAME, model_dir, schema, columns)
        stopped.check()  # Beam may have carried on past a Ctrl-C: nothing is published then
        # Recorded before the rename: an output in place always has its record.
        _record(config, scorings.Scoring(
            model_name=config.serving_dir.name, model_version=model_version, inputs=fingerprints, output=output,
            rows_scored=counts[job.SCORED], rows_refused=counts[job.REFUSED], output_format=output_format,
            ids=id_columns, beam=f"{mode} DirectRunner", started_ms=started_ms,
            ended_ms=time.time_ns() // 1_000_000))
        _publish(staging, output)
    return ScoreOutcome(output=output, scores=sorted(output.glob(f"{job.SCORES_PREFIX}-*")),
                        errors=sorted(output.glob(f"{job.ERRORS_PREFIX}-*")), rows_scored=counts[job.SCORED],
                        rows_refused=counts[job.REFUSED], model_version=model_version, model_dir=model_dir,
                        ids=id_columns, beam=f"{mode} DirectRunner", rows_checked=checked,
                        seconds=time.monotonic() - started)


def _check_id_names(columns) -> None:
    """An id column named like one the scores add would make two columns of one name."""
    taken = [name for name in columns.ids if name in columns.names[len(columns.ids):]]
    if taken:
        raise ConfigError(f"--id {taken[0]!r} has the name of a column the scores add "
                          f"({', '.join(columns.names[len(columns.ids):])}); rename that column in the file")


def _check_some_scored(counts: dict[str, int], staging: Path, data: str) -> None:
    """No row scored is no output: the file had none, or the schema refused every one (a
    column of the wrong type, most often), and the first reason says which."""
    from pipeline.scoring import job

    if counts[job.SCORED]:
        return
    if not counts[job.REFUSED]:
        raise ConfigError(f"--data {data} holds no rows; give a file with rows to score")
    import csv

    with open(sorted(staging.glob(f"{job.ERRORS_PREFIX}-*"))[0], newline="") as handle:
        first = next(csv.DictReader(handle))
    raise ConfigError(f"the schema refused every row of --data {data} ({counts[job.REFUSED]}), e.g. line "
                      f"{first['line']}: {first['reason']}; nothing was written")


def chosen_version(config: PipelineConfig, version: int | None, label: str | None) -> tuple[int, Path]:
    """--model-version N, else the version --label (default stable) names in models.config."""
    from serving import model_config, push

    versions = push.versions(config.serving_dir)
    if not versions:
        raise ConfigError(f"no pushed model under {config.serving_dir}: run the pipeline first (`turbotfx run`)")
    if version is not None:
        if version not in versions:
            raise ConfigError(f"no version {version} of model {config.model_name!r} under {config.serving_dir}; "
                              f"it has {', '.join(map(str, versions))}")
        return version, config.serving_dir / str(version)
    status = model_config.status(config.serving_dir.parent, config.serving_dir.name)
    named = status.canary if label == "canary" else status.stable
    if named is None or named not in versions:
        raise ConfigError(f"no version of model {config.model_name!r} is labelled {label or 'stable'}; "
                          "name one with --model-version N (`turbotfx serving status` lists them)")
    return named, config.serving_dir / str(named)


def _record(config: PipelineConfig, scoring) -> None:
    """The scoring (a provenance.scorings.Scoring) into the workspace's metadata store,
    beside the runs that made the model."""
    from pipeline.provenance import scorings
    from pipeline.store import connection

    store = connection.open_store(config.metadata_store_url, create=False)
    scorings.record(store, scoring, pipeline_name=config.pipeline_name)


def _check_output(output: Path, force: bool, files: Sequence[Path], home: Path) -> None:
    """--output is a new folder, or one an earlier scoring wrote (replaced only with --force):
    never the workspace, a folder holding it, or one holding the input files."""
    from pipeline.scoring import job

    if output.exists() and not output.is_dir():
        raise ConfigError(f"--output {output} is a file; name a folder to write the scores into")
    if not output.parent.is_dir():
        raise ConfigError(f"--output {output}: its parent folder {output.parent} does not exist; create it first")
    resolved = output.resolve()
    if home.resolve().is_relative_to(resolved):
        raise ConfigError(f"--output {output} holds the workspace {home}; name a new folder for the scores")
    inside = [f for f in files if f.resolve().is_relative_to(resolved)]
    if inside:
        raise ConfigError(f"--output {output} holds the input file {inside[0]}; name a new folder for the scores")
    present = sorted(p.name for p in output.iterdir()) if output.is_dir() else []
    if not present:
        return
    if not force:
        raise ConfigError(f"--output {output} already holds files; name a new folder, or add --force to replace "
                          "an earlier scoring's output")
    foreign = [name for name in present if not name.startswith((f"{job.SCORES_PREFIX}-", f"{job.ERRORS_PREFIX}-"))]
    if foreign:
        raise ConfigError(f"--output {output} holds files no scoring wrote ({', '.join(foreign[:3])}); --force "
                          "replaces only an earlier scoring's output: name a new folder")


@contextlib.contextmanager
def _staging(output: Path) -> Iterator[Path]:
    """A folder beside the output (same file system, so the rename is atomic), gone after."""
    staging = output.parent / f".{output.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _publish(staging: Path, output: Path) -> None:
    """The staged files become the output; an output replaced (--force) is removed after."""
    replaced = output.parent / f".{output.name}.replaced-{os.getpid()}"
    if output.exists():
        output.rename(replaced)
    staging.rename(output)
    shutil.rmtree(replaced, ignore_errors=True)


def _classes(model_dir: Path) -> list[str]:
    """The classifier's label values in the order of its probabilities ([] for regression):
    the signature called once on a row with every feature missing."""
    import tensorflow as tf

    from serving import forest_ops
    from serving.contract import OUTPUT_CLASSES, SERVING_RAW

    signature = forest_ops.load(str(model_dir)).signatures[SERVING_RAW]
    blank = {name: tf.constant([""] if spec.dtype == tf.string else [math.nan], dtype=spec.dtype)
             for name, spec in signature.structured_input_signature[1].items()}
    outputs = signature(**blank)
    return [c.decode() for c in outputs[OUTPUT_CLASSES].numpy()[0].tolist()] if OUTPUT_CLASSES in outputs else []


def _run(beam_args: list[str], spec) -> dict[str, int]:
    import apache_beam as beam
    from apache_beam.metrics.metric import MetricsFilter
    from apache_beam.options.pipeline_options import PipelineOptions

    from pipeline.scoring import job

    pipeline = beam.Pipeline(options=PipelineOptions(beam_args))
    job.build(pipeline, spec)
    result = pipeline.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter().with_namespace(job.NAMESPACE))["counters"]
    counts = {job.SCORED: 0, job.REFUSED: 0}
    for counter in counters:
        counts[counter.key.metric.name] += counter.committed or 0
    return counts


def agrees(written: list, again: list) -> bool:
    """The same label, and each number equal to float32's rounding: TF's kernels may add in
    another order at another batch size (measured on an AMD EPYC: 3.80364509e-4 from a batch
    of 342 rows, 3.80364334e-4 from 32), so the last bits of a float32 are not the test."""
    if len(written) != len(again):
        return False
    for mine, theirs in zip(written, again):
        if isinstance(mine, str) or isinstance(theirs, str) or mine is None or theirs is None:
            if mine != theirs:
                return False
        elif not math.isclose(mine, theirs, rel_tol=FLOAT32_TOLERANCE, abs_tol=FLOAT32_TOLERANCE):
            return False
    return True


def _check_sample(sample_file: Path, model_dir: Path, schema, columns) -> int:
    """The sample's rows scored again through in-process predict (serving_default, fed
    tf.Examples): each prediction must be the one the job wrote (`agrees`)."""
    from serving.client import predict_in_process

    sample = [json.loads(line) for line in sample_file.read_text().splitlines() if line]
    sample_file.unlink()
    if not sample:
        return 0
    predictions = predict_in_process(model_dir, schema, [s["features"] for s in sample])
    start = len(columns.ids)
    for item, prediction in zip(sample, predictions):
        written = item["out"][start:-1]
        again = [prediction.value] if prediction.value is not None else [prediction.label,
                                                                          *(prediction.probabilities or [])]
        if not agrees(written, again):
            path, line = item["where"]
            raise ConfigError(f"scoring disagreed with `turbotfx predict` on {path} line {line} ({written} against "
                              f"{again}); nothing was written: report it with the model version")
    return len(sample)
