"""The Groot2 door: the status and full-tree replies of Groot2's monitor protocol for a 1,000-node tree.

Run from the repository root (it needs pyzmq, the groot2 extra; without it the figures show ``skipped``)::

    python bench/bench_groot2.py            # full run (about 10 s)
    python bench/bench_groot2.py --quick    # smoke run

Everything runs on this machine: a started ``Executor`` (sim backend, 100 Hz) running a root parallel of 999
do ops that all run (so the statuses are live), a ``Groot2Publisher`` on two free loopback ports, and a ZeroMQ
REQ client in a process of its own (this script, run as one), asking as Groot2 does (6-byte header, reply
checked), in batches the script asks for over its stdin, alternated batch by batch with the raw figures.

Figures:

1. Status reply, 1,000 nodes: from sending the request to having the reply's 3,000 status bytes, over TCP on
   loopback, timed by the client, median of ``--repeats`` x 200 requests. Bar 1 ms. The raw column: a py_trees
   program answering the same question of a raw tree of the same shape, walking it for every node's status and
   packing the same bytes (``root.iterate()``), with no transport; ratio = median of the per-request ratios.
2. Full-tree reply, 1,000 nodes (the XML with a ``_uid`` on every node, written once when the plan started):
   the same round trip, median of ``--repeats`` x 50. Info; the raw column: the XML of the raw tree written by
   ``py_trees.display.xhtml_tree`` (what py_trees has for a whole tree as markup).

Exit 1 when a gated bar is missed.
"""
from __future__ import annotations

import json
import pathlib
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import py_trees

from benchlib import Figure, parse_args, report, skipped
import bt_exec
from bt_exec.groot2.ports import free_port_pair

TREE_NODES = 1000
STATUS_BAR_S = 1e-3
CLIENT_FLAG = "--as-groot2-client"  # how the script runs as the client process
NAMES = ("status reply, 1,000 nodes", "full-tree reply, 1,000 nodes")


def wide_plan(leaves: int) -> dict:
    return {"rtdl_description": "wide", "content": "", "task_update": None,
            "rtdl": {"op": "parallel", "op_id": 0, "description": "all leaves",
                     "children": [{"op": "do", "op_id": 0, "description": f"leaf {i}", "cap": "bench.leaf",
                                   "args": {}} for i in range(leaves)]}}


def raw_tree(leaves: int) -> py_trees.behaviour.Behaviour:
    root = py_trees.composites.Parallel("all leaves", policy=py_trees.common.ParallelPolicy.SuccessOnAll(),
                                        children=[py_trees.behaviours.Running(f"leaf {i}") for i in range(leaves)])
    root.tick_once()
    return root


_RAW_STATUS = {py_trees.common.Status.INVALID: 0, py_trees.common.Status.RUNNING: 1,
               py_trees.common.Status.SUCCESS: 2, py_trees.common.Status.FAILURE: 3}


def raw_status_reply(root: py_trees.behaviour.Behaviour) -> bytes:
    """What a py_trees program would send: every node's (index, status) packed as the protocol packs them."""
    return b"".join(struct.pack("<HB", uid, _RAW_STATUS[node.status])
                    for uid, node in enumerate(root.iterate(), start=1))


