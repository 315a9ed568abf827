"""``--dry-run --backend physics`` and ``dry_run(cell=...)``: each path of a step graph run in a cell of its own at
full speed, the arm deciding how the steps it takes as usual end, and the report saying where each path ended and
why (the colliding pair, the grasp that found nothing)."""
import json

import pytest
from command_line import REPO, bt_exec_cli

import bt_exec
from bt_exec.errors import ConfigError

EXAMPLES = REPO / "examples"
HATCH = EXAMPLES / "qwen3" / "cap_to_hatch.json"
SCENE = EXAMPLES / "qwen3" / "scene.json"


def _dry_run(poses=None):
    scene = json.loads(SCENE.read_text())
    return bt_exec.dry_run(json.loads(HATCH.read_text()), scene=scene,
                           cell=lambda: bt_exec.PhysicsCell(poses=poses, scene=scene, speed="max"))


def test_every_path_of_the_graph_runs_in_a_cell_of_its_own_and_says_where_the_tool_ended():
    answer = _dry_run()
    first = answer["paths"][0]
    assert first["chose"] is None and first["terminal"] == "completed" and first["steps"] == ["s0", "s1", "s2", "s3"]
    assert first["arm"]["decided"] == []  # every step ended as usual on the arm
    assert first["arm"]["tool"] == pytest.approx([0.60, 0.25, 0.27], abs=0.01)  # above the hatch seat, the cap released
    # a path given its branch outcome ends where the graph sends it, the arm stopped where that step began
    collided = next(path for path in answer["paths"] if path["chose"] == {"op_id": "s2", "outcome": "collision"})
    assert collided["terminal"] == "stop" and collided["steps"] == ["s0", "s1", "s2"]
    assert collided["arm"]["tool"] == pytest.approx([0.45, -0.30, 0.25], abs=0.01)  # above the cap's storage


def test_the_arm_decides_a_collision_and_the_report_names_the_colliding_pair():
    answer = _dry_run(EXAMPLES / "physics" / "cap_on_the_tool.yaml")
    first = answer["paths"][0]
    assert first["terminal"] == "stop" and first["steps"] == ["s0"]
    (decided,) = first["arm"]["decided"]
    assert decided["op_id"] == "s0" and decided["outcome"] == "collision"
    assert "cap collides with link_7" in decided["error"] and "vacuum_socket" in decided["error"]


def test_the_arm_decides_a_grasp_that_finds_nothing():
    answer = _dry_run(EXAMPLES / "physics" / "cap_off_its_storage.yaml")
    first = answer["paths"][0]
    assert [entry["op_id"] for entry in first["arm"]["decided"]][:1] == ["s1"]
    assert first["arm"]["decided"][0]["outcome"] == "grasp_failed"
    assert first["steps"][:3] == ["s0", "s1", "s4"]


def test_the_command_prints_each_path_with_the_arm_and_folds_paths_that_end_alike():
    done = bt_exec_cli("run", HATCH, "--scene", SCENE, "--backend", "physics", "--dry-run", "--cell-poses",
                       EXAMPLES / "physics" / "cap_on_the_tool.yaml")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1] == ("path 1: every op its usual outcome -> failed, terminal stop (s0 -> stop): step 's0' (grab) "
                        "ended 'collision'")
    assert lines[2] == "  the arm: tool at (0.300, -0.450, 0.400) m"
    assert lines[3].startswith("  the arm ended op s0 collision: physics: grab collision: ")
    assert "path 2: op s0 success -> ends as path 1" in lines


def test_a_dry_run_in_a_cell_is_refused_for_what_the_cell_cannot_run():
    tree = bt_exec_cli("run", EXAMPLES / "rtdl" / "snapshot_battery.json", "--backend", "physics", "--dry-run")
    assert tree.returncode == 2 and "runs Qwen3 step graphs" in tree.stderr
    recorded = bt_exec_cli("run", HATCH, "--scene", SCENE, "--backend", "physics", "--dry-run", "--record", "x.gif")
    assert recorded.returncode == 2 and "--record films a run, not a --dry-run" in recorded.stderr
    with pytest.raises(ConfigError, match="explores step graphs"):
        bt_exec.dry_run({"rtdl_description": "t", "rtdl": {"op": "do", "op_id": 1, "description": "d",
                                                            "cap": "sim.act", "args": {}}},
                        cell=bt_exec.PhysicsCell)
