/* SPDX-License-Identifier: BSD-3-Clause */
/* test_scheme.c — the one table of target-URI schemes (nvme/scheme.h) walked row by row: every scheme parses
 * and is found (any case), and every dispatcher of the C layers takes exactly the rows its flag names:
 * nvme_target_open (NVME_SCHEME_DRIVER), perf_target_open (NVME_SCHEME_PERF), blksum's image dispatcher
 * (NVME_SCHEME_IMAGE, NVME_SCHEME_NBD_EXPORT); the rest get the layer's message with its list generated
 * from the table. cuda-run's dispatcher is held to the table in tests/test_uri_helper.py (it needs the CUDA
 * library, reached through the bindings). Opens only emu:// targets and a temporary file: the other rows get
 * URIs their backends refuse before touching anything (no PCI function, no block device, no socket). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "blksum/blksum.h"
#include "blksum/image.h"
#include "check.h"
#include "engine/backend.h"
#include "nvme/nvme.h"
#include "nvme/scheme.h"
#include "nvme/uri.h"

#define URI_LEN    256u
#define ERR_LEN    512u
#define EMU_SMALL  "emu://?profile=null&nsze=1MiB"
#define FILE_BYTES 4096u
#define PATH_LEN   64u /* the temporary directory and its file */

static char tmpfile_path[PATH_LEN];

/* A URI of row r that its backend can open cheaply (emu://, file://) or refuses before it touches anything. */
static void probe_uri(const struct nvme_scheme *r, char *buf, size_t len)
{
    if (r->kind == NVME_SCHEME_EMU)
        snprintf(buf, len, "%s", EMU_SMALL);
    else if (r->kind == NVME_SCHEME_FILE)
        snprintf(buf, len, "file://%s", tmpfile_path);
    else
        snprintf(buf, len, "%s://", r->name); /* pci:// names no function, blk:// no absolute path, ... */
}

static void every_row_parses_and_is_found(void)
{
    REQUIRE_EQ(nvme_scheme_count(), NVME_SCHEME_COUNT);
    REQUIRE(nvme_scheme_at(NVME_SCHEME_COUNT) == NULL);
    for (unsigned i = 0; i < nvme_scheme_count(); i++) {
        const struct nvme_scheme *r = nvme_scheme_at(i);
        REQUIRE(r != NULL);
        CHECK_EQ((unsigned)r->kind, i);
        CHECK(r->what && r->what[0] && r->example && r->example[0]);
        CHECK(r->flags & (NVME_SCHEME_DRIVER | NVME_SCHEME_KIO | NVME_SCHEME_CUDA_RUN | NVME_SCHEME_IMAGE |
                          NVME_SCHEME_NBD_EXPORT)); /* some layer serves it */
        char uri[URI_LEN], upper[URI_LEN], err[ERR_LEN] = "";
        snprintf(uri, sizeof(uri), "%s://", r->name);
        struct nvme_uri *u = NULL;
        CHECK_EQ(nvme_uri_parse(uri, &u, err, sizeof(err)), 0);
        if (u)
            CHECK_STREQ(u->scheme, r->name);
        nvme_uri_free(u);
        CHECK(nvme_scheme_find(r->name) == r);
        CHECK(nvme_scheme_find(uri) == r);
        CHECK(nvme_scheme_of_uri(uri) == r);
        CHECK(nvme_scheme_of_uri(r->name) == NULL); /* a bare name is no URI: a file of that name */
        snprintf(upper, sizeof(upper), "%s", uri);
        for (char *p = upper; *p; p++)
            *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 'a' + 'A' : *p);
        CHECK(nvme_scheme_of_uri(upper) == r);
        CHECK(strncmp(r->example, uri, strlen(uri)) == 0); /* the example is a URI of its scheme */
        for (unsigned j = 0; j < i; j++)
            CHECK(strcmp(nvme_scheme_at(j)->name, r->name) != 0);
    }
    CHECK(nvme_scheme_find("nope://x") == NULL);
    CHECK(nvme_scheme_find("") == NULL);
    CHECK(nvme_scheme_find(NULL) == NULL);
    CHECK(nvme_scheme_of_uri("/tmp/emu://x") == NULL);
    CHECK(nvme_scheme_find(EMU_SMALL)->kind == NVME_SCHEME_EMU);
    CHECK(nvme_scheme_at(NVME_SCHEME_GPU_EMU)->flags & NVME_SCHEME_EMULATED);
    CHECK(!(nvme_scheme_at(NVME_SCHEME_PCI)->flags & NVME_SCHEME_EMULATED));
}

