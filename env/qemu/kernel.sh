#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nvmelab — `make test-kernel`: the Linux kernel's own nvme driver on our controller.
#
# nvmelab-serve serves the controllers of an emu:// URI over vfio-user; a TCG guest of QEMU >= 10.1 (built from
# Debian's source package by qemu-build.sh, cached) sees each as a PCI function through QEMU's vfio-user-pci
# device, guest RAM a shared memfd the server maps; the Debian kernel of `make test-qemu` (guest-lib.sh, same
# cache) binds them with its nvme driver, and the guest (kernel-tests.sh) runs on each nvme-cli (list, id-ctrl,
# id-ns, smart-log), write-read-compare passes, fio with crc32c verify, reset, namespace rescan, PCI remove +
# rescan. nvme-cli and fio are the host's (Debian 12, like the guest), copied in with their shared libraries.
# The console, under a header (commit, QEMU and its Debian source version, kernel, URI, date), is written to
# data/results/conformance/kernel-nvme.log (--log elsewhere).
#
# Usage: env/qemu/kernel.sh [--uri URI] [--log PATH] [--commit REV] [--reference]      (make test-kernel KERNEL_ARGS="...")
#   --uri        the served controllers (default below; 1 to 4 controllers, one namespace each)
#   --log        where the log goes (default data/results/conformance/kernel-nvme.log)
#   --commit REV serve with nvmelab-serve built from `git archive REV` (cached in env/qemu/work/serve/<sha>),
#                not the working tree's (make build): the log then names a commit exactly
#   --reference  the same guest and checks against QEMU's own NVMe controller instead of ours (shapes from the
#                URI): the checks themselves are known good; its log stays in the run folder unless --log
# The run folder env/qemu/work/runs/kernel-<time>/ keeps the console, QEMU's and the server's output.
# Root on Debian 12: installs what it needs with apt-get (named first). Exit 0 when every check passed,
# 1 when one failed, 2 on a setup error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${NVMELAB_QEMU_WORK:-$HERE/work}
# shellcheck source=config.sh
source "$HERE/config.sh"
# shellcheck source=guest-lib.sh
source "$HERE/guest-lib.sh"

# two controllers of different shapes: 512 B LBAs and MDTS 128 KiB, 4 KiB LBAs and MDTS 32 KiB
URI=${NVMELAB_KERNEL_URI:-"emu://?ndev=2&nsze=64M&lbads=512,4096&mdts=128K,32K&nioq=8"}
LOGFILE=${NVMELAB_KERNEL_LOG:-$ROOT/data/results/conformance/kernel-nvme.log}
MEM=${NVMELAB_KERNEL_MEM:-1G}   # guest RAM = the memfd the server maps
SMP=${NVMELAB_KERNEL_SMP:-2}
TIMEOUT_S=${NVMELAB_KERNEL_TIMEOUT_S:-1200}   # the whole guest run; each guest command has its own
FIO_MIB=${NVMELAB_KERNEL_FIO_MIB:-4}
FIRST_SLOT=6   # controller i sits in the guest's PCI slot 6 + i
SERVE=${NVMELAB_SERVE:-$ROOT/.venv/bin/nvmelab-serve}
REFERENCE=0
LOG_SET=0
COMMIT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --uri) URI=$2; shift 2 ;;
        --log) LOGFILE=$2; LOG_SET=1; shift 2 ;;
        --reference) REFERENCE=1; shift ;;
        --commit) COMMIT=$2; shift 2 ;;
        -h|--help) sed -n '3,24p' "$0"; exit 0 ;;
        *) echo "kernel.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[kernel] %s\n' "$*" >&2; }
die() { printf '[kernel] error: %s\n' "$*" >&2; exit 2; }

