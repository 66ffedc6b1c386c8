/* QP receive: one resumable state machine walks each FPDU run by run
 * (fpdu_walk.h), reads the MPA length and the DDP/RDMAP header, then lets
 * payload land where it belongs: tagged payload in the registered region,
 * untagged payload in the posted receive buffer. The I/O layer asks
 * uw__rd_rx_iov() where the next octets go and reads them there directly;
 * bytes that arrive ahead (headers, small messages) sit in a staging buffer
 * and are copied out. The CRC is computed over the octets where they land.
 *
 * Checks follow RFC 5041 7 and RFC 5040 7; a fault found in the header is
 * held until the CRC has been verified, so that a damaged segment is always
 * reported as a CRC error (RFC 5044 8) and never acted on. Payload placed by
 * a segment whose CRC then fails is zeroed: the consumer never sees damaged
 * octets, only octets that were not delivered. */
#include <string.h>

#include "uwarp/crc32c.h"
#include "rdmap/opcode.h"
#include "rdmap/rdmap.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool paused(struct uw__rdmap *rd)
{
    /* At an FPDU boundary: one free slot in each CQ covers anything the next
     * FPDU can complete. */
    return uw__cqr_full(rd->rcq) || uw__cqr_full(rd->scq);
}

static void fpdu_start(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    rx->in_fpdu = true;
    uw__walk_init(&rx->w, rx->pos, 0, rd->flags_rx & UW_MPA_MARKERS);
    rx->have_run = false;
    rx->len_known = false;
    rx->hdr_done = false;
    rx->hlen = 0;
    rx->n = 0;
    rx->crc = uw_crc32c_init();
    rx->pending_err = 0;
    rx->marker_bad = false;
    rx->dest = UW__D_DISCARD;
    rx->dptr = rx->dstart = NULL;
    rx->small_len = 0;
}

/* The header is complete: judge what every segment shares against the
 * opcode's row, then let the opcode check the rest and choose where the
 * payload goes. Returns a fault to report after the CRC check, or 0. */
static int header_done(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    uw__ddp_hdr *h = &rx->h;
    uw__ddp_hdr_decode(rx->hdr + 2, rx->hlen, h);
    if (h->dv != (rd->mpa.ddp_version ? 1 : 0))
        return UW_EDDP_VERSION;
    if (h->rv != 1)
        return UW_ERDMAP_VERSION;
    const struct uw__opinfo *o = &uw__optab[h->opcode];
    if (!h->tagged && h->qn > UW__QN_TERM)
        return UW_EDDP_QN;
    /* RFC 5040 4.3: each opcode has one buffer model and one queue. */
    if (!o->valid || o->tagged != h->tagged || (!h->tagged && h->qn != o->qn))
        return UW_ERDMAP_OPCODE;
    if (!h->tagged) {
        if (h->msn != rd->msn_rx[h->qn])
            return UW_EDDP_MSN;
        uint32_t mo_expect = h->qn == UW__QN_SEND ? rd->rq_msg_off : 0;
        if (h->mo != mo_expect)
            return UW_EDDP_MO;
    }
    return o->rx_hdr(rd, rx->n - rx->hlen);
}

/* Copies staged payload octets to their destination. */
static void place(struct uw__rdmap *rd, const uint8_t *p, uint32_t n)
{
    struct uw__rx *rx = &rd->rx;
    switch (rx->dest) {
    case UW__D_MEM:
        if (!rx->dstart)
            rx->dstart = rx->dptr;
        memcpy(rx->dptr, p, n);
        rx->dptr += n;
        break;
    case UW__D_RECV: {
        uint8_t *d;
        uint32_t t;
        while ((t = uw__sgc_take(&rx->rc, n, &d)) != 0) {
            memcpy(d, p, t);
            p += t;
            n -= t;
        }
        break;
    }
    case UW__D_SMALL: {
        uint32_t room = (uint32_t)sizeof(rx->small) - rx->small_len;
        uint32_t take = n < room ? n : room;
        memcpy(rx->small + rx->small_len, p, take);
        rx->small_len += take;
        break;
    }
    default:
        break;
    }
}

