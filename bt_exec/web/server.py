"""The HTTP door: the operator console's files, the JSON API of ``api.ROUTES``, and an event stream (SSE).

Stdlib ``http.server``, one thread per connection, so a browser's open event
stream never holds up a request. Security (docs/web.md):
- bound to 127.0.0.1 unless told otherwise; bound beyond loopback it needs a token;
- with a token, every POST (all that changes state, and submit/validate) needs
  ``Authorization: Bearer <token>``; reads stay open, as the node's topics are;
- POSTs must carry JSON (``Content-Type: application/json``) and, when a browser
  says where it comes from (``Origin``), come from this app: a page elsewhere
  cannot drive the robot through a visitor's browser;
- on loopback, requests naming another host (DNS rebinding) are refused;
- the page may load scripts and styles from this server only (Content-Security-Policy).
"""
from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import re
import threading
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources

from ..errors import ConfigError
from ..web_token import TOKEN_ENV  # noqa: F401  (one definition; the ROS node reads it too)
from .api import ROUTES, ApiError, ControlApi

log = logging.getLogger(__name__)

STATIC_FILES = {"/": ("index.html", "text/html; charset=utf-8"),
                "/app.js": ("app.js", "text/javascript; charset=utf-8"),
                "/app.css": ("app.css", "text/css; charset=utf-8")}
_SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
# Where bt-exec and the node read the app's token from: never a command line, where ps shows it.
KEEPALIVE_S = 15.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class WebServer:
    """Serves ``api`` over HTTP at ``host``:``port`` (0: any free port) in threads of its own.

    ``token``: required (as a bearer token) on every POST when set, and it
    must be set when ``host`` is not a loopback address.
    """

    def __init__(self, api: ControlApi, host: str = "127.0.0.1", port: int = 8080, token: str | None = None,
                 max_body_bytes: int = 16 * 1024 * 1024):
        if not is_loopback(host) and not token:
            raise ConfigError(f"the web app bound to {host} (beyond loopback) needs a token: anyone who can reach "
                              "it could drive the robot; set one (bt-exec: $BT_EXEC_WEB_TOKEN; the node: "
                              "web_token) or bind to 127.0.0.1")
        self.api = api
        self.token = token or None
        self.max_body_bytes = max_body_bytes
        self.closing = threading.Event()
        try:
            self._httpd = _HttpServer((host, port), _Handler)
        except OSError as exc:
            raise ConfigError(f"cannot serve the web app on {host}:{port}: {exc.strerror or exc}") from None
        self._httpd.app = self
        self._loopback = is_loopback(host)
        self._thread: threading.Thread | None = None
        self._static = {path: (resources.files(__package__).joinpath("static", name).read_bytes(), mime)
                        for path, (name, mime) in STATIC_FILES.items()}

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        host = self._httpd.server_address[0]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="bt_exec-web", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving: open event streams end, the listening socket closes."""
        self.closing.set()
        self.api.close()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join()
        self._httpd.server_close()

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
        return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), self.token.encode())


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    app: WebServer

    def handle_error(self, request, client_address) -> None:
        log.exception("web: request from %s failed", client_address[0])


def _compile(path: str) -> re.Pattern:
    return re.compile("^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(path)) + "$")


_MATCHERS = [(route, _compile(route.path)) for route in ROUTES]


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    server_version = "bt_exec"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:
        log.debug("web: %s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        app = self.server.app
        try:
            if not app.host_allowed(self.headers.get("Host")):
                raise ApiError(403, "bad_host", "this app answers only requests addressed to localhost")
            url = urllib.parse.urlsplit(self.path)
            if method == "GET" and url.path in app._static:
                body, mime = app._static[url.path]
                self._send(200, body, mime)
                return
            if method == "GET" and url.path == "/api/events":
                self._stream_events()
                return
            if method == "GET" and url.path == "/api/events/recent":
                self._send_json(200, {"events": app.api.recent_events()})
                return
            if method == "GET" and url.path == "/api/info":
                self._send_json(200, {"token_required": app.token is not None,
                                      "operations": [{"name": r.name, "method": r.method, "path": r.path}
                                                     for r in ROUTES]})
                return
            route, args = self._route(method, url)
            if method == "POST":
                self._check_post(app)
                args = {**self._json_body(app), **args}
            self._send_json(200, app.api.call(route.name, args))
        except ApiError as exc:
            if method != "GET":
                self.close_connection = True  # its body may be unread: the connection cannot carry another request
            self._send_json(exc.status, exc.as_dict())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client went away
        except Exception as exc:  # never a traceback to the client, never a dead server
            log.exception("web: %s %s failed", method, self.path)
            self._send_json(500, {"error": {"code": "internal", "message": f"internal error: {type(exc).__name__}"}})

    def _route(self, method: str, url) -> tuple:
        allowed = []
        for route, matcher in _MATCHERS:
            found = matcher.match(url.path)
            if found is None:
                continue
            if route.method != method:
                allowed.append(route.method)
                continue
            args = {name: urllib.parse.unquote(value) for name, value in found.groupdict().items()}
            if method == "GET":
                for name, values in urllib.parse.parse_qs(url.query).items():
                    if name not in args:
                        args[name] = _query_value(route.properties.get(name), values[-1])
            return route, args
        if allowed:
            raise ApiError(405, "method_not_allowed", f"{url.path} takes {' or '.join(allowed)}, not {method}")
        raise ApiError(404, "not_found", f"no such path: {url.path}")

    def _check_post(self, app: WebServer) -> None:
        if not app.token_ok(self.headers.get("Authorization")):
            raise ApiError(401, "token_required", "this operation needs the app's token: "
                                                  "Authorization: Bearer <token>")
        origin = self.headers.get("Origin")
        if origin is not None and urllib.parse.urlsplit(origin).netloc != self.headers.get("Host"):
            raise ApiError(403, "bad_origin", f"requests from {origin} are not accepted; use this app's own page")
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            raise ApiError(415, "json_required", "send the arguments as a JSON object (Content-Type: application/json)")

    def _json_body(self, app: WebServer) -> dict:
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "bad_length", "Content-Length is not a number") from None
        if length > app.max_body_bytes:
            self.close_connection = True  # the body is not read: the connection cannot be reused
            raise ApiError(413, "too_large", f"the request body is {length} bytes; at most {app.max_body_bytes} "
                                             "are accepted")
        raw = self.rfile.read(length) if length > 0 else b"{}"
        try:
            body = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise ApiError(400, "bad_json", f"the request body is not JSON: {exc}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "bad_json", f"the request body must be a JSON object, not {type(body).__name__}")
        return body

    def _stream_events(self) -> None:
        app = self.server.app
        stream = app.api.listen()  # before any header: a refusal is still a plain JSON answer
        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-store")
            self._security_headers()
            self.end_headers()
            self.close_connection = True  # the stream is this connection's last response
            self.wfile.write(b"retry: 1000\n\n")
            self.wfile.flush()
            while not app.closing.is_set():
                event = stream.get(KEEPALIVE_S)
                if event is None:
                    self.wfile.write(b": keepalive\n\n")
                else:
                    self.wfile.write(b"data: " + _dumps(event) + b"\n\n")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass  # the viewer went away
        finally:
            stream.close()

    def _send_json(self, status: int, payload: dict) -> None:
        self._send(status, _dumps(payload), "application/json")

    def _send(self, status: int, body: bytes, mime: str) -> None:
        self.send_response(status, HTTPStatus(status).phrase)
        self.send_header("Content-Type", mime)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self._security_headers()
        self.end_headers()
        self.wfile.write(body)

    def _security_headers(self) -> None:
        for name, value in _SECURITY_HEADERS.items():
            self.send_header(name, value)


def _query_value(schema: dict | None, text: str):
    """A query-string value in the type its schema asks for (integers), else as given, for the schema to judge."""
    if schema and schema.get("type") == "integer":
        try:
            return int(text)
        except ValueError:
            return text
    return text


def _dumps(payload: object) -> bytes:
    # Backend results may hold values JSON has no type for: show them as text rather than fail the answer.
    return json.dumps(payload, default=str, ensure_ascii=False).encode()
