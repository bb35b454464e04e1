"""components/csv_example_gen/arrow_read: the table pyarrow's read_csv reads, without the scan
of every object in the process that pyarrow makes at each read on Python 3.10, and the
premise that makes skipping it safe: a read leaves no cycle of frames behind."""

from __future__ import annotations

import gc
import signal
import types

import pyarrow as pa
import pyarrow.csv as pacsv

from components.csv_example_gen import arrow_read

CSV = b'species,mass\nAdelie,3750\nGentoo,"5,000"\n'


def test_a_read_gives_pyarrows_table_without_scanning_the_process(monkeypatch):
    scans = []
    scan = gc.get_referrers
    monkeypatch.setattr(gc, "get_referrers", lambda *objects: scans.append(objects) or scan(*objects))
    # pyarrow as installed (a read through arrow_read in this process turned it off): it scans.
    monkeypatch.setattr(pa.lib, "have_signal_refcycle", True)
    as_pyarrow_reads = pacsv.read_csv(pa.py_buffer(CSV))
    assert scans
    scans.clear()

    read = arrow_read.read_csv(pa.py_buffer(CSV))
    assert read.to_pydict() == {"species": ["Adelie", "Gentoo"], "mass": ["3750", "5,000"]}
    assert read.equals(as_pyarrow_reads)
    assert not scans


def test_a_read_leaves_no_frames_for_the_collector():
    """What pyarrow's scan is there to clean up: frames kept alive in a cycle (and with them
    each caller's locals) by the read's lookup of the SIGINT and SIGTERM handlers, Python
    functions in a run (the CLI's own)."""
    handlers = {number: signal.signal(number, lambda *_: None) for number in (signal.SIGINT, signal.SIGTERM)}
    gc.collect()
    gc.disable()
    try:
        arrow_read.read_csv(pa.py_buffer(CSV))
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        frames = [o.f_code.co_name for o in gc.garbage if isinstance(o, types.FrameType)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
        for number, handler in handlers.items():
            signal.signal(number, handler)
    assert frames == []
