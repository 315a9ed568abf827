"""``validate``, ``compile`` and ``run``: a plan file checked, shown as its behaviour tree, or run to the end."""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import stat
import sys
import tempfile
import threading
import time

import jsonpatch
import jsonpointer

import bt_exec

from ..compilers import Plan, apply_fixes, dialect_of, document_of, document_text
from ..compilers.ir import STOP_WHENS
from ..control import MAX_OUTPUT_CHARS, MIN_OUTPUT_CHARS, OUTPUT_CHARS, ControlApi
from ..errors import Issue, PlanError
from ..events import finite_json
from ..terminal.compiled import ASCII, UNICODE, dot_text, tree_text
from ..terminal.render import one_line, printable
from ..terminal.run_view import EventLines, LiveView
from .arguments import (add_catalog, add_fix, add_guard, add_input, add_op_timeout, add_scene, add_web, positive_int,
                        stop_point, tick_rate)
from .btcpp_options import add_blackboard, add_export, add_groot2, blackboard_seeds, export_command, start_groot2
from .console import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, CommandError, error
from .dry_run_commands import dry_run_command
from .inputs import checking_executor, control_message, label, read_input, read_plan
from .physics_options import add_record, check_record, start_recording, stop_recording
from .web_commands import start_web

RENDERS = ("ascii", "unicode", "dot")
BACKENDS = ("sim", "physics")
# Op states in the order the run summary counts them.
SUMMARY_STATES = ("succeeded", "failed", "timeout", "canceled", "running", "paused", "pending")
# Longest a Ctrl-C waits to be noticed during a run.
CTRL_C_LATENCY_S = 0.1
# run --web without --keep-serving, once the plan ended: how long the app waits for its page to be loaded, and
# how long a loaded page is still answered (its scripts, its first reads, the last events).
PAGE_GRACE_S = 10.0
PAGE_SETTLE_S = 2.0
# How many op ids a "no such op" message lists before it stops.
LISTED_OP_IDS = 20
# validate --fix: most rounds of fixing then checking again (a fix can uncover faults the first check did not
# reach, as a node's unknown op hides its other fields).
FIX_ROUNDS = 5


