"""bt-exec robonix and Atlas, on a real stand-in Atlas process: what the executor registers (namespace, the five
gRPC contracts with their service and method, the builtins as MCP at internal://<id>/builtin, ACTIVE), its
heartbeat, registering again when Atlas restarts, Atlas unreachable at start (retried, one log line an
attempt, no traceback), and the dispatch side: resolving a provider's capability (sync or async), unknown
providers and contracts, and a skill Atlas reports INACTIVE activated through its lifecycle Driver."""
from __future__ import annotations

import json
import logging
import socket
import threading

import pytest

from bt_exec.compilers.catalog import BUILTIN_ARGS_SCHEMAS
from bt_exec.robonix import atlas
from bt_exec.robonix.wire import atlas_pb2 as pb

from .atlas_fixtures import EVENT_WAIT_S, SkillDriver, StandinAtlas, free_port, register_provider

FAST = {"heartbeat_s": 0.2, "retry_first_s": 0.05, "retry_max_s": 0.2}
LOGGER = "bt_exec.robonix.atlas"

FIVE_CONTRACTS = {
    "robonix/system/executor/execute": ("robonix.contracts.RobonixSystemExecutorExecute", "Execute"),
    "robonix/system/executor/control_plan": ("robonix.contracts.RobonixSystemExecutorControlPlan", "ControlPlan"),
    "robonix/system/executor/list_active_plans": ("robonix.contracts.RobonixSystemExecutorListActivePlans",
                                                  "ListActivePlans"),
    "robonix/system/executor/cancel_all_plans": ("robonix.contracts.RobonixSystemExecutorCancelAllPlans", "CancelAll"),
    "robonix/system/executor/get_health": ("robonix.contracts.RobonixSystemExecutorGetHealth", "GetModuleHealth"),
}


@pytest.fixture
def standin():
    """A stand-in Atlas of the test's own: the registration tests read its whole registry and event lines."""
    running = StandinAtlas().start()
    yield running
    running.kill()


@pytest.fixture
def atlas_stub(standin):
    stub, channel = standin.stub()
    yield stub
    channel.close()


@pytest.fixture
def client(standin):
    made = atlas.AtlasClient(standin.address, "executor", deadline_s=2.0)
    yield made
    made.close()


@pytest.fixture(scope="module")
def shared():
    """One stand-in Atlas for the dispatch tests (each registers providers of ids of its own): ``(standin,
    stub)``."""
    running = StandinAtlas().start()
    stub, channel = running.stub()
    yield running, stub
    channel.close()
    running.kill()


@pytest.fixture
def resolver(shared):
    made = atlas.AtlasClient(shared[0].address, "executor", deadline_s=2.0)
    yield atlas.AtlasResolver(made)
    made.close()


def inspect(stub) -> dict:
    return json.loads(stub.InspectAtlas(pb.InspectAtlasRequest(), timeout=5).json)


def provider_in(stub, provider_id: str) -> dict:
    return next(p for p in inspect(stub)["providers"] if p["id"] == provider_id)


def channels_to(stub, provider_id: str) -> list[dict]:
    return [channel for channel in inspect(stub)["channels"] if channel["provider_id"] == provider_id]


def registration(provider_id="executor", listen="0.0.0.0:50061") -> atlas.Registration:
    return atlas.Registration(provider_id, atlas.advertised_address(listen))


def assert_no_traceback(caplog) -> None:
    assert all(record.exc_info is None for record in caplog.records)
    assert "Traceback" not in caplog.text


# -- registration ---------------------------------------------------------------------------------------------

def test_registration_declares_the_five_contracts_the_builtins_and_active(standin, atlas_stub, client):
    client.start(registration(), **FAST)
    assert client.wait_registered(10)

    executor = provider_in(atlas_stub, "executor")
    assert (executor["kind"], executor["namespace"], executor["state"]) == \
        ("KIND_SERVICE", "robonix/system/executor", "STATE_ACTIVE")
    grpc_caps = {c["contract_id"]: c for c in executor["capabilities"] if c["transport"] == "TRANSPORT_GRPC"}
    assert set(grpc_caps) == set(FIVE_CONTRACTS)
    for contract_id, (service, rpc) in FIVE_CONTRACTS.items():
        declared = grpc_caps[contract_id]
        assert declared["endpoint"] == "127.0.0.1:50061"  # 0.0.0.0 is advertised as loopback
        assert declared["params"]["grpc"]["service_name"] == service
        assert declared["params"]["grpc"]["method"] == f"/{service}/{rpc}"
        assert declared["params"]["grpc"]["proto_file"].startswith("capabilities/system/executor/")

    mcp_caps = {c["contract_id"]: c for c in executor["capabilities"] if c["transport"] == "TRANSPORT_MCP"}
    assert set(mcp_caps) == {f"robonix/system/executor/builtin/{name}" for name in BUILTIN_ARGS_SCHEMAS}
    for name, schema in BUILTIN_ARGS_SCHEMAS.items():
        declared = mcp_caps[f"robonix/system/executor/builtin/{name}"]
        assert declared["endpoint"] == "internal://executor/builtin"
        assert json.loads(declared["params"]["mcp"]["input_schema_json"]) == schema
        assert declared["description"]
    assert len(executor["capabilities"]) == len(FIVE_CONTRACTS) + len(BUILTIN_ARGS_SCHEMAS)

    # The read view Pilot uses shows the same, without endpoints.
    shown = atlas_stub.Query(pb.QueryRequest(namespace_prefix="robonix/system/executor"), timeout=5).providers
    assert [(p.id, p.kind, p.state) for p in shown] == [("executor", pb.KIND_SERVICE, pb.STATE_ACTIVE)]


