"""A real headless Chromium (Debian's `chromium` and its `chromedriver`, installed by
tests/doubles/install_test_packages.sh) driven through Selenium, for pages a person looks at.
No network: the pages are local files, and Selenium is given the driver, so its manager
never looks one up."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path
from typing import Iterator

CHROMIUM, CHROMEDRIVER = "chromium", "chromedriver"
INSTALL_HINT = "run tests/doubles/install_test_packages.sh (as root, or with sudo) to install it"
WINDOW = (1280, 900)


@contextlib.contextmanager
def headless_chromium() -> Iterator:
    """A Selenium WebDriver on a fresh headless Chromium; its console log is kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = shutil.which(CHROMIUM), shutil.which(CHROMEDRIVER)
    for name, found in ((CHROMIUM, browser), (CHROMEDRIVER, driver)):
        if found is None:
            raise RuntimeError(f"{name} is not installed: {INSTALL_HINT}")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={WINDOW[0]},{WINDOW[1]}", "--no-first-run", "--disable-extensions",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield session
    finally:
        session.quit()


def console_errors(session) -> list[str]:
    """The page's console messages at error level (failed loads included)."""
    return [entry["message"] for entry in session.get_log("browser") if entry["level"] == "SEVERE"]


def full_page_screenshot(session, path: Path) -> bytes:
    """A PNG of the whole page: the window is stretched to the page's height first."""
    height = session.execute_script("return document.documentElement.scrollHeight")
    session.set_window_size(WINDOW[0], min(int(height) + 100, 16000))
    png = session.get_screenshot_as_png()
    path.write_bytes(png)
    return png
