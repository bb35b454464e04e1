"""The report's plots: matplotlib figures drawn to SVG text offline, to inline in the page.

Text stays text (svg.fonttype "none"): the page can be searched and its labels read, and the
browser draws them in its own sans-serif. Each chart's ids get a prefix of their own, so
many inline SVGs in one page never point at each other's clip paths."""

from __future__ import annotations

import io
import itertools
import re
import warnings
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # no display: draw to files only

from matplotlib import pyplot  # noqa: E402 (after the backend is chosen)
from matplotlib.figure import Figure  # noqa: E402

# The page's two series colours: train (or this model) and eval (or what it is compared with).
TRAIN_COLOUR, EVAL_COLOUR = "#1f6fb4", "#e07b20"
SMALL = (3.4, 2.2)  # inches: one feature's chart, four to a row
WIDE = (6.8, 3.0)
SQUARE = (3.3, 3.1)

_STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "turbotfx",  # the same records draw the same SVG
    # A value like "$" or "$10-$20" is text, not a TeX formula (which fails or drops the $).
    "text.parse_math": False,
    "font.size": 8,
    "font.family": "sans-serif",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 9,
    "legend.fontsize": 7,
    "legend.frameon": False,
}
_chart_numbers = itertools.count(1)


def svg(figure: Figure) -> str:
    """The figure as an <svg> element to inline (no XML prolog, ids of its own)."""
    buffer = io.StringIO()
    with warnings.catch_warnings():
        # Text is drawn by the browser's fonts: matplotlib's lack of a glyph does not matter.
        warnings.filterwarnings("ignore", message="Glyph .* missing from", category=UserWarning)
        figure.savefig(buffer, format="svg", bbox_inches="tight")
    pyplot.close(figure)
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    # matplotlib's RDF metadata (creator, licence URLs) says nothing to a reader of the page.
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)
    prefix = f"c{next(_chart_numbers)}-"
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}\1)", text)
    return re.sub(r'href="#([^"]+)"', rf'href="#{prefix}\1"', text)


def numeric_histograms(name: str, bins_by_split: dict[str, list[tuple[float, float, float]]]) -> str:
    """One numeric feature's equal-width histograms, as shares of each split's rows."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=SMALL)
        for (split, bins), colour in zip(bins_by_split.items(), (TRAIN_COLOUR, EVAL_COLOUR)):
            edges = [low for low, _, _ in bins] + [bins[-1][1]] if bins else []
            shares = [share for _, _, share in bins]
            if shares:
                axes.stairs(shares, edges, label=split, color=colour, fill=split == "train", alpha=0.45
                            if split == "train" else 1.0, linewidth=1.2)
        axes.set_title(name)
        axes.set_ylabel("share of rows")
        axes.legend()
        return svg(figure)


def top_values(name: str, values_by_split: dict[str, list[tuple[str, float]]]) -> str:
    """One categorical feature's most frequent values, as shares of each split's rows."""
    order = [value for value, _ in next(iter(values_by_split.values()), [])]
    for values in values_by_split.values():
        order += [value for value, _ in values if value not in order]
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=(SMALL[0], max(SMALL[1], 0.28 * len(order) + 0.8)))
        height = 0.8 / max(len(values_by_split), 1)
        for number, ((split, values), colour) in enumerate(zip(values_by_split.items(), (TRAIN_COLOUR, EVAL_COLOUR))):
            shares = dict(values)
            axes.barh([i + number * height for i in range(len(order))], [shares.get(v, 0.0) for v in order],
                      height=height, color=colour, label=split)
        axes.set_yticks([i + height * (len(values_by_split) - 1) / 2 for i in range(len(order))],
                        [_cut(v) for v in order])
        axes.invert_yaxis()
        axes.set_title(name)
        axes.set_xlabel("share of rows")
        axes.legend()
        return svg(figure)


def learning_curves(metric: str, series: dict[str, list[tuple[int, float]]]) -> str:
    """One metric per epoch: train against validation; a bagged run's models each draw a
    line ("train, model 2"), the legend naming each phase once."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=(SMALL[0] * 1.3, SMALL[1] * 1.2))
        labelled = set()
        for name, points in series.items():
            phase = name.split(",", 1)[0]
            axes.plot([epoch + 1 for epoch, _ in points], [value for _, value in points],
                      color=TRAIN_COLOUR if phase == "train" else EVAL_COLOUR, alpha=0.8, linewidth=1.1,
                      label=None if phase in labelled else phase, marker="." if len(points) < 30 else None)
            labelled.add(phase)
        axes.set_title(metric)
        axes.set_xlabel("epoch")
        axes.legend()
        return svg(figure)


