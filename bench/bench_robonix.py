"""The Robonix door: how soon Execute's stream starts, and what Execute adds to the call a one-node plan makes.

Run from the repository root::

    python bench/bench_robonix.py            # full run (about 30 seconds on 2 cores)
    python bench/bench_robonix.py --quick    # smoke run

The executor side runs in this process: an Executor on the sim backend (every call answered at once), its
``ControlApi`` and ``RobonixServer`` on 127.0.0.1, then what is loaded frozen out of the collector's sight, as
``bt-exec robonix`` does once it serves. The client, as Pilot is, is a process of its own: the project's
stubs over a real gRPC channel (warmed up before anything is timed), told over a pipe what to call and when, and
answering with the times it took; the pipe is outside every time taken. The stand-in MCP providers (figure 3) are
a third process.

Figures:

1. A 256-op plan's ``plan_started``: the time from the Execute request to its first event in the client (the
   plan read from protobuf, checked as robonix-executor checks it, admitted and compiled by bt_exec, its start
   released, its first event through the server's loop and the channel). p50 and p99 of one plan at a time; the
   rest of each stream is read before the next. Bar: 10 ms at p50.
2. A one-node plan over Execute against the same call made directly, interleaved pairs: Execute from the request
   to the client's ``plan_complete``, and the sim backend's ``start`` of the same call (the call the plan's do
   node makes), in this process. The difference of each pair, p50 and p99; no bar (the runtime and the door's
   share alone). The medians of both are in the detail line.
3. The same against a local MCP provider: a second Executor whose backend is ``McpBackend`` (a call's end
   pushed to the runtime, as ``bt-exec robonix`` runs it), with a resolver over a plain table
   (no Atlas) naming the stand-in providers (``tests/robonix/providers.py``, a process of their own on
   127.0.0.1), its own ``RobonixServer`` and channel. Interleaved pairs: a one-node plan calling the sync
   stand-in's ``echo`` over Execute, request to ``plan_complete``; and the provider's own call, a raw MCP
   call of the same tool written on the mcp client (one persistent httpx client, a streamable-HTTP session per
   call: initialize, ``tools/call``, close, as McpBackend sends it) on an event loop in the client process. The
   difference of each pair, p50 and p99. Bar: 2 ms at p50. The medians of both are in the detail line.
   Interleaved with each pair, the same client's Execute of the same plan against a bare gRPC stream: a grpc.aio
   server in this process, on a loop thread of its own as ``RobonixServer``'s, that reads the Plan and writes the
   four events the door sends for it (``plan_started``, the node RUNNING, its success with the echo, then
   ``plan_complete``), built beforehand. Its median is the part of figure 3 that is gRPC's own, in Python on
   both ends, whatever the executor does; figure 3 less it (each triple's Execute less its raw call and its bare
   stream) is what the executor adds beyond gRPC, an info row.

The table is ``benchlib``'s; exit 1 when a gated bar is missed.
"""
from __future__ import annotations

import asyncio
import gc
import multiprocessing
import pathlib
import statistics
import sys
import threading
import time

from benchlib import Figure, parse_args, report, skipped

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "robonix"))

import bt_exec  # noqa: E402
from bt_exec.backends import CapabilityCall  # noqa: E402
from bt_exec.control import ControlApi  # noqa: E402
from bt_exec.robonix.stubs import StubsMissing  # noqa: E402

try:
    from bt_exec.robonix.dispatch import McpBackend, mcp_url
    from bt_exec.robonix.service import RobonixServer
    from bt_exec.robonix.wire import contracts_pb2_grpc, executor_pb2, pilot_pb2
    from provider_fixtures import SYNC, ProviderProcess, standin_resolver
    MISSING = None
except StubsMissing as missing:  # the figures are rows marked skipped, with what to install or run
    MISSING = str(missing)

STARTED_BAR_S = 0.010
ADDED_MCP_BAR_S = 0.002
ECHO = "robonix/test/sync/echo"  # the sync stand-in's echo tool
OPS = 256
CONTRACT = "robonix/bench/echo"
NO_RAW = "no raw py_trees counterpart: gRPC transport"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def do_node(op_id: str, provider: str = "bench_provider", contract: str = CONTRACT) -> pilot_pb2.RtdlNode:
    node = pilot_pb2.RtdlNode(node_kind=2, op_id=op_id, description=f"echo {op_id}")
    node.call.CopyFrom(pilot_pb2.CapabilityCall(call_id=f"call-{op_id}", provider_id=provider,
                                                contract_id=contract, args_json='{"text": "ping"}'))
    return node


