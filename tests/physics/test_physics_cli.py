"""``bt-exec run --backend physics`` as a process: a Qwen3 graph run to its terminal on the simulated arm, and
the one line a machine without the physics extra gets."""
import subprocess
import sys

from command_line import REPO, bt_exec_process

EXAMPLES = REPO / "examples" / "qwen3"
RUN = ("run", EXAMPLES / "cap_to_hatch.json", "--scene", EXAMPLES / "scene.json", "--backend", "physics",
       "--physics-speed", "max")


def test_a_graph_runs_to_its_terminal_in_a_bt_exec_process():
    done = bt_exec_process(*RUN)
    assert done.returncode == 0, done.stderr
    assert "step s3 release -> success -> completed" in done.stdout
    assert "terminal: completed" in done.stdout and "holding: None; patron: vacuum" in done.stdout


def test_without_mujoco_the_command_says_in_one_line_which_extra_to_install():
    # an import of mujoco that fails, as on a machine without the extra
    code = ("import sys\nsys.modules['mujoco'] = None\nfrom bt_exec.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, "-c", code, *map(str, RUN)], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert done.returncode == 2  # a configuration the command cannot run with
    assert done.stderr.strip().count("\n") == 0 and "Traceback" not in done.stderr
    assert "the physics cell needs mujoco" in done.stderr and "pip install 'bt_exec[physics]'" in done.stderr
