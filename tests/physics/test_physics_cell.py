"""The Grant cell in MuJoCo: Qwen3 graphs move the simulated iiwa through GrantMotionSkills and MotionPolicy, and
fail for physical reasons (an unreachable pose, a path through a part, a part not where the scene says), found
by the simulation itself; a cancel brakes the arm to rest within 0.25 s of simulated time."""
import json
import math
import os
import subprocess
import sys
import threading
import time

import pytest
import yaml
from command_line import REPO, bt_exec_cli

import bt_exec
from bt_exec.compilers.symbolic import World
from bt_exec.motion.backend import MoveItBackend
from bt_exec.motion.physics import CellRefused, PhysicsCell
from bt_exec.motion.physics.cell import STOP_WITHIN_S
from bt_exec.motion.policy import MotionPolicy
from bt_exec.motion.skills import Goal, GrantMotionSkills, MotionCollision, MotionError, PathConstraints, Pose

EXAMPLES = REPO / "examples" / "qwen3"
SCENE = json.loads((EXAMPLES / "scene.json").read_text())
POSES = yaml.safe_load((REPO / "config" / "grant_cell_poses.yaml").read_text())
CONSTRAINTS = PathConstraints(0.0, math.pi / 2, 10.0)
# A part not where the scene says: the cap lies on the docked tool's coupling (the flange meets it on the way
# down), or on the table away from its storage (nothing under the cup).
CAP_ON_THE_TOOL = [0.30, -0.45, 0.34]
CAP_ON_THE_TABLE = [0.60, -0.10, 0.02]


def poses_file(tmp_path, objects=None, **places):
    poses = dict(POSES, **places)
    if objects is not None:
        poses["objects"] = objects
    path = tmp_path / "poses.yaml"
    path.write_text(yaml.safe_dump(poses))
    return path


def run(cell, graph, scene=None):
    """The graph run to its end on an executor over ``cell``: its final record."""
    executor = bt_exec.Executor(backend=cell, scene=scene)
    try:
        answer = executor.submit((EXAMPLES / graph).read_text())
        assert answer["accepted"], answer
        executor.start()
        return executor.run_until_complete(answer["plan_id"])
    finally:
        executor.close()


def op_result(record, op_id):
    return next(op for op in record["ops"] if op["op_id"] == op_id)["result"]


def distance(a, b):
    return math.dist(a, b)


def wait_for(seen, event: threading.Event, what: str, timeout_s: float = 30.0) -> None:
    """Look at the moving arm every 2 ms until ``seen()``; fail naming ``what`` if it never is."""
    deadline = time.monotonic() + timeout_s
    while not event.wait(0.002):
        if seen():
            event.set()
        elif time.monotonic() > deadline:
            pytest.fail(f"never saw {what} in {timeout_s:.0f} s")


def test_cap_to_hatch_runs_to_completed_and_the_cap_lies_on_the_hatch_seat():
    cell = PhysicsCell(scene=SCENE, speed="max")
    record = run(cell, "cap_to_hatch.json")
    assert record["terminal"] == "completed" and record["path"] == ["s0", "s1", "s2", "s3", "completed"]
    assert distance(cell.motion.part_position("cap"), POSES["hatch_seat"]["position"]) < 0.003
    # the tool stayed on the flange all along, its cup tip at the TCP (the weld did not let it sag)
    assert distance(cell.motion.part_position("vacuum"), cell.tool_position()) < 0.002
    assert distance(cell.tool_position(), cell.target()) < 0.002
    assert max(abs(speed) for speed in cell.joint_speeds()) < 0.01


def test_a_graph_starting_with_the_tool_on_the_flange_runs_to_completed():
    scene = dict(SCENE, state={"vacuum": "patron", "cap": "cap_storage"})
    cell = PhysicsCell(scene=scene, speed="max")
    record = run(cell, "cap_without_vacuum.json")
    assert record["terminal"] == "completed", record
    assert distance(cell.motion.part_position("cap"), POSES["hatch_seat"]["position"]) < 0.003


def test_the_executor_takes_the_cells_scene_and_the_links_are_there_to_draw():
    cell = PhysicsCell(speed="max")
    executor = bt_exec.Executor(backend=cell)
    try:
        assert executor.scene is cell.scene
    finally:
        executor.close()
    links = dict(cell.link_positions())
    assert list(links)[:8] == [f"link_{i}" for i in range(8)]
    assert links["tcp"] == cell.tool_position()
    assert distance(cell.tool_position(), POSES["work"]["position"]) < 0.001
    assert len(cell.current_joints()) == 7 and cell.target() is None


