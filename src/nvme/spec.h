/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * spec.h — NVMe (base 1.4 / NVM command set) definitions used by the driver, the emulated controller and
 * the CUDA queue code: controller registers and their fields, the doorbell layout, submission and
 * completion queue entry layouts, admin and NVM opcodes, the Identify data structures we read, status
 * code types and codes with their spec names.
 *
 * Key items: NVME_REG_* offsets; nvme_cap_*() / nvme_cc_*() / nvme_csts_*() / nvme_aqa_*() field
 * accessors; nvme_db_sq_off()/nvme_db_cq_off(); struct nvme_sqe (64 B), struct nvme_cqe (16 B) and the
 * nvme_cqe_*() status accessors; struct nvme_id_ctrl / struct nvme_id_ns (4096 B each);
 * nvme_status_name(sct, sc) and its inverse nvme_status_parse() (status.c).
 *
 * Caveats: layouts are little-endian, as on every host this project targets (x86-64, aarch64); a static
 * assert refuses a big-endian build. Only the fields the project uses are named; the rest is reserved
 * padding with its offset in the name. Header is plain C11 and C++/CUDA safe (accessors are
 * __host__ __device__ under nvcc). Includes nothing beyond the C standard library.
 */
#ifndef NVME_SPEC_H
#define NVME_SPEC_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <assert.h>
#include <stdbool.h>
#endif

#ifdef __CUDACC__
#define NVME_HD __host__ __device__
#else
#define NVME_HD
#endif

#define NVME_STATIC_ASSERT(cond, msg) static_assert(cond, msg)

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
NVME_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "NVMe layouts here assume a little-endian host");
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Sizes
 * ------------------------------------------------------------------------------------------------- */
#define NVME_SQE_SIZE          64u /* bytes per submission queue entry (IOSQES = 6) */
#define NVME_CQE_SIZE          16u /* bytes per completion queue entry (IOCQES = 4) */
#define NVME_SQES_LOG2         6u
#define NVME_CQES_LOG2         4u
#define NVME_IDENTIFY_SIZE     4096u /* Identify data structures */
#define NVME_PAGE_SHIFT_MIN    12u   /* memory page size = 2^(12 + CC.MPS) */
#define NVME_PAGE_SIZE_MIN     4096u
#define NVME_PRP_ENTRY_SIZE    8u /* one PRP entry (64-bit address) */
#define NVME_PRP_ALIGN         4u /* PRP entries must be dword aligned */
#define NVME_ADMIN_QID         0u
#define NVME_MAX_QID           65535u
#define NVME_ADMIN_QUEUE_MAX   4096u  /* AQA.ASQS/ACQS are 12-bit, 0-based */
#define NVME_QUEUE_MIN_ENTRIES 2u     /* a queue holds at least 2 entries (N-1 usable) */
#define NVME_NLB_MAX           65536u /* 16-bit 0-based NLB in CDW12 */
#define NVME_DSM_RANGE_SIZE    16u    /* one Dataset Management range */
#define NVME_DSM_MAX_RANGES    256u   /* NR is 8-bit, 0-based */
#define NVME_NS_LIST_MAX       1024u  /* entries in an Active Namespace ID list (4096 / 4) */
#define NVME_MDTS_UNIT_SHIFT   12u    /* MDTS is in units of the minimum page size (CAP.MPSMIN) */
#define NVME_CAP_TO_UNIT_MS    500u   /* CAP.TO is in 500 ms units */
#define NVME_LBAF_MAX          64u    /* LBA format descriptors in Identify Namespace */
#define NVME_SN_LEN            20u
#define NVME_MN_LEN            40u
#define NVME_FR_LEN            8u

/* ---------------------------------------------------------------------------------------------------
 * Controller registers (BAR0), offsets in bytes
 * ------------------------------------------------------------------------------------------------- */
enum {
    NVME_REG_CAP = 0x00,   /* 64: Controller Capabilities */
    NVME_REG_VS = 0x08,    /* 32: Version */
    NVME_REG_INTMS = 0x0c, /* 32: Interrupt Mask Set */
    NVME_REG_INTMC = 0x10, /* 32: Interrupt Mask Clear */
    NVME_REG_CC = 0x14,    /* 32: Controller Configuration */
    NVME_REG_CSTS = 0x1c,  /* 32: Controller Status */
    NVME_REG_NSSR = 0x20,  /* 32: NVM Subsystem Reset */
    NVME_REG_AQA = 0x24,   /* 32: Admin Queue Attributes */
    NVME_REG_ASQ = 0x28,   /* 64: Admin Submission Queue Base Address */
    NVME_REG_ACQ = 0x30,   /* 64: Admin Completion Queue Base Address */
    NVME_REG_DBS = 0x1000, /* doorbells start here */
};
#define NVME_NSSR_RESET_VALUE 0x4E564D65u /* "NVMe": written to NSSR to start a subsystem reset */
#define NVME_BAR0_MIN_SIZE    0x2000u     /* registers + admin and one I/O queue's doorbells at DSTRD 0 */

