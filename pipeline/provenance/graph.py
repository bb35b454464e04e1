"""Reading ML Metadata: the kit every provenance question is built from (as MLMD's own
metadata_resolver_utils is for its resolver).

Type names fetched once per store, a lineage graph merged from several queries and indexed
both ways, TFX's context and event names, and property readers that decode what our
components record (JSON text, base64 JSON, non-finite doubles as None).
"""

from __future__ import annotations

import collections
import json
import math
from typing import Any, Iterable, Sequence, TypeVar

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.atomic_pusher import keys as pusher_keys
from components.reporting_trainer import keys as trainer_keys
from pipeline.errors import ConfigError

INPUT = mlmd_pb.Event.INPUT
OUTPUT = mlmd_pb.Event.OUTPUT
# Only what the graph walk reads: the types come from one cached lookup instead.
GRAPH_FIELDS = ["artifacts", "executions", "events"]
STATE_NAMES = {value: name for name, value in mlmd_pb.Execution.State.items()}
# TFX's contexts: the pipeline, one run of it, and each node ("<pipeline>.<node id>").
PIPELINE_CONTEXT, RUN_CONTEXT, NODE_CONTEXT = "pipeline", "pipeline_run", "node"
# PushedModels that were really pushed (TFX records a PushedModel for every Pusher run).
PUSHED_FILTER = f"type = 'PushedModel' AND custom_properties.{pusher_keys.PUSHED}.int_value = 1"


class LineageError(ConfigError):
    """A lineage question the store cannot answer (no such model, version or artifact)."""


class TypeNames:
    """Type id -> name, fetched once per store: types never change once registered."""

    def __init__(self, store: metadata_store.MetadataStore) -> None:
        self.store = store
        self._artifacts: dict[int, str] = {}
        self._executions: dict[int, str] = {}
        self._contexts: dict[int, str] = {}

    def artifact(self, type_id: int) -> str:
        if type_id not in self._artifacts:
            self._artifacts = {t.id: t.name for t in self.store.get_artifact_types()}
        return self._artifacts.get(type_id, "?")

    def execution(self, type_id: int) -> str:
        if type_id not in self._executions:
            self._executions = {t.id: t.name for t in self.store.get_execution_types()}
        return self._executions.get(type_id, "?")

    def context(self, type_id: int) -> str:
        if type_id not in self._contexts:
            self._contexts = {t.id: t.name for t in self.store.get_context_types()}
        return self._contexts.get(type_id, "?")


class Graph:
    """Artifacts, executions and the events between them, merged from several queries."""

    def __init__(self, types: TypeNames) -> None:
        self.types = types
        self.artifacts: dict[int, mlmd_pb.Artifact] = {}
        self.executions: dict[int, mlmd_pb.Execution] = {}
        # Edges (artifact id, execution id, event type, key), indexed both ways: a store
        # with many cached reruns puts hundreds of executions in one subgraph.
        self._edges: set[tuple[int, int, int, str]] = set()
        self._by_artifact: dict[int, list[tuple[int, int, int, str]]] = collections.defaultdict(list)
        self._by_execution: dict[int, list[tuple[int, int, int, str]]] = collections.defaultdict(list)

    def add(self, artifacts: Iterable[mlmd_pb.Artifact] = (), executions: Iterable[mlmd_pb.Execution] = (),
            events: Iterable[mlmd_pb.Event] = ()) -> None:
        self.artifacts.update((a.id, a) for a in artifacts)
        self.executions.update((e.id, e) for e in executions)
        for event in events:
            edge = (event.artifact_id, event.execution_id, event.type, event_key(event))
            if edge not in self._edges:
                self._edges.add(edge)
                self._by_artifact[edge[0]].append(edge)
                self._by_execution[edge[1]].append(edge)

    @property
    def events(self) -> list[tuple[int, int, int, str]]:
        return sorted(e for e in self._edges if e[0] in self.artifacts and e[1] in self.executions)

    def artifact_type(self, artifact: mlmd_pb.Artifact) -> str:
        return self.types.artifact(artifact.type_id)

    def execution_type(self, execution: mlmd_pb.Execution) -> str:
        return self.types.execution(execution.type_id)

    def producer(self, artifact_id: int) -> mlmd_pb.Execution | None:
        """The execution that made the artifact: the first one, not a later cached reuse."""
        ids = [e[1] for e in self._by_artifact[artifact_id] if e[2] == OUTPUT and e[1] in self.executions]
        return self.executions[min(ids)] if ids else None

    def inputs(self, execution_id: int, key: str) -> list[mlmd_pb.Artifact]:
        return self._artifacts_of(execution_id, INPUT, key)

    def outputs(self, execution_id: int, key: str) -> list[mlmd_pb.Artifact]:
        return self._artifacts_of(execution_id, OUTPUT, key)

    def _artifacts_of(self, execution_id: int, event_type: int, key: str) -> list[mlmd_pb.Artifact]:
        return [self.artifacts[e[0]] for e in self._by_execution[execution_id]
                if e[2] == event_type and e[3] == key and e[0] in self.artifacts]

    def consumers(self, artifact_id: int, key: str) -> list[mlmd_pb.Execution]:
        ids = {e[1] for e in self._by_artifact[artifact_id]
               if e[2] == INPUT and e[3] == key and e[1] in self.executions}
        return [self.executions[i] for i in sorted(ids)]


