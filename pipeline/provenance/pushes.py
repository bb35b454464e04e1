"""What the metadata store records about serving: each completed push (version and the
labels it left) and each label change made by `turbotfx serving promote | rollback`.
The record serving/reconcile.py holds the serving directory to."""

from __future__ import annotations

import dataclasses
import json
import time

from ml_metadata.metadata_store import metadata_store
from ml_metadata.proto import metadata_store_pb2 as mlmd_pb

from components.atomic_pusher import keys as pusher_keys
from pipeline.provenance.graph import PUSHED_FILTER
from serving.model_config import CANARY, STABLE

_LIVE_STATES = (mlmd_pb.Execution.NEW, mlmd_pb.Execution.RUNNING)
# Longer than a push takes (a copy of a SavedModel and two renames), by far.
PUSH_IN_FLIGHT_LIMIT_S = 3600
_MODEL = "model_name"


@dataclasses.dataclass
class PushHistory:
    versions: set[int]  # every version a completed push recorded
    labels: dict[str, int] | None  # the labels last recorded (push or label change)
    # Start (epoch seconds) of a Pusher that has not finished: its version may not be recorded yet.
    in_flight_since: int | None = None
    labels_time_ms: int = -1  # when the labels were recorded
    # The store's first record (epoch seconds; None: it has none). A version older than it
    # was pushed before the store existed: the store cannot say it never completed.
    records_since: int | None = None

    def vouches_for(self, version: int) -> bool:
        """A completed push recorded it, the recorded labels name it, or it is older than the
        store (pushed before it, so the store cannot say it never completed)."""
        return (version in self.versions or version in (self.labels or {}).values()
                or self.records_since is not None and version < self.records_since)

    def merge(self, other: PushHistory) -> PushHistory:
        """Two stores' records of one serving directory (two pipelines in one workspace)."""
        newer = other if other.labels_time_ms > self.labels_time_ms else self
        starts = [s for s in (self.in_flight_since, other.in_flight_since) if s is not None]
        births = [s for s in (self.records_since, other.records_since) if s is not None]
        return PushHistory(self.versions | other.versions, newer.labels, min(starts) if starts else None,
                           newer.labels_time_ms, min(births) if births else None)


def push_history(store: metadata_store.MetadataStore, model_name: str, live_runs_possible: bool) -> PushHistory:
    """The records for one model (the serving directory's name). live_runs_possible: False
    when no run can be writing (the SQLite store's run lock is free), so an unfinished
    Pusher is a dead one."""
    history = PushHistory(set(), None)
    latest_labels_ms = -1
    options = metadata_store.ListOptions(filter_query=PUSHED_FILTER)
    for pushed in store.get_artifacts(list_options=options):
        properties = pushed.custom_properties
        if pusher_keys.model_name_of(properties[pusher_keys.PUSHED_DESTINATION].string_value) != model_name:
            continue
        version = properties[pusher_keys.PUSHED_VERSION].string_value
        if version.isdigit():
            history.versions.add(int(version))
        if pusher_keys.SERVING_LABELS in properties and pushed.create_time_since_epoch > latest_labels_ms:
            latest_labels_ms = pushed.create_time_since_epoch
            history.labels = json.loads(properties[pusher_keys.SERVING_LABELS].string_value)
    for change in _executions_of_type(store, pusher_keys.LABEL_CHANGE_TYPE):
        properties = change.custom_properties
        if properties[_MODEL].string_value == model_name and change.create_time_since_epoch > latest_labels_ms:
            latest_labels_ms = change.create_time_since_epoch
            history.labels = {STABLE: properties[STABLE].int_value, CANARY: properties[CANARY].int_value}
    history.labels_time_ms = latest_labels_ms
    first = store.get_executions(list_options=metadata_store.ListOptions(
        limit=1, order_by=metadata_store.OrderByField.CREATE_TIME, is_asc=True))
    history.records_since = first[0].create_time_since_epoch // 1000 if first else None
    if live_runs_possible:
        # A Pusher unfinished for longer than any push takes was killed (a server store
        # cannot tell a live run on another machine from a dead one any other way).
        oldest = (time.time() - PUSH_IN_FLIGHT_LIMIT_S) * 1000
        starts = [e.create_time_since_epoch for e in _pusher_executions(store)
                  if e.last_known_state in _LIVE_STATES and e.create_time_since_epoch > oldest]
        history.in_flight_since = min(starts) // 1000 if starts else None
    return history


def record_label_change(store: metadata_store.MetadataStore, model_name: str, stable: int, canary: int) -> None:
    """Records the labels a promote or rollback left, so a lost models.config is rebuilt with them."""
    execution_type = mlmd_pb.ExecutionType(name=pusher_keys.LABEL_CHANGE_TYPE)
    type_id = store.put_execution_type(execution_type)
    execution = mlmd_pb.Execution(type_id=type_id, last_known_state=mlmd_pb.Execution.COMPLETE,
                                  name=f"{model_name}@{time.time_ns()}")
    execution.custom_properties[_MODEL].string_value = model_name
    execution.custom_properties[STABLE].int_value = stable
    execution.custom_properties[CANARY].int_value = canary
    store.put_executions([execution])


def _executions_of_type(store: metadata_store.MetadataStore, type_name: str) -> list[mlmd_pb.Execution]:
    if not any(t.name == type_name for t in store.get_execution_types()):
        return []
    return store.get_executions_by_type(type_name)


def _pusher_executions(store: metadata_store.MetadataStore) -> list[mlmd_pb.Execution]:
    """Executions of any Pusher component (TFX names the type by the component's class)."""
    names = [t.name for t in store.get_execution_types() if t.name.rsplit(".", 1)[-1] == "Pusher"]
    return [e for name in names for e in store.get_executions_by_type(name)]