static void lists_follow_the_table(void)
{
    char buf[NVME_SCHEME_LIST_LEN];
    CHECK_STREQ(nvme_scheme_list(NVME_SCHEME_DRIVER, 0, buf, sizeof(buf)), "emu://, pci:// or vfio-user://");
    CHECK_STREQ(nvme_scheme_list(NVME_SCHEME_PERF, 0, buf, sizeof(buf)),
                "emu://, pci://, vfio-user://, file:// or blk://");
    CHECK_STREQ(nvme_scheme_list(NVME_SCHEME_PERF, NVME_SCHEME_LIST_EXAMPLES, buf, sizeof(buf)),
                "emu://..., pci://..., vfio-user:///path, file:///path or blk:///dev/X");
    CHECK_STREQ(nvme_scheme_list(NVME_SCHEME_KIO, NVME_SCHEME_LIST_AND, buf, sizeof(buf)), "file:// and blk://");
    CHECK_STREQ(nvme_scheme_list(NVME_SCHEME_CUDA_RUN, 0, buf, sizeof(buf)), "emu://, pci:// or gpu-emu://");
    CHECK_STREQ(nvme_scheme_list(NVME_SCHEME_EMULATED, 0, buf, sizeof(buf)), "emu:// or gpu-emu://");
    CHECK_STREQ(nvme_scheme_list(0, 0, buf, sizeof(buf)), "");
    char tiny[sizeof("emu://")]; /* room for one name: the list is cut */
    nvme_scheme_list(NVME_SCHEME_PERF, 0, tiny, sizeof(tiny));
    CHECK_EQ(strlen(tiny), sizeof(tiny) - 1u); /* cut, NUL-terminated */
    unsigned all = 0;
    for (unsigned i = 0; i < nvme_scheme_count(); i++)
        all |= nvme_scheme_at(i)->flags;
    CHECK(strlen(nvme_scheme_list(all, NVME_SCHEME_LIST_EXAMPLES, buf, sizeof(buf))) + 1u < sizeof(buf));
}

static void the_driver_takes_its_rows(void)
{
    for (unsigned i = 0; i < nvme_scheme_count(); i++) {
        const struct nvme_scheme *r = nvme_scheme_at(i);
        char uri[URI_LEN], err[ERR_LEN] = "";
        probe_uri(r, uri, sizeof(uri));
        struct nvme_target *t = NULL;
        int rc = nvme_target_open(uri, &t, err, sizeof(err));
        if (r->kind == NVME_SCHEME_EMU) {
            CHECK_EQ(rc, 0);
            nvme_target_close(t);
        } else if (r->flags & NVME_SCHEME_DRIVER) { /* its backend refused the URI, not the dispatcher */
            CHECK(rc < 0);
            CHECK(strstr(err, "unsupported scheme") == NULL);
        } else if (r->flags & NVME_SCHEME_KIO) {
            CHECK_EQ(rc, -EINVAL);
            CHECK_CONTAINS(err, "is a kernel I/O path");
        } else {
            CHECK_EQ(rc, -EINVAL);
            char want[URI_LEN + ERR_LEN]; /* the URI and the message after it */
            snprintf(want, sizeof(want), "unsupported scheme '%s://' (the driver takes emu://, pci:// or vfio-user://)",
                     r->name);
            CHECK_STREQ(err, want);
        }
    }
}

