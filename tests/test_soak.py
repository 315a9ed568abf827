"""Soak tests: a started executor under load for a while, through one door or through all of them at once.

``test_soak``: thousands of plans submitted, stopped and cancelled from several threads over the Python API.

Short form (CI: 1,000 plans, about 5 s on 2 cores)::

    python -m pytest -q -m soak tests/test_soak.py -s

Long form (N plans)::

    BT_EXEC_SOAK_PLANS=5000 python -m pytest -q -m soak tests/test_soak.py -s

``test_soak_every_door``: one executor driven for ``BT_EXEC_SOAK_S`` seconds (default 15) at once over the
Python API, a real web server on 127.0.0.1 (JSON API, an event-stream reader), a real MCP client session on
its ``/mcp``, with a JSONL journal subscribed, and hostile requests among the good ones at every door::

    BT_EXEC_SOAK_S=300 python -m pytest -q -m soak tests/test_soak.py -s     # CI's short form
    BT_EXEC_SOAK_S=1800 python -m pytest -q -m soak tests/test_soak.py -s    # long form

The plain ``pytest`` leaves them out (``setup.cfg``: ``-m "not soak"``); ``-m soak`` runs them. ``-s`` shows the
figures.

In ``test_soak``, three submitter threads send RTDL trees (1 to 16 ops; sequences and parallels of do ops
whose caps the SimBackend script serves in 0 to 20 ms, some failing or timing out; a few plans use the
executor's builtins) while a stopper thread arms stop points (``stop_plan_at``, on_enter and
on_complete, on ops read from ``get_plan_status``) and a canceller thread cancels plans
(``cancel_plan``, directly and as a submitted meta op) and now and then everything
(``cancel_all``). The executor ticks in its own thread and keeps ``KEEP_FINISHED`` finished records.

Asserted at the end: no plan in flight (``get_all_plans`` count 0); every accepted plan emitted
``plan_started`` and exactly one ``plan_complete``, and no other plan did; every op of every
finished record is final or pending, never running; the backend has no call in flight; memory
(tracemalloc, current size once a warm-up batch has filled the finished table, against the size
after the whole run; no collection forced, so trees left in reference cycles would count) grew by less
than ``MEMORY_TOLERANCE``; the thread count is what it was after
the warm-up.

``test_soak_every_door``'s doors hold back their submits while ``DOOR_IN_FLIGHT`` plans are in flight or the event
stream's reader is ``STREAM_BEHIND`` plans behind (a reader further behind than the stream's capacity has events
dropped, as documented: on a loaded machine the doors keep the reader's pace). It asserts: every plan a door
admitted started, and every started plan has exactly one
``plan_complete`` as the executor emitted it, in the journal file and on the event stream (the stream dropped
nothing); traced memory sampled through the run (as the run leaves it, no collection forced) grew over its second
half by less than ``MEMORY_GROWTH_BOUND`` bytes (a least-squares line through the samples); every hostile request
got the answer its door documents, and no answer was a 5xx other than a documented 503 shed; after the run one good
request through each door succeeds; ``bt-exec journal check`` finds the journal whole.
"""
import collections
import http.client
import itertools
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import traceback
import tracemalloc

import pytest
from rtdl_plans import do, envelope, par, seq

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
        self.plan_ended = threading.Condition(self.lock)  # notified at each plan_complete
        self.completions = 0
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
                self.completions += 1
                self.plan_ended.notify_all()
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

    def wait_for_a_plan_end(self, seen: int, timeout_s: float) -> bool:
        """Wait until more than ``seen`` plans (a ``completions`` read) ended; False if none did in ``timeout_s``."""
        with self.plan_ended:
            return self.plan_ended.wait_for(lambda: self.completions > seen, max(timeout_s, 0.0))


FINAL_OR_PENDING = {"succeeded", "failed", "canceled", "timeout", "pending"}


def submitter(executor, tally, rng, count, recent, done):
    try:
        for _ in range(count):
            while True:  # room comes with a plan's end
                seen = tally.completions
                if executor.get_all_plans()["count"] < MAX_IN_FLIGHT:
                    break
                assert tally.wait_for_a_plan_end(seen, 60), f"{MAX_IN_FLIGHT} plans in flight, none ended in a minute"
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
                time.sleep(0.002)  # the stopper's pace: it arms stop points on what it finds, when it looks
                continue
            plan_id = rng.choice(plans)["plan_id"]
            try:
                ops = executor.get_plan_status(plan_id)["ops"]
            except ControlError:  # it finished meanwhile
                continue
            op = rng.choice(ops)
            if executor.stop_plan_at(plan_id, op["op_id"], rng.choice(["on_enter", "on_complete"]))["armed"]:
                tally.add("stops_armed")
            time.sleep(rng.random() * 0.01)  # the stopper's pace, at random: part of the load
        except Exception as exc:
            tally.errors.append(f"stopper: {type(exc).__name__}: {exc}")
            return


