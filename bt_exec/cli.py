"""The ``bt-exec`` command line: validate, compile and run plans; serve and drive them over ROS 2.

Exit codes: 0 success; 1 the plan is invalid, is a control request where a plan
is needed, or failed / was cancelled when run (ROS client commands: the node
refused the request); 2 usage errors and unusable files or options (also: ROS 2
not set up, no node answering); 3 an internal error; 130 a run interrupted with
Ctrl-C.

The ROS commands (``serve``, ``sim-robot``, ``submit``, ``plans``, ``status``,
``stop-at``, ``cancel``) import rclpy only when they run; everything from
``--ros-args`` on is handed to rclpy.
"""
from __future__ import annotations

import argparse
import collections
import importlib
import json
import logging
import math
import os
import sys
import threading

import py_trees

import bt_exec

from .compilers import DIALECT_NAMES as DIALECTS, ControlRequest, Plan
from .compilers.ir import STOP_WHENS
from .errors import BtExecError, Issue, PlanError
from . import watch
from .live_view import EventLines, LiveView, one_line, printable
from .web import ControlApi, WebServer
from .web.client import HttpApi
from .web.mcp_server import McpUnavailable, serve_stdio
from .web.server import TOKEN_ENV

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130

RENDERS = ("ascii", "unicode", "dot")
ROS_COMMANDS = ("serve", "sim-robot", "submit", "plans", "status", "stop-at", "cancel")
ROS_SETUP = "bash scripts/setup-ros.sh && . build/ros/env.sh (see docs/ros.md)"
BACKENDS = ("sim",)
# Op states in the order the run summary counts them.
SUMMARY_STATES = ("succeeded", "failed", "timeout", "canceled", "running", "paused", "pending")
# Longest a Ctrl-C waits to be noticed during a run.
CTRL_C_LATENCY_S = 0.1
# How many op ids a "no such op" message lists before it stops.
LISTED_OP_IDS = 20


