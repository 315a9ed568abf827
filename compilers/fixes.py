"""Repairs a planner can apply: for each issue whose fault has one clear remedy, a JSON Patch (RFC 6902) on
the submitted document (the issue's ``fix``); where several remedies are as likely, each as a patch
(``alternatives``) and no fix.

Fixes are worked out only once an input is refused, never for a valid one. They are found in report order,
and each is judged against the document as the fixes before it left it, so the fixes of one report never
repeat or conflict: applied in order (``apply_fixes``) they give the repaired document. An issue whose place
an earlier fix already changed (two issues of one fault: a misspelt ``descripton`` is both an unknown field
and a missing description) gets no fix of its own but ``fixed_by``, the index of that earlier issue.

Paths are JSON pointers into the document as ``fixable`` gives it: the document itself, the extracted JSON
of a reply with text around it, and for a Qwen3 submit envelope whose ``response`` is JSON text, that
envelope with the response read as the graph object it holds (which the envelope also takes).
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
from dataclasses import dataclass
from typing import Callable

import jsonpatch
import jsonpointer
from jsonpointer import escape, unescape

from bt_exec.errors import MAX_ISSUES, Issue

from .ir import Plan
from .qwen3 import graph_in_response
from .ir import STOP_WHENS
from .rtdl.ops import ARENA_KINDS, META_OPS, TREE_OPS
from .skill_catalog import TERMINALS

PLACEHOLDER_DESCRIPTION = "TODO: describe"
# The fixes of one report quote the input (a value parsed out of a string, a node wrapped): past this many
# characters of fixes in all, the later issues carry none, so a refusal stays small whatever is sent.
MAX_FIX_CHARS = 65536
# How alike a name must be to a known one to be taken for its misspelling (difflib's ratio).
NEAR = 0.6
# Known names at most this much less alike than the nearest are as likely as it: alternatives, no fix.
TIE = 0.02
# Longest name the nearest-name search takes or offers: longer than the names catalogs and dialects use, and a
# bound on each comparison (difflib's ratio is quadratic in the lengths: 1.5 ms for two 64-character names
# of two letters).
MAX_NAME_CHARS = 64
# Most pairs of characters the comparisons of one report may weigh (a comparison of names of lengths a and b
# weighs a * b), so that a report costs a bounded time whatever its names: a few hundred comparisons of the
# longest names, thousands of usual ones.
MAX_COMPARED_PAIRS = 500_000

_ALLOWED = re.compile(r"\(allowed: ([^)]*)\)")
_MISSING = re.compile(r"no '([^']+)'|needs '([^']+)'")
_EXPECTED = re.compile(r"must be (?:null or )?(?:an? )?(object|array|string|JSON text|non-negative integer|integer|"
                       r"node index)")
_ARENA_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\]|\.[A-Za-z_][A-Za-z0-9_]*)*")
_ARENA_STEP = re.compile(r"\[(\d+)\]|\.?([A-Za-z_][A-Za-z0-9_]*)")
_ONE_OF = re.compile(r"must be one of ([^,]+(?:, [^,]+)*), got")
_MISSING_VALUE = object()


def fixable(doc: object) -> object:
    """The document fixes point into: ``doc``, or a Qwen3 envelope with its response JSON text read as the
    graph object (a copy; ``doc`` itself is left as it is)."""
    if isinstance(doc, dict) and isinstance(doc.get("response"), str):
        try:
            graph = graph_in_response(doc["response"])
        except (ValueError, RecursionError):
            return doc
        if isinstance(graph, dict):
            return {**doc, "response": graph}
    return doc


def apply_fixes(doc: object, issues) -> object:
    """The repaired document: the ``fix`` of every issue (dicts or Issues), in order, applied to a copy of
    ``fixable(doc)``. Raises jsonpatch's errors if the fixes are not this document's."""
    repaired = copy.deepcopy(fixable(doc))
    for issue in issues:
        fix = issue.get("fix") if isinstance(issue, dict) else issue.fix
        if fix:
            repaired = jsonpatch.apply_patch(repaired, fix, in_place=True)
    return repaired


def pointer_of(path: str) -> str | None:
    """The JSON pointer of an issue path: a pointer as it is; arena notation (``nodes[5].call.contract_id``)
    translated; None for a place inside a string (``args_json at /speed``) or no place at all."""
    if path == "" or path.startswith("/"):
        return path
    if not _ARENA_PATH.fullmatch(path):
        return None
    return "".join(f"/{index or name}" for index, name in _ARENA_STEP.findall(path))


class NameSearch:
    """The nearest-name search of one report, bounded: a name longer than ``MAX_NAME_CHARS`` is never taken
    for a misspelling (nor compared), a pair whose lengths or letters alone keep it under ``NEAR`` is not
    compared, and once its comparisons have weighed ``MAX_COMPARED_PAIRS`` pairs of characters, the names of
    the report's later issues get none. ``comparisons``: how many were made, ``pairs``: what they weighed."""

    def __init__(self):
        self.comparisons = self.pairs = 0

    def nearest(self, word: object, known) -> list[str]:
        """The known names ``word`` is most likely a misspelling of: one, several as likely, or none."""
        if not isinstance(word, str) or not word or len(word) > MAX_NAME_CHARS:
            return []
        lowered = word.lower()
        known = sorted(name for name in set(known) - {word} if isinstance(name, str) and len(name) <= MAX_NAME_CHARS)
        scored = []
        for name in known:
            matcher = difflib.SequenceMatcher(None, lowered, name.lower())
            if matcher.real_quick_ratio() < NEAR or matcher.quick_ratio() < NEAR:
                continue  # bounds of the ratio, from the lengths and the letters: linear, never quadratic
            weight = len(word) * len(name)
            if self.pairs + weight > MAX_COMPARED_PAIRS:
                return []
            self.pairs += weight
            self.comparisons += 1
            ratio = matcher.ratio()
            if ratio >= NEAR:
                scored.append((-ratio, name))
        if scored:
            scored.sort()
            best = -scored[0][0]
            return [name for score, name in scored if -score >= best - TIE]
        # a short name one slip away (dp, od for do), or an abbreviation (desc, seq): the one known name it fits
        for fits in (lambda name: _one_slip(lowered, name.lower()),
                     lambda name: len(word) >= 3 and name.lower().startswith(lowered)):
            found = [name for name in known if fits(name)]
            if len(found) == 1:
                return found
        return []


