"""viewer:=watcher: py-trees-tree-watcher is started once the node serves its tree, and again when it fails to
attach (bt_exec.ros.attached_watcher; the ROS graph is a function here, the watcher a script)."""
import stat
import threading

from bt_exec.ros import attached_watcher
from bt_exec.ros.attached_watcher import CLOSE_TYPE, OPEN_TYPE, Attacher

HINT = "/robot1/bt_exec/snapshot_streams/"
SERVED = [(HINT + "open", [OPEN_TYPE]), (HINT + "close", [CLOSE_TYPE]), ("/other/list", ["std_srvs/srv/Trigger"])]


def watcher_script(tmp_path, codes: list[int]):
    """A stand-in for py-trees-tree-watcher: the n-th start appends its arguments to ``starts`` and exits with
    ``codes[n]`` (the last one forever); a code of -1 waits for SIGINT and then exits 0."""
    starts = tmp_path / "starts"
    script = tmp_path / "watcher"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {starts}
n=$(wc -l < {starts})
codes="{' '.join(map(str, codes))}"
code=$(echo $codes | cut -d' ' -f$n)
[ -z "$code" ] && code=$(echo $codes | awk '{{print $NF}}')
if [ "$code" = "-1" ]; then trap 'exit 0' INT; echo waiting > {tmp_path / 'attached'}; while :; do sleep 0.05; done; fi
exit $code
""")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), starts


def test_the_nodes_own_services_are_awaited_and_every_tree_the_hint_picks_is_named():
    assert attached_watcher.served(SERVED, HINT) == [HINT + "open"]
    assert attached_watcher.served(SERVED[:1], HINT) is None  # the close service too
    root = "/bt_exec/snapshot_streams/"
    assert attached_watcher.served(SERVED, root) is None  # robot1's tree matches the root's hint: not its own
    assert attached_watcher.served([(root + "open", [OPEN_TYPE]), (root + "close", [CLOSE_TYPE]), *SERVED],
                                   root) == [root + "open", HINT + "open"]


def test_a_hint_that_picks_several_trees_is_said_and_nothing_starts(tmp_path):
    program, starts = watcher_script(tmp_path, [0])
    root = "/bt_exec/snapshot_streams/"  # the root node's hint is part of every namespaced node's names
    graph = [(root + "open", [OPEN_TYPE]), (root + "close", [CLOSE_TYPE]), *SERVED]
    said = []
    assert Attacher(root, program, lambda: graph, say=said.append).run() == 1
    assert not starts.exists()
    assert said == [f"bt_exec watcher: 2 trees match {root} ({root}open, {HINT}open); {program} cannot pick one: "
                    "give each bt_exec node a namespace (namespace:=robot1), none at the root"]


def test_the_watcher_starts_only_once_the_node_serves_its_tree(tmp_path):
    program, starts = watcher_script(tmp_path, [0])
    looks = []

    def graph():
        looks.append(starts.exists())
        return SERVED if len(looks) >= 3 else []

    said = []
    assert Attacher(HINT, program, graph, say=said.append).run() == 0
    assert looks == [False, False, False]  # not started while the services were missing
    assert starts.read_text().split() == ["--namespace-hint", HINT]
    assert said == [f"bt_exec watcher: waiting for the node's tree ({HINT}open)"]  # said once


def test_a_watcher_that_fails_to_attach_is_started_again_until_it_attaches(tmp_path):
    program, starts = watcher_script(tmp_path, [1, 1, -1])
    said = []
    attacher = Attacher(HINT, program, lambda: SERVED, say=said.append)
    result = []
    runner = threading.Thread(target=lambda: result.append(attacher.run()))
    runner.start()
    attached = tmp_path / "attached"
    while not attached.exists():  # the third start stays up: attached
        assert runner.is_alive(), said
        runner.join(0.05)
    assert len(starts.read_text().splitlines()) == 3
    assert said[0] == f"bt_exec watcher: {program} exited with 1 (start 1 of {attached_watcher.MAX_STARTS}); " \
                      "starting it again once the node serves its tree"
    attacher.stop()  # a stop signal: passed on (the script does not end on its own), and no start again
    runner.join(10)
    assert result == [0] and len(starts.read_text().splitlines()) == 3


def test_a_watcher_that_never_attaches_is_given_up_with_exit_1(tmp_path):
    program, starts = watcher_script(tmp_path, [1])
    said = []
    assert Attacher(HINT, program, lambda: SERVED, say=said.append).run() == 1
    assert len(starts.read_text().splitlines()) == attached_watcher.MAX_STARTS
    assert said[-1].endswith("giving up")


def test_a_stop_while_waiting_for_the_node_ends_it_without_a_start(tmp_path):
    program, starts = watcher_script(tmp_path, [0])
    attacher = Attacher(HINT, program, lambda: [], say=lambda _text: attacher.stop())
    assert attacher.run() == 0
    assert not starts.exists()


def test_usage_is_said_for_wrong_arguments(capsys):
    assert attached_watcher.main([]) == 2
    assert "usage: python -m bt_exec.ros.attached_watcher" in capsys.readouterr().err


def test_the_qt_viewer_starts_once_the_node_serves_its_tree_without_a_hint_whatever_trees_match(tmp_path):
    # It lists every tree and lets its user pick: started too early it found a tree half served and its ROS
    # thread died, leaving an empty window.
    program, starts = watcher_script(tmp_path, [0])
    root = "/bt_exec/snapshot_streams/"
    looks = []

    def graph():
        looks.append(starts.exists())
        return [(root + "open", [OPEN_TYPE]), (root + "close", [CLOSE_TYPE]), *SERVED] if len(looks) >= 2 else []

    assert Attacher(root, program, graph, say=lambda _text: None, hinted=False).run() == 0
    assert looks == [False, False]
    assert starts.read_text() == "\n"  # started once, with no arguments
