/* SPDX-License-Identifier: BSD-3-Clause */
/* clock_cost.c — what one clock read costs on this host, for the breakdown's time estimate
 * (tests/bench/bench_breakdown_cost.py): clock_gettime(CLOCK_MONOTONIC) (the stamps' clock on the CPU) and
 * rdtsc (where the CPU has it), each read back to back in short loops of N reads, R loops: the best loop (the
 * read's own cost: a loop the scheduler interrupted is slower, never faster) and the median loop.
 *
 * Usage: clock_cost [N [R]]   (defaults 20000, 51)
 * Prints "clock_gettime_ns=X clock_gettime_median_ns=M rdtsc_ns=Y rdtsc_median_ns=Z" (rdtsc: nan on a CPU
 * without a TSC instruction). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_RDTSC 1
#endif

#define NS_PER_S 1000000000.0
#define MAX_REPS 1000

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / NS_PER_S;
}

int main(int argc, char **argv)
{
    const long n = argc > 1 ? strtol(argv[1], NULL, 0) : 20000L;
    const int reps = argc > 2 ? atoi(argv[2]) : 51;
    if (n <= 0 || reps <= 0 || reps > MAX_REPS) {
        fprintf(stderr, "usage: %s [N [R]] (N > 0, 0 < R <= %d)\n", argv[0], MAX_REPS);
        return 2;
    }
    static double cg[MAX_REPS], tsc[MAX_REPS];
    volatile uint64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        struct timespec ts;
        double t0 = now_s();
        for (long i = 0; i < n; i++) {
            clock_gettime(CLOCK_MONOTONIC, &ts);
            sink += (uint64_t)ts.tv_nsec;
        }
        cg[r] = (now_s() - t0) * NS_PER_S / (double)n;
        tsc[r] = NAN;
#ifdef HAVE_RDTSC
        t0 = now_s();
        for (long i = 0; i < n; i++)
            sink += __rdtsc();
        tsc[r] = (now_s() - t0) * NS_PER_S / (double)n;
#endif
    }
    qsort(cg, (size_t)reps, sizeof(double), cmp_double);
    qsort(tsc, (size_t)reps, sizeof(double), cmp_double);
    printf("clock_gettime_ns=%.2f clock_gettime_median_ns=%.2f rdtsc_ns=%.2f rdtsc_median_ns=%.2f\n", cg[0],
           cg[reps / 2], tsc[0], tsc[reps / 2]);
    (void)sink;
    return 0;
}
