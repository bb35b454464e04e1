"""Classes named by their label values: how a per-class metric is keyed (any label value,
unambiguously, and storable in every MLMD backend), why a metric has no value, and the
confusion matrix the Evaluator records. Expected values are written out by hand."""

from __future__ import annotations

import itertools
import math

import pytest

from components.reporting_evaluator import executor as reporting_evaluator
from components.reporting_evaluator.keys import class_key, class_text
from components.reporting_trainer.keys import BASE64_JSON_PREFIX, from_json_property, json_property

# Label values as tables hold them: a space, brackets, '=', quotes, a backslash, unicode,
# the empty value, TFMA's own sub-key spelling, a percent sign, a line break.
AWKWARD_LABELS = ["Chinstrap", "big cat", "x=1", "é中", "", " padded", "padded ", "a]b", "[a", 'say "hi"',
                  "classId:1", "topK:3", "C:\\dir", "50%", '"50%"', "line\nbreak", "tab\there", '""', "a%25b",
                  '"a"', "a%5Cb", "a\\b"]


@pytest.mark.parametrize("label, key", [
    ("Chinstrap", "precision[Chinstrap]"),
    ("big cat", "precision[big cat]"),  # a space alone needs no quotes
    ("x=1", "precision[x=1]"),
    ("é中", "precision[é中]"),
    ("50%", "precision[50%]"),
    ("", 'precision[""]'),
    (" padded", 'precision[" padded"]'),
    ("a]b", 'precision["a]b"]'),
    ('say "hi"', 'precision["say ""hi"""]'),
    ("classId:1", 'precision["classId:1"]'),  # never mistaken for TFMA's class id 1
    ("C:\\dir", 'precision["C:%5Cdir"]'),
    ("line\nbreak", 'precision["line%0Abreak"]'),
    ('a%b"', 'precision["a%25b"""]'),
])
def test_a_label_value_keys_a_metric_as_written_or_quoted(label, key):
    assert class_key("precision", label) == key


def test_keys_of_different_labels_differ_and_hold_no_backslash():
    texts = [class_text(label) for label in AWKWARD_LABELS]
    assert len(set(texts)) == len(AWKWARD_LABELS)
    # MLMD's PostgreSQL store fails on a backslash in a property name; a line break would
    # break the summary's listing.
    assert not [text for text in texts if "\\" in text or not text.isprintable()]
    # A quoted text starts and ends with a quote; an unquoted one holds none.
    assert all((text[0] == text[-1] == '"') if '"' in text else True for text in texts)
    # Two keys never read as one: no key is another key with more text after it.
    keys = [class_key("recall", label) for label in AWKWARD_LABELS]
    assert not [(a, b) for a, b in itertools.permutations(keys, 2) if a.startswith(b)]


@pytest.mark.parametrize("value", [["Adelie", "Gentoo"], ['say "hi"', "C:\\dir", "line\nbreak", "é"], {"a": [1, 2]}])
def test_json_properties_round_trip_without_a_backslash(value):
    text = json_property(value)
    assert "\\" not in text
    assert from_json_property(text) == value
    # Readable JSON where nothing needs an escape; base64 only where one would.
    assert text.startswith(BASE64_JSON_PREFIX) == any('"' in v or "\\" in v or "\n" in v
                                                      for v in value if isinstance(v, str))


# A slice of 10 rows: 4 of class 0 (3 predicted right, 1 as class 1), 6 of class 1 (all right);
# class 2 has no rows and is never predicted.
COUNTS = {(0, 0): 3.0, (0, 1): 1.0, (1, 1): 6.0}


@pytest.mark.parametrize("metric, class_id, value, binary, reason", [
    ("precision", 2, math.nan, False, "never predicted"),
    ("recall", 2, math.nan, False, "absent from the eval split"),
    ("precision", 0, 1.0, False, None),
    ("recall", 0, 0.75, False, None),
    ("sparse_categorical_accuracy", None, 0.9, False, None),
    ("sparse_categorical_accuracy", None, math.nan, False, "undefined"),
    # TFMA's AUC on rows of one class is a number (0): it is still undefined.
    ("auc", 2, 0.0, True, "no positive rows"),
    ("calibration", 2, math.nan, True, "no positive rows"),
    ("auc", 1, 0.9, True, None),
])
def test_why_a_metric_has_no_value(metric, class_id, value, binary, reason):
    assert reporting_evaluator.undefined_reason(metric, class_id, value, COUNTS, binary) == reason


def test_auc_on_a_slice_of_positive_rows_only():
    only_positive = {(1, 1): 5.0, (1, 0): 2.0}
    assert reporting_evaluator.undefined_reason("auc", 1, 1.0, only_positive, True, "slice") == "no negative rows"
    assert reporting_evaluator.undefined_reason("recall", 0, math.nan, only_positive, False, "slice") == (
        "absent from the slice")


def test_the_confusion_matrix_names_classes_most_frequent_first():
    names = ["c", "a", "b c"]  # class ids by training frequency
    counts = {(0, 0): 20.0, (0, 1): 2.0, (1, 1): 9.0, (1, 0): 1.0, (2, 2): 11.0, (2, 0): 1.0}
    assert reporting_evaluator.confusion_matrix(counts, names) == {
        "classes": ["c", "b c", "a"],  # 22, 12 and 10 true rows
        "counts": [[20, 0, 2], [1, 11, 0], [1, 0, 9]],
        "left_out": 0,
    }


def test_a_confusion_matrix_of_many_classes_folds_the_rarest_into_other():
    # Class k has k + 1 rows, each predicted as itself except one row of class 0 predicted 11.
    names = [f"class {k}" for k in range(12)]
    counts = {(k, k): float(k + 1) for k in range(12)}
    counts[(0, 0)] = 0.0
    counts[(0, 11)] = 1.0
    matrix = reporting_evaluator.confusion_matrix(counts, names, limit=10)
    assert matrix["classes"] == [f"class {k}" for k in range(11, 1, -1)]
    assert matrix["left_out"] == 2  # class 1 (2 rows) and class 0 (1 row)
    other = [0] * 10 + [2]  # class 1 right (other -> other)...
    other[0] = 1  # ...and class 0 predicted as class 11
    assert matrix["counts"][10] == other
    assert [row[10] for row in matrix["counts"][:10]] == [0] * 10
    assert sum(map(sum, matrix["counts"])) == sum(k + 1 for k in range(12))


def test_per_class_changes_against_a_baseline_whose_class_ids_name_other_labels_are_left_out():
    diff = {"sparse_categorical_accuracy": 0.01, "precision[a]": 0.2, "recall[b c]": -0.1}
    assert reporting_evaluator.comparable_changes(diff, ["c", "a", "b c"], ["c", "a", "b c"]) == diff
    # 'a' was the most frequent label when the baseline trained: id 0 named another class.
    assert reporting_evaluator.comparable_changes(diff, ["c", "a", "b c"], ["a", "c", "b c"]) == {
        "sparse_categorical_accuracy": 0.01}
    # A baseline trained before models recorded their names: nothing to tell, kept.
    assert reporting_evaluator.comparable_changes(diff, ["c", "a", "b c"], None) == diff
