"""The HTTP door: the operator console's files, the JSON API of a control surface's routes, an event stream (SSE)
and MCP.

Served by uvicorn (h11) and starlette in a thread of its own, with an event
loop, so an open event stream holds a socket, not a thread. Security
(docs/web.md, docs/security.md):
- bound to 127.0.0.1 unless told otherwise; bound beyond loopback it needs a token;
- with a token, every POST and every ``/mcp`` request needs ``Authorization: Bearer <token>``; bound beyond
  loopback, so do reads under ``/api/`` (the event stream also takes it as ``?token=``, since a browser's
  EventSource cannot send headers); ``/api/info`` and the page's files stay open;
- POSTs must carry JSON (``Content-Type: application/json``) and, when a browser says where it comes from
  (``Origin``), come from this app: a page elsewhere cannot drive the robot through a visitor's browser;
- on loopback, requests naming another host (DNS rebinding) are refused;
- every answer, the server's own refusals included, is JSON (ASCII) with the security headers;
- limits: connections at once (one idle, between requests, gives way to a newcomer), time to send a request's
  head and body, body size, and an event stream whose reader stops reading is dropped; ``/mcp`` takes POST
  only, so it holds no stream.
"""
from __future__ import annotations

import asyncio
import functools
import hmac
import ipaddress
import logging
import re
import socket
import threading
import urllib.parse
from importlib import resources

import anyio
import uvicorn
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.routing import Route

from ..compat.uvicorn import LimitedH11Protocol
from ..control import ControlSurface, error_answer, parsed_json
from ..errors import TooLarge
from ..errors import BadArgument, Busy, ConfigError, NotFound
from ..events import finite_json
from ..web_token import TOKEN_ENV  # noqa: F401  (one definition; the ROS node reads it too)
from .client import DOOR_HEADER

log = logging.getLogger(__name__)

STATIC_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
                "/app.js": ("app.js", "text/javascript; charset=utf-8"),
                "/app.css": ("app.css", "text/css; charset=utf-8")}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
