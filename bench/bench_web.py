"""The web door: tree reads and the event stream over HTTP, and the console drawing 1,000- and 10,000-op trees.

Run from the repository root::

    python bench/bench_web.py            # full run (about 70 s on 2 cores)
    python bench/bench_web.py --quick    # smoke run (about 35 s)

Everything runs on this machine: a started ``Executor`` (sim backend, 100 Hz) behind
``WebServer(ControlApi(executor), port=0)`` on 127.0.0.1, clients in this process.

Figures:

1. Tree read, 1,000 ops (a root parallel of 999 do ops, all running). ``GET /api/plans/1/tree``
   over a kept-alive HTTP connection, body parsed with ``json.loads``, vs
   ``py_trees.display.unicode_tree(root, show_status=True)`` of a raw py_trees tree of the same
   shape (what a plain py_trees program prints to show its states), alternated ``--repeats`` x 20
   times. Also shown: ``Executor.get_plan_tree`` in process, against the same raw figure.
   Ratio = the median of the per-read ratios (HTTP / raw; in process / raw). Bar 10 on HTTP.
2. Event stream. Plans of 10 ops (a root sequence of 9 do ops lasting 20 ms each) are submitted
   at a steady pace for 10 s (3 s with ``--quick``) so that the executor emits about 1,000 events/s;
   one ``/api/events`` reader counts them. Lost = events emitted for those plans - events read
   (by ``seq``). Gated: lost == 0. Latency = read time - the event's ``time`` (p50, p99).
   No raw py_trees counterpart (it has no event stream).
3. The console in headless Chromium (its rows show ``skipped``, the reason in their note, when
   chromium, chromedriver or selenium are missing or the browser cannot start). Draw = from
   navigation start to the console's ``bt-tree-drawn`` mark (set after the frame that first
   shows the plan), the root's box drawn with its texts: once with figure 1's plan (1,000 ops,
   999 running leaves, all in view of the layout), once with a 10,000-op plan (a root parallel
   of 99 sequences of 100 do ops, the first leaf of each running), each a fresh page load of
   ``/#plan=<id>``. Update = a fresh plan of 999 leaves that all end in the same tick, its page
   loaded and drawn first ("follow running" off, so the view stays put); from the plan's end
   (``ended_at``) to the page's DOM showing it (a MutationObserver in the page notes the time,
   same clock): the root counting 999 leaves done and no op box drawn in another state than
   succeeded. The three are interleaved, ``5`` trials
   each (2 with ``--quick``); the rows give the minimum (the machine is shared and noisy), the
   detail line the medians. No raw py_trees counterpart (it has no viewer). Bars: draw 2 s
   (10,000 ops: 5 s), update 1 s (targets 0.5 s, 2 s and 0.25 s); a console that never gets
   there (30 s) in any trial FAILs.

The table is ``benchlib``'s, as every bench script prints (figures in the order 1, 2, 3; they are
measured in the order 1, 3, 2, as figure 3 reads figure 1's plan). Exit 1 when a gated bar is missed.
"""
from __future__ import annotations

import http.client
import json
import statistics
import sys
import threading
import time

import py_trees

from benchlib import Figure, headless_chromium, parse_args, report, skipped
import bt_exec
from bt_exec.control import ControlApi
from bt_exec.web.server import WebServer

TREE_OPS = 1000
TREE_READ_BAR = 10.0
DEEP_BRANCHES, DEEP_LEAVES = 99, 100  # 1 + 99 + 9,900 = 10,000 ops
DRAW_BAR_S, DRAW_TARGET_S = 2.0, 0.5
DRAW_10K_BAR_S, DRAW_10K_TARGET_S = 5.0, 2.0
UPDATE_BAR_S, UPDATE_TARGET_S = 1.0, 0.25
TICK_S = 3.0  # the update trials' leaves: long enough for the page to be drawn first


