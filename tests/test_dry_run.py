"""Dry runs: every path of a plan run on the sim, and where each ends."""
import json
import os
import pathlib

import bt_exec
from bt_exec.cli.dispatch import main

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"


def test_a_tree_fails_each_call_once():
    answer = bt_exec.dry_run(json.dumps({"op": "sequence", "description": "two", "children": [
        {"op": "do", "description": "a", "cap": "arm.a"}, {"op": "do", "description": "b", "cap": "arm.b"}]}))
    assert [(path["chose"], path["outcome"]) for path in answer["paths"]] == [
        (None, "succeeded"), ({"op_id": "2", "outcome": "failure"}, "failed"),
        ({"op_id": "3", "outcome": "failure"}, "failed")]
    assert answer["paths"][2]["failed_op"]["op_id"] == "3" and answer["not_run"] == 0


def test_a_qwen3_step_graph_takes_every_transition(capsys):
    graph = EXAMPLES / "qwen3" / "cap_to_hatch.json"
    scene = bt_exec.Scene.from_file(EXAMPLES / "qwen3" / "scene.json")
    answer = bt_exec.dry_run(graph.read_text(), scene=scene)
    plan = bt_exec.load(graph.read_text())
    edges = {(step, outcome) for step, targets in plan.steps.transitions.items() for outcome in targets}
    taken = {(entry["step"], entry["outcome"]) for path in answer["paths"] for entry in path["trace"]}
    assert edges <= taken and answer["not_run"] == 0
    assert {path["terminal"] for path in answer["paths"]} == {"completed", "stop", "operator_required"}
    assert main(["run", str(graph), "--scene", str(EXAMPLES / "qwen3" / "scene.json"), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"dry run of {graph}: {len(answer['paths'])} paths")
    assert out[1] == ("path 1: every op its usual outcome -> succeeded, terminal completed (s0 -> s1 -> s2 -> s3 -> "
                      "completed): step 's3' (release) ended 'success'")


def test_the_cli_exits_0_whatever_the_paths_end_in(capsys):
    assert main(["run", str(EXAMPLES / "rtdl" / "snapshot_battery.json"), "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"dry run of {EXAMPLES / 'rtdl' / 'snapshot_battery.json'}: 4 paths",
        "path 1: every op its usual outcome -> succeeded",
        "path 2: op 3 failure -> failed at op 3: sim outcome failure",
        "path 3: op 4 failure -> failed at op 4: sim outcome failure",
        "path 4: op 5 failure -> failed at op 5: sim outcome failure"]


def test_a_tree_takes_every_outcome_its_catalog_declares():
    catalog = {"arm.a": {"outcomes": ["success", "blocked", "slipped"]}, "arm.b": {}}
    plan = json.dumps({"op": "sequence", "description": "two", "children": [
        {"op": "do", "description": "a", "cap": "arm.a"}, {"op": "do", "description": "b", "cap": "arm.b"}]})
    answer = bt_exec.dry_run(plan, catalog=catalog)
    assert [path["chose"] for path in answer["paths"]] == [
        None, {"op_id": "2", "outcome": "blocked"}, {"op_id": "2", "outcome": "slipped"},
        {"op_id": "3", "outcome": "failure"}]
    assert [path["outcome"] for path in answer["paths"]] == ["succeeded", "failed", "failed", "failed"]
    assert answer["paths"][1]["failed_op"]["error"] == "sim outcome 'blocked'"


def test_a_catalog_declaring_outcomes_without_success_is_refused():
    import pytest

    with pytest.raises(bt_exec.ConfigError, match="outcomes"):
        bt_exec.CapabilityCatalog({"arm.a": {"outcomes": ["blocked"]}})


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_2000_op_plan_runs_path_after_path_in_the_memory_of_one():
    """Every path runs on one executor and is freed once read: more paths take no more memory (no collection
    forced). An executor per path, kept until a full collection, grew by megabytes a path."""
    plan = json.dumps({"op": "sequence", "description": "many", "children": [
        {"op": "parallel", "description": f"branch {branch}", "children": [
            {"op": "do", "description": f"call {branch}.{n}", "cap": "arm.move"} for n in range(4)]}
        for branch in range(400)]})
    few = bt_exec.dry_run(plan, max_paths=3)  # the allocator's arenas now hold what one path takes
    before = rss_bytes()
    many = bt_exec.dry_run(plan, max_paths=16)
    growth = rss_bytes() - before
    assert [path["chose"] for path in many["paths"][:3]] == [path["chose"] for path in few["paths"]]
    assert [(path["chose"]["op_id"], path["failed_op"]["op_id"]) for path in many["paths"][1:]] == \
        [(str(op_id), str(op_id)) for op_id in (3, 4, 5, 6, 8, 9, 10, 11, 13, 14, 15, 16, 18, 19, 20)], \
        "each path names the ops by the ids of a first run"
    assert many["not_run"] == 1600 - 15
    assert growth < 25_000_000, f"RSS grew {growth / 1e6:.0f} MB over 13 more paths"


def test_a_step_graph_starts_every_path_in_the_scene_it_was_given():
    graph = EXAMPLES / "qwen3" / "cap_to_hatch.json"  # its envelope names a run id: each path runs all the same
    scene = bt_exec.Scene.from_file(EXAMPLES / "qwen3" / "scene.json")
    answer = bt_exec.dry_run(graph.read_text(), scene=scene)
    assert len(answer["paths"]) > 2
    assert all(path["steps"][0] == "s0" for path in answer["paths"])
    assert answer["paths"][0]["terminal"] == "completed"