def test_an_unreachable_goal_fails_naming_the_goal_and_the_ik_residual():
    cell = PhysicsCell(speed="max")
    with pytest.raises(MotionError, match=r"approach to far at \(1\.500, 0\.000, 0\.300\): unreachable, "
                                          r"IK residual \d+\.\d mm") as refused:
        cell.motion.plan(Goal("far", "approach", (1.5, 0.0, 0.3)), CONSTRAINTS, None)
    assert refused.value.event == "failed"
    # through the skills and the backend, the reason reaches the op's result (the place kept off the start check)
    poses = {name: Pose(tuple(entry["position"]), approach_height=entry.get("approach_height", 0.15))
             for name, entry in POSES.items()}
    poses["hatch_seat"] = Pose((1.6, 0.25, 0.12))
    backend = MoveItBackend(GrantMotionSkills(cell.motion, MotionPolicy(), poses),
                            World.from_scene(bt_exec.SkillCatalog.named("grant"), bt_exec.Scene.from_dict(SCENE)),
                            label="physics")
    record = run(backend, "cap_to_hatch.json", scene=SCENE)
    result = op_result(record, "s2")
    assert result["event"] == "failed" and "approach to hatch_seat" in result["error"]
    assert "unreachable, IK residual" in result["error"]


def test_a_path_through_a_part_is_refused_as_a_collision_naming_the_pair_and_the_point(tmp_path):
    cell = PhysicsCell(poses=poses_file(tmp_path, {"cap": CAP_ON_THE_TOOL}), scene=SCENE, speed="max")
    record = run(cell, "cap_to_hatch.json")
    assert record["path"] == ["s0", "stop"]
    result = op_result(record, "s0")
    assert result["event"] == "collision"
    assert "lower to vacuum_socket" in result["error"] and "cap collides with link_7 at (" in result["error"]
    # refused before moving: the flange stopped above the cap
    assert cell.tool_position()[2] > 0.39


def test_a_part_not_where_the_scene_says_is_a_grasp_failed_from_where_the_bodies_are(tmp_path):
    cell = PhysicsCell(poses=poses_file(tmp_path, {"cap": CAP_ON_THE_TABLE}), scene=SCENE, speed="max")
    record = run(cell, "cap_to_hatch.json")
    result = op_result(record, "s1")
    assert result["event"] == "grasp_failed" and "cap not grasped at cap_storage" in result["error"]
    assert record["path"][:3] == ["s0", "s1", "s4"]
    assert distance(cell.motion.part_position("cap"), CAP_ON_THE_TABLE) < 0.002  # nothing took it


def test_a_cancel_mid_motion_brakes_the_arm_to_rest_within_a_quarter_second_and_reports_canceled():
    cell = PhysicsCell(scene=SCENE, speed=1.0)  # real time: the test thread meets the arm in motion
    executor = bt_exec.Executor(backend=cell)
    fast = threading.Event()
    try:
        answer = executor.submit((EXAMPLES / "cap_to_hatch.json").read_text())
        executor.start()
        # the first approach swings A1 at its rated speed (85°/s); cancel once it is at 90% of it
        wait_for(lambda: abs(cell.joint_speeds()[0]) > 0.9 * math.radians(85), fast, "A1 at 90% of its speed")
        executor.cancel_plan(answer["plan_id"])
        record = executor.run_until_complete(answer["plan_id"])
        assert cell.wait_idle()
    finally:
        executor.close()
    assert record["outcome"] == "cancelled"
    assert op_result(record, "s0") is None or op_result(record, "s0")["error"] == "physics: canceled"
    assert next(op for op in record["ops"] if op["op_id"] == "s0")["state"] == "canceled"
    assert cell.motion.last_stop_s <= STOP_WITHIN_S
    assert max(abs(speed) for speed in cell.joint_speeds()) < 1e-3 and cell.tool_speed() < 1e-3


def test_a_pose_out_of_reach_is_refused_at_start_naming_the_place_and_the_residual(tmp_path):
    with pytest.raises(CellRefused, match=r"hole_3 at \[1\.700, 0\.050, 0\.120\] is out of the arm's reach "
                                          r"\(IK residual \d+\.\d mm"):
        PhysicsCell(poses=poses_file(tmp_path, hole_3={"position": [1.7, 0.05, 0.12]}), speed="max")
    # the approach pose counts too
    with pytest.raises(CellRefused, match=r"work \(its approach pose\) at \[0\.500, 0\.000, 1\.450\]"):
        PhysicsCell(poses=poses_file(tmp_path, work={"position": [0.5, 0.0, 0.45], "approach_height": 1.0}),
                    speed="max")


