"""Soak test: thousands of plans submitted, stopped and cancelled from several threads on a started executor.

Short form (CI: 1,000 plans, about 5 s on 2 cores)::

    python -m pytest -q tests/test_soak.py -s

Long form (N plans)::

    BT_EXEC_SOAK_PLANS=5000 python -m pytest -q tests/test_soak.py -s

Select or skip it with the ``soak`` marker (``-m soak``, ``-m "not soak"``). ``-s`` shows the figures.

Three submitter threads send RTDL trees (1 to 16 ops; sequences and parallels of do ops whose caps
the SimBackend script serves in 0 to 20 ms, some failing or timing out; a few plans use the
executor's builtins) while a stopper thread arms stop points (``stop_plan_at``, on_enter and
on_complete, on ops read from ``get_plan_status``) and a canceller thread cancels plans
(``cancel_plan``, directly and as a submitted meta op) and now and then everything
(``cancel_all``). The executor ticks in its own thread and keeps ``KEEP_FINISHED`` finished records.

Asserted at the end: no plan in flight (``get_all_plans`` count 0); every accepted plan emitted
``plan_started`` and exactly one ``plan_complete``, and no other plan did; every op of every
finished record is final or pending, never running; the backend has no call in flight; memory
(tracemalloc, current size once a warm-up batch has filled the finished table, against the size
after the whole run) grew by less than ``MEMORY_TOLERANCE``; the thread count is what it was after
the warm-up.
"""
import gc
import os
import random
import threading
import time
import tracemalloc

import pytest
from rtdl_plans import do, par, seq

import bt_exec
from bt_exec.errors import ControlError

PLANS = int(os.environ.get("BT_EXEC_SOAK_PLANS", "0") or 0) or 1000
KEEP_FINISHED = 200
WARM_UP = 250                 # plans run (and finished) before the first measurement: the finished table is full
MAX_IN_FLIGHT = 40            # submitters wait while this many plans are active
MEMORY_TOLERANCE = 1_000_000  # bytes the traced memory may grow by from the warm-up to the end
SEED = int(os.environ.get("BT_EXEC_SOAK_SEED", "6"))

SCRIPT = {"default": {"outcome": "success", "duration_s": 0.0},
          "caps": {"soak.instant": {"outcome": "success"},
                   "soak.quick": {"duration_s": 0.002},
                   "soak.short": {"duration_s": 0.008},
                   "soak.slow": {"duration_s": 0.02},
                   "soak.fails": {"outcome": "failure", "duration_s": 0.005, "error": "soak: scripted failure"},
                   "soak.times_out": {"outcome": "timeout", "duration_s": 0.004},
                   "soak.flaky": {"outcome": ["success", "failure", "success", "success", "failure", "success"],
                                  "duration_s": 0.003}}}
CAPS = ["soak.instant", "soak.quick", "soak.quick", "soak.short", "soak.short", "soak.slow", "soak.fails",
        "soak.times_out", "soak.flaky"]


def random_tree(rng: random.Random, budget: int) -> dict:
    """A tree of at most ``budget`` ops."""
    if budget <= 1 or rng.random() < 0.35:
        return do(f"act {rng.randrange(1000)}", cap=rng.choice(CAPS), args={"n": rng.randrange(100)})
    children, left = [], budget - 1
    while left > 0 and len(children) < 4:
        size = rng.randint(1, left)
        children.append(random_tree(rng, size))
        left -= size
    return (seq if rng.random() < 0.6 else par)(*children, description=f"group {rng.randrange(1000)}")


def random_plan(rng: random.Random, recent: list) -> dict:
    roll = rng.random()
    if roll < 0.03 and recent:  # a builtin cancelling an earlier plan from inside a plan
        return seq(do("look", cap="executor.builtin_get_all_plans"),
                   do("cancel another", cap="executor.builtin_cancel_plan",
                      args={"plan_id": rng.choice(recent), "wait_ms": rng.choice([0, 5])}))
    if roll < 0.05:
        return seq(do("list plans", cap="executor.builtin_get_all_plans"), do("work", cap=rng.choice(CAPS)))
    return random_tree(rng, rng.randint(1, 16))


