"""Fault injection: backends that raise, answer garbage or never answer. The op fails (or ends ``timeout``) with a
clear error, the plan follows its semantics, and the executor goes on serving."""
import threading

import pytest
from qwen3_graphs import graph, scene, step
from rtdl_plans import do, envelope, par, seq

import bt_exec
from bt_exec import CallStatus


class FaultyBackend:
    """A sim backend in which the ops named in ``faults`` misbehave: op id -> fault.

    Faults: ``raise_start``, ``raise_status``, ``raise_cancel``, ``garbage_start`` (answers 42),
    ``garbage_status`` (answers a dict), ``hang`` (RUNNING for ever).
    """

    def __init__(self, faults, script=None):
        self.sim = bt_exec.SimBackend(script or {"default": {"outcome": "success", "duration_s": 0.05}})
        self.faults = faults
        self.hanging: dict[str, str] = {}  # run id -> op id
        self.cancelled: list[str] = []
        self._lock = threading.Lock()

    def _fault(self, op_id):
        return self.faults.get(op_id)

    def start(self, call):
        fault = self._fault(call.op_id)
        if fault == "raise_start":
            raise RuntimeError("driver crashed")
        if fault == "garbage_start":
            return 42
        if fault == "hang":
            run_id = f"hang-{call.call_id}"
            with self._lock:
                self.hanging[run_id] = call.op_id
            return run_id
        run_id = self.sim.start(call)
        if isinstance(run_id, str) and fault in ("raise_status", "garbage_status", "raise_cancel"):
            with self._lock:
                self.hanging[run_id] = call.op_id
        return run_id

    def status(self, run_id):
        fault = self._fault(self.hanging.get(run_id))
        if fault == "raise_status":
            raise ConnectionError("link lost")
        if fault == "garbage_status":
            return {"state": "SUCCEEDED"}
        if fault in ("hang", "raise_cancel"):
            return CallStatus("RUNNING")
        return self.sim.status(run_id)

    def cancel(self, run_id):
        self.cancelled.append(run_id)
        if self._fault(self.hanging.get(run_id)) == "raise_cancel":
            raise RuntimeError("cancel refused")
        if not run_id.startswith("hang-"):
            self.sim.cancel(run_id)


def three_in_a_row():
    return envelope(seq(do("first"), do("second"), do("third")))  # ops 2, 3, 4 under root 1


def serves_a_normal_plan_after(executor):
    answer = executor.submit(envelope(do("after the fault")))
    assert answer["accepted"]
    assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"


@pytest.mark.parametrize("fault, error", [
    ("raise_start", "backend raised RuntimeError: driver crashed"),
    ("raise_status", "backend status raised ConnectionError: link lost"),
    ("garbage_start", "backend returned 42 from start, expected a run id or a terminal CallStatus"),
    ("garbage_status", "backend returned {'state': 'SUCCEEDED'} from status, expected a CallStatus"),
])
def test_a_faulty_call_fails_its_op_with_the_fault_named_and_the_sequence_stops(fault, error):
    executor = bt_exec.Executor(FaultyBackend({"3": fault}))
    plan_id = executor.submit(three_in_a_row())["plan_id"]
    record = executor.run_until_complete(plan_id, timeout=10)
    ops = {op["op_id"]: op for op in record["ops"]}
    assert record["outcome"] == "failed"
    assert ops["2"]["state"] == "succeeded"
    assert ops["3"]["state"] == "failed" and ops["3"]["result"]["error"] == error
    assert ops["4"]["state"] == "pending"  # a sequence stops at its first failure
    serves_a_normal_plan_after(executor)
    executor.close()


def test_a_call_that_never_answers_ends_timeout_and_is_cancelled_in_the_backend():
    backend = FaultyBackend({"3": "hang"})
    executor = bt_exec.Executor(backend, op_timeout_s=0.2)
    executor.start()
    plan_id = executor.submit(three_in_a_row())["plan_id"]
    record = executor.run_until_complete(plan_id, timeout=10)
    hung = record["ops"][2]
    assert hung["state"] == "timeout" and record["outcome"] == "failed"
    assert hung["result"]["error"] == "no result within the op timeout of 0.2 s; the call was cancelled"
    assert hung["result"]["event"] == "timeout"
    assert 0.2 <= hung["ended_at"] - hung["started_at"] < 2.0
    assert backend.cancelled == ["hang-1:3"]
    assert record["ops"][3]["state"] == "pending"
    serves_a_normal_plan_after(executor)
    executor.close()