_RAW_SECURITY_HEADERS = [(name.lower().encode(), value.encode()) for name, value in SECURITY_HEADERS.items()]
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
KEEPALIVE_S = 15.0
CLOSING_MESSAGE = "the app stopped serving"
MAX_HEAD_BYTES = 16 * 1024  # request line and headers


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HttpRefusal(Exception):
    """A request refused by HTTP itself before any operation runs (no token, a foreign origin or host, a wrong
    method or content type, a body too slow): ``status`` and ``code`` are HTTP's own. What an operation refuses
    is a ControlError, answered through ``control.error_answer``."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class WebServer:
    """Serves ``api`` over HTTP at ``host``:``port`` (0: any free port) in a thread of its own.

    ``token``: required (as a bearer token) on every POST and MCP request when set, and on reads too when
    ``host`` is not a loopback address, where it must be set. ``max_body_bytes``: the largest request body;
    ``max_body_bytes_in_flight``: all bodies being received at once (default: four of the largest);
    ``read_timeout_s``: how long a client may take to send a request's head, or its body, and how long an event
    stream may wait for its reader; ``max_connections``: connections at once, event streams included (keep it
    above ``api.max_streams`` so that requests still get through when every stream is taken); one serving no
    request is closed for a newcomer when all are taken.
    """

    def __init__(self, api: ControlSurface, host: str = "127.0.0.1", port: int = 8080, token: str | None = None,
                 max_body_bytes: int = 16 * 1024 * 1024, read_timeout_s: float = 10.0, max_connections: int = 64,
                 max_body_bytes_in_flight: int | None = None):
        if not is_loopback(host) and not token:
            raise ConfigError(f"the web app bound to {host} (beyond loopback) needs a token: anyone who can reach "
                              "it could drive the robot; set one (bt-exec: $BT_EXEC_WEB_TOKEN; the node: "
                              "web_token) or bind to 127.0.0.1")
        self.api = api
        self.token = token or None
        self.max_body_bytes = max_body_bytes
        self.max_body_bytes_in_flight = 4 * max_body_bytes if max_body_bytes_in_flight is None \
            else max_body_bytes_in_flight
        self.read_timeout_s = read_timeout_s
        self.max_connections = max_connections
        bare_host = host.strip("[]")
        try:
            self._socket = socket.create_server((bare_host, port), family=socket.AF_INET6 if ":" in bare_host
                                                else socket.AF_INET, backlog=128)
        except OSError as exc:
            raise ConfigError(f"cannot serve the web app on {host}:{port}: {exc.strerror or exc}") from None
        self._loopback = is_loopback(host)
        self._thread: threading.Thread | None = None
        self._server: uvicorn.Server | None = None
        self._static = {path: (resources.files(__package__).joinpath("static", name).read_bytes(), mime)
                        for path, (name, mime) in STATIC_FILES.items()}
        self._page_loads = 0  # counted in the event loop's thread only
        self.closing_message = CLOSING_MESSAGE  # the last word of every event stream (``close``)

    @property
    def page_loads(self) -> int:
        """How many times the console's page (``GET /``) has been served."""
        return self._page_loads

    @property
    def port(self) -> int:
        return self._socket.getsockname()[1]

    @property
    def url(self) -> str:
        host = self._socket.getsockname()[0]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    def start(self) -> None:
        """Serve, from a thread of its own; returns once the app answers. ConfigError when it cannot start."""
        protocol = functools.partial(LimitedH11Protocol, max_connections=self.max_connections,
                                     read_timeout_s=self.read_timeout_s, refusal=_refusal)
        config = uvicorn.Config(_App(self).asgi, http=protocol, lifespan="on", log_config=None, log_level="error",
                                access_log=False, interface="asgi3", proxy_headers=False,
                                server_header=False, timeout_keep_alive=int(max(self.read_timeout_s, 1)),
                                timeout_graceful_shutdown=2, h11_max_incomplete_event_size=MAX_HEAD_BYTES)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=asyncio.run, args=(self._server.serve(sockets=[self._socket]),),
                                        name="bt_exec-web", daemon=True)
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            self._thread.join(0.01)
        if not self._server.started:
            raise ConfigError("the web app did not start (its log says why)")

    def close(self, message: str = CLOSING_MESSAGE) -> None:
        """Stop serving: open event streams end, each with a ``server_closing`` event carrying ``message`` (a page
        then knows not to reconnect), and the listening socket closes."""
        self.closing_message = message
        self.api.close()
        if self._thread is not None:
            self._server.should_exit = True
            self._thread.join()
        self._socket.close()

    def host_allowed(self, host_header: str | None) -> bool:
        if not self._loopback:
            return True
        if not host_header:
            return False
        name = host_header.rsplit(":", 1)[0] if not host_header.endswith("]") else host_header
        return name.lower() in _LOOPBACK_NAMES or is_loopback(name)

    def token_ok(self, authorization: str | None) -> bool:
        if self.token is None:
            return True
        scheme, _, given = (authorization or "").partition(" ")
        return scheme.lower() == "bearer" and self.token_matches(given.strip())

    def token_matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode())


def _refusal(status: int, code: str, message: str) -> bytes:
    """The whole answer of a refusal the protocol makes before any app sees the request: JSON, with the security
    headers, closing the connection."""
    body = _dumps({"error": {"code": code, "message": message}})
    head = [f"HTTP/1.1 {status} {'Bad Request' if status == 400 else 'Service Unavailable'}".encode(),
            b"content-type: application/json", b"content-length: %d" % len(body), b"connection: close"]
    head += [name + b": " + value for name, value in _RAW_SECURITY_HEADERS]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _compile(path: str) -> re.Pattern:
    return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path)) + "$")


class _ClientGone(Exception):
    """The client closed the connection while its request was read."""


