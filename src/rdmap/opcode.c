/* The opcode table and the receiver's per-opcode steps (opcode.h). The
 * checks every segment shares (versions, the row's buffer model and queue,
 * MSN, MO, CRC, markers) stay in qp_rx.c; what is here is what only one
 * opcode knows. Codes follow RFC 5041 7 and RFC 5040 7; the wire mapping is
 * util/term_table.c's. */
#include "rdmap/opcode.h"
#include "rdmap/rdmap.h"

static struct uw__swqe *orq_head(struct uw__rdmap *rd)
{
    for (uint32_t i = 0; i < rd->sq_count; i++) {
        struct uw__swqe *q = &rd->sq[(rd->sq_head + i) % rd->sq_cap];
        if (q->state == UW__WQE_WAIT_RESP)
            return q;
    }
    return NULL;
}

/* A tagged target: the region named by stag must hold [to, to+len) with the
 * rights given. Codes per RFC 5041 7.2 (DDP) and RFC 5040 7.1 (RDMAP). */
static int tagged_target(struct uw__rdmap *rd, uint32_t stag, uint64_t to, uint32_t len,
                         unsigned need, bool rdmap, uint8_t **out)
{
    uw_mr *mr = uw__mrt_lookup(rd->mrt, stag);
    if (!mr || !mr->valid)
        return rdmap ? UW_ERDMAP_STAG : UW_EDDP_STAG;
    if (mr->pd != rd->pd)
        return rdmap ? UW_ERDMAP_PD : UW_EDDP_PD;
    if ((mr->access & need) != need)
        return UW_ERDMAP_ACCESS;
    if (to + len < to)
        return rdmap ? UW_ERDMAP_TO_WRAP : UW_EDDP_TO_WRAP;
    uint64_t base = (uint64_t)(uintptr_t)mr->addr;
    if (to < base || to + len > base + mr->len)
        return rdmap ? UW_ERDMAP_BOUNDS : UW_EDDP_BOUNDS;
    *out = mr->addr + (to - base);
    return 0;
}

/* RFC 6581 7.1: the RTR came. From here on the parameters name the RTR
 * that came, not those offered. */
static void rtr_arrived(struct uw__rdmap *rd, uint8_t type)
{
    rd->rtr_pending_rx = false;
    rd->mpa.rtr = type;
    rd->news |= UW__RD_RTR_ARRIVED;
}

static int write_hdr(struct uw__rdmap *rd, uint32_t len)
{
    struct uw__rx *rx = &rd->rx;
    const uw__ddp_hdr *h = &rx->h;
    if (rd->rtr_pending_rx) {
        /* RFC 6581 7.1: the zero-length Write RTR places nothing. */
        if (!(rd->mpa.rtr & UW_MPA_RTR_WRITE) || len || !h->last)
            return UW_EMPA_RTR_MISSING;
        return 0;
    }
    if (len == 0)
        return 0;
    rx->dest = UW__D_MEM;
    return tagged_target(rd, h->stag, h->to, len, UW_ACCESS_REMOTE_WRITE | UW_ACCESS_LOCAL_WRITE,
                         false, &rx->dptr);
}

static int write_end(struct uw__rdmap *rd)
{
    if (rd->rtr_pending_rx)
        rtr_arrived(rd, UW_MPA_RTR_WRITE);
    return 0;
}

static int read_resp_hdr(struct uw__rdmap *rd, uint32_t len)
{
    struct uw__rx *rx = &rd->rx;
    const uw__ddp_hdr *h = &rx->h;
    if (rd->rtr_pending_rx)
        return UW_EMPA_RTR_MISSING;
    if (rd->rtr_read_out)
        return len == 0 && h->last ? 0 : UW_ERDMAP_UNEXPECTED;
    struct uw__swqe *q = orq_head(rd);
    if (!q)
        return UW_ERDMAP_UNEXPECTED;
    /* A Read has one scatter entry: its sink is one STag and TO. */
    uint32_t sink = q->len ? q->sge[0].lkey : 0;
    uint64_t to = (q->len ? q->sge[0].addr : 0) + rd->read_resp_off;
    if (h->stag != sink || h->to != to || len > q->len - rd->read_resp_off)
        return UW_ERDMAP_UNEXPECTED;
    if (len == 0)
        return 0;
    rx->dest = UW__D_MEM;
    return tagged_target(rd, h->stag, h->to, len, UW_ACCESS_LOCAL_WRITE, false, &rx->dptr);
}

