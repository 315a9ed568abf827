"""Robonix dispatch: what McpBackend adds to a capability call over MCP, and what polled async calls cost the tick.

Run from the repository root::

    python bench/bench_robonix_dispatch.py            # full run (about a minute on 2 cores)
    python bench/bench_robonix_dispatch.py --quick    # smoke run

Everything runs on this machine: the stand-in providers (``tests/robonix/providers.py``, a process of
their own on 127.0.0.1) and, in this process, ``McpBackend`` with a resolver over a plain table (no
Atlas: its round trips are the full Execute path's, measured elsewhere).

Figures:

1. A one-node call through McpBackend, time added to a raw MCP call (the difference, p50 and p99).
   Pairs, interleaved: the raw call is what the backend does for a synchronous capability, written
   directly on the mcp client (one persistent httpx client, a streamable-HTTP session per call:
   initialize, the ``tools/call`` request for ``echo``, close; sent as the backend sends it, without
   ``ClientSession.call_tool``'s listing of the tools first) on an event loop in this thread; the backend's call is
   ``start`` until ``status`` reads the final state, woken by the backend's ``notify`` (the resolver,
   the loop thread's hop and the state handed back, on top of the same MCP exchange). The difference
   of each pair, backend - raw. Bar: 2 ms at p50 (the issue's bar is on Execute's whole path; this is
   the MCP backend's share). The medians of both are in the detail line. Also shown (no bar): the CPU
   time this process spends on each call (all its threads), the backend's minus the raw call's, p50:
   what a loaded machine's scheduling delays, which the wall-clock difference carries, leave out.
2. The tick thread's CPU while 100 asynchronous calls run, each polled every 2 s (Robonix's period)
   by the backend's loop: an Executor (100 Hz tick loop) runs one plan of a parallel of 100 do nodes
   on the asynchronous stand-in (runs that last past the window); once every call is polled, the CPU
   time of the thread named ``bt_exec-tick`` over a window of 10 s (4 s with ``--quick``), as a share
   of one core. Both backends push their calls' news (``watch_call``), so the tick thread asks a call
   for its state only when told it changed. Bar 1%. Also shown (no bar): the tick thread's share with
   the same plan on the sim backend (calls of 600 s: 100 calls in flight without MCP), the MCP loop
   thread's share (the status polls' MCP sessions) and the whole process's.

The table is ``benchlib``'s; exit 1 when a gated bar is missed.
"""
from __future__ import annotations

import asyncio
import pathlib
import statistics
import sys
import threading
import time

from benchlib import Figure, parse_args, report

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests" / "robonix"))

import bt_exec  # noqa: E402
from bt_exec.backends import CapabilityCall  # noqa: E402
from bt_exec.robonix.dispatch import McpBackend, mcp_url  # noqa: E402
from provider_fixtures import ASYNC, RUN, SYNC, ProviderProcess, standin_resolver  # noqa: E402

