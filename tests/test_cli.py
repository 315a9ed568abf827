"""The bt-exec command line: exit codes, reports, trees, runs and hostile input.

Run through ``bt_exec.cli.main`` in this interpreter (``command_line.bt_exec_cli``); what needs a real process
runs as one: the entry points, Ctrl-C, a terminal on stdin or stdout, and ``run --web`` serving a browser."""
from __future__ import annotations

import argparse
import io
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
from command_line import REPO, TIMEOUT_S, bt_exec_cli, bt_exec_process, plan_complete, read_events
from terminal import run_on_terminal

import bt_exec
from bt_exec.cli import plan_commands
from bt_exec.terminal.compiled import CALL_CHARS
from bt_exec.terminal.run_view import EventLines
from bt_exec.web.client import HttpApi

SNAPSHOT = REPO / "examples" / "rtdl" / "snapshot_battery.json"
ARENA = REPO / "examples" / "rtdl" / "three_commands_arena.json"
CANCEL_ALL = REPO / "examples" / "rtdl" / "cancel_all.json"
BATTERY_LOW = REPO / "examples" / "sim" / "battery_low.json"
HATCH = REPO / "examples" / "qwen3" / "cap_to_hatch.json"
NEEDS_VACUUM = REPO / "examples" / "qwen3" / "cap_without_vacuum.json"
QWEN3_SCENE = REPO / "examples" / "qwen3" / "scene.json"


def op_states(events: list[dict], op_id: str) -> list[str]:
    return [e["state"] for e in events if e["event"] == "node_state" and e["op_id"] == op_id]


@pytest.fixture
def write(tmp_path):
    """Write bytes or text to a file in tmp_path; return its path."""
    def write(name: str, content: bytes | str) -> pathlib.Path:
        path = tmp_path / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
        return path
    return write


INVALID_TREE = json.dumps({"op": "sequence", "description": "two steps", "children": [
    {"op": "do", "description": "no cap here"},
    {"op": "wander", "description": "not an op"},
]})


# --- version and entry point ------------------------------------------------------

def test_version_prints_the_package_version():
    result = bt_exec_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"bt-exec {bt_exec.__version__}"


