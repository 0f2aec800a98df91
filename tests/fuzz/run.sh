#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Run every fuzz harness of tests/fuzz for SECONDS each (make fuzz; tests/fuzz/README.md).
#
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS [PYTHON]
#   BUILD_DIR  the NVMELAB_FUZZ=ON build (build/fuzz): fuzz_<name>.c is BUILD_DIR/tests/fuzz/fuzz_<name>
#   SECONDS    fuzzing time per harness (libFuzzer's -max_total_time)
#   PYTHON     the interpreter with atheris importable, for the fuzz_<name>.py harnesses (default: skip them
#              with a message, which fails the run: a harness that cannot run is not a pass)
#
# Each harness runs on a fresh copy of its committed seed corpus (tests/fuzz/corpus/<name>/, never
# written to) under BUILD_DIR/fuzz-work/<name>/, under ASan+UBSan with leak detection, a per-input timeout
# and a memory limit. Any crash, sanitizer report, leak, timeout or out-of-memory input fails the run; its
# input is kept as BUILD_DIR/fuzz-work/<name>/crash-* (leak-*, timeout-*, oom-*) and named at the end.
# Every harness runs even when an earlier one failed; the exit status is 1 when any failed.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: run.sh BUILD_DIR SECONDS [PYTHON]}
SECS=${2:?usage: run.sh BUILD_DIR SECONDS [PYTHON]}
PYFUZZ=${3:-}
WORK=$BUILD/fuzz-work
# Limits of one input: a timeout (a hang), RSS of the process and the largest single allocation (a reader
# whose memory follows a header field instead of the file).
OPTS=(-max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
summary=()
shopt -s nullglob
harnesses=(tests/fuzz/fuzz_*.c tests/fuzz/fuzz_*.py)
[ ${#harnesses[@]} -gt 0 ] || { echo "fuzz: no harness in tests/fuzz" >&2; exit 1; }
for h in "${harnesses[@]}"; do
    base=$(basename "$h")
    exe=${base%.*}
    name=${exe#fuzz_}
    seeds=tests/fuzz/corpus/$name
    dir=$WORK/$name
    if [ -z "$(ls -A "$seeds" 2>/dev/null)" ]; then
        echo "fuzz: $h has no seed corpus ($seeds/ is missing or empty)" >&2
        failed+=("$name (no seeds)")
        continue
    fi
    case "$h" in
        *.c)
            cmd=("$BUILD/tests/fuzz/$exe")
            [ -x "${cmd[0]}" ] || {
                echo "fuzz: $h was not built (${cmd[0]} missing: configure $BUILD with -DNVMELAB_FUZZ=ON)" >&2
                failed+=("$name (not built)")
                continue
            }
            ;;
        *.py)
            if [ -z "$PYFUZZ" ]; then
                echo "fuzz: $h needs a Python with atheris (make fuzz installs it)" >&2
                failed+=("$name (no atheris)")
                continue
            fi
            cmd=("$PYFUZZ" "$h")
            ;;
    esac
    rm -rf "$dir"
    mkdir -p "$dir"
    cp -r "$seeds" "$dir/corpus"
    echo "fuzz: $name for ${SECS}s on a copy of $seeds ($(ls "$seeds" | wc -l) seeds)"
    "${cmd[@]}" "${OPTS[@]}" -artifact_prefix="$dir/" "$dir/corpus" >"$dir/log" 2>&1
    rc=$?
    stats=$(grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$dir/log" |
        sed -E 's/^stat:://; s/:[[:space:]]+/=/' | tr '\n' ' ')
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$dir/log" | tail -n1)
    artifacts=("$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*)
    if [ $rc -ne 0 ] || [ ${#artifacts[@]} -gt 0 ]; then
        echo "fuzz: $name FAILED (exit $rc); the end of its log ($dir/log):" >&2
        grep -E 'ERROR:|SUMMARY:|^fuzz_|Test unit written|Traceback|Error' "$dir/log" | head -n 20 >&2
        for a in "${artifacts[@]}"; do echo "  input: $a" >&2; done
        failed+=("$name")
    fi
    summary+=("$name: ${cov:-cov: ?} ${stats}")
done
echo "fuzz: ${#harnesses[@]} harness(es), ${SECS}s each"
for s in "${summary[@]}"; do echo "  $s"; done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: failed: ${failed[*]} (inputs and logs under $WORK/)" >&2
    exit 1
fi