/* Zeroes what this FPDU placed: its CRC failed. */
static void scrub(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    if (rx->dest == UW__D_MEM && rx->dstart)
        memset(rx->dstart, 0, (size_t)(rx->dptr - rx->dstart));
    if (rx->dest == UW__D_RECV && rx->rc.pos > rx->rstart) {
        struct uw__rwqe *r = rx->rwqe;
        uw__sgc c;
        uw__sgc_init(&c, r->sge, r->wr.num_sge, rx->rstart);
        uint32_t n = rx->rc.pos - rx->rstart, t;
        uint8_t *d;
        while ((t = uw__sgc_take(&c, n, &d)) != 0) {
            memset(d, 0, t);
            n -= t;
        }
    }
}

static int fail(struct uw__rdmap *rd, int err, bool with_hdr)
{
    struct uw__rx *rx = &rd->rx;
    bool rr =
        with_hdr && !rx->h.tagged && rx->h.qn == UW__QN_READ && rx->small_len >= UW__READ_REQ_LEN;
    uw__rd_terminate(rd, err, with_hdr ? &rx->h : NULL, rr ? rx->small : NULL);
    rx->in_fpdu = false;
    return err;
}

static int fpdu_end(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    rx->in_fpdu = false;
    rx->big = rx->n >= UW__RX_BIG;
    rx->pos = rx->w.pos + rx->w.wire;
    if ((rd->flags_rx & UW_MPA_CRC) && uw_crc32c_final(rx->crc) != le32(rx->crcf)) {
        scrub(rd);
        return fail(rd, UW_EMPA_CRC, false);
    }
    if (rx->marker_bad) {
        scrub(rd); /* its placement is as untrustworthy as a CRC failure's */
        return fail(rd, UW_EMPA_MARKER, false);
    }
    if (!rx->hdr_done && !rx->pending_err)
        rx->pending_err = UW_EDDP_HDR;
    if (rx->pending_err)
        return fail(rd, rx->pending_err, rx->hdr_done);
    if (rd->first_rx_pending) {
        /* RFC 5044 7.1.2 rule 4: the responder may send from now on. */
        rd->first_rx_pending = false;
        rd->news |= UW__RD_KICK;
    }
    /* A Terminate received leaves the QP dead: fail() then sends nothing. */
    int err = uw__optab[rx->h.opcode].rx_end(rd);
    return err ? fail(rd, err, true) : 0;
}

/* Octets of the ULPDU that belong to the DDP header. */
static uint32_t hdr_want(const struct uw__rx *rx)
{
    return rx->hlen ? rx->hlen : 2;
}

/* Consumes up to len staged octets; returns how many, or a fatal error. */
/* Octets of the current payload run that are already at their destination
 * (read there directly): move the cursor as place() would have. */
static void placed(struct uw__rdmap *rd, const uint8_t *p, uint32_t n)
{
    struct uw__rx *rx = &rd->rx;
    if (rx->dest == UW__D_MEM) {
        if (!rx->dstart)
            rx->dstart = rx->dptr;
        rx->dptr += n;
    } else if (rx->dest == UW__D_RECV) {
        uw__sgc_advance(&rx->rc, n);
    }
    (void)p;
}

/* A whole FPDU without markers already staged (the common case for small
 * messages): the same steps as the run-by-run walk below, taken at once,
 * with one CRC call. Returns the octets used, 0 when the general walk must
 * take it (incomplete, or a header the walk reports on), or an error. */
static int consume_whole(struct uw__rdmap *rd, const uint8_t *p, uint32_t len)
{
    struct uw__rx *rx = &rd->rx;
    if (len < 2 + UW__DDP_UNTAGGED_HLEN)
        return 0;
    uint32_t n = (uint32_t)p[0] << 8 | p[1];
    uint32_t hl = (uint32_t)uw__ddp_hlen(p[2]);
    uint32_t body = 2 + n + uw__mpa_pad(n);
    if (n < hl || len < body + 4)
        return 0;
    fpdu_start(rd);
    rx->n = n;
    uw__walk_set_len(&rx->w, n);
    rx->len_known = true;
    memcpy(rx->hdr, p, 2 + hl);
    rx->hlen = hl;
    rx->hdr_done = true;
    rx->pending_err = header_done(rd);
    if (rx->pending_err)
        rx->dest = UW__D_DISCARD;
    else if (n > hl)
        place(rd, p + 2 + hl, n - hl);
    if (rd->flags_rx & UW_MPA_CRC)
        rx->crc = uw_crc32c_update(rx->crc, p, body);
    memcpy(rx->crcf, p + body, 4);
    rx->w.wire = rx->w.logical = body + 4;
    int r = fpdu_end(rd);
    return r < 0 ? r : (int)(body + 4);
}

