/* QP transmit: turns send-queue requests, Read Responses owed to the peer,
 * the RTR and Terminate into FPDUs (RFC 5041 segmentation, RFC 5044 framing)
 * and hands them out as iovecs of whole FPDUs. Payload iovecs point straight
 * into registered memory: no copy. A partial write resumes at the exact
 * octet, because the frames stay built until every octet has been taken. */
#include <string.h>

#include "mpa/fpdu_walk.h"
#include "rdmap/opcode.h"
#include "rdmap/rdmap.h"

static struct uw__txf *frame_new(struct uw__rdmap *rd)
{
    uint32_t i = (rd->txf_head + rd->txf_count) & (rd->txf_cap - 1);
    struct uw__txf *f = &rd->txf[i];
    f->iov = rd->txiov + (size_t)i * rd->txf_iov;
    if (rd->txb_pos + UW__TXB_FRAME > UW__TXB_BYTES(rd->txf_cap))
        rd->txb_pos = 0;
    f->b = rd->txb + rd->txb_pos;
    f->hdr = f->b + 2;
    f->kind = UW__TXK_NONE;
    f->ref = 0;
    f->slot = false;
    return f;
}

/* Frames hdr (hlen octets) plus payload pieces pay[0..npay) as one FPDU. */
static void frame_commit(struct uw__rdmap *rd, struct uw__txf *f, size_t hlen,
                         const struct iovec *pay, size_t npay)
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
    if (!rd->txf_count && !rd->txs && n + 9 <= UW__TX_FLAT) {
        uint32_t crc;
        k = uw__fpdu_build_flat(rd->txflat, UW__TX_FLAT, ul, npay + 1, rd->flags_tx, &crc);
        if (k > 0) {
            wire = (size_t)k;
            f->iov[0].iov_base = rd->txflat;
            f->iov[0].iov_len = wire;
            k = 1;
        }
    } else if (rd->txs) {
        /* Markers: one copy into a slot costs less than ~260 iovecs per
         * 64 KiB FPDU, and the CRC then runs over cached contiguous octets. */
        uint8_t *slot = rd->txs + (size_t)rd->txs_head * rd->txs_size;
        uw_mpa_fpdu res;
        k = uw_mpa_fpdu_copy(&res, slot, rd->txs_size, ul, npay + 1, rd->tx_pos, rd->flags_tx);
        if (k > 0) {
            wire = (size_t)k;
            f->iov[0].iov_base = slot;
            f->iov[0].iov_len = (size_t)k;
            k = 1;
            f->slot = true;
            rd->txs_head = (rd->txs_head + 1) % rd->txs_n;
            rd->txs_used++;
        }
    } else {
        uint32_t crc;
        k = uw__fpdu_build_plain(f->b, f->hdr + hlen, f->iov, rd->txf_iov, ul, npay + 1,
                                 rd->flags_tx, &crc, &wire);
        /* Only this path keeps its octets in txb; the others copied them. */
        if (k > 0)
            rd->txb_pos = (uint32_t)(f->hdr + hlen + uw__mpa_pad((uint32_t)n) + 4 - rd->txb);
    }
    /* Sizes are bounded by construction (MULPDU, UW_MAX_SGE, txf_iov). */
    f->iovcnt = k > 0 ? (uint16_t)k : 0;
    f->wire_len = (uint32_t)wire;
    rd->tx_pos += (uint32_t)wire;
    rd->txf_count++;
}

/* Writes op's header; the buffer model and queue come from the opcode
 * table. stag is the target (tagged) or the STag to invalidate; off is the
 * TO (tagged) or the MO. Returns the header's length. */
static size_t put_hdr(struct uw__rdmap *rd, uint8_t *out, uint8_t op, bool last, uint32_t stag,
                      uint64_t off, uint32_t msn)
{
    const struct uw__opinfo *o = &uw__optab[op];
    uw__ddp_hdr h = {.tagged = o->tagged,
                     .last = last,
                     .dv = rd->mpa.ddp_version ? 1 : 0,
                     .rv = 1,
                     .opcode = op,
                     .stag = stag,
                     .to = off,
                     .qn = o->qn,
                     .msn = msn,
                     .mo = (uint32_t)off};
    return uw__ddp_hdr_encode(&h, out);
}

