"""The checks made on a user's table before TFX sees it (pipeline/datasets/table.py, checks.py): each bad input
fails with one line that names the file or column, the cause and the fix."""

from __future__ import annotations

import csv
import datetime

import numpy as np
import pandas as pd
import pytest

from components.csv_example_gen import dialect
from pipeline.datasets import checks, table
from pipeline.errors import ConfigError

ROWS = 40


def _write_csv(path, header, rows=()):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _frame(rows=ROWS):
    """A small valid table: a binary text label, a number, a text feature."""
    return pd.DataFrame({
        "label": ["yes", "no"] * (rows // 2),
        "x": np.linspace(0.5, 20.0, rows),
        "color": ["red", "green", "blue", "red"] * (rows // 4),
    })


def _csv_root(tmp_path, frame, name="a.csv"):
    root = tmp_path / "data"
    root.mkdir(exist_ok=True)
    frame.to_csv(root / name, index=False)
    return root


def _parquet_root(tmp_path, frame, name="a.parquet"):
    root = tmp_path / "data"
    root.mkdir(exist_ok=True)
    frame.to_parquet(root / name, index=False)
    return root


def _error(root, fmt="csv", label="label", task=None, feature_columns=()):
    with pytest.raises(ConfigError) as err:
        checks.check_data(root, fmt, label, task, list(feature_columns))
    message = str(err.value)
    assert "\n" not in message, "one line"
    return message


# --- good tables -------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_good_table_passes_for_its_task(tmp_path, fmt):
    root = (_csv_root if fmt == "csv" else _parquet_root)(tmp_path, _frame())
    for task in (None, "binary"):
        # The label column it read comes back: a run reads it once.
        assert checks.check_data(root, fmt, "label", task, ["x", "color"]) == \
            table.LabelColumn("label", "BYTES", ROWS, 0, ("no", "yes"))


def test_several_files_with_the_same_header_pass(tmp_path):
    root = _csv_root(tmp_path, _frame(), "a.csv")
    _csv_root(tmp_path, _frame(), "b.csv")
    checks.check_data(root, "csv", "label", "binary", ["x"])
    assert table.read_label(root, "csv", "label").rows == 2 * ROWS


def test_the_label_is_read_as_example_gen_reads_it(tmp_path):
    frame = _frame().assign(code=[1, 2, 3, 4] * (ROWS // 4), score=[0.5, float("nan")] * (ROWS // 2),
                            text_nan=["nan", "x"] * (ROWS // 2))
    root = _csv_root(tmp_path, frame)
    code = table.read_label(root, "csv", "code")
    assert (code.type, code.classes, code.missing, code.rows) == ("INT", (1, 2, 3, 4), 0, ROWS)
    # An empty cell is missing; "nan" is missing in a number column but a class among text.
    score = table.read_label(root, "csv", "score")
    assert (score.type, score.classes, score.missing) == ("FLOAT", (0.5,), ROWS // 2)
    text = table.read_label(root, "csv", "text_nan")
    assert (text.type, text.classes, text.missing) == ("BYTES", ("nan", "x"), 0)


def test_parquet_label_types(tmp_path):
    frame = _frame().assign(flag=[True, False] * (ROWS // 2), small=np.arange(ROWS, dtype=np.int16) % 3,
                            cat=pd.Categorical(["u", "v"] * (ROWS // 2)))
    root = _parquet_root(tmp_path, frame)
    assert table.read_label(root, "parquet", "flag").type == "INT"
    assert table.read_label(root, "parquet", "small").classes == (0, 1, 2)
    cat = table.read_label(root, "parquet", "cat")
    assert (cat.type, cat.classes) == ("BYTES", ("u", "v"))


@pytest.mark.parametrize("cell", [" 7", "+3", "1_000", "-0", "1e3", "nan", "inf", "Infinity", "1.", ".5",
                                  "9223372036854775807", "9223372036854775808", "-9223372036854775808",
                                  "0x10", "abc", "1,5", " ", "\u0665", ""])
def test_cell_types_are_the_csv_decoders(cell):
    from tfx_bsl.coders import csv_decoder

    expected = {csv_decoder.ColumnType.INT: "INT", csv_decoder.ColumnType.FLOAT: "FLOAT",
                csv_decoder.ColumnType.STRING: "BYTES", csv_decoder.ColumnType.UNKNOWN: None}
    assert dialect.cell_type(cell) == expected[csv_decoder._InferValueType(cell.encode())]


def test_detect_format(tmp_path):
    root = _csv_root(tmp_path, _frame())
    assert table.detect_format(root) == "csv"
    _parquet_root(tmp_path, _frame())
    with pytest.raises(ConfigError, match="holds both .csv and .parquet files"):
        table.detect_format(root)
    (root / "a.csv").unlink()
    assert table.detect_format(root) == "parquet"
    (root / "a.parquet").unlink()
    with pytest.raises(ConfigError, match="holds no .csv or .parquet file"):
        table.detect_format(root)


def test_data_size_counts_only_the_formats_files(tmp_path):
    root = _csv_root(tmp_path, _frame())
    (root / "notes.txt").write_text("x" * 1000)
    assert table.data_size_bytes(root, "csv") == (root / "a.csv").stat().st_size
    assert table.data_size_bytes(root, "parquet") == 0


# --- bad tables --------------------------------------------------------------------------

def test_missing_data_root(tmp_path):
    message = _error(tmp_path / "nope")
    assert f"data root {tmp_path / 'nope'} does not exist" in message and "--data-root" in message


@pytest.mark.parametrize("fmt, suffix", [("csv", ".csv"), ("parquet", ".parquet")])
def test_data_root_without_files_of_the_format(tmp_path, fmt, suffix):
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / ("a.parquet" if fmt == "csv" else "a.csv")).write_text("x\n1\n")
    assert f"holds no {suffix} file" in _error(tmp_path, fmt)


def test_empty_csv(tmp_path):
    _csv_root(tmp_path, _frame())
    (tmp_path / "data" / "b.csv").write_text("")
    message = _error(tmp_path / "data")
    assert f"{tmp_path / 'data' / 'b.csv'} is empty" in message


def test_header_only_csv(tmp_path):
    root = _csv_root(tmp_path, _frame())
    (root / "b.csv").write_text("label,x,color\n\n")
    assert f"{root / 'b.csv'} has a header but no rows" in _error(root)


def test_parquet_without_rows(tmp_path):
    root = _parquet_root(tmp_path, _frame().iloc[:0])
    assert f"{root / 'a.parquet'} has no rows" in _error(root, "parquet")


def test_duplicate_column_names_in_csv(tmp_path):
    root = tmp_path / "data"
    _write_csv(root / "a.csv", ["label", "x", "x"], [["yes", 1, 2], ["no", 3, 4]] * 20)
    message = _error(root)
    assert f"{root / 'a.csv'} has two columns named 'x'" in message and "rename" in message


def test_duplicate_column_names_in_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "data"
    root.mkdir()
    pq.write_table(pa.table([pa.array(["yes", "no"] * 20), pa.array(range(40)), pa.array(range(40))],
                            names=["label", "x", "x"]), root / "a.parquet")
    assert "has two columns named 'x'" in _error(root, "parquet")


def test_csv_files_with_different_headers(tmp_path):
    root = _csv_root(tmp_path, _frame(), "a.csv")
    _csv_root(tmp_path, _frame()[["color", "x", "label"]], "b.csv")
    message = _error(root)
    assert str(root / "a.csv") in message and str(root / "b.csv") in message
    assert "same header" in message


def test_parquet_files_with_different_columns(tmp_path):
    root = _parquet_root(tmp_path, _frame(), "a.parquet")
    _parquet_root(tmp_path, _frame().drop(columns=["color"]), "b.parquet")
    message = _error(root, "parquet")
    assert str(root / "a.parquet") in message and str(root / "b.parquet") in message


def test_parquet_files_with_different_types_for_a_column(tmp_path):
    root = _parquet_root(tmp_path, _frame(), "a.parquet")
    _parquet_root(tmp_path, _frame().assign(x=["1"] * ROWS), "b.parquet")
    message = _error(root, "parquet")
    assert "column 'x' holds BYTES values" in message and "one type" in message


def test_parquet_column_example_gen_cannot_write(tmp_path):
    # A time of day without a day (timestamps and dates are written as ISO text).
    root = _parquet_root(tmp_path, _frame().assign(when=datetime.time(12, 30)))
    message = _error(root, "parquet")
    assert "column 'when' is time64" in message and "astype(str)" in message


def test_csv_row_with_too_many_cells(tmp_path):
    root = tmp_path / "data"
    _write_csv(root / "a.csv", ["label", "x"], [["yes", 1], ["no", 2, 3]] + [["yes", 1]] * 30)
    message = _error(root)
    assert f"{root / 'a.csv'}, line 3 has 3 fields but the header has 2" in message


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_label_column_absent(tmp_path, fmt):
    root = (_csv_root if fmt == "csv" else _parquet_root)(tmp_path, _frame())
    message = _error(root, fmt, label="species")
    assert "no label column 'species'" in message and "label, x, color" in message


def test_feature_column_absent(tmp_path):
    root = _csv_root(tmp_path, _frame())
    message = _error(root, feature_columns=["x", "island"])
    assert "no column 'island'" in message and "[features]" in message


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_label_with_a_single_class(tmp_path, fmt):
    root = (_csv_root if fmt == "csv" else _parquet_root)(tmp_path, _frame().assign(label="yes"))
    message = _error(root, fmt)
    assert "label column 'label' has a single value ('yes')" in message and f"all {ROWS} rows" in message


def test_regression_label_with_text(tmp_path):
    values = [str(v) for v in np.linspace(1.0, 9.0, ROWS)]
    values[7:11] = ["n/a", "none", "?", "unknown"]  # more texts than a few mistakes
    root = _csv_root(tmp_path, _frame().assign(price=values))
    checks.check_data(root, "csv", "price", None, [])  # any task: text classes are fine
    message = _error(root, label="price", task="regression")
    assert "label column 'price' holds text (e.g. '?')" in message


@pytest.mark.parametrize("task", [None, "regression"])
def test_a_number_label_with_a_few_texts_names_them_by_line(tmp_path, task):
    frame = _frame().assign(price=[str(v) for v in np.linspace(1.0, 9.0, ROWS)])
    frame.loc[[7, 20, 30], "price"] = ["n/a", "n/a", "unknown"]
    frame.loc[2, "color"] = "red\nand blue"  # a row over two lines: the later ones move down one
    root = _csv_root(tmp_path, frame)
    message = _error(root, label="price", task=task)
    # Row i (from 0) starts on line i + 2 (the header is line 1), one more after row 2.
    assert message.startswith("label column 'price' holds numbers, and text in 3 rows: 'n/a' in a.csv lines 10, "
                              "23; 'unknown' in a.csv line 33; a label is a number in every row: correct those "
                              "cells, or drop those rows"), message


def test_a_few_texts_past_the_shown_lines_are_counted(tmp_path):
    frame = _frame().assign(price=[str(v) for v in np.linspace(1.0, 9.0, ROWS)])
    frame.loc[list(range(0, 14, 2)), "price"] = "-"
    first, second = _csv_root(tmp_path, frame, "a.csv"), _csv_root(tmp_path, frame, "b.csv")
    assert first == second
    message = _error(first, label="price", task="regression")
    assert "text in 14 rows: '-' in a.csv lines 2, 4, 6, 8, 10 and 9 more;" in message


def test_text_classes_among_whole_numbers_are_classes(tmp_path):
    # Few whole numbers and a text: classes ("other" is one), whatever init then chooses.
    labels = (["1", "2", "3", "other"] * ROWS)[:ROWS]
    root = _csv_root(tmp_path, _frame().assign(grade=labels))
    assert checks.check_data(root, "csv", "grade", None, []).classes == ("1", "2", "3", "other")
    # A classification asked for keeps decimals and a text as classes too.
    decimals = _csv_root(tmp_path, _frame().assign(score=[str(v) for v in np.linspace(1.0, 3.0, ROWS // 2)] * 2
                                                   ).assign(score=lambda f: f.score.where(f.index != 3, "n/a")))
    assert "n/a" in checks.check_data(decimals, "csv", "score", "multiclass", []).classes


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_rows_with_an_empty_label(tmp_path, fmt):
    frame = _frame()
    frame.loc[[3, 8, 9], "label"] = None
    root = (_csv_root if fmt == "csv" else _parquet_root)(tmp_path, frame)
    message = _error(root, fmt, task="binary")
    assert f"3 of {ROWS} rows" in message and "empty label 'label'" in message
    assert "df.dropna(subset=['label'])" in message


def test_empty_strings_and_nan_in_a_parquet_label_are_empty(tmp_path):
    root = _parquet_root(tmp_path, _frame().assign(label=["yes", "no", ""] + ["yes"] * (ROWS - 3),
                                                   y=[1.5, float("nan")] + [2.5] * (ROWS - 2)))
    assert f"1 of {ROWS} rows" in _error(root, "parquet")
    assert f"1 of {ROWS} rows" in _error(root, "parquet", label="y")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_too_few_rows(tmp_path, fmt):
    rows = checks.MIN_ROWS - 1
    frame = pd.DataFrame({"label": (["yes", "no"] * rows)[:rows], "x": range(rows)})
    root = (_csv_root if fmt == "csv" else _parquet_root)(tmp_path, frame)
    message = _error(root, fmt)
    assert f"holds {rows} rows" in message and f"at least {checks.MIN_ROWS}" in message


def test_binary_task_on_three_classes(tmp_path):
    root = _csv_root(tmp_path, _frame().assign(label=["a", "b", "c", "a"] * (ROWS // 4)))
    message = _error(root, task="binary")
    assert "has 3 values ('a', 'b', 'c') but the task is binary" in message and "classes = 3" in message


def test_multiclass_task_on_two_classes(tmp_path):
    root = _csv_root(tmp_path, _frame())
    assert "the task is multiclass; use task binary" in _error(root, task="multiclass")


def test_classification_on_decimals(tmp_path):
    root = _csv_root(tmp_path, _frame())
    assert "label column 'x' holds decimals" in _error(root, label="x", task="multiclass")


def test_too_many_classes(tmp_path):
    rows = 2 * (checks.MAX_CLASSES + 1)
    root = _csv_root(tmp_path, pd.DataFrame({"label": [f"c{i // 2}" for i in range(rows)], "x": range(rows)}))
    message = _error(root, task="multiclass")
    assert f"{checks.MAX_CLASSES + 1} distinct values" in message


def test_csv_with_an_unnamed_column(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    _frame().to_csv(root / "a.csv")  # the index, written without a name
    message = _error(root)
    assert f"{root / 'a.csv'}: column 1 has no name" in message and "index=False" in message


def test_csv_starting_with_a_blank_line(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.csv").write_text("\nlabel,x\n" + "yes,1\nno,2\n" * 20)
    assert f"{root / 'a.csv'} is empty (or its first line is)" in _error(root)


def test_a_header_with_a_byte_order_mark(tmp_path):
    # Excel's "CSV UTF-8": the mark is not part of the first column's name.
    root = tmp_path / "data"
    root.mkdir()
    _frame().rename(columns={"label": "species"}).to_csv(root / "a.csv", index=False, encoding="utf-8-sig")
    assert (root / "a.csv").read_bytes().startswith(b"\xef\xbb\xbfspecies,")
    assert checks.check_table(root, "csv") == ["species", "x", "color"]
    checks.check_data(root, "csv", "species", "binary", ["x", "color"])
    assert table.read_label(root, "csv", "species").classes == ("no", "yes")


def test_fully_quoted_fields(tmp_path):
    # R's write.csv and RFC 4180 writers quote every field: names and values come unquoted,
    # a quoted comma or line break stays in its value, and a quoted number is a number.
    frame = _frame().assign(**{"note, free text": ["a, b", "two\nlines", 'say "hi"', ""] * (ROWS // 4)})
    frame.loc[5, "label"] = None
    root = tmp_path / "data"
    root.mkdir()
    with open(root / "a.csv", "w", newline="", encoding="utf-8-sig") as handle:
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL)
        writer.writerows([list(frame.columns), *frame.fillna("").to_numpy().tolist()])
    written = (root / "a.csv").read_bytes()
    assert written.startswith(b'\xef\xbb\xbf"label","x","color","note, free text"\r\n"yes","0.5"')
    assert checks.check_table(root, "csv") == ["label", "x", "color", "note, free text"]
    label = table.read_label(root, "csv", "label")
    assert (label.rows, label.missing, label.classes) == (ROWS, 1, ("no", "yes"))
    assert table.read_label(root, "csv", "x").type == "FLOAT"
    note = table.read_columns(root / "a.csv", "csv", ["note, free text"]).column(0).to_pylist()
    assert note[:4] == ["a, b", "two\nlines", 'say "hi"', None]


def test_a_row_with_the_wrong_number_of_fields_is_named_by_its_line(tmp_path):
    root = tmp_path / "data"
    lines = ["label,x"] + ["yes,1", "no,2"] * 10
    lines[7] = "no,2,3"  # line 8 of the file
    root.mkdir()
    (root / "a.csv").write_text("\n".join(lines) + "\n")
    message = _error(root)
    assert f"{root / 'a.csv'}, line 8 has 3 fields but the header has 2" in message
    assert "give every row 2 comma-separated fields" in message


def test_a_row_joined_over_lines_by_a_stray_quote(tmp_path):
    # ExampleGen joins lines until the quotes pair up: 5'11" opens a quoted field.
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.csv").write_text("label,height\n" + "yes,5'11\"\nno,6'1\"\n" + "yes,6\n" * 30)
    message = _error(root)
    assert f"{root / 'a.csv'}, lines 2-3 (one row to ExampleGen" in message
    assert "quotes do not pair up" in message and '("12"" pizza")' in message


def test_a_quote_that_never_closes(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.csv").write_text("label,x\n" + "yes,1\n" * 30 + 'no,"2\n' + "yes,1\n" * 5)
    message = _error(root)
    assert f"{root / 'a.csv'}, line 32: a quoted field opens there and never closes" in message


@pytest.mark.parametrize("separator, name", [(";", "semicolons"), ("\t", "tabs")])
def test_a_file_with_another_delimiter(tmp_path, separator, name):
    root = tmp_path / "data"
    root.mkdir()
    _frame().to_csv(root / "a.csv", index=False, sep=separator)
    message = _error(root)
    assert f"{root / 'a.csv'}: the header is one column" in message and f"split by {name}" in message
    assert "ExampleGen reads only comma-separated files" in message and f"sep={separator!r}" in message


def test_a_lone_carriage_return_in_a_field(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.csv").write_text("label,x\n" + "yes,1\n" * 10 + "no,2\r3\n" + "yes,1\n" * 10, newline="")
    assert f"{root / 'a.csv'}, line 12: a carriage return" in _error(root)


def test_windows_line_ends_and_blank_lines_pass(tmp_path):
    root = tmp_path / "data"
    root.mkdir()
    (root / "a.csv").write_bytes(b"label,x\r\n" + b"yes,1\r\nno,2\r\n\r\n" * 20)
    checks.check_data(root, "csv", "label", "binary", ["x"])
    assert table.read_label(root, "csv", "label").rows == 40


def test_rows_are_checked_across_blocks(tmp_path, monkeypatch):
    # A quoted field over lines where one block of lines ends and the next begins, and the
    # line numbers counted on across blocks.
    monkeypatch.setattr(checks, "_BLOCK_CHARS", 64)
    root = tmp_path / "data"
    root.mkdir()
    body = "".join(f'yes,"line {i}\nof a note"\n' if i % 3 == 0 else f"no,{i}\n" for i in range(60))
    (root / "a.csv").write_text("label,note\n" + body)
    checks.check_data(root, "csv", "label", "binary", [])
    assert table.read_label(root, "csv", "label").rows == 60
    lines = body.count("\n") + 1
    (root / "a.csv").write_text("label,note\n" + body + "yes,1,2\n")
    assert f"line {lines + 1} has 3 fields" in _error(root)


def test_text_that_is_not_utf8_anywhere_in_the_file(tmp_path):
    body = "x,y\n" + "1,plain\n" * 50 + "2,cit\xe9\n"  # a Latin-1 byte in a feature, far from the header
    (tmp_path / "a.csv").write_bytes(body.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"a.csv is not UTF-8 text \(byte \d+\); save it as UTF-8"):
        checks.check_table(tmp_path, "csv")