class _App:
    """The ASGI app: checks every request (host, token, origin, content type), then routes it."""

    def __init__(self, web: WebServer):
        self.web = web
        self._body_bytes_in_flight = 0  # only the event loop's thread counts it
        # A surface may offer routes beyond the control API's (a replay's clock, a fleet's robots); the rest answer 404.
        self._routes = web.api.routes
        self._fleet = any(route.name == "list_robots" for route in self._routes)
        self._matchers = [(route, _compile(route.path)) for route in self._routes]
        try:
            self._mcp, self._mcp_lifespan, self._mcp_screen = _mcp_transport(web.api)
            self._mcp_missing = None
        except ImportError as exc:  # the web app serves without MCP; /mcp says why
            self._mcp, self._mcp_lifespan, self._mcp_screen, self._mcp_missing = None, None, None, str(exc)
        routes = [Route(path, _Asgi(self._static_file), methods=["GET"]) for path in STATIC_FILES]
        routes += [Route("/api/events", _Asgi(self._events), methods=["GET"]),
                   Route("/api/events/recent", _Asgi(self._recent_events), methods=["GET"]),
                   Route("/api/info", _Asgi(self._info), methods=["GET"]),
                   Route("/mcp", _Asgi(self._serve_mcp)),  # every method: all but POST get 405 there
                   Route("/{rest:path}", _Asgi(self._operation))]  # every other path and method
        self._starlette = Starlette(routes=routes, lifespan=self._lifespan)

    async def asgi(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self._starlette(scope, receive, send)
            return
        send = _with_security_headers(send)
        try:
            self._check(scope)
        except HttpRefusal as exc:
            await _refusal_response(exc.status, exc.code, exc.message, scope)(scope, receive, send)
            return
        await self._starlette(scope, receive, send)

    def _lifespan(self, app):
        return self._mcp_lifespan() if self._mcp_lifespan is not None else _nothing()

    def _check(self, scope) -> None:
        web = self.web
        headers = Headers(scope=scope)
        if not web.host_allowed(headers.get("host")):
            raise HttpRefusal(403, "bad_host", "this app answers only requests addressed to localhost")
        method, path = scope["method"], scope["path"]
        changes = method not in ("GET", "HEAD")
        reads_data = path.startswith("/api/") and path != "/api/info"
        if changes or path == "/mcp" or (reads_data and not web._loopback):
            if not (web.token_ok(headers.get("authorization")) or (path == "/api/events" and self._query_token(scope))):
                raise HttpRefusal(401, "token_required", "this request needs the app's token: "
                                                         "Authorization: Bearer <token>")
        if changes:
            origin = headers.get("origin")
            if origin is not None and urllib.parse.urlsplit(origin).netloc != headers.get("host"):
                raise HttpRefusal(403, "bad_origin", f"requests from {origin} are not accepted; use this app's own "
                                                     "page")
        if method == "POST":
            content_type = (headers.get("content-type") or "").split(";")[0].strip().lower()
            if content_type != "application/json":
                raise HttpRefusal(415, "json_required",
                                  "send the arguments as a JSON object (Content-Type: application/json)")

    def _query_token(self, scope) -> bool:
        given = urllib.parse.parse_qs(scope["query_string"].decode("latin-1")).get("token")
        return bool(given) and self.web.token is not None and self.web.token_matches(given[-1])

    async def _static_file(self, scope, receive, send) -> None:
        body, mime = self.web._static[scope["path"]]
        if scope["path"] == "/" and scope["method"] == "GET":
            self.web._page_loads += 1
        await Response(body, media_type=mime)(scope, receive, send)

    async def _info(self, scope, receive, send) -> None:
        await _json_response(200, {"token_required": self.web.token is not None,
                                    "operations": [{"name": r.name, "method": r.method, "path": r.path}
                                                   for r in self._routes]})(scope, receive, send)

    async def _recent_events(self, scope, receive, send) -> None:
        robot = self._robot(scope)
        events = self.web.api.recent_events() if robot is None else self.web.api.recent_events(robot)
        await _json_response(200, {"events": events})(scope, receive, send)

    def _robot(self, scope) -> str | None:
        """The ``robot`` a fleet's event stream is asked for (``?robot=NAME``); BadArgument where this app serves one
        robot."""
        robot = urllib.parse.parse_qs(scope["query_string"].decode("latin-1")).get("robot")
        if robot is None:
            return None
        if not self._fleet:
            raise BadArgument("this app serves one robot's executor: leave robot out", code="not_a_fleet")
        return robot[-1]

    async def _operation(self, scope, receive, send) -> None:
        route, args = _route(scope["method"], scope, self._matchers)
        if scope["method"] == "POST":
            args = {**_json_object(await self._body(scope, receive)), **args}
        door = Headers(scope=scope).get(DOOR_HEADER, "http")
        answer = await anyio.to_thread.run_sync(self.web.api.call, route.name, args, door)
        await _json_response(200, answer)(scope, receive, send)

    async def _body(self, scope, receive) -> bytes:
        """The request's body, read within the size and time limits."""
        limit = self.web.max_body_bytes
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and not (declared.isascii() and declared.isdigit()):
            raise BadArgument(f"Content-Length is not a whole number of bytes: {declared[:40]!r}", code="bad_length")
        if declared is not None and int(declared) > limit:
            raise TooLarge(f"the request body is {declared} bytes; at most {limit} are accepted")
        chunks, size = [], 0
        try:
            with anyio.move_on_after(self.web.read_timeout_s) as timer:
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        raise _ClientGone
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    self._body_bytes_in_flight += len(chunk)
                    if size > limit:
                        raise TooLarge(f"the request body exceeds {limit} bytes")
                    if self._body_bytes_in_flight > self.web.max_body_bytes_in_flight:
                        raise Busy("other requests' bodies fill what this app receives at once; try again shortly",
                                   code="too_busy")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        finally:
            self._body_bytes_in_flight -= size
        if timer.cancelled_caught:
            raise HttpRefusal(408, "body_timeout",
                              f"the request body did not arrive within {self.web.read_timeout_s:g} s")
        return b"".join(chunks)

    async def _events(self, scope, receive, send) -> None:
        robot = self._robot(scope)
        # Before any header: a refusal is still a plain JSON answer.
        stream = self.web.api.listen() if robot is None else self.web.api.listen(robot)
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()

        def wake() -> None:  # from the ticking thread
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:
                pass  # the loop is gone: the server is closing

        stream.on_ready(wake)

        async def events():
            try:
                yield ServerSentEvent(retry=1000)
                while True:
                    ready.clear()
                    closed = stream.closed  # read first: the events queued before the close are still sent
                    event = stream.get(0)
                    if event is not None:
                        yield ServerSentEvent(data=_dumps(event).decode("ascii"))
                        # Let the loop hear of a client that went away before the next of a backlog is
                        # written to its dead socket (each such write logs a warning).
                        await asyncio.sleep(0)
                    elif closed:
                        break
                    else:
                        await ready.wait()
                # The app closes on purpose (a client that went away never gets here): say so, so that a page
                # shows it ended instead of trying to reconnect.
                yield ServerSentEvent(data=_dumps({"event": "server_closing",
                                                   "message": self.web.closing_message}).decode("ascii"))
            finally:
                stream.close()  # the client went away, was too slow, or the server closes: the slot is free at once

        response = EventSourceResponse(events(), ping=KEEPALIVE_S, sep="\n", send_timeout=self.web.read_timeout_s,
                                       ping_message_factory=lambda: ServerSentEvent(comment="keepalive"))
        await response(scope, receive, send)

    async def _serve_mcp(self, scope, receive, send) -> None:
        # POST only: each request is answered in its response. A GET would open an event stream for messages a
        # stateless server never sends, held for as long as the client likes (idle ones would take every
        # connection), and there is no session to DELETE; MCP lets a server that offers no stream answer 405.
        # The connection is closed too: a client that looked for a stream has nothing more to ask.
        if scope["method"] != "POST":
            await Response(_dumps({"error": {"code": "method_not_allowed", "message": (
                "/mcp takes POST only: each MCP request is answered in its response (no event stream to GET, no "
                "session to DELETE)")}}), status_code=405, media_type="application/json",
                headers={"Allow": "POST", "Connection": "close"})(scope, receive, send)
            return
        if self._mcp is None:
            raise HttpRefusal(503, "mcp_unavailable", self._mcp_missing)
        body = await self._body(scope, receive)
        message, answer = self._mcp_screen.screen(body)
        if message is None:  # answered here, or dropped as JSON-RPC drops it: the mcp library would fail on it
            await _mcp_answer(answer)(scope, receive, send)
            return
        # Every answer here is JSON, whatever the client says it accepts (curl's */* included): the mcp library
        # would refuse (406) a request whose Accept does not name application/json.
        headers = [(name, value) for name, value in scope["headers"] if name != b"accept"]
        await self._mcp({**scope, "headers": [*headers, (b"accept", b"application/json")]}, _replay(body, receive),
                        send)


class _Asgi:
    """An ASGI handler as a starlette route's endpoint (a bound method would be taken for a request handler),
    its refusals and failures answered in JSON."""

    def __init__(self, handler):
        self.handler = handler

    async def __call__(self, scope, receive, send) -> None:
        started = False

        async def sending(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.handler(scope, receive, sending)
        except _ClientGone:
            pass
        except HttpRefusal as exc:
            if not started:
                await _refusal_response(exc.status, exc.code, exc.message, scope)(scope, receive, send)
        except Exception as exc:  # a refusal as every door words it; never a traceback, never a dead server
            status, answer = error_answer(exc, f"web: {scope['method']} {scope['path']}")
            if not started:
                await _error_response(status, answer, scope)(scope, receive, send)


def _route(method: str, scope, matchers: list) -> tuple:
    raw_path = scope.get("raw_path") or scope["path"].encode()
    path = raw_path.decode("latin-1")
    allowed = []
    for route, matcher in matchers:
        found = matcher.match(path)
        if found is None:
            continue
        if route.method != method:
            allowed.append(route.method)
            continue
        args = {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}
        if method == "GET":
            query = scope["query_string"].decode("latin-1")
            for name, values in urllib.parse.parse_qs(query).items():
                if name not in args:
                    args[name] = _query_value(route.properties.get(name), values)
        return route, args
    shown = path if len(path) <= 200 else path[:200] + "…"
    if allowed:
        raise HttpRefusal(405, "method_not_allowed", f"{shown} takes {' or '.join(allowed)}, not {method}")
    raise NotFound(f"no such path: {shown}")


def _json_object(raw: bytes) -> dict:
    if not raw.strip():  # a POST that lost its body must not act as one with no arguments
        raise BadArgument("the request body is empty: send a JSON object ({} for no arguments)", code="bad_json")
    body = parsed_json(raw, "the request body")
    if not isinstance(body, dict):  # the path's arguments join the body's: it must be an object before any check
        raise BadArgument(f"the request body must be a JSON object, not {type(body).__name__}", code="bad_json")
    return body


def _replay(body: bytes, receive):
    """A ``receive`` that gives ``body`` once, then waits for the client to go away as the original does."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _with_security_headers(send):
    async def sending(message) -> None:
        if message["type"] == "http.response.start":
            present = {name.lower() for name, _ in message.get("headers", [])}
            message = {**message, "headers": [*message.get("headers", []),
                                              *(h for h in _RAW_SECURITY_HEADERS if h[0] not in present)]}
        await send(message)

    return sending


def _json_response(status: int, payload: dict, close: bool = False) -> Response:
    return Response(_dumps(payload), status_code=status, media_type="application/json",
                    headers={"Connection": "close"} if close else None)


def _refusal_response(status: int, code: str, message: str, scope) -> Response:
    return _error_response(status, {"error": {"code": code, "message": message}}, scope)


def _error_response(status: int, answer: dict, scope) -> Response:
    # A refused request's body may be unread: the connection cannot carry another request. After a bug, nothing
    # said on it can be trusted either.
    return _json_response(status, answer, close=status == 500 or scope["method"] not in ("GET", "HEAD"))


def _query_value(schema: dict | None, values: list[str]):
    """A query-string argument in the type its schema asks for: every value of a repeated name for an array
    (``op_ids=1&op_ids=2``), else the last; integers, numbers and booleans (true/false) converted, anything
    else given as text for the schema to judge."""
    schema = schema or {}
    if schema.get("type") == "array":
        return [_query_scalar(schema.get("items", {}), value) for value in values]
    return _query_scalar(schema, values[-1])


def _query_scalar(schema: dict, text: str):
    kind = schema.get("type")
    if kind == "boolean":
        return {"true": True, "false": False}.get(text, text)
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" or text.lstrip("-").isdigit() else float(text)
        except ValueError:
            return text
    return text


def _dumps(payload: object) -> bytes:
    # Every answer and every streamed event is encoded here. ASCII, so text a client sent that UTF-8 cannot
    # carry (lone surrogates) is escaped, never a failed answer; values JSON has no type for (a backend's odd
    # result) are shown as text; non-finite numbers (a backend's, a journal's) leave as their markers.
    return finite_json.dumps(payload, default=str, ensure_ascii=True).encode("ascii")


def _mcp_transport(api):
    from .mcp_server import http_transport

    return http_transport(api)


def _mcp_answer(answer) -> Response:
    """The response to a POST the MCP screen answered itself: its JSON-RPC error(s), or 202 for a message that
    gets none (a notification, a response), as the streamable HTTP transport answers those."""
    if answer is None:
        return Response(status_code=202)
    from .mcp_server import dumps_ascii

    return Response(dumps_ascii(answer), media_type="application/json")


class _nothing:
    async def __aenter__(self):
        return None

    async def __aexit__(self, *exc) -> None:
        return None
