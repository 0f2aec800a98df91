#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# How the seeds of tests/fuzz/corpus/qcow2/ were made (kept for the record; the seeds are committed and
# `make fuzz` never runs this). Every image has 512-byte clusters, so each is a few KiB: qemu-img's own
# layouts (versions 2 and 3, data written and zeroed with qemu-io, compressed clusters, a backing file, a
# snapshot, refcount widths, an external data file), tests/vectors/make_qcow2.py's, and a few headers with
# one field set that the reader must refuse (encryption, the corrupt bit, extended L2 entries).
# usage: bash tests/fuzz/make_qcow2_seeds.sh [OUT]   (needs qemu-img and qemu-io; OUT defaults to the corpus)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-tests/fuzz/corpus/qcow2}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
C=cluster_size=512

img() { # img NAME OPTIONS SIZE: an empty image
    qemu-img create -q -f qcow2 -o "$C,$2" "$T/$1" "$3"
}
io() { # io NAME COMMAND...: qemu-io commands on an image
    local f=$1
    shift
    local args=()
    for c in "$@"; do args+=(-c "$c"); done
    (cd "$T" && qemu-io -f qcow2 "${args[@]}" "$f" >/dev/null) # relative names (backing, data file) from $T
}
patch_be() { # patch_be NAME OFFSET BYTES HEX: write a big-endian field of the header
    printf '%0*x' $(($3 * 2)) "$4" | xxd -r -p | dd of="$T/$1" bs=1 seek="$2" conv=notrunc status=none
}

img v3-empty compat=1.1 64K
img v2-empty compat=0.10 64K
img v3-data compat=1.1 64K
io v3-data 'write -P 0xab 0 1k' 'write -z 2k 1k' 'write -P 0x5a 40k 512' 'write -P 1 63k 1k'
img v2-data compat=0.10 64K
io v2-data 'write -P 0xcd 512 2k' 'write -z 8k 1k'
img v3-discard compat=1.1 64K
io v3-discard 'write -P 0x11 0 8k' 'discard 2k 4k' 'write -z -u 6k 1k'
img v3-odd-size compat=1.1 1000
io v3-odd-size 'write -P 0x77 0 1000'
img v3-refcount1 compat=1.1,refcount_bits=1 32K
io v3-refcount1 'write -P 0x42 1k 1k'
img v3-refcount64 compat=1.1,refcount_bits=64 32K
io v3-refcount64 'write -P 0x43 1k 1k'
img v3-lazy compat=1.1,lazy_refcounts=on 32K
io v3-lazy 'write -P 0x44 0 512'
img v3-snapshot compat=1.1 32K
io v3-snapshot 'write -P 0x45 0 1k'
qemu-img snapshot -c s1 "$T/v3-snapshot"
io v3-snapshot 'write -P 0x46 512 1k'
img base compat=1.1 32K
io base 'write -P 0x47 0 2k'
(cd "$T" && qemu-img create -q -f qcow2 -o "$C" -b base -F qcow2 v3-backing 32K) # names the backing file "base"
io v3-backing 'write -P 0x48 1k 512'
qemu-img create -q -f raw "$T/raw" 32K
qemu-io -f raw -c 'write -P 0x49 0 12k' -c 'write -P 0 12k 4k' "$T/raw" >/dev/null
qemu-img convert -c -O qcow2 -o "$C" "$T/raw" "$T/v3-compressed"
qemu-img convert -c -O qcow2 -o "$C,compression_type=zstd" "$T/raw" "$T/v3-compressed-zstd" 2>/dev/null || true
(cd "$T" && qemu-img create -q -f qcow2 -o "$C,data_file=v3-data-file.raw" v3-data-file 16K)
io v3-data-file 'write -P 0x4a 0 1k'
cp "$T/v3-data" "$T/v3-encrypted" && patch_be v3-encrypted 32 4 1     # crypt_method = AES
cp "$T/v3-data" "$T/v3-corrupt-bit" && patch_be v3-corrupt-bit 72 8 2 # incompatible: corrupt
cp "$T/v3-data" "$T/v3-dirty-bit" && patch_be v3-dirty-bit 72 8 1     # incompatible: dirty
cp "$T/v3-data" "$T/v3-ext-l2-bit" && patch_be v3-ext-l2-bit 72 8 16  # incompatible: extended L2

# tests/vectors/make_qcow2.py: data, written zeros and holes, each zero policy and both versions
qemu-img create -q -f raw "$T/sparse" 24K
qemu-io -f raw -c 'write -P 0x61 0 1k' -c 'write -z 4k 2k' -c 'write -P 0x62 10k 3k' "$T/sparse" >/dev/null
for z in flag data unallocated; do
    "$PY" tests/vectors/make_qcow2.py "$T/sparse" "$T/vec-$z" --zeros "$z" --cluster-bits 9 >/dev/null
done
"$PY" tests/vectors/make_qcow2.py "$T/sparse" "$T/vec-v2" --version 2 --cluster-bits 9 >/dev/null

# Regression seeds of issue 33 (the reader before 66550c1 fails both under fuzz_qcow2): a guest size within
# one cluster of 2^64 (the cluster count wrapped to 0: heap-buffer-overflow in qcow2_map), and a 16 GiB guest
# whose 8192 L1 entries all name one L2 table (84 KiB of file held 32 MiB: one entry per guest cluster).
cp "$T/v3-empty" "$T/regress-size-wrap-cluster-count"
patch_be regress-size-wrap-cluster-count 20 4 16                  # cluster_bits
patch_be regress-size-wrap-cluster-count 24 8 0xfffffffffffffe00 # size
qemu-img create -q -f qcow2 -o cluster_size=4096 "$T/regress-l1-one-l2-memory" 16G
io regress-l1-one-l2-memory 'write -P 0x33 0 4k'
python3 - "$T/regress-l1-one-l2-memory" <<'EOF'
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
n, off = struct.unpack(">I", d[36:40])[0], struct.unpack(">Q", d[40:48])[0]
d[off : off + 8 * n] = d[off : off + 8] * n
open(sys.argv[1], "wb").write(d)
EOF

for f in "$T"/v[23]-* "$T"/vec-* "$T"/regress-*; do
    case "$f" in *.raw) continue ;; esac
    cp "$f" "$OUT/$(basename "$f")"
done
ls -l "$OUT"