def event_key(event: mlmd_pb.Event) -> str:
    """The component input or output name the event belongs to ('model', 'examples', ...)."""
    for step in event.path.steps:
        if step.HasField("key"):
            return step.key
    return ""


def subgraph(store: metadata_store.MetadataStore, artifact_id: int, direction: int,
             hops: int) -> mlmd_pb.LineageGraph:
    """One get_lineage_subgraph call from one artifact."""
    options = mlmd_pb.LineageSubgraphQueryOptions(max_num_hops=hops, direction=direction)
    options.starting_artifacts.filter_query = f"id = {int(artifact_id)}"
    return store.get_lineage_subgraph(options, GRAPH_FIELDS)


# --- readers ------------------------------------------------------------------------

T = TypeVar("T")


def first(items: Sequence[T]) -> T | None:
    return items[0] if items else None


def last(items: Sequence[T]) -> T | None:
    return items[-1] if items else None


def value_of(value: mlmd_pb.Value) -> Any:
    """A property value as Python; a non-finite double as None (JSON has no NaN)."""
    kind = value.WhichOneof("value")
    if kind == "double_value":
        return value.double_value if math.isfinite(value.double_value) else None
    if kind == "struct_value":
        from google.protobuf import json_format

        return json_format.MessageToDict(value.struct_value)
    return getattr(value, kind) if kind else None


def decoded_json(text: str | None) -> Any:
    return None if text is None else trainer_keys.from_json_property(text)


def property_of(artifact: mlmd_pb.Artifact, name: str) -> Any:
    """A property or custom property of an artifact or execution; None when absent."""
    if name in artifact.properties:
        return value_of(artifact.properties[name])
    if name in artifact.custom_properties:
        return value_of(artifact.custom_properties[name])
    return None


def json_property(execution: mlmd_pb.Execution, name: str) -> dict[str, Any]:
    """A property holding a JSON object (a Trainer's custom_config); {} when absent or not one."""
    text = property_of(execution, name)
    parsed = json.loads(text) if isinstance(text, str) and text else None
    return parsed if isinstance(parsed, dict) else {}


def prefixed_properties(artifact: mlmd_pb.Artifact, prefix: str) -> dict[str, Any]:
    """Custom properties named <prefix><key>, as {key: value}; JSON text decoded."""
    values = {}
    for name, value in sorted(artifact.custom_properties.items()):
        if name.startswith(prefix):
            parsed = value_of(value)
            if isinstance(parsed, str) and (parsed[:1] in ("[", "{")
                                            or parsed.startswith(trainer_keys.BASE64_JSON_PREFIX)):
                parsed = trainer_keys.from_json_property(parsed)
            values[name[len(prefix):]] = parsed
    return values
