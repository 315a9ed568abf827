"""ROS 2 tests: a real bt_exec node process driven by a real rclpy client.

The whole folder skips, with the reason, where rclpy or bt_exec_interfaces
cannot be imported (set them up with `bash scripts/setup-ros.sh && . build/ros/env.sh`);
with BT_EXEC_REQUIRE_ROS=1 (CI) it fails instead. Each test session uses a
ROS_DOMAIN_ID of its own (random 1..100, or BT_EXEC_TEST_DOMAIN_ID; pytest-xdist
workers two apart from there), so concurrent sessions on one machine do not hear each other.
"""
import importlib
import os
import random

import pytest
from folder_requires import modules_without


def _missing() -> str | None:
    for module in ("rclpy", "std_msgs.msg", "bt_exec_interfaces.srv", "bt_exec_interfaces.action"):
        try:
            importlib.import_module(module)
        except Exception as exc:  # ImportError, or a ROS install that fails as it loads
            return (f"{module} cannot be imported ({type(exc).__name__}: {exc}); set up ROS 2 with "
                    "`bash scripts/setup-ros.sh && . build/ros/env.sh`, then run `pytest tests/ros`")
    return None


def session_domain_id() -> int:
    """This test process's ROS_DOMAIN_ID: a base (BT_EXEC_TEST_DOMAIN_ID, or random in 1..100, the same for every
    pytest-xdist worker of one run) plus two per worker, so that workers never hear each other; the id after it is
    kept for tests that need a domain of their own (test_action_backend.py)."""
    base = os.environ.get("BT_EXEC_TEST_DOMAIN_ID")
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if base is None:
        base = int(run, 16) % 100 + 1 if run else random.SystemRandom().randint(1, 100)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return int(base) + 2 * int(worker.removeprefix("gw"))


MISSING = _missing()
if MISSING is not None:
    pytest_pycollect_makemodule = modules_without(MISSING, "BT_EXEC_REQUIRE_ROS")

else:
    # Before any rclpy.init, here and in every node process the tests start (they inherit the environment).
    os.environ["ROS_DOMAIN_ID"] = str(session_domain_id())

    import rosutil

    @pytest.fixture(scope="session")
    def ros():
        helper = rosutil.RosHelper()
        yield helper
        helper.close()

    @pytest.fixture(scope="session")
    def sim_script(tmp_path_factory):
        return rosutil.write_sim_script(tmp_path_factory.mktemp("sim") / "script.json")

    @pytest.fixture
    def start_node(ros, tmp_path):
        """start_node(**params) -> a started, ready NodeProcess (stopped with SIGTERM after the test)."""
        started = []

        def start(ready=True, **params):
            process = rosutil.NodeProcess(tmp_path / f"node{len(started)}.log", params)
            started.append(process)
            if ready:
                process.wait_ready(ros)
            return process

        yield start
        for process in started:
            process.stop()