def canceller(executor, tally, rng, recent, stop):
    while not stop.is_set():
        try:
            time.sleep(rng.random() * 0.02)  # the canceller's pace, at random: part of the load
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
    """Wait until every accepted plan (control-only ones too) delivered its plan_complete, looking again at
    each plan's end."""
    deadline = time.monotonic() + timeout
    while True:
        seen = tally.completions
        if not (executor.get_all_plans()["count"] or backend.calls_in_flight
                or sum(tally.completed) < sum(tally.accepted)):
            return
        assert tally.wait_for_a_plan_end(seen, deadline - time.monotonic()), \
            "plans still in flight long after the last submit"


def traced() -> int:
    """Traced memory as the run leaves it: no collection is forced, so cycles the collector has not reached count."""
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
        workers += [threading.Thread(target=target, args=(executor, tally, random.Random(rng.random()), recent, stop),
                                     name=name)
                    for target, name in ((stopper, "soak-stop"), (canceller, "soak-cancel"))]
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


# --- every door at once, for a while --------------------------------------------------------------------------

SOAK_S = float(os.environ.get("BT_EXEC_SOAK_S") or 15)
TOKEN = "soak-token"
MAX_PLAN_IDS = 2_000_000          # per-plan tallies are preallocated bytearrays, flat in memory however long the run
MEMORY_GROWTH_BOUND = 2_000_000   # bytes traced memory may grow by over the second half (least-squares line)
SHED_CODES = {"too_many_connections", "too_busy", "too_many_streams"}  # the 503s docs/security.md documents
DOOR_IN_FLIGHT = 40               # doors hold back their submits while this many plans are active
STREAM_BEHIND = 200               # ... or while the event stream's reader is this many plan_completes behind
CALL_TIMEOUT_S = 30               # longest any one request may take to be answered
MAX_BODY_BYTES = 256 * 1024       # the soak's web server takes bodies up to this size
READ_TIMEOUT_S = 2.0              # ... and drops clients that stall longer than this
STEPS_PER_SECOND = 2000           # a bound on any door's loop: at most this many steps per second of soak
PROBLEMS_KEPT = 50


class Doors:
    """What every door saw: per-plan counts in preallocated bytearrays, answers by status and kind, problems."""

    def __init__(self):
        self.lock = threading.Lock()
        self.admitted = bytearray(MAX_PLAN_IDS)   # a door's answer said accepted, with this plan id
        self.started = bytearray(MAX_PLAN_IDS)    # plan_started, as the executor emitted it
        self.completed = bytearray(MAX_PLAN_IDS)  # plan_complete, as the executor emitted it
        self.streamed = bytearray(MAX_PLAN_IDS)   # plan_complete, as the HTTP event stream delivered it
        self.completes_emitted = self.completes_streamed = 0  # the same, counted: how far behind the stream is
        self.news = threading.Condition(self.lock)  # notified as those counts move
        self.counts: collections.Counter = collections.Counter()   # keys: a fixed set of names
        self.statuses: collections.Counter = collections.Counter()  # HTTP status -> answers
        self.problems: list[str] = []
        self.problem_count = 0

    def on_events(self, events) -> None:  # in the ticking thread, once a tick
        for event in events:
            kind = event["event"]
            if kind == "plan_started":
                _bump(self.started, event["plan_id"])
            elif kind == "plan_complete":
                _bump(self.completed, event["plan_id"])
                with self.news:
                    self.completes_emitted += 1
                    self.news.notify_all()

    def completes_seen(self) -> int:
        """plan_complete events emitted and streamed so far, for ``wait_for_news``."""
        return self.completes_emitted + self.completes_streamed

    def wait_for_news(self, seen: int, timeout_s: float) -> None:
        """Wait until a plan_complete is emitted or streamed after ``seen`` (a ``completes_seen``), at most
        ``timeout_s``."""
        with self.news:
            self.news.wait_for(lambda: self.completes_seen() > seen, max(timeout_s, 0.0))

    def count(self, name: str, amount: int = 1) -> None:
        with self.lock:
            self.counts[name] += amount

    def problem(self, text: str) -> None:
        with self.lock:
            self.problem_count += 1
            if len(self.problems) < PROBLEMS_KEPT:
                self.problems.append(text[:400])

    def held_back(self, executor) -> bool:
        """Whether a door waits before its next submit: plans enough in flight, or the event stream's reader
        behind. The stream drops events for a reader further behind than its capacity (as documented), so on a
        loaded machine the doors keep to the pace the reader holds, and the soak asserts that nothing was dropped
        at that pace, not a speed."""
        return (in_flight(executor) >= DOOR_IN_FLIGHT
                or self.completes_emitted - self.completes_streamed >= STREAM_BEHIND)

    def admit(self, door: str, answer: dict, good: bool = True) -> str | None:
        """Record a submit's answer; the plan id when a plan was admitted."""
        if answer.get("accepted") and answer.get("plan_id") is not None:
            _bump(self.admitted, answer["plan_id"])
            self.count(f"{door}: plans admitted")
            return answer["plan_id"]
        if answer.get("verdict") == "busy":
            self.count(f"{door}: busy")
        elif good and not answer.get("accepted"):
            self.problem(f"{door}: a good plan refused: {answer.get('message')}")
        return None


