"""``bt-exec robonix`` as a Robonix deployment runs robonix-executor: the command as a real process, the stand-in
Atlas and the stand-in capability providers as processes of their own, and Pilot's side a client of stubs built
from the project's protos. What Pilot sees (events, control, listing, health), what Atlas holds, the providers
called, the same plan on the console's HTTP API and in the journal, and a clean stop."""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import grpc
import pytest

from bt_exec.robonix.wire import atlas_pb2, contracts_pb2_grpc, executor_pb2, module_health_pb2, pilot_pb2

from .atlas_fixtures import StandinAtlas, register_provider
from .pilot_stubs import PilotStubs
from .provider_fixtures import ASYNC, RUN, SYNC, ProviderProcess

WAIT_S = 60.0  # the longest a test waits (a loaded machine); a pass takes far less
EXECUTOR_ID = "robot-exec"
ECHO, FAIL = "robonix/test/sync/echo", "robonix/test/sync/fail"
SEQUENCE, PARALLEL, DO = 0, 1, 2
RUNNING, SUCCEEDED, FAILED, CANCELED = 1, 2, 3, 4
PLAN_STARTED, NODE_STATE, PLAN_COMPLETE = 0, 1, 2


class Command:
    """``bt-exec robonix`` as a process; its stderr lines kept for ``expect``."""

    def __init__(self, *args: str):
        self.process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "robonix", *args],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def expect(self, pattern: str) -> re.Match:
        deadline = time.monotonic() + WAIT_S
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"bt-exec robonix printed no line matching {pattern!r}; it printed {self.seen[-10:]}")
            if line is None:
                pytest.fail(f"bt-exec robonix ended ({self.process.wait()}) before a line matching {pattern!r}; "
                            f"it printed {self.seen[-10:]}")
            self.seen.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(WAIT_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()


class Deployment(PilotStubs):
    """Atlas, the providers registered in it, bt-exec robonix registered too, and Pilot's stubs."""

    def __init__(self, journal, *options: str):
        self.atlas = StandinAtlas().start()
        self.providers = ProviderProcess()
        self.atlas_stub, self._atlas_channel = self.atlas.stub()
        register_provider(self.atlas_stub, SYNC, mcp_endpoint=f"http://{self.providers.base}/sync/mcp",
                          contracts=[ECHO, FAIL])
        register_provider(self.atlas_stub, ASYNC, mcp_endpoint=f"http://{self.providers.base}/async/mcp",
                          contracts=[RUN, f"{RUN}/status", f"{RUN}/cancel"])
        self.journal = journal
        self.command = Command("--atlas", self.atlas.address, "--listen", "127.0.0.1:0", "--id", EXECUTOR_ID,
                               "--web", "0", "--events", str(journal), "--poll-period", "0.1", *options)
        self.web = self.command.expect(r"web console: (http://\S+)").group(1).rstrip("/")
        self.address = self.command.expect(r"serving the executor's contracts at (\S+) as").group(1)
        self.atlas.expect(rf"state {EXECUTOR_ID} STATE_ACTIVE")  # registered: Pilot can find it
        self.connect(self.address)

    def inspect(self) -> dict:
        return json.loads(self.atlas_stub.InspectAtlas(atlas_pb2.InspectAtlasRequest(), timeout=10).json)

    def http(self, path: str) -> dict:
        with urllib.request.urlopen(self.web + path, timeout=WAIT_S) as answer:
            return json.load(answer)

    def close(self) -> int:
        self.channel.close()
        code = self.command.stop()
        self._atlas_channel.close()
        self.providers.stop()
        self.atlas.kill()
        return code


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    made = Deployment(tmp_path_factory.mktemp("robonix") / "events.jsonl")
    yield made
    made.close()


def node(kind, op_id, children=(), provider=None, contract=None, args=None):
    entry = pilot_pb2.RtdlNode(node_kind=kind, children=list(children), op_id=op_id, description=f"node {op_id}")
    if contract is not None:
        entry.call.CopyFrom(pilot_pb2.CapabilityCall(call_id=f"call-{op_id}", provider_id=provider,
                                                     contract_id=contract, args_json=json.dumps(args or {})))
    return entry


def plan(plan_id, *nodes):
    return pilot_pb2.Plan(plan_id=plan_id, session_id="session", round=1, nodes=list(nodes), root_index=0)


def finals(events) -> dict:
    return {e.node_state.op_id: e.node_state for e in events
            if e.event_kind == NODE_STATE and e.node_state.state not in (0, RUNNING)}


def until(stream, wanted):
    for event in stream:
        if wanted(event):
            return event
    pytest.fail("the Execute stream ended before the event waited for")


def test_it_registers_its_contracts_at_the_address_it_serves(deployment):
    provider = next(p for p in deployment.inspect()["providers"] if p["id"] == EXECUTOR_ID)
    grpc_endpoints = {c["contract_id"]: c["endpoint"] for c in provider["capabilities"] if c["endpoint"] !=
                      f"internal://{EXECUTOR_ID}/builtin"}
    assert set(grpc_endpoints) == {f"robonix/system/executor/{name}" for name in
                                   ("execute", "control_plan", "list_active_plans", "cancel_all_plans", "get_health")}
    assert set(grpc_endpoints.values()) == {deployment.address}


def test_a_plan_calls_its_providers_through_atlas_and_streams_robonix_events(deployment):
    events = list(deployment.execute(plan(
        "pilot-1",
        node(SEQUENCE, "root", children=[1, 2]),
        node(DO, "say", provider=SYNC, contract=ECHO, args={"text": "hello robot"}),
        node(DO, "drive", provider=ASYNC, contract=RUN, args={"duration_s": 0.3, "detail": "arrived"})),
        timeout=WAIT_S))
    assert events[0].event_kind == PLAN_STARTED and events[0].plan_started.plan_id == "pilot-1"
    assert events[-1].event_kind == PLAN_COMPLETE and events[-1].plan_complete.any_failed is False
    done = finals(events)
    said = done["say"].leaf_result
    assert (said.success, said.output, said.provider_id, said.contract_id) == (True, "hello robot", SYNC, ECHO)
    assert done["drive"].state == SUCCEEDED and "arrived" in done["drive"].leaf_result.output
    assert done["root"].state == SUCCEEDED and done["root"].node_index == 0


def test_a_failing_provider_and_an_unknown_one_fail_their_nodes_only(deployment):
    events = list(deployment.execute(plan(
        "pilot-2",
        node(PARALLEL, "both", children=[1, 2]),
        node(DO, "broken", provider=SYNC, contract=FAIL),
        node(DO, "nobody", provider="gripper", contract="robonix/service/gripper/close")), timeout=WAIT_S))
    done = finals(events)
    assert done["broken"].state == FAILED and done["broken"].leaf_result.error
    assert done["nobody"].state == FAILED and "gripper" in done["nobody"].leaf_result.error
    assert events[-1].plan_complete.any_failed is True
    assert deployment.health(module_health_pb2.GetModuleHealth_Request(), timeout=WAIT_S).report.module.state == \
        "active"


def test_stop_at_on_enter_and_the_same_plan_on_every_door(deployment):
    stream = deployment.execute(plan(
        "pilot-3",
        node(SEQUENCE, "root", children=[1, 2]),
        node(DO, "drive", provider=ASYNC, contract=RUN, args={"duration_s": 1.0}),
        node(DO, "say", provider=SYNC, contract=ECHO, args={"text": "never"})), timeout=WAIT_S)
    until(stream, lambda e: e.event_kind == NODE_STATE and e.node_state.op_id == "drive" and
          e.node_state.state == RUNNING)
    armed = deployment.control(executor_pb2.ControlPlan_Request(action="stop_at", plan_id="pilot-3", op_id="say",
                                                                when="on_enter"), timeout=WAIT_S)
    assert armed.success, armed.error
    listed = json.loads(deployment.list(executor_pb2.ListActivePlans_Request(), timeout=WAIT_S).plans_json)
    (mine,) = [p for p in listed["plans"] if p["plan_id"] == "pilot-3"]
    assert {op["op_id"]: op["state"] for op in mine["ops"]}["drive"] == "running"
    on_console = deployment.http("/api/plans")["plans"]  # the console's API: the same executor, the same plan
    assert len(on_console) == 1 and on_console[0]["op_count"] == 3
    rest = list(stream)
    assert finals(rest)["say"].state == CANCELED and rest[-1].plan_complete.any_failed is True


def eventually(what: str, value):
    """``value()`` once it is truthy, asked every 50 ms for at most WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not (answer := value()):
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)
    return answer


def test_cancel_all_during_an_async_call_cancels_it_at_the_provider(deployment):
    before = set(deployment.providers.state()["runs"])
    stream = deployment.execute(plan("pilot-4", node(DO, "wander", provider=ASYNC, contract=RUN,
                                                     args={"duration_s": 600})), timeout=WAIT_S)
    until(stream, lambda e: e.event_kind == NODE_STATE and e.node_state.state == RUNNING)
    (run_id,) = eventually("the provider started the run", lambda: set(deployment.providers.state()["runs"]) - before)
    assert deployment.cancel_all(executor_pb2.CancelAll_Request(), timeout=WAIT_S).success
    rest = list(stream)
    assert rest[-1].event_kind == PLAN_COMPLETE and rest[-1].plan_complete.any_failed is True
    cancelled = eventually("the provider was sent <id>/cancel",
                           lambda: deployment.providers.state()["runs"][run_id]["cancelled_by"])
    assert cancelled == run_id


def test_the_journal_holds_what_pilot_saw(deployment):
    def completes():
        lines = deployment.journal.read_text().splitlines() if deployment.journal.exists() else []
        return [json.loads(line) for line in lines if '"plan_complete"' in line]

    before = len(completes())  # the module's other tests may have run plans on this deployment first
    for plan_id, contract in (("pilot-journal-1", ECHO), ("pilot-journal-2", FAIL)):
        list(deployment.execute(plan(plan_id, node(DO, "only", provider=SYNC, contract=contract,
                                                   args={"text": "noted"})), timeout=WAIT_S))
    ended = eventually("two more plans in the journal", lambda: completes()[before:] if len(completes()) >= before + 2
                       else None)
    assert [c["outcome"] for c in ended] == ["succeeded", "failed"]


def test_sigterm_stops_it_cleanly_and_takes_the_registration_back(tmp_path):
    deployment = Deployment(tmp_path / "events.jsonl")
    try:
        assert deployment.command.stop() == 0
        deployment.atlas.expect(rf"unregister {EXECUTOR_ID} true")
        assert not any("Traceback" in line for line in deployment.command.seen)
    finally:
        deployment.close()


def test_an_atlas_away_at_start_is_retried_while_the_contracts_are_served(tmp_path):
    from .atlas_fixtures import free_port

    command = Command("--atlas", f"127.0.0.1:{free_port()}", "--listen", "127.0.0.1:0")
    try:
        address = command.expect(r"serving the executor's contracts at (\S+) as 'executor'").group(1)
        command.expect(r"registration attempt \d+ failed: .*; next try in")  # the first may come before
        with grpc.insecure_channel(address) as channel:
            health = contracts_pb2_grpc.RobonixSystemExecutorGetHealthStub(channel).GetModuleHealth(
                module_health_pb2.GetModuleHealth_Request(), timeout=WAIT_S)
        assert (health.report.module.provider_id, health.report.module.state) == ("executor", "active")
        assert command.stop() == 0
        assert not any("Traceback" in line for line in command.seen)
    finally:
        command.stop()


@pytest.mark.parametrize("args, message", [
    (["--atlas", "atlas-without-port"], "--atlas: not HOST:PORT: 'atlas-without-port'"),
    (["--listen", "127.0.0.1:99999"], "--listen: not HOST:PORT: '127.0.0.1:99999'"),
    (["--id", " "], "--id: the provider id is empty"),
])
def test_bad_settings_are_refused_naming_the_option(args, message):
    from command_line import bt_exec_cli

    done = bt_exec_cli("robonix", *args)
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_the_settings_come_from_robonix_executors_environment_variables():
    from bt_exec.cli.dispatch import build_parser
    from bt_exec.cli.robonix_commands import settings

    plain = build_parser().parse_args(["robonix"])
    assert settings(plain, {}) == ("127.0.0.1:50051", "127.0.0.1:50061", "executor")
    environ = {"ROBONIX_ATLAS": "10.0.0.2:1", "ROBONIX_EXECUTOR_LISTEN": "0.0.0.0:7000",
               "ROBONIX_EXECUTOR_PROVIDER_ID": "robot9"}
    assert settings(plain, environ) == ("10.0.0.2:1", "0.0.0.0:7000", "robot9")
    assert settings(plain, {**environ, "ROBONIX_ATLAS_ENDPOINT": "10.0.0.3:2"})[0] == "10.0.0.3:2"
    given = build_parser().parse_args(["robonix", "--atlas", "h:3", "--listen", "h:4", "--id", "me"])
    assert settings(given, environ) == ("h:3", "h:4", "me")


def test_atlas_going_away_mid_plan_fails_the_calls_that_need_it_and_it_registers_again(tmp_path):
    deployment = Deployment(tmp_path / "events.jsonl", "--heartbeat", "0.3")
    try:
        stream = deployment.execute(plan(
            "pilot-5",
            node(SEQUENCE, "root", children=[1, 2]),
            node(DO, "drive", provider=ASYNC, contract=RUN, args={"duration_s": 1.5}),
            node(DO, "say", provider=SYNC, contract=ECHO, args={"text": "after Atlas left"})), timeout=WAIT_S)
        before = set(deployment.providers.state()["runs"])
        until(stream, lambda e: e.event_kind == NODE_STATE and e.node_state.op_id == "drive" and
              e.node_state.state == RUNNING)
        eventually("the drive under way at its provider", lambda: set(deployment.providers.state()["runs"]) - before)
        deployment.atlas.kill()  # the drive's provider was found already; the next call needs Atlas
        rest = list(stream)
        done = finals(rest)
        assert done["drive"].state == SUCCEEDED  # a call under way goes on without Atlas
        assert done["say"].state == FAILED and "Atlas" in done["say"].leaf_result.error
        assert rest[-1].event_kind == PLAN_COMPLETE and rest[-1].plan_complete.any_failed is True

        deployment.atlas.start()  # on the same port, knowing nothing
        deployment.atlas.expect(rf"state {EXECUTOR_ID} STATE_ACTIVE")
        health = deployment.health(module_health_pb2.GetModuleHealth_Request(), timeout=WAIT_S)
        assert health.report.module.state == "active"
        assert not any("Traceback" in line for line in deployment.command.seen)
    finally:
        deployment.close()
