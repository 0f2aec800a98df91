/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bd_sample.h — how often the per-I/O time breakdown (issue 24) stamps a command: the one rule shared by
 * the CPU perf engine (engine/perf.h perf_bd_of_timed), the CPU stand-in of cuda-run (nvme/gpuq_ctrl.c) and
 * the CUDA kernel (engine/cuda/crun_kernel.cu), so their records' breakdowns sample alike.
 *
 * Key items: NVME_BD_SAMPLE_EVERY (the default: one command in this many), nvme_bd_sample_every(qdepth)
 * (the rule at a queue depth), nvme_bd_sampled(cmd, every) (is running command number cmd stamped).
 *
 * Why 256: the stamps cost one to three extra clock reads and five histogram or store updates per stamped
 * command, and on the emulated null controller one clock_gettime (about 30 ns here) costs more than a whole
 * I/O (about 23 ns at QD 128). At one in 64 the perf engine's estimated time cost was 3.5 % at QD 16 and 3.0 %
 * at QD 128 on the quiet host; at one in 256 it is a quarter of that, below 2 % of the time and the
 * instructions of one I/O at queue depths 1, 16 and 128 on both CPU engines (measured by
 * tests/bench/bench_breakdown_cost.py: callgrind instructions with the breakdown on and off, clock reads
 * counted x the measured cost of one read; src/README.md has the table). A standard-preset record on a
 * model-limited target still keeps some hundreds of stamped commands, and one on null millions. The GPU's
 * cost (%globaltimer reads, the stores of the samples) is measured on the first GPU lease by the same bench
 * (--gpu).
 *
 * Caveats: plain C11, C++ and CUDA safe (NVME_HD: __host__ __device__ under nvcc); nothing but stdint.
 * A power-of-two `every` costs a mask per command, any other a 64-bit remainder.
 */
#ifndef NVME_BD_SAMPLE_H
#define NVME_BD_SAMPLE_H

#include <stdint.h>

#ifdef __CUDACC__
#define NVME_BD_HD __host__ __device__
#else
#define NVME_BD_HD
#endif

#define NVME_BD_SAMPLE_EVERY 256u /* breakdown: one command in this many is stamped (a power of two) */

/* The breakdown's sampling period at a queue depth (the same at every depth: see above). */
static inline NVME_BD_HD uint32_t nvme_bd_sample_every(uint32_t qdepth)
{
    (void)qdepth;
    return NVME_BD_SAMPLE_EVERY;
}

/* Is command number `cmd` (a running count) one of the stamped ones, one in `every` (0: none)? */
static inline NVME_BD_HD int nvme_bd_sampled(uint64_t cmd, uint32_t every)
{
    if (!every)
        return 0;
    return (every & (every - 1u)) ? cmd % every == 0u : (cmd & (every - 1u)) == 0u;
}

#endif /* NVME_BD_SAMPLE_H */
