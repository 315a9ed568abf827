"""The overrides of py_trees' and uvicorn's internals (bt_exec/compat): written against the installed versions,
and the internals they override still there. An upgrade fails here, naming the overrides to look at again."""
import http.client
import socket

import py_trees
from compat_pins import assert_internals, assert_written_for
from uvicorn.protocols.http.h11_impl import H11Protocol

from bt_exec.compat import py_trees as py_trees_overrides
from bt_exec.compat import uvicorn as uvicorn_overrides


def test_the_py_trees_overrides_are_for_the_installed_py_trees():
    assert_written_for("py_trees", py_trees_overrides)


def test_the_uvicorn_overrides_are_for_the_installed_uvicorn():
    assert_written_for("uvicorn", uvicorn_overrides)


def test_what_acyclic_links_overrides_is_still_py_trees_own():
    assert_internals(py_trees.behaviour.Behaviour, "AcyclicLinks", methods=("stop", "tick"),
                     attributes=("parent", "iterator"))
    behaviour = py_trees.behaviours.Success(name="plain")
    assert behaviour.parent is None and behaviour.iterator is not None, "py_trees keeps them as AcyclicLinks expects"


def test_lean_behaviour_stands_for_every_attribute_py_trees_init_sets():
    plain = py_trees.behaviours.Success(name="plain")
    assert set(vars(plain)) == {"id", "name", "blackboards", "qualified_name", "status", "iterator", "parent",
                                "children", "logger", "feedback_message", "blackbox_level"}, (
        "py_trees' Behaviour.__init__ sets other attributes than LeanBehaviour stands for: look at it again")

    class Lean(py_trees_overrides.LeanBehaviour):
        def update(self):
            return py_trees.common.Status.SUCCESS

    lean = Lean(name="lean")
    assert lean.name == "lean"
    for attribute in ("status", "feedback_message", "blackbox_level", "children", "parent", "blackboards"):
        assert getattr(lean, attribute) == getattr(plain, attribute), attribute
    assert lean.qualified_name == f"{Lean.__qualname__}/lean"
    assert lean.logger.prefix == py_trees.logging.Logger("lean").prefix
    assert lean.id == lean.id and lean.id != Lean(name="lean").id, "an id is made once and is each behaviour's own"


def test_what_plan_tree_overrides_is_still_py_trees_own():
    assert_internals(py_trees.trees.BehaviourTree, "PlanTree", methods=("setup", "shutdown", "tick"),
                     attributes=("visitors", "pre_tick_handlers", "post_tick_handlers", "count", "root"))


def test_plan_tree_shuts_down_each_behaviour_that_has_something_to_shut_down_children_first():
    shut = []

    class Holding(py_trees.behaviours.Success):
        def shutdown(self):
            shut.append(self.name)

    class HoldingSequence(py_trees.composites.Sequence):
        def shutdown(self):
            shut.append(self.name)

    root = HoldingSequence("root", memory=True, children=[Holding(name="a"), py_trees.behaviours.Success(name="b"),
                                                          Holding(name="c")])
    py_trees_overrides.PlanTree(root).shutdown()
    assert shut == ["a", "c", "root"]


def test_what_the_limited_protocol_overrides_is_still_uvicorns_own():
    assert_internals(H11Protocol, "LimitedH11Protocol",
                     methods=("connection_made", "connection_lost", "data_received", "on_response_complete",
                              "send_400_response"),
                     attributes=("connections", "cycle", "transport", "loop", "config"))


def test_the_limited_protocol_turns_nagle_off_so_an_answer_never_waits_for_the_clients_ack(serve_web):
    _, server = serve_web(None)
    client = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        client.request("GET", "/api/plans")
        assert client.getresponse().read()
        [served] = server._server.server_state.connections  # the server's side of the kept-alive connection
        assert served.transport.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    finally:
        client.close()


def test_what_derived_feedback_overrides_is_still_py_trees_own():
    assert_internals(py_trees.behaviour.Behaviour, "DerivedFeedback", attributes=("feedback_message",))


def test_what_the_view_only_composite_overrides_still_stops_children_in_py_trees():
    assert_internals(py_trees.composites.Composite, "ViewOnlyComposite", methods=("stop", "remove_child"))
    shown = py_trees.behaviours.Running(name="shown")
    owner = py_trees.composites.Sequence(name="owner", memory=True, children=[shown])
    owner.tick_once()
    owner.remove_child(shown)
    assert shown.status == py_trees.common.Status.INVALID, "py_trees' remove_child stops the child, as overridden"
    class View(py_trees_overrides.ViewOnlyComposite):
        def tick(self):
            yield self

    viewed = py_trees.behaviours.Running(name="viewed")
    view = View(name="view", children=[viewed])
    viewed.tick_once()
    view.stop()
    view.remove_child(viewed)
    assert viewed.status == py_trees.common.Status.RUNNING and viewed.parent is None


def test_what_the_view_only_decorator_overrides_still_stops_the_child_in_py_trees():
    assert_internals(py_trees.decorators.Decorator, "ViewOnlyDecorator", methods=("stop", "update"))
    viewed = py_trees.behaviours.Running(name="viewed")
    frame = py_trees_overrides.ViewOnlyDecorator(name="frame", child=viewed)
    viewed.tick_once()
    frame.stop()
    assert viewed.status == py_trees.common.Status.RUNNING
