"""Files that appear whole or not at all."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[str]:
    """Yields a temporary path beside target; renames it onto target if the block succeeds.

    An interrupted write never leaves a truncated file for a later reader (ExampleGen,
    ImportSchemaGen, a person curating a schema); a failed one leaves nothing.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.stem}-", suffix=".tmp")
    os.close(fd)
    # mkstemp makes the file private to its owner; the target gets what a plain write would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