# --- 0. what the URI must be: 1-4 controllers, one namespace each; their shapes go to the guest's checks ---
uri_param() { # uri_param KEY DEFAULT
    local v
    v=$(sed -n "s/.*[?&]$1=\([^&]*\).*/\1/p" <<<"$URI")
    echo "${v:-$2}"
}
per_ctrl() { # per_ctrl KEY DEFAULT I: controller I's value of a key that takes one value or a comma list
    local v
    v=$(uri_param "$1" "$2")
    case "$v" in *,*) cut -d, -f$(( $3 + 1 )) <<<"$v" ;; *) echo "$v" ;; esac
}
bytes() { # bytes 64M -> 67108864 (K, M, G with or without iB)
    local n=${1%iB} m=1
    case "$n" in *K) m=1024; n=${n%K} ;; *M) m=$((1 << 20)); n=${n%M} ;; *G) m=$((1 << 30)); n=${n%G} ;; esac
    [[ "$n" =~ ^[0-9]+$ ]] || die "cannot read the size '$1' in $URI"
    echo $(( n * m ))
}
case "$URI" in emu://*) ;; *) die "--uri must be an emu:// URI (got $URI)" ;; esac
NDEV=$(uri_param ndev 1)
[[ "$NDEV" =~ ^[1-4]$ ]] || die "the kernel leg serves 1 to 4 controllers: ndev=1..4 (got $URI)"
[ "$(uri_param nns 1)" = 1 ] || die "the kernel leg checks one namespace per controller: nns=1 (got $URI)"
CTRLS=(); LBAS=(); NSZES=(); MDTSES=()
for ((i = 0; i < NDEV; i++)); do
    CTRLS+=("0000:00:$(printf %02x $((FIRST_SLOT + i))).0")
    LBAS+=("$(per_ctrl lbads 512 "$i")")
    NSZES+=("$(bytes "$(per_ctrl nsze 1G "$i")")")
    MDTSES+=("$(bytes "$(per_ctrl mdts 128K "$i")")")
    [ $(( NSZES[i] / 2 )) -ge $(( (FIO_MIB << 20) + (4 << 20) )) ] || \
        die "controller $i: namespace too small for a $FIO_MIB MiB fio run past the patterns"
done

# --- 1. system packages, named before anything is installed ---
PKGS=(
    # QEMU's build (x86_64-softmmu, the vfio-user client): compilers, ninja, Python's venv and pip (Meson's wheel),
    # glib, zlib, libfdt; dpkg-dev for apt-get source
    gcc make ninja-build pkgconf python3-venv python3-pip libglib2.0-dev zlib1g-dev libfdt-dev flex bison dpkg-dev
    # the guest's firmware (SeaBIOS, QEMU's option ROMs) and the guest userland copied from the host
    seabios qemu-system-data nvme-cli fio
)
log "packages this leg needs: ${PKGS[*]} (plus env/prereqs.sh qemu: busybox-static cpio kmod xz-utils libc6-dev)"
missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null || die "missing: ${missing[*]} (as root: apt-get install ${missing[*]})"
    log "installing ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 || {
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
    } || die "apt-get install ${missing[*]} failed"
fi
bash "$ROOT/env/prereqs.sh" --install qemu || die "host tools missing (above)"
mkdir -p "$WORK"
exec 9>"$WORK/.lock"
flock -n 9 || die "another test-qemu or test-kernel run is using $WORK"

