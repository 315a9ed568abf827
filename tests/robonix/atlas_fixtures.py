"""Helpers of the Atlas tests: the stand-in Atlas as a process whose event lines a test waits on, a provider
registered into it as a Robonix provider registers (the real rpcs), and a skill's lifecycle Driver served
over real gRPC."""
from __future__ import annotations

import pathlib
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent import futures

import pytest

from bt_exec.robonix.stubs import load_wire

STANDIN = pathlib.Path(__file__).resolve().parent / "atlas_standin.py"
EVENT_WAIT_S = 15.0  # generous: what a test waits for comes in well under a second on an idle machine


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick; free until someone takes it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class StandinAtlas:
    """The stand-in Atlas process. ``start`` waits for its READY line; ``expect`` waits for an event line
    matching a regular expression (the lines before it are passed over); ``kill`` and ``start`` again on the
    same ``port`` are an Atlas restart."""

    def __init__(self, port: int = 0):
        self.port = port
        self.process: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> StandinAtlas:
        self._lines = queue.Queue()
        self.process = subprocess.Popen([sys.executable, str(STANDIN), "--port", str(self.port)],
                                        stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, args=(self.process, self._lines), daemon=True).start()
        self.port = int(self.expect(r"READY (\d+)").group(1))
        return self

    @staticmethod
    def _read(process: subprocess.Popen, lines: queue.Queue) -> None:
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    def expect(self, pattern: str, timeout: float = EVENT_WAIT_S) -> re.Match:
        """The first coming line that matches ``pattern`` in full; fails after ``timeout`` or at the
        process's end."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"the stand-in Atlas printed no line matching {pattern!r} within {timeout} s")
            if line is None:
                pytest.fail(f"the stand-in Atlas ended before printing a line matching {pattern!r}")
            match = re.fullmatch(pattern, line)
            if match:
                return match

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process.stdout.close()

    def stub(self):
        """An Atlas stub of a channel of its own (closed with ``channel``)."""
        import grpc

        channel = grpc.insecure_channel(self.address)
        return load_wire().atlas_pb2_grpc.AtlasStub(channel), channel


def register_provider(stub, provider_id: str, *, kind: str = "service", namespace: str | None = None,
                      mcp_endpoint: str | None = None, contracts=(), state: str | None = "ACTIVE",
                      driver_endpoint: str | None = None) -> None:
    """Register a provider as a Robonix provider does: Register<Kind>, a DeclareCapability MCP for each
    contract at ``mcp_endpoint`` (by default one of the provider's own, never dialled), the shared lifecycle
    Driver over gRPC at ``driver_endpoint`` when given, then SetLifecycleState ``state`` (None: push none)."""
    pb = load_wire().atlas_pb2
    namespace = namespace or f"robonix/{kind}/{provider_id}"
    mcp_endpoint = mcp_endpoint or f"http://127.0.0.1:9/{provider_id}/mcp"
    register = {"service": stub.RegisterService, "skill": stub.RegisterSkill, "primitive": stub.RegisterPrimitive}
    register[kind](pb.RegisterRequest(id=provider_id, namespace=namespace), timeout=5)
    for contract_id in contracts:
        stub.DeclareCapability(pb.DeclareCapabilityRequest(
            provider_id=provider_id, contract_id=contract_id, transport=pb.TRANSPORT_MCP, endpoint=mcp_endpoint,
            params=pb.TransportParams(mcp=pb.McpParams(input_schema_json='{"type":"object"}'))), timeout=5)
    if driver_endpoint is not None:
        stub.DeclareCapability(pb.DeclareCapabilityRequest(
            provider_id=provider_id, contract_id="robonix/lifecycle/driver", transport=pb.TRANSPORT_GRPC,
            endpoint=driver_endpoint,
            params=pb.TransportParams(grpc=pb.GrpcParams(
                proto_file="capabilities/lifecycle/driver.v1.toml",
                service_name="robonix.contracts.RobonixLifecycleDriver",
                method="/robonix.contracts.RobonixLifecycleDriver/Driver"))), timeout=5)
    if state is not None:
        stub.SetLifecycleState(pb.SetLifecycleStateRequest(
            id=provider_id, state=pb.LifecycleState.Value(f"STATE_{state}")), timeout=5)


class SkillDriver:
    """A skill's lifecycle Driver (``robonix.contracts.RobonixLifecycleDriver/Driver``) on a real gRPC server,
    as a Robonix skill serves it: a command it accepts is pushed to Atlas as the skill's new state before the
    answer, as Robonix's providers do; ``refuse`` answers ok=false with that error instead. ``commands`` lists
    the command numbers received."""

    STATES = {0: ("INACTIVE", "inactive"), 1: ("ACTIVE", "active"), 2: ("INACTIVE", "inactive"),
              3: ("TERMINATED", "terminated")}

    def __init__(self, atlas: StandinAtlas, provider_id: str, refuse: str | None = None):
        import grpc

        wire = load_wire()
        self.provider_id = provider_id
        self.refuse = refuse
        self.commands: list[int] = []
        self._atlas_stub, self._atlas_channel = atlas.stub()
        self._pb, self._lifecycle = wire.atlas_pb2, wire.lifecycle_pb2
        handler = grpc.unary_unary_rpc_method_handler(
            self._drive, request_deserializer=self._lifecycle.Driver_Request.FromString,
            response_serializer=self._lifecycle.Driver_Response.SerializeToString)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("robonix.contracts.RobonixLifecycleDriver", {"Driver": handler}),))
        self.endpoint = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def _drive(self, request, context):
        self.commands.append(request.command)
        if self.refuse is not None:
            return self._lifecycle.Driver_Response(ok=False, state="error", error=self.refuse)
        atlas_state, word = self.STATES[request.command]
        self._atlas_stub.SetLifecycleState(self._pb.SetLifecycleStateRequest(
            id=self.provider_id, state=self._pb.LifecycleState.Value(f"STATE_{atlas_state}")), timeout=5)
        return self._lifecycle.Driver_Response(ok=True, state=word)

    def stop(self) -> None:
        self.server.stop(grace=None)
        self._atlas_channel.close()