def _bump(table: bytearray, plan_id: str) -> None:
    number = int(plan_id)
    assert number < MAX_PLAN_IDS, f"plan id {plan_id} beyond the soak's tallies ({MAX_PLAN_IDS})"
    table[number] = min(table[number] + 1, 255)


def door_plan(rng: random.Random, recent) -> dict:
    return random_plan(rng, list(recent)[-20:])


def lone_surrogate_plan() -> dict:
    return envelope(seq(do("grip \ud800", cap="soak.instant")), description="bad \udfff text")


def over_limit_plan() -> dict:
    return envelope(do("x" * (bt_exec.Limits().max_string_chars + 10), cap="soak.instant"))


def deep_plan(levels: int) -> dict:
    tree = do("innermost", cap="soak.instant")
    for _ in range(levels - 1):
        tree = seq(tree)
    return envelope(tree)


def in_flight(executor) -> int:
    return executor.get_all_plans()["count"]


def door_loop(name, doors, rng, stop, step, pause_s=0.004) -> None:
    """Run ``step()`` until ``stop`` (at most ``STEPS_PER_SECOND`` per second of soak), pausing up to ``pause_s``
    between steps; a failure is a problem."""
    for _ in range(int(STEPS_PER_SECOND * SOAK_S) + 1):
        if stop.is_set():
            return
        try:
            step()
        except Exception as exc:  # reported by the main thread, with the door's name
            where = traceback.extract_tb(exc.__traceback__)[-1]
            doors.problem(f"{name}: {type(exc).__name__}: {exc} ({os.path.basename(where.filename)}, line "
                          f"{where.lineno})")
            time.sleep(0.05)  # a failing door slows down: its problems are counted, not a flood of them
        time.sleep(rng.random() * pause_s)  # the door's pace, at random: part of the load


# --- the Python API -------------------------------------------------------------------------------------------

def api_door(executor, doors, rng, stop) -> None:
    recent = collections.deque(maxlen=50)

    def expect_refused(call, *args, **kwargs) -> None:
        try:
            call(*args, **kwargs)
        except ControlError:
            doors.count("api: hostile refused")
            return
        doors.problem(f"api: {call.__name__}{args} was not refused")

    def expect_invalid(source) -> None:
        answer = executor.submit(source)
        if answer["accepted"] or answer["verdict"] != "invalid" or not answer["issues"]:
            doors.problem(f"api: hostile plan not refused with issues: {answer.get('message')}")
        else:
            doors.count("api: hostile refused")

    hostile = [lambda: expect_invalid(lone_surrogate_plan()),
               lambda: expect_invalid(over_limit_plan()),
               lambda: expect_invalid("[" * 100_000),
               lambda: expect_invalid("{not json"),
               lambda: expect_invalid({"rtdl": deep_plan(200)["rtdl"]}),
               lambda: expect_refused(executor.cancel_plan, rng.choice(recent or ["1"]), wait_ms=2 ** 63),  # past int64
               lambda: expect_refused(executor.cancel_plan, rng.choice(recent or ["1"]), wait_ms=1.0),
               lambda: expect_refused(executor.cancel_all, wait_ms=float("inf")),
               lambda: expect_refused(executor.stop_plan_at, "9" * 5000, "1"),
               lambda: expect_refused(executor.get_plan_status, "no such plan")]

    def step() -> None:
        roll = rng.random()
        try:
            if roll < 0.4:
                if not doors.held_back(executor):
                    plan_id = doors.admit("api", executor.submit(door_plan(rng, recent)))
                    if plan_id is not None:
                        recent.append(plan_id)
                else:
                    time.sleep(0.005)  # held back: the door's pace slows while the executor or the reader catch up
            elif roll < 0.55:
                plans = executor.get_all_plans()["plans"]
                if plans:
                    plan_id = rng.choice(plans)["plan_id"]
                    op = rng.choice(executor.get_plan_status(plan_id)["ops"])
                    executor.stop_plan_at(plan_id, op["op_id"], rng.choice(["on_enter", "on_complete"]))
                    doors.count("api: stop points")
            elif roll < 0.67 and recent:
                executor.cancel_plan(rng.choice(recent), wait_ms=rng.choice([0, 0, 10]))
                doors.count("api: cancels")
            elif roll < 0.68:
                executor.cancel_all(wait_ms=0)
                doors.count("api: cancel_all")
            elif roll < 0.85:
                plan_id = rng.choice(recent or ["1"])
                rng.choice([executor.get_plan_status, executor.get_plan_tree, executor.get_plan_result])(plan_id)
                executor.get_finished_plans(20)
                doors.count("api: reads")
            else:
                rng.choice(hostile)()
        except ControlError:  # the plan finished (or is gone) meanwhile
            doors.count("api: control refused")

    # In-process calls cost the least: paced, so that the network doors get their share of two cores.
    door_loop("api", doors, rng, stop, step, pause_s=0.03)


# --- HTTP -----------------------------------------------------------------------------------------------------

