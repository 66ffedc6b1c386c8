/* QP transmit: turns send-queue requests, Read Responses owed to the peer,
 * the RTR and Terminate into FPDUs (RFC 5041 segmentation, RFC 5044 framing)
 * and hands them out as iovecs of whole FPDUs. Payload iovecs point straight
 * into registered memory: no copy. A partial write resumes at the exact
 * octet, because the frames stay built until every octet has been taken. */
#include <string.h>

#include "mpa/fpdu_walk.h"
#include "verbs/internal.h"

static struct uw__txf *frame_new(uw_qp *qp)
{
    uint32_t i = (qp->txf_head + qp->txf_count) % UW__TX_FRAMES;
    struct uw__txf *f = &qp->txf[i];
    f->iov = qp->txiov + (size_t)i * qp->txf_iov;
    if (qp->txb_pos + UW__TXB_FRAME > UW__TXB_CAP)
        qp->txb_pos = 0;
    f->b = qp->txb + qp->txb_pos;
    f->hdr = f->b + 2;
    f->kind = UW__TXK_NONE;
    f->ref = 0;
    f->slot = false;
    return f;
}

/* Frames hdr (hlen octets) plus payload pieces pay[0..npay) as one FPDU. */
static void frame_commit(uw_qp *qp, struct uw__txf *f, size_t hlen, const struct iovec *pay,
                         size_t npay)
{
    struct iovec ul[UW_MAX_SGE + 2];
    ul[0].iov_base = f->hdr;
    ul[0].iov_len = hlen;
    if (npay)
        memcpy(ul + 1, pay, npay * sizeof(*pay));
    ssize_t k;
    size_t wire = 0;
    size_t n = hlen;
    for (size_t i = 0; i < npay; i++)
        n += pay[i].iov_len;
    if (!qp->txf_count && !qp->txs && n + 9 <= UW__TX_FLAT) {
        uint32_t crc;
        k = uw__fpdu_build_flat(qp->txflat, UW__TX_FLAT, ul, npay + 1, qp->flags_tx, &crc);
        if (k > 0) {
            wire = (size_t)k;
            f->iov[0].iov_base = qp->txflat;
            f->iov[0].iov_len = wire;
            k = 1;
        }
    } else if (qp->txs) {
        /* Markers: one copy into a slot costs less than ~260 iovecs per
         * 64 KiB FPDU, and the CRC then runs over cached contiguous octets. */
        uint8_t *slot = qp->txs + (size_t)qp->txs_head * qp->txs_size;
        uw_mpa_fpdu res;
        k = uw_mpa_fpdu_copy(&res, slot, qp->txs_size, ul, npay + 1, qp->tx_pos, qp->flags_tx);
        if (k > 0) {
            wire = (size_t)k;
            f->iov[0].iov_base = slot;
            f->iov[0].iov_len = (size_t)k;
            k = 1;
            f->slot = true;
            qp->txs_head = (qp->txs_head + 1) % qp->txs_n;
            qp->txs_used++;
        }
    } else {
        uint32_t crc;
        k = uw__fpdu_build_plain(f->b, f->hdr + hlen, f->iov, qp->txf_iov, ul, npay + 1,
                                 qp->flags_tx, &crc, &wire);
        /* Only this path keeps its octets in txb; the others copied them. */
        if (k > 0)
            qp->txb_pos = (uint32_t)(f->hdr + hlen + uw__mpa_pad((uint32_t)n) + 4 - qp->txb);
    }
    /* Sizes are bounded by construction (MULPDU, UW_MAX_SGE, txf_iov). */
    f->iovcnt = k > 0 ? (uint16_t)k : 0;
    f->wire_len = (uint32_t)wire;
    qp->tx_pos += (uint32_t)wire;
    qp->txf_count++;
}

