/* SPDX-License-Identifier: BSD-3-Clause */
/* test_uri_values.c — the value grammars of uri.h (unsigned integers: decimal or 0x and hex digits, nothing
 * else) on what libFuzzer found them taking (tests/fuzz/fuzz_uri.c; the inputs are seeds of
 * tests/fuzz/corpus/uri/): strtoull's sign, spaces and a second "0x" after the first one. */
#include <errno.h>
#include <stdint.h>

#include "check.h"
#include "nvme/uri.h"

static void unsigned_integers_are_digits_only(void)
{
    static const char *const bad[] = {"0x0xebe", "0x0x10", "0x-1", "0x+1", "0x 5", "0x\t5", "0X-ff", "1 ",
                                      " 1",      "-1",     "+5",   "0x",   "",     "12a",   "0xg"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 7;
        int rc = nvme_parse_u64(bad[i], &v);
        if (rc != -EINVAL)
            fprintf(stderr, "  nvme_parse_u64 took '%s' as %llu\n", bad[i], (unsigned long long)v);
        CHECK_EQ(rc, -EINVAL);
        rc = nvme_parse_size(bad[i], &v);
        if (rc != -EINVAL)
            fprintf(stderr, "  nvme_parse_size took '%s' as %llu\n", bad[i], (unsigned long long)v);
        CHECK_EQ(rc, -EINVAL);
        CHECK_EQ(v, 7);
    }
    uint64_t v = 0;
    CHECK_EQ(nvme_parse_u64("0xFFFFFFFFFFFFFFFF", &v), 0);
    CHECK(v == UINT64_MAX);
    CHECK_EQ(nvme_parse_u64("0x10000000000000000", &v), -EINVAL);
    CHECK_EQ(nvme_parse_u64("0X1f", &v), 0);
    CHECK_EQ(v, 31);
    CHECK_EQ(nvme_parse_u64("007", &v), 0);
    CHECK_EQ(v, 7);
    CHECK_EQ(nvme_parse_size("0x1000", &v), 0);
    CHECK_EQ(v, 4096);
    CHECK_EQ(nvme_parse_size("4KiB", &v), 0);
    CHECK_EQ(v, 4096);
}

/* Through a URI: a getter names the key and the value it refuses. */
static void a_uri_value_with_a_sign_is_refused(void)
{
    struct nvme_uri *u = NULL;
    char err[256] = "";
    REQUIRE_EQ(nvme_uri_parse("emu://?seed=0x-1&nsze=0x0x10", &u, err, sizeof(err)), 0);
    uint64_t v = 0;
    CHECK_EQ(nvme_uri_get_u64(u, "seed", 0, &v, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "parameter 'seed': bad unsigned integer '0x-1'");
    CHECK_EQ(nvme_uri_get_size(u, "nsze", 0, &v, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "parameter 'nsze': bad size '0x0x10'");
    nvme_uri_free(u);
}

int main(void)
{
    RUN_CASE(unsigned_integers_are_digits_only);
    RUN_CASE(a_uri_value_with_a_sign_is_refused);
    return CHECK_DONE("test_uri_values");
}
