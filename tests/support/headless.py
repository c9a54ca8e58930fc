"""Debian's headless Chromium driven by Selenium, as the browser tests use it: where it is,
one driver with Chrome's network and console logs on, and the screenshots docs/ shows."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
)
try:
    import selenium  # noqa: F401

    SELENIUM = True
except ImportError:
    SELENIUM = False

MISSING = (
    "the browser test needs Chromium and its driver (apt-get install chromium "
    "chromium-driver) and selenium (the dev extra)"
)
"""Why a browser test skips when :data:`AVAILABLE` is False."""
AVAILABLE = bool(CHROMIUM and DRIVER and SELENIUM)
SHOTS = os.environ.get("SHOPBENCH_SCREENSHOTS")
"""Where screenshots go (``SHOPBENCH_SCREENSHOTS=docs/img``); None: none are taken."""


@contextmanager
def chromium() -> Iterator[object]:
    """One headless Chromium at 1400×1000 with its performance and browser logs kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM  # type: ignore[assignment]
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver, name: str) -> None:  # type: ignore[no-untyped-def]
    """Save the whole page as ``SHOTS/name`` when screenshots are asked for."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(max(height + 40, 700), 2400))
        driver.save_screenshot(str(Path(SHOTS) / name))
        driver.set_window_size(1400, 1000)


def attack_effects(driver, selector: str, extra: str = "") -> list[object]:  # type: ignore[no-untyped-def]
    """Check that the page opened no alert and set no ``window.__pwned`` (what the hostile
    payloads try), and return ``[elements matching selector, extra]`` for the caller to
    check (`extra`: a JavaScript expression, e.g. the scripts' sources)."""
    import pytest
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018
    assert driver.execute_script("return window.__pwned === undefined")
    return list(
        driver.execute_script(
            f"return [document.querySelectorAll({selector!r}).length, {extra or 'null'}]"
        )
    )
