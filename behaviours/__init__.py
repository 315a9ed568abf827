"""py_trees behaviours of compiled plans: actions, stop guards, composites."""
from .action import CapabilityAction
from .plan_hooks import PlanHooks
from .stop_guard import StopGuard, operator_summary
from .wait_all import WaitAllParallel

__all__ = ["CapabilityAction", "PlanHooks", "StopGuard", "WaitAllParallel", "operator_summary"]
