"""The wire facts of the Robonix executor's contracts, checked on the stubs built from interfaces/robonix.

The tables below are Robonix's facts, kept here apart from our .proto files so that a change to either shows:
message and field names, field numbers and types, the state and event-kind numbers, the five services with
their method paths and streaming. Each table cites the upstream file it comes from (interfaces/robonix/UPSTREAM
names the commits). The round trips encode and decode protobuf's wire format by hand, with those numbers, so
the numbering is checked independently of the stubs.
"""
import os
import subprocess
import sys
from concurrent import futures

import grpc
import pytest
from google.protobuf.descriptor import FieldDescriptor

from bt_exec.robonix import stubs
from bt_exec.robonix.wire import contracts_pb2, contracts_pb2_grpc, executor_pb2, module_health_pb2, pilot_pb2

# Full message name -> its fields in number order: (name, number, type). A message type is its full name;
# "repeated " marks a repeated field. ROS integers narrower than 32 bits travel as uint32/int32 (codegen rule).
MESSAGES = {
    # capabilities/lib/pilot/msg/Plan.msg
    "robonix.pilot.Plan": [("plan_id", 1, "string"), ("session_id", 2, "string"), ("round", 3, "uint32"),
                           ("nodes", 4, "repeated robonix.pilot.RtdlNode"), ("root_index", 5, "uint32"),
                           ("auth_session_token", 6, "string")],
    # capabilities/lib/pilot/msg/RtdlNode.msg
    "robonix.pilot.RtdlNode": [("node_kind", 1, "uint32"), ("children", 2, "repeated uint32"),
                               ("call", 3, "robonix.pilot.CapabilityCall"), ("op_id", 4, "string"),
                               ("description", 5, "string")],
    # pilot/msg/CapabilityCall.msg (robonix-client's generated pilot descriptor)
    "robonix.pilot.CapabilityCall": [("call_id", 1, "string"), ("provider_id", 2, "string"),
                                     ("contract_id", 3, "string"), ("args_json", 4, "string")],
    # capabilities/lib/pilot/msg/CapabilityCallResult.msg
    "robonix.pilot.CapabilityCallResult": [("call_id", 1, "string"), ("provider_id", 2, "string"),
                                           ("contract_id", 3, "string"), ("success", 4, "bool"),
                                           ("output", 5, "string"), ("error", 6, "string")],
    # capabilities/lib/pilot/msg/RtdlNodeState.msg (its constants are no fields)
    "robonix.pilot.RtdlNodeState": [("plan_id", 1, "string"), ("node_index", 2, "uint32"),
                                    ("node_kind", 3, "uint32"), ("state", 4, "uint32"),
                                    ("operator_detail", 5, "string"),
                                    ("leaf_result", 6, "robonix.pilot.CapabilityCallResult"),
                                    ("op_id", 7, "string"), ("description", 8, "string")],
    # capabilities/lib/executor/msg/RtdlEvent.msg
    "robonix.executor.RtdlEvent": [("event_kind", 1, "uint32"),
                                   ("plan_started", 2, "robonix.executor.RtdlPlanStarted"),
                                   ("node_state", 3, "robonix.pilot.RtdlNodeState"),
                                   ("plan_complete", 4, "robonix.executor.RtdlPlanComplete")],
    # executor/msg/RtdlPlanStarted.msg, RtdlPlanComplete.msg (robonix-client's generated executor descriptor)
    "robonix.executor.RtdlPlanStarted": [("plan_id", 1, "string")],
    "robonix.executor.RtdlPlanComplete": [("plan_id", 1, "string"), ("any_failed", 2, "bool")],
    # capabilities/lib/executor/srv/ControlPlan.srv
    "robonix.executor.ControlPlan_Request": [("action", 1, "string"), ("plan_id", 2, "string"),
                                             ("op_id", 3, "string"), ("when", 4, "string"),
                                             ("wait_ms", 5, "uint64")],
    "robonix.executor.ControlPlan_Response": [("success", 1, "bool"), ("completed", 2, "bool"),
                                              ("message", 3, "string"), ("error", 4, "string")],
    # capabilities/lib/executor/srv/ListActivePlans.srv
    "robonix.executor.ListActivePlans_Request": [],
    "robonix.executor.ListActivePlans_Response": [("success", 1, "bool"), ("plans_json", 2, "string"),
                                                  ("error", 3, "string")],
    # executor/srv/CancelAll.srv (robonix-client's generated executor descriptor)
    "robonix.executor.CancelAll_Request": [],
    "robonix.executor.CancelAll_Response": [("success", 1, "bool")],
    # capabilities/lib/executor/srv/Execute.srv
    "robonix.executor.Execute_Request": [("plan", 1, "robonix.pilot.Plan")],
    "robonix.executor.Execute_Response": [("event", 1, "robonix.executor.RtdlEvent")],
    # capabilities/lib/module_health/msg/ModuleHealthReport.msg, ModuleHealth.msg (health: a ROS uint8)
    "robonix.module_health.ModuleHealthReport": [("schema_version", 1, "uint32"),
                                                 ("module", 2, "robonix.module_health.ModuleHealth")],
    "robonix.module_health.ModuleHealth": [("module_key", 1, "string"), ("module_id", 2, "string"),
                                           ("provider_id", 3, "string"), ("health", 4, "uint32"),
                                           ("state", 5, "string"), ("reason_code", 6, "string"),
                                           ("detail", 7, "string"), ("source", 8, "string"),
                                           ("received_ts_ns", 9, "uint64"), ("ttl_ms", 10, "uint32")],
    # capabilities/lib/module_health/srv/GetModuleHealth.srv
    "robonix.module_health.GetModuleHealth_Request": [],
    "robonix.module_health.GetModuleHealth_Response": [("report", 1, "robonix.module_health.ModuleHealthReport")],
}