/* MSNs count messages per queue (RFC 5041 5.1): taken once per message. */
static uint32_t next_msn(struct uw__rdmap *rd, uint8_t op)
{
    return rd->msn_tx[uw__optab[op].qn]++;
}

/* RFC 5044 5.1: FPDUs SHOULD begin where TCP segments do. The kernel cuts
 * what it sends into segments of the EMSS from the first octet of a write
 * that finds its send queue empty of unsent octets (TCP_NODELAY sent the
 * last write's tail), and continues the grid of queued octets otherwise;
 * tx_origin is where the current grid began, which the I/O layer reports
 * (uw__rd_tx_regrid()). A full FPDU (2 + MULPDU + CRC) spans exactly one
 * grid step, so full FPDUs keep to it until a message's short last FPDU
 * leaves the next one off the grid. That one is then cut to end on the
 * grid again: one small FPDU more per message. A remainder too small for
 * an FPDU is covered by two of about half a step each. FPDU lengths are
 * multiples of 4, and so is every distance from the origin, so the grid is
 * reached exactly. Only at an Ethernet-like EMSS: with 64 KiB FPDUs, or
 * markers in the stream, there is nothing to keep to. */
static uint32_t grid(const struct uw__rdmap *rd)
{
    uint32_t g = ((2u + rd->mulpdu + 3u) & ~3u) + 4u;
    return g > UW__TX_GROW_MULPDU || rd->txs ? 0 : g;
}

bool uw__rd_tx_offgrid(const struct uw__rdmap *rd)
{
    /* Messages that fit in one FPDU (ping-pong) are never cut: only a
     * stream of segmented ones asks where the grid is. */
    uint32_t g = grid(rd);
    return g && rd->tx_seg && !rd->txf_count && (rd->tx_pos - rd->tx_origin) % g != 0;
}

void uw__rd_tx_regrid(struct uw__rdmap *rd)
{
    rd->tx_origin = rd->tx_pos;
}

/* Payload room of the next FPDU, kept to the grid. */
#define UW__ALIGN_MIN 64u
static uint32_t room(struct uw__rdmap *rd, uint32_t hlen)
{
    uint32_t max = rd->mulpdu > hlen ? rd->mulpdu - hlen : 1;
    uint32_t g = grid(rd);
    if (!g)
        return max;
    uint32_t phase = (rd->tx_pos - rd->tx_origin) % g;
    if (!phase)
        return max;
    uint32_t w = g - phase;
    if (w < UW__ALIGN_MIN)
        w = ((w + g) / 2u) & ~3u;
    uint32_t ul = w - 6u; /* 2 + ULPDU + CRC, with no pad as w is a multiple of 4 */
    return ul > hlen && ul - hlen < max ? ul - hlen : max;
}

static void build_term(struct uw__rdmap *rd)
{
    struct uw__txf *f = frame_new(rd);
    size_t hlen = put_hdr(rd, f->hdr, UW__OP_TERMINATE, true, 0, 0, next_msn(rd, UW__OP_TERMINATE));
    size_t n = uw__term_encode(&rd->term_out, f->hdr + hlen);
    f->kind = UW__TXK_TERM;
    frame_commit(rd, f, hlen + n, NULL, 0);
    rd->term_sent = true; /* built: nothing follows it */
}

/* RFC 6581 7.1: the initiator's first FPDU is the negotiated zero-length
 * RTR. Linux siw uses STag 1 for the Write and as the Read's source; a zero
 * STag is rejected by deployed RNICs (ddp-rdmap-facts.md). */
