#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A tiny qcow2 writer for blksum's tests: a raw image -> a qcow2 (version 3) with the same guest data.

Usage: make_qcow2.py RAW OUT [--zeros flag|data|unallocated] [--cluster-bits N] [--version 2|3]

The guest size is the raw size rounded up to 512 bytes, zero-padded (as `qemu-img convert` makes it:
qemu sizes images in 512-byte sectors). Guest clusters that are holes of RAW (SEEK_DATA) stay unallocated; clusters of written zeros become
zero-flagged (version 3), stay unallocated, or are stored as data (--zeros); the rest are stored as
data, in guest order. The file has valid refcounts (qemu-img check passes), so qemu-nbd serves it too.
`damage()` makes the bad images the reader must refuse: a backing file, encryption, a compressed
cluster, a truncated L1 table, a cluster pointing past the end of the file. Needs no QEMU.
"""

from __future__ import annotations

import argparse
import os
import struct

MAGIC = 0x514649FB
SECTOR = 512
HEADER_V3 = 104
ZERO_FLAG = 1
COPIED = 1 << 63
COMPRESSED = 1 << 62


def _data_ranges(fd: int, size: int) -> list[tuple[int, int]]:
    out, off = [], 0
    while off < size:
        try:
            d = os.lseek(fd, off, os.SEEK_DATA)
        except OSError:
            break
        h = os.lseek(fd, d, os.SEEK_HOLE)
        out.append((d, min(h, size)))
        off = h
    return out


def write(raw: str, out: str, zeros: str = "flag", cluster_bits: int = 16, version: int = 3) -> dict:
    """Write OUT from RAW; returns the layout: {'l1': offset, 'l2': [offsets], 'data': {guest cluster: host}}."""
    cs = 1 << cluster_bits
    with open(raw, "rb") as f:
        data = f.read()
        ranges = _data_ranges(f.fileno(), len(data))
    size = -(-len(data) // SECTOR) * SECTOR
    data += bytes(size - len(data))
    ncl = (size + cs - 1) // cs
    per_l2 = cs // 8
    nl2 = (ncl + per_l2 - 1) // per_l2
    allocated = [any(a < (c + 1) * cs and b > c * cs for a, b in ranges) for c in range(ncl)]
    entries, data_clusters = [], []
    for c in range(ncl):
        chunk = data[c * cs : (c + 1) * cs]
        if not allocated[c]:
            entries.append(0)
        elif not any(chunk) and zeros == "flag" and version == 3:
            entries.append(ZERO_FLAG)
        elif not any(chunk) and zeros == "unallocated":
            entries.append(0)
        else:
            entries.append(None)  # data: host offset below
            data_clusters.append(c)
    l1_clusters = max(1, (nl2 * 8 + cs - 1) // cs)
    per_rb = cs // 2  # 16-bit refcounts per refcount block
    nrb = 1
    while (3 + nrb - 1 + l1_clusters + nl2 + len(data_clusters)) > nrb * per_rb:
        nrb += 1
    assert nrb <= cs // 8, "refcount table too small for this test writer"
    # cluster 0 header, 1 refcount table, 2.. refcount blocks, then L1, L2s, data
    l1_off = (2 + nrb) * cs
    first_l2 = 2 + nrb + l1_clusters
    l2_offs = [(first_l2 + i) * cs for i in range(nl2)]
    host = {c: (first_l2 + nl2 + i) * cs for i, c in enumerate(data_clusters)}
    total = first_l2 + nl2 + len(data_clusters)
    hdr = struct.pack(
        ">IIQIIQIIQQIIQ",
        MAGIC,
        version,
        0,
        0,
        cluster_bits,
        size,
        0,
        nl2,
        l1_off,
        1 * cs,
        1,
        0,
        0,
    )
    if version == 3:
        hdr += struct.pack(">QQQII", 0, 0, 0, 4, HEADER_V3)
    img = bytearray(total * cs)
    img[: len(hdr)] = hdr
    for b in range(nrb):
        img[cs + 8 * b : cs + 8 * b + 8] = struct.pack(">Q", (2 + b) * cs)
    for i in range(total):
        img[2 * cs + 2 * i : 2 * cs + 2 * i + 2] = struct.pack(">H", 1)  # the blocks are contiguous
    for i, off in enumerate(l2_offs):
        img[l1_off + 8 * i : l1_off + 8 * i + 8] = struct.pack(">Q", off | COPIED)
    for c, e in enumerate(entries):
        v = (host[c] | COPIED) if e is None else e
        off = l2_offs[c // per_l2] + 8 * (c % per_l2)
        img[off : off + 8] = struct.pack(">Q", v)
    for c, h in host.items():
        chunk = data[c * cs : (c + 1) * cs]
        img[h : h + len(chunk)] = chunk
    with open(out, "wb") as f:
        f.write(img)
    return {"l1": l1_off, "l2": l2_offs, "data": host, "cluster_size": cs, "version": version}


def damage(path: str, layout: dict, kind: str) -> None:
    """Make the qcow2 at path bad in one way (kind: backing, encrypted, compressed, truncated_l1,
    past_end, truncated_l2)."""
    cs = layout["cluster_size"]
    with open(path, "r+b") as f:
        if kind == "backing":
            f.seek(cs - 64)
            f.write(b"base.qcow2")
            f.seek(8)
            f.write(struct.pack(">QI", cs - 64, len(b"base.qcow2")))
        elif kind == "encrypted":
            f.seek(32)
            f.write(struct.pack(">I", 2))
        elif kind in ("compressed", "past_end"):
            c = next(iter(layout["data"]))
            per_l2 = cs // 8
            off = layout["l2"][c // per_l2] + 8 * (c % per_l2)
            f.seek(off)
            end = os.fstat(f.fileno()).st_size
            v = (COMPRESSED | layout["data"][c]) if kind == "compressed" else (COPIED | (end + 16 * cs))
            f.write(struct.pack(">Q", v))
        elif kind == "truncated_l1":
            f.truncate(layout["l1"] + 4)
        elif kind == "truncated_l2":
            f.truncate(layout["l2"][0] + cs // 2)
        else:
            raise ValueError(f"unknown damage {kind!r}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--zeros", choices=["flag", "data", "unallocated"], default="flag")
    ap.add_argument("--cluster-bits", type=int, default=16)
    ap.add_argument("--version", type=int, choices=[2, 3], default=3)
    a = ap.parse_args()
    write(a.raw, a.out, a.zeros, a.cluster_bits, a.version)