class HttpClient:
    """One keep-alive connection to the app; every answer's status is checked against what the door documents."""

    def __init__(self, port: int, doors: Doors):
        self.port = port
        self.doors = doors
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)

    def request(self, method, path, body=None, token=TOKEN, headers=None, expect=(200,), name="request"):
        """(status, answer); a status outside ``expect`` (or a 5xx other than a shed) is a problem."""
        sent = {"Content-Type": "application/json"} if body is not None else {}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        for attempt in (1, 2):
            try:
                self.connection.request(method, path, body=data, headers=sent)
                response = self.connection.getresponse()
                raw = response.read()
                break
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                # The app closed a keep-alive connection this client had not used for a while: once more, anew.
                self.connection.close()
                self.doors.count("http: reconnects")
                if attempt == 2:
                    raise
        if response.getheader("X-Content-Type-Options") != "nosniff":
            self.doors.problem(f"http {name}: {method} {path[:80]}: {response.status} without the security headers")
        answer = None
        if response.getheader("Content-Type", "").startswith("application/json"):
            answer = json.loads(raw)
        self.check(name, method, path, response.status, answer, expect)
        return response.status, answer

    def check(self, name, method, path, status, answer, expect) -> None:
        self.doors.statuses[status] += 1
        error = answer.get("error") if isinstance(answer, dict) else None
        code = error.get("code") if isinstance(error, dict) else None
        if status == 503 and code in SHED_CODES:
            self.doors.count(f"http: shed ({code})")
        elif status not in expect:
            self.doors.problem(f"http {name}: {method} {path[:80]}: {status} {code} (expected {expect}): "
                               f"{json.dumps(answer)[:200]}")

    def close(self) -> None:
        self.connection.close()


def raw_exchange(port: int, data: bytes, wait_s: float = CALL_TIMEOUT_S) -> bytes:
    """Send ``data`` on a fresh socket and read until the app closes it (or ``wait_s`` passes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as connection:
        connection.sendall(data)
        received = b""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and len(received) < 65536:
            try:
                chunk = connection.recv(4096)
            except TimeoutError:
                break
            if not chunk:
                break
            received += chunk
        return received


def http_hostile(client: HttpClient, doors: Doors, rng: random.Random, recent) -> None:
    port = client.port
    plan_id = rng.choice(recent or ["1"])
    surrogate_body = (b'{"graph": {"rtdl": {"op": "do", "op_id": 0, "description": "grip \\ud800", '
                      b'"cap": "soak.instant", "args": {}}}}')
    cases = [
        ("malformed json", "POST", "/api/plans", b'{"graph": ', TOKEN, {}, (400,)),
        ("not an object", "POST", "/api/plans", b"[1, 2]", TOKEN, {}, (400,)),
        ("empty body", "POST", "/api/cancel_all", b"", TOKEN, {}, (400,)),
        ("deep nesting", "POST", "/api/validate", b'{"graph": ' + b"[" * 100_000, TOKEN, {}, (400,)),
        ("over-limit run_id", "POST", "/api/plans", {"graph": door_plan(rng, recent), "run_id": "r" * 300}, TOKEN,
         {}, (400,)),
        ("lone surrogate", "POST", "/api/plans", surrogate_body, TOKEN, {}, (200,)),
        ("over-limit string", "POST", "/api/plans", {"graph": over_limit_plan()}, TOKEN, {}, (200,)),
        ("huge wait_ms", "POST", f"/api/plans/{plan_id}/cancel", b'{"wait_ms": 1e13}', TOKEN, {}, (400,)),
        ("float wait_ms", "POST", f"/api/plans/{plan_id}/cancel", {"wait_ms": 1.0}, TOKEN, {}, (400,)),
        ("wide wait_ms", "POST", "/api/cancel_all", {"wait_ms": 2 ** 63}, TOKEN, {}, (400,)),  # past int64
        ("unknown plan id", "GET", "/api/plans/987654321/status", None, None, {}, (404,)),
        ("long plan id", "GET", "/api/plans/" + "9" * 5000 + "/result", None, None, {}, (400,)),
        ("bad token", "POST", "/api/cancel_all", {"wait_ms": 0}, "wrong", {}, (401,)),
        ("no token", "POST", f"/api/plans/{plan_id}/cancel", {"wait_ms": 0}, None, {}, (401,)),
        ("not json content", "POST", "/api/plans", b"graph=1", TOKEN, {"Content-Type": "text/plain"}, (415,)),
        ("foreign origin", "POST", "/api/cancel_all", {"wait_ms": 0}, TOKEN, {"Origin": "http://evil.example"},
         (403,)),
        ("foreign host", "GET", "/api/plans", None, None, {"Host": "evil.example"}, (403,)),
        ("unknown path", "GET", "/api/reboot", None, None, {}, (404,)),
        ("wrong method", "DELETE", "/api/plans", None, TOKEN, {}, (405,)),
        ("over-limit body", "POST", "/api/validate", b'{"graph": "' + b"x" * MAX_BODY_BYTES + b'"}', TOKEN, {},
         (413,)),
        ("mcp not json", "POST", "/mcp", b"{not json", TOKEN, {"Accept": "application/json, text/event-stream"},
         (200,)),
        ("mcp deep", "POST", "/mcp", b"[" * 100_000, TOKEN, {"Accept": "application/json, text/event-stream"},
         (200,)),
        ("mcp bad token", "POST", "/mcp", b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}', "wrong",
         {"Accept": "application/json, text/event-stream"}, (401,)),
        ("mcp lone surrogate", "POST", "/mcp",
         b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "get_plan_status", '
         b'"arguments": {"plan_id": "\\ud800"}}}', TOKEN, {"Accept": "application/json, text/event-stream"},
         (200,)),
    ]
    roll = rng.random()
    if roll < 0.03:
        answer = raw_exchange(port, b"POST /api/cancel_all HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                                    b"application/json\r\nAuthorization: Bearer " + TOKEN.encode() +
                                    b"\r\nContent-Length: -5\r\n\r\n{}")
        status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else None
        client.check("negative length", "POST", "/api/cancel_all", status, None, (400,))
        return
    if roll < 0.05:
        began = time.monotonic()
        answer = raw_exchange(port, b"GET /api/plans HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a head never finished
        if answer or time.monotonic() - began > READ_TIMEOUT_S + 5:
            doors.problem(f"http: a stalled head was held {time.monotonic() - began:.1f} s, answered {answer[:80]!r}")
        doors.count("http: stalled heads dropped")
        return
    if roll < 0.1:
        event_stream_churn(port, doors)
        return
    name, method, path, body, token, headers, expect = rng.choice(cases)
    status, answer = client.request(method, path, body, token=token, headers=headers, expect=expect, name=name)
    if name in ("lone surrogate", "over-limit string") and status == 200 and answer["accepted"]:
        doors.problem(f"http: a plan with a {name} was accepted")
    if name.startswith("mcp") and status == 200 and not ("error" in answer or "result" in answer):
        doors.problem(f"http {name}: not a JSON-RPC answer: {json.dumps(answer)[:200]}")
    doors.count("http: hostile answered")


def event_stream_churn(port: int, doors: Doors) -> None:
    """Open an event stream, read its first line, go away: the slot must come free."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=CALL_TIMEOUT_S)
    try:
        connection.request("GET", "/api/events")
        response = connection.getresponse()
        if response.status == 200:
            first = response.fp.readline()
            if not first.strip():
                doors.problem(f"http: an event stream began with {first!r}")
        elif response.status != 503:
            doors.problem(f"http: an event stream answered {response.status}")
        doors.statuses[response.status] += 1
        doors.count("http: event streams opened and dropped")
    finally:
        connection.close()


