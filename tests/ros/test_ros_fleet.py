"""Several robots on one DDS domain: each bt_exec node in a namespace of its own, found by `bt-exec robots` and
addressed with `--robot NS`; a plan stays on the robot it was sent to, under a fleet soak of many clients."""
import collections
import json
import os
import random
import threading
import time

import pytest

import rosutil
from rosutil import do, plan, seq


def test_robots_are_discovered_and_addressed_by_namespace(ros, start_node, sim_script):
    first, second = start_node(sim_script=str(sim_script)), start_node(sim_script=str(sim_script))
    running = ros.call(second.name, "submit", graph_json=plan(seq(do("sim.slow"))))
    assert running.accepted
    try:
        listed = rosutil.run_cli("robots", "--json")
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        robots = {robot["namespace"]: robot for robot in json.loads(listed.stdout)["robots"]}
        assert robots[first.namespace] == {"namespace": first.namespace, "node": first.name, "health": "ok",
                                           "plans": []}
        assert robots[second.namespace]["plans"] == [running.plan_id]

        text = rosutil.run_cli("robots")
        assert f"{second.namespace}  {second.name}  ok  1 plan(s) in flight: {running.plan_id}" in text.stdout

        namespace = first.namespace.lstrip("/")  # --robot takes it with or without the leading slash
        plans = rosutil.run_cli("plans", "--robot", namespace, "--json")
        assert plans.returncode == 0 and json.loads(plans.stdout) == {"count": 0, "plans": []}, plans.stderr
        other = rosutil.run_cli("plans", "--robot", second.namespace, "--json")
        assert [entry["plan_id"] for entry in json.loads(other.stdout)["plans"]] == [running.plan_id]

        both = rosutil.run_cli("plans", "--robot", "robot1", "--node", "/bt_exec")
        assert both.returncode == 2 and "not allowed with" in both.stderr
        bad = rosutil.run_cli("plans", "--robot", "1robot")
        assert bad.returncode == 2 and "is not a ROS namespace" in bad.stderr
    finally:
        ros.call(second.name, "cancel", plan_id=running.plan_id, wait_ms=5000)


# --- the fleet soak -------------------------------------------------------------------------------------------------

FLEET_SIZE = 4
CLIENT_THREADS = 8
SOAK_S = float(os.environ.get("BT_EXEC_FLEET_SOAK_S", "30"))  # CI's short form; longer by hand
STEP_OP = 2  # the plan's long op: stops and cancels land while it runs
LAST_OP = 4


def soak_plan(tag: str) -> str:
    """A sequence of op 2 (0.4 s), op 3 and op 4 (the executor gives them ids of its own); the description names
    the robot and the submitter."""
    ops = [{"op": "do", "op_id": op_id, "description": f"op {op_id}", "cap": cap, "args": {}}
           for op_id, cap in ((STEP_OP, "sim.step"), (3, "sim.act"), (LAST_OP, "sim.act"))]
    return json.dumps({"content": None, "rtdl_description": tag, "task_update": None,
                       "rtdl": {"op": "sequence", "op_id": 1, "description": "in order", "children": ops}})