/* CAP fields */
static inline NVME_HD uint32_t nvme_cap_mqes(uint64_t cap)
{
    return (uint32_t)(cap & 0xffffu);
} /* 0-based */
static inline NVME_HD bool nvme_cap_cqr(uint64_t cap)
{
    return (cap >> 16) & 0x1u;
}
static inline NVME_HD uint32_t nvme_cap_ams(uint64_t cap)
{
    return (uint32_t)((cap >> 17) & 0x3u);
}
static inline NVME_HD uint32_t nvme_cap_to(uint64_t cap)
{
    return (uint32_t)((cap >> 24) & 0xffu);
} /* 500 ms units */
static inline NVME_HD uint32_t nvme_cap_dstrd(uint64_t cap)
{
    return (uint32_t)((cap >> 32) & 0xfu);
}
static inline NVME_HD bool nvme_cap_nssrs(uint64_t cap)
{
    return (cap >> 36) & 0x1u;
}
static inline NVME_HD uint32_t nvme_cap_css(uint64_t cap)
{
    return (uint32_t)((cap >> 37) & 0xffu);
}
static inline NVME_HD bool nvme_cap_bps(uint64_t cap)
{
    return (cap >> 45) & 0x1u;
}
static inline NVME_HD uint32_t nvme_cap_mpsmin(uint64_t cap)
{
    return (uint32_t)((cap >> 48) & 0xfu);
}
static inline NVME_HD uint32_t nvme_cap_mpsmax(uint64_t cap)
{
    return (uint32_t)((cap >> 52) & 0xfu);
}
#define NVME_CAP_CSS_NVM  0x01u /* CAP.CSS bit 0: NVM command set */
#define NVME_CAP_CSS_NOIO 0x80u /* CAP.CSS bit 7: no I/O command set */

/* Builders for the emulated controller (inverse of the accessors above) */
#define NVME_CAP_MQES(v)   ((uint64_t)((v) & 0xffffu))
#define NVME_CAP_CQR       ((uint64_t)1 << 16)
#define NVME_CAP_TO(v)     ((uint64_t)((v) & 0xffu) << 24)
#define NVME_CAP_DSTRD(v)  ((uint64_t)((v) & 0xfu) << 32)
#define NVME_CAP_NSSRS     ((uint64_t)1 << 36)
#define NVME_CAP_CSS(v)    ((uint64_t)((v) & 0xffu) << 37)
#define NVME_CAP_MPSMIN(v) ((uint64_t)((v) & 0xfu) << 48)
#define NVME_CAP_MPSMAX(v) ((uint64_t)((v) & 0xfu) << 52)

/* VS */
#define NVME_VS(mjr, mnr, ter) (((uint32_t)(mjr) << 16) | ((uint32_t)(mnr) << 8) | (uint32_t)(ter))
static inline NVME_HD uint32_t nvme_vs_mjr(uint32_t vs)
{
    return vs >> 16;
}
static inline NVME_HD uint32_t nvme_vs_mnr(uint32_t vs)
{
    return (vs >> 8) & 0xffu;
}
static inline NVME_HD uint32_t nvme_vs_ter(uint32_t vs)
{
    return vs & 0xffu;
}

/* CC fields */
#define NVME_CC_EN           (1u << 0)
#define NVME_CC_CSS_SHIFT    4u
#define NVME_CC_CSS_MASK     (0x7u << NVME_CC_CSS_SHIFT)
#define NVME_CC_CSS_NVM      0u
#define NVME_CC_MPS_SHIFT    7u
#define NVME_CC_MPS_MASK     (0xfu << NVME_CC_MPS_SHIFT)
#define NVME_CC_AMS_SHIFT    11u
#define NVME_CC_AMS_MASK     (0x7u << NVME_CC_AMS_SHIFT)
#define NVME_CC_SHN_SHIFT    14u
#define NVME_CC_SHN_MASK     (0x3u << NVME_CC_SHN_SHIFT)
#define NVME_CC_SHN_NONE     0u
#define NVME_CC_SHN_NORMAL   1u
#define NVME_CC_SHN_ABRUPT   2u
#define NVME_CC_IOSQES_SHIFT 16u
#define NVME_CC_IOSQES_MASK  (0xfu << NVME_CC_IOSQES_SHIFT)
#define NVME_CC_IOCQES_SHIFT 20u
#define NVME_CC_IOCQES_MASK  (0xfu << NVME_CC_IOCQES_SHIFT)
static inline NVME_HD bool nvme_cc_en(uint32_t cc)
{
    return cc & NVME_CC_EN;
}
static inline NVME_HD uint32_t nvme_cc_css(uint32_t cc)
{
    return (cc & NVME_CC_CSS_MASK) >> NVME_CC_CSS_SHIFT;
}
static inline NVME_HD uint32_t nvme_cc_mps(uint32_t cc)
{
    return (cc & NVME_CC_MPS_MASK) >> NVME_CC_MPS_SHIFT;
}
static inline NVME_HD uint32_t nvme_cc_ams(uint32_t cc)
{
    return (cc & NVME_CC_AMS_MASK) >> NVME_CC_AMS_SHIFT;
}
static inline NVME_HD uint32_t nvme_cc_shn(uint32_t cc)
{
    return (cc & NVME_CC_SHN_MASK) >> NVME_CC_SHN_SHIFT;
}
static inline NVME_HD uint32_t nvme_cc_iosqes(uint32_t cc)
{
    return (cc & NVME_CC_IOSQES_MASK) >> NVME_CC_IOSQES_SHIFT;
}
static inline NVME_HD uint32_t nvme_cc_iocqes(uint32_t cc)
{
    return (cc & NVME_CC_IOCQES_MASK) >> NVME_CC_IOCQES_SHIFT;
}