def _one_slip(word: str, name: str) -> bool:
    """Whether ``word`` is ``name`` with one letter changed, added, dropped, or two neighbours swapped."""
    if abs(len(word) - len(name)) > 1 or word == name:
        return False
    if len(word) == len(name):
        differ = [index for index in range(len(word)) if word[index] != name[index]]
        return len(differ) == 1 or (len(differ) == 2 and differ[1] == differ[0] + 1
                                    and word[differ[0]] == name[differ[1]] and word[differ[1]] == name[differ[0]])
    shorter, longer = sorted((word, name), key=len)
    return any(longer[:index] + longer[index + 1:] == shorter for index in range(len(longer)))


class _Repairs:
    """The fixes of one report, found in order; ``changed`` are the places the fixes so far have touched."""

    def __init__(self):
        self.out: list[Issue] = []
        self.changed: dict[str, int] = {}  # pointer -> index of the issue whose fix changed it
        self.chars = 0
        self.names = NameSearch()

    def fixed_by(self, place: str | None) -> int | None:
        """The earlier issue whose fix changed ``place``, a place above it or one below it."""
        if place is None:
            return None
        for touched, index in self.changed.items():
            if touched == place or place.startswith(touched + "/") or touched.startswith(place + "/"):
                return index
        return None

    def give(self, issue: Issue, fix: list | None = None, alternatives: list | None = None,
             fixed_by: int | None = None) -> bool:
        """Record ``issue`` with what was found for it; False if the fix was left out (too big)."""
        if fix or alternatives:
            size = len(json.dumps(fix or alternatives))
            if self.chars + size > MAX_FIX_CHARS:
                fix = alternatives = None
            self.chars += size
        if fix:
            for operation in fix:
                for key in ("path", "from"):
                    if key in operation and not operation[key].endswith("/-"):
                        self.changed.setdefault(operation[key], len(self.out))
        self.out.append(Issue(issue.code, issue.path, issue.message, issue.steps, fix or None,
                              alternatives or None, fixed_by, lossy=bool(fix) and drops_data(fix))
                        if fix or alternatives or fixed_by is not None else issue)
        return bool(fix)


