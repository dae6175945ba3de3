"""Headless Debian Chromium through selenium and the system chromedriver (no browser
or driver is downloaded at run time). ``browser()`` skips the test when Chromium is
not installed, unless GLYPHPACK_REQUIRE_BROWSER is set (CI sets it: there a missing
browser is a failure, not a skip)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@contextmanager
def browser(width: int = 1400, height: int = 900) -> Iterator[Any]:
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("GLYPHPACK_REQUIRE_BROWSER"):
            pytest.fail("Chromium and chromedriver are required here (apt-get install chromium chromium-driver)")
        pytest.skip("needs Debian's chromium and chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="glyphpack-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def page_errors(driver: Any) -> list[str]:
    """The console's errors since the last call (a script error, a blocked load)."""
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