static void the_perf_engine_takes_its_rows(void)
{
    for (unsigned i = 0; i < nvme_scheme_count(); i++) {
        const struct nvme_scheme *r = nvme_scheme_at(i);
        char uri[URI_LEN], err[ERR_LEN] = "";
        probe_uri(r, uri, sizeof(uri));
        struct perf_target *t = NULL;
        struct perf_target_opts o = {0};
        int rc = perf_target_open(uri, &o, &t, err, sizeof(err));
        if (r->kind == NVME_SCHEME_EMU || r->kind == NVME_SCHEME_FILE) {
            CHECK_EQ(rc, 0);
            perf_target_close(t);
        } else if (r->flags & NVME_SCHEME_PERF) {
            CHECK(rc < 0);
            CHECK(strstr(err, "unknown target scheme") == NULL);
        } else {
            CHECK_EQ(rc, -EINVAL);
            char want[URI_LEN + ERR_LEN]; /* the URI and the message after it */
            snprintf(want, sizeof(want),
                     "%s: unknown target scheme (use emu://, pci://, vfio-user://, file:// or blk://)", uri);
            CHECK_STREQ(err, want);
        }
    }
    char err[ERR_LEN] = "";
    struct perf_target *t = NULL;
    CHECK_EQ(perf_target_open("", NULL, &t, err, sizeof(err)), -EINVAL);
    CHECK_STREQ(err, "target: empty URI (use emu://..., pci://..., vfio-user:///path, file:///path or blk:///dev/X)");
    struct perf_target_opts o = {.backend = "psync"};
    CHECK_EQ(perf_target_open(EMU_SMALL, &o, &t, err, sizeof(err)), -EINVAL);
    CHECK_CONTAINS(err, "backend=psync applies to file:// and blk:// only");
}

static void blksum_takes_its_rows(void)
{
    for (unsigned i = 0; i < nvme_scheme_count(); i++) {
        const struct nvme_scheme *r = nvme_scheme_at(i);
        char uri[URI_LEN], err[BLKSUM_IMAGE_ERRLEN] = "";
        probe_uri(r, uri, sizeof(uri));
        CHECK_EQ(blksum_is_nbd_uri(uri), (r->flags & NVME_SCHEME_NBD_EXPORT) != 0);
        struct blksum_source src;
        /* mode file names the dispatcher's choice without opening anything */
        int rc = blksum_source_open_image(&src, uri, BLKSUM_MODE_FILE, err, sizeof(err));
        CHECK(rc < 0);
        if (r->flags & NVME_SCHEME_NBD_EXPORT)
            CHECK_CONTAINS(err, "an NBD URI is read with mode nbd");
        else if (r->flags & NVME_SCHEME_IMAGE)
            CHECK_CONTAINS(err, "an engine target URI is read with mode auto");
        else
            CHECK_EQ(rc, -ENOENT); /* a file of that name */
        if (r->kind == NVME_SCHEME_EMU || r->kind == NVME_SCHEME_FILE) {
            CHECK_EQ(blksum_source_open_image(&src, uri, BLKSUM_MODE_AUTO, err, sizeof(err)), 0);
            blksum_source_close(&src);
        }
    }
}

int main(void)
{
    char dir[] = "/tmp/nvmelab-scheme-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    snprintf(tmpfile_path, sizeof(tmpfile_path), "%s/img", dir);
    FILE *f = fopen(tmpfile_path, "wb");
    REQUIRE(f != NULL);
    static const char zeros[FILE_BYTES];
    REQUIRE_EQ(fwrite(zeros, 1, sizeof(zeros), f), sizeof(zeros));
    fclose(f);
    RUN_CASE(every_row_parses_and_is_found);
    RUN_CASE(lists_follow_the_table);
    RUN_CASE(the_driver_takes_its_rows);
    RUN_CASE(the_perf_engine_takes_its_rows);
    RUN_CASE(blksum_takes_its_rows);
    unlink(tmpfile_path);
    rmdir(dir);
    return CHECK_DONE("test_scheme");
}