def wide_plan(leaves: int, description: str = "wide") -> dict:
    do_ops = [{"op": "do", "op_id": 0, "description": f"leaf {i}", "cap": "bench.leaf", "args": {}}
              for i in range(leaves)]
    return {"rtdl_description": description, "content": "", "task_update": None,
            "rtdl": {"op": "parallel", "op_id": 0, "description": "all leaves", "children": do_ops}}


def raw_wide_tree(leaves: int) -> py_trees.behaviour.Behaviour:
    root = py_trees.composites.Parallel("all leaves", policy=py_trees.common.ParallelPolicy.SuccessOnAll(),
                                        children=[py_trees.behaviours.Running(f"leaf {i}") for i in range(leaves)])
    root.tick_once()
    return root


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def tree_read(server: WebServer, executor: bt_exec.Executor, plan_id: str, repeats: int) -> dict:
    raw_root = raw_wide_tree(TREE_OPS - 1)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    http_t, raw_t, local_t = [], [], []
    for _ in range(repeats * 20):
        began = time.perf_counter()
        connection.request("GET", f"/api/plans/{plan_id}/tree")
        tree = json.loads(connection.getresponse().read())
        http_t.append(time.perf_counter() - began)
        assert len(tree["ops"]) == TREE_OPS, "the plan is not the one expected"
        began = time.perf_counter()
        py_trees.display.unicode_tree(raw_root, show_status=True)
        raw_t.append(time.perf_counter() - began)
        began = time.perf_counter()
        executor.get_plan_tree(plan_id)
        local_t.append(time.perf_counter() - began)
    connection.close()
    return {"http": statistics.median(http_t), "raw": statistics.median(raw_t), "local": statistics.median(local_t),
            "ratio": statistics.median(h / r for h, r in zip(http_t, raw_t)),
            "local_ratio": statistics.median(loc / r for loc, r in zip(local_t, raw_t))}


def event_stream(server: WebServer, executor: bt_exec.Executor, rate: int, seconds: float) -> dict:
    per_plan = 2 + 2 * 10  # plan_started, running + final for each op (the root too), plan_complete
    plan = {"rtdl_description": "stream", "content": "", "task_update": None,
            "rtdl": {"op": "sequence", "op_id": 0, "description": "nine steps",
                     "children": [{"op": "do", "op_id": 0, "description": f"step {i}", "cap": "bench.step",
                                   "args": {}} for i in range(9)]}}
    text = json.dumps(plan)
    received: dict[int, float] = {}
    latencies: list[float] = []
    ours: set[str] = set()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("GET", "/api/events")
    response = connection.getresponse()
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            line = response.fp.readline()
            if not line:
                return
            if line.startswith(b"data: "):
                event = json.loads(line[6:])
                now = time.time()
                if "seq" in event:
                    received[event["seq"]] = now
                    latencies.append(now - event["time"])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    interval = per_plan / rate
    began = time.monotonic()
    submitted = 0
    while time.monotonic() - began < seconds:
        answer = executor.submit(text)
        ours.add(answer["plan_id"])
        submitted += 1
        time.sleep(max(0.0, began + submitted * interval - time.monotonic()))
    for plan_id in ours:
        executor.run_until_complete(plan_id, timeout=60)
    expected = submitted * per_plan
    deadline = time.monotonic() + 10
    while len(received) < expected and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    connection.close()
    return {"expected": expected, "received": len(received), "lost": expected - len(received),
            "rate": expected / (time.monotonic() - began), "p50": percentile(latencies, 0.5),
            "p99": percentile(latencies, 0.99)}


def deep_plan(branches: int, leaves: int, description: str = "deep") -> dict:
    """A root parallel of ``branches`` sequences of ``leaves`` do ops: every branch runs its first leaf."""
    return {"rtdl_description": description, "content": "", "task_update": None,
            "rtdl": {"op": "parallel", "op_id": 0, "description": "all branches", "children": [
                {"op": "sequence", "op_id": 0, "description": f"branch {b}", "children": [
                    {"op": "do", "op_id": 0, "description": f"leaf {b}.{i}", "cap": "bench.leaf", "args": {}}
                    for i in range(leaves)]} for b in range(branches)]}}


