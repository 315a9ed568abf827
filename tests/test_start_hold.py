"""A plan's start held for its door (``Executor.submit(hold_start_s=...)``, ``release_start``): the tick
skips the held plan and never waits for it; the hold ends at the release, when it runs out, or at a cancel."""
import time

import pytest
from rtdl_plans import do, seq

from bt_exec.control import ControlCalls
from bt_exec.errors import BadArgument

HOLD_S = 1.0  # the longest hold: a test that sees the plan start early did not wait for the hold to run out


def kinds(events, plan_id):
    return [event["event"] for event in events.of(plan_id)]


def test_a_held_plan_starts_at_its_release_while_the_others_tick(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.05}})
    running = ex.submit(seq(do(), do()))["plan_id"]
    held = ex.submit(seq(do()), hold_start_s=HOLD_S)
    assert held["accepted"], held
    began = time.monotonic()
    ex.tick_once()
    assert time.monotonic() - began < HOLD_S / 2  # the tick did not wait for the held plan
    assert kinds(events, running)[0] == "plan_started"
    assert kinds(events, held["plan_id"]) == []  # not started: no plan_started, no tick
    assert held["plan_id"] in [plan["plan_id"] for plan in ex.get_all_plans()["plans"]]  # in flight all the same
    ex.release_start(held["plan_id"])
    ex.release_start(held["plan_id"])  # again, or for a plan never held: nothing happens
    ex.release_start("999")
    ex.tick_once()
    assert kinds(events, held["plan_id"])[0] == "plan_started"
    assert ex.run_until_complete(held["plan_id"], timeout=5)["outcome"] == "succeeded"


def test_a_hold_never_released_runs_out(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.0}})
    hold_s = 0.05
    submitted = time.time()
    plan_id = ex.submit(seq(do()), hold_start_s=hold_s)["plan_id"]
    ex.tick_once()
    assert kinds(events, plan_id) == []
    assert ex.run_until_complete(plan_id, timeout=5)["outcome"] == "succeeded"
    started = next(event for event in events.of(plan_id) if event["event"] == "plan_started")
    assert started["time"] - submitted >= hold_s


def test_a_cancel_ends_the_hold(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.0}})
    plan_id = ex.submit(seq(do()), hold_start_s=HOLD_S)["plan_id"]
    began = time.monotonic()
    answer = ex.cancel_plan(plan_id, wait_ms=3000)
    assert answer["finished"] and time.monotonic() - began < HOLD_S / 2, answer
    assert kinds(events, plan_id)[0] == "plan_started" and events.complete(plan_id)["cancelled"]


def test_the_tick_loop_runs_other_plans_while_one_is_held(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.01}})
    ex.start()
    held = ex.submit(seq(do()), hold_start_s=HOLD_S)["plan_id"]
    other = ex.submit(seq(do(), do(), do()))["plan_id"]
    assert ex.wait_for_plan(other, timeout_s=HOLD_S / 2)["outcome"] == "succeeded"
    assert kinds(events, held) == []
    ex.release_start(held)
    assert ex.wait_for_plan(held, timeout_s=5)["outcome"] == "succeeded"


def test_resubmitting_a_held_plans_run_id_answers_as_before(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.0}})
    first = ex.submit(seq(do()), run_id="once", hold_start_s=HOLD_S)
    assert ex.submit(seq(do()), run_id="once") == first
    ex.release_start(first["plan_id"])
    assert ex.run_until_complete(first["plan_id"], timeout=5)["outcome"] == "succeeded"


@pytest.mark.parametrize("hold", [-0.1, HOLD_S + 0.5, True, "0.02", float("nan")])
def test_a_hold_out_of_range_is_refused(make_executor, hold):
    ex = make_executor()
    with pytest.raises(ValueError, match="hold_start_s"):
        ex.submit(seq(do()), hold_start_s=hold)
    assert ex.get_all_plans()["count"] == 0


def test_control_calls_hold_the_starts_of_the_plans_they_submit(make_executor, events):
    """A door's dispatcher (``ControlCalls(hold_start_s=...)``) holds what it submits, and nothing else; a caller
    cannot ask for a hold through the route's arguments."""
    ex = make_executor({"default": {"duration_s": 0.0}})
    held_calls, plain_calls = ControlCalls(ex, hold_start_s=HOLD_S), ControlCalls(ex)
    held = held_calls.call("submit_plan", {"graph": seq(do())})["plan_id"]
    plain = plain_calls.call("submit_plan", {"graph": seq(do())})["plan_id"]
    ex.tick_once()
    assert kinds(events, held) == [] and kinds(events, plain)[0] == "plan_started"
    # The other calls reach the executor as they are.
    assert held in [plan["plan_id"] for plan in held_calls.call("get_all_plans")["plans"]]
    ex.release_start(held)
    assert ex.run_until_complete(held, timeout=5)["outcome"] == "succeeded"
    with pytest.raises(BadArgument, match="hold_start_s"):
        plain_calls.call("submit_plan", {"graph": seq(do()), "hold_start_s": HOLD_S})
