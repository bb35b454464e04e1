"""Our CsvExampleGen's Arrow path writes the examples TFX's own executor writes, byte for byte
and in the same splits; what is beyond it goes TFX's way with the same result.

The reference is TFX's CsvExampleGen executor itself (tfx_csv.Executor) wherever it reads the
header right; for a byte-order mark or quoted names (which TFX's header reader keeps in the
names) it is our executor with the Arrow path off: TFX's row reading, typing and
conversion, which tests/test_csv_example_gen.py checks against TFX's.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import tensorflow as tf
from tfx.components.example_gen.csv_example_gen import executor as tfx_csv
from tfx.types import artifact_utils, standard_artifacts, standard_component_specs

from components.csv_example_gen import executor
from pipeline.datasets import synthetic
from tests.example_gen import SPLITS, csv_properties


def _csv(rows: list[list[object]], quoting: int = csv.QUOTE_MINIMAL, bom: bool = False,
         line_end: str = "\n") -> str:
    out = io.StringIO()
    csv.writer(out, quoting=quoting, lineterminator=line_end).writerows(rows)
    return ("\ufeff" if bom else "") + out.getvalue()


def _numbered(header: list[str], rows: list[list[object]], extra: int = 60) -> list[list[object]]:
    # Plain numbered rows besides the tricky ones, so that both splits get some of each file.
    width = len(header)
    return [header, *rows, *[[f"{i}"] + [""] * (width - 1) for i in range(1000, 1000 + extra)]]


HEADER = ["id", "mixed", "price", "text", "empty", "widening", "flag"]
FILE_A = _numbered(HEADER, [
    [1, 2, 39.1, "Zürich, Schweiz", "", 3, "yes"],
    [2, "", 46.5, 'said "hi"', "", 4, ""],
    [3, 7, "", "two\nlines", "", "", "no"],
    [-4, "+5", "-.5", "a, b\r\nc", "", 5, "maybe"],
    [5, 1, "1e3", "日本語 ✓", "", -6, "x"],
    [6, 9, "7.", "", "", 0, "y"],
    [7, 12, "+2.25", '""', "", 8, "z"],
])
FILE_B = _numbered(HEADER, [
    [8, 3, 0.1, "plain", "", 2.5, "yes"],   # widening: INT in file A, FLOAT over the split
    [9, "0012", "1E-05", "emoji 🐧", "", "", "\u0661\u0662"],  # digits int() reads from str, not bytes
    [10, "-0", "3.4e38", "tab\there", "", 1, ""],
    [11, 2, "1.17549435e-38", "   spaced   ", "", 7, "no"],
    # Just above the midpoint of two float32s: to double first (TFX) it rounds to 1.0, read
    # straight to float32 to the float32 after it.
    [12, 1, "1.00000005960464477539062500000001", "x", "", 3, "no"],
])

# Inputs the Arrow path takes: (file name -> text), with the header TFX reads right or not.
ARROW_CASES = {
    "mixed types over two files": ({"a.csv": _csv(FILE_A), "b.csv": _csv(FILE_B)}, True),
    "every field quoted": ({"a.csv": _csv(FILE_A, csv.QUOTE_ALL)}, False),
    "quotes in a field, quoted": ({"a.csv": _csv(_numbered(["a", "b"], [['12" pizza', '14" "pizza"']]))}, True),
    "CRLF line ends, blank lines": ({"a.csv": _csv(FILE_A, line_end="\r\n").replace("\r\n1000,", "\r\n\r\n1000,")
                                     + "\n\n"}, True),
    "no final line end": ({"a.csv": _csv(FILE_B).rstrip("\n")}, True),
    "a byte-order mark, quoted names": ({"a.csv": _csv(FILE_A, csv.QUOTE_ALL, bom=True),
                                         "b.csv": _csv(FILE_B, bom=True)}, False),
    "one column": ({"a.csv": "x\n1\n\n2\n" + "".join(f"{i}\n" for i in range(50))}, True),
    "a header only": ({"a.csv": "a,b\n", "b.csv": _csv(_numbered(["a", "b"], [[1, "x"]]))}, True),
}

# Inputs beyond it (forms Python reads as numbers that the regexes do not admit, an integer
# past int64, quotes inside a field): TFX's path makes them, whole split and all.
BEYOND_CASES = {
    "spaces around a number": _numbered(["a", "b"], [[" 5", 1], [6, 2]]),
    "nan and inf": _numbered(["a", "b"], [["nan", 1], ["-inf", 2], ["1.5", 3]]),
    "underscores": _numbered(["a", "b"], [["1_000", 1]]),
    "past int64": _numbered(["a", "b"], [["99999999999999999999", 1], [3, 2]]),
    "past float32": _numbered(["a", "b"], [["1e39", 1], [3.5, 2]]),
}
# Raw text (a csv writer would quote these fields).
BEYOND_TEXT = {
    "an even pair of quotes in a field": 'a,b\n12" pizza,14" pizza\n' + _csv(_numbered(["a", "b"], [])[1:]),
    "text after a closing quote": 'a,b\n"1"x,2\n' + _csv(_numbered(["a", "b"], [])[1:]),
}


def _write(directory: Path, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8", newline="")
    return directory


def _output(directory: Path) -> dict:
    examples = standard_artifacts.Examples()
    examples.uri = str(directory)
    return {standard_component_specs.EXAMPLES_KEY: [examples]}


def _written(output: dict) -> dict[str, list[bytes]]:
    """Each split's examples, each serialized deterministically (as TFX hashes them), sorted."""
    examples = output[standard_component_specs.EXAMPLES_KEY][0]
    assert sorted(artifact_utils.decode_split_names(examples.split_names)) == sorted(SPLITS)
    found = {}
    for split in SPLITS:
        files = [str(p) for p in Path(examples.uri, f"Split-{split}").glob("*.gz")]
        found[split] = sorted(tf.train.Example.FromString(r.numpy()).SerializeToString(deterministic=True)
                              for r in tf.data.TFRecordDataset(files, compression_type="GZIP"))
    return found