DRAWN = "return performance.getEntriesByName('bt-tree-drawn').map(e => e.startTime)[0] || null"
# Readable: the root's box is drawn with its texts.
READABLE = "return Boolean(document.querySelector(`g.op[data-op-id='${arguments[0]}'] text.desc`))"
# Every op shown ended: the root counts all its leaves done and no drawn box shows another state.
# Watched in the page (a MutationObserver on the tree), so the time is the DOM's, not the polling's.
WATCH_SHOWN = """
const [rootId, leaves] = arguments;
window.btShownAt = null;
const shown = () => {
  const root = document.querySelector(`g.op[data-op-id='${rootId}']`);
  return Boolean(root) && root.getAttribute('data-done') === String(leaves) &&
    !document.querySelector('g.op:not(.state-succeeded)');
};
const watcher = new MutationObserver(() => {
  if (window.btShownAt === null && shown()) {
    window.btShownAt = Date.now() / 1000;
    watcher.disconnect();
  }
});
watcher.observe(document.getElementById('tree'), {attributes: true, childList: true, subtree: true});
"""


def load_page(driver, url: str, root: str) -> float | None:
    """Seconds from navigation start to the plan's first paint (the console's mark), None past 30 s."""
    driver.get("about:blank")
    driver.get(url)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        drawn = driver.execute_script(DRAWN)
        if drawn is not None and driver.execute_script(READABLE, root):
            return drawn / 1000.0
        time.sleep(0.01)
    return None


