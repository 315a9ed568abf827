"""The control API of a fleet: every robot's executor behind one web app and one set of MCP tools.

Each robot of the fleet runs its own executor (a bt_exec node in its own
namespace). ``FleetApi`` offers ``list_robots`` and, for each operation of
``control.ROUTES``, the same operation with a ``robot`` argument, served under
``/api/robots/{robot}/...``. It checks only the robot and hands the operation,
its arguments and the door to that robot's executor, whose control API answers
it: a robot gives the same answer through the fleet as through its own app.

The robots are reached through ``fleet``, an object with
``robots() -> list[dict]``, ``call(robot, operation, args, door) -> dict``
(the robot's refusals as typed ControlErrors, ``control.error_from_answer``) and ``start(on_events)``; the ROS one is
``bt_exec.ros.fleet.RosFleet``. This module imports no ROS.
"""
from __future__ import annotations

import threading
from dataclasses import replace

from ..control import ROUTES, EventFanout, EventStream, Route, route_named, without_plan_shape
from ..errors import BadArgument, NotFound

ROBOT_CHARS = 256
_ROBOT = {"description": "the robot, as list_robots names it (its namespace, e.g. robot1)", "type": "string",
          "minLength": 1, "maxLength": ROBOT_CHARS}
LIST_ROBOTS = Route(
    "list_robots", "GET", "/api/robots",
    "The robots of the fleet, each with its node, health (ok, or no answer) and the plan ids it has in flight. "
    "Every other tool takes the robot to act on.",
    lambda fleet: {"count": len(robots := fleet.robots()), "robots": robots})
FLEET_ROUTES: tuple[Route, ...] = (LIST_ROBOTS,) + tuple(
    replace(route, path="/api/robots/{robot}" + route.path[len("/api"):],
            summary=route.summary + " On the robot named by robot.",
            properties={"robot": _ROBOT, **route.properties}, required=("robot", *route.required))
    for route in ROUTES)
FLEET_ROUTES_BY_NAME = {route.name: route for route in FLEET_ROUTES}
INSTRUCTIONS = ("bt_exec runs behaviour-tree plans on the robots of a fleet, one executor per robot. list_robots "
                "first: every other tool acts on the robot its robot argument names, and plan ids are each "
                "robot's own. Inspect before you act: get_all_plans, then get_plan_status for a plan's op ids and "
                "states (summary=true for a large plan), then stop_plan_at (on_enter / on_complete) or cancel_plan. "
                "validate_plan checks a plan without running it; submit_plan runs it; wait_for_plan answers once "
                "it finished, instead of polling. Every issue names where the plan is wrong.")


class FleetApi:
    """The fleet's operations (``routes``), answered by the robots' executors through ``fleet``: the fleet's
    ``ControlSurface``.

    Events: each robot's events, tagged with ``robot``, are fanned out to the listeners of that robot
    (``listen_to``) and to those of the whole fleet (``listen``); ``recent``, ``stream_capacity`` and
    ``max_streams`` are each ``EventFanout``'s.
    """

    routes = FLEET_ROUTES
    instructions = INSTRUCTIONS

    def __init__(self, fleet, recent: int = 500, stream_capacity: int = 10_000, max_streams: int = 32):
        self.fleet = fleet
        self.events = EventFanout(recent, stream_capacity, max_streams)
        self._fanout_options = (recent, stream_capacity, max_streams)
        self._robot_events: dict[str, EventFanout] = {}
        self._lock = threading.Lock()
        fleet.start(self._on_events)

    @property
    def max_streams(self) -> int:
        """How many event streams may be open at once (the whole fleet's and each robot's, each)."""
        return self.events.max_streams

    def call(self, name: str, args: dict | None = None, door: str = "http") -> dict:
        """Run operation ``name``: ``list_robots`` here, any other on the robot ``args["robot"]`` names, whose
        executor checks the rest of the arguments and answers (or refuses: its typed error, relayed)."""
        route = route_named(FLEET_ROUTES_BY_NAME, name)
        if name == LIST_ROBOTS.name:
            return route.call(self.fleet, **route.checked(args))
        args = {} if args is None else args
        if not isinstance(args, dict):
            raise BadArgument(f"{name}: arguments must be a JSON object, got {type(args).__name__}")
        robot = args.get("robot")
        if not isinstance(robot, str) or not 0 < len(robot) <= ROBOT_CHARS:
            raise BadArgument(f"{name}: robot: required, the robot's name as list_robots gives it (text, 1 to "
                              f"{ROBOT_CHARS} characters)")
        return self.fleet.call(robot, name, {key: value for key, value in args.items() if key != "robot"}, door)

    def recent_events(self, robot: str | None = None) -> list[dict]:
        """The latest events of ``robot`` (every robot's when None), oldest first."""
        return self._fanout(robot).recent_events()

    def listen(self, robot: str | None = None) -> EventStream:
        """A stream of the events of ``robot`` (every robot's when None); NotFound for a robot never seen."""
        return self._fanout(robot).listen()

    def close(self) -> None:
        """Leave the fleet and end every open stream."""
        self.fleet.close()
        self.events.close()
        with self._lock:
            fanouts = list(self._robot_events.values())
        for fanout in fanouts:
            fanout.close()

    def _fanout(self, robot: str | None) -> EventFanout:
        """The fanout of ``robot``'s events (every robot's for None); NotFound for a robot not in the fleet."""
        if robot is None:
            return self.events
        with self._lock:
            fanout = self._robot_events.get(robot)
        if fanout is None:
            known = {entry["robot"] for entry in self.fleet.robots(ask=False)}
            if robot not in known:
                raise NotFound(f"no robot {robot[:ROBOT_CHARS]!r} in the fleet; list_robots names them: "
                               f"{', '.join(sorted(known)) or 'none found yet'}", code="unknown_robot")
            fanout = self._robot_fanout(robot)
        return fanout

    def _robot_fanout(self, robot: str) -> EventFanout:
        """``robot``'s fanout, made the first time it is asked for."""
        with self._lock:
            fanout = self._robot_events.get(robot)
            if fanout is None:
                fanout = self._robot_events[robot] = EventFanout(*self._fanout_options)
        return fanout

    def _on_events(self, robot: str, events: list[dict]) -> None:
        """From the fleet's thread: one robot's events, never blocking."""
        events = [{**(without_plan_shape(event) if event.get("event") == "plan_started" else event), "robot": robot}
                  for event in events]
        for target in (self._robot_fanout(robot), self.events):
            target.remember(events)
            target.send(events)