/* The iovecs of payload octets [off, off+len) of a scatter list. */
static size_t sge_slice(const uw_sge *sge, int nsge, uint32_t off, uint32_t len, struct iovec *out)
{
    size_t n = 0;
    for (int i = 0; i < nsge && len; i++) {
        if (off >= sge[i].length) {
            off -= sge[i].length;
            continue;
        }
        uint32_t take = sge[i].length - off;
        if (take > len)
            take = len;
        out[n].iov_base = (void *)(uintptr_t)(sge[i].addr + off);
        out[n].iov_len = take;
        n++;
        len -= take;
        off = 0;
    }
    return n;
}

static void hdr_untagged(uw_qp *qp, uint8_t *out, uint8_t op, bool last, uint32_t qn, uint32_t msn,
                         uint32_t mo, uint32_t inv)
{
    uw__ddp_hdr h = {.tagged = false,
                     .last = last,
                     .dv = qp->mpa.ddp_version ? 1 : 0,
                     .rv = 1,
                     .opcode = op,
                     .stag = inv,
                     .qn = qn,
                     .msn = msn,
                     .mo = mo};
    uw__ddp_hdr_encode(&h, out);
}

static void hdr_tagged(uw_qp *qp, uint8_t *out, uint8_t op, bool last, uint32_t stag, uint64_t to)
{
    uw__ddp_hdr h = {.tagged = true,
                     .last = last,
                     .dv = qp->mpa.ddp_version ? 1 : 0,
                     .rv = 1,
                     .opcode = op,
                     .stag = stag,
                     .to = to};
    uw__ddp_hdr_encode(&h, out);
}

static uint32_t room(uw_qp *qp, uint32_t hlen)
{
    return qp->mulpdu > hlen ? qp->mulpdu - hlen : 1;
}

static void build_term(uw_qp *qp)
{
    struct uw__txf *f = frame_new(qp);
    hdr_untagged(qp, f->hdr, UW__OP_TERMINATE, true, UW__QN_TERM, qp->msn_tx[2]++, 0, 0);
    size_t n = uw__term_encode(&qp->term_out, f->hdr + UW__DDP_UNTAGGED_HLEN);
    f->kind = UW__TXK_TERM;
    frame_commit(qp, f, UW__DDP_UNTAGGED_HLEN + n, NULL, 0);
    qp->term_sent = true; /* built: nothing follows it */
}

/* RFC 6581 7.1: the initiator's first FPDU is the negotiated zero-length
 * RTR. Linux siw uses STag 1 for the Write and as the Read's source; a zero
 * STag is rejected by deployed RNICs (ddp-rdmap-facts.md). */
static void build_rtr(uw_qp *qp)
{
    struct uw__txf *f = frame_new(qp);
    size_t hlen;
    if (qp->mpa.rtr & UW_MPA_RTR_SEND) {
        hdr_untagged(qp, f->hdr, UW__OP_SEND, true, UW__QN_SEND, qp->msn_tx[0]++, 0, 0);
        hlen = UW__DDP_UNTAGGED_HLEN;
    } else if (qp->mpa.rtr & UW_MPA_RTR_WRITE) {
        hdr_tagged(qp, f->hdr, UW__OP_WRITE, true, 1, 0);
        hlen = UW__DDP_TAGGED_HLEN;
    } else {
        hdr_untagged(qp, f->hdr, UW__OP_READ_REQ, true, UW__QN_READ, qp->msn_tx[1]++, 0, 0);
        uw__read_req rr = {.sink_stag = 0, .sink_to = 0, .size = 0, .src_stag = 1, .src_to = 0};
        uw__read_req_encode(&rr, f->hdr + UW__DDP_UNTAGGED_HLEN);
        hlen = UW__DDP_UNTAGGED_HLEN + UW__READ_REQ_LEN;
        /* Its zero-length Read Response is consumed without a completion. */
        qp->ord_out++;
        qp->rtr_read_out = true;
    }
    frame_commit(qp, f, hlen, NULL, 0);
    qp->rtr_pending_tx = false;
}