@pytest.mark.parametrize(("objects", "scene", "says"), [
    ({"cap": CAP_ON_THE_TABLE}, dict(SCENE, state={"vacuum": "patron", "cap": "hand"}, holding="cap"),
     "a part in two places"),
    ({"vacuum": [0.3, 0.3, 0.1]}, SCENE, "only the cap lies free"),
    ({"cap": [0.6, 0.1]}, SCENE, "objects.cap must be 3 finite numbers"),
    (None, dict(SCENE, state={"vacuum": "vacuum_socket", "cap": "hand"}, holding="cap"), "not in the patron"),
    (None, dict(SCENE, state={"vacuum": "vacuum_socket", "cap": "hatch_2"}), "a place the poses file does not name"),
], ids=["held and lying", "tool moved", "bad position", "held without the tool", "unknown place"])
def test_a_scene_or_objects_that_contradict_the_cell_are_refused(tmp_path, objects, scene, says):
    with pytest.raises(CellRefused, match=says):
        PhysicsCell(poses=poses_file(tmp_path, objects), scene=scene, speed="max")


def test_a_diverging_simulation_fails_the_call_and_the_cell_goes_on_serving():
    cell = PhysicsCell(speed="max")
    motion = cell.motion
    gains, forces = motion.model.actuator_gainprm[:, 0].copy(), motion.model.actuator_forcerange.copy()
    before = cell.current_joints()
    points = motion.plan(Goal("vacuum_socket", "approach", (0.3, -0.45, 0.4)), CONSTRAINTS, None)
    motion.model.actuator_gainprm[:, 0] = 1e12  # a servo gain no integrator survives, its torque unbounded
    motion.model.actuator_biasprm[:, 1] = -1e12
    motion.model.actuator_forcerange[:] = (-1e15, 1e15)
    with pytest.raises(MotionError, match=r"the physics diverged at t = \d+\.\d+ s \(simulated\); the cell was put "
                                          "back as it was before this move"):
        motion.execute(points)
    assert cell.current_joints() == pytest.approx(before)
    motion.model.actuator_gainprm[:, 0] = gains
    motion.model.actuator_biasprm[:, 1] = -gains
    motion.model.actuator_forcerange[:] = forces
    assert motion.execute(motion.plan(Goal("vacuum_socket", "approach", (0.3, -0.45, 0.4)), CONSTRAINTS, None))
    assert distance(cell.tool_position(), (0.3, -0.45, 0.4)) < 0.002


def test_only_the_trajectory_planned_last_is_executed():
    cell = PhysicsCell(speed="max")
    first = cell.motion.plan(Goal("vacuum_socket", "approach", (0.3, -0.45, 0.4)), CONSTRAINTS, None)
    cell.motion.plan(Goal("hatch_seat", "approach", (0.6, 0.25, 0.27)), CONSTRAINTS, None)
    with pytest.raises(MotionError, match="only the trajectory planned"):
        cell.motion.execute(first)


def test_bt_exec_run_with_the_physics_backend_runs_a_graph_to_its_terminal():
    done = bt_exec_cli("run", EXAMPLES / "cap_to_hatch.json", "--scene", EXAMPLES / "scene.json",
                       "--backend", "physics", "--physics-speed", "max")
    assert done.returncode == 0, done.stderr
    assert "terminal: completed" in done.stdout and "path: s0 -> s1 -> s2 -> s3 -> completed" in done.stdout


def test_bt_exec_run_refuses_a_bad_poses_file_in_one_line(tmp_path):
    done = bt_exec_cli("run", EXAMPLES / "cap_to_hatch.json", "--scene", EXAMPLES / "scene.json",
                       "--backend", "physics", "--physics-speed", "max", "--cell-poses",
                       poses_file(tmp_path, hatch_seat={"position": [1.9, 0.25, 0.12]}))
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "poses.yaml: hatch_seat at [1.900, 0.250, 0.120] is out of the arm's reach" in done.stderr


@pytest.mark.parametrize(("args", "says"), [
    (("--physics-speed", "0"), "expected a number > 0 or max"),
    (("--physics-speed", "2", "--backend", "sim"), "--cell-poses and --physics-speed go with --backend physics"),
    (("--sim-script", "x.json"), "--sim-script goes with --backend sim"),
])
def test_bt_exec_run_refuses_physics_options_that_do_not_fit(args, says):
    done = bt_exec_cli("run", EXAMPLES / "cap_to_hatch.json", "--scene", EXAMPLES / "scene.json",
                       "--backend", "physics", *args)
    assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr


