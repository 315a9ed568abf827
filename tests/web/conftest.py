"""Browser tests of the operator console: headless Chromium driven by Selenium against a live WebServer.

Skipped when Chromium, chromedriver or selenium are missing, unless
BT_EXEC_REQUIRE_BROWSER=1 (CI that must run them): then missing pieces fail.
Screenshots go to test-artifacts/ at the repository root; a failing test
leaves one there too, named after it.
"""
from __future__ import annotations

import json
import os
import shutil

import pytest
from console_page import Console, slow_script

import bt_exec
from bt_exec.web import ControlApi, WebServer

try:
    from selenium.common.exceptions import WebDriverException
except ImportError:  # the driver fixture skips the tests
    WebDriverException = OSError

CHROMIUM = os.environ.get("BT_EXEC_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("BT_EXEC_CHROMEDRIVER", "/usr/bin/chromedriver")


def _unavailable(reason: str):
    if os.environ.get("BT_EXEC_REQUIRE_BROWSER") == "1":
        pytest.fail(f"browser tests required (BT_EXEC_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def driver():
    """One headless Chromium for the whole session; each test loads its own server's page."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed (pip install selenium)")
    for name, path in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)) and not shutil.which(path):
            _unavailable(f"{name} not found at {path} (apt-get install chromium chromium-driver)")
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
        _unavailable(f"headless Chromium did not start: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    browser.set_page_load_timeout(30)
    yield browser
    browser.quit()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def console_factory(driver, tmp_path, request):
    """console_factory(script=dict, token=None, backend=None, stream_capacity=N, host=ADDRESS, **executor options)
    -> a Console.

    The executor runs on ``backend``, else on a SimBackend reading ``script`` (default: every op 1.5 s);
    ``stream_capacity``: events one page may fall behind before the server drops some."""
    made = []

    def make(script=None, token=None, backend=None, stream_capacity=10_000, host="127.0.0.1", **options):
        if backend is None:
            script_path = tmp_path / f"sim-script-{len(made)}.json"
            script_path.write_text(json.dumps(script if script is not None else slow_script()))
            backend = bt_exec.SimBackend(script_path)
        executor = bt_exec.Executor(backend=backend, **options)
        executor.start()
        api = ControlApi(executor, stream_capacity=stream_capacity)
        server = WebServer(api, host=host, port=0, token=token)
        server.start()
        console = Console(executor, server, driver)
        console.url = f"http://127.0.0.1:{server.port}/"  # also when bound to every address
        made.append(console)
        _drain_logs(driver)  # each test starts with an empty browser log
        return console

    yield make
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    errors = []
    for console in made:
        if failed:
            try:
                console.screenshot(f"failed-{request.node.name}.png")
            except (WebDriverException, OSError) as exc:
                print(f"no screenshot of the failure: {exc}")
        errors += console.page_errors()
    try:
        driver.get("about:blank")  # closes the page's event stream before the server goes
    except WebDriverException as exc:
        print(f"could not leave the page: {exc}")
    for console in made:
        console.server.close()
        console.executor.close(wait_ms=2000)
    if errors and not failed:
        pytest.fail("the page logged errors:\n" + "\n".join(errors))


def _drain_logs(driver) -> None:
    try:
        driver.get_log("browser")
    except WebDriverException:
        return  # a driver without log access: page_errors finds nothing either


@pytest.fixture
def console(console_factory):
    return console_factory()
