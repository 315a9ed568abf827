"""The ROS 2 commands: ``serve`` and ``sim-robot`` run nodes; ``submit``, ``plans``, ``status``, ``stop-at``,
``disarm``, ``pause``, ``resume``, ``step`` and ``cancel`` are clients of a running ``bt_exec`` node
(``--node NAME``, or ``--robot NS`` for the node of a robot's namespace); ``robots`` lists the bt_exec nodes on
the domain. Also the ROS executables ``bt_exec_node`` and ``bt_exec_sim_robot``.

They import rclpy only when they run, so the rest of the command line works where ROS 2 is not set up.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import bt_exec

from ..compilers import DIALECT_NAMES
from ..compilers.ir import STOP_WHENS
from ..control import OUTPUT_CHARS, expected_wait_s
from ..errors import Unreachable
from ..errors import Issue, PlanError
from ..terminal.render import one_line, printable
from .arguments import non_negative_int, positive_seconds
from .console import EXIT_FAILED, EXIT_OK, CommandError, configure_logging, error, make_output_safe
from .inputs import label, read_input
from .plan_commands import feedback_chars

ROS_COMMANDS = ("serve", "sim-robot", "submit", "plans", "status", "stop-at", "disarm", "pause", "resume", "step",
                "cancel", "robots", "fleet")
STOP_ACTIONS = ("cancel", "pause")
ROS_SETUP = "bash scripts/setup-ros.sh && . build/ros/env.sh (see docs/ros.md)"


def add_commands(commands) -> None:
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
        where = command.add_mutually_exclusive_group()
        where.add_argument("--node", default="/bt_exec", metavar="NAME",
                           help="the bt_exec node's full name, for a remapped one (default: /bt_exec)")
        where.add_argument("--robot", metavar="NS", type=robot_namespace,
                           help="the robot's namespace: shorthand for --node NS/bt_exec (bt-exec robots lists them)")
        command.add_argument("--timeout", type=positive_seconds, default=10.0, metavar="S",
                             help="seconds to wait for the node's service, and again for its answer (default: 10)")
        command.set_defaults(takes_ros_args=True)
        return command

    submit = add_client("submit", "submit a plan to a running bt_exec node; exit 0 if accepted")
    submit.add_argument("file", metavar="FILE", help="plan JSON file, or - for standard input")
    submit.add_argument("--run-id", metavar="ID", help="the run id (the same id again returns the same answer); "
                                                       "default: a Qwen3 submit envelope's, else a new one")
    submit.add_argument("--dialect", choices=DIALECT_NAMES, default="auto", help="plan dialect (default: auto)")
    submit.add_argument("--scene-revision", metavar="N", type=non_negative_int, default=-1,
                        help="Qwen3: the scene revision the graph was planned on (wraps a bare graph in a "
                             "submit envelope)")
    submit.add_argument("--json", action="store_true", help="print the node's answer as JSON")
    submit.set_defaults(command=submit_command)

    plans = add_client("plans", "list the plans running on a bt_exec node")
    plans.add_argument("--json", action="store_true", help="print the node's answer as JSON")
    plans.add_argument("--ops", action="store_true",
                       help="each plan with its ops (op_id, kind, cap, state, stop_point): the snapshot for the "
                            "planner's next prompt")
    plans.set_defaults(command=plans_command)

    status = add_client("status", "print a plan's live status or final record as JSON; exit 1 if unknown")
    status.add_argument("plan_id", metavar="PLAN")
    status.add_argument("--feedback", action="store_true",
                        help="print the planner's feedback on the plan instead (each finished call's op_id, cap, "
                             "success, output, error)")
    status.add_argument("--feedback-chars", metavar="N", type=feedback_chars, default=OUTPUT_CHARS,
                        help=f"with --feedback: longest output kept whole, in characters of its JSON "
                             f"(default: {OUTPUT_CHARS})")
    status.set_defaults(command=status_command)

    stop_at = add_client("stop-at", "arm a stop point: cancel plan PLAN when it reaches op OP (--pause: pause it "
                                    "there instead)")
    stop_at.add_argument("plan_id", metavar="PLAN")
    stop_at.add_argument("op_id", metavar="OP")
    stop_at.add_argument("--when", choices=STOP_WHENS, default="on_complete",
                         help="on entering the op or on its completion (default: on_complete)")
    action = stop_at.add_mutually_exclusive_group()
    action.add_argument("--action", choices=STOP_ACTIONS, default="cancel",
                        help="what the stop point does: cancel the plan, or pause it (a pause point: fires once; "
                             "resume or step goes on). Default: cancel")
    action.add_argument("--pause", dest="action", action="store_const", const="pause",
                        help="shorthand for --action pause")
    stop_at.set_defaults(command=stop_at_command)

    disarm = add_client("disarm", "disarm the stop point (or pause point) armed at op OP of plan PLAN")
    disarm.add_argument("plan_id", metavar="PLAN")
    disarm.add_argument("op_id", metavar="OP")
    disarm.add_argument("--when", choices=STOP_WHENS, default="on_complete",
                        help="the stop point's phase (default: on_complete)")
    disarm.set_defaults(command=disarm_command)

    for name, help_ in (("pause", "pause plan PLAN: no op starts until resume or step (ops already running go on "
                                  "to their end)"),
                        ("resume", "resume paused plan PLAN from where it held"),
                        ("step", "let plan PLAN enter its next op, then pause it again")):
        control = add_client(name, help_)
        control.add_argument("plan_id", metavar="PLAN")
        control.set_defaults(command=plan_control_command, service=name)

    cancel = add_client("cancel", "cancel plan PLAN, or every plan when PLAN is left out")
    cancel.add_argument("plan_id", metavar="PLAN", nargs="?", default="")
    cancel.add_argument("--wait-ms", metavar="N", type=non_negative_int, default=5000,
                        help="wait up to N ms for the plan(s) to finish (node caps it at 30000; default: 5000)")
    cancel.set_defaults(command=cancel_command)

    robots = commands.add_parser("robots", help="list the bt_exec nodes on this ROS domain: namespace, plans in "
                                                "flight, whether each answers", epilog=ros_args_help)
    robots.add_argument("--wait", type=positive_seconds, default=10.0, metavar="S",
                        help="the longest to look for nodes: DDS discovery is gradual, so the list is given once "
                             "what the domain shows has not changed for 3.5 s (default: 10; finding none, it "
                             "looks the whole S and exits 1)")
    robots.add_argument("--timeout", type=positive_seconds, default=5.0, metavar="S",
                        help="seconds each node has to answer (default: 5)")
    robots.add_argument("--json", action="store_true", help="print {count, robots: [{namespace, node, health, "
                                                            "plans}]} as JSON")
    robots.set_defaults(command=robots_command, takes_ros_args=True)


def ros_module(name: str):
    """Import a ``bt_exec.ros`` module; CommandError (exit 2) with the set-up steps when ROS 2 is missing."""
    try:
        return importlib.import_module(name)
    except Exception as exc:  # ImportError, or a broken ROS install failing as it loads
        raise CommandError(f"ROS 2 is not set up here ({type(exc).__name__}: {exc}); set it up with: "
                           f"{ROS_SETUP}") from None


def serve_command(args: argparse.Namespace) -> int:
    node = ros_module("bt_exec.ros.node")
    return node.main(["bt-exec", *args.ros_args], prog="bt-exec")


def sim_robot_command(argv: list[str]) -> int:
    return ros_module("bt_exec.ros.sim_robot").run_sim_robot(argv)


def sim_robot_main() -> int:
    """Console script ``bt_exec_sim_robot`` (``ros2 run bt_exec bt_exec_sim_robot --ros-args ...``)."""
    return _ros_executable(lambda: sim_robot_command(sys.argv[1:]))


def node_main() -> int:
    """Console script ``bt_exec_node`` (``ros2 run bt_exec bt_exec_node --ros-args ...``)."""
    return _ros_executable(lambda: ros_module("bt_exec.ros.node").main(sys.argv))


def _ros_executable(run) -> int:
    make_output_safe()
    configure_logging()
    try:
        return run()
    except CommandError as exc:
        error(str(exc))
        return exc.exit_code


def robot_namespace(text: str) -> str:
    """``--robot``: a namespace (``robot1``, ``/robot1``, ``/fleet/robot1``), as ``/robot1``."""
    tokens = [token for token in text.split("/") if token]
    if not tokens or not all(token.replace("_", "a").isalnum() and not token[0].isdigit() for token in tokens):
        raise argparse.ArgumentTypeError(f"{text!r} is not a ROS namespace (e.g. robot1 or /fleet/robot1)")
    return "/" + "/".join(tokens)


def _target(args: argparse.Namespace) -> str:
    """The node a client command calls: ``--robot NS`` is ``NS/bt_exec``."""
    return f"{args.robot}/bt_exec" if args.robot else args.node


def _call(args: argparse.Namespace, service: str, fill=None, extra_wait_s: float = 0.0, repeatable: bool = True):
    """Call one service of the node named by ``--node`` or ``--robot``; the response."""
    client_module = ros_module("bt_exec.ros.client")
    try:
        client = client_module.Client(_target(args), args.ros_args, args.timeout)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # bad --ros-args, an invalid node name
        raise CommandError(f"cannot start a ROS 2 client: {exc}") from None
    with client:
        request = client.request(service)
        if fill is not None:
            fill(request)
        try:
            return client.call(service, request, extra_wait_s, repeatable)
        except Unreachable as exc:  # no node serves the service, or it gave no answer in time
            raise CommandError(str(exc)) from None
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # an invalid service name (--node), a request field out of range
            where = _target(args).rstrip("/")
            raise CommandError(f"cannot call {where}/{service}: {type(exc).__name__}: {exc}") from None


def _response_dict(response) -> dict:
    return {name: getattr(response, name) for name in response.get_fields_and_field_types()}


def submit_command(args: argparse.Namespace) -> int:
    data = read_input(args.file)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PlanError([Issue("encoding", "", f"{label(args.file)} is not UTF-8 (byte {exc.start})")]) from None

    client = ros_module("bt_exec.ros.client")
    convert = ros_module("bt_exec.ros.convert")
    # Always a run_id, so that a request sent again (see bt_exec.ros.client) is answered once: the one a
    # Qwen3 submit envelope names, else a fresh one, as the node itself would make.
    run_id = args.run_id or convert.envelope_run_id(text, bt_exec.Limits().max_input_bytes) or client.new_run_id()

    def fill(request) -> None:
        request.graph_json = text
        request.run_id = run_id
        request.dialect = "" if args.dialect == "auto" else args.dialect
        request.scene_revision = args.scene_revision

    response = _call(args, "submit", fill)
    if args.json:
        answer = _response_dict(response)
        answer["issues"] = json.loads(answer.pop("issues_json") or "[]")
        answer["warnings"] = json.loads(answer.pop("warnings_json") or "[]")
        print(json.dumps(answer, indent=2))
    elif response.accepted and response.plan_id:
        print(printable(f"accepted: plan {response.plan_id} (run {response.run_id}): {response.message}"))
    elif response.accepted:
        print(printable(f"{response.verdict}: {response.message}"))
    if not args.json:
        for warning in json.loads(response.warnings_json or "[]"):
            print(printable(f"  warning: {warning['message']} [{warning['code']}]"), file=sys.stderr)
    if response.accepted:
        return EXIT_OK
    if not args.json:
        error(response.message)
        for issue in json.loads(response.issues_json or "[]"):
            print(f"  {printable(Issue(issue['code'], issue['path'], issue['message']))}", file=sys.stderr)
    return EXIT_FAILED


def plans_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.ops = args.ops

    plans = json.loads(_call(args, "list_plans", fill).plans_json)
    if args.json:
        print(json.dumps(plans, indent=2))
        return EXIT_OK
    if not plans["plans"]:
        print("no plans running")
    for plan in plans["plans"]:
        notes = [f"{plan['op_count']} ops"] + (["cancelling"] if plan["cancelled"] else []) + (
            ["paused"] if plan.get("paused") else []) + (
            [f"{plan['stop_points']} stop point(s)"] if plan["stop_points"] else [])
        print(printable(f"plan {plan['plan_id']}: {one_line(plan['description'])} ({', '.join(notes)})"))
    return EXIT_OK


def status_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.plan_id = args.plan_id
        request.feedback = args.feedback
        request.feedback_chars = args.feedback_chars

    response = _call(args, "get_status", fill)
    status = json.loads(response.status_json)
    if not response.found:
        error(status.get("error", f"no plan {args.plan_id!r}"))
        return EXIT_FAILED
    print(json.dumps(status, indent=2))
    return EXIT_OK


def stop_at_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.plan_id, request.op_id, request.when = args.plan_id, args.op_id, args.when
        request.action = args.action

    # A pause point fires once: one armed again by a late repeat would pause the plan a second time.
    return _answered(_call(args, "stop_at", fill, repeatable=args.action == "cancel"))


def disarm_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.plan_id, request.op_id, request.when = args.plan_id, args.op_id, args.when

    return _answered(_call(args, "disarm", fill))


def plan_control_command(args: argparse.Namespace) -> int:
    """``pause``, ``resume`` and ``step``: one PlanControl call, ``args.service``."""
    def fill(request) -> None:
        request.plan_id = args.plan_id

    # Sent once (see bt_exec.ros.client): a step sent again moves the plan on again, and a pause or resume
    # sent again late could undo a resume, or a pause point's pause, that came in between.
    return _answered(_call(args, args.service, fill, repeatable=False))


def _answered(response) -> int:
    """Print the answer's message: on stdout and exit 0 on success, as an error and exit 1 otherwise."""
    if not response.success:
        error(response.message)
        return EXIT_FAILED
    print(printable(response.message))
    return EXIT_OK


