"""Reads a report page back as a person scanning it would: its sections, each table under
its heading as rows of cell texts, and the text drawn in its charts."""

from __future__ import annotations

import dataclasses
import re
from html.parser import HTMLParser
from pathlib import Path


@dataclasses.dataclass
class Table:
    heading: str  # the nearest h2 or h3 above it
    section: str  # the id of the section holding it
    rows: list[list[str]]

    def column(self, name: str) -> list[str]:
        index = self.rows[0].index(name)
        return [row[index] for row in self.rows[1:]]

    def as_dict(self) -> dict[str, str]:
        """A two-column table without a header as {first cell: second cell}."""
        return {row[0]: row[1] for row in self.rows if len(row) == 2}


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[str] = []
        self.headings: list[str] = []
        self.tables: list[Table] = []
        self.svg_text: list[str] = []
        self._heading: str | None = None
        self._section = ""
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._svg_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "section":
            self._section = dict(attrs).get("id") or ""
            self.sections.append(self._section)
        elif tag in ("h2", "h3"):
            self._heading = ""
        elif tag == "table":
            self.tables.append(Table(self.headings[-1] if self.headings else "", self._section, []))
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "svg":
            self._svg_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("h2", "h3") and self._heading is not None:
            self.headings.append(self._heading.strip())
            self._heading = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.tables[-1].rows.append(self._row)
            self._row = None
        elif tag == "svg":
            self._svg_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._heading is not None:
            self._heading += data
        if self._cell is not None:
            self._cell.append(data)
        if self._svg_depth and data.strip():
            self.svg_text.append(data.strip())


@dataclasses.dataclass
class Page:
    html: str
    sections: list[str]
    headings: list[str]
    tables: list[Table]
    svg_text: list[str]

    def table(self, heading: str, section: str | None = None) -> Table:
        found = [t for t in self.tables if t.heading == heading and section in (None, t.section)]
        assert found, f"no table under {heading!r}; headings: {self.headings}"
        return found[0]

    def section_html(self, section: str) -> str:
        match = re.search(rf'<section id="{section}">(.*?)</section>', self.html, re.DOTALL)
        assert match, f"no section {section!r}"
        return match.group(1)


def read_page(path: Path) -> Page:
    text = path.read_text(encoding="utf-8")
    reader = _Reader()
    reader.feed(text)
    return Page(text, reader.sections, reader.headings, reader.tables, reader.svg_text)
