"""CSV files become tf.Examples as TFX's CsvExampleGen makes them, with the header read as
Python's csv module reads it (a UTF-8 byte-order mark dropped, quotes removed); and the
check before a run (pipeline/datasets/checks.py) refuses exactly the files ExampleGen would not read
as the csv module reads them."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
from tfx.types import standard_artifacts, standard_component_specs
from tfx_bsl.coders import csv_decoder

from components.csv_example_gen import dialect, executor
from pipeline.datasets import checks
from pipeline.errors import ConfigError
from tests.example_gen import csv_properties

# Names as people write them: a space and parentheses, a comma (so quoted even minimally).
ID, LENGTH, ISLAND, NOTE, SPECIES = "id", "bill length (mm)", "island, region", "note", "species"
ROWS = [
    # The first row's first cell comes right after the header: no byte-order mark may reach it.
    {ID: 1, LENGTH: 39.1, ISLAND: "Torgersen, north", NOTE: "two\nlines", SPECIES: "Adelie"},
    {ID: 2, LENGTH: 46.5, ISLAND: "Biscoe", NOTE: 'said "hi"', SPECIES: "Gentoo"},
    {ID: 3, LENGTH: None, ISLAND: "Dream", NOTE: "", SPECIES: "Chinstrap"},
    {ID: 4, LENGTH: 50.0, ISLAND: "Biscoe", NOTE: "a, b\r\nc", SPECIES: "Gentoo"},
]


def _write(path: Path, rows: list[dict], quoting: int, encoding: str) -> Path:
    """As Excel's "CSV UTF-8" (encoding utf-8-sig) or R's write.csv (quoting QUOTE_ALL) write it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding=encoding, newline="") as handle:
        writer = csv.writer(handle, quoting=quoting)
        writer.writerow(rows[0])
        writer.writerows([["" if v is None else v for v in row.values()] for row in rows])
    return path


def _features(example: tf.train.Example) -> dict[str, list]:
    found = {}
    for name, feature in example.features.feature.items():
        kind = feature.WhichOneof("kind")
        values = list(getattr(feature, kind).value) if kind else []
        found[name] = [v.decode() if isinstance(v, bytes) else v for v in values]
    return found


def _expected(row: dict) -> dict[str, list]:
    """What ExampleGen writes for a row: ints int64, decimals float32, text bytes, empty nothing."""
    def values(value: object) -> list:
        if value in (None, ""):
            return []
        return [float(np.float32(value)) if isinstance(value, float) else value]

    return {name: values(value) for name, value in row.items()}


def test_a_bom_and_fully_quoted_csv_through_the_executor(tmp_path):
    data = tmp_path / "data"
    _write(data / "a.csv", ROWS[:2], csv.QUOTE_ALL, "utf-8-sig")
    _write(data / "b.csv", ROWS[2:], csv.QUOTE_ALL, "utf-8-sig")
    assert (data / "a.csv").read_bytes().startswith(b'\xef\xbb\xbf"id","bill length (mm)","island, region"')
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    executor.Executor().Do({}, {standard_component_specs.EXAMPLES_KEY: [examples]}, csv_properties(data, (1, 1)))
    files = [str(path) for path in Path(examples.uri).glob("Split-*/*.gz")]
    written = [_features(tf.train.Example.FromString(record.numpy()))
               for record in tf.data.TFRecordDataset(files, compression_type="GZIP")]
    assert sorted(written, key=lambda features: features[ID]) == [_expected(row) for row in ROWS]


def _through(transform: type, data: Path, output: Path) -> list[dict[str, list]]:
    """The tf.Examples' features a CSV transform makes of the *.csv files in data, by id."""
    with beam.Pipeline() as pipeline:
        _ = (pipeline | "Read" >> transform({standard_component_specs.INPUT_BASE_KEY: str(data)}, "*.csv")
             | "Serialize" >> beam.Map(lambda example: example.SerializeToString())
             | "Write" >> beam.io.WriteToTFRecord(str(output), shard_name_template=""))
    made = [_features(tf.train.Example.FromString(r.numpy())) for r in tf.data.TFRecordDataset([str(output)])]
    return sorted(made, key=lambda features: features[ID])


def test_rows_are_read_as_tfxs_executor_reads_them(tmp_path):
    # A header TFX's executor reads right (no mark, no quotes): both make the same examples.
    data = tmp_path / "data"
    rows = [{key: value for key, value in row.items() if key != ISLAND} for row in ROWS]
    _write(data / "a.csv", rows, csv.QUOTE_MINIMAL, "utf-8")
    ours = _through(executor._CsvToExample, data, tmp_path / "ours.tfrecord")
    assert ours == [_expected(row) for row in rows]
    assert ours == _through(tfx_csv._CsvToExample, data, tmp_path / "tfx.tfrecord")


