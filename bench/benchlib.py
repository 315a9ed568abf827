"""What the bench scripts share: their command line and how they print times."""
from __future__ import annotations

import argparse


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale or unit == "us":
            return f"{seconds / scale:.3g} {unit}"


def parse_args(argv, description: str, repeats: int, quick_repeats: int, quick_help: str) -> argparse.Namespace:
    """``--quick`` (a smoke run, as CI does) and ``--repeats N``; ``args.repeats`` is always set."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--repeats", type=int, help=f"repeats per figure (default {repeats}, or {quick_repeats} "
                                                    "with --quick)")
    args = parser.parse_args(argv)
    args.repeats = args.repeats or (quick_repeats if args.quick else repeats)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    return args
