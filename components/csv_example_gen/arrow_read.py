"""pyarrow.csv.read_csv without the scan of every object in the process at each read.

On any Python 3.10 pyarrow (10.0) follows each read's signal-handler lookup with
gc.get_referrers calls, to break a cycle of frames that lookup left on early 3.10 releases
(bpo-42248). Once TF and TFX are imported each scan is 60-90 ms, more than parsing a small
table (three reads a penguins run). The Python this project runs on (3.10.13) leaves no
such cycle (tests/test_arrow_read.py checks), so there is nothing to break.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv


def read_csv(source: Any, **options: Any) -> pa.Table:
    """pyarrow.csv.read_csv(source, **options), without the scan."""
    pa.lib.have_signal_refcycle = False
    return pacsv.read_csv(source, **options)
