"""``viewer:=watcher`` and ``viewer:=py_trees``: run ``py-trees-tree-watcher`` on one bt_exec node's tree once
the node serves it, and again should it fail to attach; or the Qt viewer ``py-trees-tree-viewer`` once the node
serves its tree.

    python -m bt_exec.ros.attached_watcher NAMESPACE_HINT [PROGRAM]

NAMESPACE_HINT is the node's ``<namespace>/bt_exec/snapshot_streams/``: its
services are that and ``open`` / ``close``.

py-trees-tree-watcher looks for the snapshot-stream services for 5 s and
waits 3 s for each client, then gives up with exit 1 (``service not found``,
``timed out waiting for .../close``). Started beside the node by a launch on
a loaded machine, it often looks before the node serves (the node imports,
builds its executor and only then makes its services), and the launch ran on
without a viewer. Here the services are awaited first, as long as it takes,
and a watcher that exits with an error while nobody asked it to stop is
started again (at most ``MAX_STARTS`` times in all), each time once the
services are listed again. On SIGINT or SIGTERM the watcher gets
``OWN_STOP_S`` to end on its own (Ctrl-C in a terminal reaches it too: a
second SIGINT would break off its stream's close with a KeyboardInterrupt),
then it is sent SIGINT, and ``STOP_WAIT_S`` later killed, so this ends
before ``ros2 launch`` escalates. The watcher matches services by a part of
their name: where the hint is part of another tree's names too (the hint of
a node at the root is part of every namespaced node's), it would take the
wrong tree or refuse them all, so that is said, naming them, and nothing is
started.

The Qt viewer lists every tree and lets its user pick one. It has the same
race (it found a tree whose services were not all served yet, waited 3 s and
its ROS thread died, leaving an empty window), so it too starts once the
node's services are listed; it is given no hint, and it ends only when its
window is closed.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid

PROGRAM = "py-trees-tree-watcher"
QT_VIEWER = "py-trees-tree-viewer"
OPEN_TYPE = "py_trees_ros_interfaces/srv/OpenSnapshotStream"
CLOSE_TYPE = "py_trees_ros_interfaces/srv/CloseSnapshotStream"
MAX_STARTS = 6       # a watcher that keeps failing to attach is given up then
GRAPH_POLL_S = 0.2   # how often the ROS graph is looked at while waiting for the node
OWN_STOP_S = 1.0     # after a stop signal, how long the watcher has to end on its own before it is sent SIGINT
STOP_WAIT_S = 2.5    # and then before it is killed


def served(services: list[tuple[str, list[str]]], hint: str) -> list[str] | None:
    """None until the node's own services (``hint`` + ``open`` / ``close``) are listed; then the open services
    of every tree ``hint`` picks as py-trees-tree-watcher matches them (by type, ``hint`` a part of the name),
    the node's own first."""
    names = {name for name, types in services if OPEN_TYPE in types or CLOSE_TYPE in types}
    if hint + "open" not in names or hint + "close" not in names:
        return None
    others = sorted(name for name, types in services if hint in name and OPEN_TYPE in types and name != hint + "open")
    return [hint + "open", *others]


class Attacher:
    """Waits for the services, runs the watcher, starts it again on a failure; ``stop()`` from a signal."""

    def __init__(self, hint: str, program: str, list_services, say=print, hinted: bool = True):
        """``hinted``: ``program`` is pointed at the node's tree with ``--namespace-hint`` (the watcher); else it
        lists every tree itself (the Qt viewer)."""
        self.hint = hint
        self.program = program
        self.hinted = hinted
        self.list_services = list_services  # () -> [(name, [types])], the ROS graph's services
        self.say = say
        self.stopping = threading.Event()
        self.child: subprocess.Popen | None = None

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> int:
        for start in range(1, MAX_STARTS + 1):
            trees = self._wait_for_node()
            if not trees:
                return 0
            if self.hinted and len(trees) > 1:  # the watcher would take another tree, or refuse them all
                self.say(f"bt_exec watcher: {len(trees)} trees match {self.hint} ({', '.join(trees)}); "
                         f"{self.program} cannot pick one: give each bt_exec node a namespace "
                         "(namespace:=robot1), none at the root")
                return 1
            if self.stopping.is_set():
                return 0
            command = [self.program, "--namespace-hint", self.hint] if self.hinted else [self.program]
            self.child = subprocess.Popen(command)
            code = self._wait_for_child()
            if self.stopping.is_set() or code == 0:
                return 0
            self.say(f"bt_exec watcher: {self.program} exited with {code} (start {start} of {MAX_STARTS}); "
                     + ("starting it again once the node serves its tree" if start < MAX_STARTS else "giving up"))
        return 1

    def _wait_for_node(self) -> list[str]:
        """The open services ``served`` picks, once the node's are listed; [] when a stop is asked for first."""
        said = False
        while not self.stopping.is_set():
            trees = served(self.list_services(), self.hint)
            if trees is not None:
                return trees
            if not said:
                self.say(f"bt_exec watcher: waiting for the node's tree ({self.hint}open)")
                said = True
            self.stopping.wait(GRAPH_POLL_S)
        return []

    def _wait_for_child(self) -> int:
        child = self.child
        while True:
            try:
                return child.wait(GRAPH_POLL_S)
            except subprocess.TimeoutExpired:
                if self.stopping.is_set():
                    break
        for wait_s, then in ((OWN_STOP_S, lambda: child.send_signal(signal.SIGINT)), (STOP_WAIT_S, child.kill)):
            try:
                return child.wait(wait_s)
            except subprocess.TimeoutExpired:
                then()
        return child.wait()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not 1 <= len(argv) <= 2:
        print("usage: python -m bt_exec.ros.attached_watcher NAMESPACE_HINT [PROGRAM]", file=sys.stderr)
        return 2
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    rclpy.init(args=[], signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node(f"bt_exec_watch_{uuid.uuid4().hex[:8]}", start_parameter_services=False)
    program = argv[1] if len(argv) == 2 else PROGRAM
    attacher = Attacher(argv[0], program, node.get_service_names_and_types, say=lambda text: print(text, flush=True),
                        hinted=os.path.basename(program) != QT_VIEWER)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda _signum, _frame: attacher.stop())
    try:
        return attacher.run()
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    sys.exit(main())