/* One Read Response segment for the IRQ entry being answered. */
static void build_read_resp(uw_qp *qp)
{
    struct uw__irq_ent *e = &qp->irq[(qp->irq_head + qp->irq_tx) % UW__MAX_IRD];
    struct uw__txf *f = frame_new(qp);
    uint32_t chunk = e->rr.size - e->off;
    if (chunk > room(qp, UW__DDP_TAGGED_HLEN))
        chunk = room(qp, UW__DDP_TAGGED_HLEN);
    bool last = e->off + chunk == e->rr.size;
    hdr_tagged(qp, f->hdr, UW__OP_READ_RESP, last, e->rr.sink_stag, e->rr.sink_to + e->off);
    struct iovec pay = {.iov_base = chunk ? e->src + e->off : NULL, .iov_len = chunk};
    e->off += chunk;
    if (last) {
        f->kind = UW__TXK_IRQ_LAST;
        qp->irq_tx++;
        qp->tx_cur = 0;
    } else {
        qp->tx_cur = 2;
    }
    frame_commit(qp, f, UW__DDP_TAGGED_HLEN, &pay, chunk ? 1 : 0);
}

static int ord_limit(const uw_qp *qp)
{
    uint32_t o = qp->mpa.ord;
    if (o == UW_MPA_NO_NEGOTIATION || o > UW__MAX_IRD)
        o = UW__MAX_IRD;
    return (int)o;
}

/* Segments the next piece of the send-queue request at sq_next; returns false
 * when the queue head must wait (ORD, fence, nothing queued). */
static bool build_sq(uw_qp *qp)
{
    if (qp->sq_next >= qp->sq_count)
        return false;
    uint32_t idx = (qp->sq_head + qp->sq_next) % qp->sq_cap;
    struct uw__swqe *q = &qp->sq[idx];
    if (q->state == UW__WQE_QUEUED) {
        if ((q->wr.flags & UW_SEND_FENCE) && qp->ord_out)
            return false;
        switch (q->wr.opcode) {
        case UW_WR_LOCAL_INV: {
            uw_mr *mr = uw__mr_lookup(qp->ctx, q->wr.invalidate_stag);
            if (!mr || mr->pd != qp->pd) {
                q->status = UW_WC_LOC_PROT_ERR;
                q->err = UW_EINVAL;
            } else {
                mr->valid = false;
            }
            q->state = UW__WQE_DONE;
            qp->sq_next++;
            uw__qp_sq_retire(qp);
            return true;
        }
        case UW_WR_RDMA_READ:
            if (ord_limit(qp) == 0) {
                q->state = UW__WQE_DONE;
                q->status = UW_WC_FATAL_ERR;
                q->err = UW_EMPA_IRD;
                qp->sq_next++;
                uw__qp_sq_retire(qp);
                return true;
            }
            if ((int)qp->ord_out >= ord_limit(qp))
                return false; /* RFC 5040 6.3: beyond ORD, wait in the send queue */
            q->msn = qp->msn_tx[1]++;
            break;
        case UW_WR_SEND:
        case UW_WR_SEND_WITH_INV:
            q->msn = qp->msn_tx[0]++;
            break;
        default:
            break;
        }
        q->state = UW__WQE_SENDING;
    }
    struct uw__txf *f = frame_new(qp);
    struct iovec pay[UW_MAX_SGE];
    size_t npay = 0, hlen;
    bool last = true;
    if (q->wr.opcode == UW_WR_RDMA_READ) {
        hdr_untagged(qp, f->hdr, UW__OP_READ_REQ, true, UW__QN_READ, q->msn, 0, 0);
        uw__read_req rr = {.sink_stag = q->len ? q->sge[0].lkey : 0,
                           .sink_to = q->len ? q->sge[0].addr : 0,
                           .size = q->len,
                           .src_stag = q->wr.rkey,
                           .src_to = q->wr.remote_addr};
        uw__read_req_encode(&rr, f->hdr + UW__DDP_UNTAGGED_HLEN);
        hlen = UW__DDP_UNTAGGED_HLEN + UW__READ_REQ_LEN;
        q->state = UW__WQE_WAIT_RESP;
        qp->ord_out++;
        f->kind = UW__TXK_READREQ;
    } else {
        bool tagged = q->wr.opcode == UW_WR_RDMA_WRITE;
        hlen = tagged ? UW__DDP_TAGGED_HLEN : UW__DDP_UNTAGGED_HLEN;
        uint32_t chunk = q->len - q->off;
        if (chunk > room(qp, (uint32_t)hlen))
            chunk = room(qp, (uint32_t)hlen);
        last = q->off + chunk == q->len;
        if (tagged) {
            hdr_tagged(qp, f->hdr, UW__OP_WRITE, last, q->wr.rkey, q->wr.remote_addr + q->off);
        } else {
            bool se = (q->wr.flags & UW_SEND_SOLICITED) != 0;
            bool inv = q->wr.opcode == UW_WR_SEND_WITH_INV;
            uint8_t op = inv ? (se ? UW__OP_SEND_SE_INV : UW__OP_SEND_INV)
                             : (se ? UW__OP_SEND_SE : UW__OP_SEND);
            hdr_untagged(qp, f->hdr, op, last, UW__QN_SEND, q->msn, q->off,
                         inv ? q->wr.invalidate_stag : 0);
        }
        npay = sge_slice(q->sge, q->wr.num_sge, q->off, chunk, pay);
        q->off += chunk;
        if (last)
            f->kind = UW__TXK_SQ_LAST;
    }
    f->ref = idx;
    if (last) {
        qp->sq_next++;
        qp->tx_cur = 0;
    } else {
        qp->tx_cur = 1;
    }
    frame_commit(qp, f, hlen, pay, npay);
    return true;
}

