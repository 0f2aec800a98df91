#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# with-cpu-hog.sh CMD [ARGS...]: run CMD beside a CPU hog and return CMD's exit status (make test-busy, issue 33).
#
# The hog keeps every CPU busy (HOG_CPUS, default: all of them): stress-ng --cpu where it is installed (the
# `records` group of env/prereqs.sh installs it), else a busy loop per CPU in bash. It runs in a process group
# of its own, ended on any exit of this script (CMD's end, an error, Ctrl-C, SIGTERM); HOG_MAX_S (default 3 h)
# bounds its life even if this script is killed with SIGKILL. HOG_TOOL=bash takes the bash loops even where
# stress-ng is installed.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
cpus=${HOG_CPUS:-$(nproc)}
max_s=${HOG_MAX_S:-10800}
case "$cpus$max_s" in *[!0-9]*) echo "$0: HOG_CPUS and HOG_MAX_S must be whole numbers" >&2; exit 2 ;; esac

hog=
stop_hog() {
    if [ -n "$hog" ]; then
        kill -TERM -- "-$hog" 2>/dev/null || true
        wait "$hog" 2>/dev/null || true
        hog=
    fi
}
trap stop_hog EXIT
trap 'stop_hog; trap - INT; kill -INT $$' INT
trap 'stop_hog; trap - TERM; kill -TERM $$' TERM

stress=$(command -v stress-ng 2>/dev/null || true)
if [ "${HOG_TOOL:-}" != bash ] && [ -n "$stress" ] && [ -x "$stress" ]; then # bash's command -v also names a non-executable file
    what="stress-ng --cpu $cpus"
    setsid stress-ng --cpu "$cpus" --timeout "${max_s}s" --quiet &
else
    what="$cpus busy loop(s) in bash (no stress-ng)"
    # shellcheck disable=SC2016 # expanded by the child bash
    setsid bash -c 'for ((i = 0; i < $1; i++)); do (end=$((SECONDS + $2)); while ((SECONDS < end)); do :; done) & done; wait' \
        hog "$cpus" "$max_s" &
fi
hog=$!
sleep 1 # a hog that cannot start (a tool that fails) must not leave CMD to run on an idle machine
if ! kill -0 "$hog" 2>/dev/null; then
    hog=
    echo "with-cpu-hog: the hog ($what) ended at once; not running: $*" >&2
    exit 1
fi
echo "with-cpu-hog: $what beside: $*" >&2
status=0
"$@" || status=$?
stop_hog
echo "with-cpu-hog: hog stopped; exit status $status" >&2
exit "$status"