def test_python_m_bt_exec_cli_runs_as_a_process():
    """The module entry point (``python -m bt_exec.cli``), its exit code and both its streams."""
    ran = bt_exec_process("validate", SNAPSHOT)
    assert (ran.returncode, ran.stdout, ran.stderr) == (0, bt_exec_cli("validate", SNAPSHOT).stdout, "")
    usage = bt_exec_process()
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_installed_console_script_runs():
    script = shutil.which("bt-exec", path=os.path.dirname(sys.executable)) or shutil.which("bt-exec")
    if script is None:
        pytest.skip("the bt-exec console script is not installed")
    result = subprocess.run([script, "validate", str(SNAPSHOT)], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout


def test_no_command_is_a_usage_error():
    result = bt_exec_cli()
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_every_help_is_plain_text():
    """No reStructuredText from docstrings (``literals``, :class: roles) in bt-exec's or any command's --help."""
    def helps(parser, name):
        yield name, parser.format_help()
        for action in parser._actions:  # argparse keeps its subcommands here and nowhere public
            if isinstance(action, argparse._SubParsersAction):
                for command, sub in action.choices.items():
                    if command != "sim-robot":  # its options are the sim robot's own, read by ROS
                        yield from helps(sub, f"{name} {command}")

    from bt_exec.cli import dispatch  # main imports it on first use; this test may run before any main
    shown = dict(helps(dispatch.build_parser(), "bt-exec"))
    assert {"bt-exec", "bt-exec run", "bt-exec compile", "bt-exec watch", "bt-exec journal check"} <= set(shown)
    markup = {name: re.findall(r"``|:[a-z]+:`|`", text) for name, text in shown.items()}
    assert not {name: found for name, found in markup.items() if found}
    assert bt_exec_cli("--help").stdout == shown["bt-exec"]


# --- validate ---------------------------------------------------------------------

def test_validate_valid_plan_text():
    result = bt_exec_cli("validate", SNAPSHOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (f"{SNAPSHOT}: ok: rtdl envelope, 5 ops (1 sequence, 1 parallel, 3 do), depth 3")


def test_validate_valid_plan_json():
    result = bt_exec_cli("validate", ARENA, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report == {"valid": True, "verdict": "ok", "dialect": "rtdl", "issues": [],
                      "stats": {"shape": "arena", "ops": 4, "depth": 2, "sequence": 1, "parallel": 0, "do": 3}}


def test_validate_invalid_plan_text_lists_every_issue(write):
    result = bt_exec_cli("validate", write("bad.json", INVALID_TREE))
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].endswith("invalid: 2 issues")
    assert lines[1:] == ["  /children/0: do node has no 'cap' [required]",
                         "  /children/1/op: unknown op 'wander' (expected sequence, parallel or do) [bad_op]"]


def test_validate_invalid_plan_json(write):
    result = bt_exec_cli("validate", write("bad.json", INVALID_TREE), "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False and report["verdict"] == "invalid"
    assert [(i["code"], i["path"]) for i in report["issues"]] == [("required", "/children/0"),
                                                                   ("bad_op", "/children/1/op")]
    assert all(i["message"] for i in report["issues"])


@pytest.mark.parametrize("as_json", [False, True])
def test_validate_malformed_json(write, as_json):
    path = write("broken.json", '{"op": "sequence", "children": [')
    result = bt_exec_cli("validate", path, *(["--json"] if as_json else []))
    assert result.returncode == 1
    if as_json:
        report = json.loads(result.stdout)
        assert report["verdict"] == "invalid"
        assert [i["code"] for i in report["issues"]] == ["json_syntax"]
    else:
        assert "malformed JSON" in result.stdout and "[json_syntax]" in result.stdout


@pytest.mark.parametrize("as_json", [False, True])
def test_validate_unreadable_file_is_a_usage_error(tmp_path, as_json):
    missing = tmp_path / "missing.json"
    result = bt_exec_cli("validate", missing, *(["--json"] if as_json else []))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip() == f"bt-exec: cannot read {missing}: No such file or directory"


def test_validate_directory_is_a_usage_error(tmp_path):
    result = bt_exec_cli("validate", tmp_path)
    assert result.returncode == 2
    assert "cannot read" in result.stderr and "Is a directory" in result.stderr


def test_validate_meta_op_is_control():
    result = bt_exec_cli("validate", CANCEL_ALL)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{CANCEL_ALL}: control: a cancel_all request, not a plan")


def test_validate_meta_op_json():
    result = bt_exec_cli("validate", CANCEL_ALL, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["valid"], report["verdict"], report["issues"]) == (True, "control", [])
    assert report["stats"]["control"] == {"op": "cancel_all", "wait_ms": 5000}


def test_validate_reads_stdin():
    result = bt_exec_cli("validate", "-", "--json", stdin=SNAPSHOT.read_bytes())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["stats"]["ops"] == 5
    bad = bt_exec_cli("validate", "-", stdin=b"[1, 2")
    assert bad.returncode == 1
    assert bad.stdout.startswith("<stdin>: invalid")


def test_validate_with_catalog(write):
    catalog = write("catalog.json", json.dumps({
        "tiago_camera.camera_snapshot": {},
        "battery.battery_status": {"args_schema": {"type": "object", "additionalProperties": False}},
        "audio.speak_text": {"args_schema": {"type": "object", "required": ["text", "volume"]}},
    }))
    result = bt_exec_cli("validate", SNAPSHOT, "--catalog", catalog, "--json")
    assert result.returncode == 1
    issues = json.loads(result.stdout)["issues"]
    assert [(i["code"], i["path"]) for i in issues] == [("bad_args", "/rtdl/children/1/args")]
    assert "'volume' is a required property" in issues[0]["message"]


def test_validate_bad_catalog_is_a_usage_error(write):
    catalog = write("catalog.json", '{"a.b": {"args_schema": 7}}')
    result = bt_exec_cli("validate", SNAPSHOT, "--catalog", catalog)
    assert result.returncode == 2
    assert result.stderr.startswith("bt-exec: capability catalog is invalid at /a.b/args_schema")


def test_validate_unknown_dialect_is_a_usage_error():
    result = bt_exec_cli("validate", SNAPSHOT, "--dialect", "nonesuch")
    assert result.returncode == 2
    assert "invalid choice: 'nonesuch'" in result.stderr


def test_validate_a_qwen3_graph_without_a_scene_is_invalid_no_scene():
    result = bt_exec_cli("validate", HATCH)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"{HATCH}: invalid: 1 issue"
    assert lines[1].startswith("  (document): no scene given") and lines[1].endswith("[no_scene]")
    report = json.loads(bt_exec_cli("validate", HATCH, "--json").stdout)
    assert (report["valid"], report["verdict"], report["dialect"]) == (False, "invalid", "qwen3")
    assert "no_scene" in [issue["code"] for issue in report["issues"]]


@pytest.mark.parametrize("plan, options", [
    (HATCH, []),
    (HATCH, ["--scene"]),
    (NEEDS_VACUUM, ["--catalog", "grant", "--scene"]),
    (SNAPSHOT, []),
    (SNAPSHOT, ["--catalog"]),
    (CANCEL_ALL, []),
    ("bad.json", []),
], ids=["qwen3 without a scene", "qwen3 in a scene", "qwen3 to replan", "rtdl", "rtdl with a catalog",
        "control request", "invalid tree"])
def test_validate_answers_as_the_executor_validate_plan_does(write, plan, options):
    """The command line is one more door to the control API: the same input and options, the same report."""
    plan = write("bad.json", INVALID_TREE) if plan == "bad.json" else plan
    catalog = write("catalog.json", json.dumps({"tiago_camera.camera_snapshot": {}, "battery.battery_status": {}}))
    executor_options = {}
    if "--scene" in options:
        executor_options["scene"] = bt_exec.Scene.from_file(QWEN3_SCENE)
        options = [*options, QWEN3_SCENE]
    if options[:2] == ["--catalog", "grant"]:
        executor_options["skill_catalog"] = "grant"
    elif options == ["--catalog"]:
        executor_options["catalog"] = bt_exec.CapabilityCatalog.from_file(catalog)
        options = ["--catalog", catalog]
    result = bt_exec_cli("validate", plan, "--json", *options)
    expected = bt_exec.Executor(**executor_options).validate_plan(plan.read_bytes())
    assert json.loads(result.stdout) == expected
    assert result.returncode == (0 if expected["valid"] else 1)


# --- compile ----------------------------------------------------------------------

def test_compile_renders_ascii_by_default_each_do_op_with_its_call():
    result = bt_exec_cli("compile", SNAPSHOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [  # one line per op: a sequence, a parallel, do ops
        "{-} [1] capture the scene and check the battery, then report",
        "    /_/ [2] snapshot and battery check together",
        "        --> [3] take a snapshot -- tiago_camera.camera_snapshot",
        "        --> [4] read the battery status -- battery.battery_status",
        '    --> [5] tell the user the result -- audio.speak_text {"text": "Snapshot taken and battery checked."}',
    ]
    assert bt_exec_cli("compile", SNAPSHOT, "--render", "ascii").stdout == result.stdout
    assert result.stdout.isascii()


def test_compile_unicode_draws_branches_with_box_drawing_characters():
    result = bt_exec_cli("compile", SNAPSHOT, "--render", "unicode")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "{-} [1] capture the scene and check the battery, then report",
        "├── /_/ [2] snapshot and battery check together",
        "│   ├── --> [3] take a snapshot — tiago_camera.camera_snapshot",
        "│   └── --> [4] read the battery status — battery.battery_status",
        '└── --> [5] tell the user the result — audio.speak_text {"text": "Snapshot taken and battery checked."}',
    ]


def test_compile_cuts_long_args_to_a_sensible_width(write):
    plan = write("long.json", json.dumps({"op": "do", "description": "say", "cap": "audio.speak_text",
                                          "args": {"text": "la " * 500}}))
    for render, ellipsis in (("ascii", "..."), ("unicode", "…")):
        [line] = bt_exec_cli("compile", plan, "--render", render).stdout.splitlines()
        call = line.split(" -- " if render == "ascii" else " — ", 1)[1]
        assert call.startswith('audio.speak_text {"text": "la la ') and call.endswith(ellipsis)
        assert len(call) == CALL_CHARS


def test_compile_dot_is_named_after_the_plan_with_a_node_per_op():
    result = bt_exec_cli("compile", ARENA, "--render", "dot")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == 'digraph "run the three commands" {' and lines[-1] == "}"
    assert '  "4" -> "5";' in lines and result.stdout.count("->") == 3  # the sequence -> its three do ops
    assert ('  "5" [shape=ellipse, label="[5] echo one\\nrobonix/system/executor/builtin/run_command '
            '{\\"command\\": \\"echo STEP_ONE_DONE\\"}"];') in lines
    quoted = bt_exec_cli("compile", "-", "--render", "dot",
                         stdin=json.dumps({"op": "do", "description": 'say "hi" \\ bye', "cap": "a.b"}).encode())
    assert quoted.stdout.splitlines()[0] == 'digraph "say \\"hi\\" \\\\ bye" {'


def test_compile_invalid_plan(write):
    result = bt_exec_cli("compile", write("bad.json", INVALID_TREE), "--render", "ascii")
    assert result.returncode == 1
    assert result.stdout == ""
    assert "bt-exec: plan refused: 2 issues" in result.stderr
    assert "/children/1/op: unknown op 'wander'" in result.stderr


def test_compile_meta_op_is_not_a_plan():
    result = bt_exec_cli("compile", CANCEL_ALL, "--render", "ascii")
    assert result.returncode == 1
    assert "is a control request (cancel_all), not a plan" in result.stderr


def test_compile_refuses_an_unknown_render():
    result = bt_exec_cli("compile", SNAPSHOT, "--render", "svg")
    assert result.returncode == 2
    assert "--render" in result.stderr and "'ascii', 'unicode', 'dot'" in result.stderr


# --- run --------------------------------------------------------------------------

def test_run_success(tmp_path):
    events_path = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", SNAPSHOT, "--events", events_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "plan 1 started: snapshot + battery check (5 ops)"
    assert "op 3 do running: take a snapshot" in lines
    assert "op 3 do succeeded: take a snapshot" in lines
    assert ("op 1 sequence succeeded: capture the scene and check the battery, then report "
            "[all 2 children succeeded]") in lines
    assert lines[-2] == "plan 1 complete: succeeded"
    assert lines[-1].startswith("plan 1 succeeded after ") and lines[-1].endswith("; ops: 5 succeeded")
    events = read_events(events_path)
    assert events[0]["event"] == "plan_started"
    assert plan_complete(events)["outcome"] == "succeeded"
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)


def test_run_failing_sim_script(tmp_path):
    events_path = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", SNAPSHOT, "--sim-script", BATTERY_LOW, "--events", events_path)
    assert result.returncode == 1, result.stderr
    assert ("op 4 do failed: read the battery status [error: battery at 7%: below the 15% needed to continue]"
            in result.stdout.splitlines())
    assert result.stdout.splitlines()[-1].endswith("; ops: 1 succeeded, 3 failed, 1 pending")
    events = read_events(events_path)
    assert op_states(events, "5") == []  # the sequence stops at the failed parallel
    complete = plan_complete(events)
    assert (complete["outcome"], complete["any_failed"], complete["cancelled"]) == ("failed", True, False)
    started = events[0]["time"]
    assert 0.9 <= complete["time"] - started < 5  # the script's durations: the battery check takes 1 s


def test_run_stop_at_on_enter(tmp_path):
    events_path = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", SNAPSHOT, "--stop-at", "3:on_enter", "--events", events_path)
    assert result.returncode == 1, result.stderr
    events = read_events(events_path)
    assert op_states(events, "3") == ["canceled"]
    [canceled] = [e for e in events if e["event"] == "node_state" and e["op_id"] == "3"]
    assert canceled["detail"] == "stop point on_enter fired: the op never started"
    assert op_states(events, "5") == []
    complete = plan_complete(events)
    assert (complete["cancelled"], complete["outcome"]) == (True, "cancelled")
    assert "(stop point on_enter at op 3)" in result.stdout.splitlines()[-1]


def test_run_stop_at_defaults_to_on_complete(tmp_path):
    events_path = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", SNAPSHOT, "--stop-at", "2", "--events", events_path)
    assert result.returncode == 1, result.stderr
    events = read_events(events_path)
    assert op_states(events, "2") == ["running", "canceled"]
    [final] = [e for e in events if e["event"] == "node_state" and e["op_id"] == "2" and e["state"] == "canceled"]
    assert final["detail"] == "stop point on_complete fired after the op succeeded"
    assert op_states(events, "5") == []
    assert plan_complete(events)["cancelled"] is True


def test_run_stop_at_uses_arena_op_ids(tmp_path):
    events_path = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", ARENA, "--stop-at", "6:on_enter", "--events", events_path)
    assert result.returncode == 1, result.stderr
    events = read_events(events_path)
    assert (op_states(events, "5"), op_states(events, "6"), op_states(events, "7")) == (
        ["running", "succeeded"], ["canceled"], [])


def test_run_stop_at_missing_op_is_a_usage_error(tmp_path):
    events_path = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", SNAPSHOT, "--stop-at", "9:on_enter", "--events", events_path)
    assert result.returncode == 2
    assert "the plan has no op '9' (its op ids: 1, 2, 3, 4, 5;" in result.stderr
    assert result.stderr.rstrip().endswith(f"See each op with its id: bt-exec compile {SNAPSHOT}")
    assert result.stdout == ""
    assert not events_path.exists()


def test_run_pause_at_waits_for_enter_on_the_terminal_then_goes_on(tmp_path):
    events_path = tmp_path / "events.jsonl"
    primary, secondary = os.openpty()  # stdin on a terminal: the run resumes on Enter there
    proc = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "run", str(SNAPSHOT), "--pause-at", "3:on_enter",
                             "--events", str(events_path)], stdin=secondary, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=REPO)
    os.close(secondary)
    try:
        said = proc.stderr.readline().decode()
        assert said == ("bt-exec: plan 1 paused at op 3 (on_enter): press Enter (or r then Enter) to resume, "
                        "Ctrl-C to cancel\n")
        os.write(primary, b"what\n")  # anything else is answered with how to resume
        assert proc.stderr.readline().decode() == "bt-exec: press Enter (or r then Enter) to resume, Ctrl-C to cancel\n"
        os.write(primary, b"r\n")
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
    finally:
        os.close(primary)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    lines = stdout.decode().splitlines()
    assert "plan 1 paused at op 3 (on_enter) (over api): no op starts until it resumes" in lines
    assert lines.index("plan 1 resumed (over api)") < lines.index("op 3 do running: take a snapshot")
    events = read_events(events_path)
    assert [e["event"] for e in events if e["event"] in ("pause_point", "paused", "resumed")] == [
        "pause_point", "paused", "resumed"]
    assert plan_complete(events)["outcome"] == "succeeded"


