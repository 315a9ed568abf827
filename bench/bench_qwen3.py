"""Qwen3 step-graph validation: a 256-step Grant graph with dense cycles in under 50 ms, linear growth.

Run from the repository root::

    python bench/bench_qwen3.py            # full run (about 40 s on 2 cores)
    python bench/bench_qwen3.py --quick    # smoke run for CI, sizes up to 1024 (about 10 s)

What is timed: ``bt_exec.validate(json_text, scene=scene_dict)``, which is everything a submit pays
before motion: parsing the JSON text, loading the graph (``compilers/qwen3.py``), loading the
``grant`` catalog and the scene, and the full static verification (``compilers/qwen3_check.py``),
including the symbolic fixed points (``compilers/symbolic.py`` states propagated along every path,
from every start and from the scene). Generating the JSON text is not timed.

The graphs (``grant_graph(n)``): a chain of blocks, every one starting in the same symbolic state
(vacuum in its socket, hand empty):

- cap blocks (12 steps): grab(vacuum) -> grab(cap) -> transfer(cap, work) -> release(cap, hatch_seat)
  -> transfer or move_to_storage(vacuum) -> release or dock_tool(vacuum, vacuum_socket), each motion
  step with an inspect_state recovery step (grasp_failed / failed / timeout -> inspect_state, whose
  holding / empty / placed lead back to a retry, on to the next step, or to another block's start,
  earlier or later, and whose unknown goes to operator_required);
- screw blocks (4 steps): inspect_state(screw_k) -> detect(screw_k) -> dispense(hole_k) ->
  handoff_screw(screw_k, hole_k), with failed / timeout looping back to the inspection and
  not_found jumping to an earlier block;
- single approach(work) steps, whose timeout jumps to an earlier block;
- one shared inspect_state(vacuum) that collisions lead to, all of whose outcomes are terminals.

Every motion step maps success, failed, timeout and collision (and its extra outcome); every
inspect_state maps all four outcomes. So the graph is one big strongly connected tangle of recovery
loops (about 4.2 transitions a step), and it verifies ``ok`` (asserted), so the full path is timed.

Rows of the first table (all on 256 steps; the gated ones must stay under 50 ms):

- ``ok``: the graph against the scene it was planned on;
- ``replan_required, 1 step``: against a scene with the vacuum already on the flange, so the first
  grab(vacuum) may fail from this scene;
- ``replan_required, many steps``: against a scene where the hand holds the cap, so every grab and
  handoff until the cap is put down may fail (one issue, with its path from the entry, per step);
- ``invalid (never holds)``: one cap block grabs the cap while the vacuum is in its socket, a
  precondition that holds from no start (the symbolic fixed points still run in full);
- for information: a structural ``invalid`` (a failure edge to ``completed``, found before the
  fixed points), the edge-list form of the transitions, and ``catalog=`` a ``SkillCatalog`` loaded
  once, as the Executor calls it (``validate`` with no catalog reads and schema-checks the ``grant``
  catalog file on every call).

Raw py_trees reference (same run): raw py_trees has no plan format and no static check, so the
nearest thing it pays before motion is building the tree and ticking it: ``raw_reference(256)``
builds a ``Sequence(memory=True)`` of 255 ``behaviours.Success`` (256 behaviours, one per step)
in a ``BehaviourTree`` and ticks it to SUCCESS. Every 256-step row shows it and ratio = ours /
raw. It is a scale, not a like-for-like comparison: our side also parses 50 KiB of JSON, checks
the scene and proves every path of a cyclic graph, which a raw tree of 256 behaviours does not
express. The bars stay on our own time (50 ms), not on the ratio.

Scaling: the same construction with 32 ... 2048 steps (``bt_exec.Limits(max_graph_steps=...)`` above
256), each against the scene it was planned on (``ok``) and against the scene where the hand holds the
cap (``replan_required``, its issue count growing with the graph). Time per element (steps +
transitions) should not grow: the script FAILs when it grows more than 2x from the smallest graph to
the largest, or from 256 steps to the largest (the fixed costs, catalog and scene, make it fall at
first, which would hide growth from the smallest). Each size also shows its time against the
previous size's: about 2x per doubling is linear, 4x quadratic.

Method: each figure is timed ``--repeats`` times (one call each, after ``gc.collect()``; GC stays
enabled), after one untimed warm-up call; on the 256-step rows each repeat also times the raw
reference, ours and raw back to back in alternating order. The table (``benchlib``'s, as every
bench script prints) shows the medians and the median of the per-repeat ratios (``--json`` also
has the minima); the issue counts and the growth table follow it. The 256-step rows have a bar of
50 ms on our median; the growth figures a bar of 2x; a missed bar makes the script exit 1.
"""
from __future__ import annotations

