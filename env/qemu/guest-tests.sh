#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# nvmelab guest: one leg of `make test-qemu` (run by /init; busybox sh).
#   uio  : IOMMU off, uio_pci_generic, hugepages + pagemap
#   vfio : IOMMU on, vfio-pci, IOVA
# Controllers (config.sh): A and B are driven by the user-space driver; C is the "boot device" (named by
# root= on the kernel command line); D gets an ext2 file system mounted for the refusal tests.
# Every check prints "NVMELAB-TEST <name> PASS|FAIL <detail>"; the last line is
# "NVMELAB-LEG <leg> PASS|FAIL ...", which run.sh reads.
leg=$1
. /etc/nvmelab/config
LOG=/tmp/leg.log
OUT=/tmp/out
G=/bin/nvmelab-guest
: > "$LOG"
case "$leg" in
    probe) echo "NVMELAB-LEG probe PASS (the accelerator runs the guest)"; exit 0 ;;
    uio) DRV=uio_pci_generic; OTHER=vfio-pci ;;
    vfio) DRV=vfio-pci; OTHER=uio_pci_generic ;;
    *) echo "NVMELAB-LEG $leg FAIL (unknown leg)"; exit 1 ;;
esac
URI="pci://$CTRL_A,$CTRL_B?driver=$DRV"
if [ "$SHORT" = 1 ]; then ROUNDS=2; PERF_S=1; else ROUNDS=8; PERF_S=3; fi
CMD_TIMEOUT_S=150   # one hung command fails its check instead of the whole leg