def test_run_pause_at_with_nothing_to_resume_it_is_refused_before_the_plan_starts(tmp_path):
    events_path = tmp_path / "events.jsonl"
    # stdin is no terminal: this was a plan paused for ever
    result = bt_exec_cli("run", SNAPSHOT, "--pause-at", "3", "--events", events_path)
    assert result.returncode == 2
    assert "--pause-at needs a way to resume the plan: --web PORT" in result.stderr
    assert "stdin is no terminal" in result.stderr
    assert result.stdout == "" and not events_path.exists()


def test_run_pause_at_a_missing_op_names_the_flag():
    result = bt_exec_cli("run", SNAPSHOT, "--pause-at", "9")
    assert result.returncode == 2 and "bt-exec: --pause-at: the plan has no op '9'" in result.stderr


@pytest.mark.parametrize("stop_at, op_id, when", [("5:on_exit", "5", "on_exit"), ("3:", "3", "")])
def test_run_stop_at_an_op_with_a_bad_when_names_the_when_and_the_phases(stop_at, op_id, when):
    result = bt_exec_cli("run", SNAPSHOT, "--stop-at", stop_at)
    assert result.returncode == 2
    assert result.stderr == (f"bt-exec: --stop-at {stop_at!r}: bad WHEN {when!r} for op {op_id!r} (the phases a stop "
                             "point takes: on_enter, on_complete)\n")
    assert result.stdout == ""