@pytest.mark.soak
def test_fleet_soak_every_plan_ends_once_on_its_own_robot(ros, start_node, sim_script):
    """Four namespaced nodes, many client threads submitting, stopping and cancelling on all of them for
    BT_EXEC_FLEET_SOAK_S seconds. Plan ids repeat from robot to robot (each node counts from 1), so a stop or a
    cancel that reached the wrong robot would end another robot's plan of the same id the wrong way."""
    robots = [start_node(sim_script=str(sim_script)) for _ in range(FLEET_SIZE)]
    streams = []
    for robot in robots:
        collector, subscription = ros.subscribe(f"{robot.name}/status")
        ros.wait_matched(subscription)
        streams.append((collector, subscription))
    sent = []  # (robot index, run_id, plan_id, action, expected outcome)
    problems = []
    lock = threading.Lock()
    deadline = time.monotonic() + SOAK_S

    def client(thread: int) -> None:
        chooser = random.Random(thread)
        count = 0
        while time.monotonic() < deadline:
            index = chooser.randrange(FLEET_SIZE)
            robot = robots[index]
            count += 1
            run_id = f"robot{index}-thread{thread}-{count}"
            answer = ros.call(robot.name, "submit", timeout=30, run_id=run_id, graph_json=soak_plan(run_id))
            if not answer.accepted:
                with lock:
                    problems.append(f"{run_id} refused: {answer.verdict}: {answer.message}")
                continue
            action = chooser.choice(("run", "stop", "cancel"))
            expected, said = "succeeded", ""
            if action == "stop":
                status = json.loads(ros.call(robot.name, "get_status", timeout=30, plan_id=answer.plan_id).status_json)
                (last,) = [op["op_id"] for op in status["ops"] if op["description"] == f"op {LAST_OP}"]
                stop = ros.call(robot.name, "stop_at", timeout=30, plan_id=answer.plan_id, op_id=last, when="on_enter")
                if not stop.success:
                    with lock:
                        problems.append(f"{run_id}: stop_at failed: {stop.message}")
                # armed too late (the machine held this thread past op 2) is said so: the plan then succeeds
                fires = "Stop point set" in stop.message and "will not fire" not in stop.message
                expected, said = ("cancelled" if fires else "succeeded"), stop.message
            elif action == "cancel":
                cancel = ros.call(robot.name, "cancel", timeout=30, plan_id=answer.plan_id, wait_ms=5000)
                if not cancel.success or not cancel.finished:
                    with lock:
                        problems.append(f"{run_id}: cancel: {cancel.message}")
                expected, said = ("succeeded" if "already finished" in cancel.message else "cancelled"), cancel.message
            with lock:
                sent.append((index, run_id, answer.plan_id, f"{action} {said}", expected))
            time.sleep(chooser.uniform(0.05, 0.3))

    threads = [threading.Thread(target=client, args=(thread,), daemon=True) for thread in range(CLIENT_THREADS)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SOAK_S + 120)
        assert not any(thread.is_alive() for thread in threads), "a client thread is stuck"
        assert problems == []
        assert {index for index, *_ in sent} == set(range(FLEET_SIZE)) and len(sent) >= 4 * FLEET_SIZE
        for index, (collector, _subscription) in enumerate(streams):
            mine = {run_id: (plan_id, action, expected) for robot, run_id, plan_id, action, expected in sent
                    if robot == index}

            def all_complete(messages, mine=mine):
                done = {event["run_id"] for event in map(json.loads, messages) if event.get("event") == "plan_complete"}
                return set(mine) <= done

            collector.wait_for(all_complete, timeout=60)
            events = collector.events()
            started = collections.Counter(event["run_id"] for event in events if event.get("event") == "plan_started")
            complete = [event for event in events if event.get("event") == "plan_complete"]
            ended = collections.Counter(event["run_id"] for event in complete)
            assert set(started) == set(mine) and set(started.values()) == {1}, f"robot {index}: plans started"
            assert set(ended) == set(mine) and set(ended.values()) == {1}, f"robot {index}: plans ended"
            for event in complete:  # on its own robot, as itself, the way its stop or cancel said
                plan_id, action, expected = mine[event["run_id"]]
                record = "" if event["outcome"] == expected else \
                    ros.call(robots[index].name, "get_status", plan_id=plan_id).status_json
                assert (event["plan_id"], event["description"], event["outcome"]) == \
                    (plan_id, event["run_id"], expected), (action, event, record)
        actions = collections.Counter(action.split()[0] for *_, action, _expected in sent)
        print(f"fleet soak: {len(sent)} plans on {FLEET_SIZE} robots in {SOAK_S:g} s: {dict(actions)}")
    finally:
        for _collector, subscription in streams:
            ros.unsubscribe(subscription)
