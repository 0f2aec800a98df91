#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# gpu-lease.sh — the GPU lease plan (issue 32): two device calls that fit one 900 s lease, and their rehearsal.
#
#   bash env/gpu-lease.sh 0                here, before a lease: the wheelhouse and the cp312 wheel to carry
#   bash env/gpu-lease.sh N OUT            on the GPU host, N = 1 then 2 (one device command each)
#   bash env/gpu-lease.sh rehearse [OUT]   here: call 0, 1 and 2 on a simulated GPU host, GPU parts on the CPU stand-in
#
# The device calls (README "On a GPU host"; carry build/lease/wheel and env/wheelhouse):
#   run(command="bash env/gpu-lease.sh 1 $OUT", timeout_s=360, carry=["build/lease/wheel", "env/wheelhouse"])
#   run(command="bash env/gpu-lease.sh 2 $OUT", timeout_s=300, carry=[...same...])   at once, while warm
# then give the machine back. No `make`: the GPU image is not known to have it.
#
# What each call runs, its parts' limits and the cost model are in nvmelab.lease.plan (CALLS; `python -m
# nvmelab.lease plan` prints them and the budget: start + call 1 + warm gap + call 2 + give-back within
# 900 s). This script installs the carried wheels (the only part before our Python can run) and hands the rest
# to `python -m nvmelab.lease call N`. One time knob per call: NVMELAB_LEASE_CALL_S (default CALL1_S /
# CALL2_S below); every part's limit derives from it. OUT gets exactly three files, rewritten after every part:
# lease-N.log, summary-N.json, records-N.tar.gz (every record so far, <study>/<host>/<preset>.jsonl inside, the
# bench JSON under bench/, the probe, the GPU tests' junit and per-test JSON under lease/), so a call killed at
# any moment still returns what it measured.
#
# Warm or fresh: on the machine of call 1 (warm), call 2 finds the installed package and the records under
# $LEASE and goes on; on a fresh machine it installs again, and resumes from any archive carried in
# $LEASE/resume/ (copy call 1's records-1.tar.gz there and carry build/lease/resume too).
#
# Why a prebuilt wheel (call 0 here, carried as build/lease/wheel) and not a build on the GPU host: the image
# was never checked for OpenSSL's headers (libssl-dev; blksum needs them to configure) and cannot install them
# without a package index; a CUDA build would cost minutes of GPU time; the commit is captured where git is
# (the tree travels without .git). The wheel is built for sm_90 (H100/H200) with this host's nvcc (13.0, the
# image's major version) against glibc 2.36, older than the image's, and links libcrypto.so.3, which the image
# has (Python needs it). Without a carried wheel, a call builds one there (nvcc, a C compiler and OpenSSL's
# headers checked first; NVMELAB_GIT_COMMIT names the commit) at a cost of minutes.
#
# Environment: PY (the interpreter: python3, the image's, by default), NVMELAB_LEASE_DIR (default build/lease),
# NVMELAB_LEASE_CALL_S (the call's seconds), NVMELAB_HOST_ID (default lease-<GPU name>, so that both calls file
# their records under the same host folder although each machine may have another hostname).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
LEASE=${NVMELAB_LEASE_DIR:-build/lease}
case "$LEASE" in /*) ;; *) LEASE=$ROOT/$LEASE ;; esac
STANDIN=${NVMELAB_LEASE_STANDIN:-0}
CALL1_S=330
CALL2_S=270
INSTALL_LIMIT_S=45

usage() { sed -n '4,7p' "$0" >&2; exit 2; }
now() { date +%s; }
elapsed() { echo $(( $(now) - T0 )); }

part() { # part NAME RC SECONDS DETAIL: one JSON line in the call's parts file
    "$PY" -c 'import json,sys; print(json.dumps({"part": sys.argv[1], "kind": sys.argv[1], "rc": int(sys.argv[2]), "seconds": int(sys.argv[3]), "detail": sys.argv[4]}))' \
        "$1" "$2" "$3" "$4" >> "$PARTS"
}

timed() { # timed NAME LIMIT CMD...: run CMD under a time limit; record it as a part; never stop the call
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

# --- call 0: here, before a lease (or the rehearsal's first) ----------------------------------------------
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
    # dependencies come along; the check in each call refuses any that the image does not have)
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
    echo "== call 0: wheelhouse in $(( $(now) - t )) s"
    t=$(now)
    make_image_venv
    echo "== call 0: image venv in $(( $(now) - t )) s"
    t=$(now)
    build_wheel "$LEASE/image-venv/bin/python"
    echo "== call 0: wheel in $(( $(now) - t )) s"
    echo "carry to the GPU host: build/lease/wheel env/wheelhouse ($(du -sh env/wheelhouse "$LEASE/wheel" | awk '{print $1}' | xargs))"
}

# --- calls 1 and 2: on the GPU host (or the simulated one) ---------------------------------------------
install() {
    local want
    want=$(cat env/wheelhouse/*.whl "$LEASE"/wheel/nvmelab-*.whl 2>/dev/null | sha256sum | cut -d' ' -f1)
    if [ -f "$SITE/.nvmelab-wheels" ] && [ "$(cat "$SITE/.nvmelab-wheels")" = "$want" ]; then
        echo "installed already (a warm machine): $SITE"
        return 0
    fi
    rm -rf "$SITE"
    mkdir -p "$SITE"
    if ! ls "$LEASE"/wheel/nvmelab-*.whl >/dev/null 2>&1; then
        echo "no wheel carried in $LEASE/wheel: building one here"
        command -v nvcc >/dev/null || { echo "nvcc not found: carry a wheel (bash env/gpu-lease.sh 0 where nvcc is)" >&2; return 1; }
        PYTHON="$PY" VENV=/nonexistent bash env/prereqs.sh build || return 1
        NVMELAB_LEASE_CUDA=ON build_wheel "$PY" || return 1
        want=$(cat env/wheelhouse/*.whl "$LEASE"/wheel/nvmelab-*.whl | sha256sum | cut -d' ' -f1)
    fi
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" env/wheelhouse/*.whl "$LEASE"/wheel/nvmelab-*.whl
    PYTHONPATH=$SITE "$PY" -m pip check 2>&1 | grep -v "^No broken" || true
    echo "$want" > "$SITE/.nvmelab-wheels"
}

run_call() {
    local n=$1 out=$2 seconds
    T0=$(now)
    case "$n" in 1) seconds=${NVMELAB_LEASE_CALL_S:-$CALL1_S} ;; 2) seconds=${NVMELAB_LEASE_CALL_S:-$CALL2_S} ;; esac
    SITE=$LEASE/site
    RESULTS=$LEASE/results
    PARTS=$LEASE/work/parts-$n.jsonl
    mkdir -p "$out" "$LEASE/work" "$RESULTS"
    : > "$PARTS"
    exec > >(tee -a "$out/lease-$n.log") 2>&1
    echo "== gpu-lease call $n ($( [ "$STANDIN" = 1 ] && echo 'rehearsal: CPU stand-in' || echo 'GPU host')), ${seconds} s, $(date -u +%FT%TZ)"
    timed install "$INSTALL_LIMIT_S" env SITE="$SITE" PY="$PY" LEASE="$LEASE" bash "$0" _install
    export PYTHONPATH=$SITE NVMELAB_RESULTS=$RESULTS PYTHONUNBUFFERED=1 NVMELAB_LEASE_ROOT=$ROOT
    if [ -z "${NVMELAB_HOST_ID:-}" ]; then
        local gpu_name
        gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1 | tr ' ' '-' || true)
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
    if ! "$PY" -c 'import nvmelab._native' 2>/dev/null; then
        echo "== the package did not install: nothing more can run (see above)"
        "$PY" -c 'import json,sys; p=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]; json.dump({"call": int(sys.argv[2]), "parts": p, "installed": False}, open(sys.argv[3], "w"), indent=1)' \
            "$PARTS" "$n" "$out/summary-$n.json"
        tar -czf "$out/records-$n.tar.gz" -C "$RESULTS" .
        return 1
    fi
    "$PY" -m nvmelab.lease call "$n" --results "$RESULTS" --out "$out" --parts "$PARTS" \
        --started "$T0" --seconds "$seconds" "${sa[@]}" ${NVMELAB_LEASE_ONLY:+--only "$NVMELAB_LEASE_ONLY"} \
        || part calls 1 0 "the lease's call runner stopped (see the log)"
    "$PY" -m nvmelab.lease pack "$n" --results "$RESULTS" --out "$out" --parts "$PARTS" "${sa[@]}" >/dev/null
    echo "== call $n done in $(elapsed) s (its time: $seconds s); outputs: $(ls "$out" | xargs)"
}

# --- the rehearsal: calls 0-2 on a simulated GPU host ------------------------------------------------------
rehearse() {
    local out=$1 t0
    t0=$(now)
    # the carried wheel as a lease builds it: CUDA (sm_90) when nvcc is here (NVMELAB_LEASE_CUDA=OFF: without)
    local cuda=${NVMELAB_LEASE_CUDA:-auto}
    [ "$cuda" = auto ] && { command -v nvcc >/dev/null && cuda=ON || cuda=OFF; }
    [ "$cuda" = ON ] || echo "rehearsal: the wheel is built WITHOUT CUDA (NVMELAB_LEASE_CUDA=$cuda, or no nvcc):" \
        "the CUDA build a lease carries is not rehearsed"
    export NVMELAB_LEASE_STANDIN=1 NVMELAB_HOST_ID=rehearsal NVMELAB_LEASE_CUDA=$cuda
    STANDIN=1
    LEASE=$ROOT/build/rehearse
    export NVMELAB_LEASE_DIR=$LEASE
    rm -rf "$out" "$LEASE/results" "$LEASE/resume" "$LEASE/site" "$LEASE/work"
    mkdir -p "$out"
    step0
    echo "rehearsal: call 0 (wheelhouse, image venv, wheel with NVMELAB_CUDA=$cuda) took $(( $(now) - t0 )) s"
    # call 1 on a fresh machine, call 2 on the same machine while warm: the device command lines, exactly
    for n in 1 2; do
        PY=$LEASE/image-venv/bin/python bash "$0" "$n" "$out/call-$n"
    done
    echo "rehearsal: $(( $(now) - t0 )) s; outputs under $out: $(cd "$out" && find . -type f | sort | xargs)"
    # the outputs as the device tool would hand them back: limits, layout, valid records with their commit,
    # every point of every lease study ran or has a failed-point record
    NVMELAB_REHEARSAL_OUT=$out NVMELAB_REHEARSAL_CUDA=$cuda PYTHONPATH=$LEASE/site "$LEASE/image-venv/bin/python" -m pytest -q \
        -p no:cacheprovider -o addopts= tests/test_lease.py -k rehearsal_outputs
}

what=${1:-}
case "$what" in
    0) step0 ;;
    1|2) [ -n "${2:-}" ] || { echo "gpu-lease: call $what needs OUT (bash env/gpu-lease.sh $what \$OUT)" >&2; exit 2; }
         PY=${PY:-python3}
         run_call "$what" "$2" ;;
    rehearse) rehearse "${2:-$ROOT/build/rehearse/out}" ;;
    _install) install ;;  # internal: a call's install part, run under `timeout`
    *) usage ;;
esac
