# SPDX-License-Identifier: BSD-3-Clause
"""tier.workload: gate arithmetic against an independent implementation, page access patterns,
and paged runs (direct, cached: LRU/CLOCK, read-ahead) bit-identical to the in-memory run."""

from __future__ import annotations

import numpy as np
import pytest

import nvmelab
from nvmelab.engines.tier import Cache, Volume
from nvmelab.engines.tier import workload as W

URI = "emu://?ndev=4&nsze=1MiB&lbads=512"


def _dense_apply(state: np.ndarray, n: int, gate: W.Gate) -> np.ndarray:
    """Apply a single-qubit gate with tensordot on the (2,)*n view (qubit k = bit k of the index)."""
    psi = state.reshape((2,) * n)
    axis = n - 1 - gate.qubit  # C order: the last axis is bit 0
    out = np.tensordot(gate.u, psi, axes=([1], [axis]))
    return np.moveaxis(out, 0, axis).reshape(-1)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_gate_arithmetic_matches_dense_simulation(dtype):
    lay = W.StateLayout(10, dtype, 512)  # 64 or 32 amplitudes per page: local and far qubits
    assert lay.local_qubits in (5, 6)
    gates = W.random_circuit(lay.nqubits, 12, seed=3)
    assert {g.qubit < lay.local_qubits for g in gates} == {True, False}
    mem = W.MemoryPager(lay, batch_pages=4)
    W.init_state(mem, lay, seed=2)
    dense = mem.lines.reshape(-1).astype(np.complex128)
    W.run_circuit(mem, lay, gates)
    for g in gates:
        dense = _dense_apply(dense, lay.nqubits, g)
    tol = 1e-5 if dtype == "complex64" else 1e-12
    assert np.allclose(mem.lines.reshape(-1), dense, atol=tol)
    # unitary gates keep the norm
    assert np.linalg.norm(dense) == pytest.approx(np.linalg.norm(mem.lines.reshape(-1)), rel=1e-5)


def test_page_access_patterns_local_and_strided():
    lay = W.StateLayout(12, "complex64", 4096)  # 512 amplitudes per page: qubits 0..8 local
    local = list(W._gate_batches(lay, 3, 2, False))
    assert all(kind == "local" for kind, *_ in local) and sum(b[1].size for b in local) == lay.npages
    far = list(W._gate_batches(lay, 10, 4, False))  # page stride 2**(10-9) = 2
    lo = np.concatenate([b[1] for b in far])
    hi = np.concatenate([b[2] for b in far])
    assert np.array_equal(hi - lo, np.full(lo.size, 2)) and lo.size == lay.npages // 2
    assert set(lo.tolist()) | set(hi.tolist()) == set(range(lay.npages))


def _paged_run(pager, vol, lay, work):
    W.write_initial_state(vol, lay, seed=7)
    work(pager)
    pager.flush()
    return W.checksum(W.read_state(vol, lay))


@pytest.mark.parametrize("workload", ["circuit", "random"])
@pytest.mark.parametrize("kind", ["direct", "lru", "clock", "lru-ra"])
def test_paged_runs_equal_in_memory_run(workload, kind):
    lay = W.StateLayout(14, "complex64", 4096)  # 128 KiB state, 32 pages
    gates = W.random_circuit(lay.nqubits, 6, seed=11)
    steps = W.random_mix(lay.npages, 200, 0.5, seed=11)

    def work(p):
        if workload == "circuit":
            W.run_circuit(p, lay, gates)
        else:
            W.run_mix(p, lay, steps)

    ref = W.MemoryPager(lay)
    W.init_state(ref, lay, seed=7)
    work(ref)
    want = W.checksum(ref.lines)
    with nvmelab.open(URI) as t, Volume.open(t, layout="raid0", chunk=8192, qdepth=8) as vol:
        if kind == "direct":
            pager = W.DirectPager(vol, lay, 8 * lay.page)
        else:
            pager = Cache(
                vol,
                8 * lay.page,
                lay.page,
                dtype=lay.np_dtype,
                policy=kind[: kind.find("-")] if "-" in kind else kind,
                readahead=3 if kind.endswith("-ra") else 0,
            )
        try:
            got = _paged_run(pager, vol, lay, work)
        finally:
            pager.close()
        if kind != "direct":
            st = pager.stats()
            assert st["evictions"] > 0 and st["dirty"] == 0
    assert got == want


def test_layout_validation():
    with pytest.raises(ValueError, match="dtype"):
        W.StateLayout(10, "float32")
    with pytest.raises(ValueError, match="page"):
        W.StateLayout(10, "complex64", 3000)
    with pytest.raises(ValueError, match="smaller than one page"):
        W.StateLayout(4, "complex64", 4096)
    with pytest.raises(ValueError, match="write_fraction"):
        W.random_mix(4, 4, 1.5)


def test_fault_mid_workload_surfaces_and_cache_stays_consistent():
    """A device error in the middle of a circuit stops it with TierIOError; once the device is
    healthy again, a flush puts exactly the cache's view of the state on the devices."""
    from nvmelab.engines.tier import TierIOError

    lay = W.StateLayout(14, "complex64", 4096)
    gates = W.random_circuit(lay.nqubits, 6, seed=5)
    with nvmelab.open(URI) as t, Volume.open(t, layout="raid0", chunk=8192, qdepth=8) as vol:
        W.write_initial_state(vol, lay, seed=1)
        with Cache(vol, 8 * lay.page, lay.page, dtype=lay.np_dtype, readahead=2) as c:
            t[2].emu_inject("status", nth=20, sct=0, sc=0x06)  # 20th command on device 2 fails
            with pytest.raises(TierIOError, match="Internal Error"):
                W.run_circuit(c, lay, gates)
            t[2].emu_inject("none")
            assert not c._pinned.any()
            through_cache = c.read(0, lay.nbytes)
            c.flush()
        assert np.array_equal(vol.read(0, lay.nbytes), through_cache)