ECHO = "robonix/test/sync/echo"
ADDED_BAR_S = 0.002
TICK_SHARE_BAR = 0.01
CONCURRENT = 100
NO_RAW = "no raw py_trees counterpart: MCP transport"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def added_time(providers: ProviderProcess, pairs: int) -> dict:
    import httpx
    import mcp.types as types
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    resolver = standin_resolver(providers)
    url = mcp_url(resolver.resolve(SYNC, ECHO).url)
    news = threading.Event()
    backend = McpBackend(resolver, notify=news.set)
    loop = asyncio.new_event_loop()
    http = httpx.AsyncClient(timeout=httpx.Timeout(30.0, read=None))

    async def raw_call() -> str:
        request = types.ClientRequest(types.CallToolRequest(params=types.CallToolRequestParams(
            name="echo", arguments={"text": "ping"})))
        async with streamable_http_client(url, http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                result = await session.send_request(request, types.CallToolResult)
        return result.content[0].text

    def backend_call() -> str:
        news.clear()
        run_id = backend.start(CapabilityCall("bench", "op", ECHO, {"text": "ping"}, SYNC, "call"))
        while True:
            status = backend.status(run_id)
            if status.terminal:
                return status.output
            news.wait(30)
            news.clear()

    raw_t, ours_t, cpu_added = [], [], []
    try:
        for i in range(pairs + 5):  # the first five warm both paths up and are not kept
            began, cpu = time.perf_counter(), time.process_time()
            assert loop.run_until_complete(raw_call()) == "ping"
            raw, raw_cpu = time.perf_counter() - began, time.process_time() - cpu
            began, cpu = time.perf_counter(), time.process_time()
            assert backend_call() == "ping"
            ours, ours_cpu = time.perf_counter() - began, time.process_time() - cpu
            if i >= 5:
                raw_t.append(raw)
                ours_t.append(ours)
                cpu_added.append(ours_cpu - raw_cpu)
    finally:
        backend.close()
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    added = [o - r for o, r in zip(ours_t, raw_t)]
    return {"p50": statistics.median(added), "p99": percentile(added, 0.99), "raw": statistics.median(raw_t),
            "ours": statistics.median(ours_t), "raw_min": min(raw_t), "ours_min": min(ours_t), "pairs": len(added),
            "cpu": statistics.median(cpu_added)}


def thread_cpu_s(name: str) -> float:
    thread = next(t for t in threading.enumerate() if t.name == name)
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def long_calls_plan(provider: str, contract: str) -> dict:
    """One parallel of ``CONCURRENT`` do nodes whose calls outlast the window."""
    nodes = [{"node_kind": 1, "children": list(range(1, CONCURRENT + 1)), "op_id": "all", "description": "together"}]
    long_run = '{"duration_s": 600}'  # past the window: every call is still polled when it ends
    nodes += [{"node_kind": 2, "children": [], "op_id": f"run{i}", "description": f"a long run {i}",
               "call": {"call_id": f"c{i}", "provider_id": ASYNC, "contract_id": RUN, "args_json": long_run}}
              for i in range(CONCURRENT)]
    for node in nodes[1:]:
        node["call"].update(provider_id=provider, contract_id=contract)
    return {"plan_id": "1", "root_index": 0, "nodes": nodes}


def polled_calls(providers: ProviderProcess, window_s: float) -> dict:
    resolver = standin_resolver(providers)
    backend = McpBackend(resolver)  # Robonix's period: every 2 s
    executor = bt_exec.Executor(backend)
    before = set(providers.state()["runs"])
    executor.start()
    try:
        plan_id = executor.submit(long_calls_plan(ASYNC, RUN))["plan_id"]
        deadline = time.monotonic() + 120
        while True:  # every call started and polled at least once
            runs = [run for run_id, run in providers.state()["runs"].items() if run_id not in before]
            if len(runs) == CONCURRENT and all(run["polls"] >= 1 for run in runs):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {len(runs)} of {CONCURRENT} calls started and were polled in 120 s")
            time.sleep(0.2)
        shares = cpu_shares(window_s, ("bt_exec-tick", "bt_exec-mcp-loop"))
        shares["polls"] = sum(run["polls"] for run_id, run in providers.state()["runs"].items() if run_id not in before)
        executor.cancel_plan(plan_id, wait_ms=30_000)
        deadline = time.monotonic() + 60
        while backend.calls_in_flight and time.monotonic() < deadline:  # each provider is told its run is cancelled
            time.sleep(0.1)
    finally:
        executor.close()
        backend.close()
    return shares


def sim_calls(window_s: float) -> dict:
    """The same plan on the sim backend: what the tick thread spends on 100 calls in flight without MCP."""
    executor = bt_exec.Executor(bt_exec.SimBackend({"default": {"outcome": "success", "duration_s": 600}}))
    executor.start()
    try:
        plan_id = executor.submit(long_calls_plan("sim", "robonix/test/sim/run"))["plan_id"]
        time.sleep(1.0)  # every call started
        shares = cpu_shares(window_s, ("bt_exec-tick",))
        executor.cancel_plan(plan_id, wait_ms=30_000)
    finally:
        executor.close()
    return shares


def cpu_shares(window_s: float, threads: tuple[str, ...]) -> dict:
    """The CPU time of each thread named, and of the process, over a window, as shares of one core."""
    before = {name: thread_cpu_s(name) for name in threads}
    process = time.process_time()
    began = time.monotonic()
    time.sleep(window_s)
    wall = time.monotonic() - began
    shares = {name: (thread_cpu_s(name) - before[name]) / wall for name in threads}
    shares.update(process=(time.process_time() - process) / wall, window=wall)
    return shares


def figures(args, detail: list[str]) -> list[Figure]:
    providers = ProviderProcess()
    try:
        added = added_time(providers, args.repeats * 20)
        polled = polled_calls(providers, 4.0 if args.quick else 10.0)
    finally:
        providers.stop()
    sim = sim_calls(4.0 if args.quick else 10.0)
    detail.append(f"robonix_dispatch: {added['pairs']} interleaved pairs; medians: raw MCP call "
                  f"{added['raw'] * 1000:.2f} ms, through McpBackend {added['ours'] * 1000:.2f} ms; minima: "
                  f"{added['raw_min'] * 1000:.2f} ms and {added['ours_min'] * 1000:.2f} ms")
    detail.append(f"robonix_dispatch: {CONCURRENT} async calls polled every 2 s, window {polled['window']:.1f} s, "
                  f"{polled['polls']} status polls by its end")
    return [
        Figure("robonix", "1  one-node call via McpBackend, time added to a raw MCP call, p50", ours_s=added["p50"],
               on="ours", bar=ADDED_BAR_S, note=NO_RAW),
        Figure("robonix", "1  one-node call via McpBackend, time added to a raw MCP call, p99", ours_s=added["p99"],
               on="ours", note=NO_RAW),
        Figure("robonix", "1  one-node call via McpBackend, CPU time added to a raw MCP call, p50", ours_s=added["cpu"],
               on="ours", note=NO_RAW),
        Figure("robonix", f"2  {CONCURRENT} async calls polled at 2 s: tick thread CPU",
               value=polled["bt_exec-tick"] * 100, unit="% of a core", on="value", bar=TICK_SHARE_BAR * 100,
               note=NO_RAW),
        Figure("robonix", f"2  the same {CONCURRENT} calls on the sim backend: tick thread CPU",
               value=sim["bt_exec-tick"] * 100, unit="% of a core", on="value", note=NO_RAW),
        Figure("robonix", f"2  {CONCURRENT} async calls polled at 2 s: MCP loop thread CPU",
               value=polled["bt_exec-mcp-loop"] * 100, unit="% of a core", on="value", note=NO_RAW),
        Figure("robonix", f"2  {CONCURRENT} async calls polled at 2 s: whole process CPU",
               value=polled["process"] * 100, unit="% of a core", on="value", note=NO_RAW),
    ]


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], repeats=10, quick_repeats=3,
                      quick_help="smoke run: fewer pairs, a shorter window")
    detail: list[str] = []
    return report("robonix_dispatch", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
