/* SPDX-License-Identifier: BSD-3-Clause */
/* test_emu_throughput.c — emulator cost on the null profile: commands per second per core, inline mode,
 * through the raw test host (batches of BATCH reads per doorbell, completions reaped as they come).
 * As a ctest it only checks that commands flow and prints the figures; `make bench` runs it with
 * NVMELAB_EMU_MIN_RATE=5000000 to enforce the goal and parses the "result:" lines. */
#include <time.h>

#include "emu_testhost.h"

#define QSIZE 1024u
#define BATCH 256u
#define RUN_S 0.5

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double measure(const char *uri, const char *label, unsigned batch)
{
    struct th t;
    th_open(&t, uri);
    CHECK(th_enable(&t, 8));
    th_create_ioq(&t, 1, QSIZE);
    void *buf = th_alloc(TH_PAGE);
    struct nvme_sqe c = th_rw(NVME_CMD_READ, 1, 0, 1, buf, 0);
    uint64_t done = 0;
    double t0 = now_s(), c0 = cpu_s(), t1;
    do {
        for (unsigned i = 0; i < 64; i++) {
            for (unsigned b = 0; b < batch; b++) {
                c.cid = (uint16_t)b;
                th_queue(&t, 1, &c);
            }
            th_ring(&t, 1);
            struct nvme_cqe e = {0};
            for (unsigned b = 0; b < batch; b++) {
                CHECK(th_poll1(&t, 1, &e, b + 1 == batch));
                done++;
            }
        }
    } while ((t1 = now_s()) - t0 < RUN_S);
    double cpu = cpu_s() - c0;
    double rate = (double)done / cpu; /* per core: CPU time of this thread */
    printf("result: %s batch=%u cmds_per_s_per_core=%.0f (wall %.0f/s, %llu commands)\n", label, batch, rate,
           (double)done / (t1 - t0), (unsigned long long)done);
    struct nvme_emu_qstats qs;
    nvme_emu_queue_stats(t.set, 0, 1, &qs);
    CHECK_EQ(qs.completed, done);
    CHECK_EQ(qs.errors, 0);
    th_free(buf);
    th_close(&t);
    return rate;
}

int main(void)
{
    double none = measure("emu://?profile=null&data=none", "null data=none 512B", BATCH);
    measure("emu://?profile=null&data=copy", "null data=copy 512B", BATCH);
    measure("emu://?profile=null&data=none", "null data=none 512B", 1);
    const char *min = getenv("NVMELAB_EMU_MIN_RATE");
    if (min && none < strtod(min, NULL)) {
        fprintf(stderr, "emulator null path: %.0f commands/s per core < goal %s\n", none, min);
        return 1;
    }
    return CHECK_DONE("test_emu_throughput");
}
