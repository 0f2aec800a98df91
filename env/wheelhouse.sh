#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build a wheelhouse of the Python packages a GPU host lacks (GPU hosts often have no package index).
#   make wheelhouse                      -> env/wheelhouse/*.whl (manylinux x86_64, CPython 3.12 by default)
#   PYVER=3.11 make wheelhouse           -> for another Python
# On the GPU host:
#   python3 -m pip install --no-index --no-deps --target /tmp/site env/wheelhouse/*.whl && export PYTHONPATH=/tmp/site
#   python3 -m pip install --no-build-isolation --no-deps -e .   # builds the extension with nvcc there
# The list is what nvmelab needs beyond a typical CUDA image (which already has numpy, pandas, cupy,
# numba-cuda, pybind11, scikit-build-core, cmake, ninja, pytest, hypothesis): see env/gpu-host.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${PYVER:-3.12}
out=env/wheelhouse
mkdir -p "$out"
plats=()
for n in 39 35 34 31 28 27 24 17; do plats+=(--platform "manylinux_2_${n}_x86_64"); done
plats+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
grep -vE '^\s*(#|$)' env/gpu-host.txt | while read -r req; do
  # exact pins come from the lock so the GPU host runs what CI tested
  pin=$(grep -iE "^${req}==" env/requirements.lock || echo "$req")
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$pyver" --implementation cp \
    "${plats[@]}" -d "$out" "$pin"
done
ls -1 "$out"