def test_run_stop_at_an_op_id_holding_a_colon_is_that_op(tmp_path):
    plan = {"root_index": 0, "nodes": [{"node_kind": 2, "children": [], "op_id": "arm:left", "description": "wave",
                                        "call": {"contract_id": "sim.act", "args_json": "{}"}}]}
    path = tmp_path / "colon.json"
    path.write_text(json.dumps(plan))
    assert bt_exec_cli("run", path, "--stop-at", "arm:left:on_enter").returncode == 1  # stopped there
    bad_when = bt_exec_cli("run", path, "--stop-at", "arm:left:on_exit")
    assert bad_when.returncode == 2 and "bad WHEN 'on_exit' for op 'arm:left'" in bad_when.stderr


def test_run_stop_at_without_op_is_a_usage_error():
    result = bt_exec_cli("run", SNAPSHOT, "--stop-at", ":on_enter")
    assert result.returncode == 2
    assert "names no op" in result.stderr


@pytest.mark.parametrize("script, message", [
    ('{"caps": {"a.b": {"outcome": "explode!"}}}', "sim script is invalid at /caps/a.b/outcome"),
    ('{"defaults": {}}', "sim script is invalid at /: Additional properties are not allowed"),
    ("{not json", "is not valid JSON"),
])
def test_run_bad_sim_script_is_a_usage_error(write, script, message):
    result = bt_exec_cli("run", SNAPSHOT, "--sim-script", write("sim.json", script))
    assert result.returncode == 2
    assert result.stderr.startswith("bt-exec: ") and message in result.stderr
    assert result.stdout == ""


