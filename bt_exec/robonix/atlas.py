"""Atlas, Robonix's capability registry, as bt-exec robonix uses it.

Two sides. Registration (``AtlasClient.start``): the executor registers as a service under
``robonix/system/executor``, declares its five gRPC contracts at the address it listens on and its builtins
as MCP capabilities at ``internal://<id>/builtin``, reports itself ACTIVE, then heartbeats; Atlas unreachable
is retried with backoff, one log line an attempt, and an Atlas that no longer knows the executor (it
restarted) gets the whole registration again. Dispatch (``AtlasResolver``): a ``do`` node's provider is
looked up, a skill Atlas reports INACTIVE is activated through its lifecycle Driver, and a channel is opened
for the call and closed after it, as robonix-executor does.

Every call to Atlas carries a deadline; what fails raises an ``AtlasError`` naming what was asked and why.
"""
from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from bt_exec.compilers.catalog import BUILTIN_ARGS_SCHEMAS
from bt_exec.robonix import DEFAULT_ATLAS, DEFAULT_PROVIDER_ID
from bt_exec.robonix.dispatch import Endpoint, ResolveError
from bt_exec.robonix.stubs import load_wire

_wire = load_wire()  # raises StubsMissing, saying what to run, before grpc is needed
atlas_pb2, atlas_pb2_grpc, lifecycle_pb2 = _wire.atlas_pb2, _wire.atlas_pb2_grpc, _wire.lifecycle_pb2

import grpc  # noqa: E402  (installed: load_wire checked)

log = logging.getLogger(__name__)

EXECUTOR_NAMESPACE = "robonix/system/executor"
BUILTIN_CONTRACT_PREFIX = f"{EXECUTOR_NAMESPACE}/builtin/"
HEARTBEAT_PERIOD_S = 20.0  # Atlas evicts a provider after about a minute without one
CALL_DEADLINE_S = 5.0
DRIVER_DEADLINE_S = 60.0  # a skill's activation loads its models: robonix-executor allows a minute too
RETRY_FIRST_S = 0.5
RETRY_MAX_S = 10.0
# The consumer robonix-executor names when it opens a channel to a skill's Driver.
SKILL_ACTIVATION_CONSUMER = "com.robonix.executor.skill_activate"
CMD_ACTIVATE = 1  # Driver's command number for activation, as robonix-executor sends it

# Channel reconnection backoff: gRPC's default grows to two minutes, which would keep a restarted Atlas
# unanswered long after it is back.
_CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
                    ("grpc.max_reconnect_backoff_ms", 2000))


class AtlasError(ResolveError):
    """A call to Atlas (or, activating a skill, to its Driver) failed; the message says which and why.
    ``code`` is the gRPC status's name where Atlas answered with one (``NOT_FOUND``...), else None. A
    ``ResolveError``: the MCP backend fails the call that needed it with the message."""

    def __init__(self, message: str, code: str | None = None):
        super().__init__(message)
        self.code = code


class AtlasUnreachable(AtlasError):
    """Atlas gave no answer: nothing listens there, or it did not answer within the deadline."""


class ProviderUnknown(AtlasError):
    """Atlas knows no provider of that id."""


class CapabilityUnknown(AtlasError):
    """The provider declared no MCP capability of that contract id."""


class SkillActivationFailed(AtlasError):
    """A skill Atlas reports inactive could not be activated through its Driver."""


@dataclass(frozen=True)
class GrpcContract:
    """One of the executor's gRPC contracts as it is declared: the contract id, the .toml naming it
    (``proto_file``, as robonix-executor fills it), the service and the method's full path."""

    contract_id: str
    rpc: str
    proto_file: str

    @property
    def service(self) -> str:
        return f"robonix.contracts.{service_name(self.contract_id)}"

    @property
    def method(self) -> str:
        return f"/{self.service}/{self.rpc}"


