"""The console's view of a simulated cell: the arm drawn live beside the tree from get_cell_view, the target marked.
BT_EXEC_SCREENSHOTS=1 remakes docs/img/physics-console.png (with MUJOCO_GL=egl, MuJoCo's frame above the drawing).

Real MuJoCo (the physics extra) behind a real server and headless Chromium; skipped, with the reason, where the
physics cell cannot be imported.
"""
import json
import os

import pytest
from console_page import REPO

from bt_exec.motion.physics import PhysicsUnavailable, require_physics

try:
    require_physics()
except PhysicsUnavailable as missing:
    if os.environ.get("BT_EXEC_REQUIRE_PHYSICS") == "1":  # CI: the extra is installed, these tests must run
        pytest.fail(f"BT_EXEC_REQUIRE_PHYSICS=1, but {missing}", pytrace=False)
    pytest.skip(str(missing), allow_module_level=True)

import bt_exec  # noqa: E402

EXAMPLE = REPO / "examples" / "qwen3" / "cap_to_hatch.json"
SCENE = REPO / "examples" / "qwen3" / "scene.json"
DOCS_IMG = REPO / "docs" / "img"


def _read(console, selector, what):
    """An attribute (or textContent) of the first match, read in one script: the drawing is redrawn every frame."""
    return console.driver.execute_script(
        "const node = document.querySelector(arguments[0]);"
        "return node === null ? null : (arguments[1] === 'text' ? node.textContent : node.getAttribute(arguments[1]));",
        selector, what)


def _drawn(console) -> int:
    return int(_read(console, "#cell-drawing", "data-drawn") or 0)


def test_the_console_draws_the_arm_live_beside_the_tree_with_its_target_marked(console_factory):
    cell = bt_exec.PhysicsCell(scene=json.loads(SCENE.read_text()), speed=1.0)
    console = console_factory(backend=cell)
    console.open()
    console.wait_for(lambda d: _read(console, "#cell", "hidden") is None, message="no cell view shown")
    plan_id = console.submit(json.loads(EXAMPLE.read_text()))
    console.wait_for(lambda d: _read(console, ".cell-target", "class"), message="the target was never marked")
    arm = 'polyline.cell-arm[data-view="side"]'
    side = _read(console, arm, "points")
    console.wait_for(lambda d: _read(console, arm, "points") != side, message="the arm never moved in the drawing")
    # drawn again and again while the arm moves (how many a second: bench/bench_cell_view.py)
    first = _drawn(console)
    console.wait_for(lambda d: _drawn(console) >= first + 10, message="the drawing stopped")
    # the mark is where the current motion goes (the drawing catches up with each new target within a drawing)
    console.wait_for(lambda d: _read(console, 'g.cell-target[data-view="top"] title', "text")
                     == f"target ({', '.join(f'{v:.3f}' for v in cell.target())}) m", message="target not marked")
    if os.environ.get("BT_EXEC_SCREENSHOTS") == "1":
        if console.executor.get_cell_view()["frames"]:  # MUJOCO_GL=egl or osmesa: MuJoCo's picture above the drawing
            console.wait_for(lambda d: (_read(console, "#cell-frame", "src") or "").startswith("data:image/png"),
                             message="no rendered frame shown")
        console.driver.execute_script("document.querySelectorAll('.msg').forEach(m => m.remove());")
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        console.screenshot(DOCS_IMG / "physics-console.png")
    console.executor.cancel_plan(plan_id)
    assert cell.wait_idle(5)


def test_an_app_without_a_simulated_cell_shows_no_arm(console_factory):
    console = console_factory()
    console.open()
    console.wait_text("#connection", "live")
    assert console.css("#cell").get_attribute("hidden") is not None
    assert not console.page_errors()
