"""Memory budgets in bytes, through the Python API: op outputs kept, a plan's outputs in all, finished
records, the answers remembered per run_id, and what a refusal quotes. Each is driven to its limit and
tracemalloc shows what stays allocated does not grow with what a client sends."""
import gc
import json
import tracemalloc

import pytest
from rtdl_plans import do, envelope, par, seq

import bt_exec
from bt_exec.compilers.catalog import BUILTIN_PREFIX


def finish(ex, plan_id):
    return ex.run_until_complete(plan_id, timeout=60)


def retained(action):
    """Bytes still allocated after ``action()`` (its result dropped), and the peak while it ran."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        action()
        gc.collect()
        now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return now - before, peak - before


class TestOpResults:
    def test_an_output_over_the_budget_is_kept_as_a_marker_with_its_size(self, make_executor, events):
        blob = {"blob": "x" * 50_000}
        ex = make_executor({"caps": {"sim.big": {"output": blob}}}, max_result_bytes=1000)
        record = finish(ex, ex.submit(seq(do("big", cap="sim.big"), do("small")))["plan_id"])
        big, small = record["ops"][1]["result"], record["ops"][2]["result"]
        assert big["success"] and big["output"]["truncated"] is True
        assert big["output"]["bytes"] == len(json.dumps(blob, separators=(",", ":")))
        assert big["output"]["preview"].startswith('{"blob":"xxxx') and len(big["output"]["preview"]) <= 300
        assert small["output"] == {"sim": True, "cap": "sim.act"}, "an output within the budget is kept whole"
        event = [e for e in events.of(record["plan_id"]) if e["event"] == "node_state" and e["op_id"] == "2"
                 and e["state"] == "succeeded"][0]
        assert event["result"]["output"] == big["output"], "events carry what the record keeps"

    def test_a_plans_outputs_in_all_stay_within_its_budget(self, make_executor):
        output = {"text": "y" * 2000}
        ex = make_executor({"caps": {"sim.mid": {"output": output}}}, max_plan_result_bytes=20_000)
        record = finish(ex, ex.submit(seq(*[do(f"op {n}", cap="sim.mid") for n in range(40)]))["plan_id"])
        outputs = [op["result"]["output"] for op in record["ops"][1:]]
        whole = [o for o in outputs if o == output]
        cut = [o for o in outputs if o.get("truncated")]
        assert 5 <= len(whole) <= 10 and len(whole) + len(cut) == 40, "whole until the plan's budget, then cut"
        assert all(o["bytes"] == 2011 for o in cut)

    def test_a_long_error_is_cut_to_a_message(self, make_executor):
        ex = make_executor({"caps": {"sim.bad": {"outcome": "failure", "error": "e" * 20_000}}})
        record = finish(ex, ex.submit(seq(do("fails", cap="sim.bad")))["plan_id"])
        error = record["ops"][1]["result"]["error"]
        assert len(error) < 1100 and "chars cut" in error and error.startswith("eeee")

    def test_an_output_that_cannot_be_measured_is_cut(self, make_executor):
        cyclic = []
        cyclic.append(cyclic)
        ex = make_executor({"caps": {"sim.odd": {"output": cyclic}}})
        record = finish(ex, ex.submit(seq(do("cyclic", cap="sim.odd")))["plan_id"])
        output = record["ops"][1]["result"]["output"]
        assert output["truncated"] is True and output["bytes"] is None
        json.dumps(record)  # what doors send: it encodes


class TestSelfInspectingPlan:
    """A parallel of get_plan_status ops reading their own plan: each read is the size of the budget,
    not of the plan, so the plan costs memory and time in proportion to its ops."""

    @staticmethod
    def self_reading(ops):
        reads = [do(f"read {n}", cap=BUILTIN_PREFIX + "get_plan_status", args={"plan_id": "1"}) for n in range(ops - 1)]
        return json.dumps(envelope(par(*reads)))

    def run(self, ops):
        ex = bt_exec.Executor(bt_exec.SimBackend())
        text = self.self_reading(ops)
        outcome = {}

        def submit_and_run():
            answer = ex.submit(text)
            assert answer["accepted"], answer["message"]
            outcome["record"] = ex.run_until_complete(answer["plan_id"], timeout=300)

        kept, peak = retained(submit_and_run)
        ex.close(wait_ms=0)
        return outcome["record"], kept, peak

    def test_at_the_op_limit_memory_stays_linear(self):
        limit = bt_exec.Limits().max_ops
        record, kept, peak = self.run(limit)
        assert record["outcome"] == "succeeded" and len(record["ops"]) == limit
        first = record["ops"][1]["result"]["output"]
        assert first["truncated"] is True and first["bytes"] > 16 * 1024, "a status of 10,000 ops is cut"
        assert first["preview"].startswith('{"plan_id":"1"')
        # One full status of this plan is about 1.4 MB of JSON: 10,000 of them kept would be 14 GB.
        assert peak < 10_000 * 8_000, f"peak {peak / 1e6:.0f} MB while the plan ran"
        assert kept < 10_000 * 3_000, f"{kept / 1e6:.0f} MB kept by its finished record"

    def test_a_small_plan_reads_its_whole_status(self):
        record, _kept, _peak = self.run(5)
        status = record["ops"][1]["result"]["output"]
        assert [op["op_id"] for op in status["ops"]] == ["1", "2", "3", "4", "5"]


class TestFinishedRecords:
    def test_records_past_the_byte_budget_are_evicted_oldest_first(self):
        ex = bt_exec.Executor(bt_exec.SimBackend(), keep_finished_bytes=400_000)
        text = json.dumps({**envelope(seq(do("x" * 60_000))), "content": "c" * 60_000})
        ids = []

        def run_many():
            for _ in range(60):
                plan_id = ex.submit(text)["plan_id"]
                finish(ex, plan_id)
                ids.append(plan_id)

        kept, _peak = retained(run_many)
        listed = [plan["plan_id"] for plan in ex.get_finished_plans(limit=1000)["plans"]]
        assert 2 <= len(listed) <= 3 and listed[0] == ids[-1], "the newest kept, the oldest evicted"
        with pytest.raises(bt_exec.ControlError, match="too old"):
            ex.get_plan_result(ids[0])
        # 60 records of 120,000+ characters each: 7 MB if all were kept.
        assert kept < 2_000_000, f"{kept / 1e6:.1f} MB kept"
        ex.close(wait_ms=0)

    def test_the_newest_record_is_kept_whatever_its_size(self):
        ex = bt_exec.Executor(bt_exec.SimBackend(), keep_finished_bytes=10)
        record = finish(ex, ex.submit(seq(do("a"), do("b")))["plan_id"])
        assert record["outcome"] == "succeeded"


class TestRunIdAnswers:
    def test_remembered_answers_stay_within_their_byte_budget(self):
        ex = bt_exec.Executor(bt_exec.SimBackend(), remember_run_ids_bytes=200_000)
        bad = json.dumps(envelope(seq(*[do(f"bad {n}", cap="no dot " + "v" * 60_000) for n in range(20)])))

        def refuse_many():
            for n in range(200):
                answer = ex.submit(bad, run_id=f"run-{n}")
                assert not answer["accepted"]

        kept, _peak = retained(refuse_many)
        # Each refusal quotes 20 values of 60,000 characters: 200 whole answers would keep 240 MB.
        assert kept < 1_500_000, f"{kept / 1e6:.1f} MB kept"
        assert not ex.submit(bad, run_id="run-199")["accepted"]
        ex.close(wait_ms=0)

    def test_a_refusal_quotes_a_few_hundred_characters_of_a_value(self):
        ex = bt_exec.Executor(bt_exec.SimBackend())
        answer = ex.submit(envelope(seq(do("bad", cap="no dot " + "v" * 60_000))), run_id="r")
        assert not answer["accepted"] and len(answer["message"]) < 1200
        assert all(len(issue["message"]) <= 1100 and len(issue["path"]) <= 1100 for issue in answer["issues"])
        checked = ex.validate_plan(envelope(seq(do("bad", cap="no dot " + "v" * 60_000))))
        assert all(len(issue["message"]) <= 1100 for issue in checked["issues"])
        ex.close(wait_ms=0)

    def test_control_errors_quote_a_few_hundred_characters(self):
        ex = bt_exec.Executor(bt_exec.SimBackend())
        with pytest.raises(bt_exec.ControlError) as caught:
            ex.get_plan_status("9" * 60_000)
        assert len(str(caught.value)) < 600
        ex.close(wait_ms=0)


class TestOptions:
    @pytest.mark.parametrize("name", ["max_result_bytes", "max_plan_result_bytes", "keep_finished_bytes",
                                      "remember_run_ids_bytes", "keep_finished", "remember_run_ids"])
    @pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
    def test_a_budget_is_a_non_negative_integer(self, name, bad):
        with pytest.raises(ValueError, match=name):
            bt_exec.Executor(**{name: bad})

