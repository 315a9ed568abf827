"""Every performance figure of bt_exec in one table, each with its ratio against raw py_trees measured in the same run.

Run from the repository root (inside the ROS 2 environment, or the ROS figures show ``skipped``)::

    bash scripts/setup-ros.sh && . build/ros/env.sh
    python bench/bench_all.py                     # full run (about 4 minutes on 2 cores)
    python bench/bench_all.py --quick             # smoke run (about 2 minutes): what CI runs
    python bench/bench_all.py --json figures.json # also write the figures as JSON
    python bench/bench_all.py --only rtdl,qwen3   # some of the scripts

It runs ``bench_rtdl.py``, ``bench_qwen3.py``, ``bench_btcpp.py``, ``bench_ros.py``, ``bench_web.py``,
``bench_robonix.py``, ``bench_groot2.py``, ``bench_physics.py`` and ``bench_cell_view.py`` one after the other, each
in a process of its own (so that no script's leftovers, its garbage, threads or rclpy, weigh on the next one's
timings), with ``--json`` to a temporary file and ``--quick`` when given. Each script measures its own figures and
their raw py_trees references in the same run (see each script's docstring for the method). This script then
prints one header line (versions, machine, cores, the load when it started, quick or full), one
table of every figure, each script's detail lines, and ``all bars met`` or ``FAIL``.

Figures that cannot be measured here are rows marked ``skipped`` with the reason in their note:
the ROS ones when rclpy or bt_exec_interfaces cannot be imported, the console ones when
chromium, chromedriver or selenium are missing, the Robonix ones when gRPC or the Robonix stubs
are missing, the Groot2 ones when pyzmq is missing. A script that dies without its figures becomes
one ``error`` row.

Exit 1 when a gated bar is missed, or a script failed to measure (an ``error`` row); 0 otherwise.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

from benchlib import (
    ERROR,
    Figure,
    failed,
    print_table,
    run_info,
    verdict_line,
    write_json,
)

HERE = pathlib.Path(__file__).resolve().parent
SCRIPTS = {"rtdl": "bench_rtdl.py", "qwen3": "bench_qwen3.py", "btcpp": "bench_btcpp.py", "ros": "bench_ros.py",
           "web": "bench_web.py", "robonix": "bench_robonix.py", "groot2": "bench_groot2.py",
           "physics": "bench_physics.py", "cell_view": "bench_cell_view.py"}
TIMEOUT_S = 1800


def run_script(bench: str, quick: bool, log) -> tuple[list[Figure], list[str], dict]:
    """The script's figures and detail lines, and how it ran (exit status, seconds)."""
    script = HERE / SCRIPTS[bench]
    with tempfile.TemporaryDirectory(prefix=f"bench_{bench}_") as tmp:
        out = pathlib.Path(tmp) / "figures.json"
        command = [sys.executable, str(script), "--json", str(out), "--no-table"] + (["--quick"] if quick else [])
        print(f"bench_all: running {script.name}{' --quick' if quick else ''} ...", file=log, flush=True)
        began = time.monotonic()
        try:
            done = subprocess.run(command, cwd=HERE.parent, stdout=subprocess.PIPE, text=True, timeout=TIMEOUT_S,
                                  check=False)
            code, stdout = done.returncode, done.stdout
        except subprocess.TimeoutExpired as exc:
            code, stdout = None, exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else \
                (exc.stdout or "")
        seconds = time.monotonic() - began
        print(f"bench_all: {script.name} done in {seconds:.0f} s (exit {code})", file=log, flush=True)
        data = None
        if out.exists():
            try:
                data = json.loads(out.read_text(encoding="utf-8"))
            except ValueError:
                data = None
    detail = stdout.splitlines()
    ran = {"script": script.name, "exit": code, "seconds": round(seconds, 1)}
    if data is None:
        why = f"timed out after {TIMEOUT_S} s" if code is None else f"exited with status {code}"
        return [Figure(bench, f"{script.name}: no figures", verdict=ERROR,
                       note=f"{script.name} {why} without writing its figures; see its stderr above")], detail, ran
    figures = [Figure.from_json(f) for f in data["figures"]]
    if code != 0 and not failed(figures):
        figures.append(Figure(bench, f"{script.name}: exit status", verdict=ERROR,
                              note=f"{script.name} exited with status {code} though no figure failed"))
    return figures, detail, ran


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every script's smoke run (CI)")
    parser.add_argument("--json", metavar="FILE", help="also write every figure as JSON to FILE")
    parser.add_argument("--only", metavar="NAMES", help=f"comma-separated subset of {','.join(SCRIPTS)}")
    args = parser.parse_args(argv)
    chosen = list(SCRIPTS)
    if args.only:
        chosen = [name.strip() for name in args.only.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in SCRIPTS]
        if unknown or not chosen:
            parser.error(f"--only takes names among {', '.join(SCRIPTS)}; got {args.only!r}")

    info = run_info(args.quick)  # the load average before any script has run
    figures: list[Figure] = []
    details: dict[str, list[str]] = {}
    runs = []
    for bench in chosen:
        got, detail, ran = run_script(bench, args.quick, sys.stderr)
        figures += got
        details[bench] = detail
        runs.append(ran)
    info["scripts"] = runs

    print_table(figures, info)
    for bench in chosen:
        if details[bench]:
            print()
            print("\n".join(details[bench]))
    print()
    print("scripts: " + ", ".join(f"{r['script']} {r['seconds']:.0f} s (exit {r['exit']})" for r in runs))
    print(verdict_line(figures))
    if args.json:
        write_json(args.json, figures, info, details)
    return 1 if failed(figures) else 0


if __name__ == "__main__":
    sys.exit(main())