static int read_resp_end(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    if (rd->rtr_read_out) {
        rd->rtr_read_out = false;
        rd->ord_out--;
        rd->news |= UW__RD_KICK;
        return 0;
    }
    struct uw__swqe *q = orq_head(rd);
    rd->read_resp_off += rx->n - rx->hlen;
    if (!rx->h.last)
        return 0;
    if (rd->read_resp_off != q->len)
        return UW_ERDMAP_UNEXPECTED;
    rd->read_resp_off = 0;
    q->state = UW__WQE_DONE;
    rd->ord_out--;
    rd->news |= UW__RD_KICK;
    uw__rd_sq_retire(rd);
    return 0;
}

static int send_hdr(struct uw__rdmap *rd, uint32_t len)
{
    struct uw__rx *rx = &rd->rx;
    const uw__ddp_hdr *h = &rx->h;
    if (rd->rtr_pending_rx) {
        if ((rd->mpa.rtr & UW_MPA_RTR_SEND) && len == 0 && h->last)
            return 0; /* the Send RTR: consumes no receive buffer */
        return UW_EMPA_RTR_MISSING;
    }
    if (!rd->rq_count)
        return UW_EDDP_NOBUF;
    struct uw__rwqe *r = &rd->rq[rd->rq_head];
    if ((uint64_t)h->mo + len > r->len)
        return UW_EDDP_TOO_LONG;
    rx->dest = UW__D_RECV;
    rx->rwqe = r;
    uw__sgc_init(&rx->rc, r->sge, r->wr.num_sge, h->mo);
    rx->rstart = h->mo;
    return 0;
}

static int send_end(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    const uw__ddp_hdr *h = &rx->h;
    if (rd->rtr_pending_rx) {
        rd->msn_rx[UW__QN_SEND]++;
        rtr_arrived(rd, UW_MPA_RTR_SEND);
        return 0;
    }
    rd->rq_msg_off = rx->rc.pos;
    if (!h->last)
        return 0;
    unsigned f = uw__optab[h->opcode].flags;
    uw_wc wc = {.wr_id = rx->rwqe->wr.wr_id,
                .status = UW_WC_SUCCESS,
                .opcode = UW_WC_RECV,
                .byte_len = rd->rq_msg_off,
                .qp = rd->qp};
    if (f & UW__OPF_SE)
        wc.flags |= UW_WC_SOLICITED;
    if (f & UW__OPF_INV) {
        /* RFC 5040 6.10: invalidate before the completion is reported. */
        uw_mr *mr = uw__mrt_lookup(rd->mrt, h->stag);
        if (!mr)
            return UW_ERDMAP_STAG;
        if (mr->pd != rd->pd)
            return UW_ERDMAP_PD; /* as for a Read Request's source (code 3) */
        if (!(mr->access & UW_ACCESS_REMOTE_INVALIDATE))
            return UW_ERDMAP_INVALIDATE;
        mr->valid = false;
        wc.flags |= UW_WC_WITH_INV;
        wc.invalidated_stag = h->stag;
    }
    uw__rd_complete(rd, rd->rcq, &wc);
    rd->rq_head = (rd->rq_head + 1) % rd->rq_cap;
    rd->rq_count--;
    rd->rq_msg_off = 0;
    rd->msn_rx[UW__QN_SEND]++;
    return 0;
}

static int read_req_hdr(struct uw__rdmap *rd, uint32_t len)
{
    if (rd->rtr_pending_rx && !(rd->mpa.rtr & UW_MPA_RTR_READ))
        return UW_EMPA_RTR_MISSING;
    if (len != UW__READ_REQ_LEN || !rd->rx.h.last)
        return UW_EDDP_TOO_LONG;
    rd->rx.dest = UW__D_SMALL;
    return 0;
}

