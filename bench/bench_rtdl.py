"""bt_exec vs raw py_trees: three cost figures for RTDL plans, each a ratio against raw py_trees.

Run from the repository root::

    python bench/bench_rtdl.py            # full run (about 40 s on 2 cores)
    python bench/bench_rtdl.py --quick    # smoke run for CI (about 15 s)

Figures (ratio = ours / raw py_trees; lower is better; "ops" counts every node, the root included):

1. Tick cost. A plan whose root sequence holds do ops, one op in the middle made long-running
   by a SimBackend script (``{"ops": {"<op id>": {"duration_s": 3600}}}``), ticked until steady
   (that op running). One ``Executor.tick_once()`` vs one ``py_trees.trees.BehaviourTree.tick()``
   on the equivalent raw tree (``Sequence(memory=True)`` of ``behaviours.Success`` with one
   ``behaviours.Running`` at the same place, also ticked to steady state). Gated on the flat
   1000-op plan; also shown for a nested shape (sequence of parallels of sequences, 1000 ops;
   raw: ``Parallel(SuccessOnAll)``) and for flat plans of 100 and 10,000 ops: our cost follows
   the running ops, not the tree size.
2. Load to plan_complete, 2000 instant ops (root sequence + 2000 do ops). ``ex.submit(text)``
   + ``ex.run_until_complete(plan_id)`` on a fresh ``Executor()`` (the sim answers every call
   at once) vs building the raw tree (``Sequence`` of 2000 ``Success``) + ``BehaviourTree.tick()``
   until SUCCESS.
3. Load + validate + compile a 10,000-op nested plan: ``bt_exec.load(text)`` +
   ``bt_exec.validate(plan)`` + ``bt_exec.compile_plan(plan)`` vs building the raw py_trees tree
   of the same shape (10,000 behaviours). Measured for the nested-tree (envelope) input and
   for the wire-arena input of the same plan.

Method: each figure is measured ``--repeats`` times; within a repeat ours and raw run back to
back in alternating order, each after ``gc.collect()`` (GC stays enabled). The table (the one
of ``benchlib``, as every bench script prints) shows the median time of each side and the median
of the per-repeat ratios (``--json`` also has the minima). A gated row FAILs when that ratio
exceeds its bar; the script then exits 1.
"""
from __future__ import annotations

import gc
import json
import statistics
import sys
import time

import py_trees
from py_trees.common import ParallelPolicy, Status

from benchlib import Figure, fmt_time, parse_args, report
import bt_exec

# figure -> (bar, target) on the ratio ours / raw
BARS = {"tick": (1.0, 0.25), "instant": (5.0, 2.0), "compile": (10.0, 3.0)}

# --- plan shapes --------------------------------------------------------------------
# A spec is "do", "long" (the one long-running do op), or ("sequence" | "parallel", [children]).