class CommandError(Exception):
    """A command cannot go on; main prints ``bt-exec: <message>`` and exits with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def main(argv: list[str] | None = None) -> int:
    """Run one ``bt-exec`` command; return its exit code. Nothing it is given ends in a traceback."""
    _make_output_safe()
    _configure_logging()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if argv[:1] == ["sim-robot"]:  # its options are the sim robot's own: hand them over untouched
            return sim_robot_command(argv[1:])
        argv, ros_args = split_ros_args(argv)
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse: usage errors (2), --help and --version (0)
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if ros_args and not getattr(args, "takes_ros_args", False):
            raise CommandError(f"--ros-args is only for the ROS commands ({', '.join(ROS_COMMANDS)})")
        args.ros_args = ros_args
        return args.command(args)
    except KeyboardInterrupt:  # a run handles its own; this is Ctrl-C anywhere else
        return EXIT_INTERRUPTED
    except CommandError as exc:
        _error(str(exc))
        return exc.exit_code
    except PlanError as exc:
        _print_refusal(exc.issues)
        return EXIT_FAILED
    except BrokenPipeError:
        # Whoever reads our output went away (`| head`): stop quietly, and keep the
        # interpreter from complaining when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except (BtExecError, OSError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    except Exception as exc:
        _error(f"internal error: {type(exc).__name__}: {exc}")
        return EXIT_INTERNAL


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bt-exec", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {bt_exec.__version__}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")

    def add_catalog(command: argparse.ArgumentParser) -> None:
        command.add_argument("--catalog", metavar="NAME|PATH",
                             help="RTDL: a capability catalog file to check caps and args against; Qwen3: the skill "
                                  "catalog, shipped (grant, the default) or a file")

    def add_input(command: argparse.ArgumentParser) -> None:
        command.add_argument("file", metavar="FILE", help="plan JSON file, or - for standard input")
        command.add_argument("--dialect", choices=DIALECTS, default="auto", help="plan dialect (default: auto)")

    validate = commands.add_parser("validate", help="check a plan; exit 0 if valid, 1 if not")
    add_input(validate)
    add_catalog(validate)
    validate.add_argument("--scene", metavar="SCENE.json", help="Qwen3: the scene to check the graph against")
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    validate.set_defaults(command=validate_command)

    compile_ = commands.add_parser("compile", help="print the behaviour tree a plan compiles to")
    add_input(compile_)
    compile_.add_argument("--render", choices=RENDERS, required=True, help="tree format")
    add_catalog(compile_)
    compile_.set_defaults(command=compile_command)

    run = commands.add_parser("run", help="run a plan to the end; exit 0 if it succeeded")
    add_input(run)
    run.add_argument("--backend", choices=BACKENDS, default="sim", help="capability backend (default: sim)")
    run.add_argument("--sim-script", metavar="F", help="sim backend script: outcomes and durations per cap or op")
    add_catalog(run)
    run.add_argument("--scene", metavar="SCENE.json", help="Qwen3: the scene the graph runs in (required for Qwen3)")
    run.add_argument("--max-steps", metavar="N", type=positive_int, default=1000,
                     help="Qwen3: most steps one run may execute (default: 1000)")
    run.add_argument("--stop-at", metavar="OP[:WHEN]", type=stop_point, action="append", default=[],
                     help="cancel the plan when it reaches op OP; WHEN is on_enter or on_complete (default); "
                          "repeatable. See op ids with: bt-exec compile FILE --render ascii")
    run.add_argument("--events", metavar="F.jsonl", help="append every event to this JSONL file")
    run.add_argument("--tick-rate", metavar="HZ", type=tick_rate, default=100.0, help="ticks per second (default: 100)")
    add_op_timeout(run)
    add_web(run)
    run.add_argument("--keep-serving", action="store_true",
                     help="with --web: keep serving after the plan ended, until Ctrl-C (more plans can be submitted)")
    run.set_defaults(command=run_command)

    mcp = commands.add_parser("mcp", help="serve the control operations as MCP tools on stdin/stdout (for LLM agents)",
                              description="Serve submit_plan, validate_plan, get_all_plans, get_plan_status, "
                                          "get_plan_result, stop_plan_at, cancel_plan and cancel_all as MCP tools "
                                          "over stdio: to a running app (--url) or to an executor of its own on the "
                                          "sim backend. The token of --url's app comes from $" + TOKEN_ENV + ".")
    mcp.add_argument("--url", metavar="URL", help="drive the app at URL (the ROS node's web_port, bt-exec run --web) "
                                                  "instead of an executor of its own")
    mcp.add_argument("--sim-script", metavar="F", help="own executor: sim backend script")
    mcp.add_argument("--catalog", metavar="PATH", help="own executor: RTDL capability catalog file")
    mcp.add_argument("--skill-catalog", metavar="NAME|PATH", default="grant",
                     help="own executor: Qwen3 skill catalog (default: grant)")
    mcp.add_argument("--scene", metavar="SCENE.json", help="own executor: the scene Qwen3 graphs run in")
    mcp.add_argument("--tick-rate", metavar="HZ", type=tick_rate, default=100.0, help="ticks per second (default: 100)")
    add_op_timeout(mcp)
    add_web(mcp)
    mcp.set_defaults(command=mcp_command)

    watch_ = commands.add_parser("watch", help="follow a running app's plan live in the terminal (bt-exec run --web, "
                                               "the ROS node's web_port)", description=watch.DESCRIPTION)
    watch.add_arguments(watch_)
    watch_.set_defaults(command=watch.watch_command)
    add_ros_commands(commands)
    return parser


def add_op_timeout(command: argparse.ArgumentParser) -> None:
    command.add_argument("--op-timeout", metavar="S", type=positive_seconds,
                         help="longest one capability call may run; past it the call is cancelled and its op ends "
                              "timeout (default: no limit)")


def add_web(command: argparse.ArgumentParser) -> None:
    command.add_argument("--web", metavar="PORT", type=port_number,
                         help="serve the operator console and HTTP API on PORT (0: any free port) while running; "
                              "its URL is printed on stderr")
    command.add_argument("--web-host", metavar="HOST", default="127.0.0.1",
                         help="address the web app binds to (default: 127.0.0.1); beyond loopback it needs a token "
                              "in $" + TOKEN_ENV)


def add_ros_commands(commands) -> None:
    """``serve`` and ``sim-robot`` run ROS 2 nodes; the others are clients of a running ``bt_exec`` node."""
    ros_args_help = ("ROS options go last, after --ros-args: -p NAME:=VALUE, -r FROM:=TO, --params-file FILE, "
                     "--log-level LEVEL, -e ENCLAVE. Needs ROS 2: " + ROS_SETUP)
    serve = commands.add_parser("serve", help="run the bt_exec ROS 2 node (bt-exec serve --ros-args ...)",
                                description="Run the bt_exec ROS 2 node until SIGINT or SIGTERM. Parameters, "
                                            "services and topics: docs/ros.md.", epilog=ros_args_help)
    serve.set_defaults(command=serve_command, takes_ros_args=True)
    sim_robot = commands.add_parser("sim-robot", add_help=False, help="run a simulated robot serving RunCapability "
                                                                      "actions (bt-exec sim-robot --ros-args ...)")
    sim_robot.set_defaults(command=lambda args: sim_robot_command(args.ros_args), takes_ros_args=True)

    def add_client(name: str, help_: str) -> argparse.ArgumentParser:
        command = commands.add_parser(name, help=help_, epilog=ros_args_help)
        command.add_argument("--node", default="/bt_exec", metavar="NAME",
                             help="the bt_exec node's full name, for a remapped one (default: /bt_exec)")
        command.add_argument("--timeout", type=positive_seconds, default=10.0, metavar="S",
                             help="seconds to wait for the node's service, and again for its answer (default: 10)")
        command.set_defaults(takes_ros_args=True)
        return command

    submit = add_client("submit", "submit a plan to a running bt_exec node; exit 0 if accepted")
    submit.add_argument("file", metavar="FILE", help="plan JSON file, or - for standard input")
    submit.add_argument("--run-id", metavar="ID", help="the run id (the same id again returns the same answer); "
                                                       "default: a Qwen3 submit envelope's, else a new one")
    submit.add_argument("--dialect", choices=DIALECTS, default="auto", help="plan dialect (default: auto)")
    submit.add_argument("--scene-revision", metavar="N", type=non_negative_int, default=-1,
                        help="Qwen3: the scene revision the graph was planned on (wraps a bare graph in a "
                             "submit envelope)")
    submit.add_argument("--json", action="store_true", help="print the node's answer as JSON")
    submit.set_defaults(command=submit_command)

    plans = add_client("plans", "list the plans running on a bt_exec node")
    plans.add_argument("--json", action="store_true", help="print the node's answer as JSON")
    plans.set_defaults(command=plans_command)

    status = add_client("status", "print a plan's live status or final record as JSON; exit 1 if unknown")
    status.add_argument("plan_id", metavar="PLAN")
    status.set_defaults(command=status_command)

    stop_at = add_client("stop-at", "arm a stop point: cancel plan PLAN when it reaches op OP")
    stop_at.add_argument("plan_id", metavar="PLAN")
    stop_at.add_argument("op_id", metavar="OP")
    stop_at.add_argument("--when", choices=STOP_WHENS, default="on_complete",
                         help="on entering the op or on its completion (default: on_complete)")
    stop_at.set_defaults(command=stop_at_command)

    cancel = add_client("cancel", "cancel plan PLAN, or every plan when PLAN is left out")
    cancel.add_argument("plan_id", metavar="PLAN", nargs="?", default="")
    cancel.add_argument("--wait-ms", metavar="N", type=non_negative_int, default=5000,
                        help="wait up to N ms for the plan(s) to finish (node caps it at 60000; default: 5000)")
    cancel.set_defaults(command=cancel_command)


def split_ros_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """(bt-exec's own arguments, everything from ``--ros-args`` on, for rclpy)."""
    if "--ros-args" in argv:
        index = argv.index("--ros-args")
        return argv[:index], argv[index:]
    return argv, []


def stop_point(text: str) -> tuple[str, str]:
    """``OP[:on_enter|on_complete]`` -> (op id, when). Op ids may hold colons: only a known WHEN is split off."""
    op_id, colon, when = text.rpartition(":")
    if not colon or when not in STOP_WHENS:
        op_id, when = text, "on_complete"
    if not op_id.strip():
        raise argparse.ArgumentTypeError(f"{text!r} names no op (expected OP or OP:on_enter or OP:on_complete)")
    return op_id, when


def _number_argument(convert, accept, expected: str):
    """An argparse type: ``convert`` the text, then refuse values ``accept`` rejects, saying what was expected."""
    noun = "whole number" if convert is int else "number"

    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


positive_int = _number_argument(int, lambda value: value >= 1, "a positive whole number")
non_negative_int = _number_argument(int, lambda value: value >= 0, "a whole number >= 0")
positive_seconds = _number_argument(float, lambda value: value > 0 and math.isfinite(value),
                                    "a positive number of seconds")
tick_rate = _number_argument(float, lambda value: value > 0 and math.isfinite(value),
                             "a positive number of ticks per second")
port_number = _number_argument(int, lambda value: 0 <= value <= 65535, "a port number 0..65535")


# --- commands ---------------------------------------------------------------------

def validate_command(args: argparse.Namespace) -> int:
    scene = bt_exec.Scene.from_file(args.scene) if args.scene else None
    try:
        loaded = bt_exec.load(read_input(args.file), dialect=args.dialect)
    except PlanError as exc:
        report = bt_exec.Report("invalid", None if args.dialect == "auto" else args.dialect, exc.issues)
    else:
        report = bt_exec.validate(loaded, catalog=catalog_for(loaded, args.catalog), scene=scene)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2))
    else:
        print(printable(report_text(_label(args.file), report)))  # issue paths and messages quote the input
    return EXIT_OK if report.ok else EXIT_FAILED