def http_door(port, executor, doors, rng, stop) -> None:
    client = HttpClient(port, doors)
    recent = collections.deque(maxlen=50)
    run_numbers = itertools.count()

    def step() -> None:
        roll = rng.random()
        if roll < 0.35:
            if doors.held_back(executor):
                time.sleep(0.005)  # held back: the door's pace slows while the executor or the reader catch up
                return
            body = {"graph": door_plan(rng, recent)}
            if rng.random() < 0.2:
                body["run_id"] = f"{threading.current_thread().name}-{next(run_numbers)}"
            status, answer = client.request("POST", "/api/plans", body, name="submit")
            plan_id = doors.admit("http", answer) if status == 200 else None
            if plan_id is not None:
                recent.append(plan_id)
                if "run_id" in body:  # the same envelope again: the first answer, nothing run again
                    _, again = client.request("POST", "/api/plans", body, name="submit again")
                    if again.get("plan_id") != plan_id:
                        doors.problem(f"http: run_id {body['run_id']} answered plan {again.get('plan_id')}, "
                                      f"then {plan_id}")
                    doors.count("http: run_id repeats")
        elif roll < 0.45:
            _, listed = client.request("GET", "/api/plans", name="list")
            if listed and listed["plans"]:
                plan_id = rng.choice(listed["plans"])["plan_id"]
                status, answer = client.request("GET", f"/api/plans/{plan_id}/status", expect=(200, 404, 409),
                                                name="status")
                if status == 200:
                    client.request("POST", f"/api/plans/{plan_id}/stop_at",
                                   {"op_id": rng.choice(answer["ops"])["op_id"],
                                    "when": rng.choice(["on_enter", "on_complete"])},
                                   expect=(200, 404, 409), name="stop")
                    doors.count("http: stop points")
        elif roll < 0.55 and recent:
            client.request("POST", f"/api/plans/{rng.choice(recent)}/cancel", {"wait_ms": rng.choice([0, 10])},
                           expect=(200, 404, 409), name="cancel")
            doors.count("http: cancels")
        elif roll < 0.56:
            client.request("POST", "/api/cancel_all", {"wait_ms": 0}, name="cancel_all")
        elif roll < 0.75:
            plan_id = rng.choice(recent or ["1"])
            path = rng.choice([f"/api/plans/{plan_id}/result", f"/api/plans/{plan_id}/tree", "/api/finished?limit=20",
                               "/api/events/recent", "/api/info", "/api/plans"])
            client.request("GET", path, token=None, expect=(200, 404, 409), name="read")
            doors.count("http: reads")
        else:
            http_hostile(client, doors, rng, recent)

    try:
        door_loop("http", doors, rng, stop, step)
    finally:
        client.close()


