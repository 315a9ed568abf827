"""The operator console and the control API over HTTP and MCP (docs/web.md).

``api.ControlApi`` is the one implementation; ``server.WebServer`` serves it
over HTTP with the browser app, ``mcp_server`` offers it as MCP tools.
"""
from .api import ROUTES, ApiError, ControlApi, Route
from .server import WebServer

__all__ = ["ROUTES", "ApiError", "ControlApi", "Route", "WebServer"]
