"""Classes named by their label values: how a per-class metric is keyed (any label value,
unambiguously, and storable in every MLMD backend), why a metric has no value, and the
confusion matrix the Evaluator records. Expected values are written out by hand."""

from __future__ import annotations

import itertools
import math

import pytest

from components.reporting_evaluator import confusion
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
    assert confusion.undefined_reason(metric, class_id, value, COUNTS, binary) == reason


def test_auc_on_a_slice_of_positive_rows_only():
    only_positive = {(1, 1): 5.0, (1, 0): 2.0}
    assert confusion.undefined_reason("auc", 1, 1.0, only_positive, True, "slice") == "no negative rows"
    assert confusion.undefined_reason("recall", 0, math.nan, only_positive, False, "slice") == (
        "absent from the slice")


def test_the_confusion_matrix_names_classes_most_frequent_first():
    names = ["c", "a", "b c"]  # class ids by training frequency
    counts = {(0, 0): 20.0, (0, 1): 2.0, (1, 1): 9.0, (1, 0): 1.0, (2, 2): 11.0, (2, 0): 1.0}
    assert confusion.confusion_matrix(counts, names) == {
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
    matrix = confusion.confusion_matrix(counts, names, limit=10)
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


def _write_evaluation(folder, threshold_values: dict[tuple[str, int], float], counts: dict[tuple[int, int], int],
                      threshold_changes: dict[tuple[str, int], float] | None = None):
    """TFMA's output as its writer leaves it: TFMA's per-class values (at its 0.5 threshold)
    and their changes against a baseline (is_diff), and the top-class confusion matrix, overall."""
    import tensorflow as tf
    from tensorflow_model_analysis.proto import metrics_for_slice_pb2 as tfma_pb

    metrics = tfma_pb.MetricsForSlice()
    for values, is_diff in ((threshold_values, False), (threshold_changes or {}, True)):
        for (name, class_id), number in values.items():
            entry = metrics.metric_keys_and_values.add()
            entry.key.name, entry.key.model_name, entry.key.is_diff = name, "candidate", is_diff
            entry.key.sub_key.class_id.value = class_id
            entry.value.double_value.value = number
    plots = tfma_pb.PlotsForSlice()
    plot = plots.plot_keys_and_values.add()
    plot.key.name, plot.key.model_name = confusion.CONFUSION_PLOT_NAME, "candidate"
    matrix = plot.value.multi_class_confusion_matrix_at_thresholds.matrices.add()
    for (actual, predicted), rows in counts.items():
        matrix.entries.add(actual_class_id=actual, predicted_class_id=predicted, num_weighted_examples=rows)
    for name, proto in (("metrics", metrics), ("plots", plots)):
        with tf.io.TFRecordWriter(str(folder / f"{name}-00000-of-00001.tfrecord")) as writer:
            writer.write(proto.SerializeToString())


def test_multiclass_precision_and_recall_follow_the_confusion_matrixs_top_class(tmp_path):
    """Seattle weather's case: no day's drizzle probability reached 0.5, so TFMA's own
    precision[drizzle] is undefined and its recall 0, while the matrix (the top class) has
    drizzle predicted twice, once right; rain's recall there is 47/54, not TFMA's 43/54."""
    names = ["rain", "sun", "drizzle"]
    counts = {(0, 0): 47, (0, 1): 6, (0, 2): 1, (1, 1): 50, (1, 0): 4, (2, 2): 1, (2, 0): 3, (2, 1): 5}
    at_threshold = {("precision", 0): 0.95, ("recall", 0): 43 / 54, ("precision", 1): 0.9, ("recall", 1): 0.8,
                    ("precision", 2): math.nan, ("recall", 2): 0.0}
    # TFMA's changes of its own thresholded values against a baseline: another decision's.
    changes = {("precision", 0): 0.01, ("recall", 2): -0.2, ("auc", 1): 0.03}
    _write_evaluation(tmp_path, at_threshold, counts, changes)
    metrics = reporting_evaluator.read_metrics(str(tmp_path), names)
    # Per-class precision and recall changes are left out (the baseline's counts are not
    # read here); another per-class metric's change stays.
    assert metrics.diff == {"auc[sun]": pytest.approx(0.03)}
    # By hand, from the matrix: predicted as the class (column), of the class (row).
    assert metrics.overall["precision[rain]"] == pytest.approx(47 / (47 + 4 + 3))
    assert metrics.overall["recall[rain]"] == pytest.approx(47 / 54)
    assert metrics.overall["precision[sun]"] == pytest.approx(50 / (6 + 50 + 5))
    assert metrics.overall["recall[sun]"] == pytest.approx(50 / 54)
    assert metrics.overall["precision[drizzle]"] == pytest.approx(1 / 2)  # a rain day predicted drizzle too
    assert metrics.overall["recall[drizzle]"] == pytest.approx(1 / 9)
    assert metrics.undefined == {}
    assert metrics.confusion["counts"][0] == [47, 6, 1]  # rain's row, as the summary shows it


def test_a_class_the_top_class_never_is_has_no_precision_and_says_why(tmp_path):
    names = ["rain", "sun", "fog"]
    _write_evaluation(tmp_path, {("precision", 2): 0.5, ("recall", 2): 0.5},
                      {(0, 0): 5, (1, 1): 5, (2, 0): 2})
    metrics = reporting_evaluator.read_metrics(str(tmp_path), names)
    assert metrics.undefined == {"precision[fog]": confusion.NEVER_PREDICTED}
    assert metrics.overall["recall[fog]"] == 0.0
