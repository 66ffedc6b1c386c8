/* Queue pairs: creation, work-request posting, flushing, entering RTS. The
 * protocol work on the queues is in rdmap/qp_tx.c and rdmap/qp_rx.c, the
 * socket and connection handling in io/. */
#include <stdlib.h>
#include <string.h>

#include "verbs/internal.h"

int uw__qp_attr_check(const uw_ctx *c, const uw_qp_attr *attr)
{
    if (!c || !attr || !attr->pd || !attr->send_cq || !attr->recv_cq || attr->pd->ctx != c ||
        attr->send_cq->ctx != c || attr->recv_cq->ctx != c || attr->max_send_wr > 65536 ||
        attr->max_recv_wr > 65536)
        return UW_EINVAL;
    return 0;
}

int uw__qp_alloc(uw_ctx *c, const uw_qp_attr *attr, uw_qp **out)
{
    if (!out || uw__qp_attr_check(c, attr) < 0)
        return UW_EINVAL;
    unsigned sqd = attr->max_send_wr ? attr->max_send_wr : 128;
    unsigned rqd = attr->max_recv_wr ? attr->max_recv_wr : 128;
    uw_qp *qp = c->alloc.alloc(c->alloc.ud, sizeof(*qp));
    if (!qp)
        return UW_ENOMEM;
    /* Also qp->cm = UW__CM_IDLE (0), where every connection starts; from
     * here on it changes only through uw__cm_to() (io/cm.c). */
    memset(qp, 0, sizeof(*qp));
    if (uw__rd_init(&qp->rd, &c->alloc, sqd, rqd) < 0) {
        c->alloc.free(c->alloc.ud, qp);
        return UW_ENOMEM;
    }
    qp->tag = UW__EP_QP;
    qp->ctx = c;
    qp->pd = attr->pd;
    qp->scq = attr->send_cq;
    qp->rcq = attr->recv_cq;
    qp->rd.qp = qp;
    qp->rd.pd = attr->pd;
    qp->rd.scq = &attr->send_cq->ring;
    qp->rd.rcq = &attr->recv_cq->ring;
    qp->rd.mrt = &c->mrt;
    qp->sq_sig_all = attr->sq_sig_all;
    qp->fd = -1;
    qp->id = ++c->next_id;
    qp->state = UW_QPS_IDLE;
    qp->pd->nqp++;
    qp->scq->nqp++;
    qp->rcq->nqp++;
    c->nqp++;
    qp->next = c->qps;
    c->qps = qp;
    *out = qp;
    return 0;
}

int uw_qp_create(uw_ctx *c, const uw_qp_attr *attr, uw_qp **out)
{
    return uw__qp_alloc(c, attr, out);
}

int uw_qp_destroy(uw_qp *qp)
{
    if (!qp)
        return UW_EINVAL;
    uw_ctx *c = qp->ctx;
    /* Lingering closes belong to the context (io/linger.c), so they go on
     * after this returns. */
    uw__qp_close_socket(qp);
    if (c->detached == qp)
        c->detached = NULL;
    if (qp->listener) {
        qp->listener->npending--;
        uw__listener_update(qp->listener);
    }
    for (uw_qp **p = &c->qps; *p; p = &(*p)->next)
        if (*p == qp) {
            *p = qp->next;
            break;
        }
    if (qp->queued) {
        uw_qp *prev = NULL;
        for (uw_qp *q = c->ready_head; q; prev = q, q = q->rnext)
            if (q == qp) {
                if (prev)
                    prev->rnext = q->rnext;
                else
                    c->ready_head = q->rnext;
                if (c->ready_tail == qp)
                    c->ready_tail = prev;
                break;
            }
    }
    if (qp->deadline_ns)
        c->deadline_dirty = true;
    /* Events still queued for this QP would dangle: drop them. */
    struct uw__evnode **pp = &c->ev_head;
    c->ev_tail = NULL;
    while (*pp) {
        if ((*pp)->ev.qp == qp) {
            struct uw__evnode *dead = *pp;
            *pp = dead->next;
            c->alloc.free(c->alloc.ud, dead);
        } else {
            c->ev_tail = *pp;
            pp = &(*pp)->next;
        }
    }
    /* Completions of this QP already in a CQ keep their (now stale) qp
     * pointer, as in verbs; the header says so. */
    qp->pd->nqp--;
    qp->scq->nqp--;
    qp->rcq->nqp--;
    c->nqp--;
    uw__rd_fini(&qp->rd);
    c->alloc.free(c->alloc.ud, qp);
    return 0;
}

int uw_qp_state(const uw_qp *qp)
{
    return qp ? qp->state : UW_EINVAL;
}

void uw_qp_set_context(uw_qp *qp, void *p)
{
    if (qp)
        qp->user = p;
}

void *uw_qp_get_context(const uw_qp *qp)
{
    return qp ? qp->user : NULL;
}

int uw_qp_mpa_params(const uw_qp *qp, uw_mpa_params *out)
{
    if (!qp || !out)
        return UW_EINVAL;
    if (!uw__cm_established(qp->cm) && qp->state != UW_QPS_RTS && qp->state != UW_QPS_CLOSING)
        return UW_ENOTCONN;
    *out = qp->rd.mpa;
    return 0;
}

uint32_t uw_qp_mulpdu(const uw_qp *qp)
{
    return qp ? qp->rd.mulpdu : 0;
}

/* A scatter/gather entry must lie inside a valid region of the QP's PD with
 * the local rights the operation needs. */
