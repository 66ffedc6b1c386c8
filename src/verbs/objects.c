/* Contexts, protection domains, the STag table, completion queues and the
 * event queue. Nothing here touches a descriptor or the clock: the context's
 * fds (one thing for the application to wait on) are io/ctx_fds.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "verbs/internal.h"

void uw__log(uw_ctx *ctx, int level, const char *fmt, ...)
{
    if (!ctx->log || level > ctx->log_level)
        return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ctx->log(ctx->log_ud, level, buf);
}

int uw_ctx_create(uw_ctx **out, const uw_ctx_attr *attr)
{
    return uw__ctx_create_with(out, attr, NULL);
}

int uw__ctx_create_with(uw_ctx **out, const uw_ctx_attr *attr, const struct uw__ctx_hooks *h)
{
    if (!out)
        return UW_EINVAL;
    uw_allocator a = uw__allocator(attr ? attr->alloc : NULL);
    uw_ctx *c = a.alloc(a.ud, sizeof(*c));
    if (!c)
        return UW_ENOMEM;
    memset(c, 0, sizeof(*c));
    c->alloc = a;
    if (attr) {
        c->log = attr->log;
        c->log_ud = attr->log_ud;
        c->log_level = attr->log_level;
    }
    if (h) {
        c->clock = h->clock;
        c->clock_ud = h->clock_ud;
    }
    int err = uw__ctx_fds_open(c);
    if (err) {
        a.free(a.ud, c);
        return err;
    }
    *out = c;
    return 0;
}

int uw_ctx_destroy(uw_ctx *c)
{
    if (!c)
        return UW_EINVAL;
    if (c->npd || c->ncq || c->nqp || c->nlisten)
        return UW_EBUSY;
    uw__orphans_finish(c);
    for (struct uw__evnode *n = c->ev_head; n;) {
        struct uw__evnode *next = n->next;
        c->alloc.free(c->alloc.ud, n);
        n = next;
    }
    uw__ctx_fds_close(c);
    uw__mrt_free(&c->mrt, &c->alloc);
    c->alloc.free(c->alloc.ud, c);
    return 0;
}

int uw__event_push(uw_ctx *c, const uw_cm_event *ev)
{
    struct uw__evnode *n = c->alloc.alloc(c->alloc.ud, sizeof(*n));
    if (!n)
        return UW_ENOMEM;
    n->next = NULL;
    n->ev = *ev;
    if (c->ev_tail)
        c->ev_tail->next = n;
    else
        c->ev_head = n;
    c->ev_tail = n;
    c->produced++;
    c->produced_ev++;
    return 0;
}

/* A progress pass made inside a call that returns only one kind of result
 * (events, or one CQ's completions) may queue others; the context fd must
 * then say so, or an application that drained "everything" and waits on the
 * fd would sleep on them. */
static void signal_others(uw_ctx *c, uint64_t wc_before, uint64_t ev_before, const uw_cq *mine,
                          uint64_t mine_before)
{
    uint64_t wc = (c->produced - c->produced_ev) - wc_before;
    uint64_t ev = c->produced_ev - ev_before;
    uint64_t own = mine ? mine->ring.pushed - mine_before : 0;
    if ((mine && (ev || wc > own)) || (!mine && wc))
        uw__ctx_signal(c);
}

int uw_cm_get_event(uw_ctx *c, uw_cm_event *ev)
{
    if (!c || !ev)
        return UW_EINVAL;
    if (!c->ev_head) {
        uint64_t wc0 = c->produced - c->produced_ev, ev0 = c->produced_ev;
        uw_ctx_progress(c);
        signal_others(c, wc0, ev0, NULL, 0);
    }
    struct uw__evnode *n = c->ev_head;
    if (!n)
        return 0;
    c->ev_head = n->next;
    if (!c->ev_head)
        c->ev_tail = NULL;
    *ev = n->ev;
    c->alloc.free(c->alloc.ud, n);
    return 1;
}

