#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# nvmelab — `make test-qemu`: prove the pci:// path against QEMU's NVMe controllers.
#
# Builds (and caches under env/qemu/work/) a guest from Debian packages only:
#   - the Debian kernel (linux-image-amd64 -> linux-image-<ver>-amd64), vmlinuz + the modules we need
#     (uio_pci_generic, vfio-pci, vfio_iommu_type1, nvme, ext4-for-ext2 ...), closed over their dependencies;
#   - busybox-static as the whole userland;
#   - the project's guest program (src/tools/nvmelab-guest.c) linked statically against the driver sources;
# then boots it once per leg:
#   uio  : IOMMU off, uio_pci_generic, hugepages + /proc/self/pagemap physical addresses
#   vfio : intel-iommu (caching-mode, interrupt remapping), vfio-pci, IOVA mappings
# with four NVMe controllers of different shapes (see config.sh) and the QEMU trace events
# pci_nvme_err_* and pci_nvme_ub_* enabled: any such event fails the leg.
#
# Usage: env/qemu/run.sh [--legs "uio vfio"] [--short] [--keep]
#   --short  only the quick subset of each leg (the CI leg)
#   --keep   keep the per-run directory (disk images, console and trace logs)
# Exit status: 0 when every leg passed, 1 when a leg failed, 2 on a setup error.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
WORK=${NVMELAB_QEMU_WORK:-$HERE/work}
# shellcheck source=config.sh
source "$HERE/config.sh"
# shellcheck source=guest-lib.sh
source "$HERE/guest-lib.sh"

SHORT=0
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        --legs) QEMU_LEGS=$2; shift 2 ;;
        --short) SHORT=1; shift ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '3,19p' "$0"; exit 0 ;;
        *) echo "run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done

log() { printf '[qemu] %s\n' "$*" >&2; }
die() { printf '[qemu] error: %s\n' "$*" >&2; exit 2; }

# --- host tools: env/prereqs.sh (the one place for system prerequisites) installs the Debian packages
# that provide them when missing (root), or stops naming them ---
bash "$ROOT/env/prereqs.sh" --install qemu || die "host tools missing (above)"

mkdir -p "$WORK/debs"
exec 9>"$WORK/.lock"
flock -n 9 || die "another test-qemu run is using $WORK"

# --- 1. kernel: the Debian image package, downloaded once (guest-lib.sh) ---
guest_kernel "$QEMU_KERNEL_META"

# --- 2. modules: the ones we load, closed over `modinfo -F depends`, in load order ---
GUEST_MODULES="uio_pci_generic vfio_pci vfio_iommu_type1 nvme ext4 crc32c_generic"
guest_modules "$GUEST_MODULES"

