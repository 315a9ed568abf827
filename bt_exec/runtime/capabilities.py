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
        self._known: dict[tuple[str, str | None], Backend] = {}  # a plan's many ops share a few capabilities

    def backend_for(self, cap: str, provider: str | None) -> Backend:
        key = (cap, provider)
        backend = self._known.get(key)
        if backend is None:
            builtin = self.builtins is not None and builtin_name(cap, provider) is not None
            backend = self.builtins if builtin else self.backend
            if len(self._known) < _MAX_KNOWN:
                self._known[key] = backend
        return backend


_MAX_KNOWN = 4096  # plans name capabilities freely: the memo stays bounded