# Constants of a message, as the nested enum <Message>Enum the codegen makes of them:
# capabilities/lib/pilot/msg/RtdlNodeState.msg, capabilities/lib/executor/msg/RtdlEvent.msg
ENUMS = {
    "robonix.pilot.RtdlNodeState.RtdlNodeStateEnum": {"PENDING": 0, "RUNNING": 1, "SUCCEEDED": 2, "FAILED": 3,
                                                      "CANCELED": 4, "TIMEOUT": 5, "PAUSED": 6},
    "robonix.executor.RtdlEvent.RtdlEventEnum": {"PLAN_STARTED": 0, "NODE_STATE": 1, "PLAN_COMPLETE": 2},
}

# capabilities/system/executor/*.toml: service -> (rpc, request, response, server-streaming). The service is the
# contract id PascalCased per segment; the rpc is the .srv basename (contract_gen.rs).
SERVICES = {
    # execute.v1.toml: rpc_server_stream over executor/srv/Execute.srv
    "RobonixSystemExecutorExecute": ("Execute", "robonix.pilot.Plan", "robonix.executor.RtdlEvent", True),
    # control_plan.v1.toml: rpc over executor/srv/ControlPlan.srv
    "RobonixSystemExecutorControlPlan": ("ControlPlan", "robonix.executor.ControlPlan_Request",
                                         "robonix.executor.ControlPlan_Response", False),
    # list_active_plans.v1.toml: rpc over executor/srv/ListActivePlans.srv
    "RobonixSystemExecutorListActivePlans": ("ListActivePlans", "robonix.executor.ListActivePlans_Request",
                                             "robonix.executor.ListActivePlans_Response", False),
    # cancel_all_plans.v1.toml: rpc over executor/srv/CancelAll.srv
    "RobonixSystemExecutorCancelAllPlans": ("CancelAll", "robonix.executor.CancelAll_Request",
                                            "robonix.executor.CancelAll_Response", False),
    # get_health.toml: rpc over module_health/srv/GetModuleHealth.srv
    "RobonixSystemExecutorGetHealth": ("GetModuleHealth", "robonix.module_health.GetModuleHealth_Request",
                                       "robonix.module_health.GetModuleHealth_Response", False),
}

SCALARS = {FieldDescriptor.TYPE_STRING: "string", FieldDescriptor.TYPE_BOOL: "bool",
           FieldDescriptor.TYPE_UINT32: "uint32", FieldDescriptor.TYPE_UINT64: "uint64",
           FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_INT64: "int64",
           FieldDescriptor.TYPE_FLOAT: "float", FieldDescriptor.TYPE_DOUBLE: "double",
           FieldDescriptor.TYPE_BYTES: "bytes"}
MODULES = {"robonix.pilot": pilot_pb2, "robonix.executor": executor_pb2, "robonix.module_health": module_health_pb2}


