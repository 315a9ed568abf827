"""A submitted BT XML plan's blackboard can be seeded: from Python (``Executor.submit(blackboard=...)``), over HTTP
(and so MCP and the ROS ``~/control`` service: ``submit_plan``'s ``blackboard``), from ``bt-exec run --blackboard``
and in a dry run; bad seeds are refused at ``/blackboard/<key>``, running nothing."""
from __future__ import annotations

import json
import math

import pytest
from command_line import bt_exec_cli, read_events

import bt_exec
from bt_exec.compilers.blackboard import MAX_SEED_BYTES
from bt_exec.compilers.btcpp.catalog import NodeCatalog
from bt_exec.errors import BadArgument
from bt_exec.web.client import HttpApi

# MoveTo reads {goal}, which nothing in the tree writes: set from outside, as Nav2's goal is.
PLAN = ('<root BTCPP_format="4"><BehaviorTree ID="Main"><Sequence>'
        '<MoveTo goal="{goal}" speed="{speed}"/><Say text="{words}"/></Sequence></BehaviorTree></root>')
SEEDS = {"goal": {"x": 1.5, "y": -2, "frame": "map"}, "speed": 0.5, "words": "arrived"}


def calls_of(executor: bt_exec.Executor) -> list[tuple[str, dict]]:
    return [(call.cap, call.args) for call in executor.backend.calls]


def test_seeded_entries_reach_the_calls_that_read_them(make_executor):
    executor = make_executor()
    seeds = json.loads(json.dumps(SEEDS))
    answer = executor.submit(PLAN, blackboard=seeds)
    assert answer["accepted"], answer
    seeds["goal"]["x"] = 99  # the run took a copy
    assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"
    assert calls_of(executor) == [("MoveTo", {"goal": {"x": 1.5, "y": -2, "frame": "map"}, "speed": 0.5}),
                                  ("Say", {"text": "arrived"})]


def test_without_seeds_or_a_catalog_a_key_named_first_is_taken_as_the_leafs_output(make_executor):
    executor = make_executor()
    answer = executor.submit(PLAN)
    assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"
    assert calls_of(executor) == [("MoveTo", {}), ("Say", {})]


def test_against_a_catalog_a_seed_fills_an_input_that_nothing_in_the_tree_writes(make_executor):
    catalog = NodeCatalog.from_text('<TreeNodesModel><Action ID="MoveTo"><input_port name="goal"/>'
                                    '<input_port name="speed" type="double"/></Action>'
                                    '<Action ID="Say"><input_port name="text"/></Action></TreeNodesModel>')
    executor = make_executor(node_catalog=catalog)
    unseeded = executor.submit(PLAN)
    record = executor.run_until_complete(unseeded["plan_id"], timeout=10)
    assert record["outcome"] == "failed" and "'goal'" in record["failed_op"]["error"]
    seeded = executor.submit(PLAN, blackboard=SEEDS)
    assert executor.run_until_complete(seeded["plan_id"], timeout=10)["outcome"] == "succeeded"
    assert calls_of(executor) == [("MoveTo", {"goal": SEEDS["goal"], "speed": 0.5}), ("Say", {"text": "arrived"})]


def test_a_run_id_answered_before_seeds_no_second_run(make_executor):
    executor = make_executor()
    first = executor.submit(PLAN, run_id="once", blackboard=SEEDS)
    again = executor.submit(PLAN, run_id="once", blackboard={**SEEDS, "words": "twice"})
    assert again == first
    executor.run_until_complete(first["plan_id"], timeout=10)
    assert calls_of(executor)[-1] == ("Say", {"text": "arrived"})


def test_a_seeded_key_is_written_before_any_node_so_no_read_before_write_warning(make_executor):
    # Say reads {words} before SetWords writes it: warned unless the submission seeds it.
    plan = ('<root BTCPP_format="4"><BehaviorTree ID="Main"><Sequence><Say text="{words}"/>'
            '<SetWords out="{words}"/><Say text="{words}"/></Sequence></BehaviorTree></root>')
    catalog = NodeCatalog.from_text('<TreeNodesModel><Action ID="Say"><input_port name="text"/></Action>'
                                    '<Action ID="SetWords"><output_port name="out"/></Action></TreeNodesModel>')
    executor = make_executor(node_catalog=catalog)
    unseeded = executor.submit(plan)
    assert [warning["code"] for warning in unseeded["warnings"]] == ["read_before_write"], unseeded
    seeded = executor.submit(plan, blackboard={"words": "hello"})
    assert seeded["accepted"] and not seeded.get("warnings"), seeded
    executor.run_until_complete(seeded["plan_id"], timeout=10)
    assert calls_of(executor)[-3] == ("Say", {"text": "hello"})


def test_seeds_given_with_a_control_request_are_refused_as_it_runs_no_plan(make_executor):
    executor = make_executor()
    answer = executor.submit({"op": "cancel_all"}, blackboard={"goal": 1})
    assert not answer["accepted"] and answer["verdict"] == "invalid", answer
    assert [(issue["code"], issue["path"]) for issue in answer["issues"]] == [("bad_blackboard", "/blackboard")]
    assert "cancel_all is a control request" in answer["issues"][0]["message"]