def compile_command(args: argparse.Namespace) -> int:
    _source, plan = read_plan(args.file, args.dialect, "compile")
    catalog = catalog_for(plan, args.catalog)
    report = bt_exec.validate(plan, catalog=catalog)  # as the executor would check it (no scene here)
    if report.verdict not in ("ok", "replan_required"):  # replan_required is about a scene; the graph compiles
        raise PlanError(report.issues)
    root = bt_exec.compile_plan(plan, catalog if plan.dialect == "qwen3" else None).root
    if args.render == "dot":
        rendered = py_trees.display.dot_tree(root).to_string()
    elif args.render == "unicode":
        rendered = py_trees.display.unicode_tree(root)
    else:
        rendered = py_trees.display.ascii_tree(root)
    print(printable(rendered))  # node names carry the plan's descriptions, control characters included
    return EXIT_OK


def run_command(args: argparse.Namespace) -> int:
    source, plan = read_plan(args.file, args.dialect, "run")
    catalog = catalog_for(plan, args.catalog)
    if plan.dialect == "qwen3":
        if not args.scene:
            raise CommandError("a Qwen3 graph runs in a scene: give --scene SCENE.json")
        scene = bt_exec.Scene.from_file(args.scene)
        backend = bt_exec.SimBackend.in_scene(args.sim_script, catalog, scene)
        executor = bt_exec.Executor(backend=backend, skill_catalog=catalog, scene=scene, max_steps=args.max_steps,
                                    tick_rate_hz=args.tick_rate, op_timeout_s=args.op_timeout)
    else:
        backend = bt_exec.SimBackend(args.sim_script)
        executor = bt_exec.Executor(backend=backend, catalog=catalog, tick_rate_hz=args.tick_rate,
                                    op_timeout_s=args.op_timeout)
    if args.keep_serving and args.web is None:
        raise CommandError("--keep-serving goes with --web PORT")
    web = _start_web(ControlApi(executor), args)
    try:
        answer = executor.submit(source, dialect=args.dialect)
        if not answer["accepted"]:
            _error(f"refused: {answer['verdict']}")
            raise PlanError([Issue(**issue) for issue in answer["issues"]])
        plan_id = answer["plan_id"]
        if plan.numbered_by_loader:  # the executor numbers ops from its own counter; follow it
            plan = plan.renumbered(int(answer["root_op_id"]))
        for op_id, when in args.stop_at:
            if op_id not in plan.ops:
                raise CommandError(_missing_op_message(op_id, plan, args.file))
            executor.stop_plan_at(plan_id, op_id, when)
        code = _run_to_end(executor, plan_id, plan, args.events)
        if args.keep_serving and code != EXIT_INTERRUPTED:
            _error(f"the plan ended; still serving {web.url} until Ctrl-C")
            _wait_for_ctrl_c()
        return code
    finally:
        if web is not None:
            web.close()
        executor.close()


