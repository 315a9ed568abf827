"""Overrides of uvicorn's internals: its h11 protocol with limits of its own on connections and on the time to
send a request's head, refusing with an answer the server words."""
from __future__ import annotations

import asyncio
import socket
from typing import Callable

from uvicorn.protocols.http.h11_impl import H11Protocol

WRITTEN_FOR = "0.54.0"
OVERRIDES = {
    "LimitedH11Protocol": "uvicorn.protocols.http.h11_impl.H11Protocol's connection_made, connection_lost, "
                          "data_received, on_response_complete and send_400_response, and its connections, cycle, "
                          "transport, loop and config",
}


class LimitedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with limits of its own: at most ``max_connections`` at once, ``read_timeout_s`` to
    send a request's head, and refusals whose whole answer ``refusal(status, code, message)`` writes (bytes).

    Only requests being served hold a connection's place: when all are taken, the one that has waited longest
    for a request (kept alive idle, or opened and silent) is closed for the newcomer, as HTTP lets a server
    close an idle connection at any time; the newcomer is refused (503) only when every connection is serving
    a request, and those are bounded each by its own limits (body time, event streams, waits)."""

    def __init__(self, *args, max_connections: int, read_timeout_s: float,
                 refusal: Callable[[int, str, str], bytes], **kwargs):
        super().__init__(*args, **kwargs)
        self._max_connections = max_connections
        self._read_timeout_s = read_timeout_s
        self._refusal = refusal
        self._head_timer: asyncio.TimerHandle | None = None
        self._refused = False
        self._waiting_since = 0.0  # loop time since which it waits for a request's head

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        # An answer's head and body are two writes: with Nagle's algorithm on (asyncio sets TCP_NODELAY only on
        # sockets made with IPPROTO_TCP named, and the listening socket was not), the body waited for the client's
        # delayed ACK of the head, 40 ms a request on a kept-alive connection.
        connection = transport.get_extra_info("socket")
        if connection is not None and connection.family in (socket.AF_INET, socket.AF_INET6):
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if len(self.connections) > self._max_connections and not self._close_one_waiting():
            self._refuse(503, "too_many_connections", f"{self._max_connections} connections are serving requests "
                                                      "already; try again shortly")
            return
        self._await_head()

    def _waiting(self) -> bool:
        """Open, and serving no request: waiting for the next one's head (or for its first)."""
        return not self._refused and not self.transport.is_closing() and (
            self.cycle is None or self.cycle.response_complete)

    def _close_one_waiting(self) -> bool:
        """Close the connection (not this one) that has waited longest for a request; False if none waits."""
        waiting = [other for other in self.connections
                   if other is not self and isinstance(other, LimitedH11Protocol) and other._waiting()]
        if not waiting:
            return False
        min(waiting, key=lambda other: other._waiting_since).transport.close()
        return True

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._await_head()

    def connection_lost(self, exc) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # what a refused client still sends is dropped unread
        super().data_received(data)

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "bad_request", "the request is not valid HTTP/1.1, or its head exceeds "
                                         f"{self.config.h11_max_incomplete_event_size} bytes (invalid or negative "
                                         "Content-Length, bad header, bad request line)")

    def _await_head(self) -> None:
        self._waiting_since = self.loop.time()
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self._read_timeout_s, self._head_overdue)

    def _head_overdue(self) -> None:
        # A request in progress has its own limits (body, event stream); only a head still coming is overdue.
        if self.cycle is None or self.cycle.response_complete:
            self.transport.close()

    def _refuse(self, status: int, code: str, message: str) -> None:
        self.transport.write(self._refusal(status, code, message))
        # Closing with the client's data unread would reset the connection, and the client would lose the
        # answer: end the sending side, drop what still comes, and close a little later.
        self._refused = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(min(self._read_timeout_s, 2.0), self.transport.close)
