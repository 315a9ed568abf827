"""Scenes and Qwen3 step graphs of the Grant cell, shared by the qwen3 tests."""
import copy
import json

REVISION = 7


def scene(vacuum="vacuum_socket", cap="cap_storage", holding=None, revision=REVISION, screws=2, holes=2, **extra):
    """A Grant scene: the vacuum in its socket (or ``patron``), the cap in storage, some screws and holes."""
    state = {"vacuum": vacuum, "cap": cap}
    state.update(extra)
    return {"scene_revision": revision,
            "objects": ["cap", "vacuum"] + [f"screw_{n}" for n in range(1, screws + 1)],
            "targets": ["work", "hatch_seat", "vacuum_socket", "cap_storage"]
                       + [f"hole_{n}" for n in range(1, holes + 1)],
            "state": state, "holding": holding}


def step(step_id, skill, obj=None, target=None, **params):
    out = {"id": step_id, "skill": skill}
    if obj is not None:
        out["object"] = obj
    if target is not None:
        out["target"] = target
    out.update(params)
    return out


def graph(steps, transitions, entry=None, revision=REVISION, status="ok", **extra):
    out = {"status": status, "entry": entry or steps[0]["id"], "plan": list(steps), "transitions": transitions}
    if revision is not None:
        out["scene_revision"] = revision
    out.update(extra)
    return out


def edge_list(transitions):
    """The same transitions in the edge-list form."""
    return [{"from": source, "event": event, "to": target}
            for source, by_event in transitions.items() for event, target in by_event.items()]


def envelope(the_graph, run_id="run-1", revision=REVISION, as_text=False, fenced=False):
    """The submit envelope {run_id, scene_revision, response}; the graph's own revision moves out of it."""
    response = copy.deepcopy(the_graph)
    response.pop("scene_revision", None)
    if as_text or fenced:
        response = json.dumps(response, indent=2)
    if fenced:
        response = f"```json\n{response}\n```"
    out = {"response": response}
    if run_id is not None:
        out["run_id"] = run_id
    if revision is not None:
        out["scene_revision"] = revision
    return out


def inspect_edges(holding, empty="replan_required", placed="replan_required", unknown="operator_required"):
    return {"holding": holding, "empty": empty, "placed": placed, "unknown": unknown}


# --- tool-change graphs ----------------------------------------------------------------------------------


def spec_example():
    """The graph of the spec: take the vacuum to work, inspect after a failed grasp."""
    return graph([step("s1", "grab", "vacuum"), step("s2", "transfer", "vacuum", "work"),
                  step("s3", "inspect_state", "vacuum")],
                 {"s1": {"success": "s2", "grasp_failed": "s3", "collision": "stop"},
                  "s2": {"success": "completed", "collision": "stop"},
                  "s3": inspect_edges("s2")})


def vacuum_to_work():
    """grab(vacuum) -> transfer(vacuum, work) -> completed: leaves the tool in the patron."""
    return graph([step("s1", "grab", "vacuum"), step("s2", "transfer", "vacuum", "work")],
                 {"s1": {"success": "s2", "grasp_failed": "stop"}, "s2": {"success": "completed"}})


def vacuum_released_at_work():
    """grab(vacuum) -> transfer(vacuum, work) -> release(vacuum): invalid, release carries no tool anywhere."""
    return graph([step("s1", "grab", "vacuum"), step("s2", "transfer", "vacuum", "work"),
                  step("s3", "release", "vacuum")],
                 {"s1": {"success": "s2", "grasp_failed": "stop"}, "s2": {"success": "s3"},
                  "s3": {"success": "completed"}})


def return_vacuum(last="dock_tool"):
    """transfer(vacuum, vacuum_socket) -> dock_tool (or release) (vacuum, vacuum_socket) -> completed."""
    return graph([step("s1", "transfer", "vacuum", "vacuum_socket"), step("s2", last, "vacuum", "vacuum_socket")],
                 {"s1": {"success": "s2"}, "s2": {"success": "completed"}})


def cap_without_vacuum():
    """grab(cap) while the vacuum sits in its socket and no step takes it."""
    return graph([step("s1", "grab", "cap"), step("s2", "transfer", "cap", "hatch_seat"),
                  step("s3", "release", "cap", "hatch_seat"), step("s4", "inspect_state", "cap")],
                 {"s1": {"success": "s2", "grasp_failed": "s4", "collision": "stop"},
                  "s2": {"success": "s3", "collision": "stop"},
                  "s3": {"success": "completed", "collision": "stop"},
                  "s4": inspect_edges("s2")})


def cap_to_hatch():
    """Take the vacuum, then the cap to the hatch seat; a failed grasp is inspected, then retried."""
    return graph([step("t1", "grab", "vacuum"), step("t2", "grab", "cap"), step("t3", "transfer", "cap", "hatch_seat"),
                  step("t4", "align", "cap", "hatch_seat"), step("t5", "release", "cap", "hatch_seat"),
                  step("t6", "inspect_state", "cap")],
                 {"t1": {"success": "t2", "grasp_failed": "stop", "collision": "stop"},
                  "t2": {"success": "t3", "grasp_failed": "t6", "collision": "stop"},
                  "t3": {"success": "t4", "collision": "stop"},
                  "t4": {"success": "t5", "collision": "stop"},
                  "t5": {"success": "completed", "collision": "stop"},
                  "t6": inspect_edges("t3", empty="t2", placed="t2")})


def retry_loop():
    """grab(vacuum), and after grasp_failed inspect it: holding goes on, empty or placed retries the grab."""
    return graph([step("s1", "grab", "vacuum"), step("s2", "inspect_state", "vacuum"),
                  step("s3", "transfer", "vacuum", "work")],
                 {"s1": {"success": "s3", "grasp_failed": "s2", "collision": "stop"},
                  "s2": inspect_edges("s3", empty="s1", placed="s1"),
                  "s3": {"success": "completed", "collision": "stop"}})


def screw_to_hole():
    return graph([step("h1", "detect", "screw_1"), step("h2", "handoff_screw", "screw_1", "hole_1")],
                 {"h1": {"success": "h2", "not_found": "replan_required"}, "h2": {"success": "completed"}})


def detect_chain(length):
    """``length`` detect steps in a row, each found -> the next, the last -> completed."""
    ids = [f"d{n}" for n in range(1, length + 1)]
    following = ids[1:] + ["completed"]
    return graph([step(i, "detect", "cap") for i in ids],
                 {i: {"success": nxt, "not_found": "replan_required"} for i, nxt in zip(ids, following)})
