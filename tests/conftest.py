"""Fixtures shared by the tests: executors on the sim backend that record their events."""
import signal

import pytest
from rtdl_plans import EventLog

import bt_exec

# A run started in the background by a shell without job control inherits SIGINT ignored, and so would every
# process the tests spawn and then interrupt (Ctrl-C tests would wait out their timeouts). With a handler here,
# spawned processes start with SIGINT at its default again.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def events():
    return EventLog()


@pytest.fixture
def serve_web(make_executor):
    """``start(script, token=None, api_options=None, **server_options) -> (executor, server)``: an executor
    ticking in its own thread behind a WebServer on a free loopback port, closed after the test."""
    from bt_exec.control import ControlApi
    from bt_exec.web.server import WebServer

    made = []

    def start(script, token=None, api_options=None, **server_options):
        executor = make_executor(script)
        executor.start()
        server = WebServer(ControlApi(executor, **(api_options or {})), port=0, token=token, **server_options)
        server.start()
        made.append(server)
        return executor, server

    yield start
    for server in made:
        server.close()


@pytest.fixture
def make_executor(events):
    made = []

    def make(script=None, backend=None, **options):
        if backend is None and "scene" not in options:  # with a scene the executor simulates its world itself
            backend = bt_exec.SimBackend(script)
        executor = bt_exec.Executor(backend, **options)
        executor.subscribe(events)
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.close(wait_ms=2000)