int uw_cm_wait_event(uw_ctx *c, uw_cm_event *ev, int timeout_ms)
{
    if (!c || !ev)
        return UW_EINVAL;
    uint64_t end = timeout_ms < 0 ? 0 : uw__ctx_now(c) + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        int r = uw_cm_get_event(c, ev);
        if (r != 0)
            return r;
        int left = -1;
        if (timeout_ms >= 0) {
            uint64_t now = uw__ctx_now(c);
            if (now >= end)
                return UW_ETIMEDOUT;
            left = (int)((end - now + 999999u) / 1000000u);
        }
        uint64_t wc0 = c->produced - c->produced_ev, ev0 = c->produced_ev;
        r = uw_ctx_wait(c, left);
        signal_others(c, wc0, ev0, NULL, 0);
        if (r < 0 && r != UW_ETIMEDOUT)
            return r; /* a timeout: the event may have come with it, look once more */
    }
}

const char *uw_cm_event_name(int type)
{
    switch (type) {
    case UW_CM_CONNECT_REQUEST:
        return "CONNECT_REQUEST";
    case UW_CM_ESTABLISHED:
        return "ESTABLISHED";
    case UW_CM_REJECTED:
        return "REJECTED";
    case UW_CM_CONNECT_ERROR:
        return "CONNECT_ERROR";
    case UW_CM_DISCONNECTED:
        return "DISCONNECTED";
    case UW_CM_TERMINATED:
        return "TERMINATED";
    case UW_CM_CONN_ERROR:
        return "CONN_ERROR";
    default:
        return "UNKNOWN";
    }
}

/* ------------------------------------------------------------------------ */

int uw_pd_alloc(uw_ctx *c, uw_pd **out)
{
    if (!c || !out)
        return UW_EINVAL;
    uw_pd *pd = c->alloc.alloc(c->alloc.ud, sizeof(*pd));
    if (!pd)
        return UW_ENOMEM;
    memset(pd, 0, sizeof(*pd));
    pd->ctx = c;
    pd->id = ++c->next_id;
    c->npd++;
    *out = pd;
    return 0;
}

int uw_pd_dealloc(uw_pd *pd)
{
    if (!pd)
        return UW_EINVAL;
    if (pd->nmr || pd->nqp)
        return UW_EBUSY;
    pd->ctx->npd--;
    pd->ctx->alloc.free(pd->ctx->alloc.ud, pd);
    return 0;
}

int uw_mr_reg(uw_pd *pd, void *addr, size_t len, unsigned access, uw_mr **out)
{
    if (!pd || !out || (!addr && len) || (access & ~0xFu))
        return UW_EINVAL;
    /* As in verbs: the peer may write only where we may write. */
    if ((access & UW_ACCESS_REMOTE_WRITE) && !(access & UW_ACCESS_LOCAL_WRITE))
        return UW_EINVAL;
    if ((uint64_t)(uintptr_t)addr + len < (uint64_t)(uintptr_t)addr)
        return UW_EINVAL;
    uw_ctx *c = pd->ctx;
    uw_mr *mr = c->alloc.alloc(c->alloc.ud, sizeof(*mr));
    if (!mr)
        return UW_ENOMEM;
    int r = uw__mrt_add(&c->mrt, &c->alloc, mr);
    if (r < 0) {
        c->alloc.free(c->alloc.ud, mr);
        return r;
    }
    mr->pd = pd;
    mr->addr = addr;
    mr->len = len;
    mr->access = access;
    mr->valid = true;
    pd->nmr++;
    *out = mr;
    return 0;
}

int uw_mr_dereg(uw_mr *mr)
{
    if (!mr)
        return UW_EINVAL;
    uw_ctx *c = mr->pd->ctx;
    uw__mrt_remove(&c->mrt, mr);
    mr->pd->nmr--;
    c->alloc.free(c->alloc.ud, mr);
    return 0;
}

int uw_mr_rereg(uw_mr *mr)
{
    if (!mr)
        return UW_EINVAL;
    uw__mrt_rekey(&mr->pd->ctx->mrt, mr);
    mr->valid = true;
    return 0;
}

