"""bt_exec: one package on two rails, `pip install -e .` and `colcon build`.

`compilers/`, `behaviours/` and `schemas/` live at the top of the repository
(the design card) but install inside `bt_exec`, so no one's site-packages
gains a top-level package called `compilers`.
"""
import importlib.util
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PACKAGE = "bt_exec"
HERE = Path(__file__).parent
WIRE = f"{PACKAGE}.robonix.wire"


def read_version() -> str:
    # package.xml is the one place the version is kept; ROS tools read it too.
    import xml.etree.ElementTree as ET

    return ET.parse(HERE / "package.xml").getroot().findtext("version").strip()


def share(folder: str, pattern: str) -> tuple[str, list[str]]:
    files = sorted(str(p.relative_to(HERE)) for p in (HERE / folder).glob(pattern))
    return (f"share/{PACKAGE}/{folder}", files)


class BuildPyWithStubs(build_py):
    """build_py that first builds the Robonix gRPC stubs (bt_exec/robonix/wire) when grpc_tools is importable.

    Without it (a build that has not installed the robonix extra yet, or an isolated build environment) the stubs
    are left out, and the Robonix door says to run ``python -m bt_exec.robonix.stubs``."""

    def run(self):
        if importlib.util.find_spec("grpc_tools") is not None:
            # In its own interpreter, from this tree: setup.py's process keeps no bt_exec module of its own.
            if subprocess.run([sys.executable, "-m", "bt_exec.robonix.stubs"], cwd=HERE).returncode != 0:
                sys.exit("bt_exec: the Robonix gRPC stubs could not be built (the reason is above)")
        else:
            print("bt_exec: grpc_tools is not installed, so the Robonix gRPC stubs are not built "
                  "(pip install 'bt_exec[robonix]', then python -m bt_exec.robonix.stubs)")
        if (HERE / "bt_exec" / "robonix" / "wire").is_dir() and WIRE not in self.packages:
            self.packages.append(WIRE)
        super().run()


# mcp 1.24 brought the streamable-HTTP client that takes a shared HTTP client, which the MCP dispatch uses
ROBONIX = ["grpcio>=1.62,<2", "grpcio-tools>=1.62,<2", "protobuf>=4.25,<8", "mcp>=1.24,<2"]
GROOT2 = ["pyzmq>=25,<28"]
# the Grant cell in physics (bt_exec.motion.physics): MuJoCo, IK on it (mink), jerk-limited trajectories (ruckig)
PHYSICS = ["mujoco>=3.3,<5", "mink>=1.0,<2", "ruckig>=0.14,<1"]
# `run --record`: videos of the physics cell (imageio writes GIF with Pillow, MP4 with imageio-ffmpeg's ffmpeg)
RECORD = ["imageio>=2.31,<3", "imageio-ffmpeg>=0.5,<1"]

setup(
    name=PACKAGE,
    version=read_version(),
    description="Behaviour-tree runtime that validates, compiles and runs LLM plan graphs safely",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=[
        PACKAGE,
        f"{PACKAGE}.catalogs",
        f"{PACKAGE}.cli",
        f"{PACKAGE}.compat",
        f"{PACKAGE}.events",
        f"{PACKAGE}.motion",
        f"{PACKAGE}.motion.physics",
        f"{PACKAGE}.ros",
        f"{PACKAGE}.robonix",
        f"{PACKAGE}.ros.iiwa",
        f"{PACKAGE}.runtime",
        f"{PACKAGE}.terminal",
        f"{PACKAGE}.web",
        f"{PACKAGE}.compilers",
        f"{PACKAGE}.compilers.rtdl",
        f"{PACKAGE}.compilers.btcpp",
        f"{PACKAGE}.groot2",
        f"{PACKAGE}.behaviours",
        f"{PACKAGE}.schemas",
    ],
    package_dir={
        PACKAGE: PACKAGE,
        f"{PACKAGE}.catalogs": f"{PACKAGE}/catalogs",
        f"{PACKAGE}.compilers": "compilers",
        f"{PACKAGE}.behaviours": "behaviours",
        f"{PACKAGE}.schemas": "schemas",
    },
    package_data={f"{PACKAGE}.schemas": ["*.json"], f"{PACKAGE}.catalogs": ["*.json"],
                  f"{PACKAGE}.web": ["static/*"]},
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/bt_exec"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        share("schemas", "*.json"),
        share("launch", "*.launch.py"),
        share("config", "*.yaml"),
        # the Robonix protos, for building the stubs of an installed (not editable) bt_exec
        share("interfaces/robonix", "*.proto"),
    ],
    install_requires=["py_trees>=2.2,<3", "networkx>=3.0", "jsonschema>=4.18", "fastjsonschema>=2.19,<3",
                      "pyyaml>=5.4",
                      "jsonpatch>=1.32",  # applies the repairs validation reports as JSON Patch
                      "jsonpointer>=1.11",  # escape and unescape: the keys of the JSON pointers issues and fixes name
                      "orjson>=3.8,<4",  # the JSONL journal's encoder: a tenth of json's time per event
                      "defusedxml>=0.7,<1",  # BehaviorTree.CPP XML read with no DTD, entity or external reference
                      # the web app (console, API, event stream, MCP over HTTP); the mcp package needs them too.
                      # uvicorn exactly: bt_exec.compat.uvicorn overrides its h11 protocol's internals, checked
                      # against this release (WRITTEN_FOR), and a newer one is taken only once they are checked again
                      "uvicorn==0.54.0", "starlette>=0.37,<2", "sse-starlette>=2.1,<4", "anyio>=4"],
    extras_require={
        "mcp": ["mcp>=1.10,<2"],
        # `bt-exec robonix`: gRPC to Pilot and Atlas (grpcio-tools builds the stubs), MCP to capability providers
        "robonix": ROBONIX,
        # `--groot2 PORT`: Groot2's monitor protocol is ZeroMQ request/reply and publish
        "groot2": GROOT2,
        # `--backend physics`, bt_exec.PhysicsCell: the cell simulated in MuJoCo
        "physics": PHYSICS,
        # `--backend physics --record OUT.mp4|OUT.gif`
        "record": RECORD,
        # selenium drives Debian's chromium + chromedriver for the browser tests (.ci/run installs them);
        # ruff is the linter tests/test_lint.py runs (a minor release of ruff can add rules to the families chosen);
        # pytest-xdist spreads the plain run over the cores (pytest -n auto): most of its time is CPU
        "test": ["pytest>=7", "pytest-xdist>=3.5,<4", "hypothesis>=6", "mcp>=1.10,<2", "selenium>=4.20",
                 "import-linter>=2.12,<3", "ruff>=0.17,<0.18", *ROBONIX, *GROOT2, *PHYSICS,
                 *RECORD],
    },
    cmdclass={"build_py": BuildPyWithStubs},
    zip_safe=True,
    entry_points={"console_scripts": [
        "bt-exec = bt_exec.cli:main",
        # ROS executables (setup.cfg installs scripts under lib/bt_exec, where `ros2 run bt_exec ...` finds them)
        "bt_exec_node = bt_exec.cli.ros_commands:node_main",
        "bt_exec_sim_robot = bt_exec.cli.ros_commands:sim_robot_main",
        "bt_exec_iiwa_node = bt_exec.ros.iiwa.entry:iiwa_node_main",
    ]},
)
