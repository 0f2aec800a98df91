/* SPDX-License-Identifier: BSD-3-Clause */
/* vfu_irq.c — interrupt delivery of a served controller (vfu_server.h, "interrupts"): the eventfds SET_IRQS gives
 * for INTx and the MSI-X vectors, VFIO's mask/unmask and trigger actions, and the emulator's interrupt hook
 * (nvme_emu_set_irq_hook) writing the eventfd of a CQ's vector. No interrupt is lost: one raised while its vector
 * is masked or has no eventfd is kept pending and delivered when the vector is unmasked or given an eventfd (a
 * spurious one then costs the host a look at its CQ, never a completion). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "tools/vfu_server.h"

#define VFU_IRQ_ONE 1ull /* what one eventfd write adds */

static void vec_init(struct vfu_irq_vec *v)
{
    v->fd = -1;
    v->masked = false;
    v->pending = false;
}

static void vec_close(struct vfu_irq_vec *v)
{
    if (v->fd >= 0)
        close(v->fd);
    vec_init(v);
}

/* The vector fires now: its eventfd written, or the interrupt kept pending (masked, or no eventfd). */
static void vec_fire(struct vfu_irq_vec *v)
{
    if (v->masked || v->fd < 0) {
        v->pending = true;
        return;
    }
    uint64_t one = VFU_IRQ_ONE;
    ssize_t n;
    do
        n = write(v->fd, &one, sizeof(one));
    while (n < 0 && errno == EINTR);
    /* EAGAIN: the counter is at its maximum, so the host has an interrupt to take already */
    v->pending = false;
}

/* A pending interrupt of a vector that can take it now is delivered. */
static void vec_flush(struct vfu_irq_vec *v)
{
    if (v->pending && !v->masked && v->fd >= 0)
        vec_fire(v);
}

void vfu_irqs_init(struct vfu_irqs *q)
{
    pthread_mutex_init(&q->lock, NULL);
    q->intx_on = q->msix_on = false;
    vec_init(&q->intx);
    for (uint32_t i = 0; i < VFU_MSIX_VECTORS; i++)
        vec_init(&q->msix[i]);
}

static void index_off(struct vfu_irqs *q, uint32_t index)
{
    if (index == VFU_PCI_INTX_IRQ) {
        vec_close(&q->intx);
        q->intx_on = false;
    } else {
        for (uint32_t i = 0; i < VFU_MSIX_VECTORS; i++)
            vec_close(&q->msix[i]);
        q->msix_on = false;
    }
}

void vfu_irqs_reset(struct vfu_irqs *q)
{
    pthread_mutex_lock(&q->lock);
    index_off(q, VFU_PCI_INTX_IRQ);
    index_off(q, VFU_PCI_MSIX_IRQ);
    pthread_mutex_unlock(&q->lock);
}

void vfu_irqs_destroy(struct vfu_irqs *q)
{
    vfu_irqs_reset(q);
    pthread_mutex_destroy(&q->lock);
}

/* INTx is level-triggered and automasked (VFIO): a delivered interrupt masks the line until the host unmasks
 * it (after its EOI); what is raised meanwhile stays pending and is delivered at the unmask. */
static void intx_fire(struct vfu_irq_vec *v)
{
    bool deliver = !v->masked && v->fd >= 0;
    vec_fire(v);
    if (deliver)
        v->masked = true;
}

static void intx_unmask(struct vfu_irq_vec *v)
{
    v->masked = false;
    if (v->pending && v->fd >= 0)
        intx_fire(v);
}

int vfu_irqs_set(struct vfu_irqs *q, const struct vfu_irq_set *s, const uint8_t *data, int *fds, unsigned nfds)
{
    uint32_t dtype = s->flags & VFU_IRQ_SET_DATA_TYPE_MASK, action = s->flags & VFU_IRQ_SET_ACTION_TYPE_MASK;
    bool intx = s->index == VFU_PCI_INTX_IRQ;
    if (!intx && s->index != VFU_PCI_MSIX_IRQ)
        return EINVAL; /* the caller let through only the indexes with vectors */
    if (dtype == VFU_IRQ_SET_DATA_EVENTFD && action != VFU_IRQ_SET_ACTION_TRIGGER)
        return ENOTSUP; /* an unmask eventfd (KVM's INTx resampler) is not offered */
    pthread_mutex_lock(&q->lock);
    if (s->count == 0) { /* DATA_NONE | ACTION_TRIGGER (checked by the caller): the index is turned off */
        index_off(q, s->index);
        goto out;
    }
    for (uint32_t k = 0; k < s->count; k++) {
        struct vfu_irq_vec *v = intx ? &q->intx : &q->msix[s->start + k];
        if (dtype == VFU_IRQ_SET_DATA_EVENTFD) {
            /* the eventfd of the vector: given (taken over from the message), or none (QEMU sends an unset
             * vector's -1 as a message without fds) */
            if (v->fd >= 0)
                close(v->fd);
            v->fd = nfds ? fds[k] : -1;
            if (nfds)
                fds[k] = -1;
            continue;
        }
        if (dtype == VFU_IRQ_SET_DATA_BOOL && !data[k])
            continue;
        if (action == VFU_IRQ_SET_ACTION_TRIGGER) /* a loopback trigger from the host */
            intx ? intx_fire(v) : vec_fire(v);
        else if (action == VFU_IRQ_SET_ACTION_MASK)
            v->masked = true;
        else if (intx)
            intx_unmask(v);
        else {
            v->masked = false;
            vec_flush(v);
        }
    }
    if (dtype == VFU_IRQ_SET_DATA_EVENTFD && intx) {
        q->intx_on = true;
        if (q->intx.pending && q->intx.fd >= 0 && !q->intx.masked) /* raised while it had no eventfd */
            intx_fire(&q->intx);
    } else if (dtype == VFU_IRQ_SET_DATA_EVENTFD) {
        q->msix_on = true;
        for (uint32_t k = 0; k < s->count; k++) /* an interrupt raised while the vector had none is delivered now */
            vec_flush(&q->msix[s->start + k]);
    }
out:
    pthread_mutex_unlock(&q->lock);
    return 0;
}

void vfu_irqs_raise(struct vfu_irqs *q, uint16_t iv)
{
    pthread_mutex_lock(&q->lock);
    if (q->msix_on) {
        if (iv < VFU_MSIX_VECTORS)
            vec_fire(&q->msix[iv]);
    } else if (q->intx_on) {
        intx_fire(&q->intx); /* one line for every vector */
    }
    /* neither: the client polls (our driver, SPDK): nothing to deliver */
    pthread_mutex_unlock(&q->lock);
}

uint64_t vfu_irqs_pba(struct vfu_irqs *q, uint32_t first)
{
    uint64_t bits = 0;
    pthread_mutex_lock(&q->lock);
    for (uint32_t i = 0; i < 64u && first + i < VFU_MSIX_VECTORS; i++)
        if (q->msix_on && q->msix[first + i].pending)
            bits |= 1ull << i;
    pthread_mutex_unlock(&q->lock);
    return bits;
}
