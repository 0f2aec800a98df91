#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run_on_gpu_host.sh — the GPU work of issue 6, for a host with a CUDA GPU (e.g. a lent H100/H200).
#
#   tests/gpu/run_on_gpu_host.sh [build|test|bench|studies|all]      (default: all)
#
#   build    pip install --no-build-isolation . into the active Python (or .venv), CUDA on
#   test     pytest -m gpu tests/test_cuda.py, plus the C queue test; fails loudly if no GPU is seen
#   bench    python -m tests.bench --gpu (results under data/results/bench/<host>/)
#   studies  cuda_qdepth and cuda_iosize on the `paper` grid against gpu-emu, two targets each:
#            the spec's pm1753 target (16 devices, unscaled) and profile=null. Records go to
#            data/results/<study>/<host>/paper.jsonl (the studies runner's layout), one append per run,
#            resumable: runs already recorded (same run_key) are skipped. The paper grid takes hours
#            (10 s + 1 s warm-up, 5 repetitions); NVMELAB_GPU_BUDGET_S (default 1500) stops starting new
#            runs after that many seconds so a time-limited session ends cleanly; run again to go on.
#            The paper preset asks for governor=performance/turbo/smt; this loop records what the
#            host has and does not change it (device-initiated I/O does not depend on the CPU governor).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || command -v python3 )}
what=${1:-all}

do_build() {
    command -v nvcc >/dev/null || { echo "nvcc not found: the CUDA toolkit is needed to build the GPU parts" >&2; exit 1; }
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
    "$PY" -m pip install --no-build-isolation . -Ccmake.define.NVMELAB_CUDA=ON
    "$PY" -c "import nvmelab, nvmelab._native as n; print(nvmelab.build_info()); print(n.cuda_status())"
}

do_test() {
    "$PY" - <<'PYEOF'
import sys
from nvmelab import _native as n
st = n.cuda_status()
print(st)
sys.exit(0 if st["devices"] > 0 else f"no usable GPU: {st['reason']}")
PYEOF
    if [ -d build/dev ]; then ctest --test-dir build/dev -R test_cuda_queue_host --output-on-failure; fi
    "$PY" -m pytest -q -p no:cacheprovider -m gpu -rs tests/test_cuda.py tests/test_cuda_numba_sim.py
}

do_bench() {
    "$PY" -m tests.bench --gpu
}

do_studies() {
    NVMELAB_GPU_BUDGET_S=${NVMELAB_GPU_BUDGET_S:-1500} "$PY" - <<'PYEOF'
import logging, os, time
from nvmelab.engines import perf
from nvmelab.results import records
from nvmelab.studies import runner
from nvmelab.studies.spec import load_spec

logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
budget = float(os.environ["NVMELAB_GPU_BUDGET_S"])
t0 = time.monotonic()
root = runner.default_results_root("paper")
host = runner.host_id()
for study in ("cuda_qdepth", "cuda_iosize"):
    spec = load_spec(study)
    for target in (None, "gpu-emu://?profile=null"):
        plan = spec.plan("paper", target=target)
        path = runner.results_path(root, spec.study, host, "paper")
        done = runner.done_keys([path])
        todo = [r for r in plan.runs if r.key not in done]
        logging.info("%s target=%s: %d runs, %d to do -> %s", study, target or spec.target, len(plan.runs), len(todo), path)
        for run in todo:
            if time.monotonic() - t0 > budget:
                logging.warning("budget of %.0f s used: stopping; run again to resume", budget)
                raise SystemExit(0)
            try:
                rec = perf.run_cuda(study=run.study, repetition=run.repetition, **run.engine_params)
            except ValueError as exc:   # a shape this GPU cannot hold with its emulator: say so, go on
                logging.warning("skipped %s: %s", run.label(), exc)
                continue
            rec.update(run_key=run.key, preset=run.preset, sweeps=list(run.sweeps), stress=0,
                       requested_host={k: v for k, v in run.host_params.items()})
            records.append_records(path, [rec])
            logging.info("%s %s: %.3g IOPS, %.3g MiB/s", study, run.label(), rec["iops"], rec["mibs"])
PYEOF
}

case "$what" in
    build) do_build ;;
    test) do_test ;;
    bench) do_bench ;;
    studies) do_studies ;;
    all) do_build; do_test; do_bench; do_studies ;;
    *) echo "usage: $0 [build|test|bench|studies|all]" >&2; exit 2 ;;
esac
