"""Headless Chromium under Selenium, for the console's browser tests (tests/web, and the fleet's in tests/ros).

Skipped when Chromium, chromedriver or selenium are missing, unless
BT_EXEC_REQUIRE_BROWSER=1 (CI that must run them): then missing pieces fail.
"""
from __future__ import annotations

import os
import shutil

import pytest

CHROMIUM = os.environ.get("BT_EXEC_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("BT_EXEC_CHROMEDRIVER", "/usr/bin/chromedriver")


def unavailable(reason: str):
    if os.environ.get("BT_EXEC_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests required (BT_EXEC_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


def start_chromium():
    """A headless Chromium driven by Selenium (skips or fails, as above, where it cannot start)."""
    try:
        from selenium import webdriver
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        unavailable("selenium is not installed (pip install selenium)")
    for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) and not shutil.which(path):
            unavailable(f"{name} not found at {path} (apt-get install chromium chromium-driver)")
    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                "--disable-dev-shm-usage", "--disable-extensions", "--no-first-run", "--hide-scrollbars",
                "--force-device-scale-factor=1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        # An explicit chromedriver path: Selenium Manager never runs, nothing is downloaded.
        browser = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    except (WebDriverException, OSError) as exc:  # a broken install: same policy as a missing one
        unavailable(f"headless Chromium did not start: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    browser.set_page_load_timeout(30)
    return browser
