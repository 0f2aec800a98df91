/* SPDX-License-Identifier: BSD-3-Clause */
/* test_emu_regs.c — emu:// URI validation, register semantics, bring-up and Identify. */
#include "emu_testhost.h"
#include "nvme/emu/profiles.h"

static void expect_open_error(const char *uri, const char *needle)
{
    struct th t;
    char err[256] = "";
    int r = th_open_err(&t, uri, 0, err, sizeof(err));
    if (r >= 0 || !strstr(err, needle)) {
        fprintf(stderr, "URI %s: r=%d err='%s', expected '%s'\n", uri, r, err, needle);
        abort();
    }
}

static void test_uri_errors(void)
{
    expect_open_error("emu://?bogus=1", "unknown parameter 'bogus'");
    expect_open_error("emu://?ndev=0", "'ndev': bad value '0'");
    expect_open_error("emu://?ndev=65", "'ndev'");
    expect_open_error("emu://?lbads=1024", "'lbads': bad value '1024'");
    expect_open_error("emu://?nsze=12Q", "nsze");
    expect_open_error("emu://?nsze=1000&lbads=4096", "not a multiple of lbads");
    expect_open_error("emu://?mdts=6KiB", "'mdts': bad value '6KiB'");
    expect_open_error("emu://?mqes=1", "'mqes': bad value '1'");
    expect_open_error("emu://?nioq=0", "'nioq'");
    expect_open_error("emu://?dstrd=9", "'dstrd'");
    expect_open_error("emu://?backing=disk", "'backing': bad value 'disk'");
    expect_open_error("emu://?profile=nope", "unknown profile 'nope'");
    expect_open_error("emu://?scale=0", "'scale': bad value '0'");
    expect_open_error("emu://?scale=abc", "'scale'");
    expect_open_error("emu://?mode=fast", "'mode': bad value 'fast'");
    expect_open_error("emu://?ooo=maybe", "'ooo'");
    expect_open_error("emu://?data=some", "'data'");
    expect_open_error("emu://?lat=5parsecs", "'lat': bad time '5parsecs'");
    expect_open_error("emu://?bw=fast", "'bw'");
    expect_open_error("emu://?ndev=3&lbads=512,4096", "has 2 values; give 1 or ndev=3");
    expect_open_error("emu://?ncap=2GiB&nsze=1GiB", "'ncap'");
    expect_open_error("emu://host?ndev=1", "no host part");
    expect_open_error("emu://?backing=file:/proc/nonexistent/dir/x", "cannot open");
    expect_open_error("emu://?backing=file:/dev/null", "not a regular file");
}

