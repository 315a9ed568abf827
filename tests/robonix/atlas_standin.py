"""A stand-in Atlas (Robonix's capability registry), run as a real process, written from Atlas's interface facts
(interfaces/robonix/atlas.proto, UPSTREAM) and what Robonix's Atlas answers:

    python tests/robonix/atlas_standin.py [--host 127.0.0.1] [--port 0]

prints ``READY <port>`` on stdout once it serves (port 0: any free port), then one line an event (what a
test waits on instead of sleeping) until SIGTERM or SIGINT:

    register <KIND> <id>        unregister <id> <was_present>       heartbeat <id>
    declare <id> <contract_id> <TRANSPORT> <endpoint>               state <id> <STATE>
    connect <consumer> <provider> <contract_id> <TRANSPORT> <channel_id>        disconnect <channel_id> <was_open>

Served as Atlas does: Register* takes an id over when registered again under the same kind (its capabilities
and channels dropped, its state forgotten) and refuses another kind (ALREADY_EXISTS); Heartbeat,
SetLifecycleState and DeclareCapability answer NOT_FOUND for an unknown id; a declaration needs params of its
transport's variant, an endpoint for gRPC and MCP, an MCP input schema that is a JSON object, and is
refused (ALREADY_EXISTS) twice for one (contract, transport) or at another provider's (transport, endpoint);
a provider that never pushed a state is REGISTERED, or INACTIVE once it declared more than its Driver; Query
filters as Atlas's does and shows no endpoint; ConnectCapability answers NOT_FOUND for an unknown provider
or an undeclared (contract, transport); an unknown channel disconnects with was_open false. InspectAtlas
answers the whole registry as JSON, endpoints and channels included. Nothing is evicted; no contract
registry (QueryContract answers found=false, ListContracts nothing). A restart forgets everything, as
Atlas's does.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
from concurrent import futures
from dataclasses import dataclass, field

import grpc

from bt_exec.robonix.stubs import load_wire

pb = load_wire().atlas_pb2
pb_grpc = load_wire().atlas_pb2_grpc

PARAMS_OF_TRANSPORT = {pb.TRANSPORT_GRPC: "grpc", pb.TRANSPORT_ROS2: "ros2", pb.TRANSPORT_MCP: "mcp"}


def say(line: str) -> None:
    print(line, flush=True)


@dataclass
class Declared:
    contract_id: str
    transport: int
    endpoint: str
    params: object  # a TransportParams
    description: str


@dataclass
class Provider:
    id: str
    kind: int
    namespace: str
    capability_md_path: str
    capability_md: str
    last_heartbeat_ms: int
    declared: list[Declared] = field(default_factory=list)
    pushed_state: int | None = None
    state_detail: str = ""

    def state(self) -> int:
        if self.pushed_state is not None:
            return self.pushed_state
        if any(not d.contract_id.endswith("/driver") for d in self.declared):
            return pb.STATE_INACTIVE
        return pb.STATE_REGISTERED

    def capability(self, declared: Declared):
        return pb.Capability(provider_id=self.id, provider_kind=self.kind, contract_id=declared.contract_id,
                             transport=declared.transport, params=declared.params,
                             description=declared.description)


def now_ms() -> int:
    return int(time.time() * 1000)


class StandinAtlas(pb_grpc.AtlasServicer):
    """The registry and its rpcs; one lock over all of it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.providers: dict[str, Provider] = {}
        self.channels: dict[str, dict] = {}

    # -- registration -----------------------------------------------------------------------------

    def _register(self, request, context, kind: int):
        provider_id = request.id.strip() or f"com.robonix.ephemeral.{uuid.uuid4()}"
        if not request.namespace.strip():
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "namespace required")
        with self.lock:
            existing = self.providers.get(provider_id)
            if existing is not None and existing.kind != kind:
                context.abort(grpc.StatusCode.ALREADY_EXISTS,
                              f"'{provider_id}' already registered as {pb.Kind.Name(existing.kind)}; "
                              f"cannot re-register as {pb.Kind.Name(kind)}")
            self.providers[provider_id] = Provider(provider_id, kind, request.namespace.strip(),
                                                   request.capability_md_path.strip(), request.capability_md,
                                                   now_ms())
            self._drop_channels_of(provider_id)
        say(f"register {pb.Kind.Name(kind)} {provider_id}")
        return pb.RegisterResponse(id=provider_id)

    def RegisterPrimitive(self, request, context):
        return self._register(request, context, pb.KIND_PRIMITIVE)

    def RegisterService(self, request, context):
        return self._register(request, context, pb.KIND_SERVICE)

    def RegisterSkill(self, request, context):
        return self._register(request, context, pb.KIND_SKILL)

    def Unregister(self, request, context):
        with self.lock:
            was_present = self.providers.pop(request.id.strip(), None) is not None
            self._drop_channels_of(request.id.strip())
        say(f"unregister {request.id.strip()} {str(was_present).lower()}")
        return pb.UnregisterResponse(was_present=was_present)

    def _known(self, provider_id: str, context) -> Provider:
        provider_id = provider_id.strip()
        if not provider_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "provider_id required")
        provider = self.providers.get(provider_id)
        if provider is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"unknown provider_id: {provider_id}")
        return provider

    def Heartbeat(self, request, context):
        with self.lock:
            self._known(request.id, context).last_heartbeat_ms = now_ms()
        say(f"heartbeat {request.id.strip()}")
        return pb.HeartbeatResponse()

    def SetLifecycleState(self, request, context):
        if request.state == pb.STATE_UNSPECIFIED:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "state: must not be STATE_UNSPECIFIED")
        with self.lock:
            provider = self._known(request.id, context)
            previous = provider.state()
            provider.pushed_state = request.state
            provider.state_detail = request.detail.strip()
        say(f"state {provider.id} {pb.LifecycleState.Name(request.state)}")
        return pb.SetLifecycleStateResponse(previous_state=previous)

    def DeclareCapability(self, request, context):
        contract_id = request.contract_id.strip()
        if not contract_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "contract_id required")
        if request.transport not in PARAMS_OF_TRANSPORT:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "transport: must not be UNSPECIFIED")
        variant = request.params.WhichOneof("kind")
        if variant != PARAMS_OF_TRANSPORT[request.transport]:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                          f"params: oneof variant {variant} does not match transport "
                          f"{pb.Transport.Name(request.transport)}")
        if variant == "mcp" and request.params.mcp.input_schema_json:
            try:
                schema = json.loads(request.params.mcp.input_schema_json)
            except ValueError as error:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"mcp input_schema_json invalid: {error}")
            if not isinstance(schema, dict):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "mcp input_schema_json must be a JSON object")
        endpoint = request.endpoint.strip()
        with self.lock:
            provider = self._known(request.provider_id, context)
            if any(d.contract_id == contract_id and d.transport == request.transport for d in provider.declared):
                context.abort(grpc.StatusCode.ALREADY_EXISTS,
                              f"({contract_id}, {pb.Transport.Name(request.transport)}) already declared by "
                              f"{provider.id}")
            if not endpoint:
                if request.transport != pb.TRANSPORT_ROS2:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"transport '{pb.Transport.Name(request.transport)}' requires caller-supplied "
                                  "endpoint")
                endpoint = f"/rbnx/{contract_id.replace('/', '.')}/{uuid.uuid4().hex[:8]}"
            elif any(other.id != provider.id and any(d.transport == request.transport and d.endpoint == endpoint
                                                     for d in other.declared)
                     for other in self.providers.values()):
                if request.transport != pb.TRANSPORT_ROS2:
                    context.abort(grpc.StatusCode.ALREADY_EXISTS,
                                  f"endpoint '{endpoint}' already registered on transport "
                                  f"'{pb.Transport.Name(request.transport)}'")
                endpoint = f"{endpoint}__{uuid.uuid4().hex[:8]}"
            params = pb.TransportParams()
            params.CopyFrom(request.params)
            provider.declared.append(Declared(contract_id, request.transport, endpoint, params, request.description))
        say(f"declare {provider.id} {contract_id} {pb.Transport.Name(request.transport)} {endpoint}")
        return pb.DeclareCapabilityResponse(endpoint=endpoint)

    # -- discovery and channels ---------------------------------------------------------------------

    def Query(self, request, context):
        wanted_id, contract = request.id.strip(), request.contract_id.strip()
        prefix = request.namespace_prefix.strip()
        out = []
        with self.lock:
            for provider in self.providers.values():
                if (wanted_id and provider.id != wanted_id) or (request.kind and provider.kind != request.kind):
                    continue
                if prefix and not provider.namespace.startswith(prefix):
                    continue
                if contract and not any(d.contract_id == contract for d in provider.declared):
                    continue
                capabilities = [provider.capability(d) for d in provider.declared
                                if (not contract or d.contract_id == contract)
                                and (not request.transport or d.transport == request.transport)]
                out.append(pb.CapabilityProvider(
                    id=provider.id, kind=provider.kind, namespace=provider.namespace,
                    capability_md_path=provider.capability_md_path, capability_md=provider.capability_md,
                    last_heartbeat_ms=provider.last_heartbeat_ms, state=provider.state(),
                    state_detail=provider.state_detail, capabilities=capabilities))
        return pb.QueryResponse(providers=out)

    def ConnectCapability(self, request, context):
        for name in ("consumer_id", "provider_id", "contract_id"):
            if not getattr(request, name).strip():
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{name} required")
        if request.transport == pb.TRANSPORT_UNSPECIFIED:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "transport: must not be UNSPECIFIED")
        contract_id = request.contract_id.strip()
        with self.lock:
            provider = self._known(request.provider_id, context)
            declared = next((d for d in provider.declared
                             if d.contract_id == contract_id and d.transport == request.transport), None)
            if declared is None:
                context.abort(grpc.StatusCode.NOT_FOUND,
                              f"provider '{provider.id}' has not declared ({contract_id}, "
                              f"{pb.Transport.Name(request.transport)})")
            channel_id = f"ch-{uuid.uuid4().hex}"
            self.channels[channel_id] = {"channel_id": channel_id, "consumer_id": request.consumer_id.strip(),
                                         "provider_id": provider.id, "contract_id": contract_id,
                                         "transport": pb.Transport.Name(request.transport),
                                         "endpoint": declared.endpoint}
        say(f"connect {request.consumer_id.strip()} {provider.id} {contract_id} "
            f"{pb.Transport.Name(request.transport)} {channel_id}")
        return pb.ConnectCapabilityResponse(channel_id=channel_id, endpoint=declared.endpoint,
                                            params=declared.params)

    def DisconnectCapability(self, request, context):
        with self.lock:
            was_open = self.channels.pop(request.channel_id.strip(), None) is not None
        say(f"disconnect {request.channel_id.strip()} {str(was_open).lower()}")
        return pb.DisconnectCapabilityResponse(was_open=was_open)

    def _drop_channels_of(self, provider_id: str) -> None:
        for channel_id in [c for c, channel in self.channels.items() if channel["provider_id"] == provider_id]:
            del self.channels[channel_id]

    # -- contracts and inspection -------------------------------------------------------------------

    def QueryContract(self, request, context):
        return pb.QueryContractResponse(found=False)

    def ListContracts(self, request, context):
        return pb.ListContractsResponse()

    def InspectAtlas(self, request, context):
        with self.lock:
            providers = [{
                "id": p.id, "kind": pb.Kind.Name(p.kind), "namespace": p.namespace,
                "state": pb.LifecycleState.Name(p.state()), "state_detail": p.state_detail,
                "last_heartbeat_ms": p.last_heartbeat_ms,
                "capabilities": [{"contract_id": d.contract_id, "transport": pb.Transport.Name(d.transport),
                                  "endpoint": d.endpoint, "description": d.description,
                                  "params": _params_json(d.params)} for d in p.declared],
            } for p in self.providers.values()]
            channels = list(self.channels.values())
        return pb.InspectAtlasResponse(json=json.dumps({"providers": providers, "channels": channels}))


def _params_json(params) -> dict:
    variant = params.WhichOneof("kind")
    if variant == "grpc":
        return {"grpc": {"proto_file": params.grpc.proto_file, "service_name": params.grpc.service_name,
                         "method": params.grpc.method}}
    if variant == "mcp":
        return {"mcp": {"input_schema_json": params.mcp.input_schema_json}}
    return {"ros2": {"qos_profile": params.ros2.qos_profile}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    # No port sharing: a second stand-in on a taken port must fail, not split the traffic.
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=(("grpc.so_reuseport", 0),))
    pb_grpc.add_AtlasServicer_to_server(StandinAtlas(), server)
    try:
        port = server.add_insecure_port(f"{args.host}:{args.port}")
    except RuntimeError as error:
        print(f"atlas stand-in: cannot listen on {args.host}:{args.port}: {error}", file=sys.stderr)
        return 2
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    signal.signal(signal.SIGINT, lambda *_: stopped.set())
    server.start()
    say(f"READY {port}")
    stopped.wait()
    server.stop(grace=0).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
