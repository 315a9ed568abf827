"""py_trees behaviours of compiled plans: op actions and composites, stop guards, the step router.

They know no graph format: what a dialect decides reaches them as constructor arguments.
"""
from .action import CapabilityAction, SkillAction
from .plan_hooks import PlanHooks, WatchedSource
from .sequence import OpSequence
from .step_router import StepRouter
from .stop_guard import StopGuard, place_stop_guard
from .wait_all import WaitAllParallel

__all__ = ["CapabilityAction", "OpSequence", "PlanHooks", "SkillAction", "StepRouter", "StopGuard",
           "WaitAllParallel", "WatchedSource", "place_stop_guard"]
