"""Files that appear whole or not at all."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(target: Path) -> Iterator[str]:
    """Yields a temporary path beside target; renames it onto target if the block succeeds.

    An interrupted write never leaves a truncated file for a later reader (ExampleGen,
    ImportSchemaGen, a person curating a schema); a failed one leaves nothing.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    # Created as a plain write creates a file (0666 less the umask, or the folder's default
    # ACL: a reader granted serving/ by ACL can read what is pushed there); no chmod after,
    # which would narrow an ACL's mask.
    while True:
        tmp = str(target.parent / f".{target.stem}-{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:
            continue
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
