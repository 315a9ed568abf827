"""bt_exec: validate LLM plan graphs, compile them to py_trees with stop-point guards, run and control them.

The public API (stable; tools depend on these names)::

    plan = bt_exec.load(source, dialect="auto")
    report = bt_exec.validate(plan, catalog=None)
    compiled = bt_exec.compile_plan(plan)
    ex = bt_exec.Executor(backend=bt_exec.SimBackend(script=None))
    ex.submit(source, run_id=None, dialect="auto")
"""
from importlib.metadata import PackageNotFoundError, version

from .backends import Backend, CallStatus, CapabilityCall
from .compilers import (CapabilityCatalog, CompiledPlan, ControlRequest, Limits, Plan, Report, Scene, SkillCatalog,
                        compile_plan, load, validate)
from .errors import BtExecError, ConfigError, ControlError, Issue, PlanError
from .executor import Executor
from .events import JsonlJournal
from .sim import SimBackend

try:
    __version__ = version("bt_exec")  # the version lives in package.xml, read by setup.py
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "Backend", "BtExecError", "CallStatus", "CapabilityCall", "CapabilityCatalog", "CompiledPlan", "ConfigError",
    "ControlError", "ControlRequest", "Executor", "Issue", "JsonlJournal", "Limits", "Plan", "PlanError", "Report",
    "Scene", "SimBackend", "SkillCatalog", "compile_plan", "load", "validate",
]
