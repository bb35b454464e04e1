"""Names the serving check's records on its InfraBlessing go by: written by the executor,
read by the provenance queries and the run summary. No TFX import: the CLI reads these."""

from __future__ import annotations

# p50/p99 milliseconds per batch size, named as the session check reports them.
from serving.contract import LATENCY_KEYS

BLESSED = "blessed"  # 1 or 0, the name TFX's InfraValidator uses
PROBLEMS = "problems"  # JSON list of what failed
SIGNATURES = "signatures"  # JSON list of the signatures the loader found

__all__ = ["BLESSED", "LATENCY_KEYS", "PROBLEMS", "SIGNATURES"]
