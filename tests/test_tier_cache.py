# SPDX-License-Identifier: BSD-3-Clause
"""tier.Cache: write-back correctness against a reference across evictions (LRU and CLOCK),
read-ahead, coalesced write-back, bcache-style statistics, device errors, GPU guard."""

from __future__ import annotations

import numpy as np
import pytest

import nvmelab
from nvmelab.engines.tier import Cache, GpuUnavailable, TierIOError, Volume, gpu_available

BLOCK = 512
LINE = 4096
URI = f"emu://?ndev=3&nsze=1MiB&lbads={BLOCK}&mdts=64KiB"
POLICY_SEED = {"lru": 10, "clock": 20}


@pytest.fixture()
def target():
    with nvmelab.open(URI) as t:
        yield t


def _on_devices(target, nbytes, chunk=8192):
    """The volume's bytes read back through a fresh volume (no cache)."""
    with Volume.open(target, layout="raid0", chunk=chunk) as v:
        return v.read(0, nbytes)


@pytest.mark.parametrize("policy", ["lru", "clock"])
@pytest.mark.parametrize("readahead", [0, 3])
def test_random_writes_survive_evictions_and_flush(target, policy, readahead):
    rng = np.random.default_rng(POLICY_SEED[policy] + readahead)
    with Volume.open(target, layout="raid0", chunk=8192, qdepth=8) as vol:
        size = 256 * 1024  # the region we use: 64 pages, the cache holds 8
        ref = np.zeros(size, dtype=np.uint8)
        vol.write(0, ref)
        with Cache(vol, 8 * LINE, LINE, policy=policy, readahead=readahead, coalesce=16 * 1024) as c:
            for _ in range(300):
                n = int(rng.integers(1, 3 * LINE))
                off = int(rng.integers(0, size - n))
                if rng.random() < 0.6:
                    data = rng.integers(0, 256, n, dtype=np.uint8)
                    c.write(off, data)
                    ref[off : off + n] = data
                else:
                    assert np.array_equal(c.read(off, n), ref[off : off + n])
            st = c.stats()
            assert st["evictions"] > 0 and st["dirty_evictions"] > 0
            assert abs(st["unused"] + st["clean"] + st["dirty"] - 1) < 1e-12
            assert st["dirty"] > 0
            c.flush()
            assert c.stats()["dirty"] == 0
            if readahead:
                assert st["readahead_reads"] > 0
        assert np.array_equal(_on_devices(target, size), ref)


def test_hits_lru_order_and_fractions(target):
    with Volume.open(target, layout="raid0", chunk=8192) as vol, Cache(vol, 4 * LINE, LINE, policy="lru") as c:
        c.acquire([0, 1, 2])
        c.release()
        assert c.stats()["misses"] == 3 and c.fractions() == {"unused": 0.25, "clean": 0.75, "dirty": 0.0}
        s = c.acquire([1], write=True)
        c.release()
        assert c.stats()["hits"] == 1 and c.fractions()["dirty"] == 0.25
        # averaged over the two releases so far: 3 of 4 lines used both times, 1 dirty the second time
        assert c.mean_fractions() == {"unused": 0.25, "clean": 0.625, "dirty": 0.125}
        c.acquire([3])
        c.release()  # fills the last free line
        c.acquire([4])
        c.release()  # evicts the least recent: page 0
        assert 0 not in c._map and {1, 2, 3, 4} == set(c._map)
        assert c._map[1] == int(s[0])
        assert c.stats()["hit_ratio"] == pytest.approx(1 / 6)


def test_clock_gives_referenced_lines_a_second_chance(target):
    with Volume.open(target, layout="raid0", chunk=8192) as vol, Cache(vol, 4 * LINE, LINE, policy="clock") as c:
        c.acquire([0, 1, 2, 3])
        c.release()
        c.acquire([4])
        c.release()  # all referenced: one full turn clears them, evicts 0
        assert 0 not in c._map
        c.acquire([1])
        c.release()  # page 1 referenced again
        c.acquire([5])
        c.release()  # hand skips 1 (second chance), evicts 2
        assert 1 in c._map and 2 not in c._map


