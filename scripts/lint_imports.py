#!/usr/bin/env python3
"""Check the import contracts of .importlinter against bt_exec laid out as it installs.

compilers/ and behaviours/ sit at the top of the repository and install as
bt_exec.compilers and bt_exec.behaviours (setup.py ``package_dir``). In this
checkout links put them in bt_exec/ as well, so a plain ``lint-imports`` works
here; this script checks what setuptools' own ``build_py`` lays out (in a
temporary folder), and can check another checkout, where the installed
bt_exec would otherwise be the one import-linter finds.

    python scripts/lint_imports.py               # the report; exit 1 when a contract is broken
    python scripts/lint_imports.py --json        # {contract id: {name, kept, chains}} for programs
    python scripts/lint_imports.py --repo DIR    # another checkout (the tests plant imports in one)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from importlinter import configuration
from importlinter.application.ports.reporting import Report
from importlinter.application.rendering import render_report
from importlinter.application.use_cases import create_report, read_user_options
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import registry

PACKAGE = "bt_exec"
CONFIG = ".importlinter"

# What import-linter's command line sets up before it reads a configuration (the types .importlinter uses).
configuration.configure()
registry.register(ForbiddenContract, "forbidden")
registry.register(LayersContract, "layers")


class LayoutError(Exception):
    """The installed layout could not be built, or the package it would check is not the one laid out."""


def lay_out(repo: Path, into: Path) -> None:
    """The packages of ``repo`` in ``into`` as ``pip install`` places them (python files and package data)."""
    built = subprocess.run([sys.executable, "setup.py", "--quiet", "build_py", "--build-lib", str(into)],
                           cwd=repo, capture_output=True, text=True)
    if built.returncode != 0:
        raise LayoutError(f"setup.py build_py failed in {repo}:\n{built.stdout}{built.stderr}")
    sys.path.insert(0, str(into))
    # The graph builder finds the package as an import would: it must be this copy (not an installed or an
    # already imported bt_exec), or the contracts would be checked against another tree.
    found = importlib.util.find_spec(PACKAGE)
    if found is None or not found.origin or not Path(found.origin).resolve().is_relative_to(into.resolve()):
        raise LayoutError(f"{PACKAGE} resolves to {found and found.origin}, not to the layout in {into}")


def check(repo: Path) -> Report:
    with tempfile.TemporaryDirectory(prefix="bt_exec-layout-") as layout:
        lay_out(repo, Path(layout))
        return create_report(read_user_options(str(repo / CONFIG)), cache_dir=None)


def as_json(report) -> dict:
    """Each contract: whether it is kept and, when broken, every forbidden chain as ``[[importer, imported,
    [line, ...]], ...]`` (the first link is the import that breaks the rule): a forbidden contract's chains, or a
    layers contract's routes from a lower layer up to a higher one."""
    answer = {}
    for contract, contract_check in report.get_contracts_and_checks():
        metadata = contract_check.metadata
        found = [chain for pair in metadata.get("invalid_chains", ()) for chain in pair["chains"]]
        found += [route["chain"] for pair in metadata.get("invalid_dependencies", ()) for route in pair["routes"]]
        chains = [[[link["importer"], link["imported"], list(link["line_numbers"])] for link in chain]
                  for chain in found]
        answer[contract.contract_options.get("id") or contract.name] = {
            "name": contract.name, "kept": contract_check.kept, "chains": chains}
    return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the checkout to check (default: this one)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args(argv)
    try:
        report = check(options.repo.resolve())
    except LayoutError as exc:
        print(f"lint_imports: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # import-linter refuses with plain exceptions (a module that does not exist, a bad option)
        hint = " (a package missing from the layout is missing from setup.py's packages)" if "exist" in str(exc) else ""
        print(f"lint_imports: import-linter could not check the contracts: {exc}{hint}", file=sys.stderr)
        return 2
    if report.could_not_run:
        render_report(report)
        return 2
    if options.json:
        print(json.dumps(as_json(report), indent=1))
    else:
        render_report(report)
    return 1 if report.contains_failures else 0


if __name__ == "__main__":
    sys.exit(main())
