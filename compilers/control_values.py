"""The values a control request carries, read alike by every dialect, the executor and every door: a plan's or an
op's id as text, and the longest a cancel waits by default. Free of any one dialect, so readers of ids and waits
need not load RTDL's or Qwen3's module.
"""
from __future__ import annotations

from bt_exec.errors import Issue

from .limits import DEFAULT_LIMITS, INT64_MAX, number_shown

# Longest a cancel may wait for the plans to end by default, as Robonix's Pilot caps it: a cancel asking for more
# waits this long (Limits.max_wait_ms).
MAX_WAIT_MS = DEFAULT_LIMITS.max_wait_ms


def id_text(value: object, key: str, path: str, issues: list[Issue]) -> str | None:
    """A plan or op id as text: a non-empty string as it is, a non-negative integer (as Robonix's Pilot
    writes ids) as its decimal string; anything else is an issue at ``path`` (and None)."""
    if type(value) is str and value.strip():
        return value
    if type(value) is int and 0 <= value <= INT64_MAX:
        return str(value)
    issues.append(Issue("bad_value", path, f"{key} must be a non-empty string or a non-negative integer, got "
                                           f"{number_shown(value)}"))
    return None
