/* SPDX-License-Identifier: BSD-3-Clause */
/* test_emu_keys.c — the one key table of both emulators (emu_keys.h): canonical spellings, old spellings
 * (accepted, named in a warning), the known-keys message, profile and scale parsed once. */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "nvme/emu/emu.h"
#include "nvme/emu/emu_keys.h"

#define ERRLEN 384u

/* Open an emu:// target over key=value pairs; 0 or the error, warnings copied into warn. */
static int emu_open(const struct nvme_emu_kv *kv, size_t n, char *warn, size_t warnlen, char *err)
{
    struct nvme_emu_set *set = NULL;
    int rc = nvme_emu_target_open_kv(kv, n, &set, err, ERRLEN);
    if (!rc) {
        snprintf(warn, warnlen, "%s", nvme_emu_set_warnings(set));
        nvme_emu_set_close(set);
    }
    return rc;
}

static void test_canonical_spellings(void)
{
    char warn[NVME_EMU_WARN_LEN] = "", err[ERRLEN] = "";
    const struct nvme_emu_kv kv[] = {{"nsze", "4MiB"}, {"lbads", "4096"}, {"data", "copy"}, {"mdts", "128KiB"}};
    CHECK_EQ(emu_open(kv, 4, warn, sizeof(warn), err), 0);
    CHECK_STREQ(warn, "");
    /* gpu-emu takes the same spellings, without a warning */
    const char *g[] = {"nsze", "lbads", "data", "mdts", "blocks"};
    warn[0] = 0;
    CHECK_EQ(nvme_emu_keys_check("gpu-emu: ", NVME_EMU_GPU, g, 5, warn, sizeof(warn), err, sizeof(err)), 0);
    CHECK_STREQ(warn, "");
    CHECK_STREQ(nvme_emu_value("gpu-emu: ", "data", "copy", warn, sizeof(warn)), "copy");
    CHECK_STREQ(warn, "");
}

static void test_old_spellings_warn(void)
{
    char warn[NVME_EMU_WARN_LEN] = "", err[ERRLEN] = "";
    const struct nvme_emu_kv kv[] = {{"ns", "4MiB"}, {"lba", "4096"}, {"data", "ram"}};
    CHECK_EQ(emu_open(kv, 3, warn, sizeof(warn), err), 0);
    CHECK_CONTAINS(warn, "emu: parameter 'ns' is now 'nsze'");
    CHECK_CONTAINS(warn, "parameter 'lba' is now 'lbads'");
    CHECK_CONTAINS(warn, "parameter value 'data=ram' is now 'data=copy'");
    /* the old spelling means the same: lba=1024 is refused under the canonical name */
    const struct nvme_emu_kv bad[] = {{"lba", "1024"}};
    CHECK_EQ(emu_open(bad, 1, warn, sizeof(warn), err), -EINVAL);
    CHECK_CONTAINS(err, "'lbads': bad value '1024'");
    /* both spellings of one key: given twice */
    const struct nvme_emu_kv twice[] = {{"nsze", "4MiB"}, {"ns", "4MiB"}};
    CHECK_EQ(emu_open(twice, 2, warn, sizeof(warn), err), -EINVAL);
    CHECK_CONTAINS(err, "parameter 'nsze' given twice");
    /* gpu-emu: the same rows */
    const char *g[] = {"ns", "lba"};
    warn[0] = 0;
    CHECK_EQ(nvme_emu_keys_check("gpu-emu: ", NVME_EMU_GPU, g, 2, warn, sizeof(warn), err, sizeof(err)), 0);
    CHECK_CONTAINS(warn, "gpu-emu: parameter 'ns' is now 'nsze'");
    CHECK_STREQ(nvme_emu_key_name("nsze", g, 2), "ns");
    CHECK_STREQ(nvme_emu_value("gpu-emu: ", "data", "ram", warn, sizeof(warn)), "copy");
}

