"""`turbotfx predict`'s rows from a file or standard input (requests too large for a command
line), and the input it refuses in one line: JSON nested past any row, a CSV with a NUL byte
or a runaway cell. A workspace it cannot write (predict only reads) still answers."""

from __future__ import annotations

import io
import json

import pytest

from tests.conftest import cli
from tests.read_only import read_only

pytestmark = pytest.mark.e2e  # it reads the first run's pushed model

ROWS = [{"island": "Biscoe", "bill_length_mm": 46.5, "bill_depth_mm": 14.8, "flipper_length_mm": 217,
         "body_mass_g": 5200},
        {"island": "Torgersen", "bill_length_mm": 38.9, "bill_depth_mm": 18.8, "flipper_length_mm": 190,
         "body_mass_g": 3600}]


def predictions(result) -> list[dict]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["predictions"]


def one_line_error(result, *parts: str) -> None:
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output, result.output
    for part in parts:
        assert part in result.output, result.output


def test_rows_from_a_file_and_from_standard_input_are_the_rows_given_inline(first_run, tmp_path, monkeypatch):
    inline = predictions(cli("predict", "--format", "json", "--json", json.dumps(ROWS), home=first_run.home))
    assert [p["label"] for p in inline] == ["Gentoo", "Adelie"]  # the two rows' species, by the data
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps(ROWS))
    from_file = predictions(cli("predict", "--format", "json", "--json", f"@{rows_file}", home=first_run.home))
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(ROWS)))
    from_stdin = predictions(cli("predict", "--format", "json", "--json", "-", home=first_run.home))
    assert from_file == inline == from_stdin


def test_a_missing_rows_file_is_one_line(first_run, tmp_path):
    one_line_error(cli("predict", "--json", f"@{tmp_path / 'nowhere.json'}", home=first_run.home),
                   "no such file", "nowhere.json")


def test_json_nested_past_any_row_is_one_line(first_run, tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    one_line_error(cli("predict", "--json", f"@{deep}", home=first_run.home), "nests deeper than a row ever does")


@pytest.mark.parametrize("cell, problem", [("Bis\x00coe", "holds a NUL byte"), ("B" * 200_000, "has a cell over 128 KiB")])
def test_a_csv_cell_no_table_holds_is_one_line_naming_its_line(first_run, tmp_path, cell, problem):
    table = tmp_path / "rows.csv"
    table.write_text(f"island,bill_length_mm\nDream,40.1\n{cell},39.0\n")
    one_line_error(cli("predict", "--csv", str(table), home=first_run.home), f"{table} line 3: {problem}")


def test_a_workspace_whose_log_cannot_be_written_still_predicts(first_run_copy):
    log = first_run_copy.config.log_path
    assert log.is_file()  # the run's: appending to it must fail too, not only a new file beside it
    with read_only(log.parent), read_only(log):
        answered = cli("predict", "--format", "json", "--json", json.dumps(ROWS), home=first_run_copy.home)
    assert [p["label"] for p in predictions(answered)] == ["Gentoo", "Adelie"]