def test_coalesced_write_back_uses_large_requests(target):
    with (
        Volume.open(target, layout="raid0", chunk=64 * 1024) as vol,
        Cache(vol, 32 * LINE, LINE, coalesce=64 * 1024) as c,
    ):
        c.write(0, np.arange(32 * LINE, dtype=np.uint32).view(np.uint8)[: 32 * LINE])
        vol.reset_stats()
        c.flush(device_flush=False)
        st = c.stats()
        assert st["writeback_lines"] == 32 and st["writeback_requests"] == 2  # 2 x 64 KiB runs
        assert sum(s.writes for s in vol.stats) == 2
        assert sum(s.write_bytes for s in vol.stats) == 32 * LINE


def test_writeback_percent_keeps_dirty_share_down(target):
    with Volume.open(target, layout="raid0", chunk=8192) as vol, Cache(vol, 16 * LINE, LINE, writeback_percent=25) as c:
        c.write(0, np.ones(12 * LINE, dtype=np.uint8))
        f = c.fractions()
        assert f["dirty"] <= 0.25 and f["clean"] >= 0.5
        c.flush()
        assert (_on_devices(target, 12 * LINE) == 1).all()


def test_write_back_error_surfaces_and_nothing_is_lost(target):
    with Volume.open(target, layout="raid0", chunk=8192, qdepth=8) as vol:
        ref = np.random.default_rng(5).integers(0, 256, 16 * LINE, dtype=np.uint8)
        with Cache(vol, 16 * LINE, LINE) as c:
            c.write(0, ref)
            target[1].emu_inject("status", nth=1, sct=0, sc=0x06, count=2)
            with pytest.raises(TierIOError, match="cache write-back.*Internal Error"):
                c.flush()
            assert c.fractions()["dirty"] > 0  # the failed lines are still dirty
            target[1].emu_inject("none")
            c.flush()  # retried: everything lands
            assert c.fractions()["dirty"] == 0
        assert np.array_equal(_on_devices(target, 16 * LINE), ref)


def test_eviction_error_keeps_victims_and_raises(target):
    with Volume.open(target, layout="raid0", chunk=8192, qdepth=8) as vol:
        with Cache(vol, 4 * LINE, LINE) as c:
            ref = np.full(4 * LINE, 9, dtype=np.uint8)
            c.write(0, ref)  # 4 dirty lines, cache full
            for i in range(3):
                target[i].emu_inject("status", nth=1, sct=0, sc=0x06)
            with pytest.raises(TierIOError):
                c.acquire([10, 11])  # must evict dirty lines: the write fails
            assert not c._pinned.any()
            assert sum(c._dirty) >= 1  # whatever failed is still held, dirty
            for i in range(3):
                target[i].emu_inject("none")
            assert np.array_equal(c.read(0, 4 * LINE), ref)
            c.flush()
        assert np.array_equal(_on_devices(target, 4 * LINE), ref)


def test_read_error_installs_nothing(target):
    with Volume.open(target, layout="raid0", chunk=8192) as vol:
        vol.write(0, np.full(2 * LINE, 3, dtype=np.uint8))
        with Cache(vol, 4 * LINE, LINE) as c:
            for i in range(3):
                target[i].emu_inject("status", nth=1, sct=2, sc=0x81)  # media: Unrecovered Read Error
            with pytest.raises(TierIOError, match="cache fill"):
                c.acquire([0])
            assert 0 not in c._map and not c._pinned.any()
            for i in range(3):
                target[i].emu_inject("none")
            assert (c.read(0, LINE) == 3).all()