def _reference(tmp_path: Path, data: Path, tfx_reads_the_header: bool) -> dict[str, list[bytes]]:
    output = _output(tmp_path / "reference")
    if tfx_reads_the_header:
        tfx_csv.Executor().Do({}, output, csv_properties(data))
    else:
        _TfxPathOnly().Do({}, output, csv_properties(data))
    return _written(output)


class _TfxPathOnly(executor.Executor):
    def _do_with_arrow(self, output_dict, exec_properties) -> bool:
        return False


@pytest.mark.parametrize("name", ARROW_CASES)
def test_the_arrow_path_writes_tfxs_examples_in_tfxs_splits(tmp_path, name):
    files, tfx_reads_the_header = ARROW_CASES[name]
    data = _write(tmp_path / "data", files)
    output = _output(tmp_path / "arrow")
    assert executor.Executor()._do_with_arrow(output, csv_properties(data)), "the Arrow path did not take it"
    ours, reference = _written(output), _reference(tmp_path, data, tfx_reads_the_header)
    assert ours == reference
    rows = sum(len(v) for v in reference.values())
    assert rows == 0 or all(reference[split] for split in SPLITS)  # both splits exercised
    assert not list(Path(output[standard_component_specs.EXAMPLES_KEY][0].uri).glob(".*"))  # no leftovers


@pytest.mark.parametrize("name", [*BEYOND_CASES, *BEYOND_TEXT])
def test_input_beyond_the_arrow_path_goes_tfxs_way(tmp_path, name):
    text = BEYOND_TEXT[name] if name in BEYOND_TEXT else _csv(BEYOND_CASES[name])
    data = _write(tmp_path / "data", {"b.csv": text})
    assert not executor.Executor()._do_with_arrow(_output(tmp_path / "probe"), csv_properties(data))
    output = _output(tmp_path / "ours")
    executor.Executor().Do({}, output, csv_properties(data))
    assert _written(output) == _reference(tmp_path, data, True)


def test_one_file_beyond_sends_the_whole_split_tfxs_way(tmp_path):
    # Types are inferred over all files: a file TFX types differently widens the others'.
    data = _write(tmp_path / "data", {"a.csv": _csv(_numbered(["a", "b"], [[1, 2]])),
                                      "b.csv": _csv(_numbered(["a", "b"], [["nan", 3]]))})
    output = _output(tmp_path / "ours")
    assert not executor.Executor()._do_with_arrow(output, csv_properties(data))
    assert not list(Path(output[standard_component_specs.EXAMPLES_KEY][0].uri).rglob("*.gz"))  # nothing half-written
    executor.Executor().Do({}, output, csv_properties(data))
    assert _written(output) == _reference(tmp_path, data, True)


def test_the_synthetic_dataset_as_tfx_makes_it(tmp_path):
    synthetic.generate(tmp_path / "data", 3_000, workers=1)
    output = _output(tmp_path / "arrow")
    assert executor.Executor()._do_with_arrow(output, csv_properties(tmp_path / "data", (4, 1)))
    output_reference = _output(tmp_path / "reference")
    tfx_csv.Executor().Do({}, output_reference, csv_properties(tmp_path / "data", (4, 1)))
    assert _written(output) == _written(output_reference)


def test_beams_worker_processes_write_the_same(tmp_path):
    # As `auto` runs large data: the DoFns pickled to two worker processes.
    from tfx.dsl.components.base import base_beam_executor

    from pipeline.runners import local

    synthetic.generate(tmp_path / "data", 3_000, workers=1)
    (tmp_path / "data" / "copy.csv").write_bytes(next((tmp_path / "data").glob("*.csv")).read_bytes())
    context = base_beam_executor.BaseBeamExecutor.Context(
        beam_pipeline_args=local.prepare_direct_runner("multi_process"), tmp_dir=str(tmp_path / "tmp"))
    output = _output(tmp_path / "arrow")
    assert executor.Executor(context)._do_with_arrow(output, csv_properties(tmp_path / "data", (4, 1)))
    output_reference = _output(tmp_path / "reference")
    tfx_csv.Executor().Do({}, output_reference, csv_properties(tmp_path / "data", (4, 1)))
    assert _written(output) == _written(output_reference)