EXECUTOR_CONTRACTS = (
    GrpcContract("robonix/system/executor/execute", "Execute", "capabilities/system/executor/execute.v1.toml"),
    GrpcContract("robonix/system/executor/get_health", "GetModuleHealth",
                 "capabilities/system/executor/get_health.toml"),
    GrpcContract("robonix/system/executor/control_plan", "ControlPlan",
                 "capabilities/system/executor/control_plan.v1.toml"),
    GrpcContract("robonix/system/executor/list_active_plans", "ListActivePlans",
                 "capabilities/system/executor/list_active_plans.v1.toml"),
    GrpcContract("robonix/system/executor/cancel_all_plans", "CancelAll",
                 "capabilities/system/executor/cancel_all_plans.v1.toml"),
)


@dataclass(frozen=True)
class Builtin:
    """A builtin as it is declared: MCP, its args schema as the tool's input schema, a line for Pilot."""

    name: str
    description: str
    input_schema: dict

    @property
    def contract_id(self) -> str:
        return BUILTIN_CONTRACT_PREFIX + self.name


_BUILTIN_DESCRIPTIONS = {
    "get_all_plans": "List the RTDL plans running now: plan_id, the task's description, op count, whether "
                     "cancelled, armed stop points. No arguments.",
    "get_plan_status": "One running plan's ops (op_id, kind, description, state) and its armed stop points, "
                       "to pick the op_id for stop_plan_at or cancel_plan.",
    "stop_plan_at": "Cancel a running plan when it reaches an op: when='on_enter' before the op runs, "
                    "'on_complete' (default) right after it finishes.",
    "cancel_plan": "Cancel a running plan by plan_id, waiting up to wait_ms (default 5000) for it to stop.",
    "cancel_all_plans": "Cancel every running plan, waiting up to wait_ms for them to stop.",
}
# Every builtin bt_exec runs in process, so a new one cannot go undeclared (a missing line fails here).
EXECUTOR_BUILTINS = tuple(Builtin(name, _BUILTIN_DESCRIPTIONS[name], schema)
                          for name, schema in BUILTIN_ARGS_SCHEMAS.items())


@dataclass(frozen=True)
class Registration:
    """What the executor registers: its provider id, the address its gRPC contracts are dialled at
    (``advertised_address`` of the listen address), the contracts and the builtins."""

    provider_id: str
    advertised: str
    contracts: tuple[GrpcContract, ...] = EXECUTOR_CONTRACTS
    builtins: tuple[Builtin, ...] = EXECUTOR_BUILTINS
    namespace: str = EXECUTOR_NAMESPACE

    @property
    def builtin_endpoint(self) -> str:
        return f"internal://{self.provider_id}/builtin"


def service_name(contract_id: str) -> str:
    """The gRPC service Robonix's codegen names after a contract id: each ``/`` segment PascalCased,
    underscores splitting words (``robonix/lifecycle/driver`` -> ``RobonixLifecycleDriver``)."""
    return "".join(word[:1].upper() + word[1:].lower()
                   for segment in contract_id.split("/") for word in segment.split("_") if word)


def advertised_address(listen: str) -> str:
    """The address others dial for a listen address: an unspecified host (``0.0.0.0``, ``[::]``) becomes
    the loopback of its family, as robonix-executor advertises it."""
    host, sep, port = listen.rpartition(":")
    if not sep:
        return listen
    if host in ("0.0.0.0", ""):
        return f"127.0.0.1:{port}"
    if host in ("[::]", "::"):
        return f"[::1]:{port}"
    return listen


def _grpc_target(address: str) -> str:
    """A gRPC target of an address given as ``host:port`` or ``http://host:port``."""
    return address.split("://", 1)[1] if address.startswith(("http://", "grpc://")) else address


