"""The operator console and the control API over HTTP and MCP (docs/web.md).

Doors only: ``server.WebServer`` serves a ``bt_exec.control.ControlSurface`` over HTTP with the browser
app, ``mcp_server`` offers it as MCP tools, ``client.HttpApi`` calls a running app; ``fleet_api`` and
``replay_api`` are the surfaces of a fleet and of a replayed run. Importing this package loads no server.
"""
