"""Messages made from the interface definitions themselves (``interfaces/bt_exec_interfaces``), without ROS.

``service("Submit").Request(graph_json="...")`` has exactly the fields of
``srv/Submit.srv`` with their defaults, refuses any other field, and refuses a
value of the wrong Python type, as rosidl-generated classes do. So the pure
conversions can be tested where rclpy is not installed; tests/ros checks these
fields against the generated classes.
"""
from __future__ import annotations

import pathlib
from types import SimpleNamespace

SRV_DIR = pathlib.Path(__file__).resolve().parents[1] / "interfaces" / "bt_exec_interfaces" / "srv"
SERVICES = ("Submit", "StopAt", "Disarm", "PlanControl", "Cancel", "GetStatus", "ListPlans", "PauseGoal", "Control")
STRING_MSG = "string data"  # std_msgs/msg/String.msg, the message of every topic of the node

_PYTHON_TYPES = {"bool": bool, "string": str, "float32": float, "float64": float}
_PYTHON_TYPES.update({f"{sign}int{bits}": int for sign in ("", "u") for bits in (8, 16, 32, 64)})


def fields(definition: str) -> dict[str, tuple[str, object]]:
    """``{name: (type, default)}`` of one message definition (the text of a .msg, or one side of a .srv)."""
    found = {}
    for line in definition.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        kind, name, *default = words
        python_type = _PYTHON_TYPES[kind]
        found[name] = (kind, python_type(default[0]) if default else python_type())
    return found


def message_class(name: str, definition: str) -> type:
    declared = fields(definition)

    class Message:
        __slots__ = tuple(declared)

        def __init__(self, **values):
            unknown = set(values) - set(declared)
            if unknown:
                raise TypeError(f"{name} has no field(s) {sorted(unknown)}")
            for field, (_kind, default) in declared.items():
                setattr(self, field, values.get(field, default))

        def __setattr__(self, field, value):
            if field not in declared:
                raise AttributeError(f"{name} has no field {field!r}")
            kind, _default = declared[field]
            if not isinstance(value, _PYTHON_TYPES[kind]):
                raise TypeError(f"{name}.{field} is {kind}, got {type(value).__name__}")
            object.__setattr__(self, field, value)

    Message.__name__ = Message.__qualname__ = name
    Message.FIELDS = declared
    return Message


def service(name: str) -> SimpleNamespace:
    """``.Request`` and ``.Response`` of ``srv/<name>.srv``."""
    request, response = (SRV_DIR / f"{name}.srv").read_text().split("\n---\n")
    return SimpleNamespace(Request=message_class(f"{name}.Request", request),
                           Response=message_class(f"{name}.Response", response))


String = message_class("String", STRING_MSG)
