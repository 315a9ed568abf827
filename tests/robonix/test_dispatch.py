"""McpBackend on the stand-in providers (a real process, real MCP sessions over streamable HTTP): Robonix's
dispatch of do nodes, synchronous and asynchronous, its faults, cancels, and many calls on one loop thread."""
from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid

import pytest

pytest.importorskip("mcp.client.streamable_http", reason="the MCP dispatch needs the mcp package")

from .provider_fixtures import ASYNC, GARBAGE, RUN, SYNC, ProviderProcess, TableResolver, standin_resolver  # noqa: E402

import bt_exec  # noqa: E402
from bt_exec.backends import CapabilityCall  # noqa: E402
from bt_exec.errors import ConfigError  # noqa: E402
from bt_exec.robonix.dispatch import Endpoint, McpBackend, ReplyError, cut_text, mcp_url, tool_name  # noqa: E402

WAIT_S = 30.0  # the longest a test waits for news (a loaded machine); a pass takes far less


@pytest.fixture(scope="module")
def providers():
    process = ProviderProcess()
    yield process
    process.stop()


class Calls:
    """A backend and the news it gives: ``notify`` sets an event that waiting tests block on."""

    def __init__(self, resolver, **options):
        self.news = threading.Event()
        self.resolver = resolver
        self.backend = McpBackend(resolver, notify=self.news.set, **options)

    def start(self, provider: str, contract: str, **args) -> str:
        run_id = self.backend.start(CapabilityCall("plan", "op", contract, args, provider, "call"))
        assert isinstance(run_id, str), run_id
        return run_id

    def until(self, done, what: str):
        """Wait for ``done()`` to answer something true (checked again at each piece of news)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            self.news.clear()
            answer = done()
            if answer:
                return answer
            assert self.news.wait(max(0.0, deadline - time.monotonic())), f"no news within {WAIT_S} s: {what}"

    def final(self, run_id: str):
        status = self.until(lambda: (s := self.backend.status(run_id)).terminal and s, f"{run_id} to end")
        return status

    def call(self, provider: str, contract: str, **args):
        return self.final(self.start(provider, contract, **args))

    def idle(self) -> None:
        self.until(lambda: self.backend.calls_in_flight == 0, "every call's work to end")


@pytest.fixture
def calls(providers):
    made = Calls(standin_resolver(providers), poll_period_s=0.05)
    yield made
    made.backend.close()


def test_a_synchronous_call_answers_its_text_contents_joined(calls):
    assert calls.call(SYNC, "robonix/test/sync/echo", text="hello") == ("SUCCEEDED", "hello", "", "", "success")
    joined = calls.call(SYNC, "robonix/test/sync/lines", count=3)
    assert joined.state == "SUCCEEDED" and joined.output == "line 1\nline 2\nline 3"
    calls.idle()
    assert calls.resolver.resolved == len(calls.resolver.released) == 2  # every channel went back


def test_a_synchronous_call_ends_at_its_reply_and_its_endpoint_goes_back_once_its_session_closed(calls):
    """The transport's close is held until the test lets it go: the end must come while it is held."""
    let_close, closed = threading.Event(), threading.Event()
    opened = calls.backend._open_transport

    @contextlib.asynccontextmanager
    async def held(url, **options):
        async with opened(url, **options) as streams:
            yield streams
            while not let_close.is_set():
                await asyncio.sleep(0.01)
        closed.set()

    calls.backend._open_transport = held
    for contract, args, state in (("robonix/test/sync/echo", {"text": "early"}, "SUCCEEDED"),
                                  ("robonix/test/sync/refuse", {"reason": "no"}, "FAILED")):
        let_close.clear()
        closed.clear()
        released = len(calls.resolver.released)
        ended = calls.call(SYNC, contract, **args)
        assert ended.state == state and not closed.is_set()
        assert calls.backend.calls_in_flight == 1 and len(calls.resolver.released) == released
        let_close.set()
        calls.idle()
        assert closed.is_set() and len(calls.resolver.released) == released + 1


def test_is_error_fails_the_call_with_the_providers_text(calls):
    refused = calls.call(SYNC, "robonix/test/sync/refuse", reason="the gripper is closed")
    assert refused.state == "FAILED" and refused.error == "mcp tool error: the gripper is closed"
    raised = calls.call(SYNC, "robonix/test/sync/fail", reason="the arm is stuck")
    assert raised.state == "FAILED" and raised.error.startswith("mcp tool error: ")
    assert "the arm is stuck" in raised.error
    unknown = calls.call(SYNC, "robonix/test/sync/no_such_tool")
    assert unknown.state == "FAILED" and "no_such_tool" in unknown.error