import gc
import json
import random
import statistics
import sys
import time

import networkx as nx
import py_trees

from benchlib import Figure, fmt_time, parse_args, report
import bt_exec

BAR_S = 0.050             # the 256-step graph, every verdict
SCALING_BAR = 2.0         # time per (steps + transitions), largest graph vs smallest
SIZES = (32, 64, 128, 256, 512, 1024, 2048)
SCREWS = 10
SCENE_REVISION = 7


# --- the scene and the graphs -------------------------------------------------------

def grant_scene(vacuum_on_flange: bool = False, holding_cap: bool = False) -> dict:
    """The scene every graph is planned on; the two flags make it another scene (replan_required)."""
    state = {"vacuum": "patron" if vacuum_on_flange else "vacuum_socket", "cap": "cap_storage"}
    return {"scene_revision": SCENE_REVISION,
            "objects": ["vacuum", "cap"] + [f"screw_{k}" for k in range(1, SCREWS + 1)],
            "targets": ["work", "hatch_seat", "vacuum_socket", "cap_storage"]
                       + [f"hole_{k}" for k in range(1, SCREWS + 1)],
            "state": state, "holding": "cap" if holding_cap else None}


class _Builder:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.plan: list[dict] = []
        self.transitions: dict[str, dict] = {}
        self.starts: list[str] = []   # block starts: every one entered with vacuum stowed, hand empty

    def step(self, step_id: str, skill: str, **params) -> str:
        self.plan.append({"id": step_id, "skill": skill, **params})
        return step_id

    def edges(self, step_id: str, **by_event) -> None:
        self.transitions[step_id] = by_event

    def back(self, block: int) -> str:
        """The start of an earlier block (or this one)."""
        return self.starts[self.rng.randrange(block + 1)]

    def anywhere(self, block: int, n_blocks: int) -> str:
        """The start of any block, earlier or later (a later one only once it exists: patched below)."""
        target = self.rng.randrange(n_blocks)
        return self.starts[target] if target <= block else f"@{target}"


def _block_sizes(n_steps: int) -> list[str]:
    """Block kinds that add up to n_steps - 1 (one step is the shared collision inspection)."""
    pattern = ("cap", "screw", "approach", "screw", "cap", "screw", "screw", "approach")
    size = {"cap": 12, "screw": 4, "approach": 1}
    left, kinds, i = n_steps - 1, [], 0
    while left > 0:
        kind = pattern[i % len(pattern)]
        i += 1
        if size[kind] <= left:
            kinds.append(kind)
            left -= size[kind]
        elif left < 4:
            kinds += ["approach"] * left
            left = 0
    return kinds


