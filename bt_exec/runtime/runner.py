"""The runner: the table of plans in flight, the tick loop, wake-ups, the watchdog, and finishing."""
from __future__ import annotations

import heapq
import itertools
import logging
import operator
import threading
import time
from typing import Callable

from bt_exec.compilers import gc_paused

from .budgets import BoundedTable
from .plan_run import PlanRun
from .plan_views import final_record

log = logging.getLogger(__name__)

_TICK_ORDER = operator.attrgetter("tick_order")

MAX_START_HOLD_S = 1.0  # the longest a door may hold a plan's start (``Admission.submit`` checks it)


class Runner:
    """Ticks plans in flight: from its own thread (``start``) or when asked (``tick_once``).

    A plan's tree is ticked only when something in it can have changed (the waking
    contract of ``bt_exec.behaviours.plan_hooks``): a watched source polled news, a
    control request woke it, or it has just begun. A period visits only the plans that
    can have news: those told so (a source watched for news was told, a wake, a control
    request), those whose timer came (one heap for all plans: a ``poll_at``, a pause
    timeout, a held start's end) and those with sources polled every period; a plan
    waiting on sources that push costs nothing per period. ``send_due_news`` (the robot
    backend's, if it has one) is called once per period first. While nothing is polled the
    loop sleeps until it is woken, or until its next timer or the backend's ``news_due_at``
    (a backend with ``send_due_news`` and no ``news_due_at`` keeps it waking every
    period). ``tick_on_news_only=False``
    ticks every plan every period instead (same events, for behaviours that do not keep
    the contract); the watchdog then has nothing to watch. With the gate on, a plan whose
    tree stays RUNNING with nothing watched and nothing pending is ended by the watchdog,
    with an error naming the behaviour it waits in; a paused plan is not (it waits for its
    resume, or for its pause timeout).

    A plan added with ``hold_s`` is not started (no ``plan_started``, no tick) until
    ``release_start`` or until ``hold_s`` has passed, whichever comes first, or at once when
    it is cancelled meanwhile: its door answers its caller first. Ticks skip it meanwhile; they
    never wait for it.

    ``on_finished(run, record)`` runs when a plan ended, before ``plan_complete`` is
    published. The final records of the newest ``keep_finished`` plans are kept, at most
    ``keep_finished_bytes`` of them in all (each measured once, when the plan ends; the
    newest is kept whatever its size), oldest evicted first.
    """

    def __init__(self, *, publish: Callable[[list[dict]], None], tick_period: float, keep_finished: int,
                 keep_finished_bytes: int, on_finished: Callable[[PlanRun, dict], None],
                 tick_on_news_only: bool = True, send_due_news: Callable[[], None] | None = None,
                 news_due_at: Callable[[], float | None] | None = None):
        self.tick_period = tick_period
        self.tick_on_news_only = tick_on_news_only
        self._send_due_news = send_due_news
        self._news_due_at = news_due_at
        self._publish = publish
        self._on_finished = on_finished
        self._lock = threading.Lock()  # guards the tables below; never held while ticking
        self._active: dict[str, PlanRun] = {}
        self._finishing: dict[str, PlanRun] = {}  # left the table, plan_complete not yet delivered
        self._held: dict[str, float] = {}  # plan_id -> monotonic time its start is held until
        self._finished = BoundedTable(keep_finished, keep_finished_bytes)
        self._due: set[PlanRun] = set()  # to be ticked at the next period (told, woken, added)
        self._polling: set[PlanRun] = set()  # runs with sources polled every period
        self._timers: list[tuple[float, int, str]] = []  # heap of (when, n, plan_id): PlanRun.wake_armed_at
        self._order = itertools.count()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ticking = threading.local()

    # --- the tables ------------------------------------------------------------------

    def add(self, run: PlanRun, hold_s: float = 0.0) -> None:
        """Put ``run`` in flight; with ``hold_s`` > 0 its start is held that long (see the class)."""
        with self._lock:
            run.tick_order = next(self._order)
            self._active[run.plan_id] = run
            if hold_s > 0:
                self._held[run.plan_id] = until = time.monotonic() + hold_s
                self._arm(run, until)
            else:
                self._due.add(run)
        if hold_s <= 0:
            self._wake.set()

    def release_start(self, plan_id: str) -> None:
        """Let a held plan start at the next tick (the loop is woken); nothing if it is not held."""
        with self._lock:
            held = self._held.pop(plan_id, None) is not None
            run = self._active.get(plan_id) if held else None
            if run is not None:
                self._due.add(run)
        if held:
            self._wake.set()

    def _start_held(self, run: PlanRun) -> bool:
        """Whether ``run``'s start is still held; a hold run out, or a cancel, ends it."""
        with self._lock:
            until = self._held.get(run.plan_id)
            if until is None:
                return False
            if time.monotonic() < until and not run.cancel_requested:
                return True
            del self._held[run.plan_id]
            return False

    def active(self, plan_id: str) -> PlanRun | None:
        with self._lock:
            return self._active.get(plan_id)

    def active_runs(self) -> list[PlanRun]:
        with self._lock:
            return list(self._active.values())

    def live(self, plan_id: str) -> PlanRun | None:
        """The run in flight or finishing (plan_complete not yet delivered)."""
        with self._lock:
            return self._active.get(plan_id) or self._finishing.get(plan_id)

    def finished_record(self, plan_id: str) -> dict | None:
        with self._lock:
            return self._finished.get(plan_id)

    def finished_records(self, limit: int) -> list[dict]:
        """The newest ``limit`` records kept, oldest first."""
        with self._lock:
            return self._finished.values()[-limit:] if limit else []

    def wake(self) -> None:
        """Tick now rather than at the next period (what is due then is what was due)."""
        self._wake.set()

    def wake_run(self, run: PlanRun) -> None:
        """``run`` is to be ticked (any thread; never blocks): at once, and at the next period."""
        with self._lock:
            if self._active.get(run.plan_id) is run:
                self._due.add(run)
        self._wake.set()

    def _arm(self, run: PlanRun, when: float) -> None:
        """Caller holds the lock: tick ``run`` at ``when`` (its earlier timer, if any, no longer counts)."""
        run.wake_armed_at = when
        heapq.heappush(self._timers, (when, next(self._order), run.plan_id))
        if self._timers[0][0] == when:  # the earliest now: a loop sleeping until a later one wakes to look
            self._wake.set()
        if len(self._timers) > 64 + 4 * len(self._active):  # entries of ended runs and moved timers
            self._timers = [entry for entry in self._timers if self._armed(entry)]
            heapq.heapify(self._timers)

    def _armed(self, entry: tuple[float, int, str]) -> bool:
        run = self._active.get(entry[2])
        return run is not None and run.wake_armed_at == entry[0]

    # --- ticking ----------------------------------------------------------------------

    def in_tick(self) -> bool:
        """Whether this thread is inside a tick (a subscriber or a builtin is running in it)."""
        return getattr(self._ticking, "active", False)

    def tick_once(self) -> None:
        """One period: tick every plan in flight that can have news (every plan, with the gate off), in the
        order they were added (from inside a tick: nothing, the tick in progress goes on)."""
        if self.in_tick():
            return
        if self._send_due_news is not None:
            try:
                self._send_due_news()
            except Exception:  # a backend's fault never stops the tick
                log.exception("send_due_news of the backend failed")
        for run in self._runs_to_tick():
            self.tick_run(run)

    def _runs_to_tick(self) -> list[PlanRun]:
        with self._lock:
            if not self.tick_on_news_only:
                self._due = set()
                return list(self._active.values())
            timers = self._timers
            now = time.monotonic() if timers else 0.0
            if not (self._due or self._polling or timers and timers[0][0] <= now):
                return []  # the idle period: nothing told, nothing polled, no timer due
            due, self._due = self._due, set()
            if timers:
                while timers and timers[0][0] <= now:
                    entry = heapq.heappop(timers)
                    if self._armed(entry):
                        run = self._active[entry[2]]
                        run.wake_armed_at = None
                        due.add(run)
            if self._polling:
                due |= self._polling
        if len(due) > 1:
            return sorted(due, key=_TICK_ORDER)
        return list(due)

    def tick_run(self, run: PlanRun) -> None:
        if self.in_tick():
            return
        self._ticking.active = True
        try:
            self._tick_run(run)
        finally:
            self._ticking.active = False
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            self._wake.set()  # a call this tick started may end before the time the loop sleeps to
        with self._lock:  # what the next periods must look at for this run
            if run.finished:
                self._polling.discard(run)
                return
            if run.polled:
                self._polling.add(run)
            else:
                self._polling.discard(run)
            if self.tick_on_news_only:
                when = run.wake_at()
                held_until = self._held.get(run.plan_id)
                if held_until is not None and (when is None or held_until < when):
                    when = held_until
                if when is not None and when != run.wake_armed_at:
                    self._arm(run, when)

    def _tick_run(self, run: PlanRun) -> None:
        with run.tick_lock:
            if run.finished:
                return
            try:
                if not run.started:
                    if self._start_held(run):
                        return
                    run.begin()
                    run.flush_events()  # plan_started before the first tick moves anything
                run.before_tick()
                if not run.cancel_requested:
                    news = run.poll_watched()
                    if not (news or run.needs_tick or not self.tick_on_news_only):
                        return  # the idle tick: nothing the tree waits for changed
                    run.needs_tick = False
                    with gc_paused():  # what a tick makes (events, results) stays alive until it ends
                        run.tree.tick()
                    if self.tick_on_news_only and not run.complete:
                        stalled = run.stalled_behaviour()
                        if stalled is not None:
                            run.error = (f"stalled: {stalled!r} is RUNNING but nothing can wake the plan (no "
                                         "call, deadline or control request is pending for it)")
                if run.cancel_requested or run.error is not None:
                    run.tear_down()
                elif not run.complete:
                    run.flush_events()
                    return
            except Exception as exc:  # a fault in one plan's tree never stops the executor
                log.exception("plan %s: tick failed", run.plan_id)
                run.error = f"internal error while ticking: {type(exc).__name__}: {exc}"
                try:
                    run.tear_down()
                except Exception:
                    log.exception("plan %s: teardown after a failed tick failed too", run.plan_id)
            self._finish(run)

    def _finish(self, run: PlanRun) -> None:
        run.finished = True
        run.ended_at = time.time()
        record = final_record(run)
        with self._lock:
            self._active.pop(run.plan_id, None)
            self._polling.discard(run)
            self._due.discard(run)
            self._finishing[run.plan_id] = run
        self._on_finished(run, record)
        size = run.records.record_size(record)
        with self._lock:
            self._finished.put(run.plan_id, record, size)
        run.release_tree()
        complete = {"event": "plan_complete", "plan_id": run.plan_id, "run_id": run.run_id,
                    "any_failed": record["any_failed"], "cancelled": record["cancelled"],
                    "outcome": record["outcome"], "description": run.plan.description,
                    "cancel_reason": record["cancel_reason"], "error": record["error"],
                    "failed_op": record["failed_op"], "time": run.ended_at}
        if run.world is not None:
            complete.update(terminal=record["terminal"], terminal_reason=record["terminal_reason"],
                            state=record["state"])
            if "scene" in record:
                complete["scene"] = record["scene"]
        run.emit(complete)
        run.flush_events()
        run.mark_done()
        with self._lock:
            del self._finishing[run.plan_id]

    # --- waiting ----------------------------------------------------------------------

    def await_runs(self, runs: list[PlanRun], wait_ms: int) -> bool:
        """Wait up to ``wait_ms`` for the runs to finish (ticking them here when no loop runs)."""
        if self.in_tick():
            return all(run.done.is_set() for run in runs)  # the teardown follows the tick in progress
        if self._thread is None:
            for run in runs:
                self.tick_run(run)
        else:
            deadline = time.monotonic() + wait_ms / 1000.0
            for run in runs:
                if not run.done.wait(max(0.0, deadline - time.monotonic())):
                    break
        return all(run.done.is_set() for run in runs)

    def run_until_done(self, run: PlanRun, timeout: float | None) -> bool:
        """Tick (or wait for the tick loop) until ``run`` finished; False if ``timeout`` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not run.done.is_set():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            if self._thread is not None:
                run.done.wait(remaining)
                continue
            self.tick_once()
            if not run.done.is_set():
                self._wake.wait(self.tick_period if remaining is None else min(self.tick_period, remaining))
                self._wake.clear()
        return True

    # --- the loop ---------------------------------------------------------------------

    @property
    def looping(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._stopping.clear()
            self._thread = threading.Thread(target=self._loop, name="bt_exec-tick", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        thread = self._thread
        if thread is None:
            return
        self._stopping.set()
        self._wake.set()
        thread.join()
        self._thread = None

    def _loop(self) -> None:
        while not self._stopping.is_set():
            began = time.monotonic()
            try:
                self.tick_once()
            except Exception:
                log.exception("tick loop: unexpected error")
            self._wake.wait(self._sleep_s(began))
            self._wake.clear()

    def _sleep_s(self, began: float) -> float | None:
        """How long the loop may sleep unless woken: the rest of the period while a period has work to look for
        (sources polled, the gate off, a backend's due news it cannot time), else until the next timer or the
        backend's next due news, whichever comes first (None: neither)."""
        now = time.monotonic()
        rest = max(0.0, self.tick_period - (now - began))
        wake_at = None
        if self._send_due_news is not None:
            if self._news_due_at is None:
                return rest
            try:
                wake_at = self._news_due_at()
            except Exception:  # a backend's fault never stops the loop: it looks every period instead
                log.exception("news_due_at of the backend failed")
                return rest
        with self._lock:
            if self._due or self._polling or not self.tick_on_news_only:
                return rest
            if self._timers and (wake_at is None or self._timers[0][0] < wake_at):
                wake_at = self._timers[0][0]
        return None if wake_at is None else max(rest, wake_at - now)
