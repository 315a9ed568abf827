"""The linter: ``ruff check`` with the rules of ruff.toml finds nothing in the repository, so CI gates on it."""
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent

def ruff(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """``python -m ruff ARGS`` from the repository's root (its ruff.toml), writing no cache."""
    ran = subprocess.run([sys.executable, "-m", "ruff", *args, "--no-cache"], input=stdin, capture_output=True,
                         text=True, timeout=120, cwd=REPO)
    assert "No module named ruff" not in ran.stderr, "ruff is not installed: pip install -e '.[test]'"
    return ran


def test_ruff_finds_nothing():
    ran = ruff("check", "--output-format=concise", ".")
    assert ran.returncode == 0, f"ruff check found (fix them, or see `python -m ruff check --fix`):\n{ran.stdout}" \
                                f"{ran.stderr}"


def test_the_rules_catch_what_they_are_for():
    """The repository's ruff.toml is the one read, and its rules are on: an unused import (F), a line past 120
    characters (E), a mutable default argument (B)."""
    planted = "import os\n\n\ndef f(x=[]):\n    return " + "1 + " * 30 + "1\n"
    ran = ruff("check", "--output-format=concise", "--stdin-filename=planted.py", "-", stdin=planted)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    found = {line.split()[1] for line in ran.stdout.splitlines() if line.startswith("planted.py:")}
    assert {"F401", "E501", "B006"} <= found, ran.stdout