class StreamReader:
    """Reads the app's event stream (real SSE over HTTP) until the app closes it, counting plan_complete."""

    def __init__(self, port: int, doors: Doors):
        self.port = port
        self.doors = doors
        self.ready = threading.Event()
        self.closing = False
        self.dropped = 0
        self.events = 0
        self.error: str | None = None

    def run(self) -> None:
        import httpx

        try:
            with httpx.Client(timeout=httpx.Timeout(CALL_TIMEOUT_S, read=60)) as client:
                with client.stream("GET", f"http://127.0.0.1:{self.port}/api/events") as response:
                    if response.status_code != 200:
                        self.error = f"the event stream answered {response.status_code}"
                        return
                    self.ready.set()
                    for line in response.iter_lines():
                        if line.startswith("data:"):
                            self.take(json.loads(line[5:]))
        except Exception as exc:
            if not self.closing:
                self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.ready.set()

    def take(self, event: dict) -> None:
        self.events += 1
        if event["event"] == "plan_complete":
            _bump(self.doors.streamed, event["plan_id"])
            with self.doors.news:
                self.doors.completes_streamed += 1
                self.doors.news.notify_all()
        elif event["event"] == "dropped":
            self.dropped += event["count"]


# --- MCP ------------------------------------------------------------------------------------------------------

def mcp_door(url, executor, doors, rng, stop) -> None:
    import anyio
    from mcp import ClientSession
    from mcp.shared.exceptions import McpError
    from test_mcp import http_client_streams

    recent = collections.deque(maxlen=50)

    async def call(session, name, arguments):
        with anyio.fail_after(CALL_TIMEOUT_S):
            return await session.call_tool(name, arguments)

    async def expect_error(session, name, arguments):
        answer = await call(session, name, arguments)
        if not answer.isError:
            doors.problem(f"mcp: {name} {json.dumps(arguments)[:100]} was not refused")
        doors.count("mcp: hostile refused")

    async def step(session) -> None:
        roll = rng.random()
        if roll < 0.35:
            if doors.held_back(executor):
                await anyio.sleep(0.005)
                return
            answer = await call(session, "submit_plan", {"graph": door_plan(rng, recent)})
            if answer.isError:
                doors.problem(f"mcp: submit_plan: {answer.content[0].text}")
            else:
                plan_id = doors.admit("mcp", answer.structuredContent)
                if plan_id is not None:
                    recent.append(plan_id)
        elif roll < 0.5:
            listed = await call(session, "get_all_plans", {})
            plans = listed.structuredContent["plans"]
            if plans:
                plan_id = rng.choice(plans)["plan_id"]
                status = await call(session, "get_plan_status", {"plan_id": plan_id})
                if not status.isError:
                    await call(session, "stop_plan_at", {"plan_id": plan_id,
                                                        "op_id": rng.choice(status.structuredContent["ops"])["op_id"],
                                                        "when": rng.choice(["on_enter", "on_complete"])})
                    doors.count("mcp: stop points")
        elif roll < 0.6 and recent:
            await call(session, "cancel_plan", {"plan_id": rng.choice(recent), "wait_ms": rng.choice([0, 10])})
            doors.count("mcp: cancels")
        elif roll < 0.75:
            name = rng.choice(["get_plan_result", "get_plan_status", "get_all_plans", "validate_plan"])
            arguments = ({} if name == "get_all_plans" else {"graph": door_plan(rng, recent)} if name == "validate_plan"
                         else {"plan_id": rng.choice(recent or ["1"])})
            await call(session, name, arguments)
            doors.count("mcp: reads")
        else:
            choice = rng.randrange(7)
            plan_id = rng.choice(recent or ["1"])
            if choice == 0:
                await expect_error(session, "cancel_plan", {"plan_id": plan_id, "wait_ms": 1.0})
            elif choice == 1:
                await expect_error(session, "cancel_all", {"wait_ms": 2 ** 63})  # past int64; a long wait is capped
            elif choice == 2:
                await expect_error(session, "get_plan_status", {"plan_id": "987654321"})
            elif choice == 3:
                await expect_error(session, "reboot_robot", {})
            elif choice == 4:
                await expect_error(session, "submit_plan", {"graph": door_plan(rng, recent), "run_id": "r" * 300})
            elif choice == 5:
                answer = await call(session, "submit_plan", {"graph": over_limit_plan()})
                if answer.isError or answer.structuredContent["accepted"]:
                    doors.problem("mcp: an over-limit plan was not refused with issues")
                doors.count("mcp: hostile refused")
            else:
                try:
                    with anyio.fail_after(CALL_TIMEOUT_S):
                        await session.call_tool("validate_plan", {"graph": deep_plan(110)})
                    doors.problem("mcp: a plan nested past what MCP carries was taken")
                except McpError:
                    doors.count("mcp: hostile refused")

    async def main() -> None:
        async with http_client_streams(url, {"Authorization": f"Bearer {TOKEN}"}) as (read, write, _):
            async with ClientSession(read, write) as session:
                with anyio.fail_after(CALL_TIMEOUT_S):
                    await session.initialize()
                for _ in range(int(STEPS_PER_SECOND * SOAK_S) + 1):
                    if stop.is_set():
                        return
                    await step(session)
                    await anyio.sleep(rng.random() * 0.004)

    try:
        anyio.run(main)
    except Exception as exc:  # a failed call ends the session: the final check says whether the door still answers
        doors.problem(f"mcp: {type(exc).__name__}: {exc}")