/* CSTS fields */
#define NVME_CSTS_RDY            (1u << 0)
#define NVME_CSTS_CFS            (1u << 1)
#define NVME_CSTS_SHST_SHIFT     2u
#define NVME_CSTS_SHST_MASK      (0x3u << NVME_CSTS_SHST_SHIFT)
#define NVME_CSTS_SHST_NORMAL    0u /* normal operation */
#define NVME_CSTS_SHST_OCCURRING 1u
#define NVME_CSTS_SHST_COMPLETE  2u
#define NVME_CSTS_NSSRO          (1u << 4)
#define NVME_CSTS_PP             (1u << 5)
static inline NVME_HD bool nvme_csts_rdy(uint32_t csts)
{
    return csts & NVME_CSTS_RDY;
}
static inline NVME_HD bool nvme_csts_cfs(uint32_t csts)
{
    return csts & NVME_CSTS_CFS;
}
static inline NVME_HD uint32_t nvme_csts_shst(uint32_t csts)
{
    return (csts & NVME_CSTS_SHST_MASK) >> NVME_CSTS_SHST_SHIFT;
}
/* All-ones reads mean the function is gone (surprise removal) or the BAR is not decoded. */
#define NVME_REG32_GONE 0xffffffffu

/* AQA fields (both 0-based sizes) */
#define NVME_AQA_ASQS_MASK  0xfffu
#define NVME_AQA_ACQS_SHIFT 16u
#define NVME_AQA(sq_entries, cq_entries)                                                                               \
    ((((uint32_t)(sq_entries) - 1u) & NVME_AQA_ASQS_MASK) |                                                            \
     ((((uint32_t)(cq_entries) - 1u) & NVME_AQA_ASQS_MASK) << NVME_AQA_ACQS_SHIFT))
static inline NVME_HD uint32_t nvme_aqa_asqs(uint32_t aqa)
{
    return aqa & NVME_AQA_ASQS_MASK;
} /* 0-based */
static inline NVME_HD uint32_t nvme_aqa_acqs(uint32_t aqa)
{
    return (aqa >> NVME_AQA_ACQS_SHIFT) & NVME_AQA_ASQS_MASK;
}

/* Doorbells: SQ y tail at 0x1000 + (2y) * (4 << DSTRD), CQ y head at 0x1000 + (2y + 1) * (4 << DSTRD). */
#define NVME_DB_BASE_STRIDE 4u
static inline NVME_HD uint32_t nvme_db_sq_off(uint32_t qid, uint32_t dstrd)
{
    return NVME_REG_DBS + ((2u * qid) * (NVME_DB_BASE_STRIDE << dstrd));
}
static inline NVME_HD uint32_t nvme_db_cq_off(uint32_t qid, uint32_t dstrd)
{
    return NVME_REG_DBS + ((2u * qid + 1u) * (NVME_DB_BASE_STRIDE << dstrd));
}

/* ---------------------------------------------------------------------------------------------------
 * Submission queue entry (64 bytes)
 * ------------------------------------------------------------------------------------------------- */
struct nvme_sqe {
    uint8_t opc;   /* CDW0[7:0] opcode */
    uint8_t flags; /* CDW0[9:8] FUSE, CDW0[15:14] PSDT (0 = PRPs) */
    uint16_t cid;  /* CDW0[31:16] command identifier */
    uint32_t nsid; /* CDW1 */
    uint32_t cdw2;
    uint32_t cdw3;
    uint64_t mptr; /* CDW4-5 metadata pointer */
    uint64_t prp1; /* CDW6-7 */
    uint64_t prp2; /* CDW8-9 */
    uint32_t cdw10;
    uint32_t cdw11;
    uint32_t cdw12;
    uint32_t cdw13;
    uint32_t cdw14;
    uint32_t cdw15;
};
NVME_STATIC_ASSERT(sizeof(struct nvme_sqe) == NVME_SQE_SIZE, "SQE is 64 bytes");
NVME_STATIC_ASSERT(offsetof(struct nvme_sqe, cid) == 2, "SQE CID offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_sqe, nsid) == 4, "SQE NSID offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_sqe, mptr) == 16, "SQE MPTR offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_sqe, prp1) == 24, "SQE PRP1 offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_sqe, prp2) == 32, "SQE PRP2 offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_sqe, cdw10) == 40, "SQE CDW10 offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_sqe, cdw15) == 60, "SQE CDW15 offset");

