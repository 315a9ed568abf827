"""Groot2 watching a running plan: a client of the test's own, written from the facts of BehaviorTree.CPP 4's
monitor protocol (not from bt_exec's), against the publisher on real ZeroMQ sockets, and ``bt-exec run --groot2``
as a process."""
from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import threading
import time

import defusedxml.ElementTree as SafeET
import pytest

zmq = pytest.importorskip("zmq", reason="the Groot2 publisher needs pyzmq (the groot2 extra)")

import bt_exec  # noqa: E402
from bt_exec.groot2.ports import free_port_pair  # noqa: E402
from bt_exec.groot2.publisher import Groot2Error, Groot2Publisher  # noqa: E402
from command_line import REPO  # noqa: E402
from rtdl_plans import do, envelope, par, seq  # noqa: E402

WAIT_S = 10.0
# Node statuses as BT.CPP numbers them; a node reset to IDLE shows 10 + the status it had.
IDLE, RUNNING, SUCCESS, FAILURE, SKIPPED = 0, 1, 2, 3, 4


class Groot2Client:
    """What Groot2 does: a REQ socket to the publisher, each request a 6-byte header (protocol 2, type, random id)
    and maybe a second part; each reply checked to echo the header, followed by a 16-byte tree id."""

    def __init__(self, port: int):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REQ)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVTIMEO, int(WAIT_S * 1000))
        self.socket.connect(f"tcp://127.0.0.1:{port}")
        self.tree_id: bytes | None = None

    def close(self) -> None:
        self.socket.close(0)
        self.context.term()

    def raw(self, *parts: bytes) -> list[bytes]:
        self.socket.send_multipart(list(parts))
        return self.socket.recv_multipart()

    def request(self, kind: str, *extra: bytes) -> list[bytes]:
        """The reply's parts after its header (the header checked), or ``[b"error", message]``."""
        request_id = int.from_bytes(os.urandom(4), "little")
        reply = self.raw(struct.pack("<BBI", 2, ord(kind), request_id), *extra)
        if reply[0] == b"error":
            return reply
        assert len(reply[0]) == 22, reply[0]
        assert struct.unpack("<BBI", reply[0][:6]) == (2, ord(kind), request_id)
        self.tree_id = reply[0][6:]
        return reply[1:]

    def tree(self):
        [xml] = self.request("T")
        return SafeET.fromstring(xml)

    def statuses(self) -> dict[int, int]:
        """uid -> status of every node; {} while no plan is served (the error reply)."""
        reply = self.request("S")
        if reply[0] == b"error":
            return {}
        [body] = reply
        assert len(body) % 3 == 0
        return {uid: status for uid, status in struct.iter_unpack("<HB", body)}

    def blackboard(self, *names: str) -> dict:
        [body] = self.request("B", ";".join(names).encode())
        value, end = unpack_msgpack(body, 0)
        assert end == len(body)
        return value


def unpack_msgpack(data: bytes, at: int):
    """One MessagePack value at ``at`` (the forms a JSON value takes) and where it ends."""
    code = data[at]
    at += 1
    if code <= 0x7F:
        return code, at
    if code >= 0xE0:
        return code - 0x100, at
    if 0xA0 <= code <= 0xBF or code in (0xD9, 0xDA, 0xDB):
        size, at = (code & 0x1F, at) if code <= 0xBF else _length(data, at, {0xD9: 1, 0xDA: 2, 0xDB: 4}[code])
        return data[at:at + size].decode(), at + size
    if 0x80 <= code <= 0x8F or code in (0xDE, 0xDF):
        size, at = (code & 0x0F, at) if code <= 0x8F else _length(data, at, 2 if code == 0xDE else 4)
        out = {}
        for _ in range(size):
            key, at = unpack_msgpack(data, at)
            out[key], at = unpack_msgpack(data, at)
        return out, at
    if 0x90 <= code <= 0x9F or code in (0xDC, 0xDD):
        size, at = (code & 0x0F, at) if code <= 0x9F else _length(data, at, 2 if code == 0xDC else 4)
        items = []
        for _ in range(size):
            item, at = unpack_msgpack(data, at)
            items.append(item)
        return items, at
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if code in fixed:
        return fixed[code], at
    forms = {0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h",
             0xD2: ">i", 0xD3: ">q"}
    size = struct.calcsize(forms[code])
    return struct.unpack(forms[code], data[at:at + size])[0], at + size