/* Walks len octets through the FPDU state machine. With landed, p points at
 * octets already where they belong (payload at its destination, a marker
 * in its slot); otherwise p is staged input to be copied out. */
static int consume(struct uw__rdmap *rd, const uint8_t *p, uint32_t len, uint32_t *used,
                   bool landed)
{
    struct uw__rx *rx = &rd->rx;
    bool want_crc = rd->flags_rx & UW_MPA_CRC;
    /* Covered octets adjacent in memory (a staged FPDU, markers and all)
     * go to the CRC in one call when the span breaks, not one per run. */
    const uint8_t *cs = NULL;
    uint32_t cl = 0;
#define CRC_FLUSH()                                      \
    do {                                                 \
        if (cl)                                          \
            rx->crc = uw_crc32c_update(rx->crc, cs, cl); \
        cl = 0;                                          \
    } while (0)
#define CRC_SPAN(at, n)              \
    do {                             \
        if (cl && cs + cl == (at)) { \
            cl += (n);               \
        } else {                     \
            CRC_FLUSH();             \
            cs = (at);               \
            cl = (n);                \
        }                            \
    } while (0)
    *used = 0;
    while (len) {
        if (!rx->in_fpdu) {
            if (rd->dead || paused(rd))
                return 0;
            if (!landed && !(rd->flags_rx & UW_MPA_MARKERS)) {
                int k = consume_whole(rd, p, len);
                if (k < 0)
                    return k;
                if (k > 0) {
                    p += k;
                    len -= (uint32_t)k;
                    *used += (uint32_t)k;
                    continue;
                }
            }
            fpdu_start(rd);
        }
        if (!rx->have_run && !landed && rx->hdr_done && (rd->flags_rx & UW_MPA_MARKERS)) {
            /* Steady state with markers: a marker, then a whole interval of
             * payload. The same steps as the walk below (marker check,
             * placement, CRC span), without a run and a switch for each
             * 508 octets. */
            uw__walk *w = &rx->w;
            const uint32_t iv = UW_MPA_MARKER_INTERVAL, ml = UW_MPA_MARKER_LEN;
            while (len >= iv && w->wire != 0 && (w->pos + w->wire) % iv == 0 && w->logical >= 2 &&
                   w->logical + (iv - ml) <= w->bound[1]) {
                rx->marker_bad |= !uw__marker_ok(p, w->wire - w->hdr);
                place(rd, p + ml, iv - ml);
                if (want_crc)
                    CRC_SPAN(p, iv);
                w->wire += iv;
                w->logical += iv - ml;
                p += iv;
                len -= iv;
                *used += iv;
            }
            if (!len)
                break;
        }
        if (!rx->have_run) {
            if (!uw__walk_next(&rx->w, &rx->run)) {
                CRC_FLUSH();
                int r = fpdu_end(rd);
                if (r < 0)
                    return r;
                continue;
            }
            rx->have_run = true;
            rx->run_off = 0;
        }
        uw__run *run = &rx->run;
        uint32_t take = run->len - rx->run_off;
        if (take > len)
            take = len;
        uint32_t lo = run->logical + rx->run_off;
        switch (run->field) {
        case UW__F_MARKER:
            /* Whole markers are checked in place; only a split one is
             * gathered (storing bytes and reloading them as a word stalls). */
            if (take == UW_MPA_MARKER_LEN) {
                rx->marker_bad |= !uw__marker_ok(p, run->fpduptr);
            } else {
                for (uint32_t i = 0; i < take; i++)
                    rx->mark[rx->run_off + i] = p[i];
                if (rx->run_off + take == UW_MPA_MARKER_LEN)
                    rx->marker_bad |= !uw__marker_ok(rx->mark, run->fpduptr);
            }
            break;
        case UW__F_LEN:
            memcpy(rx->hdr + lo, p, take);
            break;
        case UW__F_PAYLOAD: {
            uint32_t u = lo - 2;
            if (!rx->hdr_done) {
                uint32_t want = hdr_want(rx);
                if (want > rx->n)
                    want = rx->n;
                if (take > want - u)
                    take = want - u;
                memcpy(rx->hdr + 2 + u, p, take);
                if (u + take == 2 && !rx->hlen)
                    rx->hlen = (uint32_t)uw__ddp_hlen(rx->hdr[2]);
                if (rx->hlen && u + take >= rx->hlen) {
                    rx->hdr_done = true;
                    rx->pending_err = header_done(rd);
                    if (rx->pending_err)
                        rx->dest = UW__D_DISCARD;
                } else if (u + take == rx->n) {
                    /* The ULPDU ends inside the header. */
                    rx->pending_err = UW_EDDP_HDR;
                }
            } else {
                if (landed)
                    placed(rd, p, take);
                else
                    place(rd, p, take);
            }
            break;
        }
        case UW__F_CRC:
            memcpy(rx->crcf + rx->run_off, p, take);
            break;
        default:
            break;
        }
        if (want_crc && run->in_crc)
            CRC_SPAN(p, take);
        rx->run_off += take;
        p += take;
        len -= take;
        *used += take;
        if (run->field == UW__F_LEN && rx->run_off == run->len && run->logical + run->len == 2) {
            rx->n = (uint32_t)rx->hdr[0] << 8 | rx->hdr[1];
            uw__walk_set_len(&rx->w, rx->n);
            rx->len_known = true;
        }
        if (rx->run_off == run->len) {
            rx->have_run = false;
            /* The FPDU is complete: act on it now, not when more arrives. */
            if (rx->len_known && rx->w.logical >= rx->w.bound[3]) {
                CRC_FLUSH();
                int r = fpdu_end(rd);
                if (r < 0)
                    return r;
            }
        }
    }
    CRC_FLUSH();
    return 0;
#undef CRC_SPAN
#undef CRC_FLUSH
}