#define NVME_SQE_FUSE_MASK  0x03u
#define NVME_SQE_PSDT_SHIFT 6u
#define NVME_SQE_PSDT_MASK  (0x3u << NVME_SQE_PSDT_SHIFT)
#define NVME_SQE_PSDT_PRP   0u

/* Read/Write/Write Zeroes CDW12 */
#define NVME_RW_NLB_MASK 0xffffu    /* 0-based */
#define NVME_RW_DEAC     (1u << 25) /* Write Zeroes: deallocate */
#define NVME_RW_FUA      (1u << 30)
#define NVME_RW_LR       (1u << 31)

/* ---------------------------------------------------------------------------------------------------
 * Completion queue entry (16 bytes)
 * ------------------------------------------------------------------------------------------------- */
struct nvme_cqe {
    uint32_t cdw0;   /* command specific */
    uint32_t cdw1;   /* reserved / command specific */
    uint16_t sqhd;   /* SQ head pointer */
    uint16_t sqid;   /* SQ identifier */
    uint16_t cid;    /* command identifier */
    uint16_t status; /* bit 0 phase tag, bits 15:1 status field */
};
NVME_STATIC_ASSERT(sizeof(struct nvme_cqe) == NVME_CQE_SIZE, "CQE is 16 bytes");
NVME_STATIC_ASSERT(offsetof(struct nvme_cqe, sqhd) == 8, "CQE SQHD offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_cqe, cid) == 12, "CQE CID offset");
NVME_STATIC_ASSERT(offsetof(struct nvme_cqe, status) == 14, "CQE status offset");

#define NVME_CQE_P         0x0001u
#define NVME_CQE_SC_SHIFT  1u
#define NVME_CQE_SC_MASK   (0xffu << NVME_CQE_SC_SHIFT)
#define NVME_CQE_SCT_SHIFT 9u
#define NVME_CQE_SCT_MASK  (0x7u << NVME_CQE_SCT_SHIFT)
#define NVME_CQE_CRD_SHIFT 12u
#define NVME_CQE_M         (1u << 14)
#define NVME_CQE_DNR       (1u << 15)
/* Status word (bits 15:0 including the phase) built from its parts, for the emulator. */
#define NVME_CQE_STATUS(sct, sc, dnr, phase)                                                                           \
    ((uint16_t)(((uint32_t)((sct) & 0x7u) << NVME_CQE_SCT_SHIFT) | ((uint32_t)((sc) & 0xffu) << NVME_CQE_SC_SHIFT) |   \
                ((dnr) ? NVME_CQE_DNR : 0u) | ((phase) ? NVME_CQE_P : 0u)))
static inline NVME_HD uint8_t nvme_cqe_phase(uint16_t status)
{
    return (uint8_t)(status & NVME_CQE_P);
}
static inline NVME_HD uint8_t nvme_cqe_sc(uint16_t status)
{
    return (uint8_t)((status & NVME_CQE_SC_MASK) >> NVME_CQE_SC_SHIFT);
}
static inline NVME_HD uint8_t nvme_cqe_sct(uint16_t status)
{
    return (uint8_t)((status & NVME_CQE_SCT_MASK) >> NVME_CQE_SCT_SHIFT);
}
static inline NVME_HD bool nvme_cqe_dnr(uint16_t status)
{
    return (status & NVME_CQE_DNR) != 0;
}
static inline NVME_HD bool nvme_cqe_more(uint16_t status)
{
    return (status & NVME_CQE_M) != 0;
}

/* ---------------------------------------------------------------------------------------------------
 * Opcodes
 * ------------------------------------------------------------------------------------------------- */
enum nvme_admin_opc {
    NVME_ADM_DELETE_SQ = 0x00,
    NVME_ADM_CREATE_SQ = 0x01,
    NVME_ADM_GET_LOG_PAGE = 0x02,
    NVME_ADM_DELETE_CQ = 0x04,
    NVME_ADM_CREATE_CQ = 0x05,
    NVME_ADM_IDENTIFY = 0x06,
    NVME_ADM_ABORT = 0x08,
    NVME_ADM_SET_FEATURES = 0x09,
    NVME_ADM_GET_FEATURES = 0x0a,
    NVME_ADM_ASYNC_EVENT = 0x0c,
    NVME_ADM_NS_MGMT = 0x0d,
    NVME_ADM_FW_COMMIT = 0x10,
    NVME_ADM_FW_DOWNLOAD = 0x11,
    NVME_ADM_DEV_SELF_TEST = 0x14,
    NVME_ADM_NS_ATTACH = 0x15,
    NVME_ADM_KEEP_ALIVE = 0x18,
    NVME_ADM_DBBUF_CONFIG = 0x7c,
    NVME_ADM_FORMAT_NVM = 0x80,
    NVME_ADM_SANITIZE = 0x84,
};

enum nvme_nvm_opc {
    NVME_CMD_FLUSH = 0x00,
    NVME_CMD_WRITE = 0x01,
    NVME_CMD_READ = 0x02,
    NVME_CMD_WRITE_UNCOR = 0x04,
    NVME_CMD_COMPARE = 0x05,
    NVME_CMD_WRITE_ZEROES = 0x08,
    NVME_CMD_DSM = 0x09,
};
/* Data direction is in the opcode's low two bits: 01b host-to-controller, 10b controller-to-host. */
#define NVME_OPC_XFER_MASK 0x3u
#define NVME_OPC_XFER_NONE 0x0u
#define NVME_OPC_XFER_H2C  0x1u
#define NVME_OPC_XFER_C2H  0x2u
#define NVME_OPC_XFER_BIDI 0x3u

/* Identify (CDW10.CNS) */
enum nvme_identify_cns {
    NVME_CNS_NS = 0x00,
    NVME_CNS_CTRL = 0x01,
    NVME_CNS_ACTIVE_NS_LIST = 0x02,
    NVME_CNS_NS_DESC_LIST = 0x03,
};

/* Features (CDW10.FID) */
enum nvme_feature_id {
    NVME_FEAT_ARBITRATION = 0x01,
    NVME_FEAT_POWER_MGMT = 0x02,
    NVME_FEAT_TEMP_THRESH = 0x04,
    NVME_FEAT_ERR_RECOVERY = 0x05,
    NVME_FEAT_VOLATILE_WC = 0x06,
    NVME_FEAT_NUM_QUEUES = 0x07,
    NVME_FEAT_IRQ_COALESCE = 0x08,
    NVME_FEAT_IRQ_CONFIG = 0x09,
    NVME_FEAT_WRITE_ATOMIC = 0x0a,
    NVME_FEAT_ASYNC_EVENT = 0x0b,
};
/* Number of Queues: CDW11 and completion DW0 carry NSQR (15:0) and NCQR (31:16), both 0-based. */
#define NVME_NUM_QUEUES(nsq, ncq) ((((uint32_t)(nsq) - 1u) & 0xffffu) | ((((uint32_t)(ncq) - 1u) & 0xffffu) << 16))
static inline NVME_HD uint32_t nvme_num_queues_nsq(uint32_t dw0)
{
    return (dw0 & 0xffffu) + 1u;
}
static inline NVME_HD uint32_t nvme_num_queues_ncq(uint32_t dw0)
{
    return (dw0 >> 16) + 1u;
}

/* Log pages (Get Log Page CDW10.LID) */
enum nvme_log_id {
    NVME_LOGPAGE_ERROR = 0x01,
    NVME_LOGPAGE_SMART = 0x02,
    NVME_LOGPAGE_FW_SLOT = 0x03,
};

/* Create/Delete I/O queue dwords */
#define NVME_CREATE_Q_CDW10(qid, entries) (((uint32_t)(qid) & 0xffffu) | ((((uint32_t)(entries) - 1u) & 0xffffu) << 16))
#define NVME_CREATE_Q_PC                  (1u << 0) /* physically contiguous */
#define NVME_CREATE_CQ_IEN                (1u << 1) /* interrupts enabled */
#define NVME_CREATE_CQ_IV_SHIFT           16u
#define NVME_CREATE_SQ_QPRIO_SHIFT        1u
#define NVME_CREATE_SQ_CQID_SHIFT         16u

/* Dataset Management */
#define NVME_DSM_NR_MASK 0xffu     /* CDW10: number of ranges, 0-based */
#define NVME_DSM_IDR     (1u << 0) /* CDW11: integral dataset for read */
#define NVME_DSM_IDW     (1u << 1) /* CDW11: integral dataset for write */
#define NVME_DSM_AD      (1u << 2) /* CDW11: attribute deallocate */
struct nvme_dsm_range {
    uint32_t cattr; /* context attributes */
    uint32_t nlb;   /* length in logical blocks (1-based here, unlike CDW12) */
    uint64_t slba;
};
NVME_STATIC_ASSERT(sizeof(struct nvme_dsm_range) == NVME_DSM_RANGE_SIZE, "DSM range is 16 bytes");

/* ---------------------------------------------------------------------------------------------------
 * Identify Controller (CNS 01h), 4096 bytes
 * ------------------------------------------------------------------------------------------------- */
struct nvme_id_psd {
    uint8_t raw[32];
};

struct nvme_id_ctrl {
    uint16_t vid;
    uint16_t ssvid;
    char sn[NVME_SN_LEN]; /* ASCII, space padded */
    char mn[NVME_MN_LEN];
    char fr[NVME_FR_LEN];
    uint8_t rab;
    uint8_t ieee[3];
    uint8_t cmic;
    uint8_t mdts; /* 2^mdts * CAP.MPSMIN pages; 0 = no limit */
    uint16_t cntlid;
    uint32_t ver;
    uint32_t rtd3r;
    uint32_t rtd3e;
    uint32_t oaes;
    uint32_t ctratt;
    uint8_t rsvd100[156]; /* 100..255 */
    uint16_t oacs;
    uint8_t acl;
    uint8_t aerl;
    uint8_t frmw;
    uint8_t lpa;
    uint8_t elpe;
    uint8_t npss;
    uint8_t avscc;
    uint8_t apsta;
    uint16_t wctemp;
    uint16_t cctemp;
    uint8_t rsvd270[242]; /* 270..511 */
    uint8_t sqes;         /* 3:0 required, 7:4 maximum (log2 bytes) */
    uint8_t cqes;
    uint16_t maxcmd;
    uint32_t nn;   /* number of namespaces (highest NSID) */
    uint16_t oncs; /* optional NVM commands */
    uint16_t fuses;
    uint8_t fna;
    uint8_t vwc;
    uint16_t awun;
    uint16_t awupf;
    uint8_t icsvscc;
    uint8_t nwpc;
    uint16_t acwu;
    uint8_t rsvd534[2];
    uint32_t sgls;
    uint32_t mnan;
    uint8_t rsvd544[224];       /* 544..767 */
    char subnqn[256];           /* 768..1023 */
    uint8_t rsvd1024[768];      /* 1024..1791 */
    uint8_t nvmf[256];          /* 1792..2047 */
    struct nvme_id_psd psd[32]; /* 2048..3071 */
    uint8_t vs[1024];           /* 3072..4095 */
};
NVME_STATIC_ASSERT(sizeof(struct nvme_id_ctrl) == NVME_IDENTIFY_SIZE, "Identify Controller is 4096 bytes");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, sn) == 4, "IDCTRL SN");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, mn) == 24, "IDCTRL MN");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, fr) == 64, "IDCTRL FR");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, mdts) == 77, "IDCTRL MDTS");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, cntlid) == 78, "IDCTRL CNTLID");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, ver) == 80, "IDCTRL VER");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, oacs) == 256, "IDCTRL OACS");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, sqes) == 512, "IDCTRL SQES");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, cqes) == 513, "IDCTRL CQES");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, maxcmd) == 514, "IDCTRL MAXCMD");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, nn) == 516, "IDCTRL NN");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, oncs) == 520, "IDCTRL ONCS");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, vwc) == 525, "IDCTRL VWC");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, sgls) == 536, "IDCTRL SGLS");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, subnqn) == 768, "IDCTRL SUBNQN");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, psd) == 2048, "IDCTRL PSD");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ctrl, vs) == 3072, "IDCTRL VS");