def flat(n_ops: int, long_op: bool = True) -> tuple:
    """A root sequence of n_ops - 1 do ops; the middle one long-running if ``long_op``."""
    leaves = ["do"] * (n_ops - 1)
    if long_op:
        leaves[len(leaves) // 2] = "long"
    return ("sequence", leaves)


def nested(n_ops: int, long_op: bool = True, width: int = 10) -> tuple:
    """Root sequence of ``width`` parallels of ``width`` sequences of do ops; n_ops in all."""
    n_do = n_ops - 1 - width - width * width
    per, extra = divmod(n_do, width * width)
    branches = [["do"] * (per + (i < extra)) for i in range(width * width)]
    if long_op:
        middle = branches[width * width // 2 + width // 2]
        middle[len(middle) // 2] = "long"
    return ("sequence", [("parallel", [("sequence", branches[p * width + s]) for s in range(width)])
                         for p in range(width)])


def preorder(spec):
    stack = [spec]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, tuple):
            stack.extend(reversed(node[1]))


def count_ops(spec) -> int:
    return sum(1 for _ in preorder(spec))


def long_op_id(spec) -> str:
    """The op id a fresh executor gives the long op (tree plans are numbered 1, 2, ... in pre-order)."""
    return str(next(i for i, node in enumerate(preorder(spec), 1) if node == "long"))


def to_envelope(spec) -> str:
    counter = iter(range(1, 1 << 30))

    def node(s):
        i = next(counter)
        if isinstance(s, tuple):
            return {"op": s[0], "op_id": 0, "description": f"{s[0]} {i}", "children": [node(c) for c in s[1]]}
        return {"op": "do", "op_id": 0, "description": f"step {i}", "cap": "sim_robot.move_step", "args": {"step": i}}

    return json.dumps({"content": "benchmark plan", "rtdl_description": "benchmark", "rtdl": node(spec),
                       "task_update": None})


def to_arena(spec) -> str:
    nodes = []

    def node(s) -> int:
        index = len(nodes)
        nodes.append(None)
        op_id = str(index + 1)
        if isinstance(s, tuple):
            children = [node(c) for c in s[1]]
            nodes[index] = {"node_kind": 0 if s[0] == "sequence" else 1, "children": children, "op_id": op_id,
                            "description": f"{s[0]} {op_id}"}
        else:
            nodes[index] = {"node_kind": 2, "children": [], "op_id": op_id, "description": f"step {op_id}",
                            "call": {"call_id": f"1:{index}", "provider_id": "sim_robot",
                                     "contract_id": "robonix/sim_robot/move_step",
                                     "args_json": json.dumps({"step": index + 1})}}
        return index

    node(spec)
    return json.dumps({"plan_id": "1", "session_id": "bench", "round": 1, "root_index": 0, "nodes": nodes})


def to_raw(spec) -> py_trees.behaviour.Behaviour:
    """The same shape as plain py_trees behaviours, one per op."""
    counter = iter(range(1, 1 << 30))

    def node(s):
        name = f"op{next(counter)}"
        if s == "do":
            return py_trees.behaviours.Success(name)
        if s == "long":
            return py_trees.behaviours.Running(name)
        if s[0] == "sequence":
            composite = py_trees.composites.Sequence(name, memory=True)
        else:
            composite = py_trees.composites.Parallel(name, policy=ParallelPolicy.SuccessOnAll())
        composite.add_children([node(c) for c in s[1]])
        return composite

    return node(spec)


# --- measuring ----------------------------------------------------------------------

def timed(fn, loops: int = 1, setup=None) -> float:
    """Seconds per call of fn() (or fn(setup()), setup untimed), over ``loops`` calls, after gc.collect()."""
    arg = setup() if setup else None
    gc.collect()
    start = time.perf_counter()
    for _ in range(loops):
        fn(arg) if setup else fn()
    return (time.perf_counter() - start) / loops


def compare(repeats: int, ours, raw, ours_loops: int = 1, raw_loops: int = 1, ours_setup=None) -> dict:
    """Alternate ours/raw ``repeats`` times; medians, minima and the median per-repeat ratio."""
    ours_t, raw_t = [], []
    for r in range(repeats):
        if r % 2:
            raw_t.append(timed(raw, raw_loops))
            ours_t.append(timed(ours, ours_loops, ours_setup))
        else:
            ours_t.append(timed(ours, ours_loops, ours_setup))
            raw_t.append(timed(raw, raw_loops))
    return {"ours": statistics.median(ours_t), "ours_min": min(ours_t), "raw": statistics.median(raw_t),
            "raw_min": min(raw_t), "ratio": statistics.median(o / r for o, r in zip(ours_t, raw_t))}


# --- the figures --------------------------------------------------------------------

def tick_cost(spec, repeats: int) -> dict:
    n = count_ops(spec)
    ex = bt_exec.Executor(backend=bt_exec.SimBackend({"ops": {long_op_id(spec): {"duration_s": 3600}}}))
    answer = ex.submit(to_envelope(spec))
    assert answer["accepted"], answer["message"]
    for _ in range(3):
        ex.tick_once()
    ops = ex.get_plan_status(answer["plan_id"])["ops"]
    running = [op["op_id"] for op in ops if op["kind"] == "do" and op["state"] == "running"]
    assert running == [long_op_id(spec)], f"not steady: running do ops {running}"

    root = to_raw(spec)
    tree = py_trees.trees.BehaviourTree(root)
    for _ in range(3):
        tree.tick()
    assert root.status == Status.RUNNING
    assert [b.name for b in root.iterate() if b.status == Status.RUNNING and not b.children] == \
        [f"op{long_op_id(spec)}"], "raw tree not steady"
    result = compare(repeats, ex.tick_once, tree.tick, ours_loops=2000, raw_loops=max(20, 200_000 // n))
    ex.close(wait_ms=0)
    return result


def load_to_complete(n_do: int, repeats: int) -> dict:
    spec = flat(n_do + 1, long_op=False)
    text = to_envelope(spec)

    def ours(ex):
        answer = ex.submit(text)
        assert ex.run_until_complete(answer["plan_id"])["outcome"] == "succeeded"

    def raw():
        root = to_raw(spec)
        tree = py_trees.trees.BehaviourTree(root)
        while root.status != Status.SUCCESS:
            tree.tick()

    return compare(repeats, ours, raw, ours_setup=bt_exec.Executor)  # a fresh Executor each time, made untimed


def load_validate_compile(text: str, spec, repeats: int) -> dict:
    def ours():
        plan = bt_exec.load(text)
        assert bt_exec.validate(plan).ok
        bt_exec.compile_plan(plan)

    return compare(repeats, ours, lambda: to_raw(spec))


# --- report -------------------------------------------------------------------------

def _figure(name: str, figure: str | None, r: dict) -> Figure:
    bar, target = BARS[figure] if figure else (None, None)
    return Figure("rtdl", name, ours_s=r["ours"], raw_s=r["raw"], ratio=r["ratio"], bar=bar, target=target,
                  ours_min_s=r["ours_min"], raw_min_s=r["raw_min"])


def figures(args, detail: list[str] | None = None) -> list[Figure]:
    """The seven figures (see the module doc); ``detail`` gets the tick-cost scaling line."""
    repeats = args.repeats
    flat_ticks = {n: tick_cost(flat(n), repeats * 2) for n in (100, 1000, 10_000)}
    spec = nested(10_000, long_op=False)
    result = [
        _figure("1  tick, flat 1000 ops", "tick", flat_ticks[1000]),
        _figure("1b tick, nested 1000 ops", "tick", tick_cost(nested(1000), repeats * 2)),
        _figure("1c tick, flat 100 ops", None, flat_ticks[100]),
        _figure("1c tick, flat 10000 ops", None, flat_ticks[10_000]),
        _figure("2  2000 instant ops, load->complete", "instant", load_to_complete(2000, repeats)),
        _figure("3  10k ops load+validate+compile, tree", "compile",
                load_validate_compile(to_envelope(spec), spec, repeats)),
        _figure("3b 10k ops load+validate+compile, arena", "compile",
                load_validate_compile(to_arena(spec), spec, repeats)),
    ]
    if detail is not None:
        costs = [flat_ticks[n]["ours"] for n in (100, 1000, 10_000)]
        detail.append(f"rtdl: {repeats} repeats ({repeats * 2} for ticks); our tick cost at 100 / 1000 / 10000 ops: "
                      f"{' / '.join(fmt_time(c) for c in costs)} (10000 vs 100: {costs[2] / costs[0]:.2f}x; "
                      f"raw py_trees: {flat_ticks[10_000]['raw'] / flat_ticks[100]['raw']:.0f}x)")
    return result


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], 9, 3, "few repeats: a smoke run (CI)")
    detail: list[str] = []
    return report("rtdl", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
