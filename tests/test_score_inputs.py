"""pipeline/scoring/inputs: the default id columns are the ignored columns every file has."""

from __future__ import annotations

import dataclasses

from pipeline import datasets
from pipeline.datasets import Feature
from pipeline.scoring import inputs

PENGUINS = datasets.load("penguins")
WITH_ID = dataclasses.replace(PENGUINS, features=(*PENGUINS.features, Feature("penguin_id", "ignore")))
FEATURES = ",".join(f.name for f in PENGUINS.model_features)


def test_an_ignored_column_is_an_id_only_where_every_file_has_it(tmp_path):
    with_id, without = tmp_path / "a.csv", tmp_path / "b.csv"
    with_id.write_text(f"penguin_id,{FEATURES}\n")
    without.write_text(f"{FEATURES}\n")
    assert inputs.checked_columns([with_id], "csv", WITH_ID, ()) == ("penguin_id",)
    # Whichever file comes first, one file without it leaves no default id.
    assert inputs.checked_columns([without, with_id], "csv", WITH_ID, ()) == ()
    assert inputs.checked_columns([with_id, without], "csv", WITH_ID, ()) == ()
    assert inputs.checked_columns([with_id, without], "csv", WITH_ID, ("island",)) == ("island",)


def test_a_sample_agrees_with_predict_to_float32_rounding_and_not_beyond():
    from pipeline.scoring.score import agrees

    # Measured: the same row from a batch of 342 and from one of 32 (AMD EPYC).
    assert agrees(["Adelie", 0.9994747042655945, 0.00038036450860090554],
                  ["Adelie", 0.9994747042655945, 0.0003803643339779228])
    assert not agrees(["Adelie", 0.9994747, 0.00038], ["Gentoo", 0.9994747, 0.00038])  # another label
    assert not agrees(["Adelie", 0.9994, 0.0006], ["Adelie", 0.9994, 0.0005])  # another probability
    assert not agrees(["Adelie", 0.9], ["Adelie", 0.9, 0.1])  # a class missing
    assert agrees([12.5], [12.500001]) and not agrees([12.5], [12.51])  # a regression value