def test_in_a_parallel_a_timeout_fails_the_parallel_once_its_siblings_are_done():
    # RTDL semantics: a failed branch does not cancel its siblings; the parallel fails after all of them.
    script = {"default": {"outcome": "success", "duration_s": 0.3}}
    backend = FaultyBackend({"2": "hang"}, script=script)
    executor = bt_exec.Executor(backend, op_timeout_s=0.5)
    executor.start()
    plan_id = executor.submit(envelope(par(do("hangs"), seq(do("quick"), do("quick too")))))["plan_id"]
    record = executor.run_until_complete(plan_id, timeout=10)
    states = {op["op_id"]: op["state"] for op in record["ops"]}
    assert states == {"1": "failed", "2": "timeout", "3": "succeeded", "4": "succeeded", "5": "succeeded"}
    assert backend.sim.active_calls() == []
    executor.close()


def test_without_an_op_timeout_a_slow_call_is_left_to_run():
    executor = bt_exec.Executor(FaultyBackend({"1": "hang"}))
    plan_id = executor.submit(envelope(do("hangs")))["plan_id"]
    for _ in range(20):
        executor.tick_once()
    assert executor.get_plan_status(plan_id)["ops"][0]["state"] == "running"
    executor.close()


def test_a_cancel_that_raises_still_ends_the_plan_and_the_executor_serves_on():
    executor = bt_exec.Executor(FaultyBackend({"1": "raise_cancel"}))
    plan_id = executor.submit(envelope(do("cannot be cancelled")))["plan_id"]
    executor.tick_once()
    assert executor.cancel_plan(plan_id)["finished"]
    assert executor.get_plan_result(plan_id)["ops"][0]["state"] == "canceled"
    serves_a_normal_plan_after(executor)


def test_a_step_that_times_out_follows_its_timeout_transition():
    steps = [step("s0", "detect", "cap")]
    backend = FaultyBackend({"s0": "hang"})
    executor = bt_exec.Executor(backend, scene=scene(), op_timeout_s=0.2)
    answer = executor.submit(graph(steps, {"s0": {"success": "completed", "failed": "stop", "collision": "stop",
                                                  "timeout": "operator_required", "not_found": "operator_required"}}))
    assert answer["accepted"], answer["issues"]
    record = executor.run_until_complete(answer["plan_id"], timeout=10)
    assert record["trace"][0]["outcome"] == "timeout" and record["terminal"] == "operator_required"
    executor.close()


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "5"])
def test_an_op_timeout_must_be_a_positive_number_of_seconds(bad):
    with pytest.raises(ValueError, match="op_timeout_s"):
        bt_exec.Executor(op_timeout_s=bad)


def test_the_cli_run_takes_an_op_timeout(tmp_path, capsys):
    from bt_exec.cli import main

    plan = tmp_path / "plan.json"
    plan.write_text(__import__("json").dumps(three_in_a_row()))
    script = tmp_path / "slow.json"
    script.write_text('{"default": {"outcome": "success", "duration_s": 30}}')
    assert main(["run", str(plan), "--sim-script", str(script), "--op-timeout", "0.2"]) == 1
    out = capsys.readouterr().out
    assert "op 2 do timeout" in out and "ops: 1 failed, 1 timeout, 2 pending" in out
    assert main(["run", str(plan), "--op-timeout", "0"]) == 2


def test_beyond_max_plans_a_submit_is_refused_busy_and_control_still_gets_through():
    from bt_exec.compilers.catalog import BUILTIN_PREFIX

    executor = bt_exec.Executor(bt_exec.SimBackend({"default": {"outcome": "success", "duration_s": 30}}), max_plans=2)
    first, second = (executor.submit(envelope(do(f"plan {n}")))["plan_id"] for n in (1, 2))
    refused = executor.submit(envelope(do("one too many")))
    assert not refused["accepted"] and refused["verdict"] == "busy"
    assert refused["issues"][0]["code"] == "too_many_plans" and "max_plans" in refused["issues"][0]["message"]
    reads = executor.submit(envelope(do("list plans", cap=BUILTIN_PREFIX + "get_all_plans")))
    assert not reads["accepted"] and reads["verdict"] == "busy", "a plan that reads takes a plan's room"
    control = executor.submit(envelope(do("cancel one", cap=BUILTIN_PREFIX + "cancel_plan",
                                          args={"plan_id": first, "wait_ms": 0})))
    assert control["accepted"]
    executor.run_until_complete(control["plan_id"], timeout=5)
    assert executor.get_plan_result(first)["cancelled"]
    assert executor.submit(envelope(do("room again")))["accepted"]
    executor.close()


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_plans_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_plans"):
        bt_exec.Executor(max_plans=bad)