def _length(data: bytes, at: int, size: int) -> tuple[int, int]:
    return int.from_bytes(data[at:at + size], "big"), at + size


def wait_for(condition, what: str):
    """``condition()``'s first true value within WAIT_S (it is asked again as the plan moves)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def tree_nodes(root) -> dict[int, object]:
    [tree] = root.findall("BehaviorTree")
    return {int(node.get("_uid")): node for node in tree.iter() if node is not tree}


@pytest.fixture
def served(tmp_path):
    """An executor on the sim (each call as long as the script says), its Groot2 publisher and a client."""
    made = []

    def make(script: dict | None = None, **options):
        path = tmp_path / "sim.json"
        path.write_text(json.dumps(script or {"default": {"outcome": "success", "duration_s": 0.05}}))
        executor = bt_exec.Executor(backend=bt_exec.SimBackend.in_scene(str(path)))
        port = free_port_pair()
        publisher = Groot2Publisher(executor, port, **options).start()
        client = Groot2Client(port)
        made.append((executor, publisher, client))
        return executor, publisher, client

    yield make
    for executor, publisher, client in made:
        client.close()
        publisher.close()
        executor.close()


PLAN = envelope(seq(do("look", "camera.capture", {"resolution": 3}),
                    par(do("left", "arm.move", {"side": "left"}), do("right", "arm.move", {"side": "right"})),
                    do("report", "speaker.say", {"text": "done"}), description="look, move, report"))


def test_the_full_tree_has_a_uid_on_every_node_and_the_model_of_its_leaves(served):
    executor, publisher, client = served()
    assert client.request("T")[0] == b"error"  # nothing runs yet: said, not silence
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.tick_once()
    root = client.tree()
    nodes = tree_nodes(root)
    assert list(nodes) == list(range(1, 7))
    assert [nodes[uid].tag for uid in nodes] == ["Sequence", "camera.capture", "ParallelAll", "arm.move", "arm.move",
                                                 "speaker.say"]
    assert root.get("BTCPP_format") == "4" and nodes[2].get("resolution") == "3"
    model = {entry.get("ID"): entry.tag for entry in root.find("TreeNodesModel")}
    assert model["camera.capture"] == "Action" and model["ParallelAll"] == "Control"
    tree_id = client.tree_id
    assert client.statuses().keys() == nodes.keys() and client.tree_id == tree_id  # one tree, one id
    assert publisher.served_plan == plan_id


def test_statuses_follow_a_plan_running_on_the_sim(served):
    script = {"default": {"outcome": "success", "duration_s": 0.05},
              "caps": {"arm.move": {"outcome": "success", "duration_s": 30}}}
    executor, publisher, client = served(script)
    executor.start()
    plan_id = executor.submit(PLAN)["plan_id"]
    # while both arms move: the look has succeeded and keeps its status under its running parent
    running = wait_for(lambda: (lambda s: s if s.get(4) == RUNNING and s.get(5) == RUNNING else None)(
        client.statuses()), "both arms running")
    assert running == {1: RUNNING, 2: SUCCESS, 3: RUNNING, 4: RUNNING, 5: RUNNING, 6: IDLE}
    executor.cancel_plan(plan_id)
    ended = client.statuses()
    # halted while running: IDLE, once RUNNING (as BT.CPP shows a halted node); never reached: IDLE
    assert ended[4] == ended[5] == 10 + RUNNING and ended[6] == IDLE
    assert ended[1] in (FAILURE, 10 + RUNNING)


def test_a_finished_tree_shows_its_root_s_outcome_and_its_children_reset(served):
    script = {"default": {"outcome": "success", "duration_s": 0.01},
              "caps": {"speaker.say": {"outcome": "failure", "duration_s": 0.01}}}
    executor, publisher, client = served(script)
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.run_until_complete(plan_id, timeout=WAIT_S)
    assert client.statuses() == {1: FAILURE, 2: 10 + SUCCESS, 3: 10 + SUCCESS, 4: 10 + SUCCESS, 5: 10 + SUCCESS,
                                 6: 10 + FAILURE}


def test_an_op_stopped_before_it_started_is_skipped(served):
    executor, publisher, client = served()
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.stop_plan_at(plan_id, "6", "on_enter")
    executor.run_until_complete(plan_id, timeout=WAIT_S)
    # skipped, then reset with the rest once the root ended: IDLE, once SKIPPED (as BT.CPP resets a skipped child)
    statuses = client.statuses()
    assert statuses[6] == 10 + SKIPPED and statuses[2] == statuses[3] == 10 + SUCCESS


def test_the_newest_plan_is_followed_as_a_new_tree(served):
    executor, publisher, client = served()
    first = executor.submit(PLAN)["plan_id"]
    executor.run_until_complete(first, timeout=WAIT_S)
    first_tree = client.tree_id or (client.tree() is not None and client.tree_id)
    second = executor.submit(envelope(do("only", "sim.act")))["plan_id"]
    executor.run_until_complete(second, timeout=WAIT_S)
    assert [node.tag for node in tree_nodes(client.tree()).values()] == ["sim.act"]
    assert client.tree_id != first_tree and publisher.served_plan == second


def test_a_chosen_plan_is_served_and_others_are_not(served, tmp_path):
    executor, publisher, client = served(plan_id="2")
    executor.submit(envelope(do("first", "sim.act")))
    executor.submit(PLAN)
    executor.submit(envelope(do("third", "sim.act")))
    for plan_id in ("1", "2", "3"):
        executor.run_until_complete(plan_id, timeout=WAIT_S)
    assert publisher.served_plan == "2" and len(tree_nodes(client.tree())) == 6


def test_a_plan_already_running_is_served_from_its_state_now(tmp_path):
    path = tmp_path / "sim.json"
    path.write_text(json.dumps({"default": {"outcome": "success", "duration_s": 0.01},
                                "caps": {"arm.move": {"outcome": "success", "duration_s": 30}}}))
    executor = bt_exec.Executor(backend=bt_exec.SimBackend.in_scene(str(path)))
    executor.start()
    try:
        plan_id = executor.submit(PLAN)["plan_id"]
        wait_for(lambda: executor.get_op(plan_id, "4")["op"]["state"] == "running", "the arms to move")
        port = free_port_pair()
        with Groot2Publisher(executor, port) as publisher:
            client = Groot2Client(port)
            try:
                assert publisher.served_plan == plan_id
                assert client.statuses() == {1: RUNNING, 2: SUCCESS, 3: RUNNING, 4: RUNNING, 5: RUNNING, 6: IDLE}
            finally:
                client.close()
    finally:
        executor.close()


def test_a_step_graph_is_served_as_its_loop_with_the_step_on_its_blackboard(served, tmp_path):
    scene = json.loads((REPO / "examples" / "qwen3" / "scene.json").read_text())
    executor = bt_exec.Executor(scene=scene)
    port = free_port_pair()
    with Groot2Publisher(executor, port) as publisher:
        client = Groot2Client(port)
        try:
            answer = executor.submit((REPO / "examples" / "qwen3" / "cap_to_hatch.json").read_bytes())
            assert answer["accepted"], answer
            executor.run_until_complete(answer["plan_id"], timeout=WAIT_S)
            nodes = tree_nodes(client.tree())
            statuses = client.statuses()
            leaves = {uid: node for uid, node in nodes.items() if node.get("event") == "{event}"}
            # each leaf the skill it calls: the graph's pick is grant's grab
            assert {node.tag for node in leaves.values()} == {"grab", "transfer", "release", "inspect_state"}
            ran = {nodes[uid].get("name") for uid in leaves if statuses[uid] in (SUCCESS, 10 + SUCCESS)}
            assert ran == {"grab(vacuum)", "pick(cap)", "transfer(cap, hatch_seat)", "release(cap, hatch_seat)"}
            assert statuses[1] == SUCCESS  # the loop's root: the graph completed
            assert client.blackboard("MainTree") == {"MainTree": {"step": "completed", "event": ""}}
            script = next(uid for uid, node in nodes.items() if node.tag == "Script")
            refused = client.request("I", json.dumps({"uid": script, "position": 0, "mode": 0}).encode())
            assert refused[0] == b"error" and b"stands for no op" in refused[1]
            assert publisher.served_plan == answer["plan_id"]
        finally:
            client.close()
    executor.close()


def test_the_blackboard_reply_names_only_the_blackboards_the_tree_has(served):
    executor, publisher, client = served()
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.run_until_complete(plan_id, timeout=WAIT_S)
    assert client.blackboard("NoSuchTree") == {}
    assert client.request("B")[0] == b"error"  # no names part: two parts are required


@pytest.mark.parametrize("kind, extra", [("N", b"2"), ("Z", None), ("\x00", None)])
def test_a_request_it_does_not_serve_gets_an_error_reply_saying_what_is_served(served, kind, extra):
    executor, publisher, client = served()
    executor.run_until_complete(executor.submit(PLAN)["plan_id"], timeout=WAIT_S)
    reply = client.request(kind, *([extra] if extra is not None else []))
    assert reply[0] == b"error" and len(reply) == 2
    message = reply[1].decode()
    assert "not served" in message and "full_tree, status, blackboard, hook_insert" in message
    assert "toggle_recording, get_transitions" in message
    assert "pause points" in message
    assert client.tree().find("BehaviorTree") is not None  # still serving


def hook(uid: int, position: int = 0, **more) -> bytes:
    """A hook as Groot2 sends it (BT.CPP's JSON of a Hook)."""
    return json.dumps({"enabled": True, "uid": uid, "mode": 0, "once": False, "desired_status": "SKIPPED",
                       "position": position, **more}).encode()


def paused(executor, plan_id: str) -> bool:
    return any(plan["paused"] for plan in executor.get_all_plans()["plans"] if plan["plan_id"] == plan_id)


def started_held(executor, client) -> str:
    """PLAN started (so Groot2 has its tree) but paused before its first op: breakpoints set now are in time."""
    executor.start()
    plan_id = executor.submit(PLAN, hold_start_s=1.0)["plan_id"]
    executor.pause_plan(plan_id)
    executor.release_start(plan_id)
    wait_for(lambda: client.request("T")[0] != b"error", "the tree")
    return plan_id


def test_a_breakpoint_pauses_the_plan_before_its_node_and_an_unlock_goes_on(served):
    executor, publisher, client = served()
    plan_id = started_held(executor, client)
    assert client.request("I", hook(6)) == []  # the header alone: done
    assert json.loads(client.request("D")[0]) == [
        {"enabled": True, "uid": 6, "mode": 0, "once": True, "desired_status": "SKIPPED", "position": 0}]
    assert executor.resume_plan(plan_id)["resumed"]
    wait_for(lambda: paused(executor, plan_id), "the plan to pause at the breakpoint")
    statuses = client.statuses()
    assert statuses[2] == SUCCESS and statuses[6] == IDLE  # before the node: it has not run
    assert json.loads(client.request("D")[0]) == []  # a pause point fires once
    assert client.request("U", json.dumps({"uid": 6, "position": 0, "desired_status": "SKIPPED",
                                           "remove_when_done": True}).encode()) == []
    assert executor.wait_for_plan(plan_id, WAIT_S)["outcome"] == "succeeded"


def test_a_breakpoint_after_a_node_pauses_once_it_ended(served):
    executor, publisher, client = served()
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.tick_once()
    assert client.request("I", hook(2, position=1)) == []
    wait_for(lambda: executor.tick_once() or paused(executor, plan_id), "the pause after the node")
    assert client.statuses()[2] == SUCCESS and executor.get_op(plan_id, "3")["op"]["state"] == "pending"
    assert client.request("A") == []  # remove them all: the plan goes on
    assert executor.run_until_complete(plan_id, timeout=WAIT_S)["outcome"] == "succeeded"


def test_a_breakpoint_removed_or_disabled_is_not_reached(served):
    executor, publisher, client = served()
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.tick_once()
    assert client.request("I", b"[" + hook(5) + b"," + hook(6) + b"]") == []
    assert client.request("R", json.dumps({"uid": 5, "position": 0}).encode()) == []
    assert client.request("I", hook(6, enabled=False)) == []
    assert json.loads(client.request("D")[0]) == []
    assert executor.run_until_complete(plan_id, timeout=WAIT_S)["outcome"] == "succeeded"


@pytest.mark.parametrize("kind, payload, message", [
    ("I", hook(2, mode=1), "only breakpoints (mode 0) are served"),
    ("I", hook(99), "the tree has no node 99"),
    ("I", hook(2, position=3), "position is 0 (before the node) or 1"),
    ("I", b'{"uid": "2"}', "names its node by uid"),
    ("I", b"not json", "must be JSON"),
    ("I", b"[" * 50_000, "must be JSON"),  # nesting too deep to read, within the request size limit
    ("R", json.dumps({"uid": 4, "position": 0}).encode(), "no breakpoint is set at node 4"),
    ("U", json.dumps({"uid": 2, "position": 0, "desired_status": "FAILURE"}).encode(), "its own result"),
], ids=["replace", "no node", "position", "uid text", "not json", "deep", "remove unset", "unlock failure"])
def test_a_hook_it_cannot_serve_as_asked_gets_an_error_reply(served, kind, payload, message):
    executor, publisher, client = served()
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.tick_once()
    reply = client.request(kind, payload)
    assert reply[0] == b"error" and message in reply[1].decode(), reply
    assert executor.run_until_complete(plan_id, timeout=WAIT_S)["outcome"] == "succeeded"  # nothing was armed


def test_the_breakpoints_of_a_groot2_gone_silent_are_removed(served):
    executor, publisher, client = served({"default": {"outcome": "success", "duration_s": 0.0}}, heartbeat_s=1.0)
    plan_id = started_held(executor, client)
    assert client.request("I", hook(6)) == []
    assert executor.resume_plan(plan_id)["resumed"]
    wait_for(lambda: paused(executor, plan_id), "the plan to pause at the breakpoint")
    # no request for a second: the breakpoints are let go, and the plan ends without anyone resuming it
    assert executor.wait_for_plan(plan_id, WAIT_S)["outcome"] == "succeeded"


def test_malformed_requests_get_an_error_and_never_stop_it(served):
    executor, publisher, client = served()
    executor.run_until_complete(executor.submit(PLAN)["plan_id"], timeout=WAIT_S)
    for parts in ([b""], [b"abc"], [b"\x02S\x00\x00\x00\x00\x00"], [b"\xff" * 6, b"x", b"y"],
                  [b"\x02B\x00\x00\x00\x00"], [os.urandom(6) for _ in range(3)]):
        reply = client.raw(*parts)
        assert reply[0] == b"error" or len(reply[0]) == 22, parts
    # a request over the size limit is dropped with its connection; a new client is served
    big = Groot2Client(publisher.port)
    big.socket.setsockopt(zmq.RCVTIMEO, 300)
    big.socket.send_multipart([struct.pack("<BBI", 2, ord("S"), 1), b"x" * (1024 * 1024)])
    with pytest.raises(zmq.Again):
        big.socket.recv_multipart()
    big.close()
    assert len(client.statuses()) == 6


def test_many_clients_at_once_are_each_answered(served):
    executor, publisher, client = served()
    executor.run_until_complete(executor.submit(PLAN)["plan_id"], timeout=WAIT_S)
    answers = []

    def ask():
        other = Groot2Client(publisher.port)
        try:
            answers.extend(len(other.statuses()) for _ in range(20))
        finally:
            other.close()

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [6] * 80


def test_a_pause_point_reached_is_published_as_a_breakpoint(served):
    executor, publisher, client = served()
    subscriber = client.context.socket(zmq.SUB)
    subscriber.setsockopt(zmq.SUBSCRIBE, b"")
    subscriber.setsockopt(zmq.RCVTIMEO, 500)
    subscriber.connect(f"tcp://127.0.0.1:{publisher.publisher_port}")
    executor.start()
    try:
        # What is published before a subscriber has joined is lost (ZeroMQ's rule): plans pause until one is heard.
        for _attempt in range(20):
            plan_id = executor.submit(envelope(seq(do("first", "sim.act"), do("second", "sim.act"))),
                                      hold_start_s=1.0)["plan_id"]
            second = executor.get_plan_status(plan_id)["ops"][2]["op_id"]
            executor.stop_plan_at(plan_id, second, "on_enter", action="pause")
            executor.release_start(plan_id)
            wait_for(lambda paused=plan_id: any(plan["paused"] for plan in executor.get_all_plans()["plans"]
                                                if plan["plan_id"] == paused), "the pause")
            try:
                header, uid = subscriber.recv_multipart()
            except zmq.Again:
                executor.cancel_plan(plan_id)
                continue
            assert header[:2] == bytes((2, ord("N"))) and len(header) == 6 and uid == b"3"
            executor.resume_plan(plan_id)
            assert executor.wait_for_plan(plan_id, WAIT_S)["outcome"] == "succeeded"
            break
        else:
            pytest.fail("no breakpoint notice was heard")
    finally:
        subscriber.close(0)


def test_ports_taken_or_out_of_range_are_refused_and_nothing_stays_bound(tmp_path):
    executor = bt_exec.Executor()
    port = free_port_pair()
    try:
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", port + 1))
            holder.listen()
            with pytest.raises(Groot2Error, match=f"cannot serve Groot2 on 127.0.0.1:{port + 1}"):
                Groot2Publisher(executor, port).start()
        with Groot2Publisher(executor, port):  # the first port was freed again
            pass
        for bad in (0, 65535, -1, "7000", True):
            with pytest.raises(Groot2Error, match="port must be 1 to 65534"):
                Groot2Publisher(executor, bad)
    finally:
        executor.close()


# --- bt-exec run --groot2 -----------------------------------------------------------------------------------

def test_bt_exec_run_serves_groot2_while_the_plan_runs(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    script = tmp_path / "sim.json"
    script.write_text(json.dumps({"default": {"outcome": "success", "duration_s": 0.01},
                                  "caps": {"speaker.say": {"outcome": "success", "duration_s": 30}}}))
    port = free_port_pair()
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "run", str(plan), "--sim-script", str(script),
                                "--groot2", str(port)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)
    client = None
    try:
        said = f"Groot2: connect to 127.0.0.1:{port} (publisher on {port + 1})"
        for _line in range(20):  # logging may come first
            line = process.stderr.readline()
            if said in line or not line:
                break
        assert said in line, line
        client = Groot2Client(port)
        wait_for(lambda: client.statuses().get(6) == RUNNING, "the last op running")
        assert [node.tag for node in tree_nodes(client.tree()).values()][-1] == "speaker.say"
        assert client.statuses()[2] == 10 + SUCCESS or client.statuses()[2] == SUCCESS
        process.send_signal(2)  # Ctrl-C: the run is cancelled, the sockets closed
        assert process.wait(WAIT_S) == 130
    finally:
        if client is not None:
            client.close()
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.parametrize("args, message", [(["--groot2", "65535"], "expected a port number 1..65534"),
                                           (["--groot2", "x"], "is not a whole number")])
def test_bt_exec_run_refuses_a_bad_groot2_port(tmp_path, args, message):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    ran = subprocess.run([sys.executable, "-m", "bt_exec.cli", "run", str(plan), *args], cwd=REPO,
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and message in ran.stderr


def test_a_bt_xml_plan_s_blackboard_is_served_as_its_ports_wrote_it(served):
    script = json.loads((REPO / "examples" / "btcpp" / "fetch_cup_sim.json").read_text())
    executor, publisher, client = served(script)
    plan_id = executor.submit((REPO / "examples" / "btcpp" / "fetch_cup.xml").read_bytes())["plan_id"]
    executor.run_until_complete(plan_id, timeout=WAIT_S)  # ended: the blackboard as the plan left it
    assert client.blackboard("FetchCup", "PickUp") == {"FetchCup": {"cup_pose": "0.42;0.10;0.75"}}
    nodes = tree_nodes(client.tree())
    assert nodes[1].tag == "Sequence" and client.tree().find("BehaviorTree").get("ID") == "FetchCup"
    statuses = client.statuses()
    assert statuses[1] == SUCCESS and set(statuses.values()) <= {SUCCESS, 10 + SUCCESS, 10 + FAILURE, IDLE}


def test_bt_exec_run_keeps_serving_groot2_after_the_plan_when_asked(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    port = free_port_pair()
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "run", str(plan), "--groot2", str(port),
                                "--keep-serving"], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, text=True)
    client = None
    try:
        said = f"the plan ended; still serving Groot2 on 127.0.0.1:{port} until Ctrl-C"
        for _line in range(20):
            line = process.stderr.readline()
            if said in line or not line:
                break
        assert said in line, line
        client = Groot2Client(port)
        assert client.statuses()[1] == SUCCESS  # the ended plan's last statuses, still there to look at
        process.send_signal(2)
        assert process.wait(WAIT_S) == 0
    finally:
        if client is not None:
            client.close()
        if process.poll() is None:
            process.kill()
            process.wait()


def test_bt_exec_run_with_a_groot2_port_taken_says_so(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    port = free_port_pair()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        ran = subprocess.run([sys.executable, "-m", "bt_exec.cli", "run", str(plan), "--groot2", str(port)],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and f"--groot2: cannot serve Groot2 on 127.0.0.1:{port}" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_any_request_at_all_is_answered_and_the_service_goes_on(served):
    executor, publisher, client = served()
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.tick_once()
    chooser = random.Random(26)  # the same requests on every run
    kinds = list(b"TSBIRUNDAXrtZ\x00\xff")
    for _request in range(300):
        header = struct.pack("<BBI", chooser.choice((2, 1, 0, 255)), chooser.choice(kinds),
                             chooser.getrandbits(32)) if chooser.random() < 0.8 else os.urandom(chooser.randrange(12))
        parts = [header] + [chooser.choice((b"", b"{}", b"[", b'{"uid": 3}', b"MainTree", os.urandom(8),
                                            json.dumps({"uid": chooser.randrange(-2, 9), "position": 0}).encode()))
                            for _ in range(chooser.randrange(3))]
        reply = client.raw(*parts)
        assert reply[0] == b"error" or len(reply[0]) == 22, parts
    client.request("A")  # whatever the requests armed, let the plan go
    assert executor.run_until_complete(plan_id, timeout=WAIT_S)["outcome"] == "succeeded"
    assert len(client.statuses()) == 6


@pytest.mark.parametrize("value", [
    None, True, False, 0, 127, 128, 255, 256, 65535, 65536, 2 ** 32, 2 ** 64 - 1, -1, -32, -33, -128, -129,
    -(2 ** 15) - 1, -(2 ** 31) - 1, -(2 ** 63), 0.5, -1e300, "", "é" * 40, "x" * 300, "y" * 70_000,
    [], list(range(20)), {"k" * 31: {"nested": [1, "two", None]}}, {str(i): i for i in range(20)},
])
def test_blackboard_values_are_messagepack_as_a_reader_of_the_format_reads_them(value):
    from bt_exec.groot2.protocol import msgpack

    packed = msgpack(value)
    assert unpack_msgpack(packed, 0) == (value, len(packed))


def test_what_json_cannot_hold_is_sent_as_its_text():
    from bt_exec.groot2.protocol import msgpack

    assert unpack_msgpack(msgpack({1: float("nan"), "big": 2 ** 70, "set": {1}}), 0)[0] == {
        "1": "nan", "big": str(2 ** 70), "set": "{1}"}


def test_bt_exec_run_without_pyzmq_says_what_to_install(tmp_path, monkeypatch):
    from command_line import bt_exec_cli

    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(PLAN))
    monkeypatch.setitem(sys.modules, "zmq", None)  # as if pyzmq were not installed: importing it fails
    monkeypatch.delitem(sys.modules, "bt_exec.groot2.publisher", raising=False)
    ran = bt_exec_cli("run", plan, "--groot2", str(free_port_pair()))
    assert ran.returncode == 2 and "--groot2 needs pyzmq" in ran.stderr and "bt_exec[groot2]" in ran.stderr


def test_a_step_graph_s_branches_move_as_its_steps_run_and_route(tmp_path):
    scene = bt_exec.Scene.from_file(REPO / "examples" / "qwen3" / "scene.json")
    script = {"default": {"duration_s": 0.0}, "caps": {"transfer": {"duration_s": 30}}}
    executor = bt_exec.Executor(backend=bt_exec.SimBackend.in_scene(script, None, scene), scene=scene)
    port = free_port_pair()
    executor.start()
    with Groot2Publisher(executor, port):
        client = Groot2Client(port)
        try:
            answer = executor.submit((REPO / "examples" / "qwen3" / "cap_to_hatch.json").read_bytes())
            nodes = wait_for(lambda: client.request("T")[0] != b"error" and tree_nodes(client.tree()), "the tree")
            uid_of = {node: uid for uid, node in nodes.items()}
            branch = {node.get("name").split(":")[0]: uid_of[node] for node in nodes.values()
                      if node.tag == "Sequence" and node.get("name", "").startswith("s")
                      and ":" in node.get("name")}
            # each branch's condition, guard and transitions, and the skill leaf under its guard
            parts = {step: [uid_of[child] for child in nodes[uid]] for step, uid in branch.items()}
            leaf = {step: uid_of[nodes[parts[step][1]][0]] for step in branch}
            statuses = wait_for(lambda: (lambda s: s if s.get(leaf["s2"]) == RUNNING else None)(client.statuses()),
                                "the transfer running")
            # the step running: its branch chosen (its condition held), its skill under way
            assert [statuses[uid] for uid in (branch["s2"], *parts["s2"])] == [RUNNING, SUCCESS, RUNNING, IDLE]
            # the steps done: routed and left behind, faded; the steps not reached: idle
            assert statuses[branch["s0"]] == statuses[branch["s1"]] == 10 + SUCCESS
            assert statuses[leaf["s0"]] == statuses[leaf["s1"]] == 10 + SUCCESS
            assert statuses[branch["s4"]] == statuses[branch["s5"]] == statuses[leaf["s3"]] == IDLE
            executor.cancel_plan(answer["plan_id"])
            assert client.statuses()[leaf["s2"]] == 10 + RUNNING  # halted while it ran
        finally:
            client.close()
    executor.close()


def transitions_of(body: bytes) -> list[tuple[int, int, int]]:
    """(microseconds since recording began, uid, status) of each 9-byte transition BT.CPP's publisher sends."""
    assert len(body) % 9 == 0
    return [(int.from_bytes(body[at:at + 6], "little"), *struct.unpack("<HB", body[at + 6:at + 9]))
            for at in range(0, len(body), 9)]


def test_recording_keeps_each_status_change_until_read(served):
    executor, publisher, client = served()
    plan_id = executor.submit(PLAN)["plan_id"]
    executor.tick_once()
    before = time.time_ns() // 1000
    [started_at] = client.request("r", b"start")
    assert before <= int(started_at) <= time.time_ns() // 1000  # the time now, microseconds since the epoch
    executor.run_until_complete(plan_id, timeout=WAIT_S)
    changes = transitions_of(client.request("t")[0])
    times = [at for at, _uid, _status in changes]
    assert times == sorted(times) and all(1 <= uid <= 6 for _at, uid, _status in changes)
    of_look = [status for _at, uid, status in changes if uid == 2]  # it started before recording began
    assert of_look == [SUCCESS, IDLE]  # ended, then reset (sent as IDLE) when its parent ended
    of_report = [status for _at, uid, status in changes if uid == 6]
    assert of_report == [RUNNING, SUCCESS, IDLE]
    assert client.request("t") == [b""]  # read once
    assert client.request("r", b"stop") == []
    second = executor.submit(PLAN)["plan_id"]
    executor.run_until_complete(second, timeout=WAIT_S)
    assert client.request("r", b"pause")[0] == b"error"
    assert client.request("t") == [b""]  # a new tree: nothing recorded for it


def test_a_breakpoint_fires_once_even_on_an_op_that_runs_again(served):
    executor, publisher, client = served({"default": {"outcome": "success", "duration_s": 0.0}})
    reached = []
    executor.subscribe(lambda event: reached.append(event["op_id"]) if event["event"] == "pause_point" else None)
    executor.start()
    xml = ('<root BTCPP_format="4"><BehaviorTree ID="Loop"><Repeat num_cycles="3">'
           '<sim.act name="act"/></Repeat></BehaviorTree></root>')
    plan_id = executor.submit(xml, hold_start_s=1.0)["plan_id"]
    executor.pause_plan(plan_id)
    executor.release_start(plan_id)
    wait_for(lambda: client.request("T")[0] != b"error", "the tree")
    assert client.request("I", hook(2)) == []
    assert executor.resume_plan(plan_id)["resumed"]
    wait_for(lambda: reached and paused(executor, plan_id), "the breakpoint")
    assert client.request("U", json.dumps({"uid": 2, "position": 0, "desired_status": "SKIPPED"}).encode()) == []
    record = executor.wait_for_plan(plan_id, WAIT_S)
    assert record["outcome"] == "succeeded" and reached == ["2"]  # bt_exec's pause points fire once
    assert [op["runs"] for op in record["ops"] if op["op_id"] == "2"] == [3]


def test_a_large_plan_s_tree_is_written_off_the_tick_and_served_with_its_states(served):
    from bt_exec.groot2.publisher import WRITTEN_IN_TICK_OPS

    leaves = WRITTEN_IN_TICK_OPS + 100
    script = {"default": {"outcome": "success", "duration_s": 0.0}, "caps": {"sim.hold": {"duration_s": 60}}}
    executor, publisher, client = served(script)
    executor.start()
    tree = par(*[do(f"leaf {i}", "sim.act") for i in range(leaves - 1)], do("the last", "sim.hold"))
    plan_id = executor.submit(envelope(tree))["plan_id"]
    statuses = wait_for(lambda: (lambda s: s if s.get(leaves + 1) == RUNNING else None)(client.statuses()),
                        "the large tree served, its last leaf running")
    # what happened before the tree was served is in it: the leaves that ended already show it
    assert statuses[1] == RUNNING and set(statuses[uid] for uid in range(2, leaves + 1)) == {SUCCESS}
    assert len(tree_nodes(client.tree())) == leaves + 1 and publisher.served_plan == plan_id
    executor.cancel_plan(plan_id)
    assert client.statuses()[leaves + 1] == 10 + RUNNING  # and what happens after goes on reaching it
