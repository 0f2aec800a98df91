/* SPDX-License-Identifier: BSD-3-Clause */
/* status.c — spec names of status codes and opcodes, completion strings, and the diagnostics hook. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/ctrl_internal.h"
#include "nvme/nvme.h"
#include "nvme/spec.h"

struct code_name {
    uint8_t code;
    const char *name;
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const struct code_name generic_names[] = {
    {NVME_SC_SUCCESS, "Successful Completion"},
    {NVME_SC_INVALID_OPCODE, "Invalid Command Opcode"},
    {NVME_SC_INVALID_FIELD, "Invalid Field in Command"},
    {NVME_SC_CID_CONFLICT, "Command ID Conflict"},
    {NVME_SC_DATA_XFER_ERROR, "Data Transfer Error"},
    {NVME_SC_POWER_LOSS_ABORT, "Commands Aborted due to Power Loss Notification"},
    {NVME_SC_INTERNAL, "Internal Error"},
    {NVME_SC_ABORT_REQ, "Command Abort Requested"},
    {NVME_SC_ABORT_SQ_DELETED, "Command Aborted due to SQ Deletion"},
    {NVME_SC_ABORT_FAILED_FUSED, "Command Aborted due to Failed Fused Command"},
    {NVME_SC_ABORT_MISSING_FUSED, "Command Aborted due to Missing Fused Command"},
    {NVME_SC_INVALID_NS, "Invalid Namespace or Format"},
    {NVME_SC_CMD_SEQ_ERROR, "Command Sequence Error"},
    {NVME_SC_INVALID_SGL_SEG_DESC, "Invalid SGL Segment Descriptor"},
    {NVME_SC_INVALID_NUM_SGL_DESC, "Invalid Number of SGL Descriptors"},
    {NVME_SC_DATA_SGL_LEN_INVALID, "Data SGL Length Invalid"},
    {NVME_SC_MD_SGL_LEN_INVALID, "Metadata SGL Length Invalid"},
    {NVME_SC_SGL_DESC_TYPE_INVALID, "SGL Descriptor Type Invalid"},
    {NVME_SC_INVALID_CMB_USE, "Invalid Use of Controller Memory Buffer"},
    {NVME_SC_INVALID_PRP_OFFSET, "PRP Offset Invalid"},
    {NVME_SC_ATOMIC_WU_EXCEEDED, "Atomic Write Unit Exceeded"},
    {NVME_SC_OPERATION_DENIED, "Operation Denied"},
    {NVME_SC_INVALID_SGL_OFFSET, "SGL Offset Invalid"},
    {NVME_SC_HOSTID_INCONSISTENT, "Host Identifier Inconsistent Format"},
    {NVME_SC_KA_EXPIRED, "Keep Alive Timer Expired"},
    {NVME_SC_KA_TIMEOUT_INVALID, "Keep Alive Timeout Invalid"},
    {NVME_SC_ABORT_PREEMPT, "Command Aborted due to Preempt and Abort"},
    {NVME_SC_SANITIZE_FAILED, "Sanitize Failed"},
    {NVME_SC_SANITIZE_IN_PROGRESS, "Sanitize In Progress"},
    {NVME_SC_SGL_GRANULARITY_INVALID, "SGL Data Block Granularity Invalid"},
    {NVME_SC_CMD_NOT_SUP_CMB_QUEUE, "Command Not Supported for Queue in CMB"},
    {NVME_SC_NS_WRITE_PROTECTED, "Namespace is Write Protected"},
    {NVME_SC_CMD_INTERRUPTED, "Command Interrupted"},
    {NVME_SC_TRANSIENT_TRANSPORT, "Transient Transport Error"},
    {NVME_SC_LBA_RANGE, "LBA Out of Range"},
    {NVME_SC_CAP_EXCEEDED, "Capacity Exceeded"},
    {NVME_SC_NS_NOT_READY, "Namespace Not Ready"},
    {NVME_SC_RESERVATION_CONFLICT, "Reservation Conflict"},
    {NVME_SC_FORMAT_IN_PROGRESS, "Format In Progress"},
};

static const struct code_name cmd_specific_names[] = {
    {NVME_SC_CQ_INVALID, "Completion Queue Invalid"},
    {NVME_SC_QID_INVALID, "Invalid Queue Identifier"},
    {NVME_SC_QUEUE_SIZE, "Invalid Queue Size"},
    {NVME_SC_ABORT_LIMIT, "Abort Command Limit Exceeded"},
    {NVME_SC_AER_LIMIT, "Asynchronous Event Request Limit Exceeded"},
    {NVME_SC_INVALID_FW_SLOT, "Invalid Firmware Slot"},
    {NVME_SC_INVALID_FW_IMAGE, "Invalid Firmware Image"},
    {NVME_SC_INVALID_VECTOR, "Invalid Interrupt Vector"},
    {NVME_SC_INVALID_LOG_PAGE, "Invalid Log Page"},
    {NVME_SC_INVALID_FORMAT, "Invalid Format"},
    {NVME_SC_FW_NEEDS_CONV_RESET, "Firmware Activation Requires Conventional Reset"},
    {NVME_SC_INVALID_QUEUE_DELETION, "Invalid Queue Deletion"},
    {NVME_SC_FEATURE_NOT_SAVEABLE, "Feature Identifier Not Saveable"},
    {NVME_SC_FEATURE_NOT_CHANGEABLE, "Feature Not Changeable"},
    {NVME_SC_FEATURE_NOT_PER_NS, "Feature Not Namespace Specific"},
    {NVME_SC_FW_NEEDS_SUBSYS_RESET, "Firmware Activation Requires NVM Subsystem Reset"},
    {NVME_SC_FW_NEEDS_RESET, "Firmware Activation Requires Controller Level Reset"},
    {NVME_SC_FW_NEEDS_MAX_TIME, "Firmware Activation Requires Maximum Time Violation"},
    {NVME_SC_FW_ACTIVATION_PROHIBITED, "Firmware Activation Prohibited"},
    {NVME_SC_OVERLAPPING_RANGE, "Overlapping Range"},
    {NVME_SC_NS_INSUFFICIENT_CAP, "Namespace Insufficient Capacity"},
    {NVME_SC_NS_ID_UNAVAILABLE, "Namespace Identifier Unavailable"},
    {NVME_SC_NS_ALREADY_ATTACHED, "Namespace Already Attached"},
    {NVME_SC_NS_IS_PRIVATE, "Namespace Is Private"},
    {NVME_SC_NS_NOT_ATTACHED, "Namespace Not Attached"},
    {NVME_SC_THIN_PROV_NOT_SUP, "Thin Provisioning Not Supported"},
    {NVME_SC_CTRL_LIST_INVALID, "Controller List Invalid"},
    {NVME_SC_CONFLICTING_ATTRS, "Conflicting Attributes"},
    {NVME_SC_INVALID_PI, "Invalid Protection Information"},
    {NVME_SC_READ_ONLY, "Attempted Write to Read Only Range"},
};

static const struct code_name media_names[] = {
    {NVME_SC_WRITE_FAULT, "Write Fault"},
    {NVME_SC_UNRECOVERED_READ, "Unrecovered Read Error"},
    {NVME_SC_GUARD_CHECK, "End-to-end Guard Check Error"},
    {NVME_SC_APPTAG_CHECK, "End-to-end Application Tag Check Error"},
    {NVME_SC_REFTAG_CHECK, "End-to-end Reference Tag Check Error"},
    {NVME_SC_COMPARE_FAILED, "Compare Failure"},
    {NVME_SC_ACCESS_DENIED, "Access Denied"},
    {NVME_SC_UNWRITTEN_BLOCK, "Deallocated or Unwritten Logical Block"},
};

static const struct code_name path_names[] = {
    {NVME_SC_INTERNAL_PATH_ERROR, "Internal Path Error"},
    {NVME_SC_ANA_PERSISTENT_LOSS, "Asymmetric Access Persistent Loss"},
    {NVME_SC_ANA_INACCESSIBLE, "Asymmetric Access Inaccessible"},
    {NVME_SC_ANA_TRANSITION, "Asymmetric Access Transition"},
    {NVME_SC_CTRL_PATH_ERROR, "Controller Pathing Error"},
    {NVME_SC_HOST_PATH_ERROR, "Host Pathing Error"},
    {NVME_SC_HOST_ABORTED_CMD, "Command Aborted By Host"},
};

static const char *lookup(const struct code_name *t, size_t n, uint8_t code)
{
    for (size_t i = 0; i < n; i++)
        if (t[i].code == code)
            return t[i].name;
    return NULL;
}

const char *nvme_status_name(uint8_t sct, uint8_t sc)
{
    const char *name = NULL;
    switch (sct) {
    case NVME_SCT_GENERIC:
        name = lookup(generic_names, NELEM(generic_names), sc);
        break;
    case NVME_SCT_CMD_SPECIFIC:
        name = lookup(cmd_specific_names, NELEM(cmd_specific_names), sc);
        break;
    case NVME_SCT_MEDIA:
        name = lookup(media_names, NELEM(media_names), sc);
        break;
    case NVME_SCT_PATH:
        name = lookup(path_names, NELEM(path_names), sc);
        break;
    case NVME_SCT_VENDOR:
        return "Vendor Specific Status";
    default:
        break;
    }
    return name ? name : "Unknown Status";
}

/* A spec name matched without case, with '_' or '-' standing for a space ("unrecovered_read_error"). */
static bool name_eq(const char *spec, const char *s)
{
    for (; *spec && *s; spec++, s++) {
        char a = *spec >= 'A' && *spec <= 'Z' ? (char)(*spec - 'A' + 'a') : *spec;
        char b = *s >= 'A' && *s <= 'Z' ? (char)(*s - 'A' + 'a') : *s;
        if (b == '_' || b == '-')
            b = ' ';
        if (a != b)
            return false;
    }
    return !*spec && !*s;
}

