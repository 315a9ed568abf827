"""The stand-in providers as a process of their own, and a resolver over a plain table (imported by name)."""
from __future__ import annotations

import json
import pathlib
import selectors
import subprocess
import sys
import tempfile
import threading
import urllib.request

from bt_exec.robonix.dispatch import Endpoint, ResolveError

PROVIDERS = pathlib.Path(__file__).with_name("providers.py")
SYNC, ASYNC, GARBAGE = "standin_sync", "standin_async", "standin_garbage"  # the provider ids the tests use
RUN = "robonix/test/async/run"  # the asynchronous provider's one asynchronous contract


class ProviderProcess:
    """``python tests/robonix/providers.py`` on a free port: started, waited for by its READY line, stopped."""

    def __init__(self, ready_timeout_s: float = 60.0):
        self.log = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads while the tests run would fill and stall it
        self.process = subprocess.Popen([sys.executable, str(PROVIDERS), "--port", "0"], stdout=subprocess.PIPE,
                                        stderr=self.log, text=True)
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        ready = selector.select(ready_timeout_s)
        selector.close()
        line = self.process.stdout.readline() if ready else ""
        if not line.startswith("READY "):
            self.stop()
            self.log.seek(0)
            raise RuntimeError(f"the stand-in providers did not start: {line!r} {self.log.read()}")
        self.port = int(line.split()[1])
        self.base = f"127.0.0.1:{self.port}"

    def state(self) -> dict:
        """What the asynchronous provider saw (its ``/state``)."""
        with urllib.request.urlopen(f"http://{self.base}/state", timeout=10) as answer:
            return json.load(answer)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.log.close()


class TableResolver:
    """A resolver over a table ``provider_id -> (endpoint url, contracts that are asynchronous)``; it counts
    what it resolved and released, so a test can see every endpoint go back."""

    def __init__(self, table: dict[str, tuple[str, frozenset]]):
        self.table = table
        self._lock = threading.Lock()
        self.resolved = 0
        self.released: list[Endpoint] = []

    def resolve(self, provider_id: str, contract_id: str) -> Endpoint:
        if provider_id not in self.table:
            raise ResolveError(f"ConnectCapability failed: provider {provider_id!r} is not registered")
        url, asynchronous = self.table[provider_id]
        with self._lock:
            self.resolved += 1
            return Endpoint(url, contract_id in asynchronous, channel=f"channel-{self.resolved}")

    def release(self, endpoint: Endpoint) -> None:
        with self._lock:
            self.released.append(endpoint)


def standin_resolver(providers: ProviderProcess) -> TableResolver:
    """The three stand-ins as Atlas would declare them: the sync one by ``host:port/sync`` (``/mcp`` appended by
    the backend), the others by their full ``.../mcp`` URL."""
    return TableResolver({SYNC: (f"{providers.base}/sync", frozenset()),
                          ASYNC: (f"http://{providers.base}/async/mcp", frozenset({RUN})),
                          GARBAGE: (f"http://{providers.base}/garbage/mcp", frozenset()),
                          "down": ("127.0.0.1:9", frozenset())})
