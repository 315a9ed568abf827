"""Groot2 watching a running plan: BehaviorTree.CPP 4's monitor protocol over ZeroMQ (docs/btcpp.md, "Watching in
Groot2").

A door: ``publisher.Groot2Publisher`` serves one plan of an ``Executor`` (the full tree as BT.CPP XML, every
node's status, the blackboard) through the executor's read API and events, never the runtime. It needs pyzmq
(the ``groot2`` extra); ``protocol`` holds the protocol's facts and imports no ZeroMQ.
"""