static void build(uw_qp *qp)
{
    /* Called on every pass of a busy-poll loop: idle must cost little. */
    if (!((qp->term_queued && !qp->term_sent) || qp->rtr_pending_tx || qp->tx_cur ||
          qp->irq_tx < qp->irq_count || qp->sq_next < qp->sq_count))
        return;
    while (qp->txf_count < UW__TX_FRAMES && !qp->term_sent &&
           (!qp->txs || qp->txs_used < qp->txs_n)) {
        if (qp->term_queued) {
            build_term(qp);
            return;
        }
        if (qp->dead || (qp->state != UW_QPS_RTS && qp->state != UW_QPS_CLOSING))
            return;
        /* RFC 6581 7.1: the responder sends nothing before the RTR; RFC 5044
         * 7.1.2 rule 4: nor, without RTRs, before a first valid FPDU. */
        if (qp->rtr_pending_rx || qp->first_rx_pending)
            return;
        if (qp->rtr_pending_tx) {
            build_rtr(qp);
            continue;
        }
        /* Messages are not interleaved; between messages, Read Responses
         * owed to the peer go first so that its reads are not starved. */
        if (qp->tx_cur == 2 || (qp->tx_cur == 0 && qp->irq_tx < qp->irq_count)) {
            build_read_resp(qp);
            continue;
        }
        if (!build_sq(qp))
            return;
    }
}

bool uw__qp_tx_pending(uw_qp *qp)
{
    build(qp);
    return qp->txf_count != 0;
}

int uw__qp_tx_iov(uw_qp *qp, struct iovec *iov, int cap)
{
    build(qp);
    int n = 0;
    size_t skip = qp->txf_off;
    for (uint32_t i = 0; i < qp->txf_count; i++) {
        struct uw__txf *f = &qp->txf[(qp->txf_head + i) % UW__TX_FRAMES];
        for (uint16_t k = 0; k < f->iovcnt; k++) {
            size_t l = f->iov[k].iov_len;
            if (skip >= l) {
                skip -= l;
                continue;
            }
            uint8_t *b = (uint8_t *)f->iov[k].iov_base + skip;
            /* A trailer and the next frame's headers sit side by side. */
            if (n && (uint8_t *)iov[n - 1].iov_base + iov[n - 1].iov_len == b) {
                iov[n - 1].iov_len += l - skip;
            } else {
                if (n == cap)
                    return n;
                iov[n].iov_base = b;
                iov[n].iov_len = l - skip;
                n++;
            }
            skip = 0;
        }
    }
    return n;
}