def test_run_missing_sim_script_is_a_usage_error(tmp_path):
    result = bt_exec_cli("run", SNAPSHOT, "--sim-script", tmp_path / "nope.json")
    assert result.returncode == 2
    assert "cannot read sim script" in result.stderr


def test_run_refused_plan_prints_issues(write):
    result = bt_exec_cli("run", write("bad.json", INVALID_TREE))
    assert result.returncode == 1
    assert "bt-exec: plan refused: 2 issues" in result.stderr
    assert "  /children/0: do node has no 'cap' [required]" in result.stderr.splitlines()


def test_run_refused_by_catalog(write):
    catalog = write("catalog.json", json.dumps({"battery.battery_status": {}}))
    result = bt_exec_cli("run", SNAPSHOT, "--catalog", catalog)
    assert result.returncode == 1
    assert "capability 'tiago_camera.camera_snapshot' is not in the catalog [unknown_cap]" in result.stderr
    assert "started" not in result.stdout


def test_run_meta_op_is_not_a_plan():
    result = bt_exec_cli("run", CANCEL_ALL)
    assert result.returncode == 1
    assert "is a control request (cancel_all), not a plan" in result.stderr


@pytest.mark.parametrize("options, message", [
    (["--backend", "ros"], "invalid choice: 'ros'"),
    (["--tick-rate", "0"], "expected a positive number of ticks per second"),
    (["--tick-rate", "fast"], "'fast' is not a number"),
])
def test_run_bad_options_are_usage_errors(options, message):
    result = bt_exec_cli("run", SNAPSHOT, *options)
    assert result.returncode == 2
    assert message in result.stderr


