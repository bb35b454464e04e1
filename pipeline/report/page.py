"""The run report as one HTML page: every section from the run's records, the charts inline
as SVG, one inline stylesheet. No script, no font, nothing fetched: it opens offline, from
a mail attachment or a CI artifact, as it is."""

from __future__ import annotations

import math
import shutil
import subprocess

from components.reporting_evaluator import keys as evaluator_keys
from pipeline.provenance import render
from pipeline.provenance.verdict import short_name
from pipeline.report import charts
from pipeline.report.markup import chart_row, document, escaped, number, plain, section, table
from pipeline.report.records import RunRecords
from serving.contract import LATENCY_BATCH_SIZES, latency_key

# The sections, in page order: (anchor, heading). Tests look for every one.
SECTIONS = (
    ("summary", "Summary"),
    ("dataset", "Dataset"),
    ("data", "Data"),
    ("training", "Training"),
    ("evaluation", "Evaluation"),
    ("importance", "Which features matter"),
    ("serving", "Serving"),
    ("lineage", "Lineage"),
)
# The yardstick bar of the model itself.
THIS_MODEL = "this model, eval split"
# Features drawn one chart each; a wider table's others are in the statistics table only.
MAX_FEATURE_CHARTS = 24
# Features drawn as bars of importance (the table under it lists them all).
MAX_IMPORTANCE_BARS = 20
# Seconds Graphviz may take to lay out the lineage graph.
DOT_TIMEOUT_S = 30
# The training report's entries shown under "hardware and speed", in this order.
SPEED_KEYS = ("strategy", "replicas", "precision", "xla", "tf_version", "epochs_run", "best_epoch",
              "stopped_early", "train_steps", "examples_per_second", "fit_wall_s", "export_wall_s")



def render_page(records: RunRecords) -> str:
    """The whole page."""
    summary = records.summary
    title = f"turbotfx run {summary.run_id}"
    body = [
        f"<h1>{escaped(title)}</h1>",
        f'<p class="muted">pipeline {escaped(summary.pipeline or "?")} · model {escaped(summary.model_name or "?")} · '
        f"{escaped(summary.status)}</p>",
        "<nav>" + "".join(f'<a href="#{anchor}">{escaped(heading)}</a>' for anchor, heading in SECTIONS) + "</nav>",
        _missing(records),
        _section("summary", _summary(records)),
        _section("dataset", _dataset(records)),
        _section("data", _data(records)),
        _section("training", _training(records)),
        _section("evaluation", _evaluation(records)),
        _section("importance", _importance(records)),
        _section("serving", _serving(records)),
        _section("lineage", _lineage(records)),
    ]
    return document(title, body)


def _section(anchor: str, content: str) -> str:
    return section(anchor, dict(SECTIONS)[anchor], content)


def _missing(records: RunRecords) -> str:
    if not records.missing:
        return ""
    return ('<p class="bad">Not on this machine, so left out below: ' + escaped("; ".join(records.missing))
            + ". Copied elsewhere? <code>turbotfx report --artifact-root RECORDED=LOCAL</code> says where.</p>")


# --- sections -----------------------------------------------------------------------------


def _summary(records: RunRecords) -> str:
    summary = records.summary
    value = summary.blessing_value
    metric = summary.blessing_metric
    blessed = {True: ('<b class="good">yes</b>'), False: '<b class="bad">no</b>', None: "<b>not evaluated</b>"}
    facts = [
        ("status", f"<b>{escaped(summary.status)}</b>"),
        (f"{metric} (eval split)" if metric else "blessing metric", f"<b>{number(value)}</b>"),
        ("blessed", blessed[summary.blessed]),
        ("pushed version", f"<b>{escaped(summary.pushed_version or 'nothing')}</b>"),
        ("model artifact", f"<b>{escaped(summary.model_id if summary.model_id is not None else 'none')}</b>"),
        ("duration", f"<b>{(summary.end_ms - summary.start_ms) / 1000:.1f} s</b>"),
    ]
    parts = ['<div class="facts">' + "".join(f'<div class="fact">{escaped(name)}{shown}</div>' for name, shown in facts)
             + "</div>"]
    if summary.blessed is False:
        reasons = summary.verdict.reasons(value)
        parts.append("<p>Not blessed: " + escaped("; ".join(reasons) or "see the log") + "</p>")
    failed = summary.failed_component()
    if failed:
        parts.append(f'<p class="bad">{escaped(failed)} failed: see logs/turbotfx.log</p>')
    yardsticks = _yardsticks(records)
    if yardsticks and metric:
        names, values = zip(*yardsticks)
        better = "higher is better" if summary.verdict.higher_is_better else "lower is better"
        parts.append(chart_row([charts.bars(f"{short_name(metric)} against its yardsticks ({better})", names, values,
                                          highlight=names.index(THIS_MODEL) if THIS_MODEL in names else None)]))
    parts.append("<details><summary>components</summary>")
    parts.append(table(("component", "state", "seconds"),
                        [(c.node_id, c.state, f"{c.seconds:.1f}") for c in summary.components], numeric=(2,)))
    parts.append("</details>")
    return "\n".join(parts)


