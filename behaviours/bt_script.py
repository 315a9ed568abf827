"""A subset of BehaviorTree.CPP 4's script language, read once and run on a plan's blackboard.

Statements are separated by ``;``. ``key := value`` and ``key = value`` set a blackboard entry; any other
statement is an expression, the last one's value being a condition's verdict. Values: 'text' (or "text"),
numbers, true and false, blackboard keys, the comparisons ``== != < <= > >=``, ``!``, ``&&`` (before ``||``)
and parentheses. Reading a key the blackboard does not hold is an error (a ScriptCondition fails).
"""
from __future__ import annotations

import math
import re

_TOKEN = re.compile(r"""\s*(?:(?P<number>-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)|(?P<text>'[^']*'|"[^"]*")|"""
                    r"""(?P<name>[A-Za-z_][A-Za-z0-9_.]*)|(?P<op>:=|==|!=|<=|>=|&&|\|\||[<>=!();]))""")
_COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")
MAX_SCRIPT_CHARS = 4096
MAX_NESTING = 32  # parentheses and '!' within one another: what a script may nest (its reading recurses)


class ScriptError(ValueError):
    """A script that cannot be read, or a statement that cannot run; the message says where and why."""


def _tokens(code: str) -> list[tuple[str, object]]:
    if len(code) > MAX_SCRIPT_CHARS:
        raise ScriptError(f"the script is longer than {MAX_SCRIPT_CHARS} characters")
    tokens, position = [], 0
    code = code.rstrip()
    while position < len(code):
        match = _TOKEN.match(code, position)
        if match is None:
            raise ScriptError(f"cannot read the script at character {position + 1}: {code[position:position + 20]!r}")
        position = match.end()
        if match["number"] is not None:
            text = match["number"]
            tokens.append(("value", float(text) if any(c in text for c in ".eE") else int(text)))
        elif match["text"] is not None:
            tokens.append(("value", match["text"][1:-1]))
        elif match["name"] in ("true", "false"):
            tokens.append(("value", match["name"] == "true"))
        elif match["name"] is not None:
            tokens.append(("key", match["name"]))
        else:
            tokens.append(("op", match["op"]))
    return tokens


class Script:
    """A script read once (``Script(code)`` raises ScriptError when it cannot be read) and run as often as asked."""

    def __init__(self, code: str):
        self.code = code
        self._tokens = _tokens(code)
        self._at = 0
        self._depth = 0
        self.statements = []
        while self._at < len(self._tokens):
            if self._peek() == ("op", ";"):
                self._at += 1
                continue
            self.statements.append(self._statement())
            if self._at < len(self._tokens) and self._peek() != ("op", ";"):
                raise ScriptError(f"expected ';' or the end of the script after a statement, got {self._shown()}")
        self._tokens = None  # read: only the statements are kept

    def run(self, blackboard: dict) -> object:
        """Run every statement on ``blackboard``; the last statement's value (None when it set a key)."""
        value = None
        for statement in self.statements:
            if statement[0] == "set":
                blackboard[statement[1]] = _evaluate(statement[2], blackboard)
                value = None
            else:
                value = _evaluate(statement, blackboard)
        return value

    # --- reading ----------------------------------------------------------------------

    def _peek(self):
        return self._tokens[self._at] if self._at < len(self._tokens) else ("end", None)

    def _shown(self) -> str:
        kind, value = self._peek()
        return "the end of the script" if kind == "end" else repr(value)

    def _next(self):
        token = self._peek()
        self._at += 1
        return token

    def _statement(self):
        tokens = self._tokens
        if self._peek()[0] == "key" and self._at + 1 < len(tokens) and tokens[self._at + 1] in (("op", ":="),
                                                                                               ("op", "=")):
            key = self._next()[1]
            self._at += 1
            return ("set", key, self._or())
        return self._or()

    def _or(self):
        terms = [self._and()]
        while self._peek() == ("op", "||"):
            self._at += 1
            terms.append(self._and())
        return terms[0] if len(terms) == 1 else ("||", terms)

    def _and(self):
        terms = [self._comparison()]
        while self._peek() == ("op", "&&"):
            self._at += 1
            terms.append(self._comparison())
        return terms[0] if len(terms) == 1 else ("&&", terms)

    def _comparison(self):
        node = self._operand()
        kind, op = self._peek()
        if kind == "op" and op in _COMPARISONS:
            self._at += 1
            node = (op, node, self._operand())
        return node

    def _operand(self):
        kind, value = self._next()
        if kind == "value":
            return ("value", value)
        if kind == "key":
            return ("key", value)
        if (kind, value) in (("op", "!"), ("op", "(")):
            self._depth += 1
            if self._depth > MAX_NESTING:
                raise ScriptError(f"the script nests '(' and '!' more than {MAX_NESTING} deep")
            if value == "!":
                node = ("!", self._operand())
            else:
                node = self._or()
                if self._next() != ("op", ")"):
                    raise ScriptError("a '(' is not closed")
            self._depth -= 1
            return node
        self._at -= 1
        raise ScriptError(f"expected a value, a key or '(', got {self._shown()}")


def _evaluate(node: tuple, blackboard: dict) -> object:
    kind = node[0]
    if kind == "value":
        return node[1]
    if kind == "key":
        if node[1] not in blackboard:
            raise ScriptError(f"blackboard key {node[1]!r} is not set")
        return blackboard[node[1]]
    if kind == "!":
        return not truth(_evaluate(node[1], blackboard))
    if kind == "&&":
        return all(truth(_evaluate(term, blackboard)) for term in node[1])
    if kind == "||":
        return any(truth(_evaluate(term, blackboard)) for term in node[1])
    return _compare(kind, _evaluate(node[1], blackboard), _evaluate(node[2], blackboard))


def _number(value: object) -> float | None:
    if type(value) in (int, float):
        return value
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _compare(op: str, left: object, right: object) -> bool:
    if isinstance(left, str) and isinstance(right, str):  # text with text: as text (BT.CPP compares strings so)
        a, b = left, right
    else:
        a, b = _number(left), _number(right)
        if a is None or b is None:
            if op in ("==", "!="):
                return (left == right) == (op == "==")
            raise ScriptError(f"cannot compare {left!r:.40} {op} {right!r:.40}")
    return {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def truth(value: object) -> bool:
    """A value as a condition reads it: false, 0, empty text, "false" and "0" are false."""
    if isinstance(value, str):
        return value not in ("", "false", "0")
    return bool(value)