def _start_web(api: ControlApi, args: argparse.Namespace) -> WebServer | None:
    """The web app serving ``api`` when ``--web`` is given (started, its URL on stderr), else None."""
    if args.web is None:
        return None
    server = WebServer(api, host=args.web_host, port=args.web, token=os.environ.get(TOKEN_ENV) or None)
    server.start()
    print(f"bt-exec: web console: {server.url}", file=sys.stderr, flush=True)
    return server


def _wait_for_ctrl_c() -> None:
    try:
        while True:
            threading.Event().wait(3600)
    except KeyboardInterrupt:
        pass


def mcp_command(args: argparse.Namespace) -> int:
    if args.url:
        if args.web is not None or args.sim_script or args.catalog or args.scene or args.op_timeout:
            raise CommandError("--url drives a running app: --web, --sim-script, --catalog, --scene and --op-timeout "
                               "are for an executor of its own")
        api = HttpApi(args.url, token=os.environ.get(TOKEN_ENV))
        executor = web = None
    else:
        skill_catalog = bt_exec.SkillCatalog.named(args.skill_catalog)
        scene = bt_exec.Scene.from_file(args.scene) if args.scene else None
        catalog = bt_exec.CapabilityCatalog.from_file(args.catalog) if args.catalog else None
        executor = bt_exec.Executor(backend=bt_exec.SimBackend.in_scene(args.sim_script, skill_catalog, scene),
                                    catalog=catalog, skill_catalog=skill_catalog, scene=scene,
                                    tick_rate_hz=args.tick_rate, op_timeout_s=args.op_timeout)
        api = ControlApi(executor)  # the MCP tools and, with --web, the browser share it
        web = None
    try:
        if executor is not None:
            executor.start()
            web = _start_web(api, args)
        serve_stdio(api)
    except McpUnavailable as exc:
        raise CommandError(str(exc)) from None
    except KeyboardInterrupt:
        pass
    finally:
        if web is not None:
            web.close()
        if executor is not None:
            executor.close()
    return EXIT_OK


