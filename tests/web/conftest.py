"""Browser tests of the operator console: headless Chromium driven by Selenium against a live WebServer.

Skipped when Chromium, chromedriver or selenium are missing (tests/headless_chromium.py).
Screenshots go to test-artifacts/ at the repository root; a failing test
leaves one there too, named after it.
"""
from __future__ import annotations

import json

import pytest
from console_page import Console, slow_script
from headless_chromium import start_chromium

import bt_exec
from bt_exec.control import ControlApi
from bt_exec.web.server import WebServer

try:
    from selenium.common.exceptions import WebDriverException
except ImportError:  # the driver fixture skips the tests
    WebDriverException = OSError


@pytest.fixture(scope="session")
def driver():
    """One headless Chromium for the whole session; each test loads its own server's page."""
    browser = start_chromium()
    yield browser
    browser.quit()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture
def console_factory(driver, tmp_path, request):
    """console_factory(script=dict, token=None, backend=None, stream_capacity=N, host=ADDRESS, start=True,
    **executor options) -> a Console.

    The executor runs on ``backend``, else on a SimBackend reading ``script`` (default: every op 1.5 s);
    ``stream_capacity``: events one page may fall behind before the server drops some; ``start=False``: the
    executor ticks only once the test calls ``console.executor.start()`` (arm pause points on a plan first, and
    it waits there for the test however slow the machine)."""
    made = []

    def make(script=None, token=None, backend=None, stream_capacity=10_000, host="127.0.0.1", start=True,
             **options):
        if backend is None:
            script_path = tmp_path / f"sim-script-{len(made)}.json"
            script_path.write_text(json.dumps(script if script is not None else slow_script()))
            backend = bt_exec.SimBackend(script_path)
        executor = bt_exec.Executor(backend=backend, **options)
        if start:
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