say() { echo "$*" | tee -a "$LOG"; }
record() { # record NAME OK DETAIL
    if [ "$2" = 1 ]; then say "NVMELAB-TEST $1 PASS $3"; else say "NVMELAB-TEST $1 FAIL $3"; fi
}
show() { sed 's/^/  | /' "$OUT"; }
# expect_ok NAME CMD...: the command must succeed
expect_ok() {
    name=$1; shift
    timeout -s KILL $CMD_TIMEOUT_S "$@" > "$OUT" 2>&1; rc=$?
    show
    if [ $rc = 0 ]; then record "$name" 1 "$(tail -n1 "$OUT")"; else record "$name" 0 "exit $rc: $(tail -n1 "$OUT")"; fi
}
# expect_refused NAME REGEX CMD...: the command must fail and say why (REGEX, extended, case-insensitive)
expect_refused() {
    name=$1; re=$2; shift 2
    timeout -s KILL $CMD_TIMEOUT_S "$@" > "$OUT" 2>&1; rc=$?
    show
    if [ $rc != 0 ] && grep -qiE "$re" "$OUT"; then
        record "$name" 1 "refused: $(grep -iE "$re" "$OUT" | head -n1)"
    else
        record "$name" 0 "exit $rc, wanted a refusal matching /$re/: $(tail -n1 "$OUT")"
    fi
}
# run_checks NAME CMD...: a command that prints its own NVMELAB-TEST lines
run_checks() {
    name=$1; shift
    t0=$(date +%s)
    timeout -s KILL $CMD_TIMEOUT_S "$@" > "$OUT" 2>&1; rc=$?
    grep -v '^NVMELAB-' "$OUT" | sed 's/^/  | /'
    grep '^NVMELAB-' "$OUT" | tee -a "$LOG"
    if [ $rc != 0 ] && ! grep -q '^NVMELAB-TEST .* FAIL' "$OUT"; then
        record "$name" 0 "exit $rc without a failed check: $(tail -n1 "$OUT")"
    fi
    say "[guest] $name took $(( $(date +%s) - t0 )) s"
}
driver_of() { d=$(readlink "/sys/bus/pci/devices/$1/driver" 2>/dev/null); echo "${d##*/}"; }
# first namespace block device of a controller bound to the kernel nvme driver (e.g. nvme3n1)
blk_of() {
    for c in /sys/bus/pci/devices/$1/nvme/nvme*; do
        for n in "$c"/nvme*; do
            b=${n##*/}
            case "$b" in
                nvme*c*n*) echo "$b" | sed 's/c[0-9]*n/n/'; return ;;
                nvme*n*) echo "$b"; return ;;
            esac
        done
    done
}
wait_for() { # wait_for SECONDS CMD...: poll until CMD succeeds
    n=$(( $1 * 10 )); shift
    while [ $n -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; usleep 100000; n=$((n - 1)); done
    return 1
}
has_blk() { [ -n "$(blk_of "$1")" ] && [ -b "/dev/$(blk_of "$1")" ]; }

say "[guest] leg $leg: driver $DRV, controllers A=$CTRL_A B=$CTRL_B C=$CTRL_C D=$CTRL_D"
T0=$(date +%s)

# --- 0. the machine is what the leg says ---
if [ "$leg" = vfio ]; then
    ngroups=$(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)
    record "$leg.iommu-on" $([ "$ngroups" -gt 0 ] && echo 1 || echo 0) "$ngroups IOMMU groups; $(dmesg | grep -m1 -iE 'DMAR: (IOMMU enabled|Intel\(R\) Virtualization)' )"
else
    ngroups=$(ls /sys/kernel/iommu_groups 2>/dev/null | wc -l)
    record "$leg.iommu-off" $([ "$ngroups" = 0 ] && echo 1 || echo 0) "$ngroups IOMMU groups"
fi
# the kernel nvme driver probes the four controllers asynchronously
ok=1
for a in $CTRL_A $CTRL_B $CTRL_C $CTRL_D; do wait_for 30 has_blk "$a" || ok=0; done
record "$leg.kernel-nvme-probe" $ok "A=$(blk_of $CTRL_A) B=$(blk_of $CTRL_B) C=$(blk_of $CTRL_C) D=$(blk_of $CTRL_D)"

# --- 1. device management (the C twin of `nvmelab devices|bind|unbind|hugepages`) ---
expect_ok "$leg.devices" $G devices
n=$(grep -c ' driver=nvme ' "$OUT")
record "$leg.devices-lists-4" $([ "$n" = 4 ] && echo 1 || echo 0) "$n NVMe functions on the nvme driver"
expect_ok "$leg.hugepages" $G hugepages "$HUGEPAGES"
grep -q "^hugepages: $HUGEPAGES hugepages" "$OUT"; record "$leg.hugepages-count" $([ $? = 0 ] && echo 1 || echo 0) "$(cat "$OUT")"
expect_refused "$leg.hugepages-bad-size" "size must be" $G hugepages 4 --size 3M

# refusals: not named, not NVMe, absent, boot device, mounted, open by a process
expect_refused "$leg.bind-needs-address" "usage" $G bind --driver $DRV
expect_refused "$leg.bind-bad-address" "not a PCI address" $G bind 00:04 --driver $DRV
expect_refused "$leg.bind-absent" "no PCI function" $G bind 0000:00:1e.0 --driver $DRV
expect_refused "$leg.bind-not-nvme" "not an NVMe controller" $G bind 0000:00:1f.0 --driver $DRV
expect_refused "$leg.bind-bad-driver" "driver must be" $G bind $CTRL_A --driver nvme
expect_refused "$leg.bind-boot-device" "boot device" $G bind $CTRL_C --driver $DRV
record "$leg.boot-device-untouched" $([ "$(driver_of $CTRL_C)" = nvme ] && echo 1 || echo 0) "C on $(driver_of $CTRL_C)"
DBLK=$(blk_of $CTRL_D)
mke2fs -q "/dev/$DBLK" > "$OUT" 2>&1 && mount -t ext2 "/dev/$DBLK" /mnt && echo hello > /mnt/file
record "$leg.mount-D" $(grep -q " /mnt " /proc/mounts && echo 1 || echo 0) "/dev/$DBLK on /mnt: $(head -n1 "$OUT")"
expect_refused "$leg.bind-mounted" "mounted.*/mnt" $G bind $CTRL_D --driver $DRV
expect_refused "$leg.unbind-mounted" "mounted.*/mnt" $G unbind $CTRL_D
umount /mnt
sleep 600 < "/dev/$DBLK" &
holder=$!
expect_refused "$leg.bind-open-by-process" "open by pid $holder" $G bind $CTRL_D --driver $DRV
kill $holder; wait $holder 2>/dev/null
record "$leg.mounted-untouched" $([ "$(driver_of $CTRL_D)" = nvme ] && echo 1 || echo 0) "D on $(driver_of $CTRL_D)"
if [ "$leg" = uio ]; then
    expect_refused "$leg.bind-vfio-without-iommu" "no IOMMU group" $G bind $CTRL_D --driver vfio-pci
fi
# now free: move D to the leg's driver and back to the kernel
expect_ok "$leg.bind-D" $G bind $CTRL_D --driver $DRV
record "$leg.bind-D-driver" $([ "$(driver_of $CTRL_D)" = "$DRV" ] && echo 1 || echo 0) "D on $(driver_of $CTRL_D)"
expect_ok "$leg.bind-D-again" $G bind $CTRL_D --driver $DRV
expect_ok "$leg.unbind-D" $G unbind $CTRL_D
wait_for 30 has_blk $CTRL_D
record "$leg.unbind-D-back-on-nvme" $([ "$(driver_of $CTRL_D)" = nvme ] && has_blk $CTRL_D && echo 1 || echo 0) \
    "D on $(driver_of $CTRL_D), /dev/$(blk_of $CTRL_D)"
mount -t ext2 "/dev/$(blk_of $CTRL_D)" /mnt 2>"$OUT"
record "$leg.D-filesystem-intact" $([ "$(cat /mnt/file 2>/dev/null)" = hello ] && echo 1 || echo 0) "$(cat "$OUT")"
# D stays mounted from here on: the driver-level refusal below needs it

# bind the two test controllers
expect_ok "$leg.bind-A" $G bind $CTRL_A --driver $DRV
expect_ok "$leg.bind-B" $G bind $CTRL_B --driver $DRV
ok=1; for a in $CTRL_A $CTRL_B; do [ "$(driver_of $a)" = "$DRV" ] || ok=0; done
if [ "$leg" = vfio ]; then
    for a in $CTRL_A $CTRL_B; do g=$(readlink /sys/bus/pci/devices/$a/iommu_group); [ -c "/dev/vfio/${g##*/}" ] || ok=0; done
else
    for a in $CTRL_A $CTRL_B; do ls /sys/bus/pci/devices/$a/uio/ 2>/dev/null | grep -q uio || ok=0; done
fi
record "$leg.bound" $ok "A on $(driver_of $CTRL_A), B on $(driver_of $CTRL_B)"
expect_ok "$leg.devices-after-bind" $G devices

# --- 2. the driver's own refusals (nvme_target_open on pci://) ---
expect_refused "$leg.open-not-allowed" "allow" env NVMELAB_PCI_ALLOW=$CTRL_B $G open "pci://$CTRL_A?driver=$DRV"
expect_refused "$leg.open-kernel-bound-boot" "$CTRL_C" $G open "pci://$CTRL_C?driver=$DRV"
expect_refused "$leg.open-mounted" "$CTRL_D" $G open "pci://$CTRL_D?driver=$DRV"
expect_refused "$leg.open-wrong-driver" "$CTRL_A" $G open "pci://$CTRL_A?driver=$OTHER"
expect_refused "$leg.open-not-nvme" "0000:00:1f.0" $G open "pci://0000:00:1f.0?driver=$DRV"
expect_refused "$leg.open-as-non-root" "$CTRL_A.*(permission|denied|not permitted)" \
    su -s /bin/sh nobody -c "NVMELAB_PCI_ALLOW=$CTRL_A $G open 'pci://$CTRL_A?driver=$DRV'"
expect_ok "$leg.open-allowed" env NVMELAB_PCI_ALLOW="$CTRL_A,$CTRL_B" $G open "$URI"

# --- 3. the driver on both controllers ---
run_checks "$leg.selftest" env NVMELAB_PCI_ALLOW="$CTRL_A,$CTRL_B" $G selftest "$URI" --queues 4 --rounds $ROUNDS
# the shapes QEMU was given are what identify reports
grep -q "^ctrl 0 .*mdts_bytes=$(( 4096 << CTRL_A_MDTS ))" "$OUT"; record "$leg.ctrlA-mdts" $([ $? = 0 ] && echo 1 || echo 0) "$(grep -m1 '^ctrl 0 sn' "$OUT")"
grep -q "^ctrl 1 .*mdts_bytes=$(( 4096 << CTRL_B_MDTS )).* nns=2" "$OUT"; record "$leg.ctrlB-mdts-nns" $([ $? = 0 ] && echo 1 || echo 0) "$(grep -m1 '^ctrl 1 sn' "$OUT")"
grep -q "^ctrl 0 ns 1 lba=$CTRL_A_LBA " "$OUT" && grep -q "^ctrl 1 ns 2 lba=$CTRL_B_LBA " "$OUT"
record "$leg.lba-sizes" $([ $? = 0 ] && echo 1 || echo 0) "$(grep '^ctrl [01] ns' "$OUT" | tr '\n' ' ')"
# the GPU-queue path without a GPU: queues with IEN=0 and host-memory rings driven by the CPU stand-in
# through the GPU kernel's round/CID logic; write + poisoned read-back; a missed deadline and the teardown
# that deletes the queues before freeing (src/nvme/gpuq_ctrl.c, src/tools/gpuq_guest.c)
run_checks "$leg.gpuq" env NVMELAB_PCI_ALLOW="$CTRL_A,$CTRL_B" $G gpuq "$URI" --rounds 2
run_checks "$leg.perf" env NVMELAB_PCI_ALLOW="$CTRL_A,$CTRL_B" $G perf "$URI" --seconds $PERF_S --qd 32 --queues 2 --iosize 4096

# one command the controller must reject, last: run.sh checks that QEMU's trace shows exactly this event
# (proving the trace check can fail) and nothing else
if [ "$leg" = uio ]; then
    run_checks "$leg.provoke" env NVMELAB_PCI_ALLOW="$CTRL_A" $G provoke "pci://$CTRL_A?driver=$DRV"
fi

# --- 4. hand the controllers back to the kernel ---
expect_ok "$leg.unbind-A" $G unbind $CTRL_A
expect_ok "$leg.unbind-B" $G unbind $CTRL_B
ok=1; for a in $CTRL_A $CTRL_B; do wait_for 30 has_blk $a || ok=0; done
record "$leg.back-on-nvme" $ok "A=$(blk_of $CTRL_A) B=$(blk_of $CTRL_B)"
umount /mnt

# the kernel saw nothing wrong: no IOMMU (DMAR) faults, no BUG/Oops/WARNING
bad=$(dmesg | grep -E 'DMAR: \[DMA|handling fault|BUG:|Oops|WARNING: CPU|general protection' | head -n 3)
record "$leg.kernel-log-clean" $([ -z "$bad" ] && echo 1 || echo 0) "$bad"

npass=$(grep -c '^NVMELAB-TEST .* PASS' "$LOG")
nfail=$(grep -c '^NVMELAB-TEST .* FAIL' "$LOG")
secs=$(( $(date +%s) - T0 ))
if [ "$nfail" = 0 ] && [ "$npass" -gt 0 ]; then
    echo "NVMELAB-LEG $leg PASS ($npass checks passed in $secs s)"
else
    echo "NVMELAB-LEG $leg FAIL ($nfail of $((npass + nfail)) checks failed in $secs s)"
fi