static void test_registers(void)
{
    struct th t;
    th_open(&t, "emu://?mqes=1024&dstrd=2&nioq=8&mdts=256KiB");
    uint64_t cap = th_r64(&t, NVME_REG_CAP);
    CHECK_EQ(nvme_cap_mqes(cap), 1023);
    CHECK(nvme_cap_cqr(cap));
    CHECK_EQ(nvme_cap_dstrd(cap), 2);
    CHECK(nvme_cap_to(cap) >= 1);
    CHECK(nvme_cap_css(cap) & NVME_CAP_CSS_NVM);
    CHECK_EQ(nvme_cap_mpsmin(cap), 0);
    CHECK_EQ(nvme_cap_mpsmax(cap), 0);
    CHECK_EQ(th_r32(&t, NVME_REG_VS), NVME_VS(1, 4, 0));
    CHECK_EQ(th_r32(&t, NVME_REG_CSTS), 0);
    /* BAR covers the doorbells of nioq + admin at stride 16 */
    CHECK(t.bar->size >= nvme_db_cq_off(8, 2) + 4);
    /* read-only registers come back after a store */
    th_w64(&t, NVME_REG_CAP, 0);
    CHECK_EQ(th_r64(&t, NVME_REG_CAP), cap);
    th_w32(&t, NVME_REG_CSTS, 0xffffffffu);
    CHECK_EQ(th_r32(&t, NVME_REG_CSTS), 0);

    /* CC.EN with invalid admin queue attributes: no RDY, CFS set */
    th_w32(&t, NVME_REG_AQA, 0);
    th_w64(&t, NVME_REG_ASQ, 0);
    th_w64(&t, NVME_REG_ACQ, 0);
    th_w32(&t, NVME_REG_CC, th_cc());
    CHECK(!nvme_csts_rdy(th_r32(&t, NVME_REG_CSTS)));
    CHECK(nvme_csts_cfs(th_r32(&t, NVME_REG_CSTS)));
    th_w32(&t, NVME_REG_CC, 0); /* reset clears CFS */
    CHECK_EQ(th_r32(&t, NVME_REG_CSTS), 0);
    /* misaligned ASQ */
    void *m = th_alloc(2 * TH_PAGE);
    th_w32(&t, NVME_REG_AQA, NVME_AQA(16, 16));
    th_w64(&t, NVME_REG_ASQ, (uintptr_t)m + 64);
    th_w64(&t, NVME_REG_ACQ, (uintptr_t)m + TH_PAGE);
    th_w32(&t, NVME_REG_CC, th_cc());
    CHECK(nvme_csts_cfs(th_r32(&t, NVME_REG_CSTS)));
    th_w32(&t, NVME_REG_CC, 0);
    /* MPS other than 4 KiB is refused */
    th_w64(&t, NVME_REG_ASQ, (uintptr_t)m);
    th_w32(&t, NVME_REG_CC, th_cc() | (1u << NVME_CC_MPS_SHIFT));
    CHECK(nvme_csts_cfs(th_r32(&t, NVME_REG_CSTS)));
    th_w32(&t, NVME_REG_CC, 0);
    th_free(m);

    CHECK(th_enable(&t, 32));
    /* Identify Controller */
    struct nvme_id_ctrl *id = th_alloc(sizeof(*id));
    struct nvme_sqe c = {.opc = NVME_ADM_IDENTIFY, .prp1 = (uintptr_t)id, .cdw10 = NVME_CNS_CTRL};
    struct nvme_cqe e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(id->mdts, 6); /* 256 KiB = 4 KiB << 6 */
    CHECK_EQ(id->nn, 1);
    CHECK_EQ(id->sqes, 0x66);
    CHECK_EQ(id->cqes, 0x44);
    CHECK(id->oncs & NVME_ONCS_WRITE_ZEROES);
    CHECK(id->oncs & NVME_ONCS_DSM);
    CHECK(memcmp(id->sn, "EMU", 3) == 0);
    CHECK_EQ(id->ver, NVME_VS(1, 4, 0));

    /* shutdown: SHST complete; then disable: RDY 0 and SHST cleared on the next enable */
    th_w32(&t, NVME_REG_CC, th_cc() | (NVME_CC_SHN_NORMAL << NVME_CC_SHN_SHIFT));
    CHECK_EQ(nvme_csts_shst(th_r32(&t, NVME_REG_CSTS)), NVME_CSTS_SHST_COMPLETE);
    th_w32(&t, NVME_REG_CC, 0);
    CHECK(th_wait_rdy(&t, false));
    CHECK(th_enable(&t, 8));
    CHECK_EQ(nvme_csts_shst(th_r32(&t, NVME_REG_CSTS)), NVME_CSTS_SHST_NORMAL);
    /* the admin queue works after re-enable and its phase wraps (8 entries, 40 commands) */
    for (int i = 0; i < 40; i++) {
        e = th_cmd(&t, 0, c);
        CHECK_EQ(th_status(&e), 0);
        CHECK_EQ(e.sqhd, (i + 1) % 8);
    }
    th_free(id);
    th_close(&t);
}