static void build_rtr(struct uw__rdmap *rd)
{
    struct uw__txf *f = frame_new(rd);
    size_t hlen;
    if (rd->mpa.rtr & UW_MPA_RTR_SEND) {
        hlen = put_hdr(rd, f->hdr, UW__OP_SEND, true, 0, 0, next_msn(rd, UW__OP_SEND));
    } else if (rd->mpa.rtr & UW_MPA_RTR_WRITE) {
        hlen = put_hdr(rd, f->hdr, UW__OP_WRITE, true, 1, 0, 0);
    } else {
        hlen = put_hdr(rd, f->hdr, UW__OP_READ_REQ, true, 0, 0, next_msn(rd, UW__OP_READ_REQ));
        uw__read_req rr = {.sink_stag = 0, .sink_to = 0, .size = 0, .src_stag = 1, .src_to = 0};
        uw__read_req_encode(&rr, f->hdr + hlen);
        hlen += uw__optab[UW__OP_READ_REQ].fixed;
        /* Its zero-length Read Response is consumed without a completion. */
        rd->ord_out++;
        rd->rtr_read_out = true;
    }
    frame_commit(rd, f, hlen, NULL, 0);
    rd->rtr_pending_tx = false;
}

/* One Read Response segment for the IRQ entry being answered. */
static void build_read_resp(struct uw__rdmap *rd)
{
    struct uw__irq_ent *e = &rd->irq[(rd->irq_head + rd->irq_tx) % UW__MAX_IRD];
    struct uw__txf *f = frame_new(rd);
    uint32_t hlen = uw__optab[UW__OP_READ_RESP].hlen;
    uint32_t chunk = e->rr.size - e->off;
    if (chunk > room(rd, hlen))
        chunk = room(rd, hlen);
    bool last = e->off + chunk == e->rr.size;
    rd->tx_seg = !last || e->off;
    put_hdr(rd, f->hdr, UW__OP_READ_RESP, last, e->rr.sink_stag, e->rr.sink_to + e->off, 0);
    struct iovec pay = {.iov_base = chunk ? e->src + e->off : NULL, .iov_len = chunk};
    e->off += chunk;
    if (last) {
        f->kind = UW__TXK_IRQ_LAST;
        rd->irq_tx++;
        rd->tx_cur = 0;
    } else {
        rd->tx_cur = 2;
    }
    frame_commit(rd, f, hlen, &pay, chunk ? 1 : 0);
}

static int ord_limit(const struct uw__rdmap *rd)
{
    uint32_t o = rd->mpa.ord;
    if (o == UW_MPA_NO_NEGOTIATION || o > UW__MAX_IRD)
        o = UW__MAX_IRD;
    return (int)o;
}

/* The RDMAP opcode a work request travels as. */
static uint8_t wr_op(const uw_send_wr *wr)
{
    switch (wr->opcode) {
    case UW_WR_RDMA_WRITE:
        return UW__OP_WRITE;
    case UW_WR_RDMA_READ:
        return UW__OP_READ_REQ;
    default:
        return uw__send_opcode((wr->flags & UW_SEND_SOLICITED) != 0,
                               wr->opcode == UW_WR_SEND_WITH_INV);
    }
}

/* Segments the next piece of the send-queue request at sq_next; returns false
 * when the queue head must wait (ORD, fence, nothing queued). */
