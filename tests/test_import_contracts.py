"""The architecture rules of .importlinter: kept by the code, and each one live (a planted import breaks it)."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LINT = REPO / "scripts" / "lint_imports.py"
# What a copy of the tree leaves out: git, builds, caches, the ROS environment (none of it is code that installs).
NOT_COPIED = shutil.ignore_patterns(".git", ".venv*", "build", "install", "log", "*.egg-info", "__pycache__",
                                   ".pytest_cache", ".hypothesis", "test-artifacts")

# contract id -> (file, an import that contract forbids there), or a tuple of such: each is planted, each must break
# the contract
PLANTS = {
    "core": (("bt_exec/backends.py", "import rclpy"), ("bt_exec/backends.py", "import grpc"),
             ("bt_exec/backends.py", "from google.protobuf import message"),
             ("bt_exec/backends.py", "from bt_exec.robonix import stubs")),
    "compilers": ("compilers/tree.py", "from bt_exec.runtime.builtins import BuiltinBackend"),
    "behaviours": ("behaviours/wait_all.py", "from bt_exec.compilers import ir"),
    "web": ("bt_exec/web/client.py", "from bt_exec.ros import node"),
    "facade": ("bt_exec/__init__.py", "from bt_exec.executor import Executor"),
    "control": ("bt_exec/control.py", "import argparse"),
    "web_stack": ("bt_exec/motion/backend.py", "import uvicorn"),
    "doors": (("bt_exec/terminal/render.py", "from bt_exec.runtime import budgets"),
              ("bt_exec/robonix/stubs.py", "import bt_exec.compilers.rtdl"),
              ("bt_exec/groot2/status.py", "from bt_exec.runtime import budgets"),
              ("bt_exec/cli/inputs.py", "from bt_exec.compilers.btcpp import load")),
    "zmq": (("bt_exec/runtime/runner.py", "import zmq"), ("bt_exec/control.py", "import zmq"),
            ("compilers/tree.py", "from bt_exec.groot2 import protocol")),
    "dialect_free_runtime": (("bt_exec/runtime/runner.py", "import bt_exec.compilers.rtdl"),
                             ("bt_exec/executor.py", "from bt_exec.compilers.btcpp import checks")),
    "layers": ("bt_exec/events/bus.py", "from bt_exec.runtime import budgets"),
    "compat": ("bt_exec/compat/uvicorn.py", "from bt_exec import control"),
    "physics": (("bt_exec/motion/skills.py", "import mujoco"), ("bt_exec/cli/plan_commands.py", "import ruckig"),
                ("bt_exec/executor.py", "from mink import solve_ik")),
}


def check_contracts(repo: Path) -> dict:
    """contract id -> {name, kept, chains}, from scripts/lint_imports.py run on ``repo``'s installed layout."""
    ran = subprocess.run([sys.executable, str(LINT), "--json", "--repo", str(repo)],
                         capture_output=True, text=True, timeout=300)
    assert ran.returncode in (0, 1), f"the contracts could not be checked:\n{ran.stderr}"
    return json.loads(ran.stdout)


def chains_of(result: dict) -> dict[str, set]:
    return {contract: {tuple((importer, imported, tuple(lines)) for importer, imported, lines in chain)
                       for chain in outcome["chains"]}
            for contract, outcome in result.items()}


def module_of(path: str) -> str:
    """The installed module name of a file of the tree (compilers/ir.py -> bt_exec.compilers.ir)."""
    parts = Path(path).with_suffix("").parts
    parts = parts[1:] if parts[0] == "bt_exec" else parts
    return ".".join(("bt_exec",) + tuple(part for part in parts if part != "__init__"))


@pytest.fixture(scope="module")
def contracts_now():
    return check_contracts(REPO)


def describe(chain: list) -> str:
    """importer -> imported (l.N) -> ..., as import-linter shows a chain."""
    return " -> ".join([chain[0][0]] + [f"{imported} (l.{','.join(map(str, lines))})" for _, imported, lines in chain])


def test_every_contract_is_kept(contracts_now):
    broken = [f"{outcome['name']}:\n" + "\n".join("    " + describe(chain) for chain in outcome["chains"])
              for outcome in contracts_now.values() if not outcome["kept"]]
    assert not broken, "imports that break the architecture rules (.importlinter):\n" + "\n".join(broken)