def test_run_prints_a_ticks_event_lines_in_one_write_with_their_newline():
    """Written unbuffered into the pipe that stderr shares, a line printed in two writes (its text, then its
    newline) let a log record from another thread land inside it."""
    writes = []

    class Recording(io.StringIO):
        def write(self, text):
            writes.append(text)
            return super().write(text)

    lines = EventLines(Recording())
    lines([{"event": "plan_started", "plan_id": plan_id, "description": "a plan", "op_count": 1}
           for plan_id in ("1", "2")])
    assert writes == ["plan 1 started: a plan (1 ops)\nplan 2 started: a plan (1 ops)\n"]


def test_run_unwritable_events_file_is_a_usage_error(tmp_path):
    result = bt_exec_cli("run", SNAPSHOT, "--events", tmp_path)
    assert result.returncode == 2
    assert f"cannot write events to {tmp_path}" in result.stderr


def test_ctrl_c_cancels_the_plan(tmp_path, write):
    slow = write("slow.json", '{"default": {"duration_s": 30}}')
    events_path = tmp_path / "events.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "run", str(SNAPSHOT), "--sim-script", str(slow),
                             "--events", str(events_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO)
    try:
        for line in proc.stdout:  # wait until a call is running, then interrupt
            if line.startswith("op 3 do running"):
                break
        proc.send_signal(signal.SIGINT)
        rest, stderr = proc.communicate(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "op 3 do canceled: take a snapshot [plan cancelled while the op ran]" in rest.splitlines()
    assert rest.splitlines()[-1].startswith("plan 1 cancelled after ")
    assert plan_complete(read_events(events_path))["cancelled"] is True


@pytest.mark.skipif(not hasattr(os, "openpty"), reason="needs a pseudo-terminal")
def test_run_on_a_terminal_draws_a_live_tree():
    proc, screen = run_on_terminal(["run", str(SNAPSHOT), "--sim-script", str(BATTERY_LOW)], REPO, TIMEOUT_S)
    assert proc.returncode == 1
    assert "\x1b[H" in screen and "\x1b[2J" in screen
    final_frame = screen.rsplit("\x1b[H", 1)[1]
    assert "│  ├─ ✔ 3 do succeeded: take a snapshot — tiago_camera.camera_snapshot()" in final_frame
    assert ("│  └─ ✘ 4 do failed: read the battery status — battery.battery_status() [battery at 7%: below the 15% "
            "needed to continue]" in final_frame)
    assert '└─ ○ 5 do pending: tell the user the result — audio.speak_text(text="Snapshot taken and battery ' \
           'checked.")' in final_frame
    assert "plan 1 failed after " in final_frame
    assert "op 3 do running" not in screen  # a terminal gets the tree, not the event lines


def test_control_characters_in_descriptions_never_reach_the_terminal(write):
    plan = write("escape.json", json.dumps({"op": "do", "description": "red \x1b[31m alert\r\nline two", "cap": "a.b",
                                            "args": {"say": "\u202eevil\x1b[2J"}}))
    ran = bt_exec_cli("run", plan)
    assert ran.returncode == 0
    assert "op 1 do succeeded: red [31m alert line two" in ran.stdout.splitlines()
    for render in ("ascii", "unicode", "dot"):
        compiled = bt_exec_cli("compile", plan, "--render", render)
        assert compiled.returncode == 0
        for control in ("\x1b", "\r", "\u202e"):
            assert control not in ran.stdout + compiled.stdout


def start_web_run(*options):
    """``bt-exec run SNAPSHOT --web 0 OPTIONS`` started; (process, the app's URL)."""
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "run", str(SNAPSHOT), "--web", "0", *options],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    announced = process.stderr.readline()
    assert "web console: http://" in announced, announced
    return process, announced.rsplit(" ", 1)[1].strip()


