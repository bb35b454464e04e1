"""The run report opened in a real headless Chromium (tests/browser.py): it loads offline
without a console error, fetches nothing, and its charts have drawn."""

from __future__ import annotations

import io

import pytest

from tests.browser import console_errors, full_page_screenshot, headless_chromium
from tests.e2e.test_report import report_of

pytestmark = pytest.mark.e2e

# The page's train colour (pipeline/report/charts.py TRAIN_COLOUR), as the screenshot has it.
TRAIN_RGB = (0x1F, 0x6F, 0xB4)


def test_the_report_draws_in_chromium_offline_without_errors(first_run, tmp_path):
    from PIL import Image

    page = report_of(first_run.stdout)
    with headless_chromium() as browser:
        browser.get(page.resolve().as_uri())
        assert browser.title.startswith("turbotfx run ")
        assert console_errors(browser) == []
        # Nothing but the page itself was loaded: no script, stylesheet, font or image.
        assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0
        boxes = browser.execute_script(
            "return Array.from(document.querySelectorAll('svg')).map(svg => {"
            "  const box = svg.getBoundingClientRect();"
            "  return {w: box.width, h: box.height, marks: svg.querySelectorAll('path, rect, polygon, ellipse').length,"
            "          section: svg.closest('section').id};"
            "})")
        # A chart per feature (7 columns), the learning curves, the yardsticks, slices, the
        # confusion matrix, the latencies and the lineage graph: each a box with marks in it.
        drawn = [b for b in boxes if b["w"] > 100 and b["h"] > 80 and b["marks"] >= 5]
        assert len(drawn) == len(boxes) >= 13, boxes
        assert {b["section"] for b in boxes} == {"summary", "data", "training", "evaluation", "importance", "serving",
                                                 "lineage"}
        png = full_page_screenshot(browser, tmp_path / "report.png")
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.width == 1280 and image.height > 3000
    colours = image.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 200  # drawn, not a blank or an error page
    # The bars and histograms are filled in the train colour somewhere on the page.
    assert sum(count for count, rgb in colours if all(abs(a - b) < 8 for a, b in zip(rgb, TRAIN_RGB))) > 2000
