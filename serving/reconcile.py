"""Brings a model's serving directory and models.config into agreement with the push records.

A push touches three places in turn: the version directory, models.config and the
metadata store's PushedModel. A kill or a failed write between them leaves them
disagreeing; the rules (docs/serving.md, "Recovery"):
  - a version directory no push record accounts for is set aside (<model>/.set-aside/),
    after models.config stops naming it: never served, promoted or counted for retention;
    unless no record accounts for any version on disk (a new store, or another one than
    pushed them), or the version is older than the store's first record (pushed before the
    store existed: a store moved aside or restored from a copy): those stay, and the caller
    is told;
  - a missing models.config entry, or labels an orphan held, are rebuilt from the records:
    the labels last recorded (by a push, a promote or a rollback) where those versions are
    still on disk, else the newest recorded version as both stable and canary.
This module knows files only; the records come from the caller (pipeline/workspace.py).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterable

from serving import model_config, push


@dataclasses.dataclass
class Reconciliation:
    model_dir: Path
    set_aside: list[tuple[int, Path]] = dataclasses.field(default_factory=list)
    rebuilt_labels: dict[str, int] | None = None
    in_flight: list[int] = dataclasses.field(default_factory=list)
    # Versions left in place because no record accounts for any of them (another store's).
    unaccounted: list[int] = dataclasses.field(default_factory=list)
    records_incomplete: str | None = None  # why some push records could not be read

    def messages(self) -> list[str]:
        """One line per change made, for the user."""
        lines = [f"set aside version {version} of {self.model_dir.name}: no push record in the metadata store "
                 f"accounts for it (a push that never completed); moved to {target}"
                 for version, target in self.set_aside]
        if self.unaccounted and self.records_incomplete:
            lines.append(f"{self.records_incomplete}: versions {', '.join(map(str, self.unaccounted))} of "
                         f"{self.model_dir.name} may be its pushes, so nothing was set aside")
        elif self.unaccounted:
            lines.append(f"{len(self.unaccounted)} versions in {self.model_dir} predate this metadata store's "
                         "records (a new store, a copy restored, or another one than pushed them): nothing set "
                         "aside; use the store that pushed them (--metadata-url), or move them away")
        if self.rebuilt_labels:
            labels = ", ".join(f"{label} {version}" for label, version in sorted(self.rebuilt_labels.items()))
            lines.append(f"rebuilt {model_config.config_path(self.model_dir.parent)} from the metadata store's "
                         f"records: {labels}")
        return lines


def reconcile(
    serving_root: str | Path,
    model_name: str,
    recorded_versions: Iterable[int],
    recorded_labels: dict[str, int] | None,
    in_flight_since: int | None = None,
    records_since: int | None = None,
    records_incomplete: str | None = None,
) -> Reconciliation:
    """Applies the rules above. recorded_versions: the versions the push records name;
    in_flight_since: a push may be under way (another run), so versions from that second
    on are left alone; records_since: the store's first record (epoch seconds), before
    which it cannot vouch for a version either way (None: no bound); records_incomplete:
    why some records could not be read (a damaged store), so nothing is set aside."""
    serving_root = Path(serving_root)
    model_dir = serving_root / model_name
    result = Reconciliation(model_dir, records_incomplete=records_incomplete)
    # A version the recorded labels name is vouched for too (a push of a new store recorded
    # the stable label it kept).
    recorded = set(recorded_versions) | set((recorded_labels or {}).values())
    on_disk = push.versions(model_dir)
    if on_disk and not recorded & set(on_disk):
        # Setting every version aside would take down all that is served on the word of
        # a store that never saw them: say so instead.
        result.unaccounted = on_disk
        return result
    if in_flight_since is None:
        push.remove_stale_staging(model_dir)
    labelled = _labels(serving_root, model_name)
    for version in on_disk:
        if version in recorded:
            continue
        if in_flight_since is not None and version >= in_flight_since:
            result.in_flight.append(version)
            continue
        if records_incomplete is not None or records_since is not None and version < records_since:
            result.unaccounted.append(version)
            continue
        model_config.drop_version(serving_root, model_name, version)
        result.set_aside.append((version, push.set_aside(model_dir, version)))
    # Versions older than the store stay candidates for the labels the records name.
    on_disk = [v for v in push.versions(model_dir) if v in recorded or v in result.unaccounted]
    labels_lost = model_config.status(serving_root, model_name).canary is None
    # A label an orphan held goes back where the records have it, not to a guess.
    orphan_was_labelled = any(version in labelled for version, _ in result.set_aside)
    if on_disk and (labels_lost or (orphan_was_labelled and recorded_labels)):
        result.rebuilt_labels = _labels_to_rebuild(recorded_labels or {}, on_disk)
        model_config.set_labels(serving_root, model_name, result.rebuilt_labels)
    return result


def _labels(serving_root: Path, model_name: str) -> set[int]:
    current = model_config.status(serving_root, model_name)
    return {v for v in (current.stable, current.canary) if v is not None}


def _labels_to_rebuild(recorded: dict[str, int], on_disk: list[int]) -> dict[str, int]:
    """The recorded labels whose versions remain; a missing one falls back to the other,
    and with neither, the newest version takes both (as a first push does)."""
    kept = {label: version for label, version in recorded.items()
            if label in (model_config.STABLE, model_config.CANARY) and version in on_disk}
    if not kept:
        return {model_config.STABLE: on_disk[-1], model_config.CANARY: on_disk[-1]}
    if model_config.CANARY not in kept:
        kept[model_config.CANARY] = on_disk[-1] if on_disk[-1] > kept[model_config.STABLE] else kept[model_config.STABLE]
    if model_config.STABLE not in kept:
        kept[model_config.STABLE] = kept[model_config.CANARY]
    return kept