static int check_sge(uw_qp *qp, const uw_sge *s, unsigned need)
{
    if (s->length == 0)
        return 0;
    uw_mr *mr = uw__mrt_lookup(&qp->ctx->mrt, s->lkey);
    if (!mr || !mr->valid || mr->pd != qp->pd)
        return UW_EINVAL;
    uint64_t base = (uint64_t)(uintptr_t)mr->addr;
    if (s->addr < base || s->addr + s->length < s->addr || s->addr + s->length > base + mr->len)
        return UW_EINVAL;
    if ((mr->access & need) != need)
        return UW_EPERM;
    return 0;
}

static bool qp_postable(const uw_qp *qp)
{
    return qp->state == UW_QPS_IDLE || qp->state == UW_QPS_CONNECTING || qp->state == UW_QPS_RTS ||
           qp->state == UW_QPS_CLOSING;
}

int uw_post_send(uw_qp *qp, const uw_send_wr *wr, int n, int *bad)
{
    if (!qp || (!wr && n) || n < 0)
        return UW_EINVAL;
    for (int i = 0; i < n; i++) {
        const uw_send_wr *w = &wr[i];
        int err = 0;
        if (!qp_postable(qp) || qp->disconnect_req)
            err = UW_EPERM;
        else if (qp->rd.sq_count == qp->rd.sq_cap)
            err = UW_ENOBUFS;
        else if (w->num_sge < 0 || w->num_sge > UW_MAX_SGE || (w->num_sge && !w->sg_list) ||
                 w->opcode < UW_WR_SEND || w->opcode > UW_WR_LOCAL_INV)
            err = UW_EINVAL;
        /* RDMA Read names one sink buffer on the wire (RFC 5040 4.4). */
        else if (w->opcode == UW_WR_RDMA_READ && w->num_sge > 1)
            err = UW_EINVAL;
        uint64_t len = 0;
        for (int k = 0; !err && k < w->num_sge; k++) {
            unsigned need = w->opcode == UW_WR_RDMA_READ ? UW_ACCESS_LOCAL_WRITE : 0;
            err = check_sge(qp, &w->sg_list[k], need);
            len += w->sg_list[k].length;
        }
        if (!err && len > UINT32_MAX)
            err = UW_EMSGSIZE;
        if (err) {
            if (bad)
                *bad = i;
            return err;
        }
        struct uw__swqe *q = &qp->rd.sq[(qp->rd.sq_head + qp->rd.sq_count) % qp->rd.sq_cap];
        memset(q, 0, sizeof(*q));
        q->wr = *w;
        if (w->num_sge)
            memcpy(q->sge, w->sg_list, (size_t)w->num_sge * sizeof(uw_sge));
        q->wr.sg_list = NULL;
        q->len = (uint32_t)len;
        q->signaled = qp->sq_sig_all || (w->flags & UW_SEND_SIGNALED);
        q->state = UW__WQE_QUEUED;
        qp->rd.sq_count++;
    }
    uw__qp_doorbell(qp);
    return 0;
}

int uw_post_recv(uw_qp *qp, const uw_recv_wr *wr, int n, int *bad)
{
    if (!qp || (!wr && n) || n < 0)
        return UW_EINVAL;
    for (int i = 0; i < n; i++) {
        const uw_recv_wr *w = &wr[i];
        int err = 0;
        if (!qp_postable(qp))
            err = UW_EPERM;
        else if (qp->rd.rq_count == qp->rd.rq_cap)
            err = UW_ENOBUFS;
        else if (w->num_sge < 0 || w->num_sge > UW_MAX_SGE || (w->num_sge && !w->sg_list))
            err = UW_EINVAL;
        uint64_t len = 0;
        for (int k = 0; !err && k < w->num_sge; k++) {
            err = check_sge(qp, &w->sg_list[k], UW_ACCESS_LOCAL_WRITE);
            len += w->sg_list[k].length;
        }
        if (!err && len > UINT32_MAX)
            err = UW_EMSGSIZE;
        if (err) {
            if (bad)
                *bad = i;
            return err;
        }
        struct uw__rwqe *r = &qp->rd.rq[(qp->rd.rq_head + qp->rd.rq_count) % qp->rd.rq_cap];
        r->wr = *w;
        if (w->num_sge)
            memcpy(r->sge, w->sg_list, (size_t)w->num_sge * sizeof(uw_sge));
        r->wr.sg_list = NULL;
        r->len = (uint32_t)len;
        qp->rd.rq_count++;
    }
    return 0;
}

void uw__qp_flush(uw_qp *qp, int err)
{
    if (qp->state != UW_QPS_CLOSED)
        qp->state = UW_QPS_ERROR;
    uw__rd_flush(&qp->rd, err);
    uw__qp_after(qp);
}

void uw__qp_start(uw_qp *qp, const uw_mpa_params *mpa, bool initiator, uint32_t mulpdu,
                  uint32_t mulpdu_max, uint32_t tx_pos, uint32_t rx_pos)
{
    if (uw__rd_start(&qp->rd, mpa, initiator, mulpdu, mulpdu_max, tx_pos, rx_pos) < 0) {
        qp->state = UW_QPS_ERROR;
        qp->close_err = UW_ENOMEM;
        return;
    }
    qp->state = UW_QPS_RTS;
    qp->emss_left = qp->emss_every = UW__EMSS_FIRST;
    uw__qp_after(qp);
}