def drops_data(fix: list) -> bool:
    """Whether a patch drops what the document held: a removal (an unknown field, which may be a setting
    written in the wrong place, such as a speed limit), or a value replaced by null (a call dropped). Such a
    fix is ``lossy``: ``bt-exec validate --fix`` applies it only when told to (``--fix-lossy``)."""
    return any(operation["op"] == "remove" or (operation["op"] == "replace" and operation.get("value") is None)
               for operation in fix)


def joined(first: list[Issue], then: list[Issue]) -> list[Issue]:
    """``first`` followed by ``then``, two reports' issues whose fixes were found each on its own: ``then``'s
    ``fixed_by`` moved to where the list has them, and a fix of ``then`` that would change what a fix of
    ``first`` changes left out (that fix is applied first and the place is no longer as ``then`` saw it)."""
    changed = [operation[key] for issue in first for operation in issue.fix or () for key in ("path", "from")
               if key in operation]
    out = list(first)
    for issue in then:
        fixed_by = None if issue.fixed_by is None else issue.fixed_by + len(first)
        fix = issue.fix
        if fix and any(_related(operation[key], place) for operation in fix for key in ("path", "from")
                       if key in operation for place in changed):
            fix = None
        out.append(dataclasses.replace(issue, fix=fix, fixed_by=fixed_by, lossy=bool(fix) and issue.lossy))
    return out


def _related(one: str, other: str) -> bool:
    """Whether two JSON pointers name the same place, or one lies inside the other."""
    return one == other or one.startswith(other + "/") or other.startswith(one + "/")


# --- what the fixes uncover --------------------------------------------------------------------------------

FIX_ROUNDS = 3  # checks of a document repaired by the fixes found so far, each finding what the last uncovered


def issues_after_fixes(doc: object, issues: list[Issue], check_again: Callable[[object], list[Issue]]) -> list[Issue]:
    """``issues``, followed by those the document repaired by their fixes still has (``after_fixes``), round
    after round while new ones carry fixes: a fix can uncover what a check could not reach (a misspelt cap
    behind a malformed node). Applied in order, every fix of the list gives the repaired document.
    ``check_again(document)``: the issues of a document, with their fixes; empty when it is valid."""
    if not any(issue.fix for issue in issues) or any(issue.code == "too_many_issues" for issue in issues):
        return issues
    seen = {_issue_key(issue) for issue in issues}
    listed, latest = list(issues), issues
    for _round in range(FIX_ROUNDS):
        try:
            doc = apply_fixes(doc, latest)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
            break
        latest = _new_issues(check_again(doc), seen, offset=len(listed))
        if not latest or len(listed) + len(latest) > MAX_ISSUES:
            break
        listed += latest
        if not any(issue.fix for issue in latest):
            break
    return listed


def _issue_key(issue: Issue) -> tuple:
    return issue.code, issue.path, issue.message


def _new_issues(issues: list[Issue], seen: set, offset: int) -> list[Issue]:
    """The issues not listed before, marked ``after_fixes``, their ``fixed_by`` moved by ``offset`` (to where
    the whole list has them); one fixed by an issue left out goes too."""
    kept: dict[int, int] = {}  # index in ``issues`` -> index among the new ones
    found = []
    for index, issue in enumerate(issues):
        key = _issue_key(issue)
        if key in seen or issue.code == "too_many_issues":
            continue
        fixed_by = issue.fixed_by
        if fixed_by is not None:
            if fixed_by not in kept:
                continue
            fixed_by = offset + kept[fixed_by]
        seen.add(key)
        kept[index] = len(found)
        found.append(dataclasses.replace(issue, fixed_by=fixed_by, after_fixes=True))
    return found


# --- documents that did not load --------------------------------------------------------------------------

def document_fixes(doc: object, issues: list[Issue]) -> list[Issue]:
    """``issues`` of a document that did not load, each with its fix where there is one."""
    repairs = _Repairs()
    working = None
    for issue in issues:
        if issue.code not in _DOCUMENT_FIXERS or issue.fix is not None:
            repairs.give(issue, issue.fix, issue.alternatives, issue.fixed_by)
            continue
        pointer = pointer_of(issue.path)
        place = _place(issue, pointer)
        earlier = repairs.fixed_by(place)
        if earlier is not None:
            repairs.give(issue, fixed_by=earlier)
            continue
        if working is None:
            working = _Working(fixable(doc))
        found = _DOCUMENT_FIXERS[issue.code](working.doc, pointer, issue, repairs.names) if pointer is not None \
            else None
        fix, alternatives = _one_or_several(found)
        if fix is not None and not working.applied(fix):
            fix = None
        repairs.give(issue, fix, alternatives)
    return repairs.out


