"""What a run report shows, gathered from MLMD and the run's artifacts: the run summary,
the model's lineage, each split's statistics, the anomalies, the learning curves, the served
labels. Everything here is read from records, nothing is recomputed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Callable, TypeVar

from google.protobuf.message import DecodeError
from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.reporting_evaluator import keys as evaluator_keys
from pipeline.provenance.graph import OUTPUT, RUN_CONTEXT, LineageError, TypeNames, property_of
from pipeline.provenance.summary import RunSummary, pipeline_of, summarize
from pipeline.report import files

T = TypeVar("T")


@dataclasses.dataclass
class SplitStatistics:
    rows: int
    features: dict[str, files.FeatureStatistics]


@dataclasses.dataclass
class RunRecords:
    summary: RunSummary
    lineage: dict[str, Any] | None  # the model's (provenance.lineage.model_lineage); None: no model
    statistics: dict[str, SplitStatistics]  # by split, train first
    anomalies: dict[str, list[tuple[str, str]]] | None  # by split; None: not validated
    curves: dict[str, dict[str, list[tuple[int, float]]]]  # metric -> phase -> (epoch, value)
    labels: dict[str, int]  # the served labels of the model's serving directory ("stable": version)
    # The Evaluator's curves, residuals and permutation importance (reporting_evaluator/insights.py);
    # None with why not: not recorded (an older evaluation, no evaluation) or failed.
    insights: dict[str, Any] | None = None
    insights_missing: str | None = None
    # Artifacts MLMD records whose files are not on this machine ("ExampleStatistics 4 at PATH").
    missing: list[str] = dataclasses.field(default_factory=list)


def find_run(store: metadata_store.MetadataStore, run_id: str | None = None,
             model_version: str | None = None, pipeline_name: str | None = None) -> mlmd_pb.Context:
    """The run context named by its id, the run that trained a pushed version, or else the
    newest run (of pipeline_name, when given)."""
    from pipeline.provenance import lineage

    if model_version is not None:
        return run_of_model(store, lineage.find_model(store, model_version=model_version))
    if run_id is not None:
        run = store.get_context_by_type_and_name(RUN_CONTEXT, run_id)
        if run is None:
            raise LineageError(f"no run {run_id!r} in this metadata store; `turbotfx runs` lists the runs")
        return run
    types = TypeNames(store)
    runs = [c for c in store.get_contexts_by_type(RUN_CONTEXT)
            if pipeline_name is None or pipeline_of(store, types, c) in (None, pipeline_name)]
    if not runs:
        raise LineageError("no run is recorded in this metadata store yet; run the pipeline first (`turbotfx run`)")
    return max(runs, key=lambda c: c.id)


def run_of_model(store: metadata_store.MetadataStore, model: mlmd_pb.Artifact) -> mlmd_pb.Context:
    """The run whose Trainer trained the model."""
    from pipeline.provenance import lineage

    run_id = lineage.model_lineage(store, model)["pipeline"]["run_id"]
    if run_id is None:
        raise LineageError(f"model {model.id} has no recorded run")
    return find_run(store, run_id=run_id)


@dataclasses.dataclass(frozen=True)
class ArtifactRoot:
    """Where artifacts recorded under one URI prefix are now: a compiled pipeline's
    (gs://bucket/root) copied to a local folder."""

    recorded: str
    local: Path

    def locate(self, uri: str) -> str:
        if uri.startswith(self.recorded.rstrip("/") + "/"):
            return str(self.local / uri[len(self.recorded.rstrip("/")) + 1:])
        return uri


def collect(store: metadata_store.MetadataStore, run: mlmd_pb.Context, serving_root: Path | None = None,
            artifact_root: ArtifactRoot | None = None) -> RunRecords:
    """Everything the report of one run shows. serving_root: the workspace's serving folder,
    whose models.config holds the labels (none for a compiled pipeline's records);
    artifact_root: where the artifacts' files are, when not at their recorded URIs."""
    from pipeline.provenance import lineage

    types = TypeNames(store)
    summary = summarize(store, run, types, pipeline=pipeline_of(store, types, run), with_components=True)
    outputs = _outputs_of(store, types, run)
    found = None
    if summary.model_id is not None:
        model = store.get_artifacts_by_id([summary.model_id])[0]
        found = lineage.model_lineage(store, model, types)
    missing: list[str] = []

    def folder(type_name: str) -> str | None:
        """The artifact's folder on this machine; None (and named in missing) if it is not here."""
        if type_name not in outputs:
            return None
        uri = outputs[type_name].uri
        local = artifact_root.locate(uri) if artifact_root else uri
        if not Path(local).is_dir():
            missing.append(f"{type_name} {outputs[type_name].id} at {local}")
            return None
        return local

    def read(type_name: str, reader: Callable[[str], T], empty: T) -> T:
        """What reader reads from the artifact's folder; empty (and named in missing) when
        its files are not here or are damaged: the page leaves that part out, not the rest."""
        uri = folder(type_name)
        if uri is None:
            return empty
        try:
            return reader(uri)
        except (OSError, ValueError, DecodeError) as err:  # ValueError: JSON, a torn record
            missing.append(f"{type_name} {outputs[type_name].id} at {uri} could not be read ({err})")
            return empty

    no_statistics: dict[str, SplitStatistics] = {}
    no_curves: dict[str, dict[str, list[tuple[int, float]]]] = {}
    statistics = read("ExampleStatistics", _statistics, no_statistics)
    anomalies = read("ExampleAnomalies", files.read_anomalies, None)
    curves = read("ModelRun", files.read_curves, no_curves)
    labels = _labels(serving_root, summary.model_name) if serving_root and summary.model_name else {}
    records = RunRecords(summary, found, statistics, anomalies, curves, labels)
    if "ModelEvaluation" not in outputs:
        records.insights_missing = "the model was not evaluated in this run"
    else:
        evaluation = outputs["ModelEvaluation"]
        unread: tuple[dict[str, Any] | None, str | None] = (None, "the evaluation's files could not be read here")
        records.insights, records.insights_missing = read("ModelEvaluation", lambda uri: _insights(evaluation, uri),
                                                          unread)
    records.missing = missing
    return records


def _statistics(uri: str) -> dict[str, SplitStatistics]:
    found = {}
    for split in files.splits(uri):
        rows, features = files.read_statistics(uri, split)
        found[split] = SplitStatistics(rows, features)
    return found


def _insights(evaluation: mlmd_pb.Artifact, folder: str) -> tuple[dict[str, Any] | None, str | None]:
    error = property_of(evaluation, evaluator_keys.INSIGHTS_ERROR)
    if error:
        return None, f"the Evaluator could not compute them: {error}"
    path = Path(folder) / evaluator_keys.INSIGHTS_FILE
    if not path.exists():
        return None, "this evaluation records none (it was made before the Evaluator computed them)"
    return json.loads(path.read_text()), None


def _outputs_of(store: metadata_store.MetadataStore, types: TypeNames, run: mlmd_pb.Context) -> dict[str, mlmd_pb.Artifact]:
    """The run's output artifacts by type, the first of each (a cached component's too: TFX
    records the earlier outputs it reused as the cached execution's)."""
    executions = store.get_executions_by_context(run.id)
    if not executions:
        return {}
    events = store.get_events_by_execution_ids([e.id for e in executions])
    ids = sorted({e.artifact_id for e in events if e.type == OUTPUT})
    outputs: dict[str, mlmd_pb.Artifact] = {}
    for artifact in store.get_artifacts_by_id(ids) if ids else []:
        outputs.setdefault(types.artifact(artifact.type_id), artifact)
    return outputs


def _labels(serving_root: Path, model_name: str) -> dict[str, int]:
    from serving import model_config

    if not model_config.config_path(serving_root).exists():
        return {}
    status = model_config.status(serving_root, model_name)
    return {label: version for label, version in ((model_config.STABLE, status.stable),
                                                   (model_config.CANARY, status.canary))
            if version is not None}
