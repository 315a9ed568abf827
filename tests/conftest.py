"""Fixtures shared by the tests: executors on the sim backend that record their events."""
import pytest
from rtdl_plans import EventLog

import bt_exec


@pytest.fixture
def events():
    return EventLog()


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
