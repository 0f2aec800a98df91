#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Build a wheelhouse of the Python packages a GPU host lacks (GPU hosts often have no package index).
#   make wheelhouse                      -> env/wheelhouse/*.whl (manylinux x86_64, CPython 3.12 by default)
#   PYVER=3.11 make wheelhouse           -> for another Python
# What goes in: the names of env/gpu-host.txt with ALL their dependencies (pinned by env/requirements.lock
# where it names them), less every package the host's image already has (env/gpu-image.txt). Closed by
# construction: `pip install --no-index --find-links env/wheelhouse` on the image finds every dependency
# (make rehearse-gpu-host checks this on a simulated host). On the GPU host (env/gpu-lease.sh does it):
#   python3 -m pip install --no-index --no-deps --target SITE env/wheelhouse/*.whl && export PYTHONPATH=SITE
set -euo pipefail
cd "$(dirname "$0")/.."
pyver=${PYVER:-3.12}
out=${WHEELHOUSE:-env/wheelhouse}
PIP_PY=${PIP_PY:-python3}
mkdir -p "$out"
rm -f "$out"/*.whl
plats=()
for n in 39 35 34 31 28 27 24 17; do plats+=(--platform "manylinux_2_${n}_x86_64"); done
plats+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
mapfile -t reqs < <(grep -vE '^\s*(#|$)' env/gpu-host.txt)
# exact pins come from the lock so the GPU host runs what CI tested
"$PIP_PY" -m pip download -q --only-binary=:all: --python-version "$pyver" --implementation cp \
  "${plats[@]}" -c env/requirements.lock -d "$out" "${reqs[@]}"
norm() { tr '[:upper:]' '[:lower:]' | sed -E 's/[-_.]+/-/g'; }
image=$(grep -vE '^\s*(#|$)' env/gpu-image.txt | norm)
kept=0 dropped=0
: > "$out/image-deps.txt"  # the image's packages the wheelhouse depends on (make rehearse-gpu-host installs them)
for whl in "$out"/*.whl; do
  name=$(basename "$whl" | cut -d- -f1 | norm)
  if grep -qxF "$name" <<<"$image"; then
    rm -f "$whl"; dropped=$((dropped + 1)); echo "$name" >> "$out/image-deps.txt"
  else
    kept=$((kept + 1))
  fi
done
echo "wheelhouse: $kept wheels in $out ($dropped left out: the image has them: $(xargs < "$out/image-deps.txt"))"
ls -1 "$out"
