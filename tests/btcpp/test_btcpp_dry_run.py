"""The dry run on BT XML: every leaf's failure explored as for RTDL, what one call writes read by the next on every
path, and a loop that never ends cut at the tick limit, reported as such."""
from __future__ import annotations

import pathlib

from command_line import bt_exec_cli

import bt_exec

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "btcpp"


def test_each_leaf_s_failure_is_a_path_and_outputs_flow_on_every_path():
    answer = bt_exec.dry_run((EXAMPLES / "fetch_cup.xml").read_text())
    ends = {(path["chose"] or {}).get("op_id"): path["outcome"] for path in answer["paths"]}
    # every op its usual outcome; the visible check failing (the look-around branch finds the cup); the
    # look-around's calls are never reached; the pick, the move and the report each fail the plan
    assert ends == {None: "succeeded", "3": "succeeded", "5": "succeeded", "6": "succeeded", "8": "failed",
                    "10": "failed", "11": "failed", "12": "failed"}
    assert answer["not_run"] == 0


def test_a_loop_without_end_ends_at_the_tick_limit():
    text = ('<root BTCPP_format="4"><BehaviorTree><Sequence><Check/><KeepRunningUntilFailure><Patrol/>'
            '</KeepRunningUntilFailure></Sequence></BehaviorTree></root>')
    answer = bt_exec.dry_run(text, max_ticks=200)
    assert [(path["chose"], path["outcome"]) for path in answer["paths"]] == [
        (None, "tick_limit"),
        ({"op_id": "2", "outcome": "failure"}, "failed"),
        ({"op_id": "4", "outcome": "failure"}, "failed"),  # the patrol failing ends the loop, which then fails
    ]


def test_bt_exec_run_dry_run_says_which_path_hit_the_limit(tmp_path):
    plan = tmp_path / "loop.xml"
    plan.write_text('<root BTCPP_format="4"><BehaviorTree><KeepRunningUntilFailure><AlwaysSuccess/>'
                    '</KeepRunningUntilFailure></BehaviorTree></root>')
    done = bt_exec_cli("run", plan, "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "path 1: every op its usual outcome -> tick_limit: still running at the tick limit" in done.stdout
