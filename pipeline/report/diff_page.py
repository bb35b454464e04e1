"""Two models side by side as one HTML page (`turbotfx report --diff A B`): what
`turbotfx diff` knows, and their metrics, slices, confusion matrices and feature importance
as paired charts."""

from __future__ import annotations

from typing import Any

from components.reporting_evaluator import keys as evaluator_keys
from pipeline.report import charts
from pipeline.report.markup import chart_row, document, escaped, number, plain, section, table
from pipeline.report.records import RunRecords

# The sections, in page order: (anchor, heading).
SECTIONS = (
    ("summary", "Summary"),
    ("changes", "What differs"),
    ("metrics", "Metrics"),
    ("slices", "Per slice"),
    ("confusion", "Confusion matrices"),
    ("importance", "Which features matter"),
)
# The most features drawn as paired bars of importance (the largest of either model's).
MAX_IMPORTANCE_BARS = 20
# Counted, not scored: a bar of it beside the metrics would dwarf them.
NOT_PLOTTED = ("example_count",)


def render_diff(a: RunRecords, b: RunRecords, changes: dict[str, Any]) -> str:
    """The page comparing model A (a's run) with model B (b's), changes from diff_models."""
    pair = (f"A: model {changes['a']['model_id']}", f"B: model {changes['b']['model_id']}")
    title = f"turbotfx models {changes['a']['model_id']} and {changes['b']['model_id']}"
    content = {
        "summary": _summary(a, b, pair),
        "changes": _changes(changes, pair),
        "metrics": _metrics(a, b, pair),
        "slices": _slices(a, b, pair),
        "confusion": _confusion(a, b, pair),
        "importance": _importance(a, b, pair),
    }
    body = [f"<h1>{escaped(title)}</h1>",
            "<nav>" + "".join(f'<a href="#{anchor}">{escaped(heading)}</a>' for anchor, heading in SECTIONS) + "</nav>"]
    body += [section(anchor, heading, content[anchor]) for anchor, heading in SECTIONS]
    return document(title, body)


def _summary(a: RunRecords, b: RunRecords, pair: tuple[str, str]) -> str:
    rows = []
    for name, read in (("run", lambda r: r.summary.run_id),
                       ("blessing metric", lambda r: r.summary.blessing_metric),
                       ("its value (eval split)", lambda r: number(r.summary.blessing_value)),
                       ("blessed", lambda r: {True: "yes", False: "no", None: "not evaluated"}[r.summary.blessed]),
                       ("pushed version", lambda r: r.summary.pushed_version or "nothing"),
                       ("model family", lambda r: r.summary.verdict.family or "?")):
        rows.append((name, read(a), read(b)))
    return table(("", *pair), rows)


def _changes(changes: dict[str, Any], pair: tuple[str, str]) -> str:
    parts = []
    for name, found in changes.items():
        if name in ("a", "b"):
            continue
        if not found:
            parts.append(f"<h3>{escaped(name)}</h3><p class=\"muted\">the same</p>")
            continue
        parts.append(f"<h3>{escaped(name)}</h3>")
        parts.append(table(("", *pair), [(key, _shown(v["a"]), _shown(v["b"])) for key, v in found.items()]))
    return "\n".join(parts)


def _metrics(a: RunRecords, b: RunRecords, pair: tuple[str, str]) -> str:
    names = sorted((set(a.summary.metrics) | set(b.summary.metrics)) - set(NOT_PLOTTED))
    if not names and not a.summary.undefined_metrics and not b.summary.undefined_metrics:
        return "<p>Neither model was evaluated.</p>"
    names = sorted(set(names) | ((set(a.summary.undefined_metrics) | set(b.summary.undefined_metrics))
                                 - set(NOT_PLOTTED)))
    values = ([a.summary.metrics.get(n) for n in names], [b.summary.metrics.get(n) for n in names])
    rows = [(n, _metric(a, n), _metric(b, n)) for n in names]
    return (chart_row([charts.paired_bars("metrics on each model's eval split", names, pair, values)])
            + table(("metric", *pair), rows, numeric=(1, 2)))


def _metric(records: RunRecords, name: str) -> str:
    """A metric's value, or why it has none (a class never predicted)."""
    if name in records.summary.metrics:
        return number(records.summary.metrics[name])
    reason = records.summary.undefined_metrics.get(name)
    return f"n/a ({reason})" if reason else "–"


def _slices(a: RunRecords, b: RunRecords, pair: tuple[str, str]) -> str:
    metric = a.summary.blessing_metric or b.summary.blessing_metric
    names = sorted(set(a.summary.slice_metrics) | set(b.summary.slice_metrics))
    if not metric or not names:
        return "<p>No slices were evaluated.</p>"
    values = ([a.summary.slice_metrics.get(n, {}).get(metric) for n in names],
              [b.summary.slice_metrics.get(n, {}).get(metric) for n in names])
    return chart_row([charts.paired_bars(f"{metric} per slice", names, pair, values)])


def _confusion(a: RunRecords, b: RunRecords, pair: tuple[str, str]) -> str:
    drawn = []
    for label, records in zip(pair, (a, b)):
        matrix = records.summary.confusion_matrix
        if matrix:
            classes = [evaluator_keys.class_text(name) for name in matrix["classes"]]
            if len(matrix["counts"]) > len(classes):
                classes.append("other")
            drawn.append(f"<div><h3>{escaped(label)}</h3>" + charts.confusion_matrix(classes, matrix["counts"]) + "</div>")
    if not drawn:
        return "<p>No confusion matrix: neither is a classifier's evaluation.</p>"
    return '<div class="charts">' + "".join(drawn) + "</div>"


def _importance(a: RunRecords, b: RunRecords, pair: tuple[str, str]) -> str:
    drops = [{item["feature"]: item["drop"] for item in (r.insights or {}).get("importance", [])} for r in (a, b)]
    if not any(drops):
        return "<p>Neither evaluation records permutation importance.</p>"
    names = sorted(set(drops[0]) | set(drops[1]), key=lambda n: -max(drops[0].get(n, 0.0), drops[1].get(n, 0.0)))
    names = names[:MAX_IMPORTANCE_BARS]
    metric = (a.insights or b.insights or {}).get("metric", "metric")
    values = ([drops[0].get(n) for n in names], [drops[1].get(n) for n in names])
    return chart_row([charts.paired_bars(f"{metric} lost with the feature shuffled", names, pair, values)])


def _shown(value: Any) -> str:
    """A setting as it was given: 1e-06 stays 1e-06 (four decimals would make it 0)."""
    return "–" if value is None else plain(value)
