"""A client of the HTTP API that offers the same ``call(name, args)`` as ``ControlApi``.

It builds each request from the route table, so a remote executor (the ROS
node's web app, a ``bt-exec run --web``) can be driven exactly like a local one:
a refusal comes back as the typed error the app answered it for
(``control.error_from_answer``).
"""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request

from ..control import ROUTES, ROUTES_BY_NAME, error_from_answer, expected_wait_s, route_named
from ..errors import Unreachable
from ..errors import BadArgument, ConfigError

DOOR_HEADER = "X-Bt-Exec-Door"  # an HTTP client serving MCP (bt-exec mcp --url) says so


class HttpApi:
    """``call`` runs an operation on the app at ``url``; a refusal is the typed ControlError the app answered
    (Unreachable when no answer came). ``timeout_s``: how long an answer may take, beyond the wait the
    operation asks for (``control.expected_wait_s``).

    ``robot``: the app is a fleet's (``bt-exec fleet --web``) and every operation is that robot's."""

    routes = ROUTES

    def __init__(self, url: str, token: str | None = None, timeout_s: float = 30.0, robot: str | None = None):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigError(f"not an http(s) URL: {url!r}")
        self.base = f"{parts.scheme}://{parts.netloc}"
        self.token = token or None
        self.timeout_s = timeout_s
        self.robot = robot
        # Straight to the app, as the event stream goes: never through an http_proxy from the environment.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def call(self, name: str, args: dict | None = None, door: str = "http") -> dict:
        """Run operation ``name`` with ``args`` on the app, saying it comes from ``door``: its answer."""
        route = route_named(ROUTES_BY_NAME, name)
        rest = dict(args or {})
        path = route.path if self.robot is None else robot_path(self.robot, route.path)
        for param in route.path_params:
            if param not in rest:
                raise BadArgument(f"{name}: {param} is required")
            path = path.replace("{" + param + "}", urllib.parse.quote(str(rest.pop(param)), safe=""))
        headers = {"Accept": "application/json", DOOR_HEADER: door}
        if self.token:  # every request: an app bound beyond loopback wants it for reads too
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if route.method == "GET":
            if rest:
                path += "?" + urllib.parse.urlencode({name: _query_text(value) for name, value in rest.items()},
                                                     doseq=True)
        else:
            data = json.dumps(rest, ensure_ascii=True).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.base + path, data=data, method=route.method, headers=headers)
        timeout_s = self.timeout_s + expected_wait_s(name, rest)  # the app may hold the answer as long as asked
        try:
            with self._opener.open(request, timeout=timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise _refusal(exc) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"no answer from {self.base}: {reason}") from None


def robot_path(robot: str, path: str) -> str:
    """Where a fleet's app serves ``path`` (``/api/...``) for ``robot``: events take it in the query."""
    if path.startswith("/api/events"):
        return path + ("&" if "?" in path else "?") + urllib.parse.urlencode({"robot": robot})
    return f"/api/robots/{urllib.parse.quote(robot, safe='')}/{path[len('/api/'):]}"


def _query_text(value):
    """A GET argument as the app reads it back: booleans as true/false, a list as one value per item."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [_query_text(item) for item in value]
    return value


def _refusal(exc: urllib.error.HTTPError):
    """The typed error an HTTP refusal stands for (an answer that is not the app's JSON keeps the HTTP words)."""
    try:
        answer = json.loads(exc.read())
    except (OSError, ValueError):
        answer = None
    return error_from_answer(exc.code, answer, f"HTTP {exc.code} {exc.reason}")