def _dataset(records: RunRecords) -> str:
    dataset = (records.lineage or {}).get("dataset") or {}
    if not dataset:
        return "<p>No model was trained in this run, so no dataset file is recorded.</p>"
    rows = [("dataset file", dataset.get("file") or "(built in)"),
            ("content hash (sha256, first 16 digits)", dataset.get("fingerprint") or "?")]
    rows += [(key, plain(dataset[key])) for key in ("name", "task", "label") if dataset.get(key) is not None]
    parts = [table(("", ""), rows)]
    text = dataset.get("text")
    if text:
        parts.append(f"<details><summary>the dataset file</summary><pre>{escaped(text)}</pre></details>")
    return "\n".join(parts)


def _data(records: RunRecords) -> str:
    if not records.statistics:
        return "<p>No statistics to show: none recorded in this run, or their files are not on this machine.</p>"
    splits = list(records.statistics)
    parts = ["<p>" + ", ".join(f"{escaped(split)}: {records.statistics[split].rows:,} rows" for split in splits) + "</p>"]
    names = sorted({name for split in splits for name in records.statistics[split].features})
    label = ((records.lineage or {}).get("dataset") or {}).get("label")
    header = ["feature", "kind"] + [f"missing ({s})" for s in splits] + [f"mean or top value ({s})" for s in splits]
    rows = []
    for name in names:
        in_splits = [records.statistics[s].features.get(name) for s in splits]
        known = next(f for f in in_splits if f is not None)
        rows.append([name, known.kind + (" (label)" if name == label else "")]
                    + [_share(f.missing_share) if f else "–" for f in in_splits]
                    + [_centre(f) if f else "–" for f in in_splits])
    parts.append(table(header, rows, numeric=tuple(range(2, 2 + len(splits)))))
    drawn = []
    for name in names[:MAX_FEATURE_CHARTS]:
        per_split = {s: records.statistics[s].features[name] for s in splits if name in records.statistics[s].features}
        kind = next(iter(per_split.values())).kind
        if kind == "numeric":
            drawn.append(charts.numeric_histograms(name, {s: f.bins for s, f in per_split.items()}))
        else:
            drawn.append(charts.top_values(name, {s: f.top_values for s, f in per_split.items()}))
    parts.append(chart_row(drawn))
    if len(names) > MAX_FEATURE_CHARTS:
        parts.append(f'<p class="muted">Charts for the first {MAX_FEATURE_CHARTS} of {len(names)} features; '
                     "the table above has them all.</p>")
    parts.append("<h3>Anomalies</h3>")
    parts.append(_anomalies(records))
    return "\n".join(parts)


def _anomalies(records: RunRecords) -> str:
    if records.anomalies is None:
        return "<p>The data was not validated in this run.</p>"
    found = [(split, feature, what) for split, listed in records.anomalies.items() for feature, what in listed]
    gate = next((c for c in records.summary.components if c.node_id == "AnomalyGate"), None)
    decided = ""
    if gate is not None:
        decided = (" The gate let the run go on." if gate.state in ("COMPLETE", "CACHED")
                   else f" The gate stopped the run ({gate.state}).")
    if not found:
        return f"<p>None: every split matches the schema.{escaped(decided)}</p>"
    return (f"<p>{len(found)} found.{escaped(decided)}</p>"
            + table(("split", "feature", "what is wrong"), found))