def add_commands(commands) -> None:
    validate = commands.add_parser("validate", help="check a plan; exit 0 if valid, 1 if not")
    add_input(validate)
    add_catalog(validate)
    add_scene(validate)
    validate.add_argument("--json", action="store_true", help="print the report as JSON")
    add_guard(validate)
    add_fix(validate)
    validate.set_defaults(command=validate_command)

    compile_ = commands.add_parser("compile", help="print the behaviour tree a plan compiles to")
    add_input(compile_)
    compile_.add_argument("--render", choices=RENDERS, default="ascii",
                          help="ascii (the default) or unicode: one line per op, a do op's cap and args after its "
                               "description, a step graph's transitions after its steps; dot: Graphviz source, "
                               "the graph named after the plan")
    add_catalog(compile_)
    add_scene(compile_)
    add_guard(compile_)
    add_export(compile_)
    compile_.set_defaults(command=compile_command)

    run = commands.add_parser("run", help="run a plan to the end; exit 0 if it succeeded")
    add_input(run)
    run.add_argument("--backend", choices=BACKENDS, default="sim",
                     help="capability backend (default: sim); physics: Qwen3 graphs move a KUKA iiwa 14 in the "
                          "Grant cell simulated in MuJoCo (pip install 'bt_exec[physics]')")
    run.add_argument("--sim-script", metavar="F", help="sim backend script: outcomes and durations per cap or op")
    run.add_argument("--cell-poses", metavar="F.yaml",
                     help="with --backend physics: the cell's named poses (and objects: where parts really are); "
                          "default config/grant_cell_poses.yaml")
    run.add_argument("--physics-speed", metavar="X|max", type=physics_speed, default=1.0,
                     help="with --backend physics: simulated time per real time (default: 1, real time), or max: "
                          "as fast as the machine goes")
    add_record(run)
    add_catalog(run)
    run.add_argument("--scene", metavar="SCENE.json", help="Qwen3: the scene the graph runs in (required for Qwen3)")
    run.add_argument("--max-steps", metavar="N", type=positive_int, default=1000,
                     help="Qwen3: most steps one run may execute (default: 1000)")
    run.add_argument("--stop-at", metavar="OP[:WHEN]", type=stop_point, action="append", default=[],
                     help="cancel the plan when it reaches op OP; WHEN is on_enter or on_complete (default); "
                          "repeatable. See op ids with: bt-exec compile FILE")
    run.add_argument("--pause-at", metavar="OP[:WHEN]", type=stop_point, action="append", default=[],
                     help="pause the plan when it reaches op OP (once; WHEN as for --stop-at); repeatable. With --web "
                          "resume from the console or POST /api/plans/ID/resume; without it, press Enter (or r then "
                          "Enter) on the terminal to resume; Ctrl-C cancels")
    run.add_argument("--events", metavar="F.jsonl",
                     help="append a run header and every event to this JSONL file; exit 1 if it cannot be written")
    run.add_argument("--tick-rate", metavar="HZ", type=tick_rate, default=100.0, help="ticks per second (default: 100)")
    add_op_timeout(run)
    add_guard(run)
    add_web(run)
    add_groot2(run)
    add_blackboard(run)
    run.add_argument("--keep-serving", action="store_true",
                     help="with --web or --groot2: keep serving after the plan ended, until Ctrl-C (more plans can "
                          "be submitted over the web app). Without it the app serves on after the plan ended until "
                          "its page has loaded "
                          f"once (then {PAGE_SETTLE_S:.0f} s more), at most {PAGE_GRACE_S:.0f} s")
    run.add_argument("--feedback", action="store_true",
                     help="print the planner's feedback on the run (each finished call's op_id, cap, success, output, "
                          "error) as one JSON line, the last of the output")
    run.add_argument("--feedback-chars", metavar="N", type=feedback_chars, default=OUTPUT_CHARS,
                     help=f"with --feedback: longest output kept whole, in characters of its JSON (default: "
                          f"{OUTPUT_CHARS}); longer ones are cut to a marker")
    run.add_argument("--dry-run", action="store_true",
                     help="run nothing on a robot: run the plan on the sim along every path (every op succeeding, "
                          "then each op's other outcomes; a step graph's every transition) and print where each ends; "
                          "exit 0 once explored")
    run.set_defaults(command=run_command)


def validate_command(args: argparse.Namespace) -> int:
    """The verdict ``Executor.validate_plan`` gives, as HTTP, MCP and ROS give it, for the options' catalog and
    scene; with ``--fix OUT`` the plan repaired by the report's fixes is written to OUT and checked again."""
    if args.fix_lossy and not args.fix:
        raise CommandError("--fix-lossy goes with --fix OUT")
    repair = None
    try:
        source = read_input(args.file)
    except PlanError as exc:  # over the input limit: not read whole, so no door is shown it
        report = bt_exec.Report("invalid", None if args.dialect == "auto" else args.dialect, exc.issues).as_dict()
    else:
        executor = checking_executor(args, source)
        try:
            report = executor.validate_plan(source, dialect=args.dialect)
            if args.fix:
                repair = _repaired(executor, source, report, args)
        finally:
            executor.close()
    if args.fix and repair is None:
        error(f"--fix: {label(args.file)} holds no plan document to repair; {args.fix} not written")
    if args.json:
        print(json.dumps({**report, "repair": repair} if repair is not None else report, indent=2))
    else:
        print(printable(report_text(label(args.file), report)))  # issue paths and messages quote the input
        if repair is not None:
            print(printable(repair_text(label(args.file), report, repair)))
    if repair is not None:
        return EXIT_OK if repair["report"]["valid"] else EXIT_FAILED
    return EXIT_OK if report["valid"] and not args.fix else EXIT_FAILED


