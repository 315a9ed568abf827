"""A new scene moves the simulated parts to where it says (``PhysicsCell.set_scene``), the arm at rest: the tool onto
the flange or into its socket, the cap onto a place or the cup; refused while a skill moves the arm, and for a
scene the cell cannot be put in, the cell then unchanged. Real MuJoCo."""
import json
import math
import threading
import time

import pytest
import yaml
from command_line import REPO

import bt_exec
from bt_exec.errors import Conflict
from bt_exec.motion.physics import CellRefused, PhysicsCell

EXAMPLES = REPO / "examples" / "qwen3"
SCENE = json.loads((EXAMPLES / "scene.json").read_text())
POSES = yaml.safe_load((REPO / "config" / "grant_cell_poses.yaml").read_text())
CAP_ON_THE_TABLE = [0.60, -0.10, 0.02]


def scene(revision: int, holding=None, **state) -> dict:
    return dict(SCENE, scene_revision=revision, state=state, holding=holding)


def graph(name: str, revision: int) -> dict:
    """An example graph, sent in ``revision`` of the scene."""
    return dict(json.loads((EXAMPLES / name).read_text()), scene_revision=revision, run_id=f"{name}-{revision}")


def run(executor, cell, name: str, revision: int) -> dict:
    answer = executor.submit(graph(name, revision))
    assert answer["accepted"], answer
    record = executor.run_until_complete(answer["plan_id"])
    assert cell.wait_idle()
    return record


def place(name: str) -> list[float]:
    return POSES[name]["position"]


def parts(cell) -> dict:
    return {part: cell.motion.part_position(part) for part in ("vacuum", "cap")}


def test_a_new_scene_puts_the_tool_and_the_cap_where_it_says_and_the_next_graph_works_on_them():
    cell = PhysicsCell(scene=SCENE, speed="max")
    executor = bt_exec.Executor(backend=cell)
    executor.start()
    try:
        # the tool already in the patron: without it on the flange, the cup would find nothing to pick the cap with
        tool_on = scene(13, vacuum="patron", cap="cap_storage")
        cell.set_scene(tool_on)
        executor.set_scene(tool_on)
        assert math.dist(cell.motion.part_position("vacuum"), cell.tool_position()) < 0.002
        assert cell.world.in_patron() == ["vacuum"] and cell.scene.revision == 13
        record = run(executor, cell, "cap_without_vacuum.json", 13)
        assert record["terminal"] == "completed", record
        assert math.dist(cell.motion.part_position("cap"), place("hatch_seat")) < 0.003

        # the cap in hand: it goes onto the cup, and stays there when the arm moves
        in_hand = scene(14, holding="cap", vacuum="patron")
        cell.set_scene(in_hand)
        executor.set_scene(in_hand)
        assert math.dist(cell.motion.part_position("cap"), cell.tool_position()) < 0.002
        transfer = {"run_id": "carry", "scene_revision": 14, "response": {
            "status": "ok", "entry": "s1", "plan": [{"id": "s1", "skill": "transfer", "object": "cap",
                                                     "target": "hatch_seat"}],
            "transitions": {"s1": {"success": "completed", "collision": "stop"}}}}
        answer = executor.submit(transfer)
        assert answer["accepted"], answer
        assert executor.run_until_complete(answer["plan_id"])["terminal"] == "completed"
        assert math.dist(cell.motion.part_position("cap"), cell.tool_position()) < 0.002

        # everything back: the tool stands in its socket, the cap in its storage; the whole job runs again
        cell.set_scene(scene(15, vacuum="vacuum_socket", cap="cap_storage"))
        executor.set_scene(cell.scene)
        assert math.dist(cell.motion.part_position("vacuum"), place("vacuum_socket")) < 0.002
        assert math.dist(cell.motion.part_position("cap"), place("cap_storage")) < 0.002
        record = run(executor, cell, "cap_to_hatch.json", 15)
        assert record["terminal"] == "completed", record
        assert math.dist(cell.motion.part_position("cap"), place("hatch_seat")) < 0.003
    finally:
        executor.close()
        cell.close()


def test_a_part_whose_place_the_scene_keeps_stays_where_the_physics_has_it(tmp_path):
    poses = tmp_path / "poses.yaml"
    poses.write_text(yaml.safe_dump(dict(POSES, objects={"cap": CAP_ON_THE_TABLE})))
    cell = PhysicsCell(poses=poses, scene=SCENE, speed="max")
    cell.set_scene(scene(13, vacuum="patron", cap="cap_storage"))  # a new revision: the cap's place is the same
    assert math.dist(cell.motion.part_position("cap"), CAP_ON_THE_TABLE) < 0.002
    assert math.dist(cell.motion.part_position("vacuum"), cell.tool_position()) < 0.002
    cell.close()


@pytest.mark.parametrize("state, holding, says", [
    ({"vacuum": "vacuum_socket", "cap": "nowhere_known"}, None, "a place the poses file does not name"),
    ({"vacuum": "vacuum_socket"}, "cap", "the vacuum tool that holds it is not in the patron"),
    ({"vacuum": "vacuum_socket", "cap": "vacuum_socket"}, None, "in the new scene .* overlap by"),
])
def test_a_scene_the_cell_cannot_be_put_in_is_refused_and_changes_nothing(state, holding, says):
    cell = PhysicsCell(scene=SCENE, speed="max")
    before, world = parts(cell), cell.world
    with pytest.raises(CellRefused, match=says):
        cell.set_scene(scene(13, holding=holding, **state))
    after = parts(cell)
    assert all(math.dist(before[part], after[part]) < 1e-9 for part in before), (before, after)
    assert cell.world is world and cell.scene.revision == SCENE["scene_revision"]
    cell.close()


def test_a_new_scene_is_refused_while_a_skill_moves_the_arm():
    cell = PhysicsCell(scene=SCENE, speed=1.0)  # real time: the arm is still moving when the scene comes
    executor = bt_exec.Executor(backend=cell)
    executor.start()
    try:
        answer = executor.submit(graph("cap_to_hatch.json", SCENE["scene_revision"]))
        assert answer["accepted"], answer
        deadline = time.monotonic() + 30
        moving = threading.Event()
        while not moving.wait(0.002):
            if max(map(abs, cell.joint_speeds())) > 0.1:
                moving.set()
            assert time.monotonic() < deadline, "the arm never moved"
        before = parts(cell)
        with pytest.raises(Conflict, match="the arm is busy"):
            cell.set_scene(scene(13, vacuum="patron", cap="hatch_seat"))
        assert math.dist(parts(cell)["cap"], before["cap"]) < 1e-3  # the cap was not moved
        executor.cancel_plan(answer["plan_id"])
        executor.run_until_complete(answer["plan_id"])
    finally:
        executor.close()
        cell.close()
