"""``run --dry-run``: every way a plan can end, each path run on the sim, printed one line a path."""
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
    if kind.needs_scene and not args.scene:
        raise CommandError(f"a {kind.name} plan runs in a scene: give --scene SCENE.json")
    catalog = kind.read_catalog(args.catalog) if args.catalog else None
    options = {kind.executor_option: catalog} if catalog is not None else {}
    scene = bt_exec.Scene.from_file(args.scene) if kind.needs_scene else None
    answer = bt_exec.dry_run(source, dialect=args.dialect, scene=scene, call_guard=args.guard, max_steps=args.max_steps,
                             blackboard=blackboard_seeds(args), **options)
    print(printable("\n".join(dry_run_lines(label(args.file), answer))))
    return EXIT_OK


def dry_run_lines(name: str, answer: dict) -> list[str]:
    """``path 2: op 3 (failure) -> failed at op 3: sim outcome failure``, one line a path, after a heading."""
    paths = answer["paths"]
    lines = [f"dry run of {name}: {len(paths)} path{'s' if len(paths) != 1 else ''}"
             + (f" ({answer['not_run']} more not run)" if answer["not_run"] else "")]
    for path in paths:
        chose = path["chose"]
        how = "every op its usual outcome" if chose is None else f"op {one_line(chose['op_id'])} {chose['outcome']}"
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
    return lines
