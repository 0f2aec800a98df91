#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# nvmelab guest: the kernel leg of `make test-kernel` (env/qemu/kernel.sh), run by /init (busybox sh) as
# /etc/nvmelab/guest-tests.sh. Our NVMe controllers: the emu:// controllers nvmelab-serve serves on the host,
# each reached through a QEMU vfio-user-pci device at a PCI address of /etc/nvmelab/config's CTRLS; the Linux
# nvme driver binds them. Per controller i, in turn, checks "NVMELAB-TEST kernel.ctrl<i>.<name> PASS|FAIL
# <detail>": the driver binds (dmesg), its interrupts
# arrive, nvme-cli's list / id-ctrl / id-ns / smart-log, a write-read-compare pass through the block layer
# and one through NVMe passthrough, fio with crc32c verify, controller reset, namespace rescan, PCI remove
# and rescan (each followed by reading the pattern back); then a clean kernel log (kernel.kernel-log-clean),
# the whole dmesg, and "NVMELAB-LEG kernel PASS|FAIL ...", which kernel.sh reads.
leg=$1
case "$leg" in
    probe) echo "NVMELAB-LEG probe PASS (the accelerator runs the guest)"; exit 0 ;;
    kernel) ;;
    *) echo "NVMELAB-LEG $leg FAIL (unknown leg)"; exit 1 ;;
esac
. /etc/nvmelab/config   # CTRLS (PCI addresses), LBAS, NSZES, MDTSES (bytes, 0 = none), a word per controller; FIO_MIB
export PATH=/bin:/sbin:/usr/bin:/usr/sbin   # nvme-cli and fio sit where the host has them
LOG=/tmp/leg.log
OUT=/tmp/out
CMD_TIMEOUT_S=120   # one hung command fails its check instead of the whole leg
WAIT_S=90           # for the driver to (re)bind: Linux's admin timeout is 60 s
PAT_OFF_BLOCKS=2048 # where the patterns go: 1 MiB in at 512 B blocks, 8 MiB at 4 KiB
PAT_KIB=256
DIO=4096            # O_DIRECT transfers: a multiple of either LBA size (busybox dd quietly drops O_DIRECT otherwise)
: > "$LOG"

say() { echo "$*" | tee -a "$LOG"; }
P=kernel   # the check names' prefix: kernel.ctrl<i> while controller i is checked
record() { # record NAME OK DETAIL
    if [ "$2" = 1 ]; then say "NVMELAB-TEST $P.$1 PASS $3"; else say "NVMELAB-TEST $P.$1 FAIL $3"; fi
}
show() { sed 's/^/  | /' "$OUT"; }
run() { # run CMD...: into $OUT, shown, status returned
    echo "  \$ $*"
    timeout -s KILL $CMD_TIMEOUT_S "$@" > "$OUT" 2>&1; rc=$?
    show
    return $rc
}
wait_for() { # wait_for SECONDS CMD...: poll until CMD succeeds
    n=$(( $1 * 10 )); shift
    while [ $n -gt 0 ]; do "$@" >/dev/null 2>&1 && return 0; usleep 100000; n=$((n - 1)); done
    return 1
}
word() { # word N LIST...: the Nth (from 0) word of LIST
    n=$1; shift; shift "$n"; echo "$1"
}
ctrl_of() { # the nvme controller (nvme0) on the PCI function $CTRL, if the driver has it
    for c in /sys/bus/pci/devices/$CTRL/nvme/nvme*; do [ -e "$c" ] && { echo "${c##*/}"; return; }; done
}
blk_of() { # its first namespace's block device (nvme0n1)
    c=$(ctrl_of)
    [ -n "$c" ] || return
    for n in /sys/class/nvme/$c/${c}n* /sys/class/nvme/$c/nvme*c*n*; do
        [ -e "$n" ] || continue
        echo "${n##*/}" | sed 's/c[0-9]*n/n/'; return
    done
}
smart_field() { # smart_field NAME: a number of the smart-log in $OUT (thousands separators dropped)
    sed -n "s/^$1[[:space:]]*:[[:space:]]*\([0-9,]*\).*/\1/p" "$OUT" | tr -d ,
}
has_blk() { b=$(blk_of); [ -n "$b" ] && [ -b "/dev/$b" ]; }
has_all() { # every controller of CTRLS has its block device (the driver probes them asynchronously)
    for CTRL in $CTRLS; do has_blk || return 1; done
}
live() { c=$(ctrl_of); [ -n "$c" ] && [ "$(cat /sys/class/nvme/$c/state 2>/dev/null)" = live ]; }
gone() { [ ! -e "/sys/bus/pci/devices/$CTRL" ]; }
read_back() { # read_back NAME: the pattern written by the block-layer pass reads back unchanged
    b=$(blk_of)
    if [ -n "$b" ] && run dd if="/dev/$b" of=/tmp/back bs=$DIO skip=$(( PAT_OFF_BLOCKS * LBA / DIO )) \
        count=$(( PAT_KIB * 1024 / DIO )) iflag=direct && cmp /tmp/pat /tmp/back > "$OUT" 2>&1; then
        record "$1" 1 "/dev/$b: $PAT_KIB KiB at block $PAT_OFF_BLOCKS read back equal"
    else
        record "$1" 0 "/dev/$b: the pattern did not read back: $(tail -n1 "$OUT")"
    fi
}