static bool build_sq(struct uw__rdmap *rd)
{
    if (rd->sq_next >= rd->sq_count)
        return false;
    uint32_t idx = (rd->sq_head + rd->sq_next) % rd->sq_cap;
    struct uw__swqe *q = &rd->sq[idx];
    if (q->state == UW__WQE_QUEUED) {
        if ((q->wr.flags & UW_SEND_FENCE) && rd->ord_out)
            return false;
        switch (q->wr.opcode) {
        case UW_WR_LOCAL_INV: {
            uw_mr *mr = uw__mrt_lookup(rd->mrt, q->wr.invalidate_stag);
            if (!mr || mr->pd != rd->pd) {
                q->status = UW_WC_LOC_PROT_ERR;
                q->err = UW_EINVAL;
            } else {
                mr->valid = false;
            }
            q->state = UW__WQE_DONE;
            rd->sq_next++;
            uw__rd_sq_retire(rd);
            return true;
        }
        case UW_WR_RDMA_READ:
            if (ord_limit(rd) == 0) {
                q->state = UW__WQE_DONE;
                q->status = UW_WC_FATAL_ERR;
                q->err = UW_EMPA_IRD;
                rd->sq_next++;
                uw__rd_sq_retire(rd);
                return true;
            }
            if ((int)rd->ord_out >= ord_limit(rd))
                return false; /* RFC 5040 6.3: beyond ORD, wait in the send queue */
            break;
        default:
            break;
        }
        uint8_t op = wr_op(&q->wr);
        if (!uw__optab[op].tagged)
            q->msn = next_msn(rd, op);
        q->state = UW__WQE_SENDING;
    }
    uint8_t op = wr_op(&q->wr);
    const struct uw__opinfo *o = &uw__optab[op];
    struct uw__txf *f = frame_new(rd);
    struct iovec pay[UW_MAX_SGE];
    size_t npay = 0, hlen = o->hlen + o->fixed;
    bool last = true;
    if (op == UW__OP_READ_REQ) {
        put_hdr(rd, f->hdr, op, true, 0, 0, q->msn);
        /* A Read has one scatter entry: its sink is one STag and TO. */
        uw__read_req rr = {.sink_stag = q->len ? q->sge[0].lkey : 0,
                           .sink_to = q->len ? q->sge[0].addr : 0,
                           .size = q->len,
                           .src_stag = q->wr.rkey,
                           .src_to = q->wr.remote_addr};
        uw__read_req_encode(&rr, f->hdr + o->hlen);
        q->state = UW__WQE_WAIT_RESP;
        rd->ord_out++;
        f->kind = UW__TXK_READREQ;
    } else {
        uint32_t chunk = q->len - q->off;
        if (chunk > room(rd, (uint32_t)hlen))
            chunk = room(rd, (uint32_t)hlen);
        last = q->off + chunk == q->len;
        rd->tx_seg = !last || q->off;
        if (o->tagged)
            put_hdr(rd, f->hdr, op, last, q->wr.rkey, q->wr.remote_addr + q->off, 0);
        else
            put_hdr(rd, f->hdr, op, last, (o->flags & UW__OPF_INV) ? q->wr.invalidate_stag : 0,
                    q->off, q->msn);
        uw__sgc c;
        uw__sgc_init(&c, q->sge, q->wr.num_sge, q->off);
        npay = (size_t)uw__sgc_slice(&c, chunk, pay, UW_MAX_SGE);
        q->off += chunk;
        if (last)
            f->kind = UW__TXK_SQ_LAST;
    }
    f->ref = idx;
    if (last) {
        rd->sq_next++;
        rd->tx_cur = 0;
    } else {
        rd->tx_cur = 1;
    }
    frame_commit(rd, f, hlen, pay, npay);
    return true;
}

static void build(struct uw__rdmap *rd)
{
    /* Called on every pass of a busy-poll loop: idle must cost little. */
    if (!((rd->term_queued && !rd->term_sent) || rd->rtr_pending_tx || rd->tx_cur ||
          rd->irq_tx < rd->irq_count || rd->sq_next < rd->sq_count))
        return;
    if (rd->tx_grow && !rd->txf_count)
        uw__rd_tx_grow(rd);
    while (rd->txf_count < rd->txf_cap && !rd->term_sent &&
           (!rd->txs || rd->txs_used < rd->txs_n)) {
        if (rd->term_queued) {
            build_term(rd);
            return;
        }
        if (rd->dead || !rd->started)
            return;
        /* RFC 6581 7.1: the responder sends nothing before the RTR; RFC 5044
         * 7.1.2 rule 4: nor, without RTRs, before a first valid FPDU. */
        if (rd->rtr_pending_rx || rd->first_rx_pending)
            return;
        if (rd->rtr_pending_tx) {
            build_rtr(rd);
            continue;
        }
        /* Messages are not interleaved; between messages, Read Responses
         * owed to the peer go first so that its reads are not starved. */
        if (rd->tx_cur == 2 || (rd->tx_cur == 0 && rd->irq_tx < rd->irq_count)) {
            build_read_resp(rd);
            continue;
        }
        if (!build_sq(rd))
            return;
    }
    /* Full with more of a message to go: a stream of small FPDUs. */
    if (rd->txf_count == rd->txf_cap &&
        (rd->tx_cur || rd->sq_next < rd->sq_count || rd->irq_tx < rd->irq_count) && !rd->txs &&
        rd->mulpdu <= UW__TX_GROW_MULPDU && rd->txf_cap < UW__TX_FRAMES_MAX)
        rd->tx_grow = true;
}

