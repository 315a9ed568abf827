"""Grant skills as motions: phases, the policy gate on every trajectory, the MoveIt backend end to end.

The arm is a small fake at the Motion seam only: it plans synthetic straight-line trajectories (or the ones a
test scripts) and records what was executed and which gripper commands were sent.
"""
import math
import threading

from bt_exec.compilers import Scene, SkillCatalog
from bt_exec.compilers.symbolic import World
from qwen3_graphs import cap_to_hatch, envelope, graph, scene, step, vacuum_to_work

import bt_exec
from bt_exec.motion.backend import MoveItBackend
from bt_exec.motion.policy import MotionLimits, MotionPolicy, TrajectoryPoint
from bt_exec.motion.skills import GrantMotionSkills, MotionCollision, Pose

GRANT = SkillCatalog.named("grant")
DOWN = (1.0, 0.0, 0.0, 0.0)
POSES = {name: Pose((0.1 * n, 0.4, 0.05), approach_height=0.2) for n, name in enumerate(
    ["work", "vacuum_socket", "cap_storage", "hatch_seat", "hole_1", "hole_2"])}


def tilted(deg):
    """A TCP quaternion tilted ``deg`` degrees from straight down (about x)."""
    half = math.radians(180 - deg) / 2
    return (math.sin(half), 0.0, 0.0, math.cos(half))


class FakeMotion:
    """Plans 5-point trajectories from the current joints; ``script[(phase, place)]`` replaces a plan
    (a list of points, None for no plan, or an exception to raise)."""

    def __init__(self, script=None, acts=None):
        self.script = dict(script or {})
        self.acts = dict(acts or {})
        self.joints = (0.0,) * 7
        self.log = []        # ("plan"|"execute"|"act"|"stop", ...)
        self.executed = []   # the trajectories that were executed
        self.attached = []   # what each plan carried
        self.gate = None     # a threading.Event execute waits on (cancellation tests)

    def current_joints(self):
        return self.joints

    def joint_state_age_s(self):
        return 0.01

    def scene_age_s(self):
        return 0.01

    def plan(self, goal, constraints, attached):
        self.log.append(("plan", goal.phase, goal.name))
        self.attached.append(attached)
        scripted = self.script.get((goal.phase, goal.name), "default")
        if isinstance(scripted, Exception):
            raise scripted
        if scripted != "default":
            return scripted
        end = (goal.position[0],) * 6 + (0.0,)
        return [TrajectoryPoint(tuple(a + (b - a) * k / 4 for a, b in zip(self.joints, end)), DOWN) for k in range(5)]

    def execute(self, points):
        if self.gate is not None:
            self.gate.wait(5)
            if self.gate.stopped:
                return False
        self.log.append(("execute",))
        self.executed.append(list(points))
        self.joints = points[-1].positions
        return True

    def act(self, name):
        self.log.append(("act", name))
        return self.acts.get(name, True)

    def stop(self):
        self.log.append(("stop",))
        if self.gate is not None:
            self.gate.stopped = True
            self.gate.set()


def world(**where):
    return World.from_scene(GRANT, Scene.from_dict(scene(**where)))


def skills(motion=None):
    return GrantMotionSkills(motion or FakeMotion(), MotionPolicy(MotionLimits()), POSES)


def good(n=5, j7=0.0):
    return [TrajectoryPoint((0.1,) * 6 + (j7,), DOWN) for _ in range(n)]


# --- phases -----------------------------------------------------------------------------------------------


def test_grab_is_approach_lower_act_lift():
    motion = FakeMotion()
    outcome = skills(motion).run("grab", {"object": "vacuum"}, world())
    assert (outcome.event, outcome.phases) == ("success", ["approach", "lower", "act", "lift"])
    assert [entry for entry in motion.log if entry[0] != "execute"] == [
        ("plan", "approach", "vacuum_socket"), ("plan", "lower", "vacuum_socket"), ("act", "attach_tool"),
        ("plan", "lift", "vacuum_socket")]


def test_explicit_approach_then_grab_does_not_approach_twice():
    motion, w = FakeMotion(), world(vacuum="patron")
    arm = skills(motion)
    assert arm.run("approach", {"object": "cap"}, w).phases == ["approach"]
    outcome = arm.run("grab", {"object": "cap"}, w)
    assert (outcome.event, outcome.phases) == ("success", ["lower", "act", "lift"])
    assert ("act", "suction_on") in motion.log
    assert arm.run("approach", {"target": "cap_storage"}, w).phases == []  # already above it: no motion


def test_explicit_lower_and_lift_are_not_repeated():
    motion, w = FakeMotion(), world(vacuum="patron")
    arm = skills(motion)
    assert arm.run("lower", {"target": "cap_storage"}, w).phases == ["approach", "lower"]
    assert arm.run("grab", {"object": "cap"}, w).phases == ["act", "lift"]
    assert arm.run("lift", {"target": "cap_storage"}, w).phases == []


