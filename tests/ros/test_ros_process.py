"""The node as a process: SIGTERM/SIGINT end it cleanly, every time; bad start-up options exit 2."""
import signal
import threading

import pytest
import rclpy
import rosutil
from rclpy.executors import SingleThreadedExecutor
from rosutil import do, plan, seq

from bt_exec.ros import process


@pytest.mark.parametrize("signum, busy, attempt", [(signal.SIGTERM, False, 1), (signal.SIGTERM, True, 1),
                                                   (signal.SIGTERM, True, 2), (signal.SIGINT, True, 1)])
def test_a_signal_stops_the_node_cleanly(ros, start_node, sim_script, signum, busy, attempt):
    node = start_node(sim_script=str(sim_script))
    if busy:  # a plan in flight and a cancel waiting on it
        plan_id = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow")))).plan_id
        assert plan_id
    code = node.stop(signum, timeout=10)  # None: it had to be killed
    log = node.log()
    assert code == 0, f"exit code {code}:\n{log}"
    assert "Traceback" not in log and "terminate called" not in log, log


@pytest.mark.parametrize("attempt", range(20))
def test_release_ends_the_spin_thread_before_it_returns_even_with_nothing_to_wake_its_wait(attempt):
    """The process exits right after its clean stop: by the time release() returns, nothing spins any more,
    although the executor waits on no timer and no message (rclpy's shutdown alone could leave it waiting)."""
    rclpy.init()  # the default context: release() shuts it down, as in a node process
    node = rclpy.create_node(f"release_{attempt}", start_parameter_services=False)
    ros_executor = SingleThreadedExecutor()
    ros_executor.add_node(node)
    spin_thread = process.SpinThread(ros_executor, "test-spin")
    spin_thread.start()
    closed = threading.Event()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        process.release(node, closed.set, ros_executor, spin_thread)
    finally:  # release() leaves the process ignoring stop signals, as it is about to exit: not pytest's
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    assert closed.is_set()
    assert not spin_thread.is_alive()
    assert not rclpy.ok()


@pytest.mark.parametrize("params, message", [
    ({"backend": "nope"}, "backend must be one of sim, ros"),
    ({"tick_rate_hz": "50"}, "tick_rate_hz must be a floating point number"),
    ({"tick_rate_hz": "-1.0"}, "tick_rate_hz must be a positive number"),
    ({"max_ops": "0"}, "max_ops must be an integer >= 1"),
    ({"sim_script": "/no/such/script.json"}, "cannot read sim script"),
    ({"scene_file": "/no/such/scene.json"}, "cannot read scene"),
    ({"skill_catalog": "no_such_catalog"}, "no skill catalog named"),
])
def test_bad_parameters_exit_2_with_a_message(start_node, params, message):
    node = start_node(ready=False, **params)
    code = node.process.wait(30)
    log = node.log()
    assert code == 2, log
    assert message in log and "Traceback" not in log, log


def test_stray_arguments_exit_2(tmp_path):
    result = rosutil.run_cli("serve", "--ros-args", "-p", "backend:=sim", "--", "stray")
    assert result.returncode == 2 and "unexpected arguments" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
