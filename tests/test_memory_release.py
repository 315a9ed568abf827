"""A released plan frees its memory at once: one executor runs plan after plan with flat memory, measured with
the garbage collector as configured and never forced (no ``gc.collect()`` here)."""
import os
import weakref

from rtdl_plans import do, envelope, par, seq

import bt_exec

PLANS = 500
# Ids in pre-order: 1 the root sequence, then each parallel followed by its four calls.
PLAN = envelope(seq(*[par(*[do(f"call {branch}.{n}", cap="sim.act", args={"n": n}) for n in range(4)],
                          description=f"branch {branch}") for branch in range(8)]))
OPS = 1 + 8 * 5
RSS_GROWTH_BOUND = 8_000_000  # bytes, from plan 100 to plan 500; unfreed trees of this size grow past 30 MB


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_one(ex: bt_exec.Executor, number: int, released: weakref.WeakSet) -> None:
    """One plan, through the paths that add links to a tree: stop guards, pauses with paused calls, cancels."""
    plan_id = ex.submit(PLAN)["plan_id"]
    root = ex.behaviour_trees()[plan_id]
    released.add(root.hooks)  # the plan's run, which holds its records
    released.update(root.iterate())
    ops = [op["op_id"] for op in ex.get_plan_status(plan_id)["ops"]]
    if number % 5 == 0:
        ex.stop_plan_at(plan_id, ops[7], "on_complete")  # a guard placed, then fired: the plan ends cancelled
    if number % 7 == 0:
        ex.stop_plan_at(plan_id, ops[2], "on_enter", action="pause")
        ex.tick_once()
        assert ex.get_plan_status(plan_id)["paused"]
        ex.resume_plan(plan_id)
    if number % 11 == 0:
        ex.tick_once()
        ex.cancel_plan(plan_id)
    record = ex.run_until_complete(plan_id, timeout=30)
    assert record["outcome"] in ("succeeded", "cancelled")


def test_plan_after_plan_frees_each_released_tree_without_a_collection():
    ex = bt_exec.Executor(bt_exec.SimBackend({"default": {"outcome": "success", "duration_s": 0},
                                              "caps": {"sim.slow": {"duration_s": 60}}}, history=100),
                          keep_finished=5)
    ex.subscribe(lambda event: None)  # events are built and published, as behind any door
    released: weakref.WeakSet = weakref.WeakSet()
    most_alive = 0
    try:
        for number in range(PLANS):
            run_one(ex, number, released)
            most_alive = max(most_alive, len(released))
            if number == 100:
                rss_at_100 = rss_bytes()
        rss_at_end = rss_bytes()
    finally:
        ex.close()
    assert most_alive == 0, f"{most_alive} behaviours and runs of released plans were still alive after a plan ended"
    assert rss_at_end - rss_at_100 < RSS_GROWTH_BOUND, (rss_at_100, rss_at_end)


def test_a_tree_a_viewer_holds_after_release_stays_whole_until_dropped():
    """A viewer (the ROS tree watcher) may hold a finished plan's root to show it a while: parents still answer."""
    ex = bt_exec.Executor(bt_exec.SimBackend({"default": {"outcome": "success", "duration_s": 0}}))
    plan_id = ex.submit(PLAN)["plan_id"]
    root = ex.behaviour_trees()[plan_id]
    ex.stop_plan_at(plan_id, "3", "on_complete")
    assert ex.run_until_complete(plan_id)["outcome"] == "cancelled"
    nodes = list(root.iterate())
    assert len(nodes) == OPS + 1, "every op and the guard placed above op 3"
    assert all(child.parent is node for node in nodes for child in node.children)
    guard = next(node for node in nodes if node.name == "stop point at [3]")
    assert guard.feedback_message == "stop on_complete fired"
    tree = weakref.ref(root)
    del root, nodes, guard
    assert tree() is None, "dropped by its last holder, the tree is freed at once"