def test_release_lifts_before_the_horizontal_move():
    motion, w = FakeMotion(), world(vacuum="patron", holding="cap", cap="cap_storage")
    arm = skills(motion)
    assert arm.run("transfer", {"object": "cap", "target": "hatch_seat"}, w).phases == ["approach"]
    released = arm.run("release", {"object": "cap", "target": "hatch_seat"}, w)
    assert (released.event, released.phases) == ("success", ["lower", "act", "lift"])
    assert arm.context.contact is False
    assert arm.run("approach", {"target": "cap_storage"}, w).phases == ["approach"]
    # released after an explicit lower: the next horizontal move still comes after the lift
    arm.run("lower", {"target": "cap_storage"}, w)
    assert arm.run("transfer", {"object": "cap", "target": "hatch_seat"}, w).phases == ["lift", "approach"]


def test_detect_goes_to_work_first_after_an_axial_retreat():
    motion, w = FakeMotion(), world()
    arm = skills(motion)
    arm.run("lower", {"target": "vacuum_socket"}, w)
    detected = arm.run("detect", {"object": "cap"}, w)
    assert (detected.event, detected.phases) == ("success", ["lift", "work"])
    assert arm.run("detect", {"object": "screw_9"}, w).event == "not_found"


def test_planning_carries_the_held_object():
    motion = FakeMotion()
    skills(motion).run("transfer", {"object": "cap", "target": "hatch_seat"},
                       world(vacuum="patron", holding="cap"))
    assert motion.attached == ["cap"]


def test_release_of_the_tool_outside_its_socket_does_not_move():
    motion = FakeMotion()
    outcome = skills(motion).run("release", {"object": "vacuum"}, world(vacuum="patron"))
    assert (outcome.event, motion.log) == ("failed", [])
    docked = skills(motion).run("dock_tool", {"object": "vacuum", "target": "vacuum_socket"}, world(vacuum="patron"))
    assert (docked.event, docked.phases) == ("success", ["approach", "lower", "act", "lift"])
    assert ("act", "detach_tool") in motion.log


def test_a_failed_grasp_is_grasp_failed_after_the_lift():
    outcome = skills(FakeMotion(acts={"attach_tool": False})).run("grab", {"object": "vacuum"}, world())
    assert (outcome.event, outcome.phases) == ("grasp_failed", ["approach", "lower", "act", "lift"])


# --- the policy gate --------------------------------------------------------------------------------------


def test_a_bad_intermediate_point_under_a_good_end_pose_is_never_executed():
    bad = good()
    bad[2] = TrajectoryPoint((0.1,) * 6 + (2.0,), DOWN)  # J7 beyond +pi/2 mid-way; the end pose is fine
    motion = FakeMotion({("lower", "vacuum_socket"): bad})
    outcome = skills(motion).run("grab", {"object": "vacuum"}, world())
    assert (outcome.event, outcome.failing_point) == ("failed", 2)
    assert "point 2" in outcome.detail and "j7_range" in outcome.detail
    assert bad not in motion.executed and len(motion.executed) == 1  # only the approach moved
    assert outcome.phases == ["approach"]
    assert not any(entry[0] == "act" for entry in motion.log)


def test_tilt_beyond_the_limit_is_refused():
    bad = good()
    bad[3] = TrajectoryPoint((0.1,) * 7, tilted(12.0))
    motion = FakeMotion({("approach", "hatch_seat"): bad})
    outcome = skills(motion).run("transfer", {"object": "cap", "target": "hatch_seat"},
                                 world(vacuum="patron", holding="cap"))
    assert (outcome.event, outcome.failing_point, motion.executed) == ("failed", 3, [])
    assert "tcp_tilt" in outcome.detail


def test_tilt_and_j7_on_the_bound_pass():
    edge = [TrajectoryPoint((0.1,) * 6 + (math.pi / 2,), tilted(10.0)) for _ in range(3)]
    motion = FakeMotion({("approach", "hatch_seat"): edge})
    outcome = skills(motion).run("approach", {"target": "hatch_seat"}, world())
    assert (outcome.event, len(motion.executed)) == ("success", 1)


def test_wrist_flip_is_refused():
    flip = good(3, j7=0.0) + [TrajectoryPoint((0.1,) * 6 + (-math.pi,), DOWN)]
    outcome = skills(FakeMotion({("work", "work"): flip})).run("detect", {"object": "cap"}, world())
    assert (outcome.event, outcome.failing_point) == ("failed", 3)


def test_planning_failure_is_failed():
    motion = FakeMotion({("approach", "vacuum_socket"): None})
    outcome = skills(motion).run("grab", {"object": "vacuum"}, world())
    assert (outcome.event, outcome.failing_point, motion.executed) == ("failed", None, [])
    assert "no plan" in outcome.detail


def test_a_reported_collision_is_collision():
    motion = FakeMotion({("approach", "vacuum_socket"): MotionCollision("goal in collision")})
    outcome = skills(motion).run("grab", {"object": "vacuum"}, world())
    assert (outcome.event, motion.executed) == ("collision", [])