check_controller() { # check_controller I: every check on controller I (CTRL, LBA, NSZE set)
    # --- 1. the Linux nvme driver binds our controller ---
    wait_for $WAIT_S has_blk
    ok=$?
    C=$(ctrl_of); B=$(blk_of)
    record bind $([ $ok = 0 ] && echo 1 || echo 0) "$C on $CTRL ($(readlink /sys/bus/pci/devices/$CTRL/driver | sed 's,.*/,driver ,')), /dev/$B; $(dmesg | grep -E "nvme $C: [0-9]+/[0-9]+/[0-9]+ default/read/poll queues" | tail -n1 | sed 's/^\[[^]]*\] //')"
    if [ $ok != 0 ]; then
        say "[guest] $CTRL: the nvme driver did not bind it within $WAIT_S s; its other checks are skipped"
        return 1
    fi
    # MSI-X (or INTx) interrupts arrived: the admin queue's vector counted some
    irqs=$(grep -E "${C}q[0-9]+" /proc/interrupts | awk '{n = 0; for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) n += $i; else break; print $NF "=" n}' | tr '\n' ' ')
    q0=$(echo "$irqs" | tr ' ' '\n' | sed -n "s/^${C}q0=//p")
    record interrupts $([ "${q0:-0}" -gt 0 ] && echo 1 || echo 0) "$irqs($(grep -m1 "${C}q0" /proc/interrupts | awk '{for (i = 2; i <= NF; i++) if ($i !~ /^[0-9]+$/) {print $i; exit}}'))"

    # --- 2. nvme-cli ---
    run nvme list; rc=$?
    record nvme-list $([ $rc = 0 ] && grep -q "/dev/$B" "$OUT" && echo 1 || echo 0) "$(grep "/dev/$B" "$OUT" | tr -s ' ')"
    run nvme id-ctrl "/dev/$C"; rc=$?
    record id-ctrl $([ $rc = 0 ] && grep -q '^mn ' "$OUT" && echo 1 || echo 0) \
        "$(grep -E '^(vid|sn|mn|fr|mdts|nn|ver) ' "$OUT" | tr -s ' ' | tr '\n' ';')"
    run nvme id-ns "/dev/$B"; rc=$?
    nsze=$(sed -n 's/^nsze *: *//p' "$OUT")
    inuse=$(grep 'in use' "$OUT" | sed -n 's/.*lbads:\([0-9]*\).*/\1/p')
    record id-ns $([ $rc = 0 ] && [ $((nsze)) = $((NSZE / LBA)) ] && [ $((1 << ${inuse:-0})) = "$LBA" ] && echo 1 || echo 0) \
        "nsze $nsze (want $((NSZE / LBA)) blocks), in-use LBA format lbads:$inuse (want $LBA B)"
    run nvme smart-log "/dev/$C"; rc=$?
    writes0=$(smart_field host_write_commands)
    record smart-log $([ $rc = 0 ] && grep -q '^critical_warning' "$OUT" && echo 1 || echo 0) \
        "$(grep -E '^(critical_warning|temperature|available_spare|data_units_read|data_units_written|host_read_commands|host_write_commands)[[:space:]]' "$OUT" | tr -s ' \t' ' ' | tr '\n' ';')"

    # --- 3. write a pattern, read it back, compare: through the block layer (O_DIRECT) and as NVMe commands ---
    dd if=/dev/urandom of=/tmp/pat bs=1024 count=$PAT_KIB 2>/dev/null
    if run dd if=/tmp/pat of="/dev/$B" bs=$DIO seek=$(( PAT_OFF_BLOCKS * LBA / DIO )) oflag=direct conv=fsync; then
        read_back rw-verify-block
    else
        record rw-verify-block 0 "the write failed: $(tail -n1 "$OUT")"
    fi
    # nvme-cli passthrough (one Write and one Read command of our making, 64 KiB or MDTS if less) after the
    # block-layer pattern; then the block layer reads what the passthrough wrote
    PT=65536; [ "$MDTS" = 0 ] || [ "$MDTS" -ge $PT ] || PT=$MDTS
    NLB=$(( PT / LBA )); SLBA=$(( PAT_OFF_BLOCKS * 2 ))
    dd if=/dev/urandom of=/tmp/pat2 bs=1024 count=$((PT / 1024)) 2>/dev/null
    rm -f /tmp/back2 /tmp/back3   # nvme read writes into its file without truncating it
    ok=0
    if run nvme write "/dev/$B" --start-block=$SLBA --block-count=$((NLB - 1)) --data-size=$PT --data=/tmp/pat2 &&
       run nvme read "/dev/$B" --start-block=$SLBA --block-count=$((NLB - 1)) --data-size=$PT --data=/tmp/back2 &&
       cmp /tmp/pat2 /tmp/back2 > "$OUT" 2>&1 &&
       run dd if="/dev/$B" of=/tmp/back3 bs=$DIO skip=$(( SLBA * LBA / DIO )) count=$(( PT / DIO )) iflag=direct &&
       cmp /tmp/pat2 /tmp/back3 > "$OUT" 2>&1; then
        ok=1
    fi
    if [ $ok = 1 ]; then
        record rw-verify-passthru 1 "nvme write + nvme read of $NLB blocks at block $SLBA equal, and equal read through the block layer"
    else
        record rw-verify-passthru 0 "nvme write/read of $NLB blocks at block $SLBA: $(tail -n1 "$OUT")"
    fi

    # --- 4. fio: random writes, every block verified by its crc32c header (a region of its own) ---
    FIO_OFF=$(( NSZE / 2 ))
    run fio --name=kernel-verify --filename="/dev/$B" --ioengine=libaio --direct=1 --thread --rw=randwrite --bs=4k \
        --iodepth=8 --offset=$FIO_OFF --size=${FIO_MIB}M --verify=crc32c --do_verify=1 --verify_fatal=1 \
        --verify_backlog=0 --randrepeat=0; rc=$?
    wio=$(grep -m1 -E '^ +write: IOPS=' "$OUT" | tr -s ' ')
    rio=$(grep -m1 -E '^ +read: IOPS=' "$OUT" | tr -s ' ')
    errs=$(sed -n 's/.*: err= *\([0-9]*\):.*/\1/p' "$OUT" | head -n1)
    record fio-verify $([ $rc = 0 ] && [ "$errs" = 0 ] && [ -n "$rio" ] && echo 1 || echo 0) \
        "exit $rc, err=$errs, ${FIO_MIB} MiB written then verified: $wio /$rio"

    # the I/O queues' vectors fired (completions interrupt-driven, not polled), and SMART counted the writes
    ioirqs=$(grep -E "${C}q[1-9][0-9]*\$" /proc/interrupts | awk '{for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+$/) n += $i; else break} END {print n + 0}')
    record io-interrupts $([ "$ioirqs" -gt 0 ] && echo 1 || echo 0) "$ioirqs interrupts on ${C}'s I/O queue vectors"
    run nvme smart-log "/dev/$C"; rc=$?
    writes1=$(smart_field host_write_commands)
    # Write commands since the first smart-log: the pattern's O_DIRECT writes, one passthrough, fio's 4 KiB writes
    want=$(( PAT_KIB * 1024 / DIO + 1 + (FIO_MIB << 8) ))
    record smart-counts-writes $([ $rc = 0 ] && [ "${writes1:-0}" = $(( ${writes0:-0} + want )) ] && echo 1 || echo 0) \
        "host_write_commands $writes0 -> $writes1 (want $want more: $(( PAT_KIB * 1024 / DIO )) + 1 + $((FIO_MIB << 8)))"

    # --- 5. controller reset, namespace rescan ---
    run nvme reset "/dev/$C"; rc=$?
    wait_for $WAIT_S live; ok=$?
    record reset $([ $rc = 0 ] && [ $ok = 0 ] && echo 1 || echo 0) \
        "nvme reset exit $rc, $C state $(cat /sys/class/nvme/$C/state 2>/dev/null); $(dmesg | grep -E "$C: .*(reset|queues)" | tail -n1 | sed 's/^\[[^]]*\] //')"
    wait_for $WAIT_S has_blk
    read_back reset-read-back
    run nvme ns-rescan "/dev/$C"; rc=$?
    wait_for $WAIT_S has_blk; ok=$?
    record ns-rescan $([ $rc = 0 ] && [ $ok = 0 ] && echo 1 || echo 0) "exit $rc, /dev/$(blk_of) present"
    read_back ns-rescan-read-back

    # --- 6. PCI remove and rescan: the driver lets go of the function, then binds it anew ---
    echo 1 > "/sys/bus/pci/devices/$CTRL/remove"
    wait_for $WAIT_S gone; ok=$?
    record pci-remove $([ $ok = 0 ] && [ ! -b "/dev/$B" ] && echo 1 || echo 0) "$CTRL $(gone && echo removed || echo 'still present'), /dev/$B $([ -b "/dev/$B" ] && echo 'still present' || echo gone)"
    echo 1 > /sys/bus/pci/rescan
    wait_for $WAIT_S has_blk; ok=$?
    record pci-rescan $([ $ok = 0 ] && echo 1 || echo 0) "$CTRL back as $(ctrl_of), /dev/$(blk_of); $(dmesg | grep -E 'nvme nvme[0-9]+: pci function' | tail -n1 | sed 's/^\[[^]]*\] //')"
    read_back pci-rescan-read-back
}