class _Working:
    """The document as the fixes so far leave it, sharing what they did not touch with the input: each fix
    first copies the containers on its paths (a hundred fixes of a large input copy a hundred paths, not
    the input), so the input itself is never changed."""

    def __init__(self, doc: object):
        self.doc = doc
        self._own: set[int] = set()  # ids of the containers copied here, which the fixes may change

    def applied(self, fix: list) -> bool:
        """Apply ``fix``; False (and the document as it was) if it does not fit."""
        for operation in fix:
            for key in ("path", "from"):
                if key in operation:
                    self._copy_along(operation[key])
        try:
            jsonpatch.apply_patch(self.doc, fix, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
            return False
        return True

    def _copy_along(self, pointer: str) -> None:
        self.doc = self._own_copy(self.doc)
        container = self.doc
        for token in pointer[1:].split("/")[:-1]:
            token = unescape(token)
            if isinstance(container, dict) and token in container:
                key = token
            elif isinstance(container, list) and token.isdigit() and int(token) < len(container):
                key = int(token)
            else:
                return
            container[key] = self._own_copy(container[key])
            container = container[key]

    def _own_copy(self, value: object) -> object:
        if not isinstance(value, (dict, list)) or id(value) in self._own:
            return value
        value = copy.copy(value)
        self._own.add(id(value))
        return value


def _place(issue: Issue, pointer: str | None) -> str | None:
    """Where the fault of an issue is: the missing field itself for ``required``."""
    if pointer is None or issue.code != "required":
        return pointer
    named = _MISSING.search(issue.message)
    if named is None:
        return pointer
    field = named.group(1) or named.group(2)
    return pointer if pointer.rsplit("/", 1)[-1] == field else f"{pointer}/{escape(field)}"


def _one_or_several(found) -> tuple[list | None, list | None]:
    """(fix, alternatives) from what a fixer found: one patch, a list of patches, or None."""
    if not found:
        return None, None
    if isinstance(found, _Several):
        return (found[0], None) if len(found) == 1 else (None, list(found))
    return found, None


class _Several(list):
    """Patches as likely as each other."""


def _get(doc: object, pointer: str) -> object:
    if pointer == "":
        return doc
    value = doc
    for token in pointer[1:].split("/"):
        token = unescape(token)
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            return _MISSING_VALUE
    return value


def _parent(pointer: str) -> tuple[str, str]:
    head, _, last = pointer.rpartition("/")
    return head, unescape(last)


def _renamed(pointer: str, names) -> _Several | None:
    """Moves of the field at ``pointer`` to each known name it is nearest to."""
    head, key = _parent(pointer)
    return _Several([{"op": "move", "from": pointer, "path": f"{head}/{escape(name)}"}]
                    for name in names) if names else None


def _fix_unknown_field(doc, pointer: str, issue: Issue, names: NameSearch):
    head, key = _parent(pointer)
    container = _get(doc, head)
    if not isinstance(container, dict) or key not in container:
        return None
    allowed = _ALLOWED.search(issue.message)
    if allowed is None:  # a call on a composite arena node: Robonix writes an absent call as null
        return [{"op": "replace", "path": pointer, "value": None}]
    free = [name for name in allowed.group(1).split(", ") if name not in container]
    return _renamed(pointer, names.nearest(key, free)) or [{"op": "remove", "path": pointer}]


def _fix_required(doc, pointer: str, issue: Issue, names: NameSearch):
    named = _MISSING.search(issue.message)
    if named is None:
        return None
    field = named.group(1) or named.group(2)
    container_pointer = pointer if pointer.rsplit("/", 1)[-1] != field else _parent(pointer)[0]
    node = _get(doc, container_pointer)
    if not isinstance(node, dict) or field in node:
        return None
    path = f"{container_pointer}/{escape(field)}"
    values = _placeholders(doc, container_pointer, node, field)
    if not values:
        return None
    return _Several([[{"op": "add", "path": path, "value": value}] for value in values])


def _placeholders(doc, pointer: str, node: dict, field: str) -> list:
    """The values a missing field may take, most likely first; several when none is clearly it."""
    if field == "description":
        return [PLACEHOLDER_DESCRIPTION]
    if field == "children":
        return [[]]
    if field == "op":  # a tree node: what its other fields say it is
        if "cap" in node or "args" in node:
            return ["do"]
        return ["sequence", "parallel"] if "children" in node else []
    if field == "node_kind":
        if node.get("call") is not None:
            return [2]
        return [0, 1] if node.get("children") else []
    if field == "op_id":
        return [_free_op_id(doc, pointer)]
    if field == "status":  # a step graph
        return ["ok"]
    if field == "entry":
        steps = node.get("plan")
        first = steps[0].get("id") if isinstance(steps, list) and steps and isinstance(steps[0], dict) else None
        return [first] if isinstance(first, str) else []
    if field == "transitions":
        return [{}] if isinstance(node.get("plan"), list) and not node["plan"] else []
    return []


def _free_op_id(doc, pointer: str) -> str:
    """An op id no arena node uses: ``n`` and the node's index, primed until free."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    used = {node.get("op_id") for node in nodes if isinstance(node, dict) and isinstance(node.get("op_id"), str)} \
        if isinstance(nodes, list) else set()
    candidate = f"n{pointer.rsplit('/', 1)[-1]}"
    while candidate in used:
        candidate += "'"
    return candidate


def _fix_type(doc, pointer: str, issue: Issue, names: NameSearch):
    value = _get(doc, pointer)
    expected = _EXPECTED.search(issue.message)
    if value is _MISSING_VALUE or expected is None:
        return None
    wanted = _converted(value, expected.group(1))
    if wanted is _MISSING_VALUE:
        return None
    return [{"op": "replace", "path": pointer, "value": wanted}]


def _converted(value: object, expected: str) -> object:
    """``value`` as the expected type, where the conversion is plain; _MISSING_VALUE where it is not."""
    if expected == "object":
        parsed = _parsed(value)
        return parsed if isinstance(parsed, dict) else _MISSING_VALUE
    if expected == "array":
        if isinstance(value, dict):
            return [value]
        parsed = _parsed(value)
        return parsed if isinstance(parsed, list) else _MISSING_VALUE
    if expected == "string":
        if isinstance(value, bool) or value is None:
            return _MISSING_VALUE
        return str(value) if isinstance(value, (int, float)) else _MISSING_VALUE
    if expected == "JSON text":  # args_json written as the object itself
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False) if isinstance(value, dict) \
            else _MISSING_VALUE
    # an integer: its decimal text, or a float with no fraction
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return _MISSING_VALUE


def _parsed(value: object) -> object:
    if not isinstance(value, str):
        return _MISSING_VALUE
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return _MISSING_VALUE


def _fix_bad_op(doc, pointer: str, issue: Issue, names: NameSearch):
    head, _ = _parent(pointer)
    at_root = head in ("", "/rtdl")
    found = names.nearest(_get(doc, pointer), TREE_OPS + (META_OPS if at_root else ()))
    return _Several([[{"op": "replace", "path": pointer, "value": name}] for name in found]) if found else None


def _fix_bad_value(doc, pointer: str, issue: Issue, names: NameSearch):
    head, key = _parent(pointer)
    value = _get(doc, pointer)
    if value is _MISSING_VALUE:
        return None
    if key == "node_kind":
        return _node_kind(_get(doc, head), value, pointer, names)
    if key == "when":
        return _replaced(pointer, names.nearest(value, STOP_WHENS))
    if key == "status":
        allowed = _ONE_OF.search(issue.message)
        statuses = allowed.group(1).split(", ") if allowed else ["ok", "blocked"]
        return _replaced(pointer, names.nearest(value, statuses))
    if key == "wait_ms":
        wanted = _converted(value, "integer")
        return None if wanted is _MISSING_VALUE else [{"op": "replace", "path": pointer, "value": wanted}]
    if key == "op_id" and isinstance(_get(doc, head), dict) and head.startswith("/nodes/"):
        return [{"op": "replace", "path": pointer, "value": _free_op_id(doc, head)}]
    return None


def _node_kind(node: object, value: object, pointer: str, names: NameSearch):
    by_name = {name: code for code, name in ARENA_KINDS.items()}
    if isinstance(value, str):
        return _Several([[{"op": "replace", "path": pointer, "value": by_name[name]}]
                         for name in ([value] if value in by_name else names.nearest(value, by_name))]) or None
    if isinstance(node, dict) and node.get("call") is not None:
        return [{"op": "replace", "path": pointer, "value": 2}]
    return None


def _replaced(pointer: str, names: list) -> _Several | None:
    return _Several([[{"op": "replace", "path": pointer, "value": name}] for name in names]) if names else None


def _fix_empty_description(doc, pointer: str, issue: Issue, names: NameSearch):
    value = _get(doc, pointer)
    if value is _MISSING_VALUE:
        return None
    return [{"op": "replace", "path": pointer, "value": PLACEHOLDER_DESCRIPTION}]


def _fix_duplicate_op_id(doc, pointer: str, issue: Issue, names: NameSearch):
    head, _ = _parent(pointer)
    return [{"op": "replace", "path": pointer, "value": _free_op_id(doc, head)}]


def _fix_unknown_step(doc, pointer: str, issue: Issue, names: NameSearch):
    """A transition or the entry naming a step that is not there: the nearest step (or terminal)."""
    graph_pointer = pointer.split("/transitions", 1)[0] if "/transitions" in pointer else _parent(pointer)[0]
    graph = _get(doc, graph_pointer)
    steps = graph.get("plan") if isinstance(graph, dict) else None
    ids = [step["id"] for step in steps if isinstance(step, dict) and isinstance(step.get("id"), str)] \
        if isinstance(steps, list) else []
    value = _get(doc, pointer)
    if pointer.endswith("/entry"):
        return _replaced(pointer, names.nearest(value, ids))
    if isinstance(value, dict):  # an edge of an edge list
        if "there is no step" in issue.message:
            return _replaced(f"{pointer}/from", names.nearest(value.get("from"), ids))
        return _replaced(f"{pointer}/to", names.nearest(value.get("to"), ids + list(TERMINALS)))
    if "there is no step" in issue.message:  # the source: a key of the transitions map
        source_pointer = _parent(pointer)[0]
        transitions = _get(doc, _parent(source_pointer)[0])
        free = [step for step in ids if not (isinstance(transitions, dict) and step in transitions)]
        return _renamed(source_pointer, names.nearest(_parent(source_pointer)[1], free))
    return _replaced(pointer, names.nearest(value, ids + list(TERMINALS)))


_DOCUMENT_FIXERS = {
    "unknown_field": _fix_unknown_field,
    "required": _fix_required,
    "type": _fix_type,
    "bad_op": _fix_bad_op,
    "bad_value": _fix_bad_value,
    "empty_description": _fix_empty_description,
    "duplicate_op_id": _fix_duplicate_op_id,
    "unknown_step": _fix_unknown_step,
}


# --- loaded plans that were refused -----------------------------------------------------------------------

def plan_fixes(plan: Plan, issues: list[Issue], context) -> list[Issue]:
    """``issues`` of a loaded plan refused by its checks (``context``: the CheckContext it was checked
    against), each with its fix where there is one."""
    repairs = _Repairs()
    facts = _Facts(plan, {op.path: op for op in plan.ops.values()}, issues, context, repairs.names)
    for issue in issues:
        pointer = pointer_of(issue.path)
        earlier = repairs.fixed_by(_plan_place(issue, pointer))
        if earlier is not None:
            repairs.give(issue, fixed_by=earlier)
            continue
        if issue.fix is not None:  # found by the check that made the issue
            fix, alternatives = issue.fix, None
        else:
            fixer = _PLAN_FIXERS.get(issue.code)
            fix, alternatives = _one_or_several(fixer(facts, pointer, issue) if fixer and pointer is not None
                                                else None)
        # a fix that would change what an earlier one changed: that one repairs this fault too
        earlier = next((index for operation in fix or () if not operation["path"].endswith("/-")
                        for index in [repairs.fixed_by(operation["path"])] if index is not None), None)
        if earlier is not None:
            repairs.give(issue, fixed_by=earlier)
        else:
            repairs.give(issue, fix, alternatives)
    return repairs.out


# Issues located at their step whose fault is elsewhere (its transitions, the paths to it): a fix to the step's
# fields leaves them as they were.
_ABOUT_A_STEP = frozenset(("missing_transition", "no_transitions", "unreachable", "no_way_out",
                           "precondition_fails_in_scene", "precondition_never_holds", "tool_not_in_socket",
                           "no_transfer_before_return"))


def _plan_place(issue: Issue, pointer: str | None) -> str | None:
    """Where the fault of a loaded plan's issue is, when an earlier fix may have repaired it."""
    if pointer is None or issue.code in _ABOUT_A_STEP:
        return None
    if issue.code == "missing_param":
        named = _MISSING.search(issue.message)
        return f"{pointer}/{escape(named.group(2))}" if named else None
    return pointer


@dataclass(frozen=True)
class _Facts:
    """What the fixes of a loaded plan are worked out from: the plan, its ops by where they are in the
    input, the report's issues and the CheckContext it was checked against."""

    plan: Plan
    ops_by_path: dict
    issues: list
    context: object
    names: NameSearch


def _op_at(facts: _Facts, issue: Issue):
    """The op an issue about one of its fields is about."""
    path = issue.path
    for suffix in ("/cap", ".call.contract_id", "/skill"):
        if path.endswith(suffix):
            return facts.ops_by_path.get(path[:-len(suffix)])
    return None


def _fix_unknown_cap(facts, pointer, issue):
    op = _op_at(facts, issue)
    catalog = facts.context.capability_catalog
    if op is None or catalog is None:
        return None
    return _replaced(pointer, facts.names.nearest(op.cap, catalog.entries))


def _fix_unknown_skill(facts, pointer, issue):
    op = _op_at(facts, issue)
    if op is None:
        return None
    skills = facts.context.skills
    return _replaced(pointer, facts.names.nearest(op.cap, list(skills.skills) + list(skills.aliases)))


def _step_of(facts: _Facts, issue: Issue):
    return facts.plan.steps.steps.get(issue.steps[0]) if issue.steps else None


def _fix_unknown_name(facts, pointer, issue):
    """An unknown object or target: the nearest the catalog names (and the scene, when there is one)."""
    step = _step_of(facts, issue)
    if step is None:
        return None
    key = next((key for key, path in step.param_paths.items() if path == issue.path), None)
    if key is None:
        return None
    catalog, scene = facts.context.skills, facts.context.scene
    is_target = issue.code == "unknown_target"
    names = set(_listed_names(catalog.data.get("target_types" if is_target else "object_types", {})))
    if scene is not None:
        names |= scene.targets if is_target else scene.objects
    return _replaced(pointer, facts.names.nearest(step.params[key], names))


def _listed_names(types: dict) -> list[str]:
    return [name for spec in types.values() if isinstance(spec, dict) for name in spec.get("names", ())]


def _fix_unknown_param(facts, pointer, issue):
    step = _step_of(facts, issue)
    skill_name = facts.context.skills.resolve(step.skill) if step is not None else None
    if skill_name is None:
        return None
    key = next((key for key, path in step.param_paths.items() if path == issue.path), None)
    free = [name for name in facts.context.skills.skills[skill_name].params if name not in step.params]
    return _renamed(pointer, facts.names.nearest(key, free)) or [{"op": "remove", "path": pointer}]


def _fix_missing_transition(facts, pointer, issue):
    """The outcome's edge to the terminal a planner would give it: a failure asks for a new plan."""
    step = _step_of(facts, issue)
    event = re.search(r"outcome '([^']+)'", issue.message)
    graph = facts.plan.steps
    if step is None or event is None:
        return None
    outcome = event.group(1)
    target = _cut_off_observer(facts, step) if facts.context.skills.is_failure(outcome) else None
    target = target or _terminal_for(outcome, facts.context.skills)
    if target is None:
        return None
    return [_edge_added(graph, step.step_id, outcome, target)]


def _edge_added(graph, source: str, event: str, target: str) -> dict:
    """The operation adding a transition, in the form the graph writes its transitions in."""
    if graph.edge_list:
        return {"op": "add", "path": f"{graph.prefix}/transitions/-", "value": {"from": source, "event": event,
                                                                                 "to": target}}
    return {"op": "add", "path": f"{graph.prefix}/transitions/{escape(source)}/{escape(event)}", "value": target}


def _edge_target(graph, path: str) -> str:
    """Where the target of the transition at ``path`` is: the path itself in a map, its ``to`` in an edge list."""
    return f"{path}/to" if graph.edge_list else path


def _cut_off_observer(facts: _Facts, step) -> str | None:
    """The one step no path reaches, when it observes the object of ``step``: a failure of ``step`` was
    meant to go there (and look at what the robot holds)."""
    cut_off = [step_id for issue in facts.issues if issue.code == "unreachable" for step_id in issue.steps or ()]
    if len(cut_off) != 1:
        return None
    other = facts.plan.steps.steps[cut_off[0]]
    skill = facts.context.skills.resolve(other.skill)
    observes = skill is not None and facts.context.skills.skills[skill].observes
    return other.step_id if observes and other.params.get("object") == step.params.get("object") else None


def _terminal_for(outcome: str, skills) -> str | None:
    if outcome == "unknown":  # what the robot holds is not known: a person looks
        return "operator_required"
    if skills.is_failure(outcome) or outcome in ("empty", "placed"):
        return "replan_required"
    return None


def _fix_failure_to_completed(facts, pointer, issue):
    return [{"op": "replace", "path": _edge_target(facts.plan.steps, pointer), "value": "replan_required"}]


def _fix_motion_after_collision(facts, pointer, issue):
    return [{"op": "replace", "path": _edge_target(facts.plan.steps, pointer), "value": "operator_required"}]


def _fix_wrong_tool(facts, pointer, issue):
    step = _step_of(facts, issue)
    tool = facts.context.skills.tool_of(step.params.get("object", "")) if step is not None else None
    return [{"op": "replace", "path": pointer, "value": tool}] if tool else None


def _fix_tool_not_in_socket(facts, pointer, issue):
    step = _step_of(facts, issue)
    socket = facts.context.skills.socket_of(step.params.get("object", "")) if step is not None else None
    if socket is None:
        return None
    where = step.param_paths.get("target")
    if where is not None:
        return [{"op": "replace", "path": where, "value": socket}]
    return [{"op": "add", "path": f"{step.path}/target", "value": socket}]


_PLAN_FIXERS = {
    "unknown_cap": _fix_unknown_cap,
    "unknown_skill": _fix_unknown_skill,
    "unknown_object": _fix_unknown_name,
    "unknown_target": _fix_unknown_name,
    "unknown_param": _fix_unknown_param,
    "missing_transition": _fix_missing_transition,
    "failure_to_completed": _fix_failure_to_completed,
    "motion_after_collision": _fix_motion_after_collision,
    "wrong_tool": _fix_wrong_tool,
    "tool_not_in_socket": _fix_tool_not_in_socket,
}


def step_insertion(graph, before: str, path: list[str], skill: str, obj: str, outcomes) -> list | None:
    """The patch that puts a new step ``skill(obj)`` right before step ``before`` on ``path`` (the steps from
    the entry that reach it): the last edge of the path (or the entry) leads to the new step, whose success
    goes on to ``before`` and whose every other outcome asks for a new plan (``graph``: the StepGraph)."""
    new_id = f"{before}_{skill}"
    while new_id in graph.steps:
        new_id += "'"
    prefix = graph.prefix
    edges = {outcome: before if outcome == "success" else "replan_required" for outcome in outcomes}
    patch = [{"op": "add", "path": f"{prefix}/plan/-", "value": {"id": new_id, "skill": skill, "object": obj}}]
    if graph.edge_list:
        patch += [_edge_added(graph, new_id, event, target) for event, target in edges.items()]
    else:
        patch.append({"op": "add", "path": f"{prefix}/transitions/{escape(new_id)}", "value": edges})
    if len(path) < 2:
        return [*patch, {"op": "replace", "path": f"{prefix}/entry", "value": new_id}]
    source = path[-2]
    event = next((event for event, target in graph.transitions.get(source, {}).items() if target == before), None)
    if event is None:
        return None
    return [*patch, {"op": "replace", "path": _edge_target(graph, graph.edge_paths[(source, event)]), "value": new_id}]