def test_the_provider_id_names_the_registration_and_the_builtin_endpoint(standin, atlas_stub):
    client = atlas.AtlasClient(standin.address, "robot7-executor", deadline_s=2.0)
    try:
        client.start(registration("robot7-executor", "127.0.0.1:7000"), **FAST)
        assert client.wait_registered(10)
        declared = provider_in(atlas_stub, "robot7-executor")["capabilities"]
        assert {c["endpoint"] for c in declared} == {"127.0.0.1:7000", "internal://robot7-executor/builtin"}
    finally:
        client.close()


def test_heartbeats_follow_the_period(standin, client):
    client.start(registration(), **FAST)
    for _ in range(3):
        standin.expect(r"heartbeat executor")


def test_close_stops_the_heartbeat_and_unregisters(standin, client):
    client.start(registration(), **FAST)
    standin.expect(r"heartbeat executor")
    client.close()
    standin.expect(r"unregister executor true")
    assert not client.registered


def test_registers_again_after_atlas_restarts(standin, atlas_stub, client, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    client.start(registration(), **FAST)
    standin.expect(r"state executor STATE_ACTIVE")
    # Atlas printed its last step before the client had its answer: a crash before that fails the attempt
    # itself, which is retried, not found missing by a heartbeat.
    assert client.wait_registered(EVENT_WAIT_S)
    port = standin.port

    standin.kill()  # a crash: the new Atlas knows nothing
    standin.start()
    assert standin.port == port
    standin.expect(r"register KIND_SERVICE executor")
    standin.expect(r"state executor STATE_ACTIVE")

    executor = provider_in(atlas_stub, "executor")
    assert len(executor["capabilities"]) == len(FIVE_CONTRACTS) + len(BUILTIN_ARGS_SCHEMAS)
    assert "no longer knows 'executor'" in caplog.text
    assert_no_traceback(caplog)


def test_atlas_unreachable_at_start_is_retried_with_a_line_an_attempt(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    port = free_port()
    client = atlas.AtlasClient(f"127.0.0.1:{port}", "executor", deadline_s=2.0)
    later = StandinAtlas(port)
    try:
        client.start(registration(), **FAST)
        failed = threading.Event()
        handler = _EventOnMessage("registration attempt 2 failed", failed)
        logging.getLogger(LOGGER).addHandler(handler)
        try:
            assert failed.wait(10)
        finally:
            logging.getLogger(LOGGER).removeHandler(handler)
        assert not client.registered

        later.start()  # Atlas comes up late: the retries find it
        assert client.wait_registered(15)
    finally:
        client.close()
        later.kill()

    attempts = [r for r in caplog.records if "registration attempt" in r.getMessage()]
    assert attempts and all(r.levelno == logging.WARNING for r in attempts)
    assert f"Atlas at 127.0.0.1:{port}: registration attempt 1 failed" in attempts[0].getMessage()
    assert "unreachable" in attempts[0].getMessage()
    assert_no_traceback(caplog)


class _EventOnMessage(logging.Handler):
    def __init__(self, text: str, event: threading.Event):
        super().__init__()
        self.text, self.event = text, event

    def emit(self, record):
        if self.text in record.getMessage():
            self.event.set()


def test_an_atlas_that_never_answers_fails_the_call_by_its_deadline():
    with socket.socket() as silent:  # accepts connections in the kernel, never speaks gRPC
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        client = atlas.AtlasClient(f"127.0.0.1:{silent.getsockname()[1]}", "executor", deadline_s=0.3)
        answered = threading.Event()
        failure = []

        def resolve():
            try:
                atlas.AtlasResolver(client).resolve("arm", "robonix/service/arm/move")
            except atlas.AtlasError as error:
                failure.append(error)
            answered.set()

        threading.Thread(target=resolve, daemon=True).start()
        try:
            assert answered.wait(10), "a call to an Atlas that never answers did not end"
        finally:
            client.close()
    # gRPC ends it as the deadline (DEADLINE_EXCEEDED) or as its handshake's own timeout (UNAVAILABLE)
    assert isinstance(failure[0], atlas.AtlasUnreachable)
    assert f"Atlas at {client.endpoint}" in str(failure[0]) and "Query for provider 'arm'" in str(failure[0])


# -- dispatch -------------------------------------------------------------------------------------------------

def test_resolve_opens_a_channel_to_a_sync_capability_and_release_closes_it(shared, resolver):
    standin, atlas_stub = shared
    register_provider(atlas_stub, "arm", mcp_endpoint="http://127.0.0.1:9100/mcp",
                      contracts=["robonix/service/arm/move"])

    endpoint = resolver.resolve("arm", "robonix/service/arm/move")
    assert (endpoint.url, endpoint.asynchronous) == ("http://127.0.0.1:9100/mcp", False)
    channel = standin.expect(r"connect (\S+) arm robonix/service/arm/move TRANSPORT_MCP (\S+)")
    assert channel.group(1) == "executor"  # the executor is the consumer
    assert channel.group(2) == endpoint.channel
    assert [c["channel_id"] for c in channels_to(atlas_stub, "arm")] == [endpoint.channel]

    resolver.release(endpoint)
    standin.expect(rf"disconnect {endpoint.channel} true")
    assert channels_to(atlas_stub, "arm") == []


def test_resolve_finds_an_async_capability_by_its_status_and_cancel(shared, resolver):
    navigate = "robonix/service/navigation/navigate"
    register_provider(shared[1], "nav", contracts=[navigate, f"{navigate}/status", f"{navigate}/cancel"])

    run = resolver.resolve("nav", navigate)
    assert run.asynchronous
    status = resolver.resolve("nav", f"{navigate}/status")  # the status contract itself is a plain call
    assert not status.asynchronous
    for resolved in (run, status):
        resolver.release(resolved)


def test_an_async_capability_missing_its_cancel_is_refused(shared, resolver):
    navigate = "robonix/service/navigation/navigate"
    register_provider(shared[1], "half_nav", contracts=[navigate, f"{navigate}/status"])
    with pytest.raises(atlas.AtlasError, match=f"declares '{navigate}/status' but not '{navigate}/cancel'"):
        resolver.resolve("half_nav", navigate)
    assert channels_to(shared[1], "half_nav") == []


def test_an_unknown_provider_or_contract_is_a_clear_error(shared, resolver):
    register_provider(shared[1], "arm2", contracts=["robonix/service/arm2/move"])
    with pytest.raises(atlas.ProviderUnknown, match=f"provider 'gripper' is not registered with Atlas at "
                                                    f"{shared[0].address}"):
        resolver.resolve("gripper", "robonix/service/gripper/close")
    with pytest.raises(atlas.CapabilityUnknown, match="provider 'arm2' declares no MCP capability "
                                                      "'robonix/service/arm2/wave'.*robonix/service/arm2/move"):
        resolver.resolve("arm2", "robonix/service/arm2/wave")


def test_atlas_unreachable_on_resolve_names_atlas():
    dead = atlas.AtlasClient(f"127.0.0.1:{free_port()}", "executor", deadline_s=2.0)
    try:
        with pytest.raises(atlas.AtlasUnreachable, match=r"Atlas at 127\.0\.0\.1:\d+ is unreachable "
                                                         r"\(Query for provider 'arm'\)"):
            atlas.AtlasResolver(dead).resolve("arm", "robonix/service/arm/move")
    finally:
        dead.close()


@pytest.fixture
def skill(shared):
    """``make(provider_id, refuse=None, state="INACTIVE")``: a skill registered with its Driver served."""
    drivers = []

    def make(provider_id, refuse=None, state="INACTIVE"):
        driver = SkillDriver(shared[0], provider_id, refuse=refuse)
        drivers.append(driver)
        register_provider(shared[1], provider_id, kind="skill", contracts=[f"robonix/skill/{provider_id}/run"],
                          driver_endpoint=driver.endpoint, state=state)
        return driver

    yield make
    for driver in drivers:
        driver.stop()


def test_an_inactive_skill_is_activated_through_its_driver_once(shared, resolver, skill):
    standin, atlas_stub = shared
    driver = skill("explore")

    first = resolver.resolve("explore", "robonix/skill/explore/run")
    assert driver.commands == [atlas.CMD_ACTIVATE]
    activation = standin.expect(r"connect (\S+) explore robonix/lifecycle/driver TRANSPORT_GRPC (\S+)")
    assert activation.group(1) == atlas.SKILL_ACTIVATION_CONSUMER
    standin.expect(rf"disconnect {activation.group(2)} true")  # the Driver's channel is closed after it
    assert provider_in(atlas_stub, "explore")["state"] == "STATE_ACTIVE"

    second = resolver.resolve("explore", "robonix/skill/explore/run")
    assert driver.commands == [atlas.CMD_ACTIVATE]  # active now: not activated again
    for resolved in (first, second):
        resolver.release(resolved)


def test_a_skill_refusing_activation_fails_the_call_with_its_reason(resolver, skill):
    skill("vla", refuse="no GPU left")
    with pytest.raises(atlas.SkillActivationFailed, match="skill 'vla' refused activation .*no GPU left"):
        resolver.resolve("vla", "robonix/skill/vla/run")


def test_a_skill_in_error_is_not_activated(resolver, skill):
    driver = skill("grasp", state="ERROR")
    with pytest.raises(atlas.SkillActivationFailed, match="skill 'grasp' is ERROR in Atlas.*only from INACTIVE"):
        resolver.resolve("grasp", "robonix/skill/grasp/run")
    assert driver.commands == []


def test_an_unreachable_driver_fails_the_activation(shared, resolver):
    register_provider(shared[1], "ghost", kind="skill", contracts=["robonix/skill/ghost/run"],
                      driver_endpoint=f"127.0.0.1:{free_port()}", state="INACTIVE")
    with pytest.raises(atlas.SkillActivationFailed, match="the Driver of skill 'ghost' at .* is unreachable"):
        resolver.resolve("ghost", "robonix/skill/ghost/run")
    assert channels_to(shared[1], "ghost") == []


def test_names_and_addresses():
    assert atlas.service_name("robonix/system/executor/list_active_plans") == "RobonixSystemExecutorListActivePlans"
    assert atlas.service_name("robonix/lifecycle/driver") == "RobonixLifecycleDriver"
    assert atlas.advertised_address("0.0.0.0:50061") == "127.0.0.1:50061"
    assert atlas.advertised_address("[::]:50061") == "[::1]:50061"
    assert atlas.advertised_address("10.1.2.3:50061") == "10.1.2.3:50061"


# -- Atlas behind the MCP backend -----------------------------------------------------------------------------

def test_the_mcp_backend_calls_providers_found_through_atlas(shared, resolver):
    """A do node's path as robonix-executor's: Atlas's resolver behind the MCP backend, on the stand-in
    providers (a real process), sync and async; every channel closed after its call; an unknown provider fails
    its call with Atlas's answer."""
    pytest.importorskip("mcp.client.streamable_http", reason="the MCP dispatch needs the mcp package")
    from bt_exec.backends import CapabilityCall
    from bt_exec.robonix.dispatch import McpBackend

    from .provider_fixtures import ASYNC, RUN, SYNC, ProviderProcess

    standin, atlas_stub = shared
    providers = ProviderProcess()
    news = threading.Event()
    backend = McpBackend(resolver, notify=news.set, poll_period_s=0.05)
    try:
        register_provider(atlas_stub, SYNC, mcp_endpoint=f"{providers.base}/sync",
                          contracts=["robonix/test/sync/echo"])
        register_provider(atlas_stub, ASYNC, mcp_endpoint=f"http://{providers.base}/async/mcp",
                          contracts=[RUN, f"{RUN}/status", f"{RUN}/cancel"])

        def final(provider, contract, **args):
            run_id = backend.start(CapabilityCall("plan", "op", contract, args, provider, "call"))
            while True:
                news.clear()
                status = backend.status(run_id)
                if status.terminal:
                    return status
                assert news.wait(30), f"{contract} of {provider} gave no news"

        echoed = final(SYNC, "robonix/test/sync/echo", text="through Atlas")
        assert (echoed.state, echoed.output) == ("SUCCEEDED", "through Atlas")
        ran = final(ASYNC, RUN, duration_s=0.1, detail="arrived")
        assert ran.state == "SUCCEEDED" and "arrived" in ran.output
        unknown = final("gripper", "robonix/service/gripper/close")
        assert unknown.state == "FAILED" and "provider 'gripper' is not registered with Atlas" in unknown.error

        opened, closed = {}, set()  # each call's channel, closed as its work ends
        while len(opened) < 2 or set(opened.values()) - closed:
            line = standin.expect(rf"connect executor ({SYNC}|{ASYNC}) \S+ TRANSPORT_MCP (\S+)|disconnect (\S+) true")
            if line.group(1):
                opened[line.group(1)] = line.group(2)
            else:
                closed.add(line.group(3))
        assert channels_to(atlas_stub, SYNC) == channels_to(atlas_stub, ASYNC) == []
    finally:
        backend.close()
        providers.stop()