def wide_plan(plan_id: str) -> pilot_pb2.Plan:
    """A sequence over OPS - 1 do nodes: OPS ops."""
    root = pilot_pb2.RtdlNode(node_kind=0, children=range(1, OPS), op_id="root", description="many echoes")
    return pilot_pb2.Plan(plan_id=plan_id, nodes=[root] + [do_node(f"op{i}") for i in range(1, OPS)])


def one_node_plan(plan_id: str, **call) -> pilot_pb2.Plan:
    return pilot_pb2.Plan(plan_id=plan_id, nodes=[do_node("only", **call)])


class Door:
    """An executor on the backend ``make_backend()`` makes (default: the sim) and the Robonix server over it."""

    def __init__(self, make_backend=None):
        self.sim = bt_exec.SimBackend() if make_backend is None else None
        backend = self.sim if make_backend is None else make_backend()
        self.executor = bt_exec.Executor(backend, keep_finished=100)
        self.executor.start()
        self.api = ControlApi(self.executor)
        self.server = RobonixServer(self.api, "bench-executor", "127.0.0.1:0")
        self.address = self.server.start()
        gc.freeze()  # as bt-exec robonix does once it serves

    def close(self):
        self.server.stop(0)
        self.api.close()
        self.executor.close()
        if self.sim is None:
            self.executor.backend.close()