def _training(records: RunRecords) -> str:
    lineage = records.lineage
    if lineage is None:
        return "<p>No model was trained in this run.</p>"
    report = lineage["trainer"]["training_report"]
    parts = []
    if records.curves:
        parts.append("<h3>Learning curves</h3>")
        parts.append('<p class="muted">Per epoch, from the Trainer\'s TensorBoard logs: the train split '
                     "against the validation slice held out of it.</p>")
        parts.append(chart_row([charts.learning_curves(metric, phases) for metric, phases in records.curves.items()]))
    elif report.get("model_family") == "gbt":
        parts.append("<p>A gradient-boosted trees model: trained in one pass, no epochs to plot.</p>")
    parts.append("<h3>Hardware and speed</h3>")
    parts.append(table(("", ""), [(key, plain(report[key])) for key in SPEED_KEYS if key in report]))
    if records.summary.tuning:
        tuning = records.summary.tuning
        how = "reused" if tuning.get("reused") else "made in this run"
        parts.append(f"<h3>Tuning</h3><p>Tuning result {tuning['id']} ({how}): {tuning.get('trials')} trials; "
                     f"the best scored {number(tuning.get('best_score'))} ({escaped(tuning.get('objective') or '')}). "
                     "<code>turbotfx tune show</code> lists its trials.</p>")
    parts.append("<h3>Training configuration</h3>")
    config = {**lineage["trainer"]["hyperparameters"], **lineage["trainer"]["effective"]}
    parts.append(f"<details><summary>all {len(config)} knobs the Trainer ran with</summary>")
    parts.append(table(("knob", "value"), sorted((k, plain(v)) for k, v in config.items())))
    parts.append("</details>")
    return "\n".join(parts)


def _evaluation(records: RunRecords) -> str:
    summary = records.summary
    if not summary.metrics:
        return "<p>The model was not evaluated in this run.</p>"
    verdict = summary.verdict
    metric = summary.blessing_metric
    value = summary.blessing_value
    parts = []
    if value is not None and verdict.value_bound is not None:
        parts.append(f"<p>Blessing bound: {number(verdict.value_bound)} ({escaped(verdict.bound_source or '')}).</p>")
    parts.append("<h3>Metrics on the eval split</h3>")
    rows = [(name, number(v), number(summary.metric_changes.get(name))) for name, v in sorted(summary.metrics.items())]
    rows += [(name, f"n/a ({reason})", "") for name, reason in sorted(summary.undefined_metrics.items())]
    parts.append(table(("metric", "value", "change against the served baseline"), rows, numeric=(1, 2)))
    if summary.slice_metrics and metric:
        sliced = [(name, values[metric]) for name, values in sorted(summary.slice_metrics.items()) if metric in values]
        if sliced:
            parts.append("<h3>Per slice</h3>")
            parts.append(chart_row([charts.bars(f"{metric} per slice", [n for n, _ in sliced], [v for _, v in sliced])]))
    parts.append(_model_curves(records))
    matrix = summary.confusion_matrix
    if matrix:
        classes = [evaluator_keys.class_text(name) for name in matrix["classes"]]
        if len(matrix["counts"]) > len(classes):
            classes.append("other")
        parts.append("<h3>Confusion matrix</h3>")
        parts.append(chart_row([charts.confusion_matrix(classes, matrix["counts"])]))
        parts.append(table(["true \\ predicted", *classes],
                            [[name, *map(str, row)] for name, row in zip(classes, matrix["counts"])],
                            numeric=tuple(range(1, len(classes) + 1))))
    return "\n".join(parts)


def _model_curves(records: RunRecords) -> str:
    """ROC, PR and calibration of a classifier, or the residuals of a regression."""
    found = records.insights
    if found is None:
        return f'<p class="muted">Curves: not shown, {escaped(records.insights_missing or "not recorded")}.</p>'
    drawn = []
    if found["task"] == "regression":
        residuals, scatter = found["residuals"], found["scatter"]
        drawn.append(charts.residual_histogram(residuals["edges"], residuals["counts"]))
        drawn.append(charts.predicted_against_actual(scatter["label"], scatter["prediction"]))
        note = (f"Residuals of {found['rows']:,} eval rows: mean {residuals['mean']:.4g}, "
                f"standard deviation {residuals['std']:.4g}.")
    else:
        if found["roc"]:
            drawn.append(charts.roc_curves(found["roc"]))
            drawn.append(charts.pr_curves(found["pr"]))
        what = "of the positive class" if found["task"] == "binary" else "of the predicted class"
        drawn.append(charts.calibration(found["calibration"], what))
        note = (f"On {found['rows']:,} eval rows through the served signature"
                + ("; each class against the rest." if found["task"] != "binary" else "."))
    return f"<h3>Curves</h3><p class=\"muted\">{escaped(note)}</p>" + chart_row(drawn)