def test_bad_parameters(target):
    with Volume.open(target, layout="raid0", chunk=8192) as vol:
        with pytest.raises(ValueError, match="policy"):
            Cache(vol, 8 * LINE, LINE, policy="fifo")
        with pytest.raises(ValueError, match="fewer than 2 lines"):
            Cache(vol, LINE, LINE)
        with pytest.raises(ValueError, match="multiple of the volume's block size"):
            Cache(vol, 8 * LINE, 1000)
        with Cache(vol, 4 * LINE, LINE) as c:
            with pytest.raises(ValueError, match="exceed the cache"):
                c.acquire(range(5))
            with pytest.raises(ValueError, match="repeat"):
                c.acquire([1, 1])
            with pytest.raises(ValueError, match="outside"):
                c.acquire([c.npages])


def test_gpu_memory_refused_without_gpu(target):
    ok, why = gpu_available()
    if ok:
        pytest.skip("a GPU is present: the refusal path does not apply")
    with Volume.open(target, layout="raid0", chunk=8192) as vol:
        with pytest.raises(GpuUnavailable, match="memory='gpu'"):
            Cache(vol, 8 * LINE, LINE, memory="gpu")


@pytest.mark.gpu
def test_gpu_cache_roundtrip(target):
    ok, why = gpu_available()
    if not ok:
        pytest.skip(f"GPU-memory cache needs cupy and a CUDA device: {why}")
    rng = np.random.default_rng(9)
    with Volume.open(target, layout="raid0", chunk=8192) as vol:
        ref = rng.integers(0, 256, 32 * LINE, dtype=np.uint8)
        with Cache(vol, 8 * LINE, LINE, memory="gpu", readahead=2) as c:
            c.write(0, ref)
            assert np.array_equal(c.read(0, ref.size), ref)
            c.flush()
        assert np.array_equal(_on_devices(target, ref.size), ref)


class _HostStandIn(np.ndarray):
    """An ndarray with cupy's .get(): lets the GPU-memory code path run on a host without a GPU."""

    def get(self):
        return np.array(self)


@pytest.fixture()
def cupy_standin(monkeypatch):
    """A minimal module named cupy over numpy (device copies are numpy copies). It exercises the
    cache's GPU code path (indexing, staging copies, dtype views); it measures nothing."""
    import sys
    import types

    m = types.ModuleType("cupy")
    m.zeros = lambda *a, **k: np.zeros(*a, **k).view(_HostStandIn)
    m.asarray = lambda a: np.array(a).view(_HostStandIn)
    m.uint8 = np.uint8
    m.abs = np.abs
    m.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(
            getDeviceCount=lambda: 1, getDeviceProperties=lambda i: {"name": b"numpy stand-in"}
        )
    )
    monkeypatch.setitem(sys.modules, "cupy", m)
    return m


def test_gpu_code_path_with_a_numpy_standin(target, cupy_standin):
    from nvmelab.engines.tier import workload as W

    assert gpu_available() == (True, "numpy stand-in")
    lay = W.StateLayout(14, "complex64", LINE)
    gates = W.random_circuit(lay.nqubits, 5, seed=4)
    ref = W.MemoryPager(lay)
    W.init_state(ref, lay, seed=1)
    W.run_circuit(ref, lay, gates)
    W.run_mix(ref, lay, W.random_mix(lay.npages, 64, 0.5, seed=2))
    with Volume.open(target, layout="raid0", chunk=8192) as vol:
        W.write_initial_state(vol, lay, seed=1)
        with Cache(vol, 8 * LINE, LINE, dtype=lay.np_dtype, memory="gpu", readahead=2) as c:
            assert isinstance(c.lines, _HostStandIn) and c.xp is cupy_standin
            W.run_circuit(c, lay, gates)
            W.run_mix(c, lay, W.random_mix(lay.npages, 64, 0.5, seed=2))
            c.write(0, np.arange(100, dtype=np.uint8))  # byte API through the device path
            assert np.array_equal(c.read(0, 100), np.arange(100, dtype=np.uint8))
            c.flush()
        state = W.read_state(vol, lay)
    want = ref.lines.reshape(-1).copy()
    want.view(np.uint8)[:100] = np.arange(100, dtype=np.uint8)
    assert W.checksum(state) == W.checksum(want)
