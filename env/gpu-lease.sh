#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# gpu-lease.sh — the GPU lease plan (issue 23): what a lent GPU host runs, in steps of one device command
# each, and its rehearsal here on a simulated GPU host.
#
#   make gpu-lease STEP=0                here, before a lease: the wheelhouse and the cp312 wheel to carry
#   make gpu-lease STEP=N OUT=DIR        on the GPU host, N = 1, 2, 3 in order (one device command each)
#   make rehearse-gpu-host [OUT=DIR]     here: steps 0-3 on a simulated GPU host, GPU parts on the CPU stand-in
#
# Steps (nvmelab.studies.lease holds the study points and the cost model; `python -m nvmelab.studies.lease
# plan` prints them):
#   1  install; the installed extension checked (imports without a GPU driver, holds the CUDA code:
#      lease.native_check); every GPU test (each test file with a `gpu` mark); emulator capacity (tests/bench
#      bench_gpu_submit.py, short windows) and the per-I/O breakdown's cost on the GPU (bench_breakdown_cost.py
#      run_gpu, sample_every 0 vs the rule, 3 rounds per queue depth); the calibration A/B (cuda_qdepth, pm1753
#      as derived vs fitted)
#   2  cuda_qdepth, preset lease; cuda_match, preset lease (the three completion-matching modes)
#   3  cuda_iosize, preset lease; vram_cache, preset lease (the GPU-memory cache runs); cuda_pollcost,
#      preset lease (a co-running compute kernel with and without the I/O, NVML SM activity)
# Each step writes into OUT exactly three files: lease-N.log, summary-N.json and records-N.tar.gz (every
# record taken so far, <study>/<host>/<preset>.jsonl inside; bench JSON under bench/), within the device
# tool's limits (8 files, 16 MiB each, 2 folders deep). A step stops starting study points when its time
# is used (STEP_LIMIT_S in nvmelab.studies.lease, 480 s) and every point runs in a process of its own with a
# time limit, so a hang or an error costs that point only (a failed-point record). Resuming: the records
# stay under $LEASE/results on a warm machine; on a fresh one, carry the last records-N.tar.gz in
# $LEASE/resume/ and the step unpacks it first (runs already recorded are skipped).
#
# Why a prebuilt wheel (STEP=0 here, carried as build/lease/wheel) and not a build on the GPU host: the
# image was never checked for OpenSSL's headers (libssl-dev; blksum needs them to configure) and cannot
# install them without a package index; a fresh machine may come for every step and a CUDA build would
# cost minutes of GPU time each time; the commit is captured where git is (the tree travels without
# .git). The wheel is built for sm_90 (H100/H200) with this host's nvcc (13.0, the image's major version)
# against glibc 2.36, older than the image's, and links libcrypto.so.3, which the image has (Python
# needs it). Without a carried wheel, a step builds one there (nvcc, a C compiler and OpenSSL's headers
# checked first; NVMELAB_GIT_COMMIT names the commit) at a cost of a few minutes.
#
# Device call (for the session that holds a lease): carry build/lease/wheel and env/wheelhouse (both
# git-ignored), e.g. run(command="make gpu-lease STEP=1 OUT=$OUT", carry=["build/lease/wheel",
# "env/wheelhouse"]), then STEP=2 and 3 (also carrying build/lease/resume with the last archive when the
# machine may be fresh).
#
# Time budget: computed, not written here. `python -m nvmelab.studies.lease plan` prints each step's
# estimate from the cost model in nvmelab.studies.lease (fixed parts at their time limits below, each study
# point at its window + the process overhead the rehearsal measured + CUDA context + one lock-step round of
# the fitted model; one machine start) and fails when a step exceeds 8 minutes or the plan 24;
# tests/test_lease.py checks the same and that env/README.md's table states these numbers.
#
# Environment: PY (the interpreter: python3, the image's, by default), NVMELAB_LEASE_DIR (default
# build/lease), NVMELAB_LEASE_STUDY_S (caps a step's seconds for study points; the rehearsal: 100, enough for every task of a step to start a point, the
# rest of its points are left "not started", which proves the resume), NVMELAB_HOST_ID (default: lease-<GPU name>, so that every step files its records under
# the same host folder although each machine has another hostname).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LEASE=${NVMELAB_LEASE_DIR:-build/lease}
case "$LEASE" in /*) ;; *) LEASE=$ROOT/$LEASE ;; esac
STANDIN=${NVMELAB_LEASE_STANDIN:-0}
STEP_LIMIT_S=480
INSTALL_LIMIT_S=60
GPU_TESTS_LIMIT_S=150
BENCH_LIMIT_S=90
NATIVE_CHECK_LIMIT_S=30
PACK_S=10

usage() { sed -n '3,8p' "$0" >&2; exit 2; }
now() { date +%s; }
elapsed() { echo $(( $(now) - T0 )); }

part() { # part NAME RC SECONDS DETAIL: one JSON line in the step's parts file
    "$PY" -c 'import json,sys; print(json.dumps({"part": sys.argv[1], "rc": int(sys.argv[2]), "seconds": int(sys.argv[3]), "detail": sys.argv[4]}))' \
        "$1" "$2" "$3" "$4" >> "$PARTS"
}

timed() { # timed NAME LIMIT CMD...: run CMD under a time limit; record it as a part; never stop the step
    local name=$1 limit=$2 t rc
    shift 2
    t=$(now)
    echo "== $name (limit ${limit} s): $*"
    set +e
    timeout --kill-after=10 "$limit" "$@"
    rc=$?
    set -e
    local detail="exit $rc"
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && detail="time limit of ${limit} s reached (exit $rc)"
    echo "== $name: $detail after $(( $(now) - t )) s"
    part "$name" "$rc" $(( $(now) - t )) "$detail"
    return 0
}

# --- step 0: here, before a lease (or the rehearsal's first step) ---------------------------------------
image_python() { # a CPython 3.12 here: $PYTHON312, python3.12 on PATH, or pyenv's
    local p
    for p in "${PYTHON312:-}" "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python3.12; do
        [ -n "$p" ] && [ -x "$p" ] && "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null \
            && { echo "$p"; return 0; }
    done
    echo "gpu-lease: no Python 3.12 found (the GPU host's version): set PYTHON312=/path/to/python3.12" >&2
    return 1
}

make_image_venv() { # $LEASE/image-venv: Python 3.12 with ONLY packages of the GPU image (env/gpu-image.txt)
    local venv=$LEASE/image-venv py312 deps=() want
    # kept while its inputs say the same (the wheelhouse rewrites image-deps.txt each time: contents count)
    want=$(cat env/gpu-image.txt env/wheelhouse/image-deps.txt env/requirements.lock | sha256sum | cut -d' ' -f1)
    [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.stamp" 2>/dev/null)" = "$want" ] && return 0
    py312=$(image_python)
    rm -rf "$venv"
    "$py312" -m venv "$venv"
    # the image packages nvmelab and its lease use, and those the wheelhouse depends on (their own
    # dependencies come along; the check in each step refuses any that the image does not have)
    mapfile -t deps < env/wheelhouse/image-deps.txt
    "$venv/bin/python" -m pip install -q -c env/requirements.lock numpy pandas tqdm pytest pytest-timeout \
        hypothesis pybind11 scikit-build-core cmake ninja numba pyyaml "${deps[@]}"
    echo "$want" > "$venv/.stamp"
}

check_only_image_and_wheelhouse() { # every installed distribution: in the image or in the wheelhouse
    "$PY" - "$ROOT/env/gpu-image.txt" "$ROOT/env/wheelhouse" "$SITE" <<'PYEOF'
import importlib.metadata as md, re, sys
from pathlib import Path
norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
image = {norm(l.strip()) for l in Path(sys.argv[1]).read_text().splitlines() if l.strip() and not l.startswith("#")}
wheels = {norm(p.name.split("-")[0]) for p in Path(sys.argv[2]).glob("*.whl")} | {"nvmelab"}
have = {norm(d.metadata["Name"]) for d in md.distributions()}
extra = sorted(have - image - wheels)
if extra:
    sys.exit(f"the simulated GPU host holds packages that are neither in its image nor in the wheelhouse: {extra}")
print(f"simulated GPU host: {len(have)} distributions, all in the image ({len(have & image)}) or the wheelhouse")
PYEOF
}

build_wheel() { # build_wheel PY: the nvmelab wheel into $LEASE/wheel (CUDA when nvcc is found)
    local py=$1 cuda=${NVMELAB_LEASE_CUDA:-auto} defs=()
    [ "$cuda" = auto ] && { command -v nvcc >/dev/null && cuda=ON || cuda=OFF; }
    defs+=(-Ccmake.define.NVMELAB_CUDA="$cuda")
    [ "$cuda" = ON ] && defs+=(-Ccmake.define.CMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90}")
    rm -rf "$LEASE/wheel"
    mkdir -p "$LEASE/wheel"
    echo "== wheel: NVMELAB_CUDA=$cuda with $("$py" -V)"
    "$py" -m pip wheel -q --no-deps --no-build-isolation --no-index -w "$LEASE/wheel" \
        -Cbuild-dir="$LEASE/wheel-build" "${defs[@]}" "$ROOT"
    ls -l "$LEASE/wheel"
}

step0() {
    local t
    mkdir -p "$LEASE"
    t=$(now)
    [ -n "${NVMELAB_LEASE_KEEP_WHEELHOUSE:-}" ] && [ -f env/wheelhouse/image-deps.txt ] || \
        PIP_PY=python3 bash env/wheelhouse.sh
    echo "== step 0: wheelhouse in $(( $(now) - t )) s"
    t=$(now)
    make_image_venv
    echo "== step 0: image venv in $(( $(now) - t )) s"
    t=$(now)
    build_wheel "$LEASE/image-venv/bin/python"
    echo "== step 0: wheel in $(( $(now) - t )) s"
    echo "carry to the GPU host: build/lease/wheel env/wheelhouse ($(du -sh env/wheelhouse "$LEASE/wheel" | awk '{print $1}' | xargs))"
}

# --- steps 1-3: on the GPU host (or the simulated one) --------------------------------------------------
install() {
    rm -rf "$SITE"
    mkdir -p "$SITE"
    if ! ls "$LEASE"/wheel/nvmelab-*.whl >/dev/null 2>&1; then
        echo "no wheel carried in $LEASE/wheel: building one here"
        command -v nvcc >/dev/null || { echo "nvcc not found: carry a wheel (make gpu-lease STEP=0 where nvcc is)" >&2; return 1; }
        PYTHON="$PY" VENV=/nonexistent bash env/prereqs.sh build || return 1
        NVMELAB_LEASE_CUDA=ON build_wheel "$PY" || return 1
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" env/wheelhouse/*.whl "$LEASE"/wheel/nvmelab-*.whl
    PYTHONPATH=$SITE "$PY" -m pip check 2>&1 | grep -v "^No broken" || true
}

run_step() {
    local step=$1 out=$2
    T0=$(now)
    SITE=$LEASE/site
    RESULTS=$LEASE/results
    PARTS=$LEASE/work/parts-$step.jsonl
    mkdir -p "$out" "$LEASE/work" "$RESULTS"
    : > "$PARTS"
    exec > >(tee -a "$out/lease-$step.log") 2>&1
    echo "== gpu-lease step $step ($( [ "$STANDIN" = 1 ] && echo 'rehearsal: CPU stand-in' || echo 'GPU host')) $(date -u +%FT%TZ)"
    timed install "$INSTALL_LIMIT_S" env SITE="$SITE" PY="$PY" bash "$0" _install
    export PYTHONPATH=$SITE NVMELAB_RESULTS=$RESULTS PYTHONUNBUFFERED=1
    if [ -z "${NVMELAB_HOST_ID:-}" ]; then
        local gpu_name
        gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 || true)
        export NVMELAB_HOST_ID="lease-${gpu_name:-no-gpu}"
    fi
    [ "$STANDIN" = 1 ] && check_only_image_and_wheelhouse
    for a in "$LEASE"/resume/*.tar.gz; do
        [ -e "$a" ] || continue
        echo "== resume: records of $a"
        tar -xzf "$a" -C "$RESULTS"
    done
    local sa=()
    [ "$STANDIN" = 1 ] && sa=(--standin)
    if [ "$step" = 1 ]; then
        # the installed extension: it imports (no GPU driver needed), holds the CUDA code, says why no GPU
        local want=()
        [ "$STANDIN" = 1 ] && [ "${NVMELAB_LEASE_CUDA:-}" != ON ] || want=(--want-cuda)
        timed native-check "$NATIVE_CHECK_LIMIT_S" "$PY" -m nvmelab.studies.lease native-check "${want[@]}"
        # every test file with a gpu mark, and numba's CUDA simulator running the numba-cuda kernel
        mapfile -t gpu_tests < <(grep -l "mark.gpu" tests/test_*.py; echo tests/test_cuda_numba_sim.py)
        if [ "$STANDIN" = 1 ]; then
            # no GPU: the GPU tests are collected and skip with their reason; the stand-ins run
            timed gpu-tests "$GPU_TESTS_LIMIT_S" env NUMBA_ENABLE_CUDASIM=1 "$PY" -m pytest -q -p no:cacheprovider \
                -o addopts= -rs "${gpu_tests[@]}" tests/test_gpu_standin.py
        else
            timed gpu-tests "$GPU_TESTS_LIMIT_S" "$PY" -m pytest -q -p no:cacheprovider -o addopts= -rs \
                --timeout 120 -m gpu "${gpu_tests[@]}"
        fi
        timed bench-gpu "$BENCH_LIMIT_S" env NVMELAB_BENCH_GPU_RUNTIME="${NVMELAB_BENCH_GPU_RUNTIME:-0.5}" \
            NVMELAB_BENCH_GPU_REPS=1 NVMELAB_BENCH_GPU_STANDIN="$STANDIN" "$PY" -m tests.bench --gpu --out "$RESULTS/bench"
    fi
    local budget=$(( STEP_LIMIT_S - $(elapsed) - PACK_S ))
    # NVMELAB_LEASE_STUDY_S caps it (the rehearsal: CI's minutes; the rest is left "not started")
    [ -n "${NVMELAB_LEASE_STUDY_S:-}" ] && [ "$NVMELAB_LEASE_STUDY_S" -lt "$budget" ] && budget=$NVMELAB_LEASE_STUDY_S
    echo "== studies of step $step: ${budget} s left"
    if [ "$budget" -le 0 ]; then
        part studies 0 0 "no time left for study points in this step"
    elif ! "$PY" -m nvmelab.studies.lease run "$step" --results "$RESULTS" --budget "$budget" --parts "$PARTS" \
            "${sa[@]}"; then
        part studies 1 0 "the study runner stopped (see the log)"
    fi
    "$PY" -m nvmelab.studies.lease pack "$step" --results "$RESULTS" --out "$out" --parts "$PARTS" "${sa[@]}"
    echo "== step $step done in $(elapsed) s (limit $STEP_LIMIT_S s); outputs: $(ls "$out" | xargs)"
}

# --- the rehearsal: steps 0-3 on a simulated GPU host ---------------------------------------------------
rehearse() {
    local out=$1 t0
    t0=$(now)
    # the carried wheel as a lease builds it: CUDA (sm_90) when nvcc is here (NVMELAB_LEASE_CUDA=OFF: without)
    local cuda=${NVMELAB_LEASE_CUDA:-auto}
    [ "$cuda" = auto ] && { command -v nvcc >/dev/null && cuda=ON || cuda=OFF; }
    [ "$cuda" = ON ] || echo "rehearsal: the wheel is built WITHOUT CUDA (NVMELAB_LEASE_CUDA=$cuda, or no nvcc):" \
        "the CUDA build a lease carries is not rehearsed"
    export NVMELAB_LEASE_STANDIN=1 NVMELAB_HOST_ID=rehearsal NVMELAB_LEASE_CUDA=$cuda \
        NVMELAB_LEASE_STUDY_S=${NVMELAB_LEASE_STUDY_S:-100}
    STANDIN=1
    LEASE=$ROOT/build/rehearse
    export NVMELAB_LEASE_DIR=$LEASE
    rm -rf "$out" "$LEASE/results" "$LEASE/resume" "$LEASE/site"
    mkdir -p "$out"
    step0
    echo "rehearsal: step 0 (wheelhouse, image venv, wheel with NVMELAB_CUDA=$cuda) took $(( $(now) - t0 )) s"
    for step in 1 2 3; do
        # each step as on a fresh machine: nothing left from the last but the archive it handed back
        rm -rf "$LEASE/results" "$LEASE/site" "$LEASE/resume"
        if [ "$step" -gt 1 ]; then
            mkdir -p "$LEASE/resume"
            cp "$out/step-$((step - 1))/records-$((step - 1)).tar.gz" "$LEASE/resume/"
        fi
        PY=$LEASE/image-venv/bin/python bash "$0" "$step" "$out/step-$step"
    done
    echo "rehearsal: $(( $(now) - t0 )) s; outputs under $out: $(cd "$out" && find . -type f | sort | xargs)"
    # the outputs as the device tool would hand them back: limits, layout, valid records with their commit
    NVMELAB_REHEARSAL_OUT=$out NVMELAB_REHEARSAL_CUDA=$cuda PYTHONPATH=$LEASE/site "$LEASE/image-venv/bin/python" -m pytest -q \
        -p no:cacheprovider -o addopts= tests/test_lease.py -k rehearsal_outputs
}

what=${1:-}
case "$what" in
    0) step0 ;;
    1|2|3) [ -n "${2:-}" ] || { echo "gpu-lease: step $what needs OUT (make gpu-lease STEP=$what OUT=DIR)" >&2; exit 2; }
           PY=${PY:-python3}
           run_step "$what" "$2" ;;
    rehearse) rehearse "${2:-$ROOT/build/rehearse/out}" ;;
    _install) install ;;  # internal: step 1-3's install part, run under `timeout`
    *) usage ;;
esac
