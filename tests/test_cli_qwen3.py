"""The CLI on Qwen3 step graphs: validate verdicts and exit codes, run paths and terminals."""
import json

from command_line import REPO, bt_exec_cli, plan_complete, read_events

SCENE = REPO / "examples" / "qwen3" / "scene.json"
NEEDS_VACUUM = REPO / "examples" / "qwen3" / "cap_without_vacuum.json"
HATCH = REPO / "examples" / "qwen3" / "cap_to_hatch.json"
GRASP_FAILS_ONCE = REPO / "examples" / "sim" / "grasp_fails_once.json"


def test_validate_json_names_verdict_and_steps():
    result = bt_exec_cli("validate", NEEDS_VACUUM, "--dialect", "qwen3", "--catalog", "grant", "--scene", SCENE,
                         "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["verdict"] == "replan_required" and report["valid"] is False and report["dialect"] == "qwen3"
    assert [(i["code"], i["path"], i["steps"]) for i in report["issues"]] == [
        ("precondition_fails_in_scene", "/response/plan/0", ["s1"])]


def test_validate_ok_exits_0_and_without_a_scene_is_invalid_as_submit_would_answer():
    assert bt_exec_cli("validate", HATCH, "--scene", SCENE).returncode == 0
    no_scene = bt_exec_cli("validate", NEEDS_VACUUM, "--dialect", "qwen3", "--json")
    report = json.loads(no_scene.stdout)
    assert no_scene.returncode == 1 and report["verdict"] == "invalid"
    assert [issue["code"] for issue in report["issues"]] == ["no_scene"]


def test_validate_unknown_catalog_is_a_usage_error():
    result = bt_exec_cli("validate", HATCH, "--catalog", "nope", "--scene", SCENE)
    assert result.returncode == 2 and "no skill catalog named 'nope'" in result.stderr


def test_run_prints_the_path_and_terminal(tmp_path):
    events = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", HATCH, "--dialect", "qwen3", "--scene", SCENE, "--sim-script", GRASP_FAILS_ONCE,
                         "--events", events)
    assert result.returncode == 0, result.stderr
    assert "path: s0 -> s1 -> s4 -> s1 -> s2 -> s3 -> completed" in result.stdout
    assert "terminal: completed" in result.stdout and "patron: vacuum" in result.stdout
    lines = read_events(events)
    transitions = [(e["step"], e["outcome"], e["next"]) for e in lines if e["event"] == "step_transition"]
    assert transitions[1] == ("s1", "grasp_failed", "s4") and transitions[-1] == ("s3", "success", "completed")
    assert all(e["run_id"] == "hatch-2" for e in lines if e["event"] == "step_transition")
    assert plan_complete(lines)["terminal"] == "completed"


def test_run_stops_at_a_step_and_exits_1():
    result = bt_exec_cli("run", HATCH, "--scene", SCENE, "--stop-at", "s2:on_enter")
    assert result.returncode == 1
    assert "terminal: stop (stop point on_enter at op s2)" in result.stdout


def test_run_refuses_replan_required_without_motion():
    result = bt_exec_cli("run", NEEDS_VACUUM, "--scene", SCENE)
    assert result.returncode == 1 and "refused: replan_required" in result.stderr
    assert "started" not in result.stdout


def test_run_needs_a_scene():
    result = bt_exec_cli("run", HATCH)
    assert result.returncode == 2 and "--scene" in result.stderr


def test_compile_shows_every_step_then_every_transition():
    result = bt_exec_cli("compile", HATCH, "--scene", SCENE)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:2] == ["--> step graph from s0 (6 steps)", "    --> [s0] grab(vacuum)"]
    assert lines[6:9] == ["    --> [s5] inspect_state(vacuum)", "transitions (18):", "    s0 -> success -> s1"]
    # each step -> outcome -> next as the graph gives them, a cycle (s1 -> s4 -> s1) and terminals included
    assert {"    s1 -> grasp_failed -> s4", "    s4 -> empty -> s1", "    s3 -> success -> completed",
            "    s5 -> unknown -> operator_required"} <= set(lines[8:])
    assert len(lines) == 8 + 18
    unicode = bt_exec_cli("compile", HATCH, "--scene", SCENE, "--render", "unicode").stdout.splitlines()
    assert unicode[1] == "├── --> [s0] grab(vacuum)" and unicode[6] == "└── --> [s5] inspect_state(vacuum)"
    assert "    s1 → grasp_failed → s4" in unicode


def test_compile_dot_draws_steps_as_nodes_and_transitions_as_labelled_edges():
    result = bt_exec_cli("compile", HATCH, "--scene", SCENE, "--render", "dot")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == 'digraph "6-step graph from s0" {' and lines[-1] == "}"
    assert '  "step s0" [shape=box, label="[s0] grab(vacuum)"];' in lines
    assert "  entry -> \"step s0\";" in lines  # the entry: an arrow from a dot
    edges = [line for line in lines if " -> " in line and "label=" in line]
    assert len(edges) == 18
    assert '  "step s1" -> "step s4" [label="grasp_failed"];' in edges
    assert '  "step s4" -> "step s1" [label="empty"];' in edges
    assert '  "step s4" -> "step s1" [label="placed"];' in edges
    assert '  "step s3" -> "terminal completed" [label="success"];' in edges
    terminals = [line for line in lines if "shape=octagon" in line]
    assert terminals == ['  "terminal stop" [shape=octagon, label="stop"];',
                         '  "terminal completed" [shape=octagon, label="completed"];',
                         '  "terminal operator_required" [shape=octagon, label="operator_required"];']
