"""bt_exec: validate LLM plan graphs, compile them to py_trees, run and control them.

The public API (stable; tools depend on these names)::

    plan = bt_exec.load(source, dialect="auto")
    report = bt_exec.validate(plan, catalog=None)
    compiled = bt_exec.compile_plan(plan)
    ex = bt_exec.Executor(backend=bt_exec.SimBackend(script=None))
    ex.submit(source, run_id=None, dialect="auto")
    cell = bt_exec.PhysicsCell(poses=None, scene=None, speed="max")   # the Grant cell in MuJoCo (extra physics)
    ex = bt_exec.Executor(backend=cell)                                # the executor takes the cell's scene

The names are handed out on first use, so importing ``bt_exec.compilers`` or
``bt_exec.errors`` (which runs this file first) loads no executor and no sim.
"""
from importlib import import_module

from .version import VERSION

__version__ = VERSION

# public name -> the module that defines it
_PUBLIC = {
    "Backend": ".backends", "CallStatus": ".backends", "CapabilityCall": ".backends",
    "CapabilityCatalog": ".compilers", "CompiledPlan": ".compilers", "ControlRequest": ".compilers",
    "Limits": ".compilers", "Plan": ".compilers", "Report": ".compilers", "Scene": ".compilers",
    "SkillCatalog": ".compilers", "compile_plan": ".compilers", "load": ".compilers", "validate": ".compilers",
    "BtExecError": ".errors", "ConfigError": ".errors", "ControlError": ".errors", "Issue": ".errors",
    "PlanError": ".errors",
    "Executor": ".executor",
    "JsonlJournal": ".events",
    "PhysicsCell": ".motion.physics",
    "SimBackend": ".sim",
    "dry_run": ".dry_runs",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(module, __name__), name)
    globals()[name] = value  # later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