def bars(title: str, names: Sequence[str], values: Sequence[float], highlight: int | None = None,
         xlabel: str = "") -> str:
    """Horizontal bars with their values written beside them; highlight: the bar in the
    train colour (this model), the rest in grey."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=(WIDE[0], max(1.4, 0.32 * len(names) + 0.7)))
        colours = [TRAIN_COLOUR if i == highlight else "#9aa5b1" for i in range(len(names))]
        drawn = axes.barh(range(len(names)), values, color=colours)
        axes.bar_label(drawn, labels=[f"{v:.4g}" for v in values], padding=3)
        axes.set_yticks(range(len(names)), [_cut(n, 40) for n in names])
        axes.invert_yaxis()
        axes.set_title(title)
        axes.set_xlabel(xlabel)
        axes.margins(x=0.15)
        return svg(figure)


def paired_bars(title: str, names: Sequence[str], pair: tuple[str, str],
                values: tuple[Sequence[float | None], Sequence[float | None]]) -> str:
    """Two models' values side by side per name (a missing value draws no bar)."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=(WIDE[0], max(1.6, 0.5 * len(names) + 0.8)))
        for number, (label, series, colour) in enumerate(zip(pair, values, (EVAL_COLOUR, TRAIN_COLOUR))):
            positions = [i + (number - 0.5) * 0.4 for i in range(len(names))]
            drawn = axes.barh(positions, [v if v is not None else 0.0 for v in series], height=0.4,
                              color=colour, label=label)
            axes.bar_label(drawn, labels=["" if v is None else f"{v:.4g}" for v in series], padding=3)
        axes.set_yticks(range(len(names)), [_cut(n, 40) for n in names])
        axes.invert_yaxis()
        axes.set_title(title)
        axes.margins(x=0.15)
        # Beside the bars, never over them.
        axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return svg(figure)


def confusion_matrix(classes: Sequence[str], counts: Sequence[Sequence[int]]) -> str:
    """Rows are true labels, columns predictions, each cell its count; shaded by the share of
    its row, so a rare class's mistakes show as plainly as a common one's."""
    with matplotlib.rc_context(_STYLE):
        side = max(2.6, 0.55 * len(classes) + 1.4)
        figure, axes = pyplot.subplots(figsize=(side + 0.6, side))
        shares = [[n / max(sum(row), 1) for n in row] for row in counts]
        axes.imshow(shares, cmap="Blues", vmin=0, vmax=1)
        for i, row in enumerate(counts):
            for j, n in enumerate(row):
                axes.text(j, i, str(n), ha="center", va="center", color="white" if shares[i][j] > 0.6 else "black")
        labels = [_cut(c, 18) for c in classes]
        axes.set_xticks(range(len(classes)), labels, rotation=30, ha="right")
        axes.set_yticks(range(len(classes)), labels)
        axes.set_xlabel("predicted")
        axes.set_ylabel("true label")
        axes.spines[:].set_visible(False)
        return svg(figure)