def mcp_final_check(url) -> dict:
    import anyio
    from mcp import ClientSession
    from test_mcp import http_client_streams

    result = {}

    async def main() -> None:
        with anyio.fail_after(CALL_TIMEOUT_S):
            async with http_client_streams(url, {"Authorization": f"Bearer {TOKEN}"}) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    last = envelope(do("last", cap="soak.quick"))
                    submitted = await session.call_tool("submit_plan", {"graph": last})
                    listed = await session.call_tool("get_all_plans", {})
                    result.update(submitted=submitted, listed=listed)

    anyio.run(main)
    return result


# --- the run --------------------------------------------------------------------------------------------------

def second_half_growth(samples: list) -> float:
    """Bytes gained over the second half of ``samples`` ((seconds, bytes) pairs), on a least-squares line."""
    middle = samples[-1][0] / 2
    half = [(t, size) for t, size in samples if t >= middle]
    mean_t = sum(t for t, _ in half) / len(half)
    mean_size = sum(size for _, size in half) / len(half)
    spread = sum((t - mean_t) ** 2 for t, _ in half)
    slope = sum((t - mean_t) * (size - mean_size) for t, size in half) / spread
    return slope * (half[-1][0] - half[0][0])


def journal_completes(path) -> tuple[bytearray, int]:
    """plan_complete per plan id in a journal file, and its event lines."""
    completes, lines = bytearray(MAX_PLAN_IDS), 0
    with open(path, "rb") as file:
        for line in file:
            lines += 1
            if b'"plan_complete"' in line:
                event = json.loads(line)
                if event["event"] == "plan_complete":
                    _bump(completes, event["plan_id"])
    return completes, lines


