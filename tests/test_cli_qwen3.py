"""The CLI on Qwen3 step graphs: validate verdicts and exit codes, run paths and terminals."""
import json

from test_cli import REPO, bt_exec_cli, plan_complete, read_events

SCENE = REPO / "examples" / "qwen3" / "scene.json"
NEEDS_VACUUM = REPO / "examples" / "qwen3" / "cap_without_vacuum.json"
HATCH = REPO / "examples" / "qwen3" / "cap_to_hatch.json"
GRASP_FAILS_ONCE = REPO / "examples" / "sim" / "grasp_fails_once.json"


def test_validate_json_names_verdict_and_steps():
    result = bt_exec_cli("validate", NEEDS_VACUUM, "--dialect", "qwen3", "--catalog", "grant", "--scene", SCENE, "--json")
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


def test_compile_shows_every_step():
    result = bt_exec_cli("compile", HATCH, "--render", "ascii")
    assert result.returncode == 0
    for step in ("[s0] grab(vacuum)", "[s1] pick(cap)", "[s5] inspect_state(vacuum)"):
        assert step in result.stdout