def latencies(rows: Sequence[tuple[str, float, float]]) -> str:
    """The serving check's latencies: p50 and p99 per batch size, in milliseconds."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=(WIDE[0] * 0.7, max(1.4, 0.5 * len(rows) + 0.7)))
        positions = range(len(rows))
        p50 = axes.barh([p - 0.2 for p in positions], [r[1] for r in rows], height=0.4, color=TRAIN_COLOUR,
                        label="p50")
        p99 = axes.barh([p + 0.2 for p in positions], [r[2] for r in rows], height=0.4, color=EVAL_COLOUR,
                        label="p99")
        for drawn in (p50, p99):
            axes.bar_label(drawn, fmt="%.2f ms", padding=3)
        axes.set_yticks(list(positions), [r[0] for r in rows])
        axes.invert_yaxis()
        axes.set_xlabel("milliseconds")
        axes.margins(x=0.2)
        axes.legend()
        return svg(figure)


def roc_curves(curves: dict[str, dict[str, list[float]]]) -> str:
    """ROC curves (binary: of the positive class; multiclass: each class against the rest),
    the chance diagonal beside them; each named with its area."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=SQUARE)
        axes.plot([0, 1], [0, 1], color="#9aa5b1", linestyle="--", linewidth=0.8, label="chance")
        for name, curve in curves.items():
            axes.plot(curve["fpr"], curve["tpr"], linewidth=1.3, label=f"{_cut(name, 18)} (AUC {curve['auc']:.3f})")
        axes.set_xlabel("false positive rate")
        axes.set_ylabel("true positive rate")
        axes.set_title("ROC")
        axes.legend(loc="lower right")
        return svg(figure)


def pr_curves(curves: dict[str, dict[str, Any]]) -> str:
    """Precision against recall, each class's positive share as its no-skill line."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=SQUARE)
        for name, curve in curves.items():
            drawn = axes.plot(curve["recall"], curve["precision"], linewidth=1.3,
                              label=f"{_cut(name, 18)} (AP {curve['average_precision']:.3f})")
            axes.axhline(curve["positive_share"], color=drawn[0].get_color(), linestyle=":", linewidth=0.8)
        axes.set_xlabel("recall")
        axes.set_ylabel("precision")
        axes.set_ylim(0, 1.02)
        axes.set_title("precision and recall")
        axes.legend(loc="lower left")
        return svg(figure)


def calibration(bins: Sequence[dict[str, float]], what: str) -> str:
    """Predicted probability against how often it came true, per bin, sized by rows; the
    diagonal is a perfectly calibrated model."""
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=SQUARE)
        axes.plot([0, 1], [0, 1], color="#9aa5b1", linestyle="--", linewidth=0.8, label="calibrated")
        rows = max(b["rows"] for b in bins) if bins else 1
        axes.plot([b["predicted"] for b in bins], [b["observed"] for b in bins], color=TRAIN_COLOUR, linewidth=1.0)
        axes.scatter([b["predicted"] for b in bins], [b["observed"] for b in bins],
                     s=[12 + 120 * b["rows"] / rows for b in bins], color=TRAIN_COLOUR, label="this model", zorder=3)
        axes.set_xlabel(f"predicted probability ({what})")
        axes.set_ylabel("observed frequency")
        axes.set_xlim(0, 1.02)
        axes.set_ylim(0, 1.02)
        axes.set_title("calibration")
        axes.legend(loc="upper left")
        return svg(figure)


def residual_histogram(edges: Sequence[float], counts: Sequence[int]) -> str:
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=(SQUARE[0] * 1.2, SQUARE[1]))
        axes.stairs(counts, edges, fill=True, color=TRAIN_COLOUR, alpha=0.7)
        axes.axvline(0, color="#1d2329", linewidth=0.8)
        axes.set_xlabel("prediction - label")
        axes.set_ylabel("rows")
        axes.set_title("residuals")
        return svg(figure)


def predicted_against_actual(labels: Sequence[float], predictions: Sequence[float]) -> str:
    with matplotlib.rc_context(_STYLE):
        figure, axes = pyplot.subplots(figsize=SQUARE)
        low, high = min(*labels, *predictions), max(*labels, *predictions)
        axes.plot([low, high], [low, high], color="#9aa5b1", linestyle="--", linewidth=0.8, label="exact")
        axes.scatter(labels, predictions, s=8, color=TRAIN_COLOUR, alpha=0.6, label="eval rows")
        axes.set_xlabel("label")
        axes.set_ylabel("prediction")
        axes.set_title("prediction against label")
        axes.legend(loc="upper left")
        return svg(figure)


def _cut(text: str, width: int = 24) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