def test_tfxs_executor_keeps_the_mark_and_the_quotes(tmp_path):
    # Why ours exists: TFX's splits the header line on commas.
    path = _write(tmp_path / "a.csv", ROWS, csv.QUOTE_ALL, "utf-8-sig")
    from tfx.utils import io_utils

    assert io_utils.load_csv_column_names(str(path))[:2] == ['\ufeff"id"', '"bill length (mm)"']
    assert executor.column_names(str(path)) == list(ROWS[0])


@pytest.mark.parametrize("first_line, names", [
    (b"a,b\n", ["a", "b"]),
    (b"\xef\xbb\xbfa,b\r\n", ["a", "b"]),
    (b'\xef\xbb\xbf"a","b, c",""\n', ["a", "b, c", ""]),
    (b'"say ""hi""",x', ['say "hi"', "x"]),
    (b"\n", []),
    (b"", []),
])
def test_header_names(first_line, names):
    assert dialect.column_names(first_line) == names


@pytest.mark.parametrize("first_line", [b'"a\n', b'a,"b\n', b"a\rb,c\n"])
def test_a_header_that_is_not_one_csv_line(first_line):
    with pytest.raises(ValueError):
        dialect.column_names(first_line)


# --- the check before a run agrees with ExampleGen ------------------------------------------

def _example_gen_rows(path: Path) -> list[list[bytes]] | None:
    """The rows ExampleGen makes of a file: TFX's line reader, then tfx_bsl's parser; None
    where it fails, or would read a record on (its parser is given the record again and
    again then, which may never end: the csv module given it twice tells)."""
    try:
        records = list(tfx_csv._ReadCsvRecordsFromTextFile().process(str(path)))
    except ValueError:  # unbalanced quotes
        return None
    parse = csv_decoder.ParseCSVLine(delimiter=",")
    parse.setup()
    rows = []
    for record in records:
        reader = csv.reader(itertools.repeat(record, 2), delimiter=",")
        try:
            next(reader)
        except csv.Error:
            return None
        if reader.line_num > 1:
            return None
        rows.extend(cells for cells, _ in parse.process(record) if cells)
    return rows


def _csv_module_rows(path: Path) -> list[list[bytes]]:
    """The rows the csv module reads in the file, as the user sees them (header dropped)."""
    with open(path, encoding="utf-8-sig", newline="") as handle:
        return [[cell.encode() for cell in row] for row in list(csv.reader(handle))[1:] if row]


TRICKY = {
    "plain": "a,b\n1,2\n3,4\n",
    "fully quoted, a mark": '\ufeff"a","b"\r\n"1","x, y"\r\n"2","say ""hi"""\r\n',
    "a quoted field over lines": 'a,b\n1,"two\nlines"\n2,x\n',
    "blank lines": "a,b\n\n1,2\n\r\n3,4\n",
    "a row too long": "a,b\n1,2\n3,4,5\n",
    "a row too short": "a,b\n1,2\n3\n",
    "a blank-looking row": "a,b\n1,2\n \n",
    "a quote never closed": 'a,b\n1,"2\n3,4\n',
    "an odd quote in a field": "a,b\n5'11\",x\n6'1\",y\n",
    "an even pair in a field": 'a,b\n12" pizza,14" pizza\n',
    "a field reading on": 'a,b\nx"y,"z\n1,2\n',
    "a lone carriage return": "a,b\n1,2\r3,4\n",
    "a carriage return quoted": 'a,b\n1,"2\r3"\n',
    "no line end at the end": "a,b\n1,2",
    "text after a closing quote": 'a,b\n"1"x,2\n',
}


@pytest.mark.parametrize("name", TRICKY)
def test_the_check_passes_what_example_gen_reads_as_the_csv_module_does(tmp_path, name):
    path = tmp_path / "a.csv"
    path.write_text(TRICKY[name], encoding="utf-8", newline="")
    rows = _example_gen_rows(path)
    as_meant = rows is not None and rows == _csv_module_rows(path) and all(len(row) == 2 for row in rows)
    try:
        checks.check_table(tmp_path, "csv")
    except ConfigError as err:
        assert not as_meant, str(err)
        assert "\n" not in str(err) and f"{path}, line" in str(err)
    else:
        assert as_meant, json.dumps(TRICKY[name])