/* ONCS bits */
#define NVME_ONCS_COMPARE      (1u << 0)
#define NVME_ONCS_WRITE_UNCOR  (1u << 1)
#define NVME_ONCS_DSM          (1u << 2)
#define NVME_ONCS_WRITE_ZEROES (1u << 3)
/* SQES/CQES: required (3:0) and maximum (7:4) entry size, log2 bytes */
static inline NVME_HD uint32_t nvme_id_qes_min(uint8_t qes)
{
    return qes & 0xfu;
}
static inline NVME_HD uint32_t nvme_id_qes_max(uint8_t qes)
{
    return (qes >> 4) & 0xfu;
}

/* ---------------------------------------------------------------------------------------------------
 * Identify Namespace (CNS 00h), 4096 bytes
 * ------------------------------------------------------------------------------------------------- */
struct nvme_lbaf {
    uint16_t ms;   /* metadata bytes per LBA */
    uint8_t lbads; /* LBA data size, log2 bytes (>= 9 when in use) */
    uint8_t rp;    /* bits 1:0 relative performance */
};
NVME_STATIC_ASSERT(sizeof(struct nvme_lbaf) == 4, "LBA format descriptor is 4 bytes");

struct nvme_id_ns {
    uint64_t nsze; /* size in logical blocks */
    uint64_t ncap;
    uint64_t nuse;
    uint8_t nsfeat;
    uint8_t nlbaf; /* number of LBA formats, 0-based */
    uint8_t flbas; /* bits 3:0 format in use */
    uint8_t mc;
    uint8_t dpc;
    uint8_t dps;
    uint8_t nmic;
    uint8_t rescap;
    uint8_t fpi;
    uint8_t dlfeat;
    uint16_t nawun;
    uint16_t nawupf;
    uint16_t nacwu;
    uint16_t nabsn;
    uint16_t nabo;
    uint16_t nabspf;
    uint16_t noiob;
    uint8_t nvmcap[16];
    uint16_t npwg;
    uint16_t npwa;
    uint16_t npdg;
    uint16_t npda;
    uint16_t nows;
    uint8_t rsvd74[18]; /* 74..91 */
    uint32_t anagrpid;
    uint8_t rsvd96[3];
    uint8_t nsattr;
    uint16_t nvmsetid;
    uint16_t endgid;
    uint8_t nguid[16];
    uint8_t eui64[8];
    struct nvme_lbaf lbaf[NVME_LBAF_MAX]; /* 128..383 */
    uint8_t rsvd384[2688];                /* 384..3071 */
    uint8_t vs[1024];                     /* 3072..4095 */
};
NVME_STATIC_ASSERT(sizeof(struct nvme_id_ns) == NVME_IDENTIFY_SIZE, "Identify Namespace is 4096 bytes");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, ncap) == 8, "IDNS NCAP");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, nuse) == 16, "IDNS NUSE");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, nlbaf) == 25, "IDNS NLBAF");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, flbas) == 26, "IDNS FLBAS");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, dlfeat) == 33, "IDNS DLFEAT");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, nvmcap) == 48, "IDNS NVMCAP");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, anagrpid) == 92, "IDNS ANAGRPID");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, nguid) == 104, "IDNS NGUID");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, eui64) == 120, "IDNS EUI64");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, lbaf) == 128, "IDNS LBAF");
NVME_STATIC_ASSERT(offsetof(struct nvme_id_ns, vs) == 3072, "IDNS VS");

