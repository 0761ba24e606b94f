#!/usr/bin/env bash
# Fill .whl/ with what tools/gpu_check.sh installs on a lent GPU machine (Python 3.12, no network):
# the seven pure-Python iclr25 wheels, plus runtime dependencies that machine's image lacks.
# .whl/ is git-ignored locally (echo /.whl/ >> .git/info/exclude) and travels with `carry`.
set -eu
PY=${PY:-python3}
mkdir -p .whl
for p in core neuro compress theory rl generative llm; do
    "$PY" -m build -q --wheel --no-isolation -o .whl "packages/iclr25-$p"
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .whl \
    gymnasium==1.4.0 farama-notifications mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 glfw pyopengl \
    pytorch-msssim torchsde==0.2.6 trampoline