class Tally:
    """What the event subscriber and the threads saw; per-plan counts in bytearrays (flat in memory)."""

    def __init__(self, plans: int, executor: bt_exec.Executor):
        self.lock = threading.Lock()
        self.executor = executor
        size = 4 * plans + 1000  # plan ids never exceed the number of submits
        self.started = bytearray(size)
        self.completed = bytearray(size)
        self.accepted = bytearray(size)
        self.events = self.node_states = 0
        self.ops = self.stops_armed = self.stops_fired = self.cancels = self.cancel_alls = 0
        self.meta_cancels = self.refused = self.cancelled_plans = self.failed_plans = 0
        self.bad_records: list[str] = []
        self.errors: list[str] = []

    def __call__(self, event: dict) -> None:  # in the ticking thread
        kind = event["event"]
        with self.lock:
            self.events += 1
            if kind == "node_state":
                self.node_states += 1
            elif kind == "plan_started":
                self.started[int(event["plan_id"])] += 1
            elif kind == "plan_complete":
                self.completed[int(event["plan_id"])] += 1
                self.cancelled_plans += event["cancelled"]
                self.failed_plans += event["any_failed"] and not event["cancelled"]
        if kind == "plan_complete":
            record = self.executor.get_plan_result(event["plan_id"])
            running = [op["op_id"] for op in record["ops"] if op["state"] not in FINAL_OR_PENDING]
            if running:
                with self.lock:
                    self.bad_records.append(f"plan {event['plan_id']}: ops {running} not final")
            if (record["cancel_reason"] or "").startswith("stop point"):
                with self.lock:
                    self.stops_fired += 1

    def add(self, name: str, amount: int = 1) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + amount)


FINAL_OR_PENDING = {"succeeded", "failed", "canceled", "timeout", "pending"}


def submitter(executor, tally, rng, count, recent, done):
    try:
        for _ in range(count):
            while executor.get_all_plans()["count"] >= MAX_IN_FLIGHT:
                time.sleep(0.002)
            answer = executor.submit(random_plan(rng, recent[-20:]))
            if not answer["accepted"]:
                tally.add("refused")
                continue
            tally.accepted[int(answer["plan_id"])] = 1
            tally.add("ops", answer["op_count"])
            recent.append(answer["plan_id"])
            del recent[:-200]
    except Exception as exc:  # reported by the main thread
        tally.errors.append(f"submitter: {type(exc).__name__}: {exc}")
    finally:
        done.set()


def stopper(executor, tally, rng, recent, stop):
    while not stop.is_set():
        try:
            plans = executor.get_all_plans()["plans"]
            if not plans:
                time.sleep(0.002)
                continue
            plan_id = rng.choice(plans)["plan_id"]
            try:
                ops = executor.get_plan_status(plan_id)["ops"]
            except ControlError:  # it finished meanwhile
                continue
            op = rng.choice(ops)
            if executor.stop_plan_at(plan_id, op["op_id"], rng.choice(["on_enter", "on_complete"]))["armed"]:
                tally.add("stops_armed")
            time.sleep(rng.random() * 0.01)
        except Exception as exc:
            tally.errors.append(f"stopper: {type(exc).__name__}: {exc}")
            return


def canceller(executor, tally, rng, recent, stop):
    while not stop.is_set():
        try:
            time.sleep(rng.random() * 0.02)
            if not recent:
                continue
            roll = rng.random()
            if roll < 0.02:
                executor.cancel_all(wait_ms=rng.choice([0, 20]))
                tally.add("cancel_alls")
            elif roll < 0.15:
                answer = executor.submit({"op": "cancel_plan", "plan_id": rng.choice(recent[-50:]), "wait_ms": 0})
                assert answer["verdict"] == "control", answer
                tally.add("meta_cancels")
            else:
                executor.cancel_plan(rng.choice(recent[-50:]), wait_ms=rng.choice([0, 0, 10, 50]))
                tally.add("cancels")
        except Exception as exc:
            tally.errors.append(f"canceller: {type(exc).__name__}: {exc}")
            return


def settle(executor, backend, tally, timeout=60.0) -> None:
    """Wait until every accepted plan (control-only ones too) delivered its plan_complete."""
    deadline = time.monotonic() + timeout
    while (executor.get_all_plans()["count"] or backend.calls_in_flight
           or sum(tally.completed) < sum(tally.accepted)):
        assert time.monotonic() < deadline, "plans still in flight long after the last submit"
        time.sleep(0.01)


def traced() -> int:
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


