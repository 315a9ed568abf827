#!/usr/bin/env bash
# Builds the test stand-ins of the KUKA iiwa cell's interface packages (webots_ros2_msgs with SetString.srv,
# iiwa_msgs with GetRunStatus.srv; tests/ros/iiwa_interfaces) into build/ros/iiwa-standins, apart from
# bt_exec_interfaces, so that only what sources build/ros/iiwa-standins/env.sh sees them. They are not
# shipped: on the cell the real packages are built with its workspace. Needs scripts/setup-ros.sh first.
# Idempotent: a second run only rebuilds what changed. The ROS tests of the iiwa profile run it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv-ros
PREFIX=$ROOT/build/ros/iiwa-standins
[ -x "$VENV/bin/python" ] || { echo "build-iiwa-standins: run scripts/setup-ros.sh first" >&2; exit 1; }
export CMAKE_PREFIX_PATH=$VENV AMENT_PREFIX_PATH=$VENV
mkdir -p "$PREFIX"
for pkg in webots_ros2_msgs iiwa_msgs; do
  work=$PREFIX/build/$pkg
  # The install RPATH lets a process that did not start with this prefix on LD_LIBRARY_PATH load the types.
  cmake -S "$ROOT/tests/ros/iiwa_interfaces/$pkg" -B "$work" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_INSTALL_RPATH="$PREFIX/lib" -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF \
    > "$PREFIX/$pkg-cmake.log" 2>&1 || { tail -n 40 "$PREFIX/$pkg-cmake.log"; exit 1; }
  make -C "$work" -j2 install > "$PREFIX/$pkg-make.log" 2>&1 || { tail -n 40 "$PREFIX/$pkg-make.log"; exit 1; }
done
cat > "$PREFIX/env.sh" <<ENV
# Source me after build/ros/env.sh: the iiwa cell's stand-in interface packages (tests only).
export AMENT_PREFIX_PATH="$PREFIX\${AMENT_PREFIX_PATH:+:\$AMENT_PREFIX_PATH}"
export PYTHONPATH="$PREFIX/lib/python3.11/site-packages\${PYTHONPATH:+:\$PYTHONPATH}"
export LD_LIBRARY_PATH="$PREFIX/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV
echo "iiwa stand-ins ready: . build/ros/iiwa-standins/env.sh"