#define NVME_FLBAS_INDEX_MASK 0xfu
#define NVME_LBADS_MIN        9u /* 512-byte LBAs */
static inline NVME_HD uint32_t nvme_id_ns_lbads(const struct nvme_id_ns *ns)
{
    return ns->lbaf[ns->flbas & NVME_FLBAS_INDEX_MASK].lbads;
}

/* ---------------------------------------------------------------------------------------------------
 * Status codes: type (SCT) and code (SC)
 * ------------------------------------------------------------------------------------------------- */
enum nvme_sct {
    NVME_SCT_GENERIC = 0x0,
    NVME_SCT_CMD_SPECIFIC = 0x1,
    NVME_SCT_MEDIA = 0x2,
    NVME_SCT_PATH = 0x3,
    NVME_SCT_VENDOR = 0x7,
};

enum nvme_sc_generic {
    NVME_SC_SUCCESS = 0x00,
    NVME_SC_INVALID_OPCODE = 0x01,
    NVME_SC_INVALID_FIELD = 0x02,
    NVME_SC_CID_CONFLICT = 0x03,
    NVME_SC_DATA_XFER_ERROR = 0x04,
    NVME_SC_POWER_LOSS_ABORT = 0x05,
    NVME_SC_INTERNAL = 0x06,
    NVME_SC_ABORT_REQ = 0x07,
    NVME_SC_ABORT_SQ_DELETED = 0x08,
    NVME_SC_ABORT_FAILED_FUSED = 0x09,
    NVME_SC_ABORT_MISSING_FUSED = 0x0a,
    NVME_SC_INVALID_NS = 0x0b, /* Invalid Namespace or Format */
    NVME_SC_CMD_SEQ_ERROR = 0x0c,
    NVME_SC_INVALID_SGL_SEG_DESC = 0x0d,
    NVME_SC_INVALID_NUM_SGL_DESC = 0x0e,
    NVME_SC_DATA_SGL_LEN_INVALID = 0x0f,
    NVME_SC_MD_SGL_LEN_INVALID = 0x10,
    NVME_SC_SGL_DESC_TYPE_INVALID = 0x11,
    NVME_SC_INVALID_CMB_USE = 0x12,
    NVME_SC_INVALID_PRP_OFFSET = 0x13,
    NVME_SC_ATOMIC_WU_EXCEEDED = 0x14,
    NVME_SC_OPERATION_DENIED = 0x15,
    NVME_SC_INVALID_SGL_OFFSET = 0x16,
    NVME_SC_HOSTID_INCONSISTENT = 0x18,
    NVME_SC_KA_EXPIRED = 0x19,
    NVME_SC_KA_TIMEOUT_INVALID = 0x1a,
    NVME_SC_ABORT_PREEMPT = 0x1b,
    NVME_SC_SANITIZE_FAILED = 0x1c,
    NVME_SC_SANITIZE_IN_PROGRESS = 0x1d,
    NVME_SC_SGL_GRANULARITY_INVALID = 0x1e,
    NVME_SC_CMD_NOT_SUP_CMB_QUEUE = 0x1f,
    NVME_SC_NS_WRITE_PROTECTED = 0x20,
    NVME_SC_CMD_INTERRUPTED = 0x21,
    NVME_SC_TRANSIENT_TRANSPORT = 0x22,
    /* NVM command set, generic type */
    NVME_SC_LBA_RANGE = 0x80, /* LBA Out of Range */
    NVME_SC_CAP_EXCEEDED = 0x81,
    NVME_SC_NS_NOT_READY = 0x82,
    NVME_SC_RESERVATION_CONFLICT = 0x83,
    NVME_SC_FORMAT_IN_PROGRESS = 0x84,
};

