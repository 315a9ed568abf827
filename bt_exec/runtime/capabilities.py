"""Which backend serves a capability: the executor's builtins, or the robot's backend (behind the call guard)."""
from __future__ import annotations

from bt_exec.backends import Backend, CallStatus, CapabilityCall
from bt_exec.compilers.call_guard import CallGuard
from bt_exec.compilers.catalog import builtin_name


class CapabilityRouter:
    """Sends ``executor.builtin_*`` capabilities to the builtin backend (where the plan's dialect
    may call them) and every other capability to the robot's backend; with a ``guard``, through a
    ``GuardedBackend`` for the caps some rule (or a deny default) may refuse."""

    def __init__(self, backend: Backend, builtins: Backend | None, guard: CallGuard | None = None):
        self.backend = backend
        self.builtins = builtins
        self.guard = guard
        self._guarded = None if guard is None else GuardedBackend(backend, guard)
        self._known: dict[tuple[str, str | None], Backend] = {}  # a plan's many ops share a few capabilities

    def backend_for(self, cap: str, provider: str | None) -> Backend:
        key = (cap, provider)
        backend = self._known.get(key)
        if backend is None:
            if self.builtins is not None and builtin_name(cap, provider) is not None:
                backend = self.builtins
            elif self.guard is None or self.guard.passes_untouched(cap, provider):
                backend = self.backend
            else:
                backend = self._guarded
            if len(self._known) < _MAX_KNOWN:
                self._known[key] = backend
        return backend


class GuardedBackend:
    """The robot's backend behind the call guard: a denied call ends FAILED with the deciding rule's name
    and never reaches the backend. State rules read the backend's optional ``state()`` at call time."""

    def __init__(self, backend: Backend, guard: CallGuard):
        self.backend = backend
        self.guard = guard
        self._state = getattr(backend, "state", None)
        if hasattr(backend, "pause") and hasattr(backend, "resume"):  # pausable behind the guard as without it
            self.pause, self.resume = backend.pause, backend.resume
            if hasattr(backend, "can_pause"):
                self.can_pause = backend.can_pause
        if hasattr(backend, "watch_call"):  # its calls push their news behind the guard as without it
            self.watch_call = backend.watch_call

    def start(self, call: CapabilityCall) -> CallStatus | str:
        decision = self.guard.decide(call.cap, call.provider, call.args, self._state)
        if not decision.allowed:
            return CallStatus("FAILED", error=decision.message, detail=f"denied by call guard rule {decision.rule}")
        return self.backend.start(call)

    def status(self, run_id: str) -> CallStatus:
        return self.backend.status(run_id)

    def cancel(self, run_id: str) -> None:
        self.backend.cancel(run_id)


_MAX_KNOWN = 4096  # plans name capabilities freely: the memo stays bounded