def message_class(full_name: str):
    package, name = full_name.rsplit(".", 1)
    return getattr(MODULES[package], name)


def field_type(field) -> str:
    repeated = field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED
    base = field.message_type.full_name if field.type == field.TYPE_MESSAGE else SCALARS[field.type]
    return f"repeated {base}" if repeated else base


# --- protobuf's wire format, by hand ---

def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def encode(fields: list) -> bytes:
    """(number, value) pairs: int -> varint, bool -> varint, str/bytes -> length-delimited, list -> each."""
    out = bytearray()
    for number, value in fields:
        if isinstance(value, (bool, int)):
            out += varint(number << 3 | 0) + varint(int(value))
        else:
            data = value.encode() if isinstance(value, str) else value
            out += varint(number << 3 | 2) + varint(len(data)) + data
    return bytes(out)


def decode(data: bytes) -> dict[int, list]:
    """number -> its values in order: ints for varints, bytes for length-delimited (only those two wire types)."""
    fields: dict[int, list] = {}
    at = 0

    def read_varint() -> int:
        nonlocal at
        value = shift = 0
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value

    while at < len(data):
        key = read_varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            fields.setdefault(number, []).append(read_varint())
        elif wire_type == 2:
            length = read_varint()
            fields.setdefault(number, []).append(data[at:at + length])
            at += length
        else:
            raise AssertionError(f"field {number}: wire type {wire_type} is none the Robonix messages use")
    return fields


def number_of(message: str, field: str) -> int:
    return next(number for name, number, _ in MESSAGES[message] if name == field)


# --- the facts ---

@pytest.mark.parametrize("message", sorted(MESSAGES))
def test_each_message_has_robonix_name_fields_and_numbers(message):
    descriptor = message_class(message).DESCRIPTOR
    assert descriptor.full_name == message
    assert [(f.name, f.number, field_type(f)) for f in sorted(descriptor.fields, key=lambda f: f.number)] \
        == MESSAGES[message]


@pytest.mark.parametrize("enum", sorted(ENUMS))
def test_constants_are_nested_enums_with_robonix_numbers(enum):
    message, name = enum.rsplit(".", 1)
    descriptor = message_class(message).DESCRIPTOR.enum_types_by_name[name]
    assert descriptor.full_name == enum
    assert {value.name: value.number for value in descriptor.values} == ENUMS[enum]


def test_the_five_services_their_paths_types_and_streaming():
    services = contracts_pb2.DESCRIPTOR.services_by_name
    assert contracts_pb2.DESCRIPTOR.package == "robonix.contracts"
    assert set(services) == set(SERVICES)
    for name, (rpc, request, response, streams) in SERVICES.items():
        assert [method.name for method in services[name].methods] == [rpc]
        method = services[name].methods_by_name[rpc]
        assert (method.input_type.full_name, method.output_type.full_name) == (request, response)
        assert (method.client_streaming, method.server_streaming) == (False, streams)
        assert f"/{services[name].full_name}/{method.name}" == f"/robonix.contracts.{name}/{rpc}"


def test_a_plan_our_stub_encodes_decodes_by_robonix_numbers():
    plan = pilot_pb2.Plan(
        plan_id="p-1", session_id="s-1", round=3, root_index=0, auth_session_token="tok",
        nodes=[pilot_pb2.RtdlNode(node_kind=0, children=[1, 2], op_id="o-0", description="both"),
               pilot_pb2.RtdlNode(node_kind=2, op_id="o-1", description="look",
                                  call=pilot_pb2.CapabilityCall(call_id="c-1", provider_id="camera",
                                                                contract_id="robonix/primitive/camera/rgb",
                                                                args_json='{"w": 2}'))])
    fields = decode(plan.SerializeToString())
    number = {name: n for name, n, _ in MESSAGES["robonix.pilot.Plan"]}
    assert fields[number["plan_id"]] == [b"p-1"] and fields[number["session_id"]] == [b"s-1"]
    assert fields[number["round"]] == [3] and fields[number["auth_session_token"]] == [b"tok"]
    assert number["root_index"] not in fields  # proto3 leaves a zero out
    first, second = (decode(node) for node in fields[number["nodes"]])
    node = {name: n for name, n, _ in MESSAGES["robonix.pilot.RtdlNode"]}
    # children is packed (proto3's default for repeated scalars): one length-delimited run of varints
    assert first[node["children"]] == [varint(1) + varint(2)] and first[node["op_id"]] == [b"o-0"]
    assert second[node["node_kind"]] == [2] and second[node["description"]] == [b"look"]
    call = decode(second[node["call"]][0])
    number = {name: n for name, n, _ in MESSAGES["robonix.pilot.CapabilityCall"]}
    assert call == {number["call_id"]: [b"c-1"], number["provider_id"]: [b"camera"],
                    number["contract_id"]: [b"robonix/primitive/camera/rgb"], number["args_json"]: [b'{"w": 2}']}