/* Up to room destination iovecs for n payload octets at the planned cursor
 * (dp for a region, rc for a receive); returns how many were added. Fewer
 * octets than n when room runs out: the rest comes with the next read. */
static int plan_payload(const struct uw__rx *rx, struct iovec *iov, int room, uint8_t **dp,
                        uw__sgc *rc, uint32_t n)
{
    if (rx->dest == UW__D_RECV)
        return uw__sgc_slice(rc, n, iov, room);
    if (room < 1)
        return 0;
    iov[0].iov_base = *dp;
    iov[0].iov_len = n;
    *dp += n;
    return 1;
}

/* Plans one read straight to the destination: the payload runs of this FPDU
 * with any markers between them (each into its own slot, checked after),
 * and, once the payload is covered, a little staging room for the trailer
 * and the next header. advance() replays the plan through consume(). */
static int plan_direct(struct uw__rdmap *rd, struct iovec *iov, int cap)
{
    struct uw__rx *rx = &rd->rx;
    uw__walk tw = rx->w;
    uw__run tr = rx->run;
    uint32_t toff = rx->run_off;
    uint8_t *dp = rx->dptr;
    uw__sgc rc = rx->rc;
    int k = 0, nmark = 0;
    bool to_end = false;
    while (k < cap - 1) {
        if (tr.field == UW__F_PAYLOAD) {
            uint32_t n = tr.len - toff;
            int before = k;
            int added = plan_payload(rx, iov + k, cap - 1 - k, &dp, &rc, n);
            k += added;
            uint32_t got = 0;
            for (int i = before; i < k; i++)
                got += (uint32_t)iov[i].iov_len;
            if (got < n)
                break;
        } else if (tr.field == UW__F_MARKER && nmark < UW__RX_MSLOTS) {
            iov[k].iov_base = rx->mslot[nmark] + toff;
            iov[k].iov_len = tr.len - toff;
            k++;
            nmark++;
        } else {
            to_end = tr.field != UW__F_MARKER;
            break;
        }
        if (!uw__walk_next(&tw, &tr)) {
            to_end = true;
            break;
        }
        toff = 0;
    }
    rx->plan_n = k;
    if (to_end && k < cap) {
        iov[k].iov_base = rx->stage;
        iov[k].iov_len = UW__RX_TAIL;
        k++;
    }
    for (int i = 0; i < k; i++)
        rx->plan[i] = iov[i];
    rx->plan_total = k;
    return k;
}

static bool can_direct(const struct uw__rx *rx)
{
    return rx->st_head == rx->st_tail && rx->in_fpdu && rx->n >= UW__RX_BIG && rx->have_run &&
           rx->run.field == UW__F_PAYLOAD && rx->hdr_done &&
           (rx->dest == UW__D_MEM || rx->dest == UW__D_RECV);
}