def test_garbage_fails_the_call_naming_what_was_wrong(calls):
    garbage = calls.call(GARBAGE, "robonix/test/garbage/anything")
    assert garbage.state == "FAILED"
    assert garbage.error.startswith("MCP call_tool 'anything' failed: the reply is not a valid MCP result")
    assert "\n" not in garbage.error and len(garbage.error) < 400
    # Contents other than text are left out of the output, as Robonix's executor leaves them, and said so.
    image = calls.call(SYNC, "robonix/test/sync/image")
    assert image.state == "SUCCEEDED" and image.output == "" and "other than text" in image.detail


def test_a_provider_down_or_unknown_fails_that_call_only(calls, providers):
    down = calls.call("down", "robonix/test/down/anything")
    assert down.state == "FAILED"
    assert down.error.startswith("MCP HTTP connect to 'http://127.0.0.1:9/mcp' failed: ")
    unknown = calls.call("nobody", "robonix/test/nobody/anything")
    assert unknown == ("FAILED", None, "ConnectCapability failed: provider 'nobody' is not registered", "", None)
    assert calls.call(SYNC, "robonix/test/sync/echo", text="still here").output == "still here"
    no_provider = calls.backend.start(CapabilityCall("plan", "op", "robonix/test/sync/echo", {}, None, "call"))
    assert no_provider.state == "FAILED" and "names no provider" in no_provider.error


def test_a_resolver_that_breaks_fails_the_call_with_its_reason(providers):
    class Broken(TableResolver):
        def resolve(self, provider_id, contract_id):
            raise KeyError(provider_id)

    class Wrong(TableResolver):
        def resolve(self, provider_id, contract_id):
            return f"{providers.base}/sync"  # a URL, not an Endpoint

    for resolver, expected in ((Broken({}), "resolving robonix/test/sync/echo of provider 'standin_sync' failed: "
                                            "'standin_sync'"),
                               (Wrong({}), "the resolver answered '127.0.0.1:")):
        calls = Calls(resolver)
        try:
            failed = calls.call(SYNC, "robonix/test/sync/echo")
            assert failed.state == "FAILED" and failed.error.startswith(expected), failed
        finally:
            calls.backend.close()


def test_replies_and_outputs_are_bounded_in_bytes(providers):
    calls = Calls(standin_resolver(providers), max_reply_bytes=64 * 1024, max_output_bytes=1000)
    try:
        too_big = calls.call(SYNC, "robonix/test/sync/big", size=200_000)
        assert too_big.state == "FAILED" and "passed 65536 bytes; it was not read further" in too_big.error
        cut = calls.call(SYNC, "robonix/test/sync/big", size=5000)
        assert cut.state == "SUCCEEDED" and len(cut.output.encode()) <= 1000
        assert cut.output.startswith("xxx") and cut.output.endswith("[cut: the text was 5000 bytes, only its start is "
                                                                     "kept]")
    finally:
        calls.backend.close()
    assert cut_text("é" * 600, 300).encode().__len__() <= 300


def test_a_hanging_call_ends_at_once_when_cancelled(calls, providers):
    run_id = calls.start(SYNC, "robonix/test/sync/hang")
    deadline = time.monotonic() + WAIT_S
    while providers.state()["hanging"] < 1:  # the call has reached the provider and hangs there
        assert time.monotonic() < deadline, "the hang call never reached the provider"
        time.sleep(0.02)
    began = time.monotonic()
    calls.backend.cancel(run_id)
    calls.idle()
    assert time.monotonic() - began < 2.0
    assert calls.resolver.resolved == len(calls.resolver.released) == 1
    assert calls.backend.status(run_id).error.startswith("mcp: unknown run")  # a cancelled call is forgotten