def _run_to_end(executor: bt_exec.Executor, plan_id: str, plan: Plan, events_path: str | None) -> int:
    view = LiveView(executor, plan_id, plan, sys.stdout) if sys.stdout.isatty() else None
    finished = threading.Event()

    def note_plan_end(event: dict) -> None:
        if event["event"] == "plan_complete" and event["plan_id"] == plan_id:
            finished.set()

    journal = None
    unsubscribes = [executor.subscribe(view or EventLines(sys.stdout))]
    interrupted = False
    try:
        try:
            if events_path:
                journal = _open_journal(events_path)
                unsubscribes.append(executor.subscribe(journal))
            # Subscribers are called in order, so once this last one hears plan_complete the
            # journal has it too.
            unsubscribes.append(executor.subscribe(note_plan_end))
            if view:
                view.start()
            # The executor ticks in its own thread, so Ctrl-C lands in this one, which only
            # waits: never in the middle of a tick, and the plan can still be torn down cleanly.
            executor.start()
            # Wait in slices: a signal that comes just before a wait begins (or that the OS
            # hands to another thread) is only acted on once that wait ends.
            while not finished.wait(CTRL_C_LATENCY_S):
                continue
            record = executor.run_until_complete(plan_id)
        except KeyboardInterrupt:
            interrupted = True
            executor.cancel_plan(plan_id)
            record = executor.get_plan_result(plan_id)
    finally:
        for unsubscribe in unsubscribes:
            unsubscribe()
        if journal:
            journal.close()
    if view:
        view.close(record)
    print(summary_line(record))
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_OK if record["outcome"] == "succeeded" else EXIT_FAILED