/* The unknown-key message lists exactly the rows the emulator takes, in table order. */
static void test_known_keys_message(void)
{
    static const unsigned who[] = {NVME_EMU_CPU, NVME_EMU_GPU};
    static const char *const prefix[] = {"emu: ", "gpu-emu: "};
    for (unsigned w = 0; w < 2; w++) {
        char want[ERRLEN], err[ERRLEN] = "";
        size_t o = (size_t)snprintf(want, sizeof(want), "%sunknown parameter 'colour' (known:", prefix[w]);
        const struct nvme_emu_key *k;
        for (unsigned i = 0; (k = nvme_emu_key_at(i)); i++)
            if (k->who & who[w])
                o += (size_t)snprintf(want + o, sizeof(want) - o, " %s", k->name);
        snprintf(want + o, sizeof(want) - o, ")");
        const char *keys[] = {"ndev", "colour"};
        CHECK_EQ(nvme_emu_keys_check(prefix[w], who[w], keys, 2, NULL, 0, err, sizeof(err)), -EINVAL);
        CHECK_STREQ(err, want);
    }
    /* emu:// through its parser: the same message */
    char warn[NVME_EMU_WARN_LEN], err[ERRLEN] = "";
    const struct nvme_emu_kv kv[] = {{"colour", "blue"}};
    CHECK_EQ(emu_open(kv, 1, warn, sizeof(warn), err), -EINVAL);
    CHECK_CONTAINS(err, "emu: unknown parameter 'colour' (known: ndev nns nsze ncap lbads mdts");
    /* a gpu-only key is unknown to emu:// and the reverse */
    const struct nvme_emu_kv gk[] = {{"blocks", "2"}};
    CHECK_EQ(emu_open(gk, 1, warn, sizeof(warn), err), -EINVAL);
    CHECK_CONTAINS(err, "unknown parameter 'blocks'");
    const char *ck[] = {"mqes"};
    CHECK_EQ(nvme_emu_keys_check("gpu-emu: ", NVME_EMU_GPU, ck, 1, NULL, 0, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "unknown parameter 'mqes'");
}

/* Every row is well formed: a name, an emulator, a default for each emulator that takes it. */
static void test_table_rows(void)
{
    const struct nvme_emu_key *k;
    unsigned n = 0;
    for (unsigned i = 0; (k = nvme_emu_key_at(i)); i++, n++) {
        CHECK(k->name && k->name[0] && k->values && k->doc && k->who && (k->who & ~NVME_EMU_BOTH) == 0);
        CHECK(!(k->who & NVME_EMU_CPU) == !k->def_cpu[0]);
        CHECK(!(k->who & NVME_EMU_GPU) == !k->def_gpu[0]);
        CHECK(!k->oldval == !k->newval);
        CHECK(!k->list || (k->who & NVME_EMU_CPU));
        for (unsigned j = 0; j < i; j++)
            CHECK(strcmp(nvme_emu_key_at(j)->name, k->name) != 0);
    }
    CHECK(n >= 30);
}

static void test_profile_scale_once(void)
{
    const struct nvme_emu_profile *p = NULL;
    double s = 0;
    char err[ERRLEN] = "";
    CHECK_EQ(nvme_emu_profile_scale("emu: ", "pm1753", NULL, true, &p, &s, err, sizeof(err)), 0);
    CHECK(p && s == p->default_scale && s > 1); /* emu:// runs a profile at its default scale */
    CHECK_EQ(nvme_emu_profile_scale("gpu-emu: ", "pm1753", NULL, false, &p, &s, err, sizeof(err)), 0);
    CHECK(s == 1.0); /* gpu-emu:// unscaled */
    CHECK_EQ(nvme_emu_profile_scale("x: ", NULL, "2.5", false, &p, &s, err, sizeof(err)), 0);
    CHECK(s == 2.5);
    CHECK_STREQ(p->name, "null");
    CHECK_EQ(nvme_emu_profile_scale("x: ", "nope", NULL, true, &p, &s, err, sizeof(err)), -EINVAL);
    CHECK_STREQ(err, "x: parameter 'profile': unknown profile 'nope' (known: null, pm1753, pm1753-p2p)");
    CHECK_EQ(nvme_emu_profile_scale("x: ", NULL, "2e6", true, &p, &s, err, sizeof(err)), -EINVAL);
    CHECK_STREQ(err, "x: parameter 'scale': bad value '2e6' (a number > 0, at most 1e6)");
}

int main(void)
{
    RUN_CASE(test_canonical_spellings);
    RUN_CASE(test_old_spellings_warn);
    RUN_CASE(test_known_keys_message);
    RUN_CASE(test_table_rows);
    RUN_CASE(test_profile_scale_once);
    return CHECK_DONE("test_emu_keys");
}