static void frame_done(uw_qp *qp, struct uw__txf *f)
{
    if (f->slot)
        qp->txs_used--;
    switch (f->kind) {
    case UW__TXK_SQ_LAST: {
        struct uw__swqe *q = &qp->sq[f->ref];
        q->state = UW__WQE_DONE;
        uw__qp_sq_retire(qp);
        break;
    }
    case UW__TXK_IRQ_LAST:
        qp->irq_head = (qp->irq_head + 1) % UW__MAX_IRD;
        qp->irq_count--;
        qp->irq_tx--;
        break;
    case UW__TXK_TERM:
        qp->term_done = true;
        break;
    default:
        break;
    }
}

void uw__qp_tx_advance(uw_qp *qp, size_t n)
{
    while (n && qp->txf_count) {
        struct uw__txf *f = &qp->txf[qp->txf_head];
        size_t left = f->wire_len - qp->txf_off;
        if (n < left) {
            qp->txf_off += (uint32_t)n;
            return;
        }
        n -= left;
        qp->txf_off = 0;
        qp->txf_head = (qp->txf_head + 1) % UW__TX_FRAMES;
        qp->txf_count--;
        frame_done(qp, f);
    }
}

void uw__qp_terminate(uw_qp *qp, int err, const uw__ddp_hdr *h, const uint8_t *rdmap_hdr)
{
    if (qp->term_queued || qp->dead)
        return;
    uw__term_msg *t = &qp->term_out;
    memset(t, 0, sizeof(*t));
    t->term = uw__term_for_error(err, h && h->tagged);
    /* RFC 5040 7.2: DDP and RDMAP errors carry the offending headers; an LLP
     * error means the segment itself is not trustworthy. */
    if (h && t->term.layer != UW_TERM_LLP) {
        t->d = true;
        t->m = true;
        t->seg_len = (uint16_t)qp->rx.n;
        t->ddp_hdr_len = (uint8_t)uw__ddp_hdr_encode(h, t->ddp_hdr);
        if (rdmap_hdr) {
            t->r = true;
            memcpy(t->rdmap_hdr, rdmap_hdr, UW__READ_REQ_LEN);
        }
    }
    qp->term_queued = true;
    qp->close_err = err;
    qp->dead = true;
    uw__log(qp->ctx, UW_LOG_WARN, "QP[%u]: sending Terminate: %s (%s)", qp->id,
            uw_term_describe(t->term), uw_strerror(err));
}

ssize_t uw__qp_tx_take(uw_qp *qp, uint8_t **out)
{
    const uw_allocator *a = &qp->ctx->alloc;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    *out = NULL;
    for (;;) {
        struct iovec iov[UW__TX_IOV];
        int n = uw__qp_tx_iov(qp, iov, UW__TX_IOV);
        if (n <= 0)
            break;
        /* The requests are being dropped with the QP: nothing to complete. */
        for (uint32_t i = 0; i < qp->txf_count; i++) {
            struct uw__txf *f = &qp->txf[(qp->txf_head + i) % UW__TX_FRAMES];
            if (f->kind != UW__TXK_TERM)
                f->kind = UW__TXK_NONE;
        }
        size_t add = 0;
        for (int i = 0; i < n; i++)
            add += iov[i].iov_len;
        if (len + add > cap) {
            size_t ncap = cap ? cap : 4096;
            while (ncap < len + add)
                ncap *= 2;
            uint8_t *nb = a->alloc(a->ud, ncap);
            if (!nb) {
                a->free(a->ud, buf);
                return UW_ENOMEM;
            }
            if (len)
                memcpy(nb, buf, len);
            a->free(a->ud, buf);
            buf = nb;
            cap = ncap;
        }
        for (int i = 0; i < n; i++) {
            memcpy(buf + len, iov[i].iov_base, iov[i].iov_len);
            len += iov[i].iov_len;
        }
        uw__qp_tx_advance(qp, add);
    }
    if (!len) {
        a->free(a->ud, buf);
        return 0;
    }
    *out = buf;
    return (ssize_t)len;
}