def _repaired(executor: bt_exec.Executor, source: bytes, report: dict, args: argparse.Namespace) -> dict | None:
    """Apply the report's fixes to the document, check it again and repeat while fixes are found (a fix can
    uncover faults the check did not reach); write the result to ``args.fix`` when a fix was applied or the
    input is valid (then as it is), never an unrepaired invalid input. A lossy
    fix (it drops data) is applied only with ``--fix-lossy``. ``{out, written, fixes_applied, fixes_skipped,
    report}`` (``report``: of what was written, else of the input), or None if the input holds no plan
    document (JSON, or BT.CPP XML written back as XML)."""
    try:
        doc = document_of(source, args.dialect)
    except PlanError:
        return None
    applied, skipped = 0, {}
    for _round in range(FIX_ROUNDS):
        if report["valid"]:
            break
        chosen = _fixes_to_apply(report["issues"], args.fix_lossy, skipped)
        if not chosen:
            break
        try:
            doc = apply_fixes(doc, chosen)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException):
            break  # a fix that does not fit the document as the others left it: keep what was repaired
        applied += len(chosen)
        text = document_text(doc)
        report = executor.validate_plan((text if text is not None else json.dumps(doc)).encode(), dialect=args.dialect)
    written = applied > 0 or report["valid"]  # a valid input is OUT as it is; else OUT only when repaired
    if written:
        text = document_text(doc)
        _write_atomically(args.fix, text.encode() if text is not None else _json_bytes(doc, args.fix))
    return {"out": args.fix, "written": written, "fixes_applied": applied, "fixes_skipped": list(skipped.values()),
            "report": report}


def _fixes_to_apply(issues: list[dict], lossy_too: bool, skipped: dict) -> list[dict]:
    """The issues whose fixes ``--fix`` applies, in order; each lossy one it leaves goes into ``skipped``. Past a
    fix left out, the issues found after fixes are left too: they were found in a document that had it."""
    chosen, left_one = [], False
    for issue in issues:
        if "fix" not in issue:
            continue
        if issue.get("after_fixes") and left_one:
            break
        if issue.get("lossy") and not lossy_too:
            skipped.setdefault((issue["code"], issue["path"], issue["message"]), issue)
            left_one = True
            continue
        chosen.append(issue)
    return chosen


def _json_bytes(doc: object, out: str) -> bytes:
    """The repaired document as UTF-8 JSON text; CommandError (exit 1, nothing written) for text with no UTF-8
    form (a lone surrogate, which JSON text may escape but no file can hold as a character)."""
    text = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise CommandError(f"--fix: {out} not written: the repaired document holds text with no UTF-8 form "
                           f"({exc.reason}: {text[exc.start:exc.end]!a}; see its bad_text issues)",
                           EXIT_FAILED) from None


def _write_atomically(path: str, data: bytes) -> None:
    """Write ``data`` to a new file beside ``path`` and rename it over ``path``: ``path`` (which may be the
    input itself) is never changed until the whole output is written, and a failure leaves it as it was. A link
    is followed, and an existing file keeps its permissions."""
    target = os.path.realpath(path)
    folder = os.path.dirname(target)
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def repair_text(name: str, report: dict, repair: dict) -> str:
    """What ``--fix`` did: the fixes applied and where the result went (with its report), or why nothing was
    written; then each lossy fix left out."""
    out, count = repair["out"], repair["fixes_applied"]
    if report["valid"]:
        lines = [f"{name}: valid, nothing to repair; its JSON written to {out} as it is"]
    elif repair["written"]:
        lines = [f"{name}: {count} fix{'es' if count != 1 else ''} applied, the repaired document written to {out}",
                 report_text(out, repair["report"])]
    else:
        why = "its lossy fixes need --fix-lossy" if repair["fixes_skipped"] else "no issue has a fix"
        lines = [f"{name}: no fix applied ({why}); {out} not written"]
    for issue in repair["fixes_skipped"]:
        lines.append(f"  not applied (lossy; --fix-lossy applies it): {Issue(**issue)}")
    return "\n".join(lines)


