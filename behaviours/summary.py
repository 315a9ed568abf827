"""One English line on how a finished composite op's children ended, for its final report."""
from __future__ import annotations

from py_trees.common import Status


def children_summary(composite) -> str:
    children = composite.children
    total = len(children)
    succeeded = sum(1 for c in children if c.status == Status.SUCCESS)
    failed = [c.op_id for c in children if c.status == Status.FAILURE]
    noun = "branches" if getattr(composite, "waits_for_all", False) else "children"
    if not failed:
        return f"all {total} {noun} succeeded" if total else "no children: nothing to do"
    if noun == "branches":
        return f"{succeeded} of {total} branches succeeded; failed: {', '.join(failed)}"
    skipped = total - succeeded - len(failed)
    return f"child {failed[0]} failed after {succeeded} of {total} succeeded; {skipped} skipped"