# the server: the working tree's (make build), or one commit's, built here from `git archive`
if [ -n "$COMMIT" ]; then
    rev=$(git -C "$ROOT" rev-parse --verify "$COMMIT^{commit}" 2>/dev/null) || die "--commit $COMMIT: no such commit"
    SB="$WORK/serve/$rev"
    if [ ! -x "$SB/build/src/tools/nvmelab-serve" ]; then
        log "building nvmelab-serve of $rev (git archive -> $SB)"
        rm -rf "$SB"; mkdir -p "$SB/src"
        git -C "$ROOT" archive "$rev" | tar -x -C "$SB/src"
        cmk=cmake; [ ! -x "$ROOT/.venv/bin/cmake" ] || cmk="$ROOT/.venv/bin/cmake"
        PATH="$ROOT/.venv/bin:$PATH" "$cmk" -S "$SB/src" -B "$SB/build" -G Ninja -DNVMELAB_PYTHON=OFF \
            -DNVMELAB_CUDA=OFF > "$SB/configure.log" 2>&1 || { tail -n 20 "$SB/configure.log" >&2; die "configure failed"; }
        PATH="$ROOT/.venv/bin:$PATH" "$cmk" --build "$SB/build" --target nvmelab-serve > "$SB/build.log" 2>&1 || {
            tail -n 20 "$SB/build.log" >&2; die "building nvmelab-serve of $rev failed"; }
    fi
    SERVE="$SB/build/src/tools/nvmelab-serve"
    SERVE_FROM="nvmelab-serve built from git archive $rev"
    NVMELAB_COMMIT=$rev
else
    [ "$REFERENCE" = 1 ] || [ -x "$SERVE" ] || die "no $SERVE: run make build first"
    SERVE_FROM="nvmelab-serve of the working tree (make build)"
    NVMELAB_COMMIT=$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)
    git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || NVMELAB_COMMIT="$NVMELAB_COMMIT + uncommitted changes in src/"
fi


# --- 2. QEMU >= 10.1 with the vfio-user client (cached) ---
t0=$(date +%s)
QEMU=$(bash "$HERE/qemu-build.sh") || die "the QEMU build failed (above)"
QEMU_VERSION=$("$QEMU" --version | head -n1)
QEMU_SRC=$(cut -d' ' -f1 "$WORK/qemu-build/.nvmelab-built")
log "$QEMU_VERSION (Debian source $QEMU_SRC), ready in $(( $(date +%s) - t0 )) s"
"$QEMU" -device help 2>/dev/null | grep -q '"vfio-user-pci"' || die "$QEMU has no vfio-user-pci device"

# --- 3. kernel, modules, initramfs: busybox + nvme-cli + fio (with their libraries) + kernel-tests.sh ---
guest_kernel "$QEMU_KERNEL_META"
guest_modules "nvme"
IRD="$WORK/kernel-initramfs"
guest_initramfs_base "$IRD"
cp "$HERE/kernel-tests.sh" "$IRD/etc/nvmelab/guest-tests.sh"
guest_copy_program "$IRD" "$(command -v nvme)"
guest_copy_program "$IRD" "$(command -v fio)"
printf 'CTRLS="%s"\nLBAS="%s"\nNSZES="%s"\nMDTSES="%s"\nFIO_MIB=%s\n' "${CTRLS[*]}" "${LBAS[*]}" "${NSZES[*]}" \
    "${MDTSES[*]}" "$FIO_MIB" > "$IRD/etc/nvmelab/config"
INITRD="$WORK/kernel-initramfs.cpio.gz"
guest_initramfs_pack "$IRD" "$INITRD"
log "initramfs $(du -h "$INITRD" | cut -f1): modules ${MODORDER[*]}, nvme-cli, fio"
QEMU_ACCEL=${NVMELAB_QEMU_ACCEL:-tcg}   # the contract of this leg: TCG (a nested KVM may hang); kvm|auto allowed
ACCEL=$(guest_accel "$QEMU" "$INITRD")