int nvme_status_parse(const char *name, uint8_t *sct, uint8_t *sc)
{
    static const struct {
        uint8_t sct;
        const struct code_name *t;
        size_t n;
    } tables[] = {
        {NVME_SCT_GENERIC, generic_names, NELEM(generic_names)},
        {NVME_SCT_CMD_SPECIFIC, cmd_specific_names, NELEM(cmd_specific_names)},
        {NVME_SCT_MEDIA, media_names, NELEM(media_names)},
        {NVME_SCT_PATH, path_names, NELEM(path_names)},
    };
    for (size_t k = 0; name && k < NELEM(tables); k++)
        for (size_t i = 0; i < tables[k].n; i++)
            if (tables[k].t[i].code != NVME_SC_SUCCESS && name_eq(tables[k].t[i].name, name)) {
                *sct = tables[k].sct;
                *sc = tables[k].t[i].code;
                return 0;
            }
    return -EINVAL;
}

const char *nvme_sct_name(uint8_t sct)
{
    switch (sct) {
    case NVME_SCT_GENERIC:
        return "Generic Command Status";
    case NVME_SCT_CMD_SPECIFIC:
        return "Command Specific Status";
    case NVME_SCT_MEDIA:
        return "Media and Data Integrity Errors";
    case NVME_SCT_PATH:
        return "Path Related Status";
    case NVME_SCT_VENDOR:
        return "Vendor Specific";
    default:
        return "Reserved Status Code Type";
    }
}