enum nvme_sc_cmd_specific {
    NVME_SC_CQ_INVALID = 0x00,  /* Completion Queue Invalid */
    NVME_SC_QID_INVALID = 0x01, /* Invalid Queue Identifier */
    NVME_SC_QUEUE_SIZE = 0x02,  /* Invalid Queue Size */
    NVME_SC_ABORT_LIMIT = 0x03,
    NVME_SC_AER_LIMIT = 0x05,
    NVME_SC_INVALID_FW_SLOT = 0x06,
    NVME_SC_INVALID_FW_IMAGE = 0x07,
    NVME_SC_INVALID_VECTOR = 0x08, /* Invalid Interrupt Vector */
    NVME_SC_INVALID_LOG_PAGE = 0x09,
    NVME_SC_INVALID_FORMAT = 0x0a,
    NVME_SC_FW_NEEDS_CONV_RESET = 0x0b,
    NVME_SC_INVALID_QUEUE_DELETION = 0x0c, /* Invalid Queue Deletion */
    NVME_SC_FEATURE_NOT_SAVEABLE = 0x0d,
    NVME_SC_FEATURE_NOT_CHANGEABLE = 0x0e,
    NVME_SC_FEATURE_NOT_PER_NS = 0x0f,
    NVME_SC_FW_NEEDS_SUBSYS_RESET = 0x10,
    NVME_SC_FW_NEEDS_RESET = 0x11,
    NVME_SC_FW_NEEDS_MAX_TIME = 0x12,
    NVME_SC_FW_ACTIVATION_PROHIBITED = 0x13,
    NVME_SC_OVERLAPPING_RANGE = 0x14,
    NVME_SC_NS_INSUFFICIENT_CAP = 0x15,
    NVME_SC_NS_ID_UNAVAILABLE = 0x16,
    NVME_SC_NS_ALREADY_ATTACHED = 0x18,
    NVME_SC_NS_IS_PRIVATE = 0x19,
    NVME_SC_NS_NOT_ATTACHED = 0x1a,
    NVME_SC_THIN_PROV_NOT_SUP = 0x1b,
    NVME_SC_CTRL_LIST_INVALID = 0x1c,
    /* NVM command set, command specific */
    NVME_SC_CONFLICTING_ATTRS = 0x80,
    NVME_SC_INVALID_PI = 0x81,
    NVME_SC_READ_ONLY = 0x82, /* Attempted Write to Read Only Range */
};

