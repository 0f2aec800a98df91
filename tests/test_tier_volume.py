# SPDX-License-Identifier: BSD-3-Clause
"""tier.Volume: RAID-0 / single / linear mapping, concurrent I/O, device contents, bad input."""

from __future__ import annotations

import numpy as np
import pytest

import nvmelab
from nvmelab.engines.tier import Request, TierIOError, Volume

BLOCK = 512
NSZE = 1 << 20
URI = f"emu://?ndev=3&nsze={NSZE}&lbads={BLOCK}&mdts=16KiB"


@pytest.fixture()
def target():
    with nvmelab.open(URI) as t:
        yield t


def _device_image(target, vol):
    """What each device holds, concatenated in the volume's order (independent of Volume.read)."""
    out = np.empty(vol.nbytes, dtype=np.uint8)
    if vol.layout == "raid0":
        c, n = vol.chunk, vol.ndevs
        for ci in range(vol.nbytes // c):
            ns = target[ci % n].namespace(1)
            out[ci * c : (ci + 1) * c] = ns.read((ci // n) * c // BLOCK, c // BLOCK)
    else:
        pos = 0
        for i in range(vol.ndevs):
            ns = target[i].namespace(1)
            out[pos : pos + ns.nbytes] = ns.read(0, ns.nsze)
            pos += ns.nbytes
    return out


@pytest.mark.parametrize(
    "layout,ndevs,chunk", [("raid0", 3, 4096), ("raid0", 2, 1536), ("linear", 3, 0), ("single", 1, 0)]
)
def test_random_io_matches_reference_and_devices(target, layout, ndevs, chunk):
    rng = np.random.default_rng(ndevs + chunk)
    kw = {"chunk": chunk} if chunk else {}
    with Volume.open(target, layout=layout, ndevs=ndevs, qdepth=8, **kw) as vol:
        if layout == "raid0":
            assert vol.nbytes == NSZE // chunk * chunk * ndevs
        else:
            assert vol.nbytes == NSZE * ndevs
        ref = np.zeros(vol.nbytes, dtype=np.uint8)
        for _ in range(60):
            nblk = int(rng.integers(1, 200))
            off = int(rng.integers(0, vol.nbytes // BLOCK - nblk)) * BLOCK
            data = rng.integers(0, 256, nblk * BLOCK, dtype=np.uint8)
            vol.write(off, data)
            ref[off : off + data.size] = data
            if rng.random() < 0.3:
                o2 = int(rng.integers(0, vol.nbytes // BLOCK - nblk)) * BLOCK
                assert np.array_equal(vol.read(o2, nblk * BLOCK), ref[o2 : o2 + nblk * BLOCK])
        assert np.array_equal(vol.read(0, vol.nbytes), ref)
        assert np.array_equal(_device_image(target, vol), ref)
        st = vol.stats
        assert sum(s.write_bytes for s in st) > 0 and all(s.errors == 0 for s in st)
        if layout == "raid0":  # striping spreads the bytes over every device
            assert all(s.read_bytes > 0 and s.write_bytes > 0 for s in st)


def test_many_requests_in_one_batch_run_on_all_devices(target):
    with Volume.open(target, layout="raid0", chunk=4096, qdepth=4) as vol, vol.alloc(256 * 1024) as buf:
        rng = np.random.default_rng(1)
        buf.array[:] = rng.integers(0, 256, buf.nbytes, dtype=np.uint8)
        want = buf.array.copy()
        # 64 requests of 4 KiB, more than the queues hold at once (depth 4 -> 3 in flight per device)
        vol.io([Request("w", i * 8192, 4096, buf, i * 4096) for i in range(64)])
        buf.array[:] = 0
        vol.io([Request("r", i * 8192, 4096, buf, i * 4096) for i in range(64)])
        assert np.array_equal(buf.array, want)
        # chunk 2i of the volume lives on device 2i % 3
        assert [s.writes for s in vol.stats] == [22, 21, 21]


def test_extents_split_at_chunks_and_devices(target):
    with Volume.open(target, layout="raid0", chunk=4096) as vol:
        ex = vol.extents(4096 - 512, 4096 + 1024)
        assert ex == [(0, 3584, 512, 0), (1, 0, 4096, 512), (2, 0, 512, 4608)]
    with Volume.open(target, layout="linear") as vol:
        assert vol.extents(NSZE - 512, 1024) == [(0, NSZE - 512, 512, 0), (1, 0, 512, 512)]


def test_device_error_surfaces_with_status_and_other_requests_complete(target):
    with Volume.open(target, layout="raid0", chunk=4096, qdepth=8) as vol, vol.alloc(3 * 4096) as buf:
        buf.array[:] = 7
        target[1].emu_inject("status", nth=1, sct=0, sc=0x06, dnr=True)  # 06h: Internal Error
        with pytest.raises(TierIOError) as ei:
            vol.io([Request("w", i * 4096, 4096, buf, i * 4096) for i in range(3)])
        ((idx, req, err),) = ei.value.failures
        assert idx == 1 and req.offset == 4096
        assert isinstance(err, nvmelab.NvmeError) and err.dnr and "Internal" in err.name
        assert "request 1" in str(ei.value) and "Internal" in str(ei.value)
        # the other two writes reached their devices
        assert (target[0].namespace(1).read(0, 8) == 7).all()
        assert (target[2].namespace(1).read(0, 8) == 7).all()
        assert vol.stats[1].errors == 1
        # no fault now: the same request succeeds
        vol.io([Request("w", 4096, 4096, buf, 4096)])
        assert (target[1].namespace(1).read(0, 8) == 7).all()


def test_bad_input_is_refused_with_a_clear_message(target):
    with pytest.raises(ValueError, match="layout"):
        Volume.open(target, layout="raid5")
    with pytest.raises(ValueError, match="exactly one namespace"):
        Volume.open(target, layout="single", ndevs=2)
    with pytest.raises(ValueError, match="chunk"):
        Volume.open(target, chunk=1000)
    with pytest.raises(ValueError, match="ndevs"):
        Volume.open(target, ndevs=4)
    with pytest.raises(ValueError, match="qdepth"):
        Volume.open(target, qdepth=1)
    with Volume.open(target, chunk=4096) as vol:
        with pytest.raises(ValueError, match="offset: 100 is not a multiple"):
            vol.read(100, 512)
        with pytest.raises(ValueError, match="runs past"):
            vol.read(vol.nbytes - 512, 1024)
        with vol.alloc(4096) as buf, pytest.raises(ValueError, match="buffer span"):
            vol.io([Request("r", 0, 8192, buf, 0)])


def test_mixed_block_sizes_refused():
    with nvmelab.open("emu://?ndev=2&nsze=1MiB&lbads=512,4096") as t:
        with pytest.raises(ValueError, match="LBA sizes differ"):
            Volume.open(t)
