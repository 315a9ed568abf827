"""A released plan frees its memory at once: one executor runs plan after plan with flat memory, measured with
the garbage collector as configured and never forced; and pausing the collector to build a plan leaves other
garbage to be collected on schedule."""
import gc
import json
import os
import sys
import weakref

from rtdl_plans import do, envelope, par, seq

import bt_exec
from bt_exec import compilers
from bt_exec.compilers import gc_paused

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


def test_a_small_build_leaves_young_garbage_to_the_young_collections():
    """Pausing the collector for a build moves the young objects to the oldest generation only for a big build:
    other threads' garbage cycles made meanwhile stay young, for the next young collection to free."""

    class Cycle:
        pass

    with gc_paused():  # the collector is off in here: nothing frees the cycle before the pause ends
        bt_exec.load(PLAN)
        garbage = Cycle()
        garbage.itself = garbage
        freed = weakref.ref(garbage)
        del garbage
    gc.collect(1)  # the young generations only: what a busy process runs every few hundred allocations
    assert freed() is None


def test_the_pause_runs_a_full_collection_once_the_heap_grew_by_a_quarter(monkeypatch):
    """What a big build moves to the oldest generation is not counted by CPython's rule for full collections: the
    pause applies the rule to the whole heap itself, counting the heap only once pauses moved a sixteenth of it."""
    heap = {"blocks": 1_000_000, "full_collections": 7, "counted": 0}
    collected = []

    def count_blocks():
        heap["counted"] += 1
        return heap["blocks"]

    monkeypatch.setattr(sys, "getallocatedblocks", count_blocks)
    monkeypatch.setattr(gc, "get_stats", lambda: [{}, {}, {"collections": heap["full_collections"]}])
    monkeypatch.setattr(gc, "collect", lambda generation=2: collected.append(generation) or 0)
    monkeypatch.setattr(compilers, "_heap_at_full", {"blocks": 0, "collections": -1, "moved": 0, "just_moved": 0})
    compilers._collect_when_grown()  # the heap now is the mark
    heap["blocks"] = 1_300_000
    compilers._collect_when_grown()  # grown, but no pause moved anything since: not counted
    assert collected == [] and heap["counted"] == 1
    compilers._heap_at_full["moved"] = 70_000
    heap["blocks"] = 1_240_000
    compilers._collect_when_grown()
    assert collected == [] and heap["counted"] == 2
    compilers._heap_at_full["moved"] = 70_000
    heap["blocks"] = 1_260_000
    compilers._collect_when_grown()
    assert collected == [2]
    compilers._heap_at_full["moved"] = 70_000
    heap.update(blocks=1_600_000, full_collections=8)  # CPython ran one itself: the mark moves, nothing is run
    compilers._collect_when_grown()
    assert collected == [2]


def test_a_pause_moving_a_big_build_old_counts_it_from_the_pause_after_next(monkeypatch):
    """What ``gc_paused`` moved to the oldest generation is what makes a pause count the heap again: from the
    pause after the next one, as the next one mostly builds on it."""
    gc.collect()
    monkeypatch.setattr(compilers, "_heap_at_full", {"blocks": sys.getallocatedblocks(), "moved": 0, "just_moved": 0,
                                                     "collections": gc.get_stats()[2]["collections"]})
    with gc_paused():
        kept = [[index] for index in range(5_000)]
    assert compilers._heap_at_full["moved"] == 0 and compilers._heap_at_full["just_moved"] >= len(kept)
    with gc_paused():
        pass
    assert compilers._heap_at_full["moved"] >= len(kept) and compilers._heap_at_full["just_moved"] == 0


def test_a_plan_compiled_after_its_load_is_not_walked_by_a_full_collection_between(monkeypatch):
    """The compile's pause does not look at what the load's pause just moved (the plan, alive: a full collection
    frees none of it); the pause after it does, so a heap grown by a quarter is still collected."""
    plan_text = json.dumps(envelope(seq(*[par(*[do(f"call {branch}.{n}", cap="sim.act", args={"n": n})
                                                 for n in range(20)]) for branch in range(100)])))
    gc.collect()
    monkeypatch.setattr(compilers, "_heap_at_full", {"blocks": 1_000, "moved": 0, "just_moved": 0,
                                                     "collections": gc.get_stats()[2]["collections"]})
    full_collections = []

    def count_full(phase, info):
        if phase == "start" and info["generation"] == 2:
            full_collections.append(phase)

    gc.callbacks.append(count_full)
    try:
        plan = bt_exec.load(plan_text)
        bt_exec.compile_plan(plan)
        assert full_collections == []
        with gc_paused():
            pass
        assert len(full_collections) == 1
    finally:
        gc.callbacks.remove(count_full)