def update_trial(driver, server: WebServer, executor: bt_exec.Executor) -> float | None:
    """A fresh plan of 999 leaves ending in one tick: seconds from its end to the page showing them all ended."""
    plan = wide_plan(TREE_OPS - 1, "one tick")
    for leaf in plan["rtdl"]["children"]:
        leaf["cap"] = "bench.tick"
    plan_id = executor.submit(plan)["plan_id"]
    root = executor.get_plan_tree(plan_id)["root"]
    if load_page(driver, f"{server.url}#plan={plan_id}", root) is None:
        return None
    # The view stays put (following the running ops would scroll the root's count out of the view).
    driver.execute_script("const follow = document.getElementById('follow-running');"
                          "if (follow.checked) follow.click();")
    driver.execute_script(WATCH_SHOWN, root, TREE_OPS - 1)
    record = executor.run_until_complete(plan_id, timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        shown_at = driver.execute_script("return window.btShownAt")
        if shown_at is not None:
            return shown_at - record["ended_at"]
        time.sleep(0.05)
    return None


def browser_figures(server: WebServer, executor: bt_exec.Executor, wide_id: str, deep_id: str,
                    trials: int) -> dict | str:
    """Draw (1,000 and 10,000 ops) and update times in headless Chromium, ``trials`` of each, interleaved;
    or why they were skipped."""
    driver = headless_chromium()
    if isinstance(driver, str):
        return driver
    times: dict[str, list[float]] = {"draw": [], "draw_10k": [], "update": []}
    roots = {plan_id: executor.get_plan_tree(plan_id)["root"] for plan_id in (wide_id, deep_id)}
    try:
        for _ in range(trials):
            for key, plan_id in (("draw", wide_id), ("draw_10k", deep_id)):
                times[key].append(load_page(driver, f"{server.url}#plan={plan_id}", roots[plan_id]))
            times["update"].append(update_trial(driver, server, executor))
    finally:
        driver.quit()
    result: dict = {"trials": trials, "median": {}, "why": {}}
    for key, values in times.items():
        reached = [value for value in values if value is not None]
        result[key] = min(reached) if reached else None
        result["median"][key] = statistics.median(reached) if reached else None
        missed = len(values) - len(reached)
        result["why"][key] = f"{missed} of {trials} trials never got there within 30 s" if missed else ""
    return result


NO_RAW_VIEWER = "no raw py_trees counterpart: py_trees has no live viewer"
NO_RAW_STREAM = "no raw py_trees counterpart: py_trees has no event stream"
READ = "1  tree read, 1,000 ops"
DRAW = "3  console: 1,000-op plan, navigation -> first paint (min)"
DRAW_10K = "3  console: 10,000-op plan, navigation -> first paint (min)"
UPDATE = "3  console: 999 ops end in one tick -> shown (min)"


def figures(args, detail: list[str] | None = None) -> list[Figure]:
    """Figures 1 to 3 (see the module doc), against an executor and web server started here;
    ``detail`` gets the event stream's counts and the console's medians."""
    detail = [] if detail is None else detail
    seconds = 3.0 if args.quick else 10.0
    rate = 1000
    trials = 2 if args.quick else 5
    hold_s = 600.0  # the held plans' ops outlast figures 1 and 3, which read them meanwhile; cancelled after
    script = {"default": {"outcome": "success", "duration_s": 0.02},
              "caps": {"bench.leaf": {"outcome": "success", "duration_s": hold_s},
                       "bench.tick": {"outcome": "success", "duration_s": TICK_S}}}
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(script))
    executor.start()
    server = WebServer(ControlApi(executor), port=0)
    server.start()
    try:
        plan_id = executor.submit(wide_plan(TREE_OPS - 1))["plan_id"]
        deep_id = executor.submit(deep_plan(DEEP_BRANCHES, DEEP_LEAVES, "ten thousand ops"))["plan_id"]
        time.sleep(0.3)  # every leaf running
        read = tree_read(server, executor, plan_id, args.repeats)
        browser = browser_figures(server, executor, plan_id, deep_id, trials)
        executor.cancel_all()
        stream = event_stream(server, executor, rate, seconds)
    finally:
        server.close()
        executor.close()

    result = [
        Figure("web", f"{READ}, HTTP GET + parse", ours_s=read["http"], raw_s=read["raw"], ratio=read["ratio"],
               bar=TREE_READ_BAR, note=RAW_TREE),
        Figure("web", f"{READ}, in process (get_plan_tree)", ours_s=read["local"], raw_s=read["raw"],
               ratio=read["local_ratio"], note=RAW_TREE),
        Figure("web", f"2  event stream at ~{rate}/s, events lost", value=stream["lost"], unit="events", on="value",
               bar=0, note=NO_RAW_STREAM),
        Figure("web", "2  event stream latency, p50", ours_s=stream["p50"], on="ours", note=NO_RAW_STREAM),
        Figure("web", "2  event stream latency, p99", ours_s=stream["p99"], on="ours", note=NO_RAW_STREAM),
    ]
    rows = ((DRAW, "draw", DRAW_BAR_S, DRAW_TARGET_S), (DRAW_10K, "draw_10k", DRAW_10K_BAR_S, DRAW_10K_TARGET_S),
            (UPDATE, "update", UPDATE_BAR_S, UPDATE_TARGET_S))
    if isinstance(browser, str):
        result += skipped("web", [row[0] for row in rows], f"console in Chromium: {browser}")
    else:
        for name, key, bar, target in rows:
            note = "; ".join(filter(None, (NO_RAW_VIEWER, browser["why"][key])))
            result.append(Figure("web", name, ours_s=browser[key], on="ours", bar=bar, target=target, note=note))
        medians = ", ".join(f"{key} {value * 1000:.0f} ms" if value is not None else f"{key} -"
                            for key, value in browser["median"].items())
        detail.append(f"web: console, {browser['trials']} interleaved trials each; medians: {medians}")
    detail.append(f"web: {args.repeats * 20} tree reads; event stream at ~{rate}/s for {seconds:g} s: "
                  f"{stream['received']}/{stream['expected']} read")
    return result


RAW_TREE = "raw py_trees: py_trees.display.unicode_tree(root, show_status=True) of the same 1,000-behaviour tree"


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], repeats=10, quick_repeats=3,
                      quick_help="smoke run: fewer repeats, a shorter event stream")
    detail: list[str] = []
    return report("web", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
