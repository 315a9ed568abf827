"""The console's view of a simulated cell: the arm drawn live beside the tree from get_cell_view, the target marked.

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


def test_the_console_draws_the_arm_moving_at_ten_drawings_a_second_with_its_target(console_factory):
    cell = bt_exec.PhysicsCell(scene=json.loads(SCENE.read_text()), speed=1.0)
    console = console_factory(backend=cell)
    console.open()
    console.wait_for(lambda d: _read(console, "#cell", "hidden") is None, message="no cell view shown")
    plan_id = console.submit(json.loads(EXAMPLE.read_text()))
    console.wait_for(lambda d: _read(console, ".cell-target", "class"), message="the target was never marked")
    arm = 'polyline.cell-arm[data-view="side"]'
    side = _read(console, arm, "points")
    console.wait_for(lambda d: _read(console, arm, "points") != side, message="the arm never moved in the drawing")
    first = _drawn(console)
    started = console.driver.execute_script("return performance.now()")
    console.wait_for(lambda d: _drawn(console) >= first + 10, timeout=5, message="fewer than 10 drawings in 5 s")
    elapsed_s = (console.driver.execute_script("return performance.now()") - started) / 1000
    assert (_drawn(console) - first) / elapsed_s >= 10, f"{_drawn(console) - first} drawings in {elapsed_s:.2f} s"
    target = cell.target()
    marked = _read(console, 'g.cell-target[data-view="top"] title', "text")
    assert marked == f"target ({', '.join(f'{v:.3f}' for v in target)}) m" or cell.target() != target
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