def compile_command(args: argparse.Namespace) -> int:
    source = read_input(args.file)
    executor = checking_executor(args, source)
    try:  # the verdict validate and submit give, for the same options
        report = executor.validate_plan(source, dialect=args.dialect)
    finally:
        executor.close()
    if report["verdict"] == "control":
        raise CommandError(control_message(args.file, report["stats"]["control"]["op"], "compile"), EXIT_FAILED)
    if not report["valid"]:
        error(f"refused: {report['verdict']}")
        # the issues of the input itself: those its repaired document would have are validate's to show
        raise PlanError([Issue(**issue) for issue in report["issues"] if not issue.get("after_fixes")])
    plan = bt_exec.load(source, dialect=args.dialect)
    exported = export_command(plan, args)
    if exported is not None:
        return exported
    compiled = bt_exec.compile_plan(plan, catalog_for(plan, args.catalog))
    if args.render == "dot":
        rendered = dot_text(compiled)
    else:
        rendered = tree_text(compiled, UNICODE if args.render == "unicode" else ASCII)
    print(printable(rendered))  # node names carry the plan's descriptions, control characters included
    return EXIT_OK


def run_command(args: argparse.Namespace) -> int:
    if args.dry_run:
        return dry_run_command(args)
    source, plan = read_plan(args, "run")
    catalog = catalog_for(plan, args.catalog)
    kind = dialect_of(plan)
    physics = args.backend == "physics"
    check_record(args)
    if kind.needs_scene and not args.scene and not physics:
        raise CommandError(f"a {kind.name} plan runs in a scene: give --scene SCENE.json")
    scene = bt_exec.Scene.from_file(args.scene) if kind.needs_scene and args.scene else None
    catalogs = {kind.executor_option: catalog} if catalog is not None else {}
    if physics:
        backend = _physics_cell(args, kind, scene, catalog)
        scene = backend.scene
    else:
        if args.cell_poses or args.physics_speed != 1.0:
            raise CommandError("--cell-poses and --physics-speed go with --backend physics")
        backend = bt_exec.SimBackend.in_scene(args.sim_script, catalog if scene is not None else None, scene)
    executor = bt_exec.Executor(backend=backend, scene=scene, max_steps=args.max_steps, tick_rate_hz=args.tick_rate,
                                op_timeout_s=args.op_timeout, call_guard=args.guard, **catalogs)
    if args.keep_serving and args.web is None and args.groot2 is None:
        raise CommandError("--keep-serving goes with --web PORT or --groot2 PORT")
    web = start_web(ControlApi(executor), args)
    groot2 = start_groot2(executor, args)
    try:
        answer = executor.submit(source, dialect=args.dialect, blackboard=blackboard_seeds(args))
        if not answer["accepted"]:
            error(f"refused: {answer['verdict']}")
            raise PlanError([Issue(**issue) for issue in answer["issues"]])
        plan_id = answer["plan_id"]
        if plan.numbered_by_loader:  # the executor numbers ops from its own counter; follow it
            plan = plan.renumbered(int(answer["root_op_id"]))
        for flag, points, action in (("--stop-at", args.stop_at, "cancel"), ("--pause-at", args.pause_at, "pause")):
            for op_id, when in points:
                if op_id not in plan.ops:
                    raise CommandError(_unknown_stop_point_message(op_id, plan, args.file, flag))
                executor.stop_plan_at(plan_id, op_id, when, action=action)
        if args.pause_at and args.web is None and not _stdin_is_terminal():
            # a paused plan that nothing can resume would wait for ever
            raise CommandError("--pause-at needs a way to resume the plan: --web PORT (the console or POST "
                               "/api/plans/ID/resume), or a terminal on stdin (Enter resumes); stdin is no terminal")
        stop_prompt = _prompt_at_pauses(executor, plan_id, web) if args.pause_at else None
        recorder = start_recording(backend, args)
        try:
            code = _run_to_end(executor, plan_id, args.events)
        finally:
            if stop_prompt is not None:
                stop_prompt()
            stop_recording(recorder)
        if args.feedback:
            print(finite_json.dumps(executor.get_plan_feedback(plan_id, args.feedback_chars)), flush=True)
        if args.keep_serving and code != EXIT_INTERRUPTED:
            serving = " and ".join(where for where in (web and web.url, groot2 and f"Groot2 on {groot2.address}")
                                   if where)
            _wait_for_ctrl_c(f"the plan ended; still serving {serving} until Ctrl-C")
        elif web is not None and code != EXIT_INTERRUPTED:
            _serve_until_page_loaded(web)
        return code
    finally:
        if web is not None:
            web.close("bt-exec run ended")  # the console's last word: it shows the run ended, not a lost link
        if groot2 is not None:
            groot2.close()
        executor.close()


