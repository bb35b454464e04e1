"""The HTML both report pages are made of: the document with its inline stylesheet, tables,
rows of charts, and how values are written. No script, nothing fetched."""

from __future__ import annotations

import html
import json
import math
from typing import Any, Iterable, Sequence

STYLESHEET = """
body { font: 14px/1.45 sans-serif; color: #1d2329; margin: 0 auto; max-width: 1100px; padding: 0 24px 48px; }
h1 { font-size: 22px; margin: 24px 0 4px; } h2 { font-size: 18px; border-bottom: 1px solid #d8dee4;
padding-bottom: 4px; margin-top: 36px; } h3 { font-size: 15px; margin: 20px 0 6px; }
nav a { margin-right: 14px; } .muted { color: #5b6672; }
table { border-collapse: collapse; margin: 6px 0 12px; display: block; max-width: 100%; overflow-x: auto; } td, th { padding: 3px 10px; text-align: left;
border-bottom: 1px solid #eef1f4; vertical-align: top; } th { background: #f5f7f9; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(200px, 1fr)); gap: 10px; margin: 14px 0; }
.fact { border: 1px solid #d8dee4; border-radius: 6px; padding: 8px 12px; }
.fact b { display: block; font-size: 18px; } .good { color: #1a7f37; } .bad { color: #cf222e; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; } figure.chart { margin: 0; } .chart svg { max-width: 100%; height: auto; }
code, pre { font-family: monospace; font-size: 12px; } pre { background: #f5f7f9; padding: 8px; overflow-x: auto; }
"""


# In every page's head: how `turbotfx report --output` knows a file it may replace.
GENERATOR_MARK = '<meta name="generator" content="turbotfx report">'


def document(title: str, body: Sequence[str]) -> str:
    """The whole page around its body's parts."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">" + GENERATOR_MARK
            + f"<title>{escaped(title)}</title><style>{STYLESHEET}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def section(anchor: str, heading: str, content: str) -> str:
    return f'<section id="{anchor}"><h2>{escaped(heading)}</h2>\n{content}\n</section>'


def table(header: Sequence[str], rows: Iterable[Sequence[Any]], numeric: Sequence[int] = ()) -> str:
    head = "" if not any(header) else "<tr>" + "".join(f"<th>{escaped(h)}</th>" for h in header) + "</tr>"
    body = "".join("<tr>" + "".join(f'<td class="num">{escaped(c)}</td>' if i in numeric else f"<td>{escaped(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def chart_row(svgs: Sequence[str]) -> str:
    return '<div class="charts">' + "".join(f'<figure class="chart">{s}</figure>' for s in svgs) + "</div>"


def number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}" if math.isfinite(value) else "n/a"
    return str(value)


def plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def escaped(value: Any) -> str:
    return html.escape(str(value))
