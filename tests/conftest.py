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

    def make(script=None, **options):
        backend = bt_exec.SimBackend(script)
        executor = bt_exec.Executor(backend=backend, **options)
        executor.subscribe(events)
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.close(wait_ms=2000)