def grant_graph(n_steps: int, seed: int = 3, variant: str = "ok") -> dict:
    """A valid Grant graph of exactly n_steps steps with dense recovery cycles (see the module doc).

    variant "never_holds": the second cap block grabs the cap first (vacuum in its socket): invalid,
    found by the symbolic fixed point. variant "failure_to_completed": one failed edge leads to
    ``completed``: invalid, found before the fixed point.
    """
    b = _Builder(seed)
    kinds = _block_sizes(n_steps)
    if kinds[0] != "cap":
        raise ValueError("the construction starts with a cap block")
    n_blocks = len(kinds)
    crash = "c_inspect"  # where collisions lead: an inspection whose outcomes are all terminals
    b.starts = [f"b{i}_start" for i in range(n_blocks)]
    cap_blocks = 0
    for i, kind in enumerate(kinds):
        nxt = b.starts[i + 1] if i + 1 < n_blocks else "completed"
        p = f"b{i}"
        if kind == "cap":
            cap_blocks += 1
            first = "cap" if variant == "never_holds" and cap_blocks == 2 else "vacuum"
            s = {k: f"{p}_{k}" for k in ("grab_v", "grab_c", "move_c", "put_c", "move_v", "dock_v")}
            i_ = {k: f"{p}_{k}_inspect" for k in s}
            b.step(b.starts[i], "grab", object=first)                       # the block start is grab(vacuum)
            s["grab_v"] = b.starts[i]
            b.step(i_["grab_v"], "inspect_state", object="vacuum")
            b.step(s["grab_c"], "grab", args={"object": "cap"}, tool="vacuum")
            b.step(i_["grab_c"], "inspect_state", object="cap")
            b.step(s["move_c"], "transfer", object="cap", target="work")
            b.step(i_["move_c"], "inspect", object="cap")                  # the alias
            b.step(s["put_c"], "release", object="cap", target="hatch_seat")
            b.step(i_["put_c"], "inspect_state", object="cap")
            if cap_blocks % 2:
                b.step(s["move_v"], "transfer", object="vacuum", target="vacuum_socket")
                b.step(s["dock_v"], "release", object="vacuum", args={"target": "vacuum_socket"})
            else:
                b.step(s["move_v"], "move_to_storage", object="vacuum")
                b.step(s["dock_v"], "dock_tool", object="vacuum", target="vacuum_socket")
            b.step(i_["move_v"], "inspect_state", object="vacuum")
            b.step(i_["dock_v"], "inspect_state", object="vacuum")
            b.edges(s["grab_v"], success=s["grab_c"], grasp_failed=i_["grab_v"], timeout=i_["grab_v"],
                    failed="replan_required", collision=crash)
            b.edges(i_["grab_v"], holding=s["grab_c"], empty=s["grab_v"], placed=b.anywhere(i, n_blocks),
                    unknown="operator_required")
            b.edges(s["grab_c"], success=s["move_c"], grasp_failed=i_["grab_c"], timeout=i_["grab_c"],
                    failed="operator_required", collision="stop")
            b.edges(i_["grab_c"], holding=s["move_c"], empty=s["grab_c"], placed=s["grab_c"],
                    unknown="operator_required")
            b.edges(s["move_c"], success=s["put_c"], failed=i_["move_c"], timeout=i_["move_c"], collision=crash)
            b.edges(i_["move_c"], holding=s["move_c"], empty=s["grab_c"], placed=s["grab_c"], unknown="stop")
            b.edges(s["put_c"], success=s["move_v"], failed=i_["put_c"], timeout=i_["put_c"], collision="stop")
            b.edges(i_["put_c"], holding=s["put_c"], empty=s["move_v"], placed=s["move_v"], unknown="operator_required")
            b.edges(s["move_v"], success=s["dock_v"], failed=i_["move_v"], timeout=i_["move_v"], collision=crash)
            b.edges(i_["move_v"], holding=s["move_v"], empty=b.anywhere(i, n_blocks), placed=s["grab_v"],
                    unknown="operator_required")
            b.edges(s["dock_v"], success=nxt, failed=i_["dock_v"], timeout=i_["dock_v"], collision="stop")
            b.edges(i_["dock_v"], holding=s["move_v"], empty=nxt, placed=b.anywhere(i, n_blocks),
                    unknown="replan_required")
        elif kind == "screw":
            k = i % SCREWS + 1
            screw, hole = f"screw_{k}", f"hole_{k}"
            look, find, glue, hand = b.starts[i], f"{p}_detect", f"{p}_dispense", f"{p}_handoff"
            b.step(look, "inspect_state", object=screw)                        # a screw's presence is observed
            b.step(find, "detect", object=screw)
            b.step(glue, "dispense", target=hole)
            b.step(hand, "handoff_screw", object=screw, target=hole)
            b.edges(look, holding=find, empty=find, placed=b.anywhere(i, n_blocks), unknown="operator_required")
            b.edges(find, success=glue, not_found=b.back(i), failed=look, timeout=look, collision=crash)
            b.edges(glue, success=hand, failed=find, timeout=b.back(i), collision="stop")
            b.edges(hand, success=nxt, failed=look, timeout=look, collision=crash)
        else:
            b.step(b.starts[i], "approach", target="work")
            b.edges(b.starts[i], success=nxt, failed="replan_required", timeout=b.back(i), collision="stop")
    b.step(crash, "inspect_state", object="vacuum")
    b.edges(crash, holding="operator_required", empty="replan_required", placed="replan_required", unknown="stop")
    for mapped in b.transitions.values():   # forward jumps to blocks that did not exist yet when drawn
        for event, target in mapped.items():
            if target.startswith("@"):
                mapped[event] = b.starts[int(target[1:])]
    if variant == "failure_to_completed":
        b.transitions[b.starts[-1]]["failed"] = "completed"
    assert len(b.plan) == n_steps, (len(b.plan), n_steps)
    return {"status": "ok", "entry": b.starts[0], "scene_revision": SCENE_REVISION, "plan": b.plan,
            "transitions": b.transitions}