def _importance(records: RunRecords) -> str:
    found = records.insights
    if found is None:
        return f"<p>Not shown: {escaped(records.insights_missing or 'not recorded')}.</p>"
    ranked, metric = found["importance"], found["metric"]
    if not ranked:
        return (f"<p>No importance to show: {escaped(metric)} has no value on these eval rows (an AUC of rows of "
                "one class), or the model reads no feature to shuffle.</p>")
    worse = "lower" if evaluator_keys.HIGHER_IS_BETTER[metric] else "higher"
    parts = [f'<p class="muted">Permutation importance on {found["rows"]:,} eval rows through the served '
             f"signature: how much {worse} {escaped(metric)} gets when one feature's values are shuffled across "
             "the rows (one seeded shuffle each; near zero: the model does without it).</p>"]
    shown = ranked[:MAX_IMPORTANCE_BARS]
    parts.append(chart_row([charts.bars(f"{metric} lost with the feature shuffled", [i["feature"] for i in shown],
                                      [i["drop"] for i in shown])]))
    parts.append(table(("feature", f"{metric} lost"), [(i["feature"], f"{i['drop']:.4f}") for i in ranked],
                        numeric=(1,)))
    return "\n".join(parts)


def _yardsticks(records: RunRecords) -> list[tuple[str, float]]:
    """The blessing metric of this model beside what it is measured against."""
    summary, verdict = records.summary, records.summary.verdict
    value = summary.blessing_value
    found = []
    if verdict.trivial is not None:
        found.append((f"trivial baseline ({verdict.trivial_answer()})", verdict.trivial))
    change = summary.metric_changes.get(summary.blessing_metric or "")
    if value is not None and change is not None and verdict.baseline_model_id:
        found.append((f"served baseline (model {verdict.baseline_model_id})", value - change))
    if verdict.train is not None:
        found.append(("this model, train split", verdict.train))
    if value is not None:
        found.append((THIS_MODEL, value))
    return [(name, v) for name, v in found if v is not None and math.isfinite(v)]


def _serving(records: RunRecords) -> str:
    summary = records.summary
    parts = []
    check = summary.serving_check
    if check is None:
        parts.append("<p>The serving check did not run.</p>")
    elif not check["passed"]:
        parts.append('<p class="bad">The serving check failed: ' + escaped("; ".join(check["problems"] or ["see the log"]))
                     + "</p>")
    else:
        parts.append('<p class="good">The serving check passed: the exported model loaded in a fresh process and '
                     "answered its signatures.</p>")
        rows = [(f"batch {b}", check[latency_key(50, b)], check[latency_key(99, b)]) for b in LATENCY_BATCH_SIZES
                if latency_key(50, b) in check and latency_key(99, b) in check]
        if rows:
            parts.append(chart_row([charts.latencies(rows)]))
    pushed = [("pushed version", summary.pushed_version or "nothing"), ("pushed to", summary.pushed_path or "–")]
    pushed += [(f"label {label}", str(version)) for label, version in sorted(records.labels.items())]
    parts.append(table(("", ""), pushed))
    return "\n".join(parts)


def _lineage(records: RunRecords) -> str:
    if records.lineage is None:
        return "<p>No model was trained in this run, so there is no model lineage.</p>"
    dot_source = render.lineage_dot(records.lineage)
    drawn = _graphviz_svg(dot_source)
    intro = ("<p class=\"muted\">Artifacts (ellipses) and executions (boxes) as MLMD records them; "
             "<code>turbotfx lineage --format dot</code> prints the same graph.</p>")
    if drawn is None:
        return (intro + "<p>Graphviz's <code>dot</code> is not installed here, so the graph is not drawn; "
                f"its source:</p><pre>{escaped(dot_source)}</pre>")
    return intro + f'<div class="chart">{drawn}</div>'


def _graphviz_svg(dot_source: str) -> str | None:
    """The graph laid out by Graphviz as an <svg> element, or None without `dot`."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    done = subprocess.run([dot, "-Tsvg"], input=dot_source, capture_output=True, text=True, timeout=DOT_TIMEOUT_S)
    if done.returncode != 0 or "<svg" not in done.stdout:
        return None
    return done.stdout[done.stdout.index("<svg"):]


# --- pieces -------------------------------------------------------------------------------


def _centre(feature) -> str:
    if feature.missing_share >= 1.0:
        return "–"  # no value in this split: no mean to show
    if feature.kind == "numeric":
        return f"{feature.mean:.4g} ± {feature.std:.3g}" if feature.mean is not None else "–"
    if feature.top_values:
        value, share = feature.top_values[0]
        return f"{value} ({share:.0%}; {feature.unique} distinct)"
    return "–"


def _share(share: float) -> str:
    return f"{share:.1%}"
