"""What the bench scripts share: their command line, the ``Figure`` row and the one table they all print.

Every script has ``figures(args) -> list[Figure]`` and a ``main`` that prints them with
``report``: one header line of versions, one aligned table, the script's detail lines, and
``all bars met`` or ``FAIL: a bar was missed`` (exit status 1). ``--json FILE`` writes the same
figures as JSON; ``bench/bench_all.py`` runs every script that way and prints one table of all.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass

# Verdicts. A figure with a bar PASSes or FAILs; one without is "info"; "skipped" and "error" say
# that it could not be measured here (the note says why). Only FAIL and error make the exit status 1.
PASS, PASS_TARGET, PASS_ABOVE, FAIL, INFO, SKIPPED, ERROR = (
    "PASS", "PASS, target met", "PASS, above target", "FAIL", "info", "skipped", "error")
FAILING = (FAIL, ERROR)

NO_RAW_ROS = "no raw py_trees counterpart: ROS transport"


@dataclass
class Figure:
    """One row of the table.

    ``ours_s`` / ``raw_s``: the medians (or the statistic the name gives, e.g. p50) in seconds of
    bt_exec and of raw py_trees measured in the same run; ``ratio`` = ours / raw (for paired
    measurements the median of the per-repeat ratios). ``raw_s`` and ``ratio`` are None where
    raw py_trees has no counterpart, and ``note`` then says why. A figure that is not a time (a
    count, a rate, a growth factor, bytes) has ``ours_s`` None and ``value`` with its ``unit``;
    ``raw_value`` is raw py_trees' own quantity in the same unit, where it has one.

    ``bar`` and ``target`` are upper bounds on the quantity named by ``on``: "ratio", "ours"
    (the time ``ours_s``) or "value". The bar gates (a miss is FAIL, exit 1); the target is only
    reported. ``verdict`` is worked out from them unless given.
    """
    bench: str
    name: str
    ours_s: float | None = None
    raw_s: float | None = None
    ratio: float | None = None
    bar: float | None = None
    target: float | None = None
    verdict: str | None = None
    note: str = ""
    value: float | None = None
    unit: str = ""
    on: str = "ratio"
    ours_min_s: float | None = None
    raw_min_s: float | None = None
    raw_value: float | None = None

    def __post_init__(self):
        if self.on not in ("ratio", "ours", "value"):
            raise ValueError(f"Figure.on must be ratio, ours or value, not {self.on!r}")
        if self.verdict is None:
            self.verdict = self.judge()

    def gated(self) -> float | None:
        return {"ratio": self.ratio, "ours": self.ours_s, "value": self.value}[self.on]

    def judge(self) -> str:
        if self.bar is None:
            return INFO
        quantity = self.gated()
        if quantity is None or math.isnan(quantity) or quantity > self.bar:
            return FAIL
        if self.target is None:
            return PASS
        return PASS_TARGET if quantity <= self.target else PASS_ABOVE

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> Figure:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def skipped(bench: str, names, reason: str) -> list[Figure]:
    """The figures ``names`` as skipped rows, each with the reason."""
    return [Figure(bench, name, verdict=SKIPPED, note=reason) for name in names]


# --- formatting -------------------------------------------------------------------------

def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            return f"{seconds / scale:.3g} {unit}"


def fmt_value(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    number = f"{value:.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:.3g}"
    return f"{number} {unit}".rstrip()


def _bound(f: Figure, bound: float | None) -> str:
    if bound is None:
        return "-"
    if f.on == "ours":
        return fmt_time(bound)
    if f.on == "value":
        return fmt_value(bound, f.unit)
    return f"{bound:g}"


def _cell(seconds: float | None, value, unit) -> str:
    """A time where there is one, else a value in its unit, else '-'."""
    if seconds is not None:
        return fmt_time(seconds)
    return fmt_value(value, unit) if value is not None else "-"


def cells(f: Figure) -> list[str]:
    ours, raw = _cell(f.ours_s, f.value, f.unit), _cell(f.raw_s, f.raw_value, f.unit)
    return [f.bench, f.name, ours, raw,
            f"{f.ratio:.3f}" if f.ratio is not None else "-", _bound(f, f.bar), _bound(f, f.target), f.verdict]


def run_info(quick: bool) -> dict:
    """Versions and the machine, for the header line and the JSON."""
    import py_trees

    import bt_exec
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "bt_exec": bt_exec.__version__, "py_trees": py_trees.version.__version__,
            "python": sys.version.split()[0], "machine": f"{platform.system()} {platform.machine()}",
            "cores": cores, "load_1min": load, "mode": "quick" if quick else "full"}


def header_line(info: dict) -> str:
    load = f", load {info['load_1min']:.2f} at start" if info.get("load_1min") is not None else ""
    return (f"bt_exec {info['bt_exec']}, py_trees {info['py_trees']}, Python {info['python']}, "
            f"{info['machine']}, {info['cores']} cores{load}, {info['mode']} run, {info['date']}")


def print_table(figures: list[Figure], info: dict | None = None, file=None) -> None:
    """One aligned table of ``figures``; notes are numbered below it (a shared note is listed once)."""
    file = file or sys.stdout
    if info is not None:
        print(header_line(info), file=file)
    titles = ["bench", "figure", "ours", "raw py_trees", "ratio", "bar", "target", "result"]
    notes: list[str] = []
    rows = []
    for f in figures:
        row = cells(f)
        if f.note:
            if f.note not in notes:
                notes.append(f.note)
            row.append(f"[{notes.index(f.note) + 1}]")
        else:
            row.append("")
        rows.append(row)
    titles.append("note")
    widths = [max(len(r[i]) for r in rows + [titles]) for i in range(len(titles))]
    left = {0, 1, 7, 8}

    def line(row):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()

    print(line(titles), file=file)
    print("-" * len(line(titles)), file=file)
    for row in rows:
        print(line(row), file=file)
    for i, note in enumerate(notes, 1):
        print(f"[{i}] {note}", file=file)


def failed(figures: list[Figure]) -> bool:
    return any(f.verdict in FAILING for f in figures)


def write_json(path: str, figures: list[Figure], info: dict, detail: dict[str, list[str]] | None = None) -> None:
    data = {"run": info, "figures": [f.to_json() for f in figures], "detail": detail or {}}
    with open(path, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=1)
        out.write("\n")


def report(bench: str, figures: list[Figure], args: argparse.Namespace, detail: list[str]) -> int:
    """What a script's ``main`` prints: the table (unless ``--no-table``), its detail lines, the
    verdict line; ``--json`` writes the figures. The exit status: 1 when a bar was missed."""
    info = run_info(args.quick)
    if args.json:
        write_json(args.json, figures, info, {bench: detail})
    if not args.no_table:
        print_table(figures, info)
    for text in detail:
        print(text)
    if not args.no_table:
        print(verdict_line(figures))
    return 1 if failed(figures) else 0


def verdict_line(figures: list[Figure]) -> str:
    errors = sum(f.verdict == ERROR for f in figures)
    skips = sum(f.verdict == SKIPPED for f in figures)
    extra = ", ".join(part for part in (f"{errors} not measured (error)" if errors else "",
                                        f"{skips} skipped" if skips else "") if part)
    if any(f.verdict == FAIL for f in figures):
        line = "FAIL: a bar was missed"
    elif errors:
        line = "FAIL: figures could not be measured"
    else:
        line = "all bars met"
    return f"{line} ({extra})" if extra else line


# --- the command line -------------------------------------------------------------------

def parse_args(argv, description: str, repeats: int, quick_repeats: int, quick_help: str,
               extend: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """``--quick`` (a smoke run, as CI does), ``--repeats N``, ``--json FILE``; ``args.repeats`` is always set.
    ``extend`` adds a script's own options."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--repeats", type=int, help=f"repeats per figure (default {repeats}, or {quick_repeats} "
                                                    "with --quick)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("--no-table", action="store_true", help=argparse.SUPPRESS)  # bench_all: detail lines only
    if extend is not None:
        extend(parser)
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (quick_repeats if args.quick else repeats)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    args.parser = parser
    return args


def headless_chromium():
    """A Selenium driver of headless Chromium (1400x900), or why none could be had (a str): selenium, chromium or
    chromedriver missing, or a browser that cannot start here (not measurable, not slow)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return "selenium is not installed"
    import shutil

    if not shutil.which("chromium") or not shutil.which("chromedriver"):
        return "chromium or chromedriver is not installed (apt-get install chromium chromium-driver)"
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900"):
        options.add_argument(argument)
    try:
        return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
    except Exception as exc:
        return f"headless Chromium could not be started ({type(exc).__name__}: {str(exc).splitlines()[0]})"