def _physics_cell(args: argparse.Namespace, kind, scene, catalog):
    """The Grant cell in MuJoCo for a step graph: its poses from ``--cell-poses``, its scene ``--scene``'s (or the
    cell's own: the tool in its socket, the cap in its storage)."""
    if not kind.needs_scene:
        raise CommandError(f"--backend physics runs Qwen3 step graphs of the Grant skills, not {kind.name} plans")
    if args.sim_script:
        raise CommandError("--sim-script goes with --backend sim: the physics cell's outcomes come from the physics")
    return bt_exec.PhysicsCell(poses=args.cell_poses, scene=scene, speed=args.physics_speed, skill_catalog=catalog)


def physics_speed(text: str) -> float | str:
    """``--physics-speed``: ``max``, or a number > 0 (simulated seconds per real second)."""
    if text == "max":
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0 or max, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number > 0 or max, got {text!r}")
    return value


def _serve_until_page_loaded(web) -> None:
    """A quick plan can end before a browser opens its URL: keep serving until the console page has been loaded
    once, then PAGE_SETTLE_S more for its scripts and first reads, or until PAGE_GRACE_S passed without a load.
    Ctrl-C ends it at once."""
    try:
        if web.page_loads == 0:
            error(f"the plan ended; serving {web.url} until its page has loaded once (at most "
                  f"{PAGE_GRACE_S:.0f} s; Ctrl-C stops now, --keep-serving serves on)")
            deadline = time.monotonic() + PAGE_GRACE_S
            while web.page_loads == 0:
                if time.monotonic() >= deadline:
                    return
                time.sleep(CTRL_C_LATENCY_S)
        time.sleep(PAGE_SETTLE_S)
    except KeyboardInterrupt:
        pass


def _wait_for_ctrl_c(message: str) -> None:
    """Say ``message``, then wait until Ctrl-C; said inside the wait, so a Ctrl-C that comes as soon as it is read
    ends the wait, not the command."""
    try:
        error(message)
        while True:
            threading.Event().wait(3600)
    except KeyboardInterrupt:
        pass


def _run_to_end(executor: bt_exec.Executor, plan_id: str, events_path: str | None) -> int:
    view = LiveView(executor, plan_id, sys.stdout) if sys.stdout.isatty() else None
    finished = threading.Event()

    def note_plan_end(events: list[dict]) -> None:
        if any(event["event"] == "plan_complete" and event["plan_id"] == plan_id for event in events):
            finished.set()

    journal = None
    # Every subscriber takes a tick's events at once: the journal writes them in one go, the
    # lines are printed with one flush.
    unsubscribes = [executor.subscribe_batches(view or EventLines(sys.stdout))]
    interrupted = False
    try:
        try:
            if events_path:
                journal = _open_journal(events_path)
                unsubscribes.append(executor.subscribe_batches(journal.write_batch))
            # Batch subscribers are called in order, so once this last one hears plan_complete the
            # journal and the view have it too.
            unsubscribes.append(executor.subscribe_batches(note_plan_end))
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
        view.close()
    print(summary_line(record, journal))
    if interrupted:
        return EXIT_INTERRUPTED
    # A journal that could not be written fails the run as the plan failing would: what it should keep is lost.
    return EXIT_OK if record["outcome"] == "succeeded" and not (journal and journal.failed) else EXIT_FAILED