enum nvme_sc_media {
    NVME_SC_WRITE_FAULT = 0x80,
    NVME_SC_UNRECOVERED_READ = 0x81,
    NVME_SC_GUARD_CHECK = 0x82,
    NVME_SC_APPTAG_CHECK = 0x83,
    NVME_SC_REFTAG_CHECK = 0x84,
    NVME_SC_COMPARE_FAILED = 0x85,
    NVME_SC_ACCESS_DENIED = 0x86,
    NVME_SC_UNWRITTEN_BLOCK = 0x87,
};

enum nvme_sc_path {
    NVME_SC_INTERNAL_PATH_ERROR = 0x00,
    NVME_SC_ANA_PERSISTENT_LOSS = 0x01,
    NVME_SC_ANA_INACCESSIBLE = 0x02,
    NVME_SC_ANA_TRANSITION = 0x03,
    NVME_SC_CTRL_PATH_ERROR = 0x60,
    NVME_SC_HOST_PATH_ERROR = 0x70,
    NVME_SC_HOST_ABORTED_CMD = 0x71,
};

/* The spec's name for a status ("LBA Out of Range"); never NULL ("Unknown Status" when unassigned). */
const char *nvme_status_name(uint8_t sct, uint8_t sc);
/* The spec's name of a status code type ("Generic Command Status"). */
const char *nvme_sct_name(uint8_t sct);
/* The inverse: a non-success spec name, without case, '_' or '-' for a space ("unrecovered_read_error")
 * -> 0 with sct/sc, or -EINVAL. */
int nvme_status_parse(const char *name, uint8_t *sct, uint8_t *sc);
/* Name of an opcode for messages ("Read", "Create I/O Completion Queue"); admin selects the table. */
const char *nvme_opc_name(bool admin, uint8_t opc);

#ifdef __cplusplus
}
#endif

#endif /* NVME_SPEC_H */