int uw__rd_rx_iov(struct uw__rdmap *rd, struct iovec *iov, int cap)
{
    struct uw__rx *rx = &rd->rx;
    rx->plan_total = 0;
    if (rd->dead || cap < 1)
        return 0;
    if (rx->st_head == rx->st_tail)
        rx->st_head = rx->st_tail = 0;
    rx->asked = 0;
    if (!(rd->flags_rx & UW_MPA_MARKERS) && can_direct(rx) && cap >= 2)
        return plan_direct(rd, iov, cap > UW__RX_PLAN ? UW__RX_PLAN : cap);
    if (rx->full_reads >= UW__RX_GROW_READS)
        uw__rd_rx_grow(rd);
    if (!rx->in_fpdu && rx->st_head == rx->st_tail && paused(rd))
        return 0;
    if (rx->st_tail == rx->stage_cap) {
        memmove(rx->stage, rx->stage + rx->st_head, rx->st_tail - rx->st_head);
        rx->st_tail -= rx->st_head;
        rx->st_head = 0;
    }
    iov[0].iov_base = rx->stage + rx->st_tail;
    iov[0].iov_len = rx->stage_cap - rx->st_tail;
    /* After a large FPDU another is likely: take just its header, so that
     * its payload can be read straight to its destination. */
    if (rx->big && !(rd->flags_rx & UW_MPA_MARKERS) && !rx->in_fpdu && rx->st_head == rx->st_tail &&
        iov[0].iov_len > UW__RX_LOOKAHEAD)
        iov[0].iov_len = UW__RX_LOOKAHEAD;
    /* Only a read offered at least half the stage says the stage is small. */
    if (iov[0].iov_len >= rx->stage_cap / 2)
        rx->asked = (uint32_t)iov[0].iov_len;
    return iov[0].iov_len ? 1 : 0;
}

static int drain_stage(struct uw__rdmap *rd)
{
    struct uw__rx *rx = &rd->rx;
    while (rx->st_head < rx->st_tail) {
        uint32_t used;
        int r = consume(rd, rx->stage + rx->st_head, rx->st_tail - rx->st_head, &used, false);
        rx->st_head += used;
        if (r < 0)
            return r;
        if (!used)
            break; /* paused on a full CQ, or dead */
    }
    return 0;
}

int uw__rd_rx_advance(struct uw__rdmap *rd, size_t n)
{
    struct uw__rx *rx = &rd->rx;
    if (!rx->plan_total) {
        rx->st_tail += (uint32_t)n;
        if (rx->asked)
            rx->full_reads = n == rx->asked ? rx->full_reads + 1 : 0;
        return drain_stage(rd);
    }
    /* Replay the plan: the octets are already in place. */
    int total = rx->plan_total;
    rx->plan_total = 0;
    for (int i = 0; i < total && n; i++) {
        uint32_t take = (uint32_t)(n < rx->plan[i].iov_len ? n : rx->plan[i].iov_len);
        n -= take;
        if (i >= rx->plan_n) {
            rx->st_tail += take; /* the staging tail: stage was empty */
            continue;
        }
        uint32_t used;
        int r = consume(rd, rx->plan[i].iov_base, take, &used, true);
        if (r < 0)
            return r;
    }
    return drain_stage(rd);
}

int uw__rd_rx_feed(struct uw__rdmap *rd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len) {
        struct iovec iov[UW__RX_PLAN];
        int k = uw__rd_rx_iov(rd, iov, UW__RX_PLAN);
        if (k <= 0)
            return rd->dead ? UW_EPIPE : UW_ENOBUFS;
        size_t got = 0;
        for (int i = 0; i < k && len; i++) {
            size_t t = iov[i].iov_len < len ? iov[i].iov_len : len;
            memcpy(iov[i].iov_base, p, t);
            p += t;
            len -= t;
            got += t;
        }
        int r = uw__rd_rx_advance(rd, got);
        if (r < 0)
            return r;
    }
    return 0;
}

int uw__rd_rx_eof(const struct uw__rdmap *rd)
{
    const struct uw__rx *rx = &rd->rx;
    if (rx->in_fpdu || rx->st_head != rx->st_tail)
        return UW_EMPA_TRUNCATED;
    return 0;
}
