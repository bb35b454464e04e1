"""Owner-only files: what turbotfx writes holds the user's rows (copied by ExampleGen, kept
in statistics, a store's records, a report's tables), so no other local user may read it."""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

# New files 0600 and folders 0700, whoever writes them in this process or its children
# (TFX, Beam's workers, TensorFlow, MLMD's SQLite, Optuna).
OWNER_ONLY_UMASK = 0o077


@contextlib.contextmanager
def owner_only() -> Iterator[None]:
    """Everything created in the block is its owner's alone; the caller's umask is back after
    (a notebook, a test calling main())."""
    saved = os.umask(OWNER_ONLY_UMASK)
    try:
        yield
    finally:
        os.umask(saved)