static int read_req_end(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    uw__read_req rr;
    uw__read_req_decode(rx->small, &rr);
    uint32_t ird = rd->mpa.ird;
    if (ird == UW_MPA_NO_NEGOTIATION || ird > UW__MAX_IRD)
        ird = UW__MAX_IRD;
    if (rd->irq_count >= ird)
        return UW_ERDMAP_IRD; /* RFC 5040 6.3: beyond IRD is the peer's error */
    struct uw__irq_ent *e = &rd->irq[(rd->irq_head + rd->irq_count) % UW__MAX_IRD];
    e->rr = rr;
    e->off = 0;
    e->src = NULL;
    bool rtr = rd->rtr_pending_rx;
    if (rtr && rr.size != 0)
        return UW_EMPA_RTR_MISSING;
    if (rr.size) {
        int err = tagged_target(rd, rr.src_stag, rr.src_to, rr.size, UW_ACCESS_REMOTE_READ, true,
                                &e->src);
        if (err)
            return err;
    }
    rd->irq_count++;
    rd->msn_rx[UW__QN_READ]++;
    rd->news |= UW__RD_KICK;
    if (rtr)
        rtr_arrived(rd, UW_MPA_RTR_READ);
    return 0;
}

/* A Terminate is taken whenever it comes, RTR or not: siw sends one instead
 * of the RTR when it cannot match an RTR type. */
static int term_hdr(struct uw__rdmap *rd, uint32_t len)
{
    (void)len;
    if (!rd->rx.h.last)
        return UW_ERDMAP_OPCODE;
    rd->rx.dest = UW__D_SMALL;
    return 0;
}

static int term_end(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    uw__term_msg t;
    if (uw__term_decode(rx->small, rx->small_len, &t) < 0)
        t.term = (uw_term){UW_TERM_RDMAP, 2, 0xFF};
    rd->msn_rx[UW__QN_TERM]++;
    rd->dead = true;
    rd->term_in = t;
    rd->news |= UW__RD_TERM_RECEIVED;
    return UW_ETERM_RECEIVED;
}

#define TAGGED(h, e) \
    .valid = true, .tagged = true, .hlen = UW__DDP_TAGGED_HLEN, .rx_hdr = h, .rx_end = e
#define UNTAGGED(q, h, e) \
    .valid = true, .hlen = UW__DDP_UNTAGGED_HLEN, .qn = q, .rx_hdr = h, .rx_end = e

/* RFC 7306's Immediate Data (8, 9) and Atomics (10, 11) are untagged; uwarp
 * takes neither, and 12 to 15 are undefined. A row that is not valid is an
 * unexpected opcode before anything else in it is read, so those rows name
 * no queue. */
#define REJECTED_UNTAGGED .valid = false, .hlen = UW__DDP_UNTAGGED_HLEN
const struct uw__opinfo uw__optab[16] = {
    [UW__OP_WRITE] = {TAGGED(write_hdr, write_end)},
    [UW__OP_READ_REQ] = {UNTAGGED(UW__QN_READ, read_req_hdr, read_req_end),
                         .fixed = UW__READ_REQ_LEN},
    [UW__OP_READ_RESP] = {TAGGED(read_resp_hdr, read_resp_end)},
    [UW__OP_SEND] = {UNTAGGED(UW__QN_SEND, send_hdr, send_end)},
    [UW__OP_SEND_INV] = {UNTAGGED(UW__QN_SEND, send_hdr, send_end), .flags = UW__OPF_INV},
    [UW__OP_SEND_SE] = {UNTAGGED(UW__QN_SEND, send_hdr, send_end), .flags = UW__OPF_SE},
    [UW__OP_SEND_SE_INV] = {UNTAGGED(UW__QN_SEND, send_hdr, send_end),
                            .flags = UW__OPF_SE | UW__OPF_INV},
    [UW__OP_TERMINATE] = {UNTAGGED(UW__QN_TERM, term_hdr, term_end)},
    [8] = {REJECTED_UNTAGGED},
    [9] = {REJECTED_UNTAGGED},
    [10] = {REJECTED_UNTAGGED},
    [11] = {REJECTED_UNTAGGED},
};
