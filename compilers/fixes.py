"""Repairs a planner can apply: for each issue whose fault has one clear remedy, a JSON Patch (RFC 6902) on
the submitted document (the issue's ``fix``); where several remedies are as likely, each as a patch
(``alternatives``) and no fix.

Fixes are worked out only once an input is refused, never for a valid one. They are found in report order,
and each is judged against the document as the fixes before it left it, so the fixes of one report never
repeat or conflict: applied in order (``compilers.apply_fixes``) they give the repaired document. An issue
whose place an earlier fix already changed (two issues of one fault: a misspelt ``descripton`` is both an
unknown field and a missing description) gets no fix of its own but ``fixed_by``, the index of that earlier
issue.

This module is the part every dialect shares: the order, the bounds, the nearest-name search and the fixers of
faults any document may have, each reading what the check that found the fault said of it (the issue's
``allowed``, ``expected``, ``missing``, ``unknown``), never its message. What a dialect repairs beyond them it
offers as its ``Dialect.fixes`` (a ``DialectFixes``): RTDL's in ``rtdl.fixes``, Qwen3's in ``qwen3_fixes``.

Paths are JSON pointers into the document as the dialect's ``fixable`` gives it: the document itself, the
extracted JSON of a reply with text around it, and for a Qwen3 submit envelope whose ``response`` is JSON
text, that envelope with the response read as the graph object it holds (which the envelope also takes).
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import jsonpatch
import jsonpointer
from jsonpointer import escape, unescape

from bt_exec.errors import MAX_ISSUES, Issue

from .ir import Plan

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

_ARENA_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\]|\.[A-Za-z_][A-Za-z0-9_]*)*")
_ARENA_STEP = re.compile(r"\[(\d+)\]|\.?([A-Za-z_][A-Za-z0-9_]*)")
ABSENT = object()  # what ``value_at`` finds where a pointer leads nowhere


class Several(list):
    """Patches as likely as each other."""


# A fixer of a document that did not load: (the document as the fixes before left it, the issue's JSON pointer,
# the issue, the report's NameSearch) -> one patch, Several, or None.
DocumentFixer = Callable[[object, str, Issue, "NameSearch"], "list | Several | None"]
# A fixer of a loaded plan its checks refused: (the PlanFacts, the issue's JSON pointer, the issue) -> the same.
PlanFixer = Callable[["PlanFacts", str, Issue], "list | Several | None"]


def fault_at(issue: Issue, pointer: str | None) -> str | None:
    """Where the fault of an issue at ``pointer`` is, for an earlier fix to have repaired it: there, or for a
    ``required`` issue the missing field (``missing``) itself."""
    if pointer is None or issue.code != "required" or issue.missing is None:
        return pointer
    return pointer if pointer.rsplit("/", 1)[-1] == issue.missing else f"{pointer}/{escape(issue.missing)}"


def _as_it_is(doc: object) -> object:
    return doc


def patched(doc: object, issues) -> object:
    """A copy of ``doc`` with the ``fix`` of every issue (dicts or Issues) applied in order; ``doc`` is the
    document they point into (``compilers.fixable``). Raises jsonpatch's errors if the fixes are not its."""
    repaired = copy.deepcopy(doc)
    for issue in issues:
        fix = issue.get("fix") if isinstance(issue, dict) else issue.fix
        if fix:
            repaired = jsonpatch.apply_patch(repaired, fix, in_place=True)
    return repaired


