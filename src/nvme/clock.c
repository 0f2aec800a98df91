/* SPDX-License-Identifier: BSD-3-Clause */
/* clock.c — the qpair's tick counter (TSC on x86-64, CNTVCT on aarch64, else CLOCK_MONOTONIC) and its rate,
 * read once per poll for the timeouts (see qpair.h). */
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "nvme/qpair.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#define NS_PER_MS    1000000ull
#define CALIBRATE_NS (2 * NS_PER_MS) /* TSC calibration interval */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t nvme_clock_ticks(void)
{
#if defined(__x86_64__)
    return __rdtsc();
#elif defined(__aarch64__)
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v)::"memory");
    return v;
#else
    return mono_ns();
#endif
}

static uint64_t ticks_per_ms;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static void clock_calibrate(void)
{
#if defined(__x86_64__)
    uint64_t t0 = mono_ns(), c0 = nvme_clock_ticks();
    struct timespec pause = {0, (long)CALIBRATE_NS};
    nanosleep(&pause, NULL);
    uint64_t t1 = mono_ns(), c1 = nvme_clock_ticks();
    uint64_t dt = t1 - t0 ? t1 - t0 : 1;
    ticks_per_ms = (c1 - c0) * NS_PER_MS / dt;
#elif defined(__aarch64__)
    uint64_t frq;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(frq));
    ticks_per_ms = frq / 1000u;
#else
    ticks_per_ms = NS_PER_MS;
#endif
    if (ticks_per_ms == 0)
        ticks_per_ms = 1;
}

uint64_t nvme_clock_ticks_per_ms(void)
{
    pthread_once(&clock_once, clock_calibrate);
    return ticks_per_ms;
}
