"""What every tree of the library's nodes keeps, whatever its shape, its leaves' endings, a pause or a teardown:
each op's reports alternate between a run's start and its ending, a running tree always has something that will
tick it again, and a teardown leaves nothing running and nothing watched."""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings, strategies as st

from bt_exec.behaviours.bt_library import NODE_LIBRARY
from node_harness import FAILURE, INVALID, RUNNING, SUCCESS, Leaf, Tree

FINAL = {"succeeded", "failed", "canceled"}
PORTS = {"Repeat": {"num_cycles": ["-1", "1", "2"]}, "RetryUntilSuccessful": {"num_attempts": ["-1", "1", "3"]},
         "Timeout": {"msec": ["0", "100"]}, "Delay": {"delay_msec": ["0", "50"]},
         "RunOnce": {"then_skip": ["true", "false"]}, "RoundRobin": {"wrap_around": ["true", "false"]},
         "RecoveryNode": {"number_of_retries": ["0", "2"]}, "ParallelAll": {"max_failures": ["1", "-1"]},
         "RateController": {"hz": ["5", "20"]}, "DistanceController": {"distance": ["0.5"]}}
NODES = sorted(name for name, spec in NODE_LIBRARY.items() if spec.category in ("control", "decorator"))
LEAF_NODES = ["AlwaysSuccess", "AlwaysFailure"]


class Numbering:
    def __init__(self):
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return str(self.count)


def trees(ids: Numbering):
    scripts = st.lists(st.sampled_from([RUNNING, SUCCESS, FAILURE]), min_size=1, max_size=4)
    leaves = st.one_of(scripts.map(lambda script: Leaf(ids(), script[0], script)),
                       st.sampled_from(LEAF_NODES).map(lambda name: NODE_LIBRARY[name].build(ids(), name, {}, {}, [])))

    def nodes(children):
        @st.composite
        def build(draw):
            name = draw(st.sampled_from(NODES))
            spec = NODE_LIBRARY[name]
            kids = draw(st.lists(children, min_size=max(spec.min_children, 1), max_size=spec.max_children or 3))
            args = {port: draw(st.sampled_from(values)) for port, values in PORTS.get(name, {}).items()}
            return spec.build(ids(), name, args, {}, kids)
        return build()

    return st.recursive(leaves, nodes, max_leaves=10)


def behaviours(root):
    found, stack = [], [root]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.children)
    return found


def running_leaf(root) -> bool:
    """Whether a leaf runs for real (held ones wait for the resume): what would be a watched call in a plan."""
    return any(isinstance(node, Leaf) and node.status == RUNNING and not node.held_back for node in behaviours(root))


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_tree_keeps_the_ops_contracts(data):
    ids = Numbering()
    root = data.draw(trees(ids))
    tree = Tree(root)
    tree.hooks.blackboard["robot_pose"] = [0.0, 0.0]
    for tick in range(data.draw(st.integers(1, 25))):
        tree.hooks.paused = data.draw(st.booleans()) and data.draw(st.booleans())
        tree.clock.now += data.draw(st.sampled_from([0.0, 0.03, 0.2]))
        tree.hooks.blackboard["robot_pose"][0] += data.draw(st.sampled_from([0.0, 0.3]))
        status = tree.tick()
        if status != RUNNING:
            continue
        assert tree.hooks.paused or tree.hooks.watched or running_leaf(root), \
            f"tick {tick}: the tree runs but nothing would tick it again"
    tree.halt()
    assert not tree.hooks.watched
    assert all(node.status == INVALID for node in behaviours(root))
    runs: dict[str, str] = {}
    for op_id, state, _detail in tree.hooks.reports:
        last = runs.get(op_id, "succeeded")
        if state == "running":
            assert last in FINAL, f"op {op_id} started again before its run ended"
        else:
            assert state in FINAL and last == "running", f"op {op_id} ended {state} without a run"
        runs[op_id] = state
    assert all(state in FINAL for state in runs.values())