@dataclass(frozen=True)
class DialectFixes:
    """What one dialect repairs, offered as its ``Dialect.fixes``: fixers by issue code for a document that did
    not load (``document``, the shared ``DOCUMENT_FIXERS`` among them) and for a loaded plan its checks refused
    (``plan``); ``fault_place(issue, pointer)``, where the fault of an issue lies (``fault_at`` unless the
    dialect's issues say otherwise; None: nowhere a fix could have reached); ``fixable(doc)``, the document
    its fixes point into; ``patch(doc, issues)``, a copy of that document with the issues' fixes applied (JSON
    Patch on JSON documents); ``text(doc)``, the text of a document that is not JSON (None: JSON)."""

    document: Mapping[str, DocumentFixer]
    plan: Mapping[str, PlanFixer] = field(default_factory=dict)
    fault_place: Callable[[Issue, str | None], str | None] = fault_at
    fixable: Callable[[object], object] = _as_it_is
    patch: Callable[[object, list], object] = patched
    text: Callable[[object], str] | None = None


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
        self.out.append(dataclasses.replace(issue, fix=fix or None, alternatives=alternatives or None,
                                            fixed_by=fixed_by, lossy=bool(fix) and drops_data(fix))
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


def issues_uncovered(doc: object, issues: list[Issue], check_again: Callable[[object], list[Issue]],
                     patch: Callable[[object, list], object] = patched) -> list[Issue]:
    """``issues``, followed by those the document repaired by their fixes still has (``after_fixes``), round
    after round while new ones carry fixes: a fix can uncover what a check could not reach (a misspelt cap
    behind a malformed node). Applied in order, every fix of the list gives the repaired document. ``doc``: the
    document the fixes point into (``compilers.fixable``); ``check_again(document)``: the issues of a document,
    with their fixes; empty when it is valid; ``patch``: how the document's dialect applies fixes."""
    if not any(issue.fix for issue in issues) or any(issue.code == "too_many_issues" for issue in issues):
        return issues
    seen = {_issue_key(issue) for issue in issues}
    listed, latest = list(issues), issues
    for _round in range(FIX_ROUNDS):
        try:
            doc = patch(doc, latest)
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

def document_fixes(doc: object, issues: list[Issue], fixes: DialectFixes) -> list[Issue]:
    """``issues`` of a document that did not load, each with its fix where there is one (``fixes``: those of the
    dialect that read it)."""
    repairs = _Repairs()
    working = None
    for issue in issues:
        fixer = fixes.document.get(issue.code)
        if fixer is None or issue.fix is not None:
            repairs.give(issue, issue.fix, issue.alternatives, issue.fixed_by)
            continue
        pointer = pointer_of(issue.path)
        earlier = repairs.fixed_by(fixes.fault_place(issue, pointer))
        if earlier is not None:
            repairs.give(issue, fixed_by=earlier)
            continue
        if working is None:
            working = _Working(fixes.fixable(doc))
        found = fixer(working.doc, pointer, issue, repairs.names) if pointer is not None else None
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


def _one_or_several(found) -> tuple[list | None, list | None]:
    """(fix, alternatives) from what a fixer found: one patch, a list of patches, or None."""
    if not found:
        return None, None
    if isinstance(found, Several):
        return (found[0], None) if len(found) == 1 else (None, list(found))
    return found, None


def value_at(doc: object, pointer: str) -> object:
    """The value ``pointer`` leads to in ``doc``, or ABSENT."""
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
            return ABSENT
    return value


def parent_of(pointer: str) -> tuple[str, str]:
    """The pointer to the container above ``pointer``, and the key (unescaped) it names there."""
    head, _, last = pointer.rpartition("/")
    return head, unescape(last)


def replaced_by(pointer: str, names: list) -> Several | None:
    """Replacements of the value at ``pointer`` by each of ``names``, as likely as each other; None for none."""
    return Several([[{"op": "replace", "path": pointer, "value": name}] for name in names]) if names else None


def renamed_to(pointer: str, names) -> Several | None:
    """Moves of the field at ``pointer`` to each known name it is nearest to."""
    head, key = parent_of(pointer)
    return Several([{"op": "move", "from": pointer, "path": f"{head}/{escape(name)}"}]
                   for name in names) if names else None


def converted(value: object, expected: str) -> object:
    """``value`` as the ``expected`` type (an issue's ``expected``), where the conversion is plain; ABSENT where
    it is not."""
    if expected == "object":
        parsed = _parsed(value)
        return parsed if isinstance(parsed, dict) else ABSENT
    if expected == "array":
        if isinstance(value, dict):
            return [value]
        parsed = _parsed(value)
        return parsed if isinstance(parsed, list) else ABSENT
    if expected == "string":
        if isinstance(value, bool) or value is None:
            return ABSENT
        return str(value) if isinstance(value, (int, float)) else ABSENT
    if expected == "JSON text":  # args_json written as the object itself
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False) if isinstance(value, dict) else ABSENT
    # an integer (or a non-negative one, a node index): its decimal text, or a float with no fraction
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return ABSENT


def _parsed(value: object) -> object:
    if not isinstance(value, str):
        return ABSENT
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return ABSENT


def holds_field(doc: object, pointer: str) -> bool:
    """Whether the object above ``pointer`` holds the key it names."""
    head, key = parent_of(pointer)
    container = value_at(doc, head)
    return isinstance(container, dict) and key in container


# --- the fixers of faults any document may have ----------------------------------------------------------------

def fix_unknown_field(doc, pointer: str, issue: Issue, names: NameSearch):
    """A field its object does not take: moved to the free name of those ``allowed`` it is nearest to, else
    removed."""
    if issue.allowed is None or not holds_field(doc, pointer):
        return None
    head, key = parent_of(pointer)
    container = value_at(doc, head)
    free = [name for name in issue.allowed if name not in container]
    return renamed_to(pointer, names.nearest(key, free)) or [{"op": "remove", "path": pointer}]


