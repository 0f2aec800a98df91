#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nvmelab — what each make target needs from the system, checked in its first second.
#
# usage: env/prereqs.sh [--install] LEG...
#   env       Python >= 3.11 (tomllib) that can make a virtual environment (the venv module and ensurepip)
#   build     env, plus C and C++ compilers, Python's headers, OpenSSL's headers, the kernel's UAPI
#             headers (<linux/io_uring.h>); cmake, ninja and pybind11 come from the venv, not the system
#   sanitize  build, plus the ASan/UBSan runtimes
#   qemu      the host tools of env/qemu/run.sh (QEMU, busybox-static, cpio, kmod, xz, static libc)
#             and apt package lists (the guest kernel is fetched with apt-get download)
#   browser   chromium, for the book's page check (tests/book)
#   nbd       qemu-utils (qemu-nbd, qemu-img), libnbd's headers and pkg-config: blksum's NBD and qcow2
#             legs (make test-nbd; the build finds libnbd when it is there, and leaves NBD out when not)
#   bench     nbd, plus fio and valgrind (callgrind), and meson for building the original blksum
#   records   stress-ng, for make records (the host-variable sweeps stress the CPUs a run leaves idle)
#   fuzz      build, plus clang with libFuzzer and the ASan/UBSan runtimes (make fuzz; atheris, for the Python
#             harnesses, comes from the package index into build/fuzz/py)
#   gpu       build, plus nvcc and a CUDA GPU the NVIDIA driver can see (make test-gpu, bench-gpu);
#             never installed from here (the CUDA toolkit and driver come from NVIDIA)
#
# Without --install a missing part stops here with one line per part and the exact Debian package,
# then the command that installs them (exit 1). With --install (the extra legs: qemu, browser,
# bench, records, nbd, fuzz), root on a machine with apt-get installs the missing packages first and checks again.
# `make env`, `make build`, `make book` and `make test` never install system packages.
# Environment: PYTHON (default python3), VENV (default .venv; the venv check is skipped once it exists).
set -uo pipefail

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
INSTALL=0
LEGS=()
for a in "$@"; do
    case "$a" in
        --install) INSTALL=1 ;;
        -h|--help) sed -n '3,24p' "$0"; exit 0 ;;
        env|build|sanitize|qemu|browser|bench|records|gpu|nbd|fuzz) LEGS+=("$a") ;;
        *) echo "prereqs.sh: unknown leg '$a' (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#LEGS[@]} -gt 0 ] || { echo "prereqs.sh: name a leg (see --help)" >&2; exit 2; }

MISSING=()   # "what|package"
PKGS=()
need() { # need WHAT PACKAGE: record a missing part
    MISSING+=("$1|$2")
    case " ${PKGS[*]} " in *" $2 "*) ;; *) PKGS+=("$2") ;; esac
}
have() { # an executable COMMAND on PATH (bash's `command -v` also names a non-executable file)
    local p
    p=$(command -v "$1" 2>/dev/null) && [ -x "$p" ]
}
cc_has_header() { # cc_has_header HEADER: the C preprocessor finds HEADER
    printf '#include <%s>\n' "$1" | "${CC:-cc}" -E -x c - >/dev/null 2>&1
}

PY_OK=0
check_env() {
    PY_OK=0
    if ! have "$PYTHON"; then
        need "Python 3.11 or newer ($PYTHON not found; or set PYTHON=...)" python3
        return
    fi
    if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then
        need "Python 3.11 or newer ($PYTHON: $("$PYTHON" -V 2>&1 | head -n1); or set PYTHON=...)" python3
        return
    fi
    PY_OK=1
    if [ ! -x "$VENV/bin/python" ] && ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
        need "Python's venv module with ensurepip (for $PYTHON)" python3-venv
    fi
}

check_build() {
    check_env
    if ! have cc; then
        need "a C compiler (cc)" gcc
    elif ! printf 'int x;\n' | "${CC:-cc}" -fsyntax-only -x c - >/dev/null 2>&1; then
        need "a working C compiler (cc fails on an empty file)" gcc
    else
        cc_has_header openssl/evp.h || need "OpenSSL headers (openssl/evp.h; blksum's digests)" libssl-dev
        cc_has_header linux/io_uring.h || need "the kernel's UAPI headers (linux/io_uring.h)" linux-libc-dev
    fi
    have c++ || need "a C++ compiler (c++)" g++
    if [ "$PY_OK" = 1 ]; then
        local inc
        inc=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
        [ -n "$inc" ] && [ -f "$inc/Python.h" ] || need "Python's C headers (Python.h for $PYTHON)" python3-dev
    fi
}

check_sanitize() {
    check_build
    if have cc; then
        local t
        t=$(mktemp -d)
        printf 'int main(void){return 0;}\n' > "$t/a.c"
        "${CC:-cc}" -fsanitize=address,undefined "$t/a.c" -o "$t/a" >/dev/null 2>&1 || \
            need "the ASan/UBSan runtimes (cc -fsanitize=address,undefined)" "libasan8 libubsan1"
        rm -rf "$t"
    fi
}

