/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check.h — the one assertion harness of the C tests (tests/c/test_*.c): named cases, every failure
 * reported with file:line and the expression, not stop-at-first, one summary line per program.
 *
 * Key items:
 *   CHECK(cond), CHECK_EQ(a, b), CHECK_STREQ(a, b), CHECK_CONTAINS(hay, needle)
 *                       record a failure (file:line, expression, values) and go on;
 *   T_CHECK, T_EQ, T_STREQ, T_CONTAINS   the same under the names test_driver.h used;
 *   REQUIRE(cond), REQUIRE_EQ(a, b)      the same, then end the current case (longjmp back to RUN_CASE;
 *                       outside a case: the summary and exit 1) — for what the rest of a case depends on;
 *   RUN_CASE(fn)        run `static void fn(void)` as the case named "fn", one line per failed case;
 *   CHECK_DONE(name)    print "name: N passed, N failed" (checks and cases) and return the exit status
 *                       for main: 0 when nothing failed, 1 otherwise.
 *   `prog --case NAME`  run only the case NAME (what main does outside cases still runs: its fixture);
 *                       a NAME that no RUN_CASE reached fails. ctest runs every case so, one entry each
 *                       (tests/c/CMakeLists.txt lists a program's RUN_CASE(...) lines at configure time).
 *
 * Caveats: header-only, one per program (its counters are file statics); cases run in order on one
 * thread; a case ended by REQUIRE leaks what it allocated (test code). A check after a failed CHECK may
 * see a state the failed one did not expect: use REQUIRE where continuing would crash. --case is read
 * before main by a constructor (glibc hands it argc/argv), so mains keep `int main(void)`; every case
 * must therefore stand alone, without state an earlier case left.
 */
#ifndef NVMELAB_TEST_CHECK_H
#define NVMELAB_TEST_CHECK_H

#include <setjmp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long check_passed_n, check_failed_n;
static unsigned check_cases_n, check_cases_failed_n;
static const char *check_case; /* the case running now, NULL outside RUN_CASE */
static jmp_buf check_case_jmp; /* where REQUIRE ends the current case */
static const char *check_only; /* --case NAME: the one case to run; NULL: every case */
static bool check_only_ran;    /* the --case NAME was reached */

/* Before main (glibc passes init functions argc and argv): find `--case NAME`; other arguments are the program's. */
__attribute__((constructor)) static void check_args(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--case") == 0)
            check_only = argv[i + 1];
}

static inline bool check_report(bool ok, const char *file, int line, const char *what)
{
    if (ok) {
        check_passed_n++;
        return true;
    }
    check_failed_n++;
    fprintf(stderr, "%s:%d: %s%s%sfailed: %s\n", file, line, check_case ? "[" : "", check_case ? check_case : "",
            check_case ? "] " : "", what);
    return false;
}

static inline bool check_eq(long long a, long long b, const char *file, int line, const char *ea, const char *eb)
{
    char msg[512];
    if (a == b)
        return check_report(true, file, line, "");
    snprintf(msg, sizeof(msg), "%s == %s (%lld != %lld)", ea, eb, a, b);
    return check_report(false, file, line, msg);
}

static inline bool check_streq(const char *a, const char *b, const char *file, int line, const char *ea)
{
    char msg[1024];
    if (a && b && strcmp(a, b) == 0)
        return check_report(true, file, line, "");
    snprintf(msg, sizeof(msg), "%s = \"%s\", expected \"%s\"", ea, a ? a : "(null)", b ? b : "(null)");
    return check_report(false, file, line, msg);
}

static inline bool check_contains(const char *hay, const char *needle, const char *file, int line)
{
    char msg[1024];
    if (hay && needle && strstr(hay, needle))
        return check_report(true, file, line, "");
    snprintf(msg, sizeof(msg), "\"%s\" contains \"%s\"", hay ? hay : "(null)", needle ? needle : "(null)");
    return check_report(false, file, line, msg);
}

static inline int check_done(const char *name)
{
    if (check_only && !check_only_ran) {
        fprintf(stderr, "%s: no case named \"%s\"\n", name, check_only);
        check_failed_n++;
    }
    printf("%s: %lu passed, %lu failed", name, check_passed_n, check_failed_n);
    if (check_cases_n)
        printf(" (%u cases, %u failed)", check_cases_n, check_cases_failed_n);
    printf("\n");
    fflush(stdout);
    return check_failed_n ? 1 : 0;
}

/* REQUIRE failed: end the case, or the program outside one. */
static inline void check_stop(void)
{
    if (check_case)
        longjmp(check_case_jmp, 1);
    fprintf(stderr, "stopping: a REQUIRE failed outside a case\n");
    check_done("(stopped)");
    exit(1);
}

static inline void check_run_case(void (*fn)(void), const char *name)
{
    if (check_only && strcmp(check_only, name) != 0)
        return;
    check_only_ran = true;
    unsigned long before = check_failed_n;
    check_cases_n++;
    check_case = name;
    if (setjmp(check_case_jmp) == 0)
        fn();
    else
        fprintf(stderr, "[%s] ended by a failed REQUIRE\n", name);
    check_case = NULL;
    if (check_failed_n != before) {
        check_cases_failed_n++;
        fprintf(stderr, "[%s] FAILED (%lu checks)\n", name, check_failed_n - before);
    }
}

#define CHECK(cond)          ((void)check_report(!!(cond), __FILE__, __LINE__, #cond))
#define CHECK_EQ(a, b)       ((void)check_eq((long long)(a), (long long)(b), __FILE__, __LINE__, #a, #b))
#define CHECK_STREQ(a, b)    ((void)check_streq((a), (b), __FILE__, __LINE__, #a))
#define CHECK_CONTAINS(h, n) ((void)check_contains((h), (n), __FILE__, __LINE__))
#define REQUIRE(cond)                                                                                                  \
    do {                                                                                                               \
        if (!check_report(!!(cond), __FILE__, __LINE__, #cond))                                                        \
            check_stop();                                                                                              \
    } while (0)
#define REQUIRE_EQ(a, b)                                                                                               \
    do {                                                                                                               \
        if (!check_eq((long long)(a), (long long)(b), __FILE__, __LINE__, #a, #b))                                     \
            check_stop();                                                                                              \
    } while (0)

/* the names test_driver.h used */
#define T_CHECK(cond)           CHECK(cond)
#define T_EQ(a, b)              CHECK_EQ(a, b)
#define T_STREQ(a, b)           CHECK_STREQ(a, b)
#define T_CONTAINS(hay, needle) CHECK_CONTAINS(hay, needle)

#define RUN_CASE(fn)            check_run_case(fn, #fn)
#define CHECK_DONE(name)        check_done(name)

#endif /* NVMELAB_TEST_CHECK_H */
