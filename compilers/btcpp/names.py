"""The names a BT.CPP document gives beyond ports: BT.CPP 3's names and their BT.CPP 4 successors, the attributes
that are no port, and how a port names a blackboard entry."""
from __future__ import annotations

# BT.CPP 3 names BT.CPP 4 reads under another name, each with its successor.
V3_NAMES = {"SequenceStar": "SequenceWithMemory", "FallbackStar": "Fallback",
            "RetryUntilSuccesful": "RetryUntilSuccessful"}
# BT.CPP 3's Parallel thresholds, named as BT.CPP 4 names them.
V3_PORTS = {"Parallel": {"success_threshold": "success_count", "failure_threshold": "failure_count"}}
# The explicit forms: <Action ID="MoveTo"/>, and the kind each names.
EXPLICIT = {"Action": "action", "Condition": "condition", "Control": "control", "Decorator": "decorator"}
SUBTREE_TAGS = ("SubTree", "SubTreePlus")  # SubTreePlus: BT.CPP 3's SubTree with remapping, 4's SubTree
# Attributes every node may carry that are no port: its instance name, and what Groot2 and BT.CPP's exporters add.
NOT_PORTS = frozenset(("ID", "name", "_uid", "_fullpath", "_description"))
# BT.CPP 4's scripted pre and post conditions, which this dialect does not run.
SCRIPT_ATTRIBUTES = frozenset(("_successIf", "_failureIf", "_skipIf", "_onlyIf", "_while", "_onSuccess",
                               "_onFailure", "_onHalted", "_post"))
# A SubTree's own attributes beyond its ports.
SUBTREE_OPTIONS = frozenset(("_autoremap", "__autoremap", "__shared_blackboard"))
# The attributes of <root>.
ROOT_ATTRIBUTES = ("BTCPP_format", "main_tree_to_execute")
FORMATS = ("3", "4")
TRUE_WORDS = ("true", "1", "yes", "True", "TRUE")


def key_of(port: str, value: str) -> str | None:
    """The blackboard key a port's value names (``{key}``, ``{=}``), or None for a literal value."""
    if value[:1] == "{" and value[-1:] == "}":  # as written most often: no blanks around the braces
        inside = value[1:-1]
    else:
        text = value.strip()
        if len(text) < 2 or text[0] != "{" or text[-1] != "}":
            return None
        inside = text[1:-1]
    if "{" in inside or "}" in inside:
        return None
    key = inside.strip()
    return port if key == "=" else key or None  # "{}" names no key: the text itself