def as_edge_list(graph: dict) -> dict:
    return {**graph, "transitions": [{"from": s, "event": e, "to": t}
                                     for s, mapped in graph["transitions"].items() for e, t in mapped.items()]}


def shape(graph: dict) -> dict:
    """Steps, transitions, back edges and the largest strongly connected component (not timed)."""
    order = {step["id"]: i for i, step in enumerate(graph["plan"])}
    digraph = nx.DiGraph()
    digraph.add_nodes_from(order)
    n_edges = back = 0
    for source, mapped in graph["transitions"].items():
        for target in mapped.values():
            n_edges += 1
            if target in order:
                digraph.add_edge(source, target)
                back += order[target] <= order[source]
    largest = max(len(c) for c in nx.strongly_connected_components(digraph))
    return {"steps": len(order), "transitions": n_edges, "back_edges": back, "largest_scc": largest}


# --- measuring ----------------------------------------------------------------------

def raw_reference(n_behaviours: int):
    """Raw py_trees' nearest counterpart of validating an ``n``-step graph: build a tree of as many
    behaviours (a ``Sequence(memory=True)`` of ``n - 1`` ``Success``) and tick it to SUCCESS."""
    def build_and_tick():
        root = py_trees.composites.Sequence("root", memory=True)
        root.add_children([py_trees.behaviours.Success(f"step {i}") for i in range(1, n_behaviours)])
        tree = py_trees.trees.BehaviourTree(root)
        while root.status != py_trees.common.Status.SUCCESS:
            tree.tick()
    return build_and_tick


def _timed(fn) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(text: str, scene: dict, expect: str, repeats: int, limits=None, catalog=None, raw=None) -> dict:
    """Median and min of ``repeats`` validate calls; with ``raw``, the raw reference is timed in
    the same repeats, ours and raw back to back in alternating order (ratio: median per-repeat)."""
    report = bt_exec.validate(text, scene=scene, limits=limits, catalog=catalog)   # warm-up; the verdict check
    assert report.verdict == expect, (expect, report.verdict, [str(i) for i in report.issues[:5]])

    def ours():
        bt_exec.validate(text, scene=scene, limits=limits, catalog=catalog)

    times, raw_times = [], []
    if raw is not None:
        raw()  # warm-up
    for r in range(repeats):
        if raw is not None and r % 2:
            raw_times.append(_timed(raw))
        times.append(_timed(ours))
        if raw is not None and not r % 2:
            raw_times.append(_timed(raw))
    result = {"median": statistics.median(times), "min": min(times), "issues": len(report.issues),
              "codes": sorted({i.code for i in report.issues})}
    if raw is not None:
        result.update(raw=statistics.median(raw_times), raw_min=min(raw_times),
                      ratio=statistics.median(o / r for o, r in zip(times, raw_times)))
    return result


# --- report -------------------------------------------------------------------------

NO_RAW_GROWTH = "no raw py_trees counterpart: the growth of our own time per element (steps + transitions)"