class AtlasClient:
    """One executor's connection to Atlas at ``endpoint`` (``host:port``). ``start`` keeps the executor
    registered on a thread of its own; the query, connect and disconnect calls serve dispatch. Every call
    has a deadline (``deadline_s``). ``close`` stops the thread, takes the registration back (so Pilot is
    not sent to an executor that is gone) and closes the channel."""

    def __init__(self, endpoint: str = DEFAULT_ATLAS, provider_id: str = DEFAULT_PROVIDER_ID, *,
                 deadline_s: float = CALL_DEADLINE_S):
        self.endpoint = endpoint
        self.provider_id = provider_id
        self.deadline_s = deadline_s
        self._channel = grpc.insecure_channel(_grpc_target(endpoint), options=_CHANNEL_OPTIONS)
        self._stub = atlas_pb2_grpc.AtlasStub(self._channel)
        self._registered = threading.Event()
        self._stop = threading.Event()
        self._keeper: threading.Thread | None = None
        self._closed = False

    # -- registration ---------------------------------------------------------------------------------

    def register(self, registration: Registration) -> None:
        """One whole registration: RegisterService, a DeclareCapability for each gRPC contract and each
        builtin, SetLifecycleState ACTIVE. Registering an id again takes it over in Atlas (what it held
        before is dropped), so this is also how the executor registers again."""
        pb = atlas_pb2
        provider = registration.provider_id
        self._call("RegisterService", pb.RegisterRequest(id=provider, namespace=registration.namespace),
                   f"RegisterService '{provider}'")
        for contract in registration.contracts:
            params = pb.TransportParams(grpc=pb.GrpcParams(proto_file=contract.proto_file,
                                                           service_name=contract.service, method=contract.method))
            self._call("DeclareCapability",
                       pb.DeclareCapabilityRequest(provider_id=provider, contract_id=contract.contract_id,
                                                   transport=pb.TRANSPORT_GRPC, endpoint=registration.advertised,
                                                   params=params),
                       f"DeclareCapability '{contract.contract_id}'")
        for builtin in registration.builtins:
            params = pb.TransportParams(mcp=pb.McpParams(input_schema_json=json.dumps(builtin.input_schema)))
            self._call("DeclareCapability",
                       pb.DeclareCapabilityRequest(provider_id=provider, contract_id=builtin.contract_id,
                                                   transport=pb.TRANSPORT_MCP,
                                                   endpoint=registration.builtin_endpoint, params=params,
                                                   description=builtin.description),
                       f"DeclareCapability '{builtin.contract_id}'")
        self._call("SetLifecycleState", pb.SetLifecycleStateRequest(id=provider, state=pb.STATE_ACTIVE),
                   f"SetLifecycleState '{provider}' ACTIVE")

    def heartbeat(self) -> None:
        """One Heartbeat; an ``AtlasError`` with code ``NOT_FOUND`` means Atlas no longer knows the executor."""
        self._call("Heartbeat", atlas_pb2.HeartbeatRequest(id=self.provider_id), f"Heartbeat '{self.provider_id}'")

    def start(self, registration: Registration, *, heartbeat_s: float = HEARTBEAT_PERIOD_S,
              retry_first_s: float = RETRY_FIRST_S, retry_max_s: float = RETRY_MAX_S) -> None:
        """Keep the executor registered, on a thread of its own, until ``close``: register (retrying, the
        wait doubling from ``retry_first_s`` up to ``retry_max_s``, one warning a failed attempt), then
        heartbeat every ``heartbeat_s``; a heartbeat Atlas answers NOT_FOUND starts the registration over.
        Start it once the contracts are served: Atlas hands their address out as soon as they are declared."""
        if self._keeper is not None:
            raise RuntimeError("the Atlas client is already keeping a registration")
        if registration.provider_id != self.provider_id:
            raise ValueError(f"registration of '{registration.provider_id}' on the client of '{self.provider_id}'")
        self._keeper = threading.Thread(target=self._keep, name="atlas-registration", daemon=True,
                                        args=(registration, heartbeat_s, retry_first_s, retry_max_s))
        self._keeper.start()

    @property
    def registered(self) -> bool:
        """Whether the last registration went through and no heartbeat since found Atlas without it."""
        return self._registered.is_set()

    def wait_registered(self, timeout: float | None = None) -> bool:
        """Wait until registered; False when ``timeout`` passed first."""
        return self._registered.wait(timeout)

    def _keep(self, registration: Registration, heartbeat_s: float, retry_first_s: float,
              retry_max_s: float) -> None:
        retry_s = retry_first_s
        attempt = 0
        wait_s = 0.0
        while not self._stop.wait(wait_s):
            if not self._registered.is_set():
                attempt += 1
                try:
                    self.register(registration)
                except AtlasError as error:
                    if self._stop.is_set():  # closed mid-registration: its calls failed on the closed channel
                        return
                    log.warning("Atlas at %s: registration attempt %d failed: %s; next try in %.1f s",
                                self.endpoint, attempt, error, retry_s)
                    wait_s, retry_s = retry_s, min(retry_s * 2, retry_max_s)
                    continue
                self._registered.set()
                log.info("registered with Atlas at %s as '%s': %d gRPC contracts at %s, %d builtins",
                         self.endpoint, self.provider_id, len(registration.contracts), registration.advertised,
                         len(registration.builtins))
                attempt, retry_s, wait_s = 0, retry_first_s, heartbeat_s
                continue
            try:
                self.heartbeat()
            except AtlasError as error:
                if self._stop.is_set():
                    return
                if error.code == "NOT_FOUND":
                    log.warning("Atlas at %s no longer knows '%s' (it restarted or evicted it): registering again",
                                self.endpoint, self.provider_id)
                    self._registered.clear()
                    wait_s = 0.0
                else:
                    log.warning("Atlas at %s: heartbeat failed: %s; next try in %.1f s", self.endpoint, error,
                                retry_s)
                    wait_s, retry_s = retry_s, min(retry_s * 2, retry_max_s)
                continue
            retry_s, wait_s = retry_first_s, heartbeat_s

    def close(self) -> None:
        """Stop keeping the registration, unregister (best effort, briefly) and close the channel."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._keeper is not None:
            self._keeper.join(timeout=self.deadline_s * 2)
            if self._registered.is_set():
                try:
                    self._call("Unregister", atlas_pb2.UnregisterRequest(id=self.provider_id),
                               f"Unregister '{self.provider_id}'", deadline_s=min(self.deadline_s, 1.0))
                except AtlasError as error:
                    log.info("leaving Atlas: %s", error)
            self._registered.clear()
        self._channel.close()

    # -- dispatch -------------------------------------------------------------------------------------

    def query_provider(self, provider_id: str):
        """The provider as Atlas shows it (a ``CapabilityProvider``: kind, namespace, state, capabilities),
        or None when Atlas knows no such provider."""
        answer = self._call("Query", atlas_pb2.QueryRequest(id=provider_id), f"Query for provider '{provider_id}'")
        return next((provider for provider in answer.providers if provider.id == provider_id), None)

    def connect(self, provider_id: str, contract_id: str, transport: int | None = None,
                consumer_id: str | None = None):
        """Open a channel to a provider's capability (MCP unless ``transport`` says otherwise) for
        ``consumer_id`` (the executor's id unless given); the answer holds ``channel_id`` and ``endpoint``."""
        transport = atlas_pb2.TRANSPORT_MCP if transport is None else transport
        request = atlas_pb2.ConnectCapabilityRequest(consumer_id=consumer_id or self.provider_id,
                                                     provider_id=provider_id, contract_id=contract_id,
                                                     transport=transport)
        what = f"ConnectCapability to '{contract_id}' of provider '{provider_id}'"
        try:
            return self._call("ConnectCapability", request, what)
        except AtlasError as error:
            if error.code == "NOT_FOUND":
                raise CapabilityUnknown(str(error), error.code) from None
            raise

    def disconnect(self, channel_id: str) -> bool:
        """Close a channel; whether Atlas still had it open. Never raises: a channel Atlas dropped or cannot
        be told about costs nothing but a log line (Atlas drops channels with their provider)."""
        try:
            answer = self._call("DisconnectCapability", atlas_pb2.DisconnectCapabilityRequest(channel_id=channel_id),
                                f"DisconnectCapability '{channel_id}'")
        except AtlasError as error:
            log.info("%s", error)
            return False
        return answer.was_open

    # -- the calls ------------------------------------------------------------------------------------

    def _call(self, rpc: str, request, what: str, deadline_s: float | None = None):
        deadline_s = self.deadline_s if deadline_s is None else deadline_s
        try:
            return getattr(self._stub, rpc)(request, timeout=deadline_s)
        except grpc.RpcError as error:
            raise _atlas_error(error, what, f"Atlas at {self.endpoint}", deadline_s) from None
        except ValueError:  # gRPC's answer on a closed channel
            raise AtlasUnreachable(f"{what}: the Atlas client is closed") from None


def _atlas_error(error: grpc.RpcError, what: str, where: str, deadline_s: float) -> AtlasError:
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = (error.details() if hasattr(error, "details") else None) or code.name
    if code == grpc.StatusCode.UNAVAILABLE:
        return AtlasUnreachable(f"{where} is unreachable ({what}): {details}", code.name)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return AtlasUnreachable(f"{where} did not answer {what} within {deadline_s:g} s", code.name)
    return AtlasError(f"{where} refused {what}: {code.name}: {details}", code.name)


class AtlasResolver:
    """The MCP backend's ``Resolver`` over Atlas: where a ``do`` node's call goes, found as robonix-executor
    finds it:
    ``resolve`` queries the provider, activates it through its Driver when it is a skill Atlas reports
    INACTIVE, and opens a channel (MCP, the executor as consumer); ``release`` closes the channel after the
    call. Safe from several threads; a skill is activated once however many calls reach it together."""

    def __init__(self, client: AtlasClient, *, driver_deadline_s: float = DRIVER_DEADLINE_S):
        self.client = client
        self.driver_deadline_s = driver_deadline_s
        self._activation_locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()

    def resolve(self, provider_id: str, contract_id: str) -> Endpoint:
        """The endpoint of ``contract_id`` on ``provider_id`` (``url`` as Atlas gives it, ``asynchronous``
        when the provider declares both ``<contract_id>/status`` and ``<contract_id>/cancel``), with a
        channel open (``channel``: its id, closed by ``release``). Raises
        ``ProviderUnknown``, ``CapabilityUnknown``, ``SkillActivationFailed``, ``AtlasUnreachable`` or
        ``AtlasError`` (an async capability declaring only one of its status and cancel contracts)."""
        provider = self._provider(provider_id)
        if _is_skill(provider) and provider.state != atlas_pb2.STATE_ACTIVE:
            provider = self._activate(provider)
        mcp_contracts = {capability.contract_id for capability in provider.capabilities
                         if capability.transport == atlas_pb2.TRANSPORT_MCP}
        if contract_id not in mcp_contracts:
            declared = ", ".join(sorted(mcp_contracts)[:10]) or "none"
            raise CapabilityUnknown(f"provider '{provider_id}' declares no MCP capability '{contract_id}' in Atlas "
                                    f"at {self.client.endpoint} (its MCP capabilities: {declared})")
        is_async = _is_async(provider_id, contract_id, mcp_contracts)
        channel = self.client.connect(provider_id, contract_id)
        return Endpoint(channel.endpoint, is_async, channel.channel_id)

    def release(self, endpoint: Endpoint) -> None:
        """Close the channel ``resolve`` opened (never raises)."""
        self.client.disconnect(endpoint.channel)

    def _provider(self, provider_id: str):
        provider = self.client.query_provider(provider_id)
        if provider is None:
            raise ProviderUnknown(f"provider '{provider_id}' is not registered with Atlas at {self.client.endpoint}")
        return provider

    def _activate(self, provider):
        """Activate a skill through its Driver, one activation at a time per skill: who waited finds it
        active. Only from INACTIVE, as robonix-executor: a skill in ERROR needs its lifecycle recovered."""
        with self._locks_lock:
            lock = self._activation_locks.setdefault(provider.id, threading.Lock())
        with lock:
            provider = self._provider(provider.id)
            if provider.state == atlas_pb2.STATE_ACTIVE:
                return provider
            state = atlas_pb2.LifecycleState.Name(provider.state).removeprefix("STATE_")
            if provider.state != atlas_pb2.STATE_INACTIVE:
                raise SkillActivationFailed(f"skill '{provider.id}' is {state} in Atlas; it is activated only from "
                                            "INACTIVE: recover or restart its lifecycle first")
            driver = next((capability.contract_id for capability in provider.capabilities
                           if capability.contract_id.endswith("/driver")), None)
            if driver is None:
                raise SkillActivationFailed(f"skill '{provider.id}' is INACTIVE and declares no Driver (a "
                                            "robonix/lifecycle/driver or <namespace>/driver capability) to activate it")
            log.info("activating skill '%s' through %s", provider.id, driver)
            self._drive(provider.id, driver)
            return self._provider(provider.id)

    def _drive(self, provider_id: str, driver_contract: str) -> None:
        try:
            channel = self.client.connect(provider_id, driver_contract, atlas_pb2.TRANSPORT_GRPC,
                                          consumer_id=SKILL_ACTIVATION_CONSUMER)
        except AtlasError as error:
            raise SkillActivationFailed(f"activating skill '{provider_id}': {error}", error.code) from None
        method = f"/robonix.contracts.{service_name(driver_contract)}/Driver"
        try:
            with grpc.insecure_channel(_grpc_target(channel.endpoint), options=_CHANNEL_OPTIONS) as driver:
                call = driver.unary_unary(method, request_serializer=lifecycle_pb2.Driver_Request.SerializeToString,
                                          response_deserializer=lifecycle_pb2.Driver_Response.FromString)
                answer = call(lifecycle_pb2.Driver_Request(command=CMD_ACTIVATE), timeout=self.driver_deadline_s)
        except grpc.RpcError as error:
            raise _activation_error(error, provider_id, channel.endpoint, self.driver_deadline_s) from None
        finally:
            self.client.disconnect(channel.channel_id)
        if not answer.ok:
            raise SkillActivationFailed(f"skill '{provider_id}' refused activation (state {answer.state or '?'}): "
                                        f"{answer.error or 'no reason given'}")


def _activation_error(error: grpc.RpcError, provider_id: str, endpoint: str, deadline_s: float) -> AtlasError:
    failed = _atlas_error(error, "Driver(CMD_ACTIVATE)", f"the Driver of skill '{provider_id}' at {endpoint}",
                          deadline_s)
    return SkillActivationFailed(str(failed), failed.code)


def _is_skill(provider) -> bool:
    """A skill by its kind, or by its namespace as robonix-executor tells one (``robonix/skill/...``,
    ``skill/...``)."""
    segments = [segment for segment in provider.namespace.split("/") if segment]
    return (provider.kind == atlas_pb2.KIND_SKILL or segments[:1] == ["skill"]
            or segments[:2] == ["robonix", "skill"])


def _is_async(provider_id: str, contract_id: str, mcp_contracts: Iterable[str]) -> bool:
    """Whether a call to ``contract_id`` is async: its provider declares both ``<id>/status`` and
    ``<id>/cancel`` (a status or cancel contract itself never is). One without the other is the provider's
    configuration error, refused as robonix-executor refuses it."""
    if contract_id.rsplit("/", 1)[-1] in ("status", "cancel"):
        return False
    status, cancel = f"{contract_id}/status", f"{contract_id}/cancel"
    has_status, has_cancel = status in mcp_contracts, cancel in mcp_contracts
    if has_status != has_cancel:
        present, absent = (status, cancel) if has_status else (cancel, status)
        raise AtlasError(f"provider '{provider_id}' declares '{present}' but not '{absent}': an async capability "
                         "needs both")
    return has_status