def test_every_contract_has_a_planted_violation(contracts_now):
    assert set(contracts_now) == set(PLANTS)


def plants_of(contract: str) -> tuple:
    """The (file, import) pairs planted to break ``contract``."""
    plants = PLANTS[contract]
    return plants if isinstance(plants[0], tuple) else (plants,)


@pytest.mark.parametrize("contract", sorted(PLANTS))
def test_a_planted_import_breaks_exactly_its_contract(contract, contracts_now, tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(REPO, tree, ignore=NOT_COPIED)
    planted_at = []
    for path, line in plants_of(contract):
        planted = tree / path
        source = planted.read_text()
        planted_at.append((module_of(path), source.count("\n") + 1 + (not source.endswith("\n")), line))
        planted.write_text(source + ("" if source.endswith("\n") else "\n") + line + "\n")

    after = check_contracts(tree)
    before, now = chains_of(contracts_now), chains_of(after)
    new = {name: now[name] - before[name] for name in now if now[name] - before[name]}
    assert set(new) == {contract} and not after[contract]["kept"], new
    for module, line_number, line in planted_at:
        assert any(chain[0][0] == module and line_number in chain[0][2] for chain in new[contract]), line


@pytest.mark.parametrize("module", ["bt_exec", "bt_exec.errors", "bt_exec.compilers"])
def test_importing_the_package_or_the_compilers_loads_no_executor_and_no_sim(module, tmp_path):
    # One fresh interpreter (outside the repository, so it gets the installed package): what does the import load,
    # and does the check see it when the executor is asked for?
    probe = (f"import json, sys, {module}, bt_exec\n"
             "loaded = lambda: sorted(m for m in sys.modules if m.startswith('bt_exec.'))\n"
             "first = loaded()\n"
             "bt_exec.Executor\n"
             "print(json.dumps([first, loaded()]))\n")
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    first, after_asking = json.loads(ran.stdout)
    runtime = {"bt_exec.executor", "bt_exec.runtime", "bt_exec.runtime.plan_run", "bt_exec.sim"}
    assert not runtime & set(first), f"import {module} loaded {sorted(runtime & set(first))}"
    assert runtime <= set(after_asking)


# What a door brings: a web server and its stack, the MCP package, ROS.
DOOR_STACKS = ("uvicorn", "starlette", "sse_starlette", "anyio", "mcp", "rclpy")


@pytest.mark.parametrize("probe", [
    "import bt_exec.control",
    "import bt_exec.web, bt_exec.web.client, bt_exec.web.mcp_server, bt_exec.web.fleet_api, bt_exec.web.replay_api",
    "from bt_exec.cli import main; assert main(['validate', sys.argv[1]]) == 0",
], ids=["control", "web package without its server", "bt-exec validate"])
def test_the_control_surface_and_validate_load_no_web_server_and_no_ros(probe, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"rtdl": {"op": "do", "description": "look", "cap": "camera.capture", "args": {}}}))
    code = (f"import json, sys\n{probe}\n"
            f"print(json.dumps(sorted(m for m in {DOOR_STACKS!r} if m in sys.modules)))\n")
    ran = subprocess.run([sys.executable, "-c", code, str(plan)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout.splitlines()[-1]) == []


def test_the_package_still_hands_out_every_public_name():
    import bt_exec

    public = {"Backend", "BtExecError", "CallStatus", "CapabilityCall", "CapabilityCatalog", "CompiledPlan",
              "ConfigError", "ControlError", "ControlRequest", "Executor", "Issue", "JsonlJournal", "Limits",
              "PhysicsCell", "Plan", "PlanError", "Report", "Scene", "SimBackend", "SkillCatalog", "compile_plan",
              "dry_run", "load", "validate"}
    assert set(bt_exec.__all__) == public and public <= set(dir(bt_exec))
    assert all(getattr(bt_exec, name).__name__ == name for name in public)
    assert bt_exec.__version__
    with pytest.raises(AttributeError, match="no attribute 'Execut0r'"):
        _ = bt_exec.Execut0r
