"""pipeline/scoring/drift_data.py: a batch's cells as drift compares them, read from a CSV
written here."""

from __future__ import annotations

import math

from pipeline.scoring import drift_data


def test_a_batch_keeps_infinities_to_count_as_out_of_range_and_drops_what_is_missing(tmp_path):
    batch = tmp_path / "batch.csv"
    batch.write_text("size,colour\ninf,red\n-1e400,NA\nnan,\n,blue\n2.5,3.0\nabc,green\n")
    columns = drift_data.read_batch([batch], "csv", {"size": "numeric", "colour": "categorical"})
    assert columns["size"][:2] == [math.inf, -math.inf]  # as TFDV and score count them: not missing
    assert columns["size"][2:] == [None, None, 2.5, None]  # nan, empty and text that is no number
    assert columns["colour"] == ["red", None, None, "blue", "3.0", "green"]