class BareStream:
    """A grpc.aio server of Execute alone, on a loop thread of its own, that answers every Plan with the four events
    the door sends for a one-node plan whose call echoes "ping", built before any call: gRPC's own share of an
    Execute call, in Python, with nothing of the executor."""

    def __init__(self):
        self.events: dict[str, list[bytes]] = {}
        self.server = None
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="bare-grpc", daemon=True)
        self.thread.start()
        self.address = asyncio.run_coroutine_threadsafe(self._serve(), self.loop).result(60)

    async def _serve(self) -> str:
        import grpc

        async def execute(request: bytes, context):
            for data in self.events.get(pilot_pb2.Plan.FromString(request).plan_id, ()):
                await context.write(data)

        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "robonix.contracts.RobonixSystemExecutorExecute",
            {"Execute": grpc.unary_stream_rpc_method_handler(execute)}),))
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        return f"127.0.0.1:{port}"

    def expect(self, plan_id: str) -> None:
        """Build the events of the plan ``plan_id`` before it is asked for."""
        node = dict(plan_id=plan_id, node_kind=2, op_id="only", description="echo only")
        call = dict(call_id="call-only", provider_id=SYNC, contract_id=ECHO)
        events = [executor_pb2.RtdlEvent(event_kind=0, plan_started=dict(plan_id=plan_id)),
                  executor_pb2.RtdlEvent(event_kind=1, node_state=dict(node, state=1)),
                  executor_pb2.RtdlEvent(event_kind=1, node_state=dict(node, state=2, leaf_result=dict(
                      call, success=True, output="ping"))),
                  executor_pb2.RtdlEvent(event_kind=2, plan_complete=dict(plan_id=plan_id))]
        self.events = {plan_id: [event.SerializeToString() for event in events]}

    def close(self):
        asyncio.run_coroutine_threadsafe(self.server.stop(0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


class Client:
    """Pilot's side in a process of its own, as Pilot is: it makes Execute calls over a channel to ``address``
    (and raw MCP calls to ``mcp``, Execute calls to a bare stream at ``bare``) when told to, and answers with their
    times. Telling it and hearing back is not in any time taken."""

    def __init__(self, address: str, mcp: str | None = None, bare: str | None = None):
        context = multiprocessing.get_context("spawn")
        self.pipe, child_end = context.Pipe()
        self.process = context.Process(target=client_main, args=(address, mcp, bare, child_end), daemon=True)
        self.process.start()

    def ask(self, *order):
        self.pipe.send(order)
        answer = self.pipe.recv()
        if isinstance(answer, str):
            raise RuntimeError(f"the bench's client process failed: {answer}")
        return answer

    def close(self):
        self.pipe.send(None)
        self.process.join(30)


def client_main(address: str, mcp: str | None, bare: str | None, pipe) -> None:
    """The client process: answers each order on ``pipe`` until told None."""
    import traceback

    import grpc

    channels = {"door": grpc.insecure_channel(address)}
    if bare:
        channels["bare"] = grpc.insecure_channel(bare)
    stubs = {name: contracts_pb2_grpc.RobonixSystemExecutorExecuteStub(channel).Execute
             for name, channel in channels.items()}
    raw = RawMcp(mcp) if mcp else None
    try:
        while (order := pipe.recv()) is not None:
            try:
                server, timed = CLIENT_ORDERS[order[0]]
                pipe.send(timed(stubs[server], raw, *order[1:]))
            except Exception:
                pipe.send(traceback.format_exc())
    finally:
        if raw is not None:
            raw.close()
        for channel in channels.values():
            channel.close()


def timed_wide(execute, raw, plan_id: str) -> float:
    """The time from a wide plan's Execute request to its ``plan_started``; the rest of its stream read."""
    plan = wide_plan(plan_id)
    began = time.perf_counter()
    stream = execute(plan, timeout=60)
    first = next(stream)
    elapsed = time.perf_counter() - began
    assert first.plan_started.plan_id == plan_id, first
    rest = list(stream)
    assert rest[-1].plan_complete.plan_id == plan_id and not rest[-1].plan_complete.any_failed
    return elapsed


def timed_one_node(execute, raw, plan_id: str, call: dict) -> float:
    """The time from a one-node plan's Execute request to its ``plan_complete``."""
    plan = one_node_plan(plan_id, **call)
    began = time.perf_counter()
    events = list(execute(plan, timeout=60))
    elapsed = time.perf_counter() - began
    assert events[-1].plan_complete.plan_id == plan_id and not events[-1].plan_complete.any_failed, events[-1]
    if call:
        leaf = [event.node_state for event in events if event.event_kind == 1][-1].leaf_result
        assert leaf.success and leaf.output == "ping", leaf
    return elapsed


def timed_raw_mcp(execute, raw) -> float:
    began = time.perf_counter()
    assert raw.call("echo", {"text": "ping"}) == "ping"
    return time.perf_counter() - began


# What the client is told to time, and which server's Execute it calls for it.
CLIENT_ORDERS = {"wide": ("door", timed_wide), "one_node": ("door", timed_one_node),
                 "bare_one_node": ("bare", timed_one_node), "raw_mcp": ("door", timed_raw_mcp)}


def plan_started(client: Client, repeats: int) -> dict:
    latencies = [client.ask("wide", f"wide-{i}") for i in range(repeats + 3)][3:]  # the first three warm up
    return {"p50": statistics.median(latencies), "p99": percentile(latencies, 0.99), "plans": len(latencies)}


def one_node_added(door: Door, client: Client, pairs: int) -> dict:
    direct_t, execute_t = [], []
    call = CapabilityCall("bench", "only", CONTRACT, {"text": "ping"}, "bench_provider", "call-only")
    for i in range(pairs + 10):
        began = time.perf_counter()
        status = door.sim.start(call)
        direct = time.perf_counter() - began
        assert status.terminal and status.state == "SUCCEEDED", status
        through = client.ask("one_node", f"one-{i}", {})
        if i >= 10:
            direct_t.append(direct)
            execute_t.append(through)
    added = [through - direct for through, direct in zip(execute_t, direct_t)]
    return {"p50": statistics.median(added), "p99": percentile(added, 0.99), "direct": statistics.median(direct_t),
            "execute": statistics.median(execute_t), "pairs": len(added)}


class RawMcp:
    """The provider's own call, as McpBackend makes it for a synchronous capability, on the mcp client directly:
    a streamable-HTTP session over one persistent httpx client, initialize, ``tools/call``, close."""

    def __init__(self, url: str):
        import httpx

        self.url = url
        self.loop = asyncio.new_event_loop()
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))

    def call(self, tool: str, arguments: dict) -> str:
        return self.loop.run_until_complete(self._call(tool, arguments))

    async def _call(self, tool: str, arguments: dict) -> str:
        import mcp.types as types
        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        request = types.ClientRequest(types.CallToolRequest(params=types.CallToolRequestParams(
            name=tool, arguments=arguments)))
        async with streamable_http_client(self.url, http_client=self.http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.send_request(request, types.CallToolResult)
        return result.content[0].text

    def close(self):
        self.loop.run_until_complete(self.http.aclose())
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()


def one_node_mcp_added(pairs: int) -> dict:
    providers = ProviderProcess()
    resolver = standin_resolver(providers)
    door = Door(lambda: McpBackend(resolver))
    bare = BareStream()
    client = Client(door.address, mcp_url(resolver.resolve(SYNC, ECHO).url), bare.address)
    call = {"provider": SYNC, "contract": ECHO}
    raw_t, execute_t, bare_t = [], [], []
    try:
        for i in range(pairs + 10):  # the first ten warm every path up and are not kept
            bare.expect(f"bare-{i}")
            direct = client.ask("raw_mcp")
            through = client.ask("one_node", f"mcp-{i}", call)
            floor = client.ask("bare_one_node", f"bare-{i}", call)
            if i >= 10:
                raw_t.append(direct)
                execute_t.append(through)
                bare_t.append(floor)
    finally:
        client.close()
        door.close()
        bare.close()
        providers.stop()
    added = [through - direct for through, direct in zip(execute_t, raw_t)]
    beyond = [each - floor for each, floor in zip(added, bare_t)]
    return {"p50": statistics.median(added), "p99": percentile(added, 0.99), "raw": statistics.median(raw_t),
            "execute": statistics.median(execute_t), "pairs": len(added), "bare": statistics.median(bare_t),
            "beyond_p50": statistics.median(beyond)}


NAMES = (f"1  {OPS}-op plan: plan_started after the Execute request, p50",
         f"1  {OPS}-op plan: plan_started after the Execute request, p99",
         "2  one-node plan over Execute (sim), time added to the call made directly, p50",
         "2  one-node plan over Execute (sim), time added to the call made directly, p99",
         "3  one-node plan over Execute (local MCP provider), time added to the provider's own call, p50",
         "3  one-node plan over Execute (local MCP provider), time added to the provider's own call, p99",
         "3  same, less a bare gRPC stream of its four events (what the executor adds beyond gRPC), p50")


def figures(args, detail: list[str]) -> list[Figure]:
    if MISSING is not None:
        return skipped("robonix", NAMES, MISSING)
    door = Door()
    client = Client(door.address)
    try:
        started = plan_started(client, args.repeats * 20)
        added = one_node_added(door, client, args.repeats * 20)
    finally:
        client.close()
        door.close()
    over_mcp = one_node_mcp_added(args.repeats * 20)
    detail.append(f"robonix: {started['plans']} plans of {OPS} ops, one at a time, each stream read to its end")
    detail.append(f"robonix: {added['pairs']} interleaved pairs; medians: the sim's call made directly "
                  f"{added['direct'] * 1e6:.1f} us, a one-node plan over Execute to plan_complete "
                  f"{added['execute'] * 1000:.2f} ms")
    detail.append(f"robonix: {over_mcp['pairs']} interleaved pairs; medians: the stand-in's echo called over MCP "
                  f"directly {over_mcp['raw'] * 1000:.2f} ms, a one-node plan calling it over Execute to "
                  f"plan_complete {over_mcp['execute'] * 1000:.2f} ms, the same plan's Execute against a bare gRPC "
                  f"stream of its four events {over_mcp['bare'] * 1000:.2f} ms")
    return [Figure("robonix", NAMES[0], ours_s=started["p50"], on="ours", bar=STARTED_BAR_S, note=NO_RAW),
            Figure("robonix", NAMES[1], ours_s=started["p99"], on="ours", note=NO_RAW),
            Figure("robonix", NAMES[2], ours_s=added["p50"], on="ours", note=NO_RAW),
            Figure("robonix", NAMES[3], ours_s=added["p99"], on="ours", note=NO_RAW),
            Figure("robonix", NAMES[4], ours_s=over_mcp["p50"], on="ours", bar=ADDED_MCP_BAR_S, note=NO_RAW),
            Figure("robonix", NAMES[5], ours_s=over_mcp["p99"], on="ours", note=NO_RAW),
            Figure("robonix", NAMES[6], ours_s=over_mcp["beyond_p50"], on="ours", note=NO_RAW)]


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], repeats=10, quick_repeats=2,
                      quick_help="smoke run: fewer plans and pairs")
    detail: list[str] = []
    return report("robonix", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