def test_bytes_written_by_robonix_numbers_parse_into_our_stub():
    node = "robonix.pilot.RtdlNode"
    call = encode([(number_of("robonix.pilot.CapabilityCall", "provider_id"), "arm"),
                   (number_of("robonix.pilot.CapabilityCall", "args_json"), "{}")])
    do_node = encode([(number_of(node, "node_kind"), 2), (number_of(node, "call"), call),
                      (number_of(node, "op_id"), "o-7"), (number_of(node, "description"), "grasp")])
    plan = encode([(number_of("robonix.pilot.Plan", "plan_id"), "p-9"),
                   (number_of("robonix.pilot.Plan", "nodes"), do_node),
                   (number_of("robonix.pilot.Plan", "root_index"), 0),
                   (number_of("robonix.pilot.Plan", "auth_session_token"), "keystone")])
    parsed = pilot_pb2.Plan.FromString(plan)
    assert (parsed.plan_id, parsed.auth_session_token, len(parsed.nodes)) == ("p-9", "keystone", 1)
    assert (parsed.nodes[0].node_kind, parsed.nodes[0].op_id, parsed.nodes[0].description) == (2, "o-7", "grasp")
    assert (parsed.nodes[0].call.provider_id, parsed.nodes[0].call.args_json) == ("arm", "{}")

    state = "robonix.pilot.RtdlNodeState"
    result = encode([(number_of("robonix.pilot.CapabilityCallResult", "success"), True),
                     (number_of("robonix.pilot.CapabilityCallResult", "output"), "done")])
    event = encode([(number_of("robonix.executor.RtdlEvent", "event_kind"), ENUMS[
                        "robonix.executor.RtdlEvent.RtdlEventEnum"]["NODE_STATE"]),
                    (number_of("robonix.executor.RtdlEvent", "node_state"),
                     encode([(number_of(state, "node_index"), 4),
                             (number_of(state, "state"), ENUMS[f"{state}.RtdlNodeStateEnum"]["TIMEOUT"]),
                             (number_of(state, "leaf_result"), result), (number_of(state, "op_id"), "o-4")]))])
    parsed = executor_pb2.RtdlEvent.FromString(event)
    assert parsed.event_kind == executor_pb2.RtdlEvent.NODE_STATE
    assert (parsed.node_state.node_index, parsed.node_state.op_id) == (4, "o-4")
    assert parsed.node_state.state == pilot_pb2.RtdlNodeState.TIMEOUT
    assert (parsed.node_state.leaf_result.success, parsed.node_state.leaf_result.output) == (True, "done")


class CannedExecutor(contracts_pb2_grpc.RobonixSystemExecutorExecuteServicer,
                     contracts_pb2_grpc.RobonixSystemExecutorControlPlanServicer,
                     contracts_pb2_grpc.RobonixSystemExecutorListActivePlansServicer,
                     contracts_pb2_grpc.RobonixSystemExecutorCancelAllPlansServicer,
                     contracts_pb2_grpc.RobonixSystemExecutorGetHealthServicer):
    """Answers each contract with a fixed reply, to show where the stubs serve them."""

    def Execute(self, request, context):
        yield executor_pb2.RtdlEvent(event_kind=executor_pb2.RtdlEvent.PLAN_STARTED,
                                     plan_started=executor_pb2.RtdlPlanStarted(plan_id=request.plan_id))
        yield executor_pb2.RtdlEvent(event_kind=executor_pb2.RtdlEvent.PLAN_COMPLETE,
                                     plan_complete=executor_pb2.RtdlPlanComplete(plan_id=request.plan_id,
                                                                                 any_failed=True))

    def ControlPlan(self, request, context):
        return executor_pb2.ControlPlan_Response(success=True, completed=request.wait_ms > 0,
                                                 message=f"{request.action} {request.plan_id}")

    def ListActivePlans(self, request, context):
        return executor_pb2.ListActivePlans_Response(success=True, plans_json='{"count": 0, "plans": []}')

    def CancelAll(self, request, context):
        return executor_pb2.CancelAll_Response(success=True)

    def GetModuleHealth(self, request, context):
        return module_health_pb2.GetModuleHealth_Response(report=module_health_pb2.ModuleHealthReport(
            schema_version=1, module=module_health_pb2.ModuleHealth(module_id="executor", state="active")))