# --- 4. the server (or, with --reference, QEMU's own NVMe controller), then the guest ---
RUN="$WORK/runs/kernel-$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RUN"
: > "$RUN/serve.out"; : > "$RUN/serve.err"
SERVE_PID=""
cleanup() {
    [ -n "$SERVE_PID" ] || return 0
    if kill -0 "$SERVE_PID" 2>/dev/null; then
        kill -TERM "$SERVE_PID" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$SERVE_PID" 2>/dev/null || true
    fi
    wait "$SERVE_PID" 2>/dev/null || true
    SERVE_PID=""
}
trap cleanup EXIT
if [ "$REFERENCE" = 1 ]; then
    DEVICE=()
    for ((i = 0; i < NDEV; i++)); do   # QEMU's mdts counts 4 KiB pages as a power of two (0: none)
        mdts=0; while [ "${MDTSES[i]}" != 0 ] && [ $(( 4096 << mdts )) -lt "${MDTSES[i]}" ]; do mdts=$((mdts + 1)); done
        truncate -s "${NSZES[i]}" "$RUN/reference$i.img"
        DEVICE+=(-drive "file=$RUN/reference$i.img,if=none,id=d$i,format=raw"
            -device "nvme,serial=nvmelab-reference$i,id=n$i,addr=${CTRLS[i]:8:2}.0,mdts=$mdts"
            -device "nvme-ns,drive=d$i,bus=n$i,nsid=1,logical_block_size=${LBAS[i]},physical_block_size=${LBAS[i]}")
    done
    URI="QEMU's nvme device (--reference) shaped like $URI"
else
    SOCK_DIR="$RUN/vfu"
    "$SERVE" --dir "$SOCK_DIR" "$URI" > "$RUN/serve.out" 2> "$RUN/serve.err" &
    SERVE_PID=$!
    for _ in $(seq 100); do
        grep -qx ready "$RUN/serve.out" 2>/dev/null && break
        kill -0 "$SERVE_PID" 2>/dev/null || die "nvmelab-serve exited: $(cat "$RUN/serve.err")"
        sleep 0.1
    done
    grep -qx ready "$RUN/serve.out" || die "nvmelab-serve did not say ready within 10 s"
    DEVICE=()
    for ((i = 0; i < NDEV; i++)); do
        sock="$SOCK_DIR/ctrl$i/cntrl"
        [ -S "$sock" ] || die "no socket $sock"
        DEVICE+=(-device "{\"driver\":\"vfio-user-pci\",\"socket\":{\"path\":\"$sock\",\"type\":\"unix\"},\"addr\":\"${CTRLS[i]:8:2}.0\"}")
    done
fi

APPEND="console=ttyS0 panic=-1 loglevel=4 nvmelab.leg=kernel"
QEMU_ARGS=(-accel "$ACCEL" -machine q35,memory-backend=mem -cpu max -smp "$SMP" -m "$MEM"
    -object "memory-backend-memfd,id=mem,size=$MEM,share=on"
    "${DEVICE[@]}"
    -nodefaults -display none -no-reboot -serial stdio -monitor none
    -L /usr/share/seabios -L /usr/share/qemu   # Debian's firmware: a QEMU run from its build folder looks there only when told
    -kernel "$VMLINUZ" -initrd "$INITRD" -append "$APPEND")
# NVMELAB_KERNEL_TRACE='vfio_user_*' (QEMU trace events) -> RUN/trace.log, for debugging the device side
[ -z "${NVMELAB_KERNEL_TRACE:-}" ] || QEMU_ARGS+=(-trace "$NVMELAB_KERNEL_TRACE" -D "$RUN/trace.log")
log "booting ($ACCEL, $SMP vCPU, $MEM shared memfd); console -> $RUN/console.log"
t0=$(date +%s)
set +e
timeout --foreground "$TIMEOUT_S" "$QEMU" "${QEMU_ARGS[@]}" < /dev/null 2> "$RUN/qemu.stderr" | \
    tee "$RUN/console.log" | grep --line-buffered -E '^(NVMELAB|\[guest\])'
st=("${PIPESTATUS[@]}")
set -e
rc=${st[0]}
secs=$(( $(date +%s) - t0 ))
cleanup
trap - EXIT