static void test_identify_shapes(void)
{
    struct th t;
    th_open(&t, "emu://?ndev=2&nns=3,1&lbads=512,4096&nsze=64MiB,1GiB&ncap=64MiB,512MiB");
    CHECK_EQ(nvme_emu_set_count(t.set), 2);
    CHECK(nvme_emu_set_bar(t.set, 2) == NULL);
    CHECK(th_enable(&t, 16));
    struct nvme_id_ns *ns = th_alloc(sizeof(*ns));
    struct nvme_sqe c = {.opc = NVME_ADM_IDENTIFY, .nsid = 3, .prp1 = (uintptr_t)ns, .cdw10 = NVME_CNS_NS};
    struct nvme_cqe e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(ns->nsze, (64ull << 20) / 512);
    CHECK_EQ(nvme_id_ns_lbads(ns), 9);
    c.nsid = 4;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), TH_ST(NVME_SCT_GENERIC, NVME_SC_INVALID_NS));
    CHECK(nvme_cqe_dnr(e.status));
    /* active namespace list after nsid 1: 2, 3 */
    uint32_t *list = th_alloc(TH_PAGE);
    c = (struct nvme_sqe){
        .opc = NVME_ADM_IDENTIFY, .nsid = 1, .prp1 = (uintptr_t)list, .cdw10 = NVME_CNS_ACTIVE_NS_LIST};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(list[0], 2);
    CHECK_EQ(list[1], 3);
    CHECK_EQ(list[2], 0);
    /* unknown CNS */
    c.cdw10 = 0x55;
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_sc(&e), TH_ST(NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD));
    th_close(&t);

    /* controller 1: 4 KiB LBAs, thin provisioned */
    char err[256];
    CHECK_EQ(
        th_open_err(&t, "emu://?ndev=2&nns=3,1&lbads=512,4096&nsze=64MiB,1GiB&ncap=64MiB,512MiB", 1, err, sizeof(err)),
        0);
    CHECK(th_enable(&t, 16));
    c = (struct nvme_sqe){.opc = NVME_ADM_IDENTIFY, .nsid = 1, .prp1 = (uintptr_t)ns, .cdw10 = NVME_CNS_NS};
    e = th_cmd(&t, 0, c);
    CHECK_EQ(th_status(&e), 0);
    CHECK_EQ(ns->nsze, (1ull << 30) / 4096);
    CHECK_EQ(ns->ncap, (512ull << 20) / 4096);
    CHECK_EQ(nvme_id_ns_lbads(ns), 12);
    CHECK(ns->nsfeat & 1);
    char desc[256];
    nvme_emu_set_describe(t.set, desc, sizeof(desc));
    CHECK(strstr(desc, "profile=null") && strstr(desc, "ndev=2"));
    th_free(ns);
    th_free(list);
    th_close(&t);
}

/* --profiles-json: the effective profile table, for tests/test_emu_profiles.py */
static void dump_profiles(void)
{
    const struct nvme_emu_profile *p;
    printf("[");
    for (unsigned i = 0; (p = nvme_emu_profile_at(i)); i++)
        printf("%s{\"name\": \"%s\", \"default_scale\": %.17g, \"lat_ns\": %.17g, \"lat_sigma\": %.17g, "
               "\"dev_iops\": %.17g, \"dev_bw\": %.17g, \"queue_iops\": %.17g, \"fetch_burst\": %u, "
               "\"link_bw\": %.17g}",
               i ? ", " : "", p->name, p->default_scale, p->lat_ns, p->lat_sigma, p->dev_iops, p->dev_bw, p->queue_iops,
               p->fetch_burst, p->link_bw);
    printf("]\n");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--profiles-json") == 0) {
        dump_profiles();
        return 0;
    }
    RUN_CASE(test_uri_errors);
    RUN_CASE(test_registers);
    RUN_CASE(test_identify_shapes);
    return CHECK_DONE("test_emu_regs");
}
