"""The physics cell seen: the console's live view of the arm, get_cell_view over HTTP, and a video frame drawn.

Run from the repository root::

    python bench/bench_cell_view.py            # full run (about 40 s on 2 cores)
    python bench/bench_cell_view.py --quick    # smoke run (about 20 s)

Everything runs on this machine: a started ``Executor`` on ``PhysicsCell(speed=1.0)`` (real time) behind
``WebServer(ControlApi(executor), port=0)`` on 127.0.0.1, ``examples/qwen3/cap_to_hatch.json`` running in it.

Figures (none has a raw py_trees counterpart: py_trees has no arm, no viewer and no video):

1. The console's live view in headless Chromium (skipped, with the reason, where chromium, chromedriver or
   selenium are missing): seconds per drawing of the arm (the page's ``data-drawn`` counter over ``performance.now()``)
   while the graph moves the arm, ``--repeats`` runs of 3 s (1.5 s with ``--quick``) once the page drew ten times,
   the median. Bar 0.1 s: ten drawings a second.
2. ``GET /api/cell`` (get_cell_view: links, target, joints) over a kept-alive connection while the arm moves, p50
   of 200 reads (50 with ``--quick``).
3. The same with a 320x240 frame rendered by MuJoCo, p50 of 10 reads: only where a GL context can be made
   (``MUJOCO_GL=egl`` or ``osmesa``), else skipped with the reason.
4. One ``--record`` frame drawn without GL (``cell_recording.raster``, 480x272), p50 of 200.

Exit 1 when the bar is missed.
"""
from __future__ import annotations

import http.client
import json
import pathlib
import statistics
import sys
import time

from benchlib import Figure, headless_chromium, parse_args, report, skipped
import bt_exec
from bt_exec.control import ControlApi
from bt_exec.motion.cell_recording import raster
from bt_exec.motion.cell_view import CellView
from bt_exec.web.server import WebServer

REPO = pathlib.Path(__file__).resolve().parent.parent
HATCH = REPO / "examples" / "qwen3" / "cap_to_hatch.json"
SCENE = REPO / "examples" / "qwen3" / "scene.json"
DRAWING_BAR_S = 0.1
NO_RAW = "no raw py_trees counterpart: py_trees has no arm and no viewer"


def reads(server, path: str, count: int) -> list[float]:
    """Seconds per ``GET path`` over one kept-alive connection."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    times = []
    try:
        for _ in range(count):
            began = time.perf_counter()
            connection.request("GET", path)
            response = connection.getresponse()
            json.loads(response.read())
            times.append(time.perf_counter() - began)
            assert response.status == 200, response.status
    finally:
        connection.close()
    return times


def browser_drawings(url: str, runs: int, span_s: float, restart) -> list[float] | str:
    """Seconds per drawing in each run, or why the browser could not be had."""
    driver = headless_chromium()
    if isinstance(driver, str):
        return driver
    count = ("const d = document.querySelector('#cell-drawing');"
             "return [Number(d.getAttribute('data-drawn') || 0), performance.now()];")
    per_drawing = []
    try:
        driver.get(url)
        deadline = time.monotonic() + 30
        while driver.execute_script(count)[0] < 10:  # the page loaded, the view started (and the renderer made)
            if time.monotonic() > deadline:
                return "the console drew fewer than 10 times in 30 s"
            time.sleep(0.1)
        for _ in range(runs):
            restart()
            first, began = driver.execute_script(count)
            time.sleep(span_s)  # the page draws meanwhile; the figure is what it drew in that time
            last, ended = driver.execute_script(count)
            per_drawing.append((ended - began) / 1000 / max(last - first, 1))
    finally:
        driver.quit()
    return per_drawing


def figures(args, detail: list[str]) -> list[Figure]:
    scene = json.loads(SCENE.read_text())
    graph = json.loads(HATCH.read_text())
    cell = bt_exec.PhysicsCell(scene=scene, speed=1.0)
    executor = bt_exec.Executor(backend=cell)
    executor.start()
    server = WebServer(ControlApi(executor), port=0)
    server.start()

    def restart():  # the graph moving the arm from its start again (each run, a scene of the graph's revision)
        for plan in executor.get_all_plans()["plans"]:
            executor.cancel_plan(plan["plan_id"])
        cell.wait_idle()
        executor.set_scene(scene)
        answer = executor.submit(graph, run_id=f"bench {time.monotonic()}")
        assert answer["accepted"], answer

    try:
        span_s = 1.5 if args.quick else 3.0
        drawings = browser_drawings(server.url, args.repeats, span_s, restart)
        restart()
        plain = reads(server, "/api/cell", 50 if args.quick else 200)
        frames = CellView(cell).frames_available()
        framed = reads(server, "/api/cell?frame_width=320&frame_height=240", 10) if frames else None
        view = executor.get_cell_view()
        drawn = []
        for _ in range(200):
            began = time.perf_counter()
            raster(view)
            drawn.append(time.perf_counter() - began)
    finally:
        server.close()
        executor.close()
    result = []
    name = "1  console live view, s per drawing"
    if isinstance(drawings, str):
        result += skipped("cell_view", [name], drawings)
    else:
        result.append(Figure("cell_view", name, ours_s=statistics.median(drawings), on="ours", bar=DRAWING_BAR_S,
                             note=NO_RAW))
        detail.append(f"cell_view: drawings per second, each run: {', '.join(f'{1 / s:.1f}' for s in drawings)}")
    result.append(Figure("cell_view", "2  GET /api/cell, p50", ours_s=statistics.median(plain), on="ours", note=NO_RAW))
    name = "3  GET /api/cell with a 320x240 frame, p50"
    if framed is None:
        result += skipped("cell_view", [name], "MuJoCo found no GL context (set MUJOCO_GL=egl or osmesa)")
    else:
        result.append(Figure("cell_view", name, ours_s=statistics.median(framed), on="ours", note=NO_RAW))
    result.append(Figure("cell_view", "4  --record frame drawn, 480x272, p50", ours_s=statistics.median(drawn),
                         on="ours", note=NO_RAW))
    return result


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], repeats=5, quick_repeats=2,
                      quick_help="smoke run: fewer and shorter runs, fewer reads")
    detail: list[str] = []
    return report("cell_view", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(main())