# --- 3. the guest program, static ---
# the guest program's sources: the ones src/tools/CMakeLists.txt names for nvmelab-guest (one list, not a glob:
# src/tools also holds other programs, each with its own main)
read -r -a GUEST_NAMES < <(sed -n 's/^add_executable(nvmelab-guest \(.*\))$/\1/p' "$ROOT/src/tools/CMakeLists.txt")
[ "${#GUEST_NAMES[@]}" -gt 0 ] || die "src/tools/CMakeLists.txt names no sources for nvmelab-guest"
GUEST_SRC=()
for f in "${GUEST_NAMES[@]}"; do GUEST_SRC+=("$ROOT/src/tools/$f"); done
DRIVER_SRC=()
for f in "$ROOT"/src/nvme/*.c "$ROOT"/src/nvme/emu/*.c; do
    [ -e "$f" ] || continue
    DRIVER_SRC+=("$f")
done
[ -e "${GUEST_SRC[0]}" ] || die "no guest program under src/tools/"
BIN="$WORK/nvmelab-guest"
if [ -n "${NVMELAB_QEMU_GUEST_BIN:-}" ]; then   # a prebuilt static guest program (debugging)
    log "using the prebuilt guest program $NVMELAB_QEMU_GUEST_BIN"
    cp "$NVMELAB_QEMU_GUEST_BIN" "$BIN.tmp"
else
    log "building the static guest program"
    mkdir -p "$WORK/gen/nvme/emu"
    cmake -DIN="$ROOT/data/results/model/pm1753-profile.csv" -DOUT="$WORK/gen/nvme/emu/calibration.h" \
        -P "$ROOT/src/nvme/emu/calibration.cmake" || die "generating calibration.h failed"
    cc -I"$WORK/gen" -std=c11 -O2 -g0 -static -D_GNU_SOURCE -Wall -Wextra -Werror=implicit-function-declaration \
        -I"$ROOT/src" -o "$BIN.tmp" "${GUEST_SRC[@]}" "${DRIVER_SRC[@]}" -lpthread -lm \
        || die "building the guest program failed"
fi
mv "$BIN.tmp" "$BIN"

# --- 4. initramfs (newc + gzip): busybox, modules, init, the guest program and its test script ---
IRD="$WORK/initramfs"
guest_initramfs_base "$IRD"
cp "$HERE/guest-tests.sh" "$IRD/etc/nvmelab/guest-tests.sh"
cp "$BIN" "$IRD/bin/nvmelab-guest"
{
    echo "CTRL_A=0000:00:${CTRL_A_SLOT}.0"; echo "CTRL_B=0000:00:${CTRL_B_SLOT}.0"
    echo "CTRL_C=0000:00:${CTRL_C_SLOT}.0"; echo "CTRL_D=0000:00:${CTRL_D_SLOT}.0"
    echo "CTRL_A_LBA=$CTRL_A_LBA"; echo "CTRL_B_LBA=$CTRL_B_LBA"
    echo "CTRL_A_MDTS=$CTRL_A_MDTS"; echo "CTRL_B_MDTS=$CTRL_B_MDTS"
    echo "HUGEPAGES=$QEMU_HUGEPAGES"; echo "SHORT=$SHORT"
} > "$IRD/etc/nvmelab/config"
INITRD="$WORK/initramfs.cpio.gz"
guest_initramfs_pack "$IRD" "$INITRD"
log "initramfs $(du -h "$INITRD" | cut -f1): ${#MODORDER[@]} modules (${MODORDER[*]})"

# --- 5. accelerator: KVM only when it really runs this guest (a nested /dev/kvm can open and still hang) ---
ACCEL=$(guest_accel qemu-system-x86_64 "$INITRD")
log "accelerator: $ACCEL"

# --- 6. one guest boot per leg ---
nvme_args() { # nvme_args DIR: the four controllers
    local d=$1
    truncate -s "${CTRL_A_MIB}M" "$d/a.img"; truncate -s "${CTRL_B_MIB}M" "$d/b1.img"
    truncate -s "${CTRL_B_NS2_MIB}M" "$d/b2.img"; truncate -s "${CTRL_C_MIB}M" "$d/c.img"
    truncate -s "${CTRL_D_MIB}M" "$d/d.img"
    echo "-drive file=$d/a.img,if=none,id=da,format=raw"
    echo "-device nvme,serial=nvmelab-A,id=nA,addr=${CTRL_A_SLOT}.0,mdts=$CTRL_A_MDTS,max_ioqpairs=$CTRL_MAX_IOQPAIRS"
    echo "-device nvme-ns,drive=da,bus=nA,nsid=1,logical_block_size=$CTRL_A_LBA,physical_block_size=$CTRL_A_LBA"
    echo "-drive file=$d/b1.img,if=none,id=db1,format=raw"
    echo "-drive file=$d/b2.img,if=none,id=db2,format=raw"
    echo "-device nvme,serial=nvmelab-B,id=nB,addr=${CTRL_B_SLOT}.0,mdts=$CTRL_B_MDTS,max_ioqpairs=$CTRL_MAX_IOQPAIRS"
    echo "-device nvme-ns,drive=db1,bus=nB,nsid=1,logical_block_size=$CTRL_B_LBA,physical_block_size=$CTRL_B_LBA"
    echo "-device nvme-ns,drive=db2,bus=nB,nsid=2,logical_block_size=$CTRL_B_LBA,physical_block_size=$CTRL_B_LBA"
    echo "-drive file=$d/c.img,if=none,id=dc,format=raw"
    echo "-device nvme,serial=nvmelab-C,id=nC,addr=${CTRL_C_SLOT}.0,mdts=$CTRL_C_MDTS"
    echo "-device nvme-ns,drive=dc,bus=nC,nsid=1,logical_block_size=$CTRL_C_LBA"
    echo "-drive file=$d/d.img,if=none,id=dd,format=raw"
    echo "-device nvme,serial=nvmelab-D,id=nD,addr=${CTRL_D_SLOT}.0,mdts=$CTRL_D_MDTS"
    echo "-device nvme-ns,drive=dd,bus=nD,nsid=1,logical_block_size=$CTRL_D_LBA"
}

RUNS="$WORK/runs/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$RUNS"
declare -A VERDICT=() SECONDS_TAKEN=() DETAIL=()
overall=0
for leg in $QEMU_LEGS; do
    case "$leg" in uio|vfio) ;; *) die "unknown leg '$leg' (uio, vfio)" ;; esac
    d="$RUNS/$leg"; mkdir -p "$d"
    machine="q35"; iommu=(); append="console=ttyS0 panic=-1 loglevel=4 nvmelab.leg=$leg root=/dev/nvme2n1"
    if [ "$leg" = vfio ]; then
        machine="q35,kernel-irqchip=split"
        iommu=(-device intel-iommu,caching-mode=on,intremap=on)
        append="$append intel_iommu=on"
    else
        append="$append intel_iommu=off"
    fi
    [ "$SHORT" = 1 ] && append="$append nvmelab.short=1"
    # shellcheck disable=SC2207
    nvme=($(nvme_args "$d"))
    log "leg $leg: booting ($ACCEL, ${QEMU_SMP} vCPU, $QEMU_MEM); console -> $d/console.log"
    t0=$(date +%s.%N)
    set +e
    timeout --foreground "$QEMU_TIMEOUT_S" qemu-system-x86_64 \
        -accel "$ACCEL" -machine "$machine" -cpu max -smp "$QEMU_SMP" -m "$QEMU_MEM" \
        -nodefaults -display none -no-reboot -serial stdio -monitor none \
        "${iommu[@]}" "${nvme[@]}" \
        -kernel "$VMLINUZ" -initrd "$INITRD" -append "$append" \
        -trace 'pci_nvme_err_*' -trace 'pci_nvme_ub_*' -D "$d/trace.log" \
        < /dev/null 2>"$d/qemu.stderr" | tee "$d/console.log" | grep --line-buffered -E '^(NVMELAB|\[guest\])'
    st=("${PIPESTATUS[@]}")
    set -e
    rc=${st[0]}
    t1=$(date +%s.%N)
    SECONDS_TAKEN[$leg]=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
    tr -d '\r' < "$d/console.log" > "$d/console.txt"
    fails=()
    [ "$rc" = 0 ] || fails+=("qemu exited with status $rc$( [ "$rc" = 124 ] && echo " (timeout after ${QEMU_TIMEOUT_S}s)")")
    [ -s "$d/qemu.stderr" ] && grep -qi 'error' "$d/qemu.stderr" && fails+=("qemu: $(grep -i error "$d/qemu.stderr" | head -n1)")
    # QEMU's view of spec violations: none allowed, except the ones the guest provoked on purpose, which
    # must be there exactly (otherwise the trace is not being read and this check could never fail)
    ntrace=$(grep -cE 'pci_nvme_(err|ub)_' "$d/trace.log" 2>/dev/null || true)
    cp "$d/trace.log" "$d/trace.unexpected" 2>/dev/null || : > "$d/trace.unexpected"
    while read -r ev want; do
        got=$(grep -cw "$ev" "$d/trace.log" 2>/dev/null || true)
        [ "${got:-0}" = "$want" ] || \
            fails+=("the guest provoked $want x $ev but QEMU's trace shows ${got:-0}: the trace check is blind")
        ntrace=$(( ${ntrace:-0} - ${got:-0} ))
        grep -vw "$ev" "$d/trace.unexpected" > "$d/trace.tmp" || true
        mv "$d/trace.tmp" "$d/trace.unexpected"
    done < <(tr -d '\r' < "$d/console.log" | awk '/^NVMELAB-PROVOKED /{n[$2] += $3} END {for (e in n) print e, n[e]}')
    [ "${ntrace:-0}" = 0 ] || fails+=("$ntrace QEMU pci_nvme_err_*/ub_* trace events (first: $(grep -m1 -E 'pci_nvme_(err|ub)_' "$d/trace.unexpected"))")
    summary=$(grep -E '^NVMELAB-LEG ' "$d/console.txt" | tail -n1 || true)
    if [ -z "$summary" ]; then
        fails+=("the guest did not finish (no NVMELAB-LEG line; see $d/console.txt)")
    elif ! grep -q ' PASS' <<<"$summary"; then
        fails+=("guest: ${summary#NVMELAB-LEG }")
        while IFS= read -r l; do fails+=("  $l"); done < <(grep -E '^NVMELAB-TEST .* FAIL' "$d/console.txt" || true)
    fi
    if [ ${#fails[@]} = 0 ]; then
        VERDICT[$leg]=PASS; DETAIL[$leg]="${summary#NVMELAB-LEG }"
    else
        VERDICT[$leg]=FAIL; overall=1; DETAIL[$leg]=$(printf '%s\n' "${fails[@]}")
    fi
done

{
echo
echo "== nvmelab test-qemu: kernel $KVER, accel $ACCEL, $QEMU_SMP vCPU, $QEMU_MEM$( [ "$SHORT" = 1 ] && echo ', short') =="
for leg in $QEMU_LEGS; do
    printf '%-5s %-4s %6ss  %s\n' "$leg" "${VERDICT[$leg]}" "${SECONDS_TAKEN[$leg]}" "$(head -n1 <<<"${DETAIL[$leg]}")"
    tail -n +2 <<<"${DETAIL[$leg]}" | sed 's/^/            /'
done
echo "logs: $RUNS"
for leg in $QEMU_LEGS; do   # guest figures: they show the path works, not how fast a drive is
    grep '^NVMELAB-PERF' "$RUNS/$leg/console.txt" 2>/dev/null | sed "s/^NVMELAB-PERF /perf $leg ($ACCEL guest): /" || true
done
} | tee "$RUNS/summary.txt"
if [ "$KEEP" = 0 ] && [ "$overall" = 0 ]; then
    rm -f "$RUNS"/*/*.img
fi
exit $overall