def test_an_asynchronous_capability_is_polled_to_its_end(calls, providers):
    done = calls.call(ASYNC, RUN, duration_s=0.3, detail="arrived")
    assert done.state == "SUCCEEDED" and done.event == "success"
    assert done.output.replace(" ", "") == '{"state":"SUCCEEDED","detail":"arrived"}'  # the status reply's text
    failed = calls.call(ASYNC, RUN, duration_s=0.1, outcome="FAILED", detail="fell over")
    assert failed.state == "FAILED" and failed.error == "fell over"
    assert calls.call(ASYNC, RUN, duration_s=0.1, outcome="TIMEOUT", detail="too slow").state == "TIMEOUT"
    assert calls.call(ASYNC, RUN, duration_s=0.1, outcome="cancelled").state == "CANCELED"
    # A provider of Robonix's legacy kind answers no run_id: status (and cancel) are called with {}.
    legacy = calls.call(ASYNC, RUN, duration_s=0.1, with_run_id=False)
    assert legacy.state == "SUCCEEDED"
    runs = providers.state()["runs"]
    assert all(run["polls"] >= 1 and not run["cancelled"] for run in runs.values())


def test_a_paused_capability_is_reported_paused(calls):
    run_id = calls.start(ASYNC, RUN, duration_s=1.5, running_state="PAUSED")  # long enough to be polled paused
    paused = calls.until(lambda: (s := calls.backend.status(run_id)).state != "RUNNING" and s, "PAUSED")
    assert paused.detail == "on its way"
    assert calls.final(run_id).state == "SUCCEEDED"


@pytest.mark.parametrize("reply, expected", [
    ("not_json", "robonix/test/async/run/status answered text that is not JSON: all is well, probably"),
    ("no_state", "robonix/test/async/run/status answered no 'state' field (a string is required): "),
    ("unknown_state", "robonix/test/async/run/status answered the unknown state 'WIGGLING'"),
    ("error", "status poll failed for robonix/test/async/run: mcp tool error: "),
])
def test_a_status_reply_that_is_garbage_fails_the_call(calls, reply, expected):
    failed = calls.call(ASYNC, RUN, status_reply=reply)
    assert failed.state == "FAILED" and failed.error.startswith(expected), failed.error


def test_cancelling_an_asynchronous_capability_calls_its_cancel(calls, providers):
    before = set(providers.state()["runs"])
    # Cancelled while it is polled: the cancel carries the run_id the first reply gave.
    polled = calls.start(ASYNC, RUN, duration_s=60, running_state="PAUSED")
    calls.until(lambda: calls.backend.status(polled).state == "PAUSED", "the first status poll")
    calls.backend.cancel(polled)
    # Cancelled while its start is answered: the run is cancelled as soon as the reply names it.
    early = calls.start(ASYNC, RUN, duration_s=60, reply_after_s=1.0)
    deadline = time.monotonic() + WAIT_S
    while len(providers.state()["runs"]) < len(before) + 2:  # the provider began the run; its answer is held
        assert time.monotonic() < deadline, "the run never reached the provider"
        time.sleep(0.02)
    calls.backend.cancel(early)
    calls.idle()
    runs = {run_id: run for run_id, run in providers.state()["runs"].items() if run_id not in before}
    assert len(runs) == 2
    assert all(run["cancelled"] and run["cancelled_by"] == run_id for run_id, run in runs.items())
    assert calls.resolver.resolved == len(calls.resolver.released) == 2


def test_closing_the_backend_cancels_its_asynchronous_calls(providers):
    calls = Calls(standin_resolver(providers), poll_period_s=0.05)
    before = set(providers.state()["runs"])
    run_id = calls.start(ASYNC, RUN, duration_s=60, running_state="PAUSED")
    calls.until(lambda: calls.backend.status(run_id).state == "PAUSED", "the first status poll")
    calls.backend.close()
    runs = [run for run_id, run in providers.state()["runs"].items() if run_id not in before]
    assert [run["cancelled"] for run in runs] == [True]
    closed = calls.backend.start(CapabilityCall("plan", "op", "robonix/test/sync/echo", {}, SYNC, "call"))
    assert closed.state == "FAILED" and closed.error == "the MCP backend is closed"