def cancel_command(args: argparse.Namespace) -> int:
    def fill(request) -> None:
        request.plan_id = args.plan_id
        request.wait_ms = min(args.wait_ms, 2**32 - 1)

    operation = "cancel_plan" if args.plan_id else "cancel_all"
    response = _call(args, "cancel", fill, extra_wait_s=expected_wait_s(operation, {"wait_ms": args.wait_ms}))
    if not response.success:
        error(response.message)
        return EXIT_FAILED
    print(printable(response.message))
    return EXIT_OK


def robots_command(args: argparse.Namespace) -> int:
    client_module = ros_module("bt_exec.ros.client")
    try:
        client = client_module.Client("/bt_exec", args.ros_args, args.timeout)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # bad --ros-args
        raise CommandError(f"cannot start a ROS 2 client: {exc}") from None
    with client:
        nodes = client_module.find_executors(client, args.wait)
        answers = client_module.list_plans_of(client, nodes, args.timeout)
    robots = []
    for node in nodes:
        answer = answers[node]
        robots.append({"namespace": node.rpartition("/")[0] or "/", "node": node,
                       "health": "ok" if answer is not None else "no answer",
                       "plans": None if answer is None else [plan["plan_id"] for plan in answer["plans"]]})
    if args.json:
        print(json.dumps({"count": len(robots), "robots": robots}, indent=2))
        return EXIT_OK if robots else EXIT_FAILED
    if not robots:
        error(f"no bt_exec node found on this ROS domain (looked {args.wait:g} s; ROS_DOMAIN_ID="
              f"{os.environ.get('ROS_DOMAIN_ID', '0')})")
        return EXIT_FAILED
    for robot in robots:
        plans = ("?" if robot["plans"] is None
                 else f"{len(robot['plans'])} plan(s) in flight" + (f": {', '.join(robot['plans'])}"
                                                                    if robot["plans"] else ""))
        print(printable(f"{robot['namespace']}  {robot['node']}  {robot['health']}  {plans}"))
    return EXIT_OK