@pytest.mark.soak
def test_soak():
    rng = random.Random(SEED)
    began = time.monotonic()
    tracemalloc.start()
    try:
        backend = bt_exec.SimBackend(SCRIPT, history=100)
        executor = bt_exec.Executor(backend, keep_finished=KEEP_FINISHED, remember_run_ids=100)
        tally = Tally(PLANS, executor)
        executor.subscribe(tally)
        executor.start()
        recent: list[str] = []

        # warm-up: enough plans that the finished table is full, submitted from this thread
        done = threading.Event()
        submitter(executor, tally, rng, WARM_UP, recent, done)
        settle(executor, backend, tally)
        memory_before, threads_before = traced(), threading.active_count()

        stop = threading.Event()
        per_submitter = [(PLANS - WARM_UP) // 3 + (1 if i < (PLANS - WARM_UP) % 3 else 0) for i in range(3)]
        finished = [threading.Event() for _ in per_submitter]
        workers = [threading.Thread(target=submitter, args=(executor, tally, random.Random(rng.random()), n, recent, d),
                                    name=f"soak-submit-{i}") for i, (n, d) in enumerate(zip(per_submitter, finished))]
        workers += [threading.Thread(target=stopper, args=(executor, tally, random.Random(rng.random()), recent, stop),
                                     name="soak-stop"),
                    threading.Thread(target=canceller, args=(executor, tally, random.Random(rng.random()), recent, stop),
                                     name="soak-cancel")]
        for worker in workers:
            worker.start()
        threads_during = threading.active_count()
        for event in finished:
            assert event.wait(600), "a submitter never finished"
        stop.set()
        for worker in workers:
            worker.join(60)
        settle(executor, backend, tally)
        memory_after, threads_after = traced(), threading.active_count()
        executor.close(wait_ms=1000)
        seconds = time.monotonic() - began
    finally:
        tracemalloc.stop()

    accepted = sum(tally.accepted)
    completes = [tally.completed[i] for i in range(len(tally.accepted)) if tally.accepted[i]]
    print(f"\nsoak: {PLANS} plans submitted, {accepted} accepted ({tally.refused} refused), {tally.ops} ops, "
          f"in {seconds:.1f} s\n"
          f"  stop points armed {tally.stops_armed}, fired {tally.stops_fired}; cancel_plan {tally.cancels}, "
          f"as meta ops {tally.meta_cancels}, cancel_all {tally.cancel_alls}; plans ended cancelled "
          f"{tally.cancelled_plans}, failed {tally.failed_plans}\n"
          f"  events {tally.events} (node_state {tally.node_states}, plan_complete {sum(tally.completed)})\n"
          f"  traced memory after the {WARM_UP}-plan warm-up {memory_before / 1e6:.2f} MB, after the run "
          f"{memory_after / 1e6:.2f} MB ({(memory_after - memory_before) / 1e3:+.0f} kB); keep_finished "
          f"{KEEP_FINISHED}\n  threads after warm-up {threads_before}, during {threads_during}, after {threads_after}")
    assert not tally.errors, tally.errors
    assert executor.get_all_plans()["count"] == 0
    assert accepted == PLANS - tally.refused and tally.refused == 0
    assert completes == [1] * accepted, "every accepted plan emits exactly one plan_complete"
    assert sum(tally.completed) == accepted, "no plan_complete for a plan never accepted"
    assert all(tally.started[i] == tally.accepted[i] for i in range(len(tally.accepted)))
    assert not tally.bad_records, tally.bad_records[:10]
    assert backend.active_calls() == [] and backend.calls_in_flight == 0
    assert tally.stops_fired and tally.cancelled_plans and tally.failed_plans, "the soak exercised every path"
    assert memory_after - memory_before < MEMORY_TOLERANCE, (memory_before, memory_after)
    assert threads_after == threads_before


def test_sim_backend_reports_its_calls_in_flight_and_keeps_a_bounded_history():
    backend = bt_exec.SimBackend({"caps": {"a.slow": {"duration_s": 60}}}, history=2)
    executor = bt_exec.Executor(backend)
    plan_id = executor.submit(par(do(cap="a.slow"), do(cap="a.slow"), do(cap="a.fast")))["plan_id"]
    executor.tick_once()
    assert backend.calls_in_flight == 2 and len(backend.active_calls()) == 2
    assert len(backend.calls) == 2, "three calls made, the last two kept"
    executor.cancel_plan(plan_id, wait_ms=0)
    assert backend.calls_in_flight == 0 and backend.active_calls() == [] and len(backend.cancelled) == 2