def test_no_pose_is_failed_before_motion():
    motion = FakeMotion()
    arm = GrantMotionSkills(motion, MotionPolicy(), {"work": POSES["work"]})
    assert arm.run("grab", {"object": "vacuum"}, world()).event == "failed"
    assert motion.log == []


# --- the backend end to end -------------------------------------------------------------------------------


def executor_with(motion, at=None):
    at = at or scene()
    backend = MoveItBackend(skills(motion), World.from_scene(GRANT, Scene.from_dict(at)))
    return bt_exec.Executor(backend, scene=at), backend


def run(executor, the_graph):
    answer = executor.submit(envelope(the_graph))
    assert answer["accepted"], answer
    try:
        return executor.run_until_complete(answer["plan_id"], timeout=10)
    finally:
        executor.close(wait_ms=2000)


def test_a_grant_graph_runs_to_completed():
    motion = FakeMotion()
    executor, _ = executor_with(motion)
    record = run(executor, cap_to_hatch())
    assert (record["terminal"], record["path"]) == ("completed", ["t1", "t2", "t3", "t4", "t5", "completed"])
    assert record["state"]["locations"]["cap"] == "hatch_seat"
    assert record["state"]["patron"] == ["vacuum"]
    assert [entry[1] for entry in motion.log if entry[0] == "act"] == ["attach_tool", "suction_on", "suction_off"]


def test_vacuum_to_work_leaves_the_tool_in_the_patron():
    executor, _ = executor_with(FakeMotion())
    record = run(executor, vacuum_to_work())
    assert record["terminal"] == "completed" and record["state"]["locations"]["vacuum"] == "patron"


def test_a_violating_trajectory_mid_graph_takes_the_failed_edge():
    bad = good()
    bad[1] = TrajectoryPoint((0.1,) * 6 + (-2.5,), DOWN)
    motion = FakeMotion({("approach", "work"): bad})
    the_graph = graph([step("s1", "grab", "vacuum"), step("s2", "transfer", "vacuum", "work"),
                       step("s3", "transfer", "vacuum", "vacuum_socket"),
                       step("s4", "dock_tool", "vacuum", "vacuum_socket")],
                      {"s1": {"success": "s2", "grasp_failed": "stop"},
                       "s2": {"success": "completed", "failed": "s3", "collision": "stop"},
                       "s3": {"success": "s4"}, "s4": {"success": "completed"}})
    executor, _ = executor_with(motion)
    record = run(executor, the_graph)
    assert (record["terminal"], record["path"]) == ("completed", ["s1", "s2", "s3", "s4", "completed"])
    assert bad not in motion.executed
    assert record["state"]["locations"]["vacuum"] == "vacuum_socket"


def test_backend_failure_reports_the_failing_point():
    bad = good()
    bad[4] = TrajectoryPoint((0.1,) * 7, tilted(30.0))
    backend = MoveItBackend(skills(FakeMotion({("approach", "vacuum_socket"): bad})), world())
    call = bt_exec.CapabilityCall("p", "s1", "grab", {"object": "vacuum"}, None, "c1")
    run_id = backend.start(call)
    assert backend.wait_idle()
    status = backend.status(run_id)
    assert (status.state, status.event, status.output["failing_point"]) == ("FAILED", "failed", 4)
    assert "point 4" in status.error
    assert backend.world.locations["vacuum"] == "vacuum_socket"  # nothing moved in the world


def test_backend_refuses_an_unmet_precondition_before_motion():
    motion = FakeMotion()
    backend = MoveItBackend(skills(motion), world())
    status = backend.start(bt_exec.CapabilityCall("p", "s1", "grab", {"object": "cap"}, None, "c1"))
    assert (status.state, status.event, motion.log) == ("FAILED", "failed", [])


def test_cancel_stops_the_arm_and_reports_canceled():
    motion = FakeMotion()
    motion.gate = threading.Event()
    motion.gate.stopped = False
    backend = MoveItBackend(skills(motion), world())
    run_id = backend.start(bt_exec.CapabilityCall("p", "s1", "grab", {"object": "vacuum"}, None, "c1"))
    assert backend.status(run_id).state == "RUNNING"
    backend.cancel(run_id)
    assert backend.status(run_id).state == "CANCELED"
    assert ("stop",) in motion.log
    assert backend.world.locations["vacuum"] == "vacuum_socket"  # a cancelled call moves nothing in the world
    motion.gate = None
    assert backend.wait_idle()  # the cancelled call has stopped: the arm is free again
    again = backend.start(bt_exec.CapabilityCall("p", "s2", "grab", {"object": "vacuum"}, None, "c2"))
    assert backend.wait_idle() and backend.status(again).state == "SUCCEEDED"
    acts = [entry for entry in motion.log if entry[0] == "act"]
    assert acts == [("act", "attach_tool")]  # the cancelled grab never commanded the tool
