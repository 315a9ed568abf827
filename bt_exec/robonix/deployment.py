"""bt_exec put together as Robonix's executor: what ``bt-exec robonix`` runs.

One ``Executor`` whose backend calls Robonix capability providers over MCP (``McpBackend``, each provider
found through Atlas by ``AtlasResolver``), its control surface (``ControlApi``, which the web console can serve
beside it), the executor's gRPC contracts over that surface (``RobonixServer``), and the registration with
Atlas that tells Pilot where they are (``AtlasClient``). ``start`` brings them up in the order Robonix needs
(the contracts are served before Atlas hands their address out); ``close`` takes them down in reverse.
"""
from __future__ import annotations

import bt_exec
from bt_exec.control import ControlApi
from bt_exec.robonix.atlas import HEARTBEAT_PERIOD_S, AtlasClient, AtlasResolver, Registration, advertised_address
from bt_exec.robonix.dispatch import POLL_PERIOD_S, McpBackend
from bt_exec.robonix.service import RobonixServer


class RobonixExecutor:
    """bt_exec serving as the Robonix executor ``provider_id``, at ``listen``, registered with Atlas at ``atlas``.

    ``catalog``, ``call_guard``, ``op_timeout_s`` and ``tick_rate_hz`` are the Executor's; ``poll_period_s``: how
    often an asynchronous capability's status is asked; ``heartbeat_s``: Atlas's heartbeat period.
    """

    def __init__(self, atlas: str, listen: str, provider_id: str, *, catalog=None, call_guard=None,
                 op_timeout_s: float | None = None, poll_period_s: float = POLL_PERIOD_S, tick_rate_hz: float = 100.0,
                 heartbeat_s: float = HEARTBEAT_PERIOD_S):
        self.provider_id = provider_id
        self.atlas = AtlasClient(atlas, provider_id)
        # Its calls push their news (watch_call): a call's end is ticked at once, and a call is never polled.
        self.backend = McpBackend(AtlasResolver(self.atlas), poll_period_s=poll_period_s)
        self.executor = bt_exec.Executor(backend=self.backend, catalog=catalog, call_guard=call_guard,
                                         op_timeout_s=op_timeout_s, tick_rate_hz=tick_rate_hz)
        self.control = ControlApi(self.executor)
        self.server = RobonixServer(self.control, provider_id, listen)
        self.heartbeat_s = heartbeat_s
        self.address: str | None = None

    def start(self) -> str:
        """Tick, serve the contracts, then register with Atlas (retried in the background while it is away);
        the address the contracts are served at."""
        self.executor.start()
        self.address = self.server.start()
        self.atlas.start(Registration(self.provider_id, advertised_address(self.address)),
                         heartbeat_s=self.heartbeat_s)
        return self.address

    def close(self) -> None:
        """Unregister, stop serving, cancel the plans in flight (their calls are cancelled) and stop."""
        self.atlas.close()
        self.server.stop()
        self.control.close()
        self.executor.close()
        self.backend.close()