@pytest.fixture
def canned_channel():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = CannedExecutor()
    for service in SERVICES:
        getattr(contracts_pb2_grpc, f"add_{service}Servicer_to_server")(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield channel
    channel.close()
    server.stop(grace=None)


def raw(channel, service: str, streaming: bool):
    """A call at Robonix's method path that sends and receives bytes, untouched by the stubs."""
    rpc = SERVICES[service][0]
    make = channel.unary_stream if streaming else channel.unary_unary
    return make(f"/robonix.contracts.{service}/{rpc}", request_serializer=bytes, response_deserializer=bytes)


def test_the_stubs_serve_each_contract_at_its_robonix_path(canned_channel):
    plan = encode([(number_of("robonix.pilot.Plan", "plan_id"), "p-5")])
    events = [decode(event) for event in raw(canned_channel, "RobonixSystemExecutorExecute", True)(plan, timeout=10)]
    kind = number_of("robonix.executor.RtdlEvent", "event_kind")
    started = number_of("robonix.executor.RtdlEvent", "plan_started")
    complete = number_of("robonix.executor.RtdlEvent", "plan_complete")
    assert started not in events[1] and complete not in events[0]
    assert kind not in events[0]  # PLAN_STARTED is 0: proto3 leaves it out
    assert decode(events[0][started][0]) == {number_of("robonix.executor.RtdlPlanStarted", "plan_id"): [b"p-5"]}
    assert events[1][kind] == [ENUMS["robonix.executor.RtdlEvent.RtdlEventEnum"]["PLAN_COMPLETE"]]
    assert decode(events[1][complete][0]) == {number_of("robonix.executor.RtdlPlanComplete", "plan_id"): [b"p-5"],
                                              number_of("robonix.executor.RtdlPlanComplete", "any_failed"): [1]}

    control = "robonix.executor.ControlPlan_Request"
    reply = decode(raw(canned_channel, "RobonixSystemExecutorControlPlan", False)(
        encode([(number_of(control, "action"), "cancel"), (number_of(control, "plan_id"), "p-5"),
                (number_of(control, "wait_ms"), 250)]), timeout=10))
    answer = "robonix.executor.ControlPlan_Response"
    assert reply == {number_of(answer, "success"): [1], number_of(answer, "completed"): [1],
                     number_of(answer, "message"): [b"cancel p-5"]}

    listed = decode(raw(canned_channel, "RobonixSystemExecutorListActivePlans", False)(b"", timeout=10))
    plans_json = number_of("robonix.executor.ListActivePlans_Response", "plans_json")
    assert listed[plans_json] == [b'{"count": 0, "plans": []}']
    cancelled = decode(raw(canned_channel, "RobonixSystemExecutorCancelAllPlans", False)(b"", timeout=10))
    assert cancelled == {number_of("robonix.executor.CancelAll_Response", "success"): [1]}
    health = decode(raw(canned_channel, "RobonixSystemExecutorGetHealth", False)(b"", timeout=10))
    report = decode(health[number_of("robonix.module_health.GetModuleHealth_Response", "report")][0])
    assert report[number_of("robonix.module_health.ModuleHealthReport", "schema_version")] == [1]
    module = decode(report[number_of("robonix.module_health.ModuleHealthReport", "module")][0])
    assert module == {number_of("robonix.module_health.ModuleHealth", "module_id"): [b"executor"],
                      number_of("robonix.module_health.ModuleHealth", "state"): [b"active"]}


def test_our_client_stub_streams_execute(canned_channel):
    stub = contracts_pb2_grpc.RobonixSystemExecutorExecuteStub(canned_channel)
    kinds = [event.event_kind for event in stub.Execute(pilot_pb2.Plan(plan_id="p-6"), timeout=10)]
    assert kinds == [executor_pb2.RtdlEvent.PLAN_STARTED, executor_pb2.RtdlEvent.PLAN_COMPLETE]


# --- the build step ---

def test_the_build_is_package_relative_idempotent_and_drops_stale_modules(tmp_path):
    out = tmp_path / "wire_copy"
    out.mkdir()
    (out / "gone_pb2.py").write_text("# a module whose .proto no longer exists\n")
    written = stubs.build(stubs.SOURCE_PROTOS, out)
    protos = sorted(path.stem for path in stubs.SOURCE_PROTOS.glob("*.proto"))
    expected = sorted([f"{proto}_pb2.py" for proto in protos] + [f"{proto}_pb2_grpc.py" for proto in protos])
    assert sorted(path.name for path in out.glob("*_pb2*.py")) == expected
    assert out / "gone_pb2.py" in written and not (out / "gone_pb2.py").exists()
    for path in out.glob("*.py"):
        assert not any(line.startswith("import ") and "_pb2" in line for line in path.read_text().splitlines()), path

    stamps = {path: path.stat().st_mtime_ns for path in out.iterdir()}
    assert stubs.build(stubs.SOURCE_PROTOS, out) == []
    assert {path: path.stat().st_mtime_ns for path in out.iterdir()} == stamps

    # importable under any package name, in a fresh interpreter (its own descriptor pool)
    probe = ("import wire_copy, sys; "
             "print(wire_copy.contracts_pb2_grpc.RobonixSystemExecutorExecuteStub.__name__, wire_copy.PROTO_DIGEST)")
    ran = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["RobonixSystemExecutorExecuteStub", stubs.proto_digest(stubs.SOURCE_PROTOS)]


def run_python(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_the_build_command_without_grpc_tools_says_what_to_install(tmp_path):
    ran = run_python("import sys; sys.modules['grpc_tools'] = None\n"
                     "from bt_exec.robonix.stubs import main\n"
                     f"sys.exit(main(['--out', {str(tmp_path / 'out')!r}]))", tmp_path)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr
    assert "grpc_tools is not installed" in ran.stderr and "bt_exec[robonix]" in ran.stderr
    assert "python -m bt_exec.robonix.stubs" in ran.stderr


def test_a_broken_proto_is_refused_with_protoc_message(tmp_path):
    protos = tmp_path / "protos"
    protos.mkdir()
    (protos / "bad.proto").write_text('syntax = "proto3";\nmessage Bad { strin name = 1; }\n')
    with pytest.raises(stubs.StubBuildError, match="protoc refused"):
        stubs.build(protos, tmp_path / "out")
    with pytest.raises(stubs.StubBuildError, match="no .proto files"):
        stubs.build(tmp_path / "nowhere", tmp_path / "out")


@pytest.mark.parametrize("blocked, says", [
    ("bt_exec.robonix.wire", "the Robonix gRPC stubs are not built: run python -m bt_exec.robonix.stubs"),
    ("grpc", "needs grpc, which is not installed: pip install 'bt_exec[robonix]'"),
], ids=["stubs not built", "grpc not installed"])
def test_loading_missing_stubs_raises_stubs_missing_saying_what_to_run(blocked, says, tmp_path):
    ran = run_python(f"import sys; sys.modules[{blocked!r}] = None\n"
                     "from bt_exec.robonix.stubs import StubsMissing, load_wire\n"
                     "from bt_exec.errors import BtExecError\n"
                     "try:\n    load_wire()\nexcept StubsMissing as missing:\n"
                     "    assert isinstance(missing, BtExecError)\n    print(missing)\n", tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert says in ran.stdout


def test_stubs_built_from_other_protos_are_refused(tmp_path, monkeypatch):
    protos = tmp_path / "protos"
    protos.mkdir()
    for path in stubs.SOURCE_PROTOS.glob("*.proto"):
        (protos / path.name).write_text(path.read_text())
    assert stubs.proto_digest(protos) == stubs.proto_digest(stubs.SOURCE_PROTOS)
    (protos / "pilot.proto").write_text((protos / "pilot.proto").read_text() + "\nmessage Added {}\n")
    monkeypatch.setattr(stubs, "SOURCE_PROTOS", protos)
    with pytest.raises(stubs.StubsMissing, match="built from other .proto files"):
        stubs.load_wire()
