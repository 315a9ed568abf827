"""Builders of RTDL trees and an event log, shared by the tests (imported by name: conftest is not a module)."""


def do(description="do something", cap="sim.act", args=None):
    return {"op": "do", "op_id": 0, "description": description, "cap": cap, "args": args or {}}


def seq(*children, description="in order"):
    return {"op": "sequence", "op_id": 0, "description": description, "children": list(children)}


def par(*children, description="together"):
    return {"op": "parallel", "op_id": 0, "description": description, "children": list(children)}


def envelope(tree, description="a plan"):
    return {"content": "text for the user", "rtdl_description": description, "rtdl": tree, "task_update": None}


class EventLog:
    """Subscriber keeping every event; helpers to read them back."""

    def __init__(self):
        self.events = []

    def __call__(self, event):
        self.events.append(event)

    def of(self, plan_id):
        return [e for e in self.events if e["plan_id"] == plan_id]

    def states(self, plan_id, op_id):
        return [e["state"] for e in self.of(plan_id) if e["event"] == "node_state" and e["op_id"] == op_id]

    def complete(self, plan_id):
        done = [e for e in self.of(plan_id) if e["event"] == "plan_complete"]
        assert len(done) == 1, f"plan {plan_id} emitted {len(done)} plan_complete events"
        return done[0]