# --- ROS commands -------------------------------------------------------------------

def _ros_module(name: str):
    """Import a ``bt_exec.ros`` module; CommandError (exit 2) with the set-up steps when ROS 2 is missing."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # ImportError, or a broken ROS install failing as it loads
        raise CommandError(f"ROS 2 is not set up here ({type(exc).__name__}: {exc}); set it up with: "
                           f"{ROS_SETUP}") from None


def serve_command(args: argparse.Namespace) -> int:
    node = _ros_module("bt_exec.ros.node")
    return node.main(["bt-exec", *args.ros_args], prog="bt-exec")


def sim_robot_command(argv: list[str]) -> int:
    return _ros_module("bt_exec.ros.sim_robot").run_sim_robot(argv)


def sim_robot_main() -> int:
    """Console script ``bt_exec_sim_robot`` (``ros2 run bt_exec bt_exec_sim_robot --ros-args ...``)."""
    return _ros_executable(lambda: sim_robot_command(sys.argv[1:]))


def node_main() -> int:
    """Console script ``bt_exec_node`` (``ros2 run bt_exec bt_exec_node --ros-args ...``)."""
    return _ros_executable(lambda: _ros_module("bt_exec.ros.node").main(sys.argv))


def _ros_executable(run) -> int:
    _make_output_safe()
    _configure_logging()
    try:
        return run()
    except CommandError as exc:
        _error(str(exc))
        return exc.exit_code


def _call(args: argparse.Namespace, service: str, fill=None, extra_wait_s: float = 0.0):
    """Call one service of the node named by ``--node``; the response."""
    client_module = _ros_module("bt_exec.ros.client")
    try:
        client = client_module.Client(args.node, args.ros_args, args.timeout)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # bad --ros-args, an invalid node name
        raise CommandError(f"cannot start a ROS 2 client: {exc}") from None
    with client:
        request = client.request(service)
        if fill is not None:
            fill(request)
        try:
            return client.call(service, request, extra_wait_s)
        except client_module.Unreachable as exc:
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # an invalid service name (--node), a request field out of range
            raise CommandError(f"cannot call {args.node.rstrip('/')}/{service}: {type(exc).__name__}: {exc}") from None


def _response_dict(response) -> dict:
    return {name: getattr(response, name) for name in response.get_fields_and_field_types()}


def submit_command(args: argparse.Namespace) -> int:
    data = read_input(args.file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PlanError([Issue("encoding", "", f"{_label(args.file)} is not UTF-8 (byte {exc.start})")]) from None

    client = _ros_module("bt_exec.ros.client")
    convert = _ros_module("bt_exec.ros.convert")
    # Always a run_id, so that a request sent again (see bt_exec.ros.client) is answered once: the one a
    # Qwen3 submit envelope names, else a fresh one, as the node itself would make.
    run_id = args.run_id or (convert.envelope_run_id(text, bt_exec.Limits().max_input_bytes)
                             if args.dialect != "rtdl" else None) or client.new_run_id()

    def fill(request) -> None:
        request.graph_json = text
        request.run_id = run_id
        request.dialect = "" if args.dialect == "auto" else args.dialect
        request.scene_revision = args.scene_revision

    response = _call(args, "submit", fill)
    if args.json:
        answer = _response_dict(response)
        answer["issues"] = json.loads(answer.pop("issues_json") or "[]")
        print(json.dumps(answer, indent=2))
    elif response.accepted and response.plan_id:
        print(printable(f"accepted: plan {response.plan_id} (run {response.run_id}): {response.message}"))
    elif response.accepted:
        print(printable(f"{response.verdict}: {response.message}"))
    if response.accepted:
        return EXIT_OK
    if not args.json:
        _error(response.message)
        for issue in json.loads(response.issues_json or "[]"):
            print(f"  {printable(Issue(issue['code'], issue['path'], issue['message']))}", file=sys.stderr)
    return EXIT_FAILED


def plans_command(args: argparse.Namespace) -> int:
    plans = json.loads(_call(args, "list_plans").plans_json)
    if args.json:
        print(json.dumps(plans, indent=2))
        return EXIT_OK
    if not plans["plans"]:
        print("no plans running")
    for plan in plans["plans"]:
        notes = [f"{plan['op_count']} ops"] + (["cancelling"] if plan["cancelled"] else []) + (
            [f"{plan['stop_points']} stop point(s)"] if plan["stop_points"] else [])
        print(printable(f"plan {plan['plan_id']}: {one_line(plan['description'])} ({', '.join(notes)})"))
    return EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.plan_id = args.plan_id

    response = _call(args, "get_status", fill)
    status = json.loads(response.status_json)
    if not response.found:
        _error(status.get("error", f"no plan {args.plan_id!r}"))
        return EXIT_FAILED
    print(json.dumps(status, indent=2))
    return EXIT_OK


def stop_at_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.plan_id, request.op_id, request.when = args.plan_id, args.op_id, args.when

    response = _call(args, "stop_at", fill)
    if not response.success:
        _error(response.message)
        return EXIT_FAILED
    print(printable(response.message))
    return EXIT_OK


def cancel_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.plan_id = args.plan_id
        request.wait_ms = min(args.wait_ms, 2**32 - 1)

    response = _call(args, "cancel", fill, extra_wait_s=min(args.wait_ms, 60_000) / 1000.0)
    if not response.success:
        _error(response.message)
        return EXIT_FAILED
    print(printable(response.message))
    return EXIT_OK


def catalog_for(plan, name_or_path: str | None):
    """The catalog a plan is checked against: a skill catalog for step graphs, a capability catalog for RTDL."""
    if getattr(plan, "dialect", None) == "qwen3":
        return bt_exec.SkillCatalog.named(name_or_path or "grant")
    return bt_exec.CapabilityCatalog.from_file(name_or_path) if name_or_path else None


def _open_journal(path: str) -> bt_exec.JsonlJournal:
    try:
        return bt_exec.JsonlJournal(path)
    except OSError as exc:
        raise CommandError(f"cannot write events to {path}: {exc.strerror or exc}") from None


# --- input ------------------------------------------------------------------------

def read_input(name: str) -> bytes:
    """The bytes of file ``name`` (``-``: standard input), read no further than the input size limit.

    Raises CommandError (exit 2) if it cannot be read and PlanError if it is over
    the limit: reading on would let /dev/zero or a huge file eat all memory.
    """
    limit = bt_exec.Limits().max_input_bytes
    try:
        if name == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(name, "rb") as file:
                data = file.read(limit + 1)
    except OSError as exc:
        raise CommandError(f"cannot read {name}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise PlanError([Issue("too_large", "", f"{_label(name)} is over the input limit of {limit} bytes")])
    return data


def read_plan(name: str, dialect: str, verb: str) -> tuple[bytes, Plan]:
    """The bytes of ``name`` and the plan they hold; PlanError if invalid, CommandError for a meta op."""
    source = read_input(name)
    loaded = bt_exec.load(source, dialect=dialect)
    if isinstance(loaded, ControlRequest):
        raise CommandError(f"{_label(name)} is a control request ({loaded.op}), not a plan: there is nothing to "
                           f"{verb}. A control request acts on the plans of a running executor.", EXIT_FAILED)
    return source, loaded


# --- output -----------------------------------------------------------------------

def report_text(label: str, report: bt_exec.Report) -> str:
    """The readable validation report: a verdict line, then one line per issue."""
    if report.verdict == "control":
        control = report.stats["control"]
        return f"{label}: control: a {control['op']} request, not a plan ({json.dumps(control)})"
    stats = report.stats
    if report.verdict == "ok" and report.dialect == "qwen3":
        return (f"{label}: ok: qwen3 {stats['shape']}, {stats['steps']} steps, {stats['transitions']} transitions, "
                f"entry {stats['entry']}")
    if report.verdict == "ok":
        return (f"{label}: ok: {report.dialect} {stats['shape']}, {stats['ops']} ops ({stats['sequence']} sequence, "
                f"{stats['parallel']} parallel, {stats['do']} do), depth {stats['depth']}")
    if report.verdict == "blocked":
        return f"{label}: blocked: the planner refused" + (f" ({stats['reason']})" if stats.get("reason") else "")
    count = len(report.issues)
    lines = [f"{label}: {report.verdict}: {count} issue{'s' if count != 1 else ''}"]
    lines += [f"  {issue}" for issue in report.issues]
    return "\n".join(lines)


def summary_line(record: dict) -> str:
    """``plan 1 failed after 0.81 s; ops: 3 succeeded, 1 failed, 1 pending`` (with the cancel reason or error).

    A step graph's summary is its path and terminal: ``path: s1 -> s2 -> completed``.
    """
    counts = collections.Counter(op["state"] for op in record["ops"])
    states = ", ".join(f"{counts[state]} {state}" for state in SUMMARY_STATES if counts[state])
    reasons = "; ".join(one_line(reason) for reason in (record["cancel_reason"], record["error"]) if reason)
    because = f" ({reasons})" if reasons else ""
    line = f"plan {record['plan_id']} {record['outcome']} after {record['duration_s']:.2f} s{because}; ops: {states}"
    if "terminal" in record:
        reason = record["terminal_reason"]
        line += (f"\npath: {' -> '.join(record['path'])}\nterminal: {record['terminal']}"
                 + (f" ({one_line(reason)})" if reason else "")
                 + f"\nholding: {record['state']['holding']}; patron: {', '.join(record['state']['patron']) or 'free'}")
    return line


def _missing_op_message(op_id: str, plan: Plan, name: str) -> str:
    ids = list(plan.ops)
    shown = ", ".join(ids[:LISTED_OP_IDS]) + (f", ... ({len(ids)} ops)" if len(ids) > LISTED_OP_IDS else "")
    return (f"--stop-at: the plan has no op {op_id!r} (its op ids: {shown}; expected OP, OP:on_enter or "
            f"OP:on_complete). See each op with its id: bt-exec compile {name} --render ascii")


def _print_refusal(issues: list[Issue]) -> None:
    count = len(issues)
    _error(f"plan refused: {count} issue{'s' if count != 1 else ''}")
    for issue in issues:
        print(f"  {printable(issue)}", file=sys.stderr)


def _label(name: str) -> str:
    return "<stdin>" if name == "-" else name


def _error(message: str) -> None:
    print(f"bt-exec: {printable(message)}", file=sys.stderr)


def _make_output_safe() -> None:
    # Plan text can hold lone surrogates ("\ud800" is valid JSON) or characters the
    # terminal's encoding lacks; print them escaped rather than fail with UnicodeEncodeError.
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")


class _OneLineFormatter(logging.Formatter):
    """Log records as ``bt-exec: warning: message (Error: detail)``: the CLI never shows a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        message = f"bt-exec: {record.levelname.lower()}: {record.getMessage()}"
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            message += f" ({type(error).__name__}: {error})"
        return message


def _configure_logging() -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(_OneLineFormatter())
    logging.basicConfig(level=logging.WARNING, handlers=[handler])


if __name__ == "__main__":
    sys.exit(main())