# --- 5. verdict and the log ---
tr -d '\r' < "$RUN/console.log" > "$RUN/console.txt"
fails=()
timed_out=""; [ "$rc" != 124 ] || timed_out=" (timeout after ${TIMEOUT_S}s)"
[ "$rc" = 0 ] || fails+=("qemu exited with status $rc$timed_out")
# QEMU's complaints about the device (error replies to its vfio-user requests, failed region or IRQ set-up) fail
# the leg even when the guest copes; its warnings do not
qerr=$(grep -i 'error' "$RUN/qemu.stderr" | grep -v 'warning:' | head -n1 || true)
[ -z "$qerr" ] || fails+=("qemu: $qerr ($(grep -i 'error' "$RUN/qemu.stderr" | grep -vc 'warning:' || true) such lines)")
summary=$(grep -E '^NVMELAB-LEG kernel ' "$RUN/console.txt" | tail -n1 || true)
if [ -z "$summary" ]; then
    fails+=("the guest did not finish (no NVMELAB-LEG line)")
elif ! grep -q ' PASS' <<<"$summary"; then
    fails+=("guest: ${summary#NVMELAB-LEG }")
fi
while IFS= read -r l; do fails+=("  $l"); done < <(grep -E '^NVMELAB-TEST .* FAIL' "$RUN/console.txt" || true)
verdict=PASS; [ ${#fails[@]} = 0 ] || verdict=FAIL
[ "$REFERENCE" = 0 ] || [ "$LOG_SET" = 1 ] || LOGFILE="$RUN/kernel-reference.log"   # never the committed log
mkdir -p "$(dirname "$LOGFILE")"
{
    if [ "$REFERENCE" = 1 ]; then
        echo "# nvmelab make test-kernel --reference: the Linux nvme driver on QEMU's own NVMe controller (env/qemu/kernel.sh)"
    else
        echo "# nvmelab make test-kernel: the Linux nvme driver on our controllers (env/qemu/kernel.sh)"
    fi
    detail=${summary#NVMELAB-LEG kernel }; detail=${detail#PASS }; detail=${detail#FAIL }
    echo "# verdict:      $verdict${detail:+ $detail}"
    echo "# date:         $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# nvmelab:      $NVMELAB_COMMIT ($([ "$REFERENCE" = 1 ] && echo 'no server: --reference' || echo "$SERVE_FROM"))"
    echo "# QEMU:         $QEMU_VERSION, built from Debian's source package qemu $QEMU_SRC (env/qemu/qemu-build.sh)"
    echo "# guest kernel: Debian $KVER ($QEMU_KERNEL_META), modules ${MODORDER[*]}"
    echo "# guest tools:  $(nvme version | head -n1), $(fio --version) (the host's, Debian $(cat /etc/debian_version))"
    echo "# controller:   $URI$( [ "$REFERENCE" = 1 ] || echo ', served by nvmelab-serve --dir DIR URI')"
    echo "# accelerator:  $ACCEL, $SMP vCPU, $MEM; guest run $secs s, QEMU exit $rc"
    echo "# QEMU args:    ${QEMU_ARGS[*]}" | sed "s|$RUN|RUN|g; s|$ROOT/||g"
    for f in "${fails[@]}"; do echo "# FAIL:         $f"; done
    echo "# --- guest console ---"
    cat "$RUN/console.txt"
    echo "# --- QEMU stderr ---"
    cat "$RUN/qemu.stderr"
    echo "# --- nvmelab-serve stdout, stderr ---"
    cat "$RUN/serve.out" "$RUN/serve.err"
} | sed "s|$RUN|RUN|g" > "$LOGFILE.tmp"
mv "$LOGFILE.tmp" "$LOGFILE"

echo
echo "== nvmelab test-kernel: $verdict ($QEMU_VERSION, kernel $KVER, $ACCEL, ${secs}s) =="
grep -E '^NVMELAB-TEST ' "$RUN/console.txt" | sed 's/^NVMELAB-TEST /  /' || true
for f in "${fails[@]}"; do echo "FAIL: $f"; done
echo "log: ${LOGFILE#"$ROOT"/}; run folder: $RUN"
[ "$verdict" = PASS ]
