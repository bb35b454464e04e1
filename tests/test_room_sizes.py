"""Small rooms: no product module grows past the size where it starts holding two ideas
(issue 25 drew the line; split a module by idea before it crosses it)."""

from __future__ import annotations

from tests import REPO

MAX_LINES = 450
PACKAGES = ("pipeline", "serving", "components", "trainer_module")


def test_no_product_module_is_over_the_line() -> None:
    too_big = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            lines = len(path.read_text().splitlines())
            if lines > MAX_LINES:
                too_big[str(path.relative_to(REPO))] = lines
    assert not too_big, f"over {MAX_LINES} lines, split by idea: {too_big}"
