"""The console page under test: a Console (executor + server + browser) and the helpers the tests share.

A module of its own (not conftest) so test files can import it by a name no other test folder uses.
"""
from __future__ import annotations

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"
WAIT_S = 15.0


def slow_script(duration_s=1.5, **ops):
    """A sim script: every capability succeeds after ``duration_s``; ``ops`` overrides entries by op id."""
    script = {"default": {"outcome": "success", "duration_s": duration_s}}
    if ops:
        script["ops"] = ops
    return script


class Console:
    """An executor on a scripted sim backend, its web server, and helpers to drive the page."""

    def __init__(self, executor, server, driver, url=None):
        self.executor = executor
        self.server = server  # None for a page of another process's app (``url``)
        self.driver = driver
        self.url = url or server.url

    def submit(self, graph) -> str:
        answer = self.executor.submit(graph)
        assert answer["accepted"], answer
        return answer["plan_id"]

    def open(self):
        self.driver.get(self.url)
        self.wait_for(lambda d: d.execute_script("return document.readyState") == "complete")
        return self

    def wait_for(self, condition, timeout=WAIT_S, message=""):
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait
        # The page redraws lists and boxes as events come: an element found may be replaced before it is read.
        return WebDriverWait(self.driver, timeout, poll_frequency=0.05,
                             ignored_exceptions=(StaleElementReferenceException,)).until(condition, message)

    def css(self, selector):
        from selenium.webdriver.common.by import By
        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector):
        from selenium.webdriver.common.by import By
        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def op(self, op_id):
        return self.css(f'g.op[data-op-id="{op_id}"]')

    def wait_op_class(self, op_id, cls, timeout=WAIT_S):
        selector = f'g.op[data-op-id="{op_id}"].{cls}'
        return self.wait_for(lambda d: self.all(selector), timeout, f"op {op_id} never got class {cls}")[0]

    def wait_text(self, selector, text, timeout=WAIT_S):
        def has_text(_):
            found = self.all(selector)
            return found and text in found[0].text
        self.wait_for(has_text, timeout, f"{selector} never showed {text!r}")
        return self.css(selector)

    def screenshot(self, name) -> pathlib.Path:
        path = pathlib.Path(name)
        if not path.is_absolute():
            path = ARTIFACTS / path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(path))
        return path

    def set_plan_text(self, text: str):
        """Put text into the submit textarea as pasting would (typing it key by key is slow)."""
        area = self.css("#plan-text")
        self.driver.execute_script(
            "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'));", area, text)

    def page_errors(self) -> list[str]:
        """Script errors and Content-Security-Policy refusals the page logged."""
        from selenium.common.exceptions import WebDriverException
        try:
            entries = self.driver.get_log("browser")
        except WebDriverException:  # a driver without log access: nothing to check
            return []
        bad = []
        for entry in entries:
            message = entry.get("message", "")
            if "Content Security Policy" in message or "Uncaught" in message or "console bug" in message:
                bad.append(message)
        return bad