def test_run_web_serves_on_after_a_quick_plan_until_its_page_has_loaded():
    process, url = start_web_run()
    try:
        waiting = process.stderr.readline()
        assert waiting == (f"bt-exec: the plan ended; serving {url} until its page has loaded once (at most "
                           f"{plan_commands.PAGE_GRACE_S:.0f} s; Ctrl-C stops now, --keep-serving serves on)\n")
        assert HttpApi(url).call("get_plan_result", {"plan_id": "1"})["outcome"] == "succeeded"
        with pytest.raises(subprocess.TimeoutExpired):  # the API read is not the page: had it counted as the
            process.wait(timeout=plan_commands.PAGE_SETTLE_S + 0.5)  # page, serving would end PAGE_SETTLE_S on
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as page:
            assert b"<html" in page.read().lower()
        loaded = time.monotonic()
        process.wait(timeout=TIMEOUT_S)
        served_on = time.monotonic() - loaded
    finally:
        process.kill()
    assert process.returncode == 0 and "plan 1 succeeded" in process.stdout.read()
    # On for the page's scripts and first reads, then off well before the grace period would have ended.
    assert plan_commands.PAGE_SETTLE_S - 0.5 <= served_on < plan_commands.PAGE_GRACE_S - 2


def test_run_web_with_no_page_loaded_stops_serving_after_the_grace_period(monkeypatch):
    monkeypatch.setattr(plan_commands, "PAGE_GRACE_S", 1.0)  # the grace period's wait, made short
    began = time.monotonic()
    result = bt_exec_cli("run", SNAPSHOT, "--web", "0")
    took = time.monotonic() - began
    assert result.returncode == 0 and "plan 1 succeeded" in result.stdout
    assert "until its page has loaded once (at most 1 s;" in result.stderr
    assert plan_commands.PAGE_GRACE_S <= took < plan_commands.PAGE_GRACE_S + 5


# --- no traceback, whatever the input -------------------------------------------------

