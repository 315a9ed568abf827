"""py_trees behaviours of compiled plans: actions, stop guards, composites."""
from .action import CapabilityAction, SkillAction
from .plan_hooks import PlanHooks
from .step_router import StepRouter
from .stop_guard import StopGuard, operator_summary
from .wait_all import WaitAllParallel

__all__ = ["CapabilityAction", "PlanHooks", "SkillAction", "StepRouter", "StopGuard", "WaitAllParallel",
           "operator_summary"]
