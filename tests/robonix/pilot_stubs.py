"""The executor's five contracts as Pilot calls them: stubs built from the project's protos over one channel
(imported by name by the tests that play Pilot)."""
from __future__ import annotations

import grpc

from bt_exec.robonix.wire import contracts_pb2_grpc


class PilotStubs:
    """Mixin: ``connect(address)`` opens the channel and names each contract's call (``execute``, ``control``,
    ``list``, ``cancel_all``, ``health``); ``channel.close()`` ends it."""

    def connect(self, address: str) -> None:
        self.channel = grpc.insecure_channel(address)
        self.execute = contracts_pb2_grpc.RobonixSystemExecutorExecuteStub(self.channel).Execute
        self.control = contracts_pb2_grpc.RobonixSystemExecutorControlPlanStub(self.channel).ControlPlan
        self.list = contracts_pb2_grpc.RobonixSystemExecutorListActivePlansStub(self.channel).ListActivePlans
        self.cancel_all = contracts_pb2_grpc.RobonixSystemExecutorCancelAllPlansStub(self.channel).CancelAll
        self.health = contracts_pb2_grpc.RobonixSystemExecutorGetHealthStub(self.channel).GetModuleHealth