def first_difference(expected: bytearray, found: bytearray) -> str:
    index = next(i for i in range(len(expected)) if expected[i] != found[i])
    return f"plan {index}: {expected[index]} against {found[index]}"


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.soak
def test_soak_every_door(tmp_path):
    pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
    from bt_exec.control import ControlApi
    from bt_exec.web.server import WebServer

    assert SOAK_S >= 10, f"BT_EXEC_SOAK_S={SOAK_S:g}: at least 10 seconds, to see memory over time"

    doors = Doors()
    rng = random.Random(SEED)
    journal_path = tmp_path / "soak.jsonl"
    backend = bt_exec.SimBackend(SCRIPT, history=100)
    executor = bt_exec.Executor(backend, keep_finished=KEEP_FINISHED, remember_run_ids=100)
    journal = bt_exec.JsonlJournal(journal_path)
    executor.subscribe_batches(journal.write_batch)
    executor.subscribe_batches(doors.on_events)
    server = WebServer(ControlApi(executor), port=0, token=TOKEN, max_body_bytes=MAX_BODY_BYTES,
                       read_timeout_s=READ_TIMEOUT_S)
    reader = StreamReader(0, doors)
    stop = threading.Event()
    workers: list[threading.Thread] = []
    samples: list[tuple[float, int]] = []
    tracemalloc.start()
    began = time.monotonic()
    try:
        executor.start()
        server.start()
        reader.port = server.port
        stream_thread = threading.Thread(target=reader.run, name="soak-stream", daemon=True)
        stream_thread.start()
        assert reader.ready.wait(CALL_TIMEOUT_S) and reader.error is None, reader.error

        doors_at_work = [("api-1", api_door, (executor,)), ("api-2", api_door, (executor,)),
                         ("http-1", http_door, (server.port, executor)), ("http-2", http_door, (server.port, executor)),
                         ("mcp", mcp_door, (server.url + "mcp", executor))]
        for name, door, args in doors_at_work:
            workers.append(threading.Thread(target=door, args=(*args, doors, random.Random(rng.random()), stop),
                                            name=f"soak-{name}", daemon=True))
        for worker in workers:
            worker.start()

        interval = max(1.0, SOAK_S / 120)
        while (elapsed := time.monotonic() - began) < SOAK_S:
            time.sleep(min(interval, SOAK_S - elapsed))  # the soak runs for its time, memory sampled at intervals
            samples.append((time.monotonic() - began, tracemalloc.get_traced_memory()[0]))
        rss_at_end = rss_bytes()
        stop.set()
        for worker in workers:
            worker.join(CALL_TIMEOUT_S * 2)
        assert not any(worker.is_alive() for worker in workers), "a door's loop did not end"
        traffic_s = time.monotonic() - began
    finally:
        tracemalloc.stop()
        stop.set()

    try:
        # One good request through each door, after all that.
        alive = {}
        plan_id = doors.admit("final", executor.submit(seq(do("last", cap="soak.quick"))))
        alive["api"] = plan_id is not None
        final = HttpClient(server.port, doors)
        status, answer = final.request("POST", "/api/plans", {"graph": envelope(do("last", cap="soak.quick"))},
                                       name="final submit")
        alive["http"] = status == 200 and doors.admit("final", answer) is not None
        alive["http"] &= final.request("GET", "/api/plans", token=None, name="final read")[0] == 200
        final.close()
        checked = mcp_final_check(server.url + "mcp")
        alive["mcp"] = not checked["submitted"].isError and not checked["listed"].isError and \
            doors.admit("final", checked["submitted"].structuredContent) is not None
        opened_before = doors.counts["http: event streams opened and dropped"]
        event_stream_churn(server.port, doors)
        alive["event stream"] = (doors.counts["http: event streams opened and dropped"] == opened_before + 1
                                 and reader.error is None and stream_thread.is_alive())

        deadline = time.monotonic() + 60
        still_due = None  # what was still due a minute after the run, said after the figures are printed
        while True:  # looking again at each plan_complete emitted or streamed
            seen = doors.completes_seen()
            if not (in_flight(executor) or backend.calls_in_flight or sum(doors.completed) < sum(doors.started)
                    or sum(doors.streamed) < sum(doors.started)):
                break
            if time.monotonic() > deadline:
                still_due = (f"a minute after the run: {in_flight(executor)} plans in flight, "
                             f"{backend.calls_in_flight} backend calls, plan_complete emitted "
                             f"{sum(doors.completed)} and streamed {sum(doors.streamed)} of {sum(doors.started)} "
                             f"started, {reader.dropped} events dropped on the stream")
                break
            doors.wait_for_news(seen, deadline - time.monotonic())
    finally:
        reader.closing = True
        server.close()
        executor.close(wait_ms=2000)
        journal.close()
    stream_thread.join(CALL_TIMEOUT_S)
    journal_completed, journal_lines = journal_completes(journal_path)
    check = subprocess.run([sys.executable, "-m", "bt_exec.cli", "journal", "check", str(journal_path)],
                           capture_output=True, text=True, timeout=600)

    started = sum(doors.started)
    growth = second_half_growth(samples)
    counts = "\n".join(f"  {name}: {count}" for name, count in sorted(doors.counts.items()))
    print(f"\nsoak, every door: {traffic_s:.0f} s of traffic ({SOAK_S:g} s asked), {started} plans started, "
          f"{sum(doors.completed)} plan_complete ({journal_lines} journal lines, {reader.events} events streamed)\n"
          f"  HTTP answers by status: {dict(sorted(doors.statuses.items()))}\n{counts}\n"
          f"  traced memory: first sample {samples[0][1] / 1e6:.2f} MB, at half time "
          f"{min(samples, key=lambda s: abs(s[0] - samples[-1][0] / 2))[1] / 1e6:.2f} MB, last "
          f"{samples[-1][1] / 1e6:.2f} MB, peak {max(s for _, s in samples) / 1e6:.2f} MB; second half's growth "
          f"{growth / 1e3:+.0f} kB (bound {MEMORY_GROWTH_BOUND / 1e3:.0f} kB); RSS at the end "
          f"{rss_at_end / 1e6:.0f} MB\n"
          f"  journal check: {check.stdout.strip().splitlines()[0] if check.stdout.strip() else check.stderr[-300:]}")

    assert not doors.problems, f"{doors.problem_count} problems, the first: {doors.problems}"
    assert still_due is None, still_due
    assert alive == {"api": True, "http": True, "mcp": True, "event stream": True}, alive
    assert started and max(doors.started) == 1, "each plan started once"
    assert doors.admitted == doors.started, "every admitted plan started, and no other: " + \
        first_difference(doors.admitted, doors.started)
    assert doors.completed == doors.started, "one plan_complete per plan emitted: " + \
        first_difference(doors.started, doors.completed)
    assert journal_completed == doors.started, "one plan_complete per plan in the journal: " + \
        first_difference(doors.started, journal_completed)
    assert reader.error is None and reader.dropped == 0, (reader.error, reader.dropped)
    assert doors.streamed == doors.started, "one plan_complete per plan on the event stream: " + \
        first_difference(doors.started, doors.streamed)
    assert not journal.failed and journal.dropped == 0, (journal.error, journal.dropped)
    assert check.returncode == 0 and ": 1 run, " in check.stdout and ", 0 torn lines, 0 malformed lines" in \
        check.stdout, check.stdout + check.stderr
    assert not any(status >= 500 for status in doors.statuses if status != 503), doors.statuses
    assert len(samples) >= 6, "too few memory samples to judge growth"
    assert growth < MEMORY_GROWTH_BOUND, f"traced memory grew {growth:.0f} bytes over the second half"
    assert all(doors.counts[f"{door}: plans admitted"] for door in ("api", "http", "mcp")), doors.counts
    assert all(doors.counts[f"{door}: hostile refused"] for door in ("api", "mcp")) and \
        doors.counts["http: hostile answered"], doors.counts