uint32_t uw_mr_stag(const uw_mr *mr)
{
    return mr ? mr->stag : 0;
}

bool uw_mr_valid(const uw_mr *mr)
{
    return mr && mr->valid;
}

/* ------------------------------------------------------------------------ */

int uw_cq_create(uw_ctx *c, unsigned depth, uw_cq **out)
{
    if (!c || !out || depth == 0 || depth > (1u << 20))
        return UW_EINVAL;
    uw_cq *cq = c->alloc.alloc(c->alloc.ud, sizeof(*cq));
    if (!cq)
        return UW_ENOMEM;
    memset(cq, 0, sizeof(*cq));
    cq->ring.wc = c->alloc.alloc(c->alloc.ud, depth * sizeof(uw_wc));
    if (!cq->ring.wc) {
        c->alloc.free(c->alloc.ud, cq);
        return UW_ENOMEM;
    }
    cq->ctx = c;
    cq->ring.cap = depth;
    c->ncq++;
    *out = cq;
    return 0;
}

int uw_cq_destroy(uw_cq *cq)
{
    if (!cq)
        return UW_EINVAL;
    if (cq->nqp)
        return UW_EBUSY;
    uw_ctx *c = cq->ctx;
    c->ncq--;
    c->alloc.free(c->alloc.ud, cq->ring.wc);
    c->alloc.free(c->alloc.ud, cq);
    return 0;
}

int uw__cq_take(uw_cq *cq, uw_wc *wc, int n)
{
    bool was_full = uw__cqr_full(&cq->ring);
    int k = uw__cqr_take(&cq->ring, wc, n);
    if (k && was_full) {
        /* Space freed: QPs paused on the full CQ may go on. */
        for (uw_qp *q = cq->ctx->qps; q; q = q->next)
            if (q->scq == cq || q->rcq == cq)
                uw__kick(q);
    }
    return k;
}

int uw_cq_poll(uw_cq *cq, uw_wc *wc, int n)
{
    if (!cq || (!wc && n) || n < 0)
        return UW_EINVAL;
    uw_ctx *c = cq->ctx;
    uint64_t wc0 = c->produced - c->produced_ev, ev0 = c->produced_ev, own0 = cq->ring.pushed;
    /* One engine pass per call, before taking when the queue alone cannot
     * fill the request. A second pass after a hit would put one more system
     * call between a received message and the caller's answer to it. */
    bool fill = cq->ring.count < (uint32_t)n;
    if (fill)
        uw_ctx_progress(c);
    int k = uw__cq_take(cq, wc, n);
    if (!fill)
        uw_ctx_progress(c);
    signal_others(c, wc0, ev0, cq, own0);
    return k;
}

int uw_cq_wait(uw_cq *cq, uw_wc *wc, int n, int timeout_ms)
{
    if (!cq || !wc || n <= 0)
        return UW_EINVAL;
    uint64_t end = timeout_ms < 0 ? 0 : uw__ctx_now(cq->ctx) + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        /* Take what is queued without a progress pass: the blocking wait
         * below returns at once when anything is ready, so a pass here would
         * only add a syscall to the latency path. */
        int k = uw__cq_take(cq, wc, n);
        if (k)
            return k;
        int left = -1;
        if (timeout_ms >= 0) {
            uint64_t now = uw__ctx_now(cq->ctx);
            if (now >= end)
                return UW_ETIMEDOUT;
            left = (int)((end - now + 999999u) / 1000000u);
        }
        uw_ctx *c = cq->ctx;
        uint64_t wc0 = c->produced - c->produced_ev, ev0 = c->produced_ev, own0 = cq->ring.pushed;
        int r = uw_ctx_wait(c, left);
        signal_others(c, wc0, ev0, cq, own0);
        if (r < 0 && r != UW_ETIMEDOUT)
            return r; /* a timeout: completions may have come with it, look once more */
    }
}

int uw_cq_fd(const uw_cq *cq)
{
    return cq ? uw_ctx_fd(cq->ctx) : UW_EINVAL;
}