check_qemu() {
    have qemu-system-x86_64 || need "qemu-system-x86_64" qemu-system-x86
    have cpio || need "cpio" cpio
    have modinfo || need "modinfo" kmod
    have cc || need "a C compiler (cc)" gcc
    have xz || need "xz" xz-utils
    if [ ! -e /bin/busybox ] || ! { file -L /bin/busybox 2>/dev/null | grep -q 'statically linked' || \
                                   ldd /bin/busybox 2>&1 | grep -q 'not a dynamic'; }; then
        need "a static busybox (/bin/busybox)" busybox-static
    fi
    [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || need "the static C library (libc.a)" libc6-dev
    have apt-get || need "apt-get (the guest kernel is a Debian package)" apt
}

check_browser() {
    have chromium || have chromium-browser || have google-chrome || need "chromium (headless page check)" chromium
}

check_nbd() {
    have qemu-nbd || need "qemu-nbd (blksum --mode nbd, the NBD study mode)" qemu-utils
    have qemu-img || need "qemu-img (qcow2 images for blksum's tests)" qemu-utils
    have pkg-config || need "pkg-config (to find libnbd)" pkg-config
    { have pkg-config && pkg-config --exists libnbd; } || need "libnbd's headers (blksum's NBD reader)" libnbd-dev
}

check_bench() {
    check_nbd
    have ninja || need "ninja (builds earlier revisions of nvmelab for side-by-side benchmarks)" ninja-build
    have fio || need "fio (the kernel-path comparison)" fio
    { have valgrind && have callgrind_annotate; } || need "valgrind with callgrind_annotate (driver hot path)" valgrind
}

check_records() {
    have stress-ng || need "stress-ng (stress on the CPUs a run does not use)" stress-ng
}

check_fuzz() {
    check_build
    if ! have clang || ! have clang++; then
        need "clang and clang++ (libFuzzer is part of clang's runtime)" clang
    else
        local t
        t=$(mktemp -d)
        printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return (int)(n && !d); }\n' > "$t/f.c"
        clang -fsanitize=fuzzer,address,undefined "$t/f.c" -o "$t/f" >/dev/null 2>&1 || \
            need "clang's libFuzzer and sanitizer runtimes (clang -fsanitize=fuzzer,address,undefined)" clang
        rm -rf "$t"
    fi
}

check_gpu() {
    check_build
    if [ -n "${CUDACXX:-}" ]; then
        [ -x "$CUDACXX" ] || need "nvcc at CUDACXX=$CUDACXX" "(the CUDA toolkit, from NVIDIA)"
    else
        have nvcc || need "nvcc, the CUDA compiler (or set CUDACXX)" "(the CUDA toolkit, from NVIDIA)"
    fi
    if ! have nvidia-smi; then
        need "the NVIDIA driver (nvidia-smi)" "(the NVIDIA driver)"
    elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
        need "a CUDA GPU (nvidia-smi -L lists none)" "(a host with a GPU)"
    fi
}

check_all() {
    MISSING=(); PKGS=()
    for leg in "${LEGS[@]}"; do "check_$leg"; done
    # apt lists: only a question when something will be fetched with apt
    for leg in "${LEGS[@]}"; do
        if [ "$leg" = qemu ] && have apt-cache && ! apt-cache show linux-image-amd64 >/dev/null 2>&1; then
            need "apt package lists (apt-get download of the guest kernel)" "(apt-get update)"
        fi
    done
}

check_all
[ ${#MISSING[@]} -eq 0 ] && exit 0

# "(...)" entries are not Debian packages: a step (apt-get update) or something from elsewhere
real_pkgs() { local p; for p in "${PKGS[@]}"; do case "$p" in "("*) ;; *) echo "$p" ;; esac; done; }

if [ "$INSTALL" = 1 ] && [ "$(id -u)" = 0 ] && have apt-get; then
    export DEBIAN_FRONTEND=noninteractive
    # shellcheck disable=SC2046
    pkgs=$(real_pkgs | tr '\n' ' ')
    echo "prereqs (${LEGS[*]}): installing ${pkgs:-nothing}" >&2
    needs_update=0
    case " ${PKGS[*]} " in *"(apt-get update)"*) needs_update=1 ;; esac
    if [ -n "$pkgs" ] && [ "$needs_update" = 0 ]; then
        # shellcheck disable=SC2086
        apt-get install -y -qq --no-install-recommends $pkgs >/dev/null 2>&1 || needs_update=1
    fi
    if [ "$needs_update" = 1 ]; then
        apt-get update -qq >/dev/null
        # shellcheck disable=SC2086
        [ -z "$pkgs" ] || apt-get install -y -qq --no-install-recommends $pkgs >/dev/null
    fi
    check_all
    [ ${#MISSING[@]} -eq 0 ] && exit 0
fi

{
    echo "nvmelab (${LEGS[*]}): this machine lacks:"
    for m in "${MISSING[@]}"; do
        case "${m#*|}" in
            "(apt-get update)") printf '  - %s\n' "${m%%|*}" ;;
            "("*) printf '  - %-64s from: %s\n' "${m%%|*}" "$(echo "${m#*|}" | tr -d '()')" ;;
            *) printf '  - %-64s Debian package: %s\n' "${m%%|*}" "${m#*|}" ;;
        esac
    done
    pkgs=$(real_pkgs | tr '\n' ' ')
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo "
    update=""; case " ${PKGS[*]} " in *"(apt-get update)"*) update="${sudo}apt-get update" ;; esac
    if [ -n "$pkgs" ]; then
        printf 'install them, then run make again:\n  %s%sapt-get install %s\n' "${update:+$update && }" "$sudo" "${pkgs% }"
    elif [ -n "$update" ]; then
        printf 'then run make again after:\n  %s\n' "$update"
    fi
    have apt-get || echo "(Debian package names; on another system install the equivalents)"
} >&2
exit 1