HOSTILE_INPUTS = {
    # name: (content, exit code of validate / compile / run, issue code validate reports)
    "binary junk": (bytes(range(256)) * 16, 1, "encoding"),
    "100000 nested arrays": ("[" * 100_000 + "]" * 100_000, 1, "too_deep"),
    "100000 nested objects": ('{"a":' * 100_000 + "1" + "}" * 100_000, 1, "too_deep"),
    "huge integer": ('{"op": "do", "description": "d", "cap": "a.b", "args": {"n": ' + "9" * 100_000 + "}}", 1,
                     "json_syntax"),
    "a JSON string": ('"sequence"', 1, "type"),
    "an empty file": ("", 1, "json_syntax"),
    "NaN": ('{"op": "do", "description": "d", "cap": "a.b", "args": {"n": NaN}}', 1, "json_syntax"),
    "deep plan": ('{"op": "sequence", "description": "d", "children": [' * 5000 + "]}" * 5000, 1, "too_deep"),
}


@pytest.mark.parametrize("name", HOSTILE_INPUTS)
def test_hostile_input_never_shows_a_traceback(write, name):
    content, exit_code, issue_code = HOSTILE_INPUTS[name]
    path = write("hostile.json", content)
    report = bt_exec_cli("validate", path, "--json")
    assert report.returncode == exit_code
    assert issue_code in [issue["code"] for issue in json.loads(report.stdout)["issues"]]
    for args in (["validate", path], ["compile", path, "--render", "ascii"], ["run", path]):
        result = bt_exec_cli(*args)
        assert result.returncode == exit_code, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_huge_float_and_lone_surrogate_are_refused(write):
    huge = write("huge.json", '{"op": "do", "description": "d", "cap": "a.b", "args": {"n": 1e999999}}')
    result = bt_exec_cli("validate", huge)
    assert result.returncode == 1 and "too large" in result.stdout + result.stderr
    path = write("odd.json", '{"op": "do", "description": "bad \\ud800 text", "cap": "a.b", "args": {}}')
    for args in (["validate", path], ["compile", path, "--render", "unicode"], ["run", path]):
        result = bt_exec_cli(*args)
        assert result.returncode == 1, (args, result.stderr)
        assert "/description: a string with a lone surrogate (U+D800 at character 4)" in result.stdout + result.stderr
        assert "[bad_text]" in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_oversized_input_is_refused(write):
    limit = bt_exec.Limits().max_input_bytes
    path = write("big.json", b" " * (limit + 10))
    result = bt_exec_cli("validate", path, "--json")
    assert result.returncode == 1
    [issue] = json.loads(result.stdout)["issues"]
    assert issue["code"] == "too_large"
    assert issue["message"] == f"{path} is over the input limit of {limit} bytes"


def test_deeply_nested_sim_script_is_a_usage_error(write):
    script = write("sim.json", '{"default": {"output": ' + "[" * 100_000 + "]" * 100_000 + "}}")
    result = bt_exec_cli("run", SNAPSHOT, "--sim-script", script)
    assert "Traceback" not in result.stderr
    assert result.returncode == 2


def test_events_file_keeps_text_beyond_ascii_and_is_not_started_for_a_refused_plan(tmp_path, write):
    path = write("odd.json", '{"op": "do", "description": "caf\u00e9 \U0001f600 \u202e", "cap": "a.b"}')
    events_path = tmp_path / "events.jsonl"
    result = bt_exec_cli("run", path, "--events", events_path)
    assert result.returncode == 0
    events = read_events(events_path)
    assert [e["event"] for e in events] == ["plan_started", "node_state", "node_state", "plan_complete"]
    assert events[0]["description"] == "caf\u00e9 \U0001f600 \u202e"
    refused = write("bad.json", '{"op": "do", "description": "bad \\udfff", "cap": "a.b"}')
    other_events = tmp_path / "other.jsonl"
    assert bt_exec_cli("run", refused, "--events", other_events).returncode == 1 and not other_events.exists()


# --- internal errors -------------------------------------------------------------------

def test_unexpected_errors_are_internal_errors(monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(bt_exec.Executor, "validate_plan", explode)
    result = bt_exec_cli("validate", SNAPSHOT)
    assert (result.returncode, result.stdout) == (3, "")
    assert result.stderr == "bt-exec: internal error: RuntimeError: boom\n"