def catalog_for(plan, name_or_path: str | None):
    """The catalog a plan is checked against: its dialect's kind (None: that dialect's default)."""
    if not name_or_path or not isinstance(plan, bt_exec.Plan):
        return None
    return dialect_of(plan).read_catalog(name_or_path)


def _open_journal(path: str) -> bt_exec.JsonlJournal:
    try:
        return bt_exec.JsonlJournal(path)
    except OSError as exc:
        raise CommandError(f"cannot write events to {path}: {exc.strerror or exc}") from None


def report_text(name: str, report: dict) -> str:
    """The readable validation report (``validate_plan``'s answer): a verdict line, one line per issue, then
    one line per warning (text skipped around the JSON, a wait capped)."""
    warnings = [f"  warning: {warning['message']} [{warning['code']}]" for warning in report.get("warnings", ())]
    return "\n".join([_verdict_text(name, report), *warnings])


def _verdict_text(name: str, report: dict) -> str:
    verdict, dialect, stats = report["verdict"], report["dialect"], report["stats"]
    if verdict == "control":
        control = stats["control"]
        return f"{name}: control: a {control['op']} request, not a plan ({json.dumps(control)})"
    if verdict == "ok" and "steps" in stats:  # a step graph
        return (f"{name}: ok: {dialect} {stats['shape']}, {stats['steps']} steps, {stats['transitions']} transitions, "
                f"entry {stats['entry']}")
    if verdict == "ok" and "main_tree" in stats:  # a BT.CPP tree
        return (f"{name}: ok: {dialect} tree {stats['main_tree']}, {stats['ops']} nodes ({stats['control']} control, "
                f"{stats['do']} leaves), depth {stats['depth']}")
    if verdict == "ok":
        return (f"{name}: ok: {dialect} {stats['shape']}, {stats['ops']} ops ({stats['sequence']} sequence, "
                f"{stats['parallel']} parallel, {stats['do']} do), depth {stats['depth']}")
    if verdict == "blocked":
        return f"{name}: blocked: the planner refused" + (f" ({stats['reason']})" if stats.get("reason") else "")
    count = len(report["issues"])
    lines = [f"{name}: {verdict}: {count} issue{'s' if count != 1 else ''}"]
    for issue in report["issues"]:
        lines.append(f"  {'once the fixes above are applied, ' if issue.get('after_fixes') else ''}{Issue(**issue)}")
        if "fix" in issue:
            lines.append(f"    fix{' (lossy: drops data the input holds)' if issue.get('lossy') else ''}: "
                         f"{json.dumps(issue['fix'])}")
        elif "alternatives" in issue:
            lines.append(f"    alternatives: {json.dumps(issue['alternatives'])}")
        elif "fixed_by" in issue:
            lines.append(f"    fixed by the fix of issue {issue['fixed_by'] + 1}")
    return "\n".join(lines)


