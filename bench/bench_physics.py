"""The Grant cell in physics: IK, planned and checked trajectories, the simulation's speed and a whole graph.

Run from the repository root (it needs the physics extra, pip install 'bt_exec[physics]'; without it the figures
show ``skipped``)::

    python bench/bench_physics.py            # full run (about 30 s)
    python bench/bench_physics.py --quick    # smoke run

Everything runs in this process on a ``PhysicsCell`` at ``speed="max"`` (MuJoCo, mink, ruckig):

1. IK to a goal: mink from the current joints to each named pose and the pose above it, median. Bar 5 ms.
2. Planned and policy-checked trajectory: ``MujocoMotion.plan`` (IK, a ruckig trajectory, a collision check of
   the cell every 10 ms of motion) then ``MotionPolicy.check`` of every point, for the approach to each named
   place in turn from where the last one left the arm (each one executed in between), median. Bar 20 ms.
3. Physics at max speed: wall seconds per simulated second while executing those trajectories (servo
   references, inertial feed-forward, MuJoCo steps of 2 ms). Bar 0.05 s, i.e. at least 20x real time.
4. ``examples/qwen3/cap_to_hatch.json`` at max speed: submit to its end on an ``Executor`` over a fresh cell
   (4 skills, 13 motions), median. Bar 10 s.

None of them has a raw py_trees counterpart (the figures are the physics'). Exit 1 when a bar is missed.
"""
from __future__ import annotations

import json
import pathlib
import statistics
import sys
import time

from benchlib import Figure, parse_args, report, skipped
import bt_exec

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples" / "qwen3"
NAMES = ("IK to a goal, from the current joints", "planned + policy-checked trajectory (collisions every 10 ms)",
         "physics at max speed, wall s per simulated s", "examples/qwen3/cap_to_hatch.json at max speed")
NO_RAW = "no raw py_trees counterpart: the physics cell's own figure"
IK_BAR_S, PLAN_BAR_S, STEP_BAR_S, GRAPH_BAR_S = 5e-3, 20e-3, 0.05, 10.0


def figures(args, detail: list[str]) -> list[Figure]:
    try:
        from bt_exec.motion.physics import PhysicsUnavailable, require_physics
        require_physics()
    except PhysicsUnavailable as exc:
        return skipped("physics", NAMES, str(exc))
    from bt_exec.motion.physics import PhysicsCell
    from bt_exec.motion.policy import MotionPolicy
    from bt_exec.motion.skills import Goal

    scene = json.loads((EXAMPLES / "scene.json").read_text())
    cell = PhysicsCell(scene=scene, speed="max")
    motion, skills = cell.motion, cell.skills
    policy, constraints = MotionPolicy(), skills.constraints
    places = sorted(skills.poses)

    ik_s, plan_s, wall_s, simulated_s = [], [], 0.0, 0.0
    for _ in range(args.repeats):
        for name in places:
            pose = skills.poses[name]
            for position in (pose.above(), pose.position):
                began = time.perf_counter()
                motion._ik.solve(position, pose.orientation, motion.current_joints())
                ik_s.append(time.perf_counter() - began)
            goal = Goal(name, "approach", pose.above(), pose.orientation)
            began = time.perf_counter()
            points = motion.plan(goal, constraints, None)
            check = policy.check(points, motion.joint_state_age_s(), motion.scene_age_s())
            plan_s.append(time.perf_counter() - began)
            if not check.ok:
                raise RuntimeError(f"the policy refused the approach to {name}: {check.reason}")
            sim_began, began = motion.sim_time(), time.perf_counter()
            motion.execute(points)
            wall_s += time.perf_counter() - began
            simulated_s += motion.sim_time() - sim_began
    step_s = wall_s / simulated_s
    detail.append(f"physics: {len(plan_s)} approaches, {simulated_s:.1f} s simulated in {wall_s:.2f} s wall: "
                  f"{1 / step_s:.1f}x real time; IK p90 {statistics.quantiles(ik_s, n=10)[8] * 1e3:.2f} ms, "
                  f"plan+check p90 {statistics.quantiles(plan_s, n=10)[8] * 1e3:.1f} ms")

    graph_s, graph_sim_s = [], []
    source = (EXAMPLES / "cap_to_hatch.json").read_text()
    for _ in range(max(1, args.repeats // 2)):
        cell = PhysicsCell(scene=scene, speed="max")
        executor = bt_exec.Executor(backend=cell)
        try:
            executor.start()
            began = time.perf_counter()
            answer = executor.submit(source)
            record = executor.run_until_complete(answer["plan_id"])
            graph_s.append(time.perf_counter() - began)
        finally:
            executor.close()
        if record.get("terminal") != "completed":
            raise RuntimeError(f"cap_to_hatch ended {record.get('terminal')}: {record.get('terminal_reason')}")
        graph_sim_s.append(cell.motion.sim_time())
    detail.append(f"physics: cap_to_hatch moved the arm for {statistics.median(graph_sim_s):.2f} s of simulated "
                  f"time in {statistics.median(graph_s):.2f} s wall (median of {len(graph_s)})")
    return [Figure("physics", NAMES[0], statistics.median(ik_s), bar=IK_BAR_S, on="ours", note=NO_RAW),
            Figure("physics", NAMES[1], statistics.median(plan_s), bar=PLAN_BAR_S, on="ours", note=NO_RAW),
            Figure("physics", NAMES[2], step_s, bar=STEP_BAR_S, on="ours", note=NO_RAW),
            Figure("physics", NAMES[3], statistics.median(graph_s), bar=GRAPH_BAR_S, on="ours", note=NO_RAW)]


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], repeats=5, quick_repeats=1,
                      quick_help="smoke run: one pass over the places, one graph run")
    detail: list[str] = []
    return report("physics", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
