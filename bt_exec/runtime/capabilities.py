"""Which backend serves a capability: the executor's builtins, or the robot's backend."""
from __future__ import annotations

from bt_exec.backends import Backend
from bt_exec.compilers.catalog import builtin_name


class CapabilityRouter:
    """Sends ``executor.builtin_*`` capabilities to the builtin backend (where the plan's dialect
    may call them) and every other capability to the robot's backend."""

    def __init__(self, backend: Backend, builtins: Backend | None):
        self.backend = backend
        self.builtins = builtins

    def backend_for(self, cap: str, provider: str | None) -> Backend:
        if self.builtins is not None and builtin_name(cap, provider) is not None:
            return self.builtins
        return self.backend