def summary_line(record: dict, journal: bt_exec.JsonlJournal | None = None) -> str:
    """``plan 1 failed after 0.81 s; ops: 3 succeeded, 1 failed, 1 pending`` (with the cancel reason or error),
    and ``; journal F.jsonl failed: No space left on device, 12 events not written`` if ``journal`` failed.

    A step graph's summary is its path and terminal: ``path: s1 -> s2 -> completed``.
    """
    counts = collections.Counter(op["state"] for op in record["ops"])
    states = ", ".join(f"{counts[state]} {state}" for state in SUMMARY_STATES if counts[state])
    reasons = "; ".join(one_line(reason) for reason in (record["cancel_reason"], record["error"]) if reason)
    because = f" ({reasons})" if reasons else ""
    line = f"plan {record['plan_id']} {record['outcome']} after {record['duration_s']:.2f} s{because}; ops: {states}"
    if journal is not None and journal.failed:
        line += (f"; journal {journal.path} failed: {journal.error}, {journal.unwritten} event"
                 f"{'s' if journal.unwritten != 1 else ''} not written")
    if "terminal" in record:
        reason = record["terminal_reason"]
        line += (f"\npath: {' -> '.join(record['path'])}\nterminal: {record['terminal']}"
                 + (f" ({one_line(reason)})" if reason else "")
                 + f"\nholding: {record['state']['holding']}; patron: {', '.join(record['state']['patron']) or 'free'}")
    return line


def _unknown_stop_point_message(text: str, plan: Plan, name: str, flag: str = "--stop-at") -> str:
    """Why ``--stop-at TEXT`` (or ``--pause-at``) names no op of ``plan``: an op of it with a WHEN that is no
    phase, or no op."""
    op_id, colon, when = text.rpartition(":")
    if colon and op_id in plan.ops:  # `stop_point` split off only a known WHEN: this one is not
        return (f"{flag} {text!r}: bad WHEN {when!r} for op {op_id!r} (the phases a stop point takes: "
                f"{', '.join(STOP_WHENS)})")
    ids = list(plan.ops)
    shown = ", ".join(ids[:LISTED_OP_IDS]) + (f", ... ({len(ids)} ops)" if len(ids) > LISTED_OP_IDS else "")
    return (f"{flag}: the plan has no op {text!r} (its op ids: {shown}; expected OP, OP:on_enter or "
            f"OP:on_complete). See each op with its id: bt-exec compile {name}")


def _prompt_at_pauses(executor: bt_exec.Executor, plan_id: str, web):
    """Say on stderr, each time the plan pauses, how to resume it; without ``web`` and with stdin on a terminal,
    resume it on Enter (or ``r`` then Enter) there. Returns the function that stops listening."""
    reads_terminal = web is None  # run refuses --pause-at with neither --web nor a terminal on stdin
    if web is not None:
        how = f"resume it from the console at {web.url} (or POST {web.url}api/plans/{plan_id}/resume)"
    else:
        how = "press Enter (or r then Enter) to resume, Ctrl-C to cancel"

    def on_events(events: list[dict]) -> None:
        for event in events:
            if event["event"] == "paused" and event["plan_id"] == plan_id:
                where = f" at op {one_line(event['op_id'])} ({event['when']})" if event.get("op_id") is not None else ""
                error(f"plan {plan_id} paused{where}: {how}")

    unsubscribe = executor.subscribe_batches(on_events)
    if reads_terminal:
        threading.Thread(target=_resume_on_enter, args=(executor, plan_id), name="bt_exec-resume-on-enter",
                         daemon=True).start()  # a daemon: a read of the terminal cannot be interrupted
    return unsubscribe


def _stdin_is_terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _resume_on_enter(executor: bt_exec.Executor, plan_id: str) -> None:
    """Resume the plan for each empty line or ``r`` read from stdin, until it ends or stdin closes."""
    for line in sys.stdin:
        if line.strip().lower() not in ("", "r"):
            error("press Enter (or r then Enter) to resume, Ctrl-C to cancel")
            continue
        answer = executor.resume_plan(plan_id)
        if not answer["resumed"] and "not running" in answer["message"]:
            return


def feedback_chars(text: str) -> int:
    """``--feedback-chars``: a whole number of characters in the range ``get_plan_feedback`` takes."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not MIN_OUTPUT_CHARS <= value <= MAX_OUTPUT_CHARS:
        raise argparse.ArgumentTypeError(f"expected {MIN_OUTPUT_CHARS} to {MAX_OUTPUT_CHARS} characters, got {text!r}")
    return value