def figures(args, detail: list[str] | None = None) -> list[Figure]:
    """The 256-step rows, each against raw py_trees, and the four growth figures (see the module
    doc); ``detail`` gets the graph's shape, the issue counts and the growth table."""
    detail = [] if detail is None else detail
    repeats = args.repeats
    sizes = SIZES[:-1] if args.quick else SIZES

    scene, on_flange, holding = grant_scene(), grant_scene(vacuum_on_flange=True), grant_scene(holding_cap=True)
    g256 = grant_graph(256)
    info = shape(g256)
    text = json.dumps(g256)
    raw = raw_reference(info["steps"])
    rows = [  # (label, bar or None, result)
        ("256 steps, ok", BAR_S, measure(text, scene, "ok", repeats, raw=raw)),
        ("256 steps, replan_required, 1 step", BAR_S, measure(text, on_flange, "replan_required", repeats, raw=raw)),
        ("256 steps, replan_required, many steps", BAR_S,
         measure(text, holding, "replan_required", repeats, raw=raw)),
        ("256 steps, invalid (never holds)", BAR_S,
         measure(json.dumps(grant_graph(256, variant="never_holds")), scene, "invalid", repeats, raw=raw)),
        ("256 steps, invalid (fail->completed)", None,
         measure(json.dumps(grant_graph(256, variant="failure_to_completed")), scene, "invalid", repeats, raw=raw)),
        ("256 steps, ok, edge-list transitions", None,
         measure(json.dumps(as_edge_list(g256)), scene, "ok", repeats, raw=raw)),
        ("256 steps, ok, catalog loaded once", None,
         measure(text, scene, "ok", repeats, catalog=bt_exec.SkillCatalog.named("grant"), raw=raw)),
    ]
    result = [Figure("qwen3", label, ours_s=r["median"], raw_s=r["raw"], ratio=r["ratio"], bar=bar, on="ours",
                     ours_min_s=r["min"], raw_min_s=r["raw_min"]) for label, bar, r in rows]

    detail.append(f"qwen3: networkx {nx.__version__}, {repeats} repeats; 256-step graph: {info['steps']} steps, "
                  f"{info['transitions']} transitions ({info['back_edges']} back edges), largest strongly connected "
                  f"component {info['largest_scc']} steps, {len(text) / 1024:.0f} KiB; raw py_trees: build + tick a "
                  f"tree of {info['steps']} behaviours")
    detail.append("qwen3 issues: " + "; ".join(f"{label.removeprefix('256 steps, ')} {r['issues']}"
                                               for label, _bar, r in rows))
    detail.append("qwen3 growth: 'ok' against the scene it was planned on; 'replan' against the scene where the hand "
                  "holds the cap; 'x prev': time against the previous size's")
    header = f"{'steps':>6} {'transitions':>11} {'steps+trans':>11} {'ok: median':>11} {'x prev':>6} " \
             f"{'per element':>11} {'replan: median':>14} {'x prev':>6} {'issues':>6} {'per element':>11}"
    detail.append(header)
    detail.append("-" * len(header))
    per_ok, per_replan, last = {}, {}, None
    for n in sizes:
        graph = grant_graph(n)
        g = shape(graph)
        limits = bt_exec.Limits(max_graph_steps=n) if n > 256 else None
        times = repeats if n <= 256 else max(3, repeats // (n // 256))
        text_n = json.dumps(graph)
        ok = measure(text_n, scene, "ok", times, limits)
        replan = measure(text_n, holding, "replan_required", times, limits)
        elements = g["steps"] + g["transitions"]
        per_ok[n], per_replan[n] = ok["median"] / elements, replan["median"] / elements
        grew = (f"{ok['median'] / last[0]:>5.2f}x", f"{replan['median'] / last[1]:>5.2f}x") if last else ("-", "-")
        last = ok["median"], replan["median"]
        detail.append(f"{n:>6} {g['transitions']:>11} {elements:>11} {fmt_time(ok['median']):>11} {grew[0]:>6} "
                      f"{fmt_time(per_ok[n]):>11} {fmt_time(replan['median']):>14} {grew[1]:>6} "
                      f"{replan['issues']:>6} {fmt_time(per_replan[n]):>11}")
    # Per element, the largest graph against the smallest, and against 256 steps (where the fixed costs,
    # the catalog and the scene, no longer hide the growth): more than SCALING_BAR is super-linear.
    for label, per in (("ok", per_ok), ("replan", per_replan)):
        for first in (sizes[0], 256):
            result.append(Figure("qwen3", f"growth per element, {label}, {first}->{sizes[-1]} steps",
                                 value=per[sizes[-1]] / per[first], unit="x", on="value", bar=SCALING_BAR,
                                 note=NO_RAW_GROWTH))
    return result


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], 21, 5, "few repeats, sizes up to 1024: a smoke run (CI)")
    detail: list[str] = []
    return report("qwen3", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
