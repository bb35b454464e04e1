"""The optimizer names and which one `auto` picks for a model (no TensorFlow import: the
pipeline's config and CLI validate these names)."""

from __future__ import annotations

OPTIMIZERS = ("auto", "adam", "lazy_adam", "adagrad_adam")
SPARSE_OPTIMIZERS = frozenset({"lazy_adam", "adagrad_adam"})
# Chosen by benchmarks/trainer_bench.py: the faster at equal accuracy (see docs/speed.md).
SPARSE_DEFAULT = "lazy_adam"


def choose(requested: str, has_embeddings: bool, on_tpu: bool = False) -> str:
    """Resolves `auto`: a sparse-aware optimizer when the model has embedding tables,
    except on TPU, whose compiled steps need static shapes (the touched rows are not)."""
    if requested not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {requested!r}; choose one of: {', '.join(OPTIMIZERS)}")
    if requested != "auto":
        return requested
    return SPARSE_DEFAULT if has_embeddings and not on_tpu else "adam"
