"""``run --dry-run``: every way a plan can end, each path run on the sim (or, with ``--backend physics``, in the cell
simulated in MuJoCo at full speed), printed one line a path."""
from __future__ import annotations

import argparse

import bt_exec

from ..compilers import dialect_of
from ..terminal.render import one_line, printable
from .btcpp_options import blackboard_seeds
from .console import EXIT_OK, CommandError
from .inputs import label, read_plan


def dry_run_command(args: argparse.Namespace) -> int:
    """Explore the plan's paths and print where each ends; exit 0 once explored, whatever they end in."""
    source, plan = read_plan(args, "run")
    kind = dialect_of(plan)
    physics = args.backend == "physics"
    if kind.needs_scene and not args.scene and not physics:
        raise CommandError(f"a {kind.name} plan runs in a scene: give --scene SCENE.json")
    catalog = kind.read_catalog(args.catalog) if args.catalog else None
    options = {kind.executor_option: catalog} if catalog is not None else {}
    scene = bt_exec.Scene.from_file(args.scene) if kind.needs_scene and args.scene else None
    cell = _cell_maker(args, kind, scene, catalog) if physics else None
    answer = bt_exec.dry_run(source, dialect=args.dialect, scene=scene, call_guard=args.guard, max_steps=args.max_steps,
                             blackboard=blackboard_seeds(args), cell=cell, **options)
    print(printable("\n".join(dry_run_lines(label(args.file), answer))))
    return EXIT_OK


def _cell_maker(args: argparse.Namespace, kind, scene, catalog):
    """What makes each path's cell: the Grant cell in MuJoCo at full speed, its poses ``--cell-poses``', its scene
    ``--scene``'s (or the cell's own)."""
    if not kind.needs_scene:
        raise CommandError(f"--backend physics runs Qwen3 step graphs of the Grant skills, not {kind.name} plans")
    if args.sim_script:
        raise CommandError("--sim-script goes with --backend sim: the physics cell's outcomes come from the physics")
    if args.record:
        raise CommandError("--record films a run, not a --dry-run")
    return lambda: bt_exec.PhysicsCell(poses=args.cell_poses, scene=scene, speed="max", skill_catalog=catalog)


def dry_run_lines(name: str, answer: dict) -> list[str]:
    """``path 2: op 3 (failure) -> failed at op 3: sim outcome failure``, one line a path, after a heading."""
    paths = answer["paths"]
    lines = [f"dry run of {name}: {len(paths)} path{'s' if len(paths) != 1 else ''}"
             + (f" ({answer['not_run']} more not run)" if answer["not_run"] else "")]
    ends: dict[tuple, int] = {}  # in a simulated cell, where a path ended: its number (the arm may end many alike)
    for path in paths:
        chose = path["chose"]
        how = "every op its usual outcome" if chose is None else f"op {one_line(chose['op_id'])} {chose['outcome']}"
        if "arm" in path:
            end_key = (path["outcome"], path.get("terminal"), tuple(path.get("steps", ())), repr(path["arm"]))
            if end_key in ends:
                lines.append(f"path {path['path']}: {how} -> ends as path {ends[end_key]}")
                continue
            ends[end_key] = path["path"]
        if "terminal" in path:
            steps = " -> ".join(map(one_line, path["steps"] + [path["terminal"] or "?"]))
            reason = path["terminal_reason"]
            end = f"{path['outcome']}, terminal {path['terminal']} ({steps})" + (f": {one_line(reason)}" if reason
                                                                                  else "")
        elif path["outcome"] == "tick_limit":
            end = "tick_limit: still running at the tick limit, cancelled (a loop that never ends)"
        else:
            failed = path["failed_op"]
            end = path["outcome"] + (f" at op {one_line(failed['op_id'])}: {one_line(failed['error'])}" if failed
                                     else "")
        lines.append(f"path {path['path']}: {how} -> {end}")
        if "arm" in path:
            lines += arm_lines(path["arm"])
    return lines


def arm_lines(arm: dict) -> list[str]:
    """Where a path left the simulated arm, and each step the arm ended otherwise than usual, with its reason."""
    lines = [f"  the arm: tool at ({', '.join(f'{value:.3f}' for value in arm['tool'])}) m"]
    for decided in arm["decided"]:
        lines.append(f"  the arm ended op {one_line(decided['op_id'])} {one_line(decided['outcome'])}: "
                     f"{one_line(decided['error'] or '')}")
    return lines