static const struct code_name admin_opc_names[] = {
    {NVME_ADM_DELETE_SQ, "Delete I/O Submission Queue"},
    {NVME_ADM_CREATE_SQ, "Create I/O Submission Queue"},
    {NVME_ADM_GET_LOG_PAGE, "Get Log Page"},
    {NVME_ADM_DELETE_CQ, "Delete I/O Completion Queue"},
    {NVME_ADM_CREATE_CQ, "Create I/O Completion Queue"},
    {NVME_ADM_IDENTIFY, "Identify"},
    {NVME_ADM_ABORT, "Abort"},
    {NVME_ADM_SET_FEATURES, "Set Features"},
    {NVME_ADM_GET_FEATURES, "Get Features"},
    {NVME_ADM_ASYNC_EVENT, "Asynchronous Event Request"},
    {NVME_ADM_NS_MGMT, "Namespace Management"},
    {NVME_ADM_FW_COMMIT, "Firmware Commit"},
    {NVME_ADM_FW_DOWNLOAD, "Firmware Image Download"},
    {NVME_ADM_DEV_SELF_TEST, "Device Self-test"},
    {NVME_ADM_NS_ATTACH, "Namespace Attachment"},
    {NVME_ADM_KEEP_ALIVE, "Keep Alive"},
    {NVME_ADM_DBBUF_CONFIG, "Doorbell Buffer Config"},
    {NVME_ADM_FORMAT_NVM, "Format NVM"},
    {NVME_ADM_SANITIZE, "Sanitize"},
};

static const struct code_name nvm_opc_names[] = {
    {NVME_CMD_FLUSH, "Flush"},
    {NVME_CMD_WRITE, "Write"},
    {NVME_CMD_READ, "Read"},
    {NVME_CMD_WRITE_UNCOR, "Write Uncorrectable"},
    {NVME_CMD_COMPARE, "Compare"},
    {NVME_CMD_WRITE_ZEROES, "Write Zeroes"},
    {NVME_CMD_DSM, "Dataset Management"},
};

const char *nvme_opc_name(bool admin, uint8_t opc)
{
    const char *n =
        admin ? lookup(admin_opc_names, NELEM(admin_opc_names), opc) : lookup(nvm_opc_names, NELEM(nvm_opc_names), opc);
    return n ? n : "Unknown Opcode";
}

const char *nvme_cpl_str(const struct nvme_cpl *cpl, char *buf, size_t len)
{
    if (!buf || !len)
        return "";
    if (cpl->err == -ETIMEDOUT)
        snprintf(buf, len, "timed out");
    else if (cpl->err == -ENXIO)
        snprintf(buf, len, "controller reset or gone");
    else if (cpl->err == -ECANCELED)
        snprintf(buf, len, "cancelled (queue destroyed)");
    else if (cpl->err)
        snprintf(buf, len, "driver error: %s", strerror(-cpl->err));
    else if (nvme_cpl_ok(cpl))
        snprintf(buf, len, "ok");
    else
        snprintf(buf, len, "%s (sct 0x%x sc 0x%02x%s)", nvme_status_name(cpl->sct, cpl->sc), cpl->sct, cpl->sc,
                 cpl->dnr ? ", dnr" : "");
    return buf;
}

/* ---- diagnostics hook ---- */
#define NVME_LOG_LINE 512

static _Atomic(nvme_log_fn) log_hook;

void nvme_set_log(nvme_log_fn fn)
{
    atomic_store(&log_hook, fn);
}

void nvme_log(int level, const char *fmt, ...)
{
    nvme_log_fn fn = atomic_load(&log_hook);
    if (!fn && (level < NVME_LOG_WARN || !getenv("NVMELAB_DEBUG")))
        return;
    char line[NVME_LOG_LINE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (fn)
        fn(level, line);
    else
        fprintf(stderr, "nvme: %s\n", line);
}