def test_fifty_calls_at_once_run_on_one_loop_thread(providers):
    threads_before = threading.active_count()
    calls = Calls(standin_resolver(providers), resolve_workers=2)
    try:
        group = uuid.uuid4().hex
        # Each call answers only once all fifty are in at the provider at once: calls made one after another,
        # or fewer at a time, would each wait the rendezvous's 30 s out.
        run_ids = [calls.start(SYNC, "robonix/test/sync/rendezvous", group=group, count=50) for _ in range(50)]
        began = time.monotonic()
        answers = [calls.final(run_id) for run_id in run_ids]
        assert time.monotonic() - began < 25
        assert {(a.state, a.output) for a in answers} == {("SUCCEEDED", "50")}
        # The loop thread and the resolver's pool, whatever the number of calls.
        assert threading.active_count() <= threads_before + 1 + 2
        assert [calls.backend.status(run_id).state for run_id in run_ids[:3]] == ["FAILED"] * 3  # read: forgotten
    finally:
        calls.backend.close()


def test_ended_calls_nobody_reads_are_forgotten_past_a_bound(providers):
    calls = Calls(standin_resolver(providers), keep_unread=2)
    try:
        unread = [calls.start(SYNC, "robonix/test/sync/echo", text=str(i)) for i in range(4)]
        calls.idle()
        last = calls.call(SYNC, "robonix/test/sync/echo", text="last")  # a start drops what is over the bound
        assert last.output == "last"
        # The two that ended first were dropped (whichever they were), the other two are still there to read.
        assert sorted(calls.backend.status(run_id).state for run_id in unread) == ["FAILED", "FAILED", "SUCCEEDED",
                                                                                   "SUCCEEDED"]
    finally:
        calls.backend.close()


def the_op(record: dict) -> dict:
    """The one op of ``arena``'s plan in a final record."""
    return next(op for op in record["ops"] if op["op_id"] == "go")


def arena(provider: str, contract: str, args_json: str = "{}") -> dict:
    return {"plan_id": "1", "root_index": 0, "nodes": [
        {"node_kind": 2, "children": [], "op_id": "go", "description": "call the provider",
         "call": {"call_id": "c1", "provider_id": provider, "contract_id": contract, "args_json": args_json}}]}


def test_the_executor_times_out_a_hanging_call_and_cancels_an_asynchronous_one(providers):
    resolver = standin_resolver(providers)
    backend = McpBackend(resolver, poll_period_s=0.05)
    executor = bt_exec.Executor(backend, op_timeout_s=0.5)
    try:
        hung = executor.submit(arena(SYNC, "robonix/test/sync/hang"))["plan_id"]
        op = the_op(executor.run_until_complete(hung, timeout=WAIT_S))
        assert op["state"] == "timeout" and "op timeout of 0.5 s" in op["result"]["error"]
        before = set(providers.state()["runs"])
        slow = executor.submit(arena(ASYNC, RUN, '{"duration_s": 60}'))["plan_id"]
        assert the_op(executor.run_until_complete(slow, timeout=WAIT_S))["state"] == "timeout"
        executor.close()
        backend.close()
        runs = [run for run_id, run in providers.state()["runs"].items() if run_id not in before]
        assert [run["cancelled"] for run in runs] == [True]
        assert resolver.resolved == len(resolver.released) == 2
    finally:
        executor.close()
        backend.close()


def test_an_executor_runs_a_robonix_plan_on_the_providers(providers):
    executor = bt_exec.Executor(McpBackend(standin_resolver(providers), poll_period_s=0.05))
    try:
        plan_id = executor.submit(arena(SYNC, "robonix/test/sync/echo", '{"text": "over MCP"}'))["plan_id"]
        result = the_op(executor.run_until_complete(plan_id, timeout=WAIT_S))["result"]
        assert result["success"] and result["output"] == "over MCP"
    finally:
        executor.close()


def test_endpoints_and_tool_names_follow_robonix():
    assert mcp_url("127.0.0.1:8000") == "http://127.0.0.1:8000/mcp"
    assert mcp_url("http://host:8000/") == "http://host:8000/mcp"
    assert mcp_url("https://host/base/mcp") == "https://host/base/mcp"
    assert mcp_url("host:1/provider") == "http://host:1/provider/mcp"
    with pytest.raises(ReplyError, match="stdio"):
        mcp_url("stdio://python3 server.py")
    assert tool_name("robonix/service/navigation/navigate/status") == "status"
    assert tool_name("plain") == "plain"
    assert Endpoint("host:1").asynchronous is False


def test_bad_options_are_refused_clearly():
    for options in ({"poll_period_s": 0}, {"cancel_timeout_s": -1}, {"max_output_bytes": 10}, {"resolve_workers": 0}):
        with pytest.raises(ConfigError, match="McpBackend: "):
            McpBackend(TableResolver({}), **options)
