"""The node as a process: SIGTERM/SIGINT end it promptly and cleanly, every time; bad start-up options exit 2."""
import signal
import time

import pytest
import rosutil
from rosutil import do, plan, seq


@pytest.mark.parametrize("signum, busy, attempt", [(signal.SIGTERM, False, 1), (signal.SIGTERM, True, 1),
                                                   (signal.SIGTERM, True, 2), (signal.SIGINT, True, 1)])
def test_a_signal_stops_the_node_within_seconds(ros, start_node, sim_script, signum, busy, attempt):
    node = start_node(sim_script=str(sim_script))
    if busy:  # a plan in flight and a cancel waiting on it
        plan_id = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow")))).plan_id
        assert plan_id
    began = time.monotonic()
    code = node.stop(signum, timeout=10)
    took = time.monotonic() - began
    log = node.log()
    assert code == 0, f"exit code {code}:\n{log}"
    assert took < 5, f"took {took:.1f} s to stop:\n{log}"
    assert "Traceback" not in log and "terminate called" not in log, log


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