bool uw__rd_tx_pending(struct uw__rdmap *rd)
{
    build(rd);
    return rd->txf_count != 0;
}

int uw__rd_tx_iov(struct uw__rdmap *rd, struct iovec *iov, int cap)
{
    build(rd);
    int n = 0;
    size_t skip = rd->txf_off;
    for (uint32_t i = 0; i < rd->txf_count; i++) {
        struct uw__txf *f = &rd->txf[(rd->txf_head + i) & (rd->txf_cap - 1)];
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

static void frame_done(struct uw__rdmap *rd, struct uw__txf *f)
{
    if (f->slot)
        rd->txs_used--;
    switch (f->kind) {
    case UW__TXK_SQ_LAST: {
        struct uw__swqe *q = &rd->sq[f->ref];
        q->state = UW__WQE_DONE;
        uw__rd_sq_retire(rd);
        break;
    }
    case UW__TXK_IRQ_LAST:
        rd->irq_head = (rd->irq_head + 1) % UW__MAX_IRD;
        rd->irq_count--;
        rd->irq_tx--;
        break;
    case UW__TXK_TERM:
        rd->term_done = true;
        break;
    default:
        break;
    }
}

void uw__rd_tx_advance(struct uw__rdmap *rd, size_t n)
{
    while (n && rd->txf_count) {
        struct uw__txf *f = &rd->txf[rd->txf_head];
        size_t left = f->wire_len - rd->txf_off;
        if (n < left) {
            rd->txf_off += (uint32_t)n;
            return;
        }
        n -= left;
        rd->txf_off = 0;
        rd->txf_head = (rd->txf_head + 1) & (rd->txf_cap - 1);
        rd->txf_count--;
        frame_done(rd, f);
    }
}

void uw__rd_terminate(struct uw__rdmap *rd, int err, const uw__ddp_hdr *h, const uint8_t *rdmap_hdr)
{
    if (rd->term_queued || rd->dead)
        return;
    uw__term_msg *t = &rd->term_out;
    memset(t, 0, sizeof(*t));
    t->term = uw__term_for_error(err, h && h->tagged);
    /* RFC 5040 7.2: DDP and RDMAP errors carry the offending headers; an LLP
     * error means the segment itself is not trustworthy. */
    if (h && t->term.layer != UW_TERM_LLP) {
        t->d = true;
        t->m = true;
        t->seg_len = (uint16_t)rd->rx.n;
        t->ddp_hdr_len = (uint8_t)uw__ddp_hdr_encode(h, t->ddp_hdr);
        if (rdmap_hdr) {
            t->r = true;
            memcpy(t->rdmap_hdr, rdmap_hdr, UW__READ_REQ_LEN);
        }
    }
    rd->term_queued = true;
    rd->term_err = err;
    rd->dead = true;
    rd->news |= UW__RD_TERM_QUEUED;
}

ssize_t uw__rd_tx_take(struct uw__rdmap *rd, uint8_t **out)
{
    const uw_allocator *a = &rd->alloc;
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    *out = NULL;
    for (;;) {
        struct iovec iov[UW__TX_IOV];
        int n = uw__rd_tx_iov(rd, iov, UW__TX_IOV);
        if (n <= 0)
            break;
        /* The requests are being dropped with the QP: nothing to complete. */
        for (uint32_t i = 0; i < rd->txf_count; i++) {
            struct uw__txf *f = &rd->txf[(rd->txf_head + i) & (rd->txf_cap - 1)];
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
        uw__rd_tx_advance(rd, add);
    }
    if (!len) {
        a->free(a->ud, buf);
        return 0;
    }
    *out = buf;
    return (ssize_t)len;
}