def figures(args, detail: list[str]) -> list[Figure]:
    try:
        from bt_exec.groot2.publisher import Groot2Publisher  # it imports pyzmq
    except ImportError as exc:
        return skipped("groot2", NAMES, f"pyzmq is not installed ({exc}): pip install 'bt_exec[groot2]'")
    with tempfile.TemporaryDirectory(prefix="bench_groot2_") as folder:
        script = pathlib.Path(folder) / "sim.json"  # every call outlasts the run: the leaves all stay running
        script.write_text(json.dumps({"default": {"outcome": "success", "duration_s": 600.0}}))
        executor = bt_exec.Executor(backend=bt_exec.SimBackend.in_scene(str(script)))
    port = free_port_pair()
    publisher = Groot2Publisher(executor, port).start()
    # Groot2 is a process of its own: so is the client, its requests asked for in batches over its stdin
    client = subprocess.Popen([sys.executable, __file__, CLIENT_FLAG, str(port)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)

    def ask(kind: str, count: int) -> list[float]:
        """``count`` requests of ``kind`` by the client: each one's seconds, request sent to reply read."""
        client.stdin.write(f"{kind} {count}\n")
        client.stdin.flush()
        return json.loads(client.stdout.readline())

    try:
        executor.start()
        plan_id = executor.submit(wide_plan(TREE_NODES - 1))["plan_id"]
        deadline = time.monotonic() + 30
        while not all(op["state"] == "running" for op in executor.get_plan_status(plan_id)["ops"]):
            if time.monotonic() > deadline:
                raise RuntimeError("the plan's leaves never all ran")
            time.sleep(0.01)
        raw_root = raw_tree(TREE_NODES - 1)
        status_t, raw_status_t, tree_t, raw_tree_t = [], [], [], []
        for _ in range(args.repeats):  # ours and raw alternated batch by batch
            status_t += ask("S", 200)
            for _ in range(200):
                began = time.perf_counter()
                raw_status_reply(raw_root)
                raw_status_t.append(time.perf_counter() - began)
            tree_t += ask("T", 50)
            for _ in range(50):
                began = time.perf_counter()
                py_trees.display.xhtml_tree(raw_root, show_status=True)
                raw_tree_t.append(time.perf_counter() - began)
        size = ask("size", 1)[0]
        detail.append(f"groot2: status reply p99 {statistics.quantiles(status_t, n=100)[98] * 1e3:.3f} ms over "
                      f"{len(status_t)} requests; the full tree is {size:.0f} bytes of XML")
        executor.cancel_plan(plan_id)
    finally:
        client.stdin.close()
        client.wait(30)
        publisher.close()
        executor.close()
    return [Figure("groot2", NAMES[0], statistics.median(status_t), statistics.median(raw_status_t),
                   statistics.median(o / r for o, r in zip(status_t, raw_status_t)), bar=STATUS_BAR_S, on="ours",
                   note="bar on our time (loopback round trip, the client a process of its own); raw: walking a "
                        "py_trees tree for its statuses, no transport"),
            Figure("groot2", NAMES[1], statistics.median(tree_t), statistics.median(raw_tree_t),
                   statistics.median(o / r for o, r in zip(tree_t, raw_tree_t)),
                   note="raw: py_trees.display.xhtml_tree of the same tree, no transport")]


def client_main(port: int) -> int:
    """The client process: for each line ``KIND COUNT`` on stdin, that many requests (``S`` status, ``T`` full
    tree; ``size``: the full tree's size), their times as one JSON line on stdout."""
    import zmq

    context = zmq.Context()
    socket_ = context.socket(zmq.REQ)
    socket_.setsockopt(zmq.LINGER, 0)
    socket_.connect(f"tcp://127.0.0.1:{port}")
    for line in sys.stdin:
        kind, count = line.split()
        times = []
        for _ in range(int(count)):
            began = time.perf_counter()
            socket_.send(struct.pack("<BBI", 2, ord("T" if kind == "size" else kind), 1))
            header, body = socket_.recv_multipart()
            times.append(len(body) if kind == "size" else time.perf_counter() - began)
            assert len(header) == 22 and (kind != "S" or len(body) == 3 * TREE_NODES)
        print(json.dumps(times), flush=True)
    socket_.close(0)
    context.term()
    return 0


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], repeats=10, quick_repeats=2,
                      quick_help="smoke run: fewer repeats")
    detail: list[str] = []
    return report("groot2", figures(args, detail), args, detail)


if __name__ == "__main__":
    sys.exit(client_main(int(sys.argv[2])) if sys.argv[1:2] == [CLIENT_FLAG] else main())
