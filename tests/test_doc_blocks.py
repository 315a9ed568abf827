"""The console blocks of README.md and docs/*.md, run: what the docs show is what the tool prints.

A ```console block is a shell session: each ``$ COMMAND`` line runs (in bash, from a scratch folder
where ``examples/`` and ``scripts/`` are the repository's), and the lines after it, up to the next ``$`` line, are its
output, stdout and stderr together. Volatile parts are marked in the docs themselves:

- a line that is only ``...`` stands for any number of lines (none included);
- ``<...>`` inside a line stands for any text on that line (a duration, a path, a time).

A block that needs what a plain test run does not have (a ROS graph, a served app) says so on the
line before it: ``<!-- not run: the reason -->``. Every file under ``examples/`` that a doc names must
exist.
"""
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```console\n(?P<body>.*?)```", re.S)
NOT_RUN = re.compile(r"<!-- not run: (?P<why>[^>]+) -->")
SEPARATOR = "@@doc-block-command-ended@@"
ANY_LINES = "..."
ANY_TEXT = "<...>"


def console_blocks():
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("body"))
            skipped = NOT_RUN.search(match["before"])
            yield pytest.param(doc, line, match["body"], id=f"{doc.relative_to(ROOT)}:{line}",
                               marks=[pytest.mark.skip(reason=skipped["why"])] if skipped else [])


def sessions(body: str) -> list[tuple[str, list[str]]]:
    """(command, expected output lines) in the order the block shows them."""
    shown: list[tuple[str, list[str]]] = []
    for line in body.rstrip("\n").split("\n"):
        if line.startswith("$ "):
            shown.append((line[2:], []))
        elif shown:
            shown[-1][1].append(line)
        else:
            raise AssertionError(f"a console block starts with output, not a '$ ' command: {line!r}")
    return shown


def matches(expected: list[str], actual: list[str]) -> bool:
    """Whether ``actual`` is ``expected`` with its ``...`` lines and ``<...>`` parts filled in."""
    if not expected:
        return not actual
    first, rest = expected[0], expected[1:]
    if first == ANY_LINES:
        return any(matches(rest, actual[skip:]) for skip in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(map(re.escape, first.split(ANY_TEXT)))
    return re.fullmatch(pattern, actual[0].rstrip()) is not None and matches(rest, actual[1:])


def run_session(commands: list[str], cwd: pathlib.Path) -> list[list[str]]:
    """Each command's output lines, the commands run one after another in one bash."""
    bin_dir = cwd / ".bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "bt-exec").write_text(f"#!/bin/sh\nexec {sys.executable} -m bt_exec.cli \"$@\"\n")
    (bin_dir / "bt-exec").chmod(0o755)
    script = ["exec 2>&1", f"export PATH={bin_dir}:$PATH COLUMNS=100"]
    for command in commands:
        script += [command, f"__rc=$?; echo {SEPARATOR}; (exit $__rc)"]
    done = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)
    outputs = done.stdout.split(SEPARATOR + "\n")
    return [output.rstrip("\n").split("\n") if output.strip() else [] for output in outputs[:len(commands)]]


@pytest.mark.parametrize("doc, line, body", list(console_blocks()))
def test_a_console_block_shows_what_its_commands_print(doc, line, body, tmp_path):
    for shared in ("examples", "scripts"):
        (tmp_path / shared).symlink_to(ROOT / shared)
    shown = sessions(body)
    printed = run_session([command for command, _ in shown], tmp_path)
    # a command that ended the shell leaves the ones after it unrun: each command must have said it ended
    assert len(printed) == len(shown), f"{doc.relative_to(ROOT)} line {line}: {len(printed)} of {len(shown)} ran"
    for (command, expected), actual in zip(shown, printed):
        assert matches(expected, actual), (
            f"{doc.relative_to(ROOT)} line {line}: `{command}` prints\n" + "\n".join(actual)
            + "\n--- but the doc shows ---\n" + "\n".join(expected))


def test_the_matching_rules_can_fail():
    assert matches(["a", "...", "z"], ["a", "b", "c", "z"]) and matches(["a", "..."], ["a"])
    assert matches(["took <...> s"], ["took 1.52 s"])
    assert not matches(["a", "z"], ["a", "b", "z"]) and not matches(["took <...> s"], ["took 1.52 ms"])
    assert not matches(["a"], []) and not matches([], ["a"])


def test_every_example_a_doc_names_is_shipped():
    named = {(doc.relative_to(ROOT), path) for doc in DOCS
             for path in re.findall(r"examples/[\w./-]*\w", doc.read_text(encoding="utf-8"))}
    missing = sorted(f"{doc}: {path}" for doc, path in named if not (ROOT / path).exists())
    assert not missing, "docs name examples that are not shipped:\n" + "\n".join(missing)