@pytest.mark.parametrize("seeds, path, words", [
    ({"": 1}, "/blackboard/", "a blank name"),
    ({"{goal}": 1}, "/blackboard/{goal}", "braces"),
    ({" goal": 1}, "/blackboard/ goal", "blanks around it"),
    ({"go\nal": 1}, "/blackboard/go\nal", "a control character"),
    ({"@goal": 1}, "/blackboard/@goal", "names it plainly: 'goal'"),
    ({"Fetch#1/target": 1}, "/blackboard/Fetch#1~1target", "a SubTree's own entry"),
    ({"goal": math.nan}, "/blackboard/goal", "not a JSON number"),
    ({"goal": {1, 2}}, "/blackboard/goal", "a set is not a JSON value"),
    ({"goal": {"pose": [1, object()]}}, "/blackboard/goal/pose/1", "not a JSON value"),
    ({"goal": "x" * 70_000}, "/blackboard/goal", "a string of 70000 characters, over the limit"),
    ({f"k{n}": "x" * 60_000 for n in range(20)}, "/blackboard", f"over the limit of {MAX_SEED_BYTES} bytes"),
    ({1: "x"}, "/blackboard", "an object key must be a string"),
    (["goal", 1], "/blackboard", "an object of key -> JSON value, got list"),
])
def test_bad_seeds_are_refused_where_they_are_wrong_and_run_nothing(make_executor, seeds, path, words):
    executor = make_executor()
    answer = executor.submit(PLAN, blackboard=seeds)
    assert not answer["accepted"] and answer["verdict"] == "invalid"
    assert [issue["path"] for issue in answer["issues"]] == [path], answer["issues"]
    assert words in answer["issues"][0]["message"]
    assert executor.get_all_plans()["count"] == 0 and not executor.backend.calls


def test_seeds_nested_as_deep_as_the_limits_allow_are_taken_without_recursion(make_executor):
    limits = bt_exec.Limits(max_depth=600)  # JSON nesting up to 1,264 levels, past Python's recursion limit
    deep: object = "bottom"
    for _ in range(limits.max_json_nesting - 2):
        deep = [deep]
    executor = make_executor(limits=limits)
    answer = executor.submit(PLAN, blackboard={**SEEDS, "goal": deep})
    assert answer["accepted"], answer
    assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"
    goal = calls_of(executor)[0][1]["goal"]
    for _ in range(limits.max_json_nesting - 2):
        goal = goal[0]
    assert goal == "bottom"


def test_every_bad_key_is_listed_at_once(make_executor):
    answer = make_executor().submit(PLAN, blackboard={"@a": 1, "b": 2, "{c}": 3})
    assert [issue["path"] for issue in answer["issues"]] == ["/blackboard/@a", "/blackboard/{c}"]


def test_submit_plan_over_http_takes_the_seeds_and_refuses_bad_ones(serve_web):
    executor, server = serve_web(None)
    remote = HttpApi(server.url)
    answer = remote.call("submit_plan", {"graph": PLAN, "blackboard": SEEDS})
    assert answer["accepted"], answer
    assert remote.call("wait_for_plan", {"plan_id": answer["plan_id"], "timeout_s": 10})["outcome"] == "succeeded"
    assert calls_of(executor)[1] == ("Say", {"text": "arrived"})
    refused = remote.call("submit_plan", {"graph": PLAN, "blackboard": {"@goal": 1}})
    assert not refused["accepted"] and refused["issues"][0]["path"] == "/blackboard/@goal"
    with pytest.raises(BadArgument, match="blackboard"):
        remote.call("submit_plan", {"graph": PLAN, "blackboard": ["goal"]})


def test_bt_exec_run_seeds_from_arguments_and_a_file(tmp_path):
    plan, seeds, events = tmp_path / "plan.xml", tmp_path / "seeds.json", tmp_path / "events.jsonl"
    plan.write_text(PLAN)
    seeds.write_text(json.dumps({"goal": "dock", "speed": 1, "words": "from the file"}))
    done = bt_exec_cli("run", plan, "--blackboard", seeds, "--blackboard", 'words="from the argument"',
                       "--events", events)
    assert done.returncode == 0, done.stdout + done.stderr
    called = [(event["result"]["cap"], event["result"]["args"]) for event in read_events(events)
              if event["event"] == "node_state" and event["state"] == "succeeded" and event["kind"] == "do"]
    assert called == [("MoveTo", {"goal": "dock", "speed": 1}), ("Say", {"text": "from the argument"})]
    done = bt_exec_cli("run", plan, "--blackboard", seeds, "--blackboard", "words=arrived")
    assert done.returncode == 2 and "--blackboard 'words=arrived': not JSON" in done.stderr
    assert "words='\"arrived\"'" in done.stderr
    done = bt_exec_cli("run", plan, "--blackboard", seeds, "--blackboard", "@words=1")
    assert done.returncode == 1 and "/blackboard/@words" in done.stdout + done.stderr
    done = bt_exec_cli("run", plan, "--blackboard", tmp_path / "missing.json")
    assert done.returncode == 2 and "neither KEY=JSON nor a readable JSON file" in done.stderr
    (tmp_path / "list.json").write_text("[1]")
    done = bt_exec_cli("run", plan, "--blackboard", tmp_path / "list.json")
    assert done.returncode == 2 and "one JSON object of key -> value, not list" in done.stderr


def test_a_dry_run_starts_every_path_from_the_seeds():
    catalog = NodeCatalog.from_text('<TreeNodesModel><Action ID="MoveTo"><input_port name="goal"/>'
                                    '<input_port name="speed"/></Action>'
                                    '<Action ID="Say"><input_port name="text"/></Action></TreeNodesModel>')
    seeded = bt_exec.dry_run(PLAN, node_catalog=catalog, blackboard=SEEDS)
    assert [path["outcome"] for path in seeded["paths"]][0] == "succeeded"
    unseeded = bt_exec.dry_run(PLAN, node_catalog=catalog)
    assert unseeded["paths"][0]["outcome"] == "failed" and "'goal'" in unseeded["paths"][0]["failed_op"]["error"]