T0=$(date +%s)
wait_for $WAIT_S has_all
dmesg | grep -iE 'nvme|vfio' | sed 's/^/  | /'
i=0
for CTRL in $CTRLS; do
    LBA=$(word $i $LBAS); NSZE=$(word $i $NSZES); MDTS=$(word $i $MDTSES); P=kernel.ctrl$i
    say "[guest] controller $i: ours at $CTRL (LBA $LBA B, namespace $NSZE B, MDTS $MDTS B)"
    check_controller $i
    i=$((i + 1))
done
P=kernel

# --- 7. the kernel saw nothing wrong ---
bad=$(dmesg | grep -E 'BUG:|Oops|WARNING: CPU|general protection|I/O error|timeout|[Cc]ontroller is down|Removing after probe failure|Abort status' | head -n 3)
record kernel-log-clean $([ -z "$bad" ] && echo 1 || echo 0) "$bad"

echo "[guest] the kernel log, whole:"
dmesg | sed 's/^/  dmesg| /'
npass=$(grep -c '^NVMELAB-TEST .* PASS' "$LOG")
nfail=$(grep -c '^NVMELAB-TEST .* FAIL' "$LOG")
secs=$(( $(date +%s) - T0 ))
if [ "$nfail" = 0 ] && [ "$npass" -gt 0 ]; then
    echo "NVMELAB-LEG kernel PASS ($npass checks passed in $secs s)"
else
    echo "NVMELAB-LEG kernel FAIL ($nfail of $((npass + nfail)) checks failed in $secs s)"
fi
