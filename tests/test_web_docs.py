"""docs/web.md agrees with the route table: every operation, its request line and whether it is an MCP tool."""
import pathlib
import re

from bt_exec.control import ROUTES

DOC = (pathlib.Path(__file__).parent.parent / "docs" / "web.md").read_text()


def documented_rows():
    rows = {}
    for found in re.finditer(r"^\| `(GET|POST) (/api/\S+)` \| `(\w+)` \|[^|]*\| (yes|—) \|", DOC, re.MULTILINE):
        method, path, name, tool = found.groups()
        rows[name] = (method, path, tool == "yes")
    return rows


def test_every_route_is_documented_as_it_is():
    assert documented_rows() == {route.name: (route.method, route.path, route.tool) for route in ROUTES}


def test_the_mcp_tool_list_in_the_prose_is_complete():
    tools = {route.name for route in ROUTES if route.tool}
    section = DOC[DOC.index("## MCP tools"):DOC.index("## `bt-exec watch`")]
    assert tools <= set(re.findall(r"`(\w+)`", section))
