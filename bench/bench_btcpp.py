"""bt_exec vs raw py_trees on BehaviorTree.CPP XML: loading, validating and compiling a 10,000-node tree.

Run from the repository root::

    python bench/bench_btcpp.py            # full run (about 20 s on 2 cores)
    python bench/bench_btcpp.py --quick    # smoke run for CI (about 5 s)

Figures:

1. Load + validate + compile a 10,000-node BT XML tree: ``bt_exec.load(text)`` + ``bt_exec.validate(plan)`` +
   ``bt_exec.compile_plan(plan)`` vs building the raw tree of the same shape in plain py_trees. The tree is a
   root ``Sequence`` of 10 ``Parallel``s (``success_count`` 10) of 10 ``Sequence``s of compact leaves
   (``<MoveTo name="step N" step="N" goal="{goal}"/>``: a literal port and a blackboard one), one node per op;
   the raw tree is ``Sequence(memory=True)``, ``Parallel(SuccessOnAll)`` and ``behaviours.Success``, one
   behaviour per node. Gated at 2.5.
1b. The same validated and compiled against a TreeNodesModel catalog declaring the leaf and its ports
   (``step`` an int: each leaf's ports checked and its arg typed), vs the same raw build (info).

Method: as bench_rtdl's figure 4: each repeat times every side once, in an order rotating from repeat to
repeat, each sample after ``gc.collect()`` (GC stays enabled); the table shows the median of each side and the
median of the per-repeat ratios.
"""
from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable

import py_trees
from py_trees.common import ParallelPolicy

from benchlib import Figure, parse_args, report
import bt_exec
from bt_exec.compilers.btcpp.catalog import NodeCatalog

BARS = {"compile": 2.5}
WIDTH = 10
NODES = 10_000
CATALOG = NodeCatalog.from_text(
    '<TreeNodesModel><Action ID="MoveTo"><input_port name="step" type="int"/><input_port name="goal"/>'
    '</Action></TreeNodesModel>')


def leaves_per_branch(nodes: int) -> list[int]:
    """How many leaves each of the WIDTH * WIDTH inner sequences holds, ``nodes`` nodes in all."""
    leaves = nodes - 1 - WIDTH - WIDTH * WIDTH
    per, extra = divmod(leaves, WIDTH * WIDTH)
    return [per + (branch < extra) for branch in range(WIDTH * WIDTH)]


def tree_xml(nodes: int) -> str:
    """The benchmark tree as BT.CPP 4 XML."""
    counts = iter(leaves_per_branch(nodes))
    step = iter(range(1, nodes + 1))
    parts = ['<root BTCPP_format="4"><BehaviorTree ID="Bench"><Sequence name="bench">']
    for _ in range(WIDTH):
        parts.append(f'<Parallel success_count="{WIDTH}" failure_count="1">')
        for _ in range(WIDTH):
            parts.append("<Sequence>")
            parts.extend(f'<MoveTo name="step {n}" step="{n}" goal="{{goal}}"/>'
                         for n in (next(step) for _ in range(next(counts))))
            parts.append("</Sequence>")
        parts.append("</Parallel>")
    parts.append("</Sequence></BehaviorTree></root>")
    return "".join(parts)


def raw_tree(nodes: int) -> py_trees.behaviour.Behaviour:
    """The same shape as plain py_trees behaviours, one per node."""
    counts = iter(leaves_per_branch(nodes))
    step = iter(range(1, nodes + 1))
    root = py_trees.composites.Sequence("bench", memory=True)
    for p in range(WIDTH):
        parallel = py_trees.composites.Parallel(f"parallel {p}", policy=ParallelPolicy.SuccessOnAll())
        for s in range(WIDTH):
            sequence = py_trees.composites.Sequence(f"sequence {p}.{s}", memory=True)
            sequence.add_children([py_trees.behaviours.Success(f"step {next(step)}") for _ in range(next(counts))])
            parallel.add_child(sequence)
        root.add_child(parallel)
    return root


def sample(run: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def load_validate_compile(repeats: int) -> dict[str, list[float]]:
    text = tree_xml(NODES)
    plan = bt_exec.load(text)
    assert plan.op_count == NODES, plan.op_count

    def ours(catalog=None):
        def run():
            loaded = bt_exec.load(text)
            assert bt_exec.validate(loaded, catalog=catalog).ok
            bt_exec.compile_plan(loaded, catalog)
        return run

    sides = {"xml": ours(), "catalog": ours(CATALOG), "raw": lambda: raw_tree(NODES)}
    names = list(sides)
    times: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeats):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(sample(sides[name]))
    return times


def figure(name: str, times: dict[str, list[float]], ours: str, bar: float | None) -> Figure:
    return Figure("btcpp", name, ours_s=statistics.median(times[ours]), raw_s=statistics.median(times["raw"]),
                  ratio=statistics.median(o / r for o, r in zip(times[ours], times["raw"])), bar=bar,
                  ours_min_s=min(times[ours]), raw_min_s=min(times["raw"]))


def figures(args, detail: list[str] | None = None) -> list[Figure]:
    times = load_validate_compile(args.repeats)
    if detail is not None:
        detail.append(f"btcpp: {args.repeats} repeats; a {NODES:,}-node tree of {len(tree_xml(NODES)):,} bytes")
    return [figure("1  10k nodes load+validate+compile, BT XML", times, "xml", BARS["compile"]),
            figure("1b same, TreeNodesModel catalog", times, "catalog", None)]


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], repeats=15, quick_repeats=5,
                      quick_help="a smoke run (fewer repeats), as CI runs it")
    detail: list[str] = []
    return report("btcpp", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