def required_fixer(placeholders: Callable[[object, str, dict, str], list]) -> DocumentFixer:
    """The fixer of a dialect's ``required`` issues: the ``missing`` field added with the value
    ``placeholders(document, object pointer, object, field)`` gives, or, when it gives several (most likely
    first), each as an alternative; none when it gives none."""
    def fix_required(doc, pointer: str, issue: Issue, names: NameSearch):
        missing = issue.missing
        if missing is None:
            return None
        container_pointer = pointer if pointer.rsplit("/", 1)[-1] != missing else parent_of(pointer)[0]
        node = value_at(doc, container_pointer)
        if not isinstance(node, dict) or missing in node:
            return None
        path = f"{container_pointer}/{escape(missing)}"
        values = placeholders(doc, container_pointer, node, missing)
        if not values:
            return None
        return Several([[{"op": "add", "path": path, "value": value}] for value in values])
    return fix_required


def fix_type(doc, pointer: str, issue: Issue, names: NameSearch):
    """A value of the wrong JSON type: the value as the ``expected`` type, where the conversion is plain (JSON
    text of an object, a number as text, an object wrapped in an array ...)."""
    value = value_at(doc, pointer)
    if value is ABSENT or issue.expected is None:
        return None
    wanted = converted(value, issue.expected)
    if wanted is ABSENT:
        return None
    return [{"op": "replace", "path": pointer, "value": wanted}]


def fix_not_allowed(doc, pointer: str, issue: Issue, names: NameSearch):
    """A name or value outside a fixed set: the ones of those ``allowed`` it is nearest to."""
    if issue.allowed is None:
        return None
    return replaced_by(pointer, names.nearest(value_at(doc, pointer), issue.allowed))


def fix_bad_value(doc, pointer: str, issue: Issue, names: NameSearch):
    """A bad value: the nearest of those ``allowed``, or the value as the ``expected`` type."""
    value = value_at(doc, pointer)
    if value is ABSENT:
        return None
    if issue.allowed is not None:
        return fix_not_allowed(doc, pointer, issue, names)
    if issue.expected is not None:
        return fix_type(doc, pointer, issue, names)
    return None


def fix_empty_description(doc, pointer: str, issue: Issue, names: NameSearch):
    """A description left empty: the placeholder (a person or the planner writes the words)."""
    if value_at(doc, pointer) is ABSENT:
        return None
    return [{"op": "replace", "path": pointer, "value": PLACEHOLDER_DESCRIPTION}]


# The fixers every dialect's documents share; a dialect adds its own (``required`` among them: what a missing
# field is given is the dialect's) and may take the place of these.
DOCUMENT_FIXERS: Mapping[str, DocumentFixer] = {
    "unknown_field": fix_unknown_field,
    "type": fix_type,
    "bad_op": fix_not_allowed,
    "bad_value": fix_bad_value,
    "empty_description": fix_empty_description,
}


# --- loaded plans that were refused -----------------------------------------------------------------------

def plan_fixes(plan: Plan, issues: list[Issue], context, fixes: DialectFixes) -> list[Issue]:
    """``issues`` of a loaded plan refused by its checks (``context``: the CheckContext it was checked
    against; ``fixes``: its dialect's), each with its fix where there is one."""
    repairs = _Repairs()
    facts = PlanFacts(plan, {op.path: op for op in plan.ops.values()}, issues, context, repairs.names)
    for issue in issues:
        pointer = pointer_of(issue.path)
        earlier = repairs.fixed_by(fixes.fault_place(issue, pointer))
        if earlier is not None:
            repairs.give(issue, fixed_by=earlier)
            continue
        if issue.fix is not None:  # found by the check that made the issue
            fix, alternatives = issue.fix, None
        else:
            fixer = fixes.plan.get(issue.code)
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


@dataclass(frozen=True)
class PlanFacts:
    """What the fixes of a loaded plan are worked out from: the plan, its ops by where they are in the
    input, the report's issues, the CheckContext it was checked against and the report's NameSearch."""

    plan: Plan
    ops_by_path: dict
    issues: list
    context: object
    names: NameSearch

    def op_at(self, issue: Issue, fields: tuple[str, ...]):
        """The op an issue about one of its ``fields`` (path suffixes: ``/cap``, ``.call.contract_id`` ...) is
        about, or None."""
        for suffix in fields:
            if issue.path.endswith(suffix):
                return self.ops_by_path.get(issue.path[:-len(suffix)])
        return None
