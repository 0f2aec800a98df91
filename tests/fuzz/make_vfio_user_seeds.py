# SPDX-License-Identifier: BSD-3-Clause
"""Write the seed corpus of fuzz_vfio_user.c: tests/fuzz/corpus/vfio_user/, a few valid messages of each
vfio-user command (src/nvme/vfio_user.h) and a few that are wrong on purpose.

A seed is the harness's input: one mode byte (bit 0: the harness negotiates VERSION first), then messages
as a client sends them, each a 16-byte header (msg_id, cmd, size, flags, error; little-endian) and its
payload. Header flag 0x80 asks the harness to attach one memfd of 64 KiB (a DMA_MAP's fd).

    .venv/bin/python tests/fuzz/make_vfio_user_seeds.py   # rewrites the directory's seed-* files
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

OUT = Path(__file__).resolve().parent / "corpus" / "vfio_user"

VERSION, DMA_MAP, DMA_UNMAP, GET_INFO, REGION_INFO, IO_FDS, IRQ_INFO, SET_IRQS = 1, 2, 3, 4, 5, 6, 7, 8
REGION_READ, REGION_WRITE, DMA_READ, DMA_WRITE, RESET = 9, 10, 11, 12, 13
F_REPLY, F_NO_REPLY, F_FD = 0x1, 0x10, 0x80
BAR0, CONFIG = 0, 7
IOVA = 1 << 45  # VFU_CLIENT_IOVA_BASE
NEG = 1  # mode byte: negotiate VERSION first
RAW = 0
STREAM = 2  # mode byte: the messages go through a socketpair and the framing code
FD = 4  # mode byte, with STREAM: one memfd rides with the first byte


def msg(cmd: int, payload: bytes = b"", flags: int = 0, msg_id: int = 1, size: int | None = None) -> bytes:
    return struct.pack("<HHIII", msg_id, cmd, 16 + len(payload) if size is None else size, flags, 0) + payload


def version(major: int = 0, minor: int = 1, caps: dict | None = None) -> bytes:
    body = struct.pack("<HH", major, minor)
    if caps is not None:
        body += json.dumps({"capabilities": caps}, separators=(",", ":")).encode() + b"\0"
    return msg(VERSION, body)


def dma_map(addr: int, size: int, offset: int = 0, fd: bool = True) -> bytes:
    return msg(DMA_MAP, struct.pack("<IIQQQ", 32, 3, offset, addr, size), flags=F_FD if fd else 0)


def dma_unmap(addr: int, size: int, flags: int = 0) -> bytes:
    return msg(DMA_UNMAP, struct.pack("<IIQQ", 24, flags, addr, size))


def region_info(index: int, argsz: int = 64) -> bytes:
    return msg(REGION_INFO, struct.pack("<IIIIQQ", argsz, 0, index, 0, 0, 0))


def irq_info(index: int) -> bytes:
    return msg(IRQ_INFO, struct.pack("<IIII", 16, 0, index, 0))


def set_irqs(flags: int, index: int, start: int, count: int, fd: bool = False) -> bytes:
    return msg(SET_IRQS, struct.pack("<IIIII", 20, flags, index, start, count), flags=F_FD if fd else 0)


def rd(region: int, offset: int, count: int) -> bytes:
    return msg(REGION_READ, struct.pack("<QII", offset, region, count))


def wr(region: int, offset: int, value: int, count: int) -> bytes:
    return msg(REGION_WRITE, struct.pack("<QII", offset, region, count) + value.to_bytes(count, "little"))


SEEDS: dict[str, tuple[int, list[bytes]]] = {
    "version-json": (RAW, [version(caps={"max_msg_fds": 8, "max_data_xfer_size": 1 << 20, "pgsizes": 4096})]),
    "version-bare": (RAW, [version()]),
    "version-unknown-keys": (RAW, [version(caps={"migration": {"pgsize": 4096}, "x": [1, 2.5, None, "s"]})]),
    "version-bad-major": (RAW, [version(major=1)]),
    "info": (NEG, [msg(GET_INFO, struct.pack("<IIII", 16, 0, 0, 0))]),
    "region-info": (NEG, [region_info(i) for i in (BAR0, 1, 6, CONFIG, 9)] + [region_info(BAR0, argsz=32)]),
    "irq-info": (NEG, [irq_info(i) for i in range(6)]),
    "set-irqs": (
        NEG,
        [set_irqs(0x21, 2, 0, 0), set_irqs(0x24, 0, 0, 1, fd=True), set_irqs(0x22, 0, 0, 1) + b"\x01"],
    ),
    "config": (
        NEG,
        [
            rd(CONFIG, 0, 4),
            rd(CONFIG, 8, 4),
            wr(CONFIG, 0x10, 0xFFFFFFFF, 4),
            rd(CONFIG, 0x10, 4),
            wr(CONFIG, 4, 6, 2),
            rd(CONFIG, 0x40, 8),
        ],
    ),
    "bar0-regs": (NEG, [rd(BAR0, 0, 8), rd(BAR0, 8, 4), rd(BAR0, 0x1C, 4), wr(BAR0, 0x14, 0, 4), rd(BAR0, 0x1000, 4)]),
    "dma": (
        NEG,
        [
            dma_map(IOVA, 0x4000),
            dma_map(IOVA, 0x4000),
            dma_map(IOVA + 0x8000, 0x1000, fd=False),
            dma_unmap(IOVA, 0x4000),
            dma_unmap(0, 0, flags=2),
        ],
    ),
    "dma-unaligned": (NEG, [dma_map(IOVA + 1, 0x1000), dma_map(IOVA, 0x1001), dma_unmap(IOVA, 0x1000)]),
    "bring-up": (
        NEG,
        [
            dma_map(IOVA, 0x10000),
            wr(BAR0, 0x24, 0x000F000F, 4),
            wr(BAR0, 0x28, IOVA, 8),
            wr(BAR0, 0x30, IOVA + 0x1000, 8),
            wr(BAR0, 0x14, 0x00460001, 4),
            rd(BAR0, 0x1C, 4),
            wr(BAR0, 0x1000, 1, 4),
            msg(RESET),
            rd(BAR0, 0x1C, 4),
        ],
    ),
    "unsupported": (NEG, [msg(IO_FDS), msg(DMA_READ), msg(DMA_WRITE), msg(99), msg(RESET, flags=F_NO_REPLY)]),
    "truncated": (NEG, [rd(CONFIG, 0, 4)[:24]]),
    "header-small": (NEG, [msg(GET_INFO, size=8)]),
    "header-reply": (NEG, [msg(GET_INFO, flags=F_REPLY)]),
    "before-version": (RAW, [rd(CONFIG, 0, 4), version()]),
    "stream-version": (STREAM, [version(caps={"max_msg_fds": 8}), rd(CONFIG, 0, 4), msg(RESET)]),
    "stream-dma": (NEG | STREAM | FD, [dma_map(IOVA, 0x4000, fd=False), rd(BAR0, 0, 8), dma_unmap(IOVA, 0x4000)]),
    "stream-truncated": (NEG | STREAM, [rd(CONFIG, 0, 4), rd(CONFIG, 8, 4)[:20]]),
    "stream-oversized": (NEG | STREAM, [msg(GET_INFO, size=(1 << 20) + 4097)]),
    "stream-small": (NEG | STREAM, [msg(GET_INFO, size=4)]),
}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("seed-*"):
        old.unlink()
    for name, (mode, msgs) in SEEDS.items():
        (OUT / f"seed-{name}").write_bytes(bytes([mode]) + b"".join(msgs))


if __name__ == "__main__":
    main()