def test_render_gives_a_png_of_the_cell_where_gl_is_there(tmp_path):
    # EGL headless, in a process of its own: MUJOCO_GL is read once, when mujoco is imported
    code = ("import struct, sys\nfrom bt_exec.motion.physics import PhysicsCell\n"
            "png = PhysicsCell(speed='max').render(320, 240)\n"
            "print('none' if png is None else '%s %d %d' % ((png[:8] == b'\\x89PNG\\r\\n\\x1a\\n'),"
            " *struct.unpack('>II', png[16:24])))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env=dict(os.environ, MUJOCO_GL="egl"))
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "none":
        pytest.skip("no EGL on this machine: render() rightly gave None")
    assert done.stdout.split() == ["True", "320", "240"]


@pytest.mark.parametrize(("place", "z", "says"), [
    ("hatch_seat", -0.05, "poses.yaml: hatch_seat at z = -0.05 m is below where it can be: its fixture needs "
                          "z >= 0.022 m"),
    ("work", -0.01, "work at z = -0.01 m is below where it can be: the table top is z = 0"),
])
def test_a_place_under_the_table_is_refused_at_start_naming_it(tmp_path, place, z, says):
    position = POSES[place]["position"][:2] + [z]
    with pytest.raises(CellRefused, match=says):
        PhysicsCell(poses=poses_file(tmp_path, **{place: {"position": position}}), speed="max")


def grab_the_tool(run_id: str) -> dict:
    return {"run_id": run_id, "scene_revision": SCENE["scene_revision"], "response": {
        "status": "ok", "entry": "s0", "plan": [{"id": "s0", "skill": "grab", "object": "vacuum"}],
        "transitions": {"s0": {"success": "completed", "grasp_failed": "replan_required", "collision": "stop"}}}}


def test_after_a_stop_while_lowering_the_next_grab_lifts_approaches_and_lowers_again():
    # GrantMotionSkills took an arm stopped on its way down for one already down at the place: it switched the
    # coupling on mid-air and the grab failed
    cell = PhysicsCell(scene=SCENE, speed=1.0)
    executor = bt_exec.Executor(backend=cell)
    lowering = threading.Event()
    try:
        executor.start()
        first = executor.submit(grab_the_tool("stopped"))
        socket = POSES["vacuum_socket"]["position"]
        wait_for(lambda: cell.target() == tuple(socket) and cell.tool_position()[2] < socket[2] + 0.12, lowering,
                 "the TCP halfway down to the socket")
        executor.cancel_plan(first["plan_id"])
        assert executor.run_until_complete(first["plan_id"])["outcome"] == "cancelled"
        assert cell.wait_idle()
        assert cell.tool_position()[2] > socket[2] + 0.02  # stopped above the tool
        again = executor.submit(grab_the_tool("again"))
        record = executor.run_until_complete(again["plan_id"])
    finally:
        executor.close()
    assert record["terminal"] == "completed", record
    assert op_result(record, "s0")["output"]["phases"] == ["lift", "approach", "lower", "act", "lift"]


def test_a_held_part_is_checked_for_collisions_with_the_arm():
    # the cap held on the cup: lowering the TCP 1 cm below the storage's worked point drives the cap into its fixture
    scene = dict(SCENE, state={"vacuum": "patron", "cap": "hand"}, holding="cap")
    cell = PhysicsCell(scene=scene, speed="max")
    assert distance(cell.motion.part_position("cap"), cell.tool_position()) < 0.001
    x, y, z = POSES["cap_storage"]["position"]
    with pytest.raises(MotionCollision, match=r"lower to cap_storage at .*: cap collides with cap_storage at \("):
        cell.motion.plan(Goal("cap_storage", "lower", (x, y, z - 0.01), axial=True), CONSTRAINTS, "cap")
    assert cell.joint_names == tuple(f"joint_{i}" for i in range(1, 8)) and cell.sim_time() == 0.0


def test_a_part_put_inside_a_fixture_is_refused_at_start(tmp_path):
    x, y, z = POSES["cap_storage"]["position"]
    with pytest.raises(CellRefused, match=r"at start cap and cap_storage overlap by \d+ mm"):
        PhysicsCell(poses=poses_file(tmp_path, {"cap": [x, y, z - 0.03]}), scene=SCENE, speed="max")
