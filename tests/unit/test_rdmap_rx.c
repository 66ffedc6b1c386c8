/* The DDP/RDMAP core without sockets: a QP is started with uw__qp_start(),
 * crafted FPDUs go in through uw__qp_rx_feed() in random splits (down to one
 * octet), and what the QP transmits is taken with uw__qp_tx_iov() /
 * uw__qp_tx_advance() (in random partial "writes") and decoded back with
 * uw_mpa_rx. Registered memory lives in one arena with guard octets between
 * the regions, and a shadow copy holds what the arena must contain, so every
 * check compares all of it: a stray octet anywhere fails the test.
 *
 * Tests: placement property (Write, Send with 1-3 SGEs, Send with SE and/or
 * Invalidate, inbound and outbound RDMA Read), one table row per receive
 * check of RFC 5041 7.1 / RFC 5040 7 / RFC 6581 with the exact Terminate, CRC
 * bit flips, received Terminates (RFC and Linux siw byte order), the RFC 6581
 * RTR on both sides, IRD/ORD, and transmit segmentation. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "uwarp/crc32c.h"
#include "uwarp/mpa.h"
#include "uwarp/verbs.h"
#include "verbs/internal.h"

#define LW UW_ACCESS_LOCAL_WRITE
#define RW UW_ACCESS_REMOTE_WRITE
#define RR UW_ACCESS_REMOTE_READ
#define RI UW_ACCESS_REMOTE_INVALIDATE

/* ------------------------------------------------------------------------ */
/* Byte buffer                                                               */

typedef struct buf {
    uint8_t *d;
    size_t n, cap;
} buf;

static void buf_put(buf *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n)
            c *= 2;
        b->d = realloc(b->d, c);
        assert_non_null(b->d);
        b->cap = c;
    }
    if (n)
        memcpy(b->d + b->n, p, n);
    b->n += n;
}

static void buf_free(buf *b)
{
    free(b->d);
    memset(b, 0, sizeof(*b));
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void wbe32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void wbe64(uint8_t *p, uint64_t v)
{
    wbe32(p, (uint32_t)(v >> 32));
    wbe32(p + 4, (uint32_t)v);
}

/* ------------------------------------------------------------------------ */
/* Test environment: one QP, its memory and both directions of its stream    */

/* The regions: what each may be used for follows from its rights. */
enum { MR_W, MR_R, MR_L, MR_INV, MR_NOW, MR_PD2, NMR };
static const struct {
    uint32_t len;
    unsigned access;
    int pd;
} mrdef[NMR] = {
    [MR_W] = {32768, LW | RW, 0},       /* target of the peer's Writes */
    [MR_R] = {32768, LW | RR, 0},       /* source of the peer's Reads */
    [MR_L] = {65536, LW, 0},            /* receive buffers, Read sinks */
    [MR_INV] = {4096, LW | RW | RI, 0}, /* the peer may invalidate it */
    [MR_NOW] = {4096, LW | RR, 0},      /* no remote write */
    [MR_PD2] = {4096, LW | RW | RR, 1}, /* another protection domain */
};
#define GUARD 256u

typedef struct opts {
    bool crc, markers_rx, markers_tx, p2p, initiator;
    uint8_t rtr;
    uint16_t ird, ord;
    uint32_t mulpdu, rx_pos, tx_pos;
} opts;

/* An initiator by default: a client-server responder may send nothing
 * before its first FPDU arrives (RFC 5044 7.1.2 rule 4), which only the tests
 * about that rule and the RTR want. */
static opts opts_default(void)
{
    return (opts){.crc = true, .ird = 16, .ord = 16, .mulpdu = 1448, .initiator = true};
}

typedef struct ulrec {
    size_t off, len;
} ulrec;

typedef struct env {
    uw_ctx *ctx;
    uw_pd *pd, *pd2;
    uw_cq *scq, *rcq;
    uw_qp *qp;
    uint8_t *arena, *shadow;
    size_t arena_len;
    uw_mr *mr[NMR];
    uint8_t *base[NMR];
    opts o;
    unsigned rxflags;
    uint32_t rxpos;       /* stream position of the next octet we feed */
    uint32_t peer_msn[3]; /* the peer's next MSN per queue */
    tu_rng *rng;
    int split;        /* feed mode: 0 whole, 1 one octet, 2 small, 3 large, -1 random */
    buf last_ul;      /* the last ULPDU framed by frame() */
    uint8_t *scratch; /* one ULPDU being built */
    /* What the QP transmitted, decoded. */
    uw_mpa_rx *txdec;
    buf txdata;
    ulrec *tx;
    size_t ntx, captx;
} env;

static uint64_t addr_of(env *e, int mr, uint32_t off)
{
    return (uint64_t)(uintptr_t)(e->base[mr] + off);
}

static uint32_t stag_of(env *e, int mr)
{
    return uw_mr_stag(e->mr[mr]);
}

static void env_init(env *e, const opts *o, tu_rng *rng)
{
    memset(e, 0, sizeof(*e));
    e->o = *o;
    e->rng = rng;
    e->split = -1;
    assert_int_equal(uw_ctx_create(&e->ctx, NULL), 0);
    assert_int_equal(uw_pd_alloc(e->ctx, &e->pd), 0);
    assert_int_equal(uw_pd_alloc(e->ctx, &e->pd2), 0);
    assert_int_equal(uw_cq_create(e->ctx, 4096, &e->scq), 0);
    assert_int_equal(uw_cq_create(e->ctx, 4096, &e->rcq), 0);
    e->arena_len = GUARD;
    for (int i = 0; i < NMR; i++)
        e->arena_len += mrdef[i].len + GUARD;
    e->arena = malloc(e->arena_len);
    e->shadow = malloc(e->arena_len);
    e->scratch = malloc(70000);
    assert_non_null(e->arena);
    assert_non_null(e->shadow);
    assert_non_null(e->scratch);
    /* Random contents: a zeroed or untouched octet is then distinguishable
     * from a placed one. */
    tu_rng_fill(rng, e->arena, e->arena_len);
    memcpy(e->shadow, e->arena, e->arena_len);
    size_t off = GUARD;
    for (int i = 0; i < NMR; i++) {
        e->base[i] = e->arena + off;
        assert_int_equal(uw_mr_reg(mrdef[i].pd ? e->pd2 : e->pd, e->base[i], mrdef[i].len,
                                   mrdef[i].access, &e->mr[i]),
                         0);
        off += mrdef[i].len + GUARD;
    }
    uw_qp_attr qa = {
        .pd = e->pd, .send_cq = e->scq, .recv_cq = e->rcq, .max_send_wr = 256, .max_recv_wr = 256};
    assert_int_equal(uw__qp_alloc(e->ctx, &qa, &e->qp), 0);
    uw_mpa_params prm = {.rev = 2,
                         .ddp_version = 1,
                         .crc = o->crc,
                         .markers_rx = o->markers_rx,
                         .markers_tx = o->markers_tx,
                         .enhanced = true,
                         .ird = o->ird,
                         .ord = o->ord,
                         .peer_ird = o->ord,
                         .peer_ord = o->ird,
                         .p2p = o->p2p,
                         .rtr = o->rtr};
    uw__qp_start(e->qp, &prm, o->initiator, o->mulpdu, o->mulpdu, o->tx_pos, o->rx_pos);
    assert_int_equal(uw_qp_state(e->qp), UW_QPS_RTS);
    e->rxflags = (o->crc ? UW_MPA_CRC : 0) | (o->markers_rx ? UW_MPA_MARKERS : 0);
    e->rxpos = o->rx_pos;
    for (int i = 0; i < 3; i++)
        e->peer_msn[i] = 1;
    uw_mpa_rx_opts ro = {.flags = (o->crc ? UW_MPA_CRC : 0) | (o->markers_tx ? UW_MPA_MARKERS : 0),
                         .pos = o->tx_pos};
    assert_int_equal(uw_mpa_rx_create(&e->txdec, &ro), 0);
}

static void env_fini(env *e)
{
    assert_int_equal(uw_qp_destroy(e->qp), 0);
    for (int i = 0; i < NMR; i++)
        assert_int_equal(uw_mr_dereg(e->mr[i]), 0);
    assert_int_equal(uw_cq_destroy(e->scq), 0);
    assert_int_equal(uw_cq_destroy(e->rcq), 0);
    assert_int_equal(uw_pd_dealloc(e->pd), 0);
    assert_int_equal(uw_pd_dealloc(e->pd2), 0);
    assert_int_equal(uw_ctx_destroy(e->ctx), 0);
    uw_mpa_rx_destroy(e->txdec);
    free(e->arena);
    free(e->shadow);
    free(e->scratch);
    free(e->tx);
    buf_free(&e->txdata);
    buf_free(&e->last_ul);
}

/* The whole arena equals the shadow: nothing placed where it should not be,
 * guard octets included. Reports the first difference. */
static void check_arena(env *e)
{
    for (size_t i = 0; i < e->arena_len; i++) {
        if (e->arena[i] != e->shadow[i]) {
            int which = -1;
            for (int m = 0; m < NMR; m++)
                if (e->arena + i >= e->base[m] && e->arena + i < e->base[m] + mrdef[m].len)
                    which = m;
            fail_msg("arena octet %zu (region %d) is %02x, expected %02x", i, which, e->arena[i],
                     e->shadow[i]);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The peer's side: framing and feeding                                      */

/* Frames one ULPDU as an FPDU at the receive stream position. */
static void frame(env *e, buf *s, const uint8_t *ul, size_t n)
{
    size_t cap = n + 16 + 4 * (n / 508 + 2);
    uint8_t *tmp = malloc(cap);
    assert_non_null(tmp);
    ssize_t w = uw_mpa_fpdu_encode(tmp, cap, ul, n, e->rxpos, e->rxflags);
    assert_true(w > 0);
    buf_put(s, tmp, (size_t)w);
    e->rxpos += (uint32_t)w;
    e->last_ul.n = 0;
    buf_put(&e->last_ul, ul, n);
    free(tmp);
}

static size_t mk_hdr(uint8_t *o, bool tagged, bool last, uint8_t op, uint32_t stag, uint64_t to,
                     uint32_t qn, uint32_t msn, uint32_t mo)
{
    uw__ddp_hdr h = {.tagged = tagged,
                     .last = last,
                     .dv = 1,
                     .rv = 1,
                     .opcode = op,
                     .stag = stag,
                     .to = to,
                     .qn = qn,
                     .msn = msn,
                     .mo = mo};
    return uw__ddp_hdr_encode(&h, o);
}

/* segmax WHOLE: the message is one segment. */
#define WHOLE 0u

static size_t seg_len(env *e, size_t left, size_t segmax)
{
    if (segmax == WHOLE)
        return left;
    size_t m = 1 + (size_t)tu_rng_below(e->rng, segmax);
    return left < m ? left : m;
}

/* A tagged message cut into segments of 1..segmax payload octets; a
 * zero-length message is one segment. */
static void peer_tagged(env *e, buf *s, uint8_t op, uint32_t stag, uint64_t to, const uint8_t *d,
                        size_t len, size_t segmax)
{
    size_t off = 0;
    do {
        size_t c = seg_len(e, len - off, segmax);
        size_t h = mk_hdr(e->scratch, true, off + c == len, op, stag, to + off, 0, 0, 0);
        if (c)
            memcpy(e->scratch + h, d + off, c);
        frame(e, s, e->scratch, h + c);
        off += c;
    } while (off < len);
}

/* A Send (opcode 3-6) on QN 0 with the next MSN, MO advancing. */
static void peer_send(env *e, buf *s, uint8_t op, uint32_t inv, const uint8_t *d, size_t len,
                      size_t segmax)
{
    uint32_t msn = e->peer_msn[0]++;
    size_t off = 0;
    do {
        size_t c = seg_len(e, len - off, segmax);
        size_t h = mk_hdr(e->scratch, false, off + c == len, op, inv, 0, 0, msn, (uint32_t)off);
        if (c)
            memcpy(e->scratch + h, d + off, c);
        frame(e, s, e->scratch, h + c);
        off += c;
    } while (off < len);
}

static void peer_read_req(env *e, buf *s, uint32_t sink_stag, uint64_t sink_to, uint32_t size,
                          uint32_t src_stag, uint64_t src_to)
{
    size_t h = mk_hdr(e->scratch, false, true, UW__OP_READ_REQ, 0, 0, 1, e->peer_msn[1]++, 0);
    uint8_t *p = e->scratch + h;
    wbe32(p, sink_stag);
    wbe64(p + 4, sink_to);
    wbe32(p + 12, size);
    wbe32(p + 16, src_stag);
    wbe64(p + 20, src_to);
    frame(e, s, e->scratch, h + 28);
}

static void peer_term(env *e, buf *s, const uint8_t *payload, size_t n)
{
    size_t h = mk_hdr(e->scratch, false, true, UW__OP_TERMINATE, 0, 0, 2, e->peer_msn[2]++, 0);
    memcpy(e->scratch + h, payload, n);
    frame(e, s, e->scratch, h + n);
}

/* Feeds n octets in pieces chosen by e->split. Returns the first error. */
static int feed(env *e, const uint8_t *p, size_t n)
{
    int mode = e->split >= 0 ? e->split : (int)tu_rng_below(e->rng, 4);
    while (n) {
        size_t c;
        switch (mode) {
        case 0:
            c = n;
            break;
        case 1:
            c = 1;
            break;
        case 2:
            c = 1 + (size_t)tu_rng_below(e->rng, 16);
            break;
        default:
            c = 1 + (size_t)tu_rng_below(e->rng, 3000);
            break;
        }
        if (c > n)
            c = n;
        int r = uw__qp_rx_feed(e->qp, p, c);
        if (r < 0)
            return r;
        p += c;
        n -= c;
    }
    return 0;
}

static int feed_buf(env *e, buf *s)
{
    int r = feed(e, s->d, s->n);
    s->n = 0;
    return r;
}

/* ------------------------------------------------------------------------ */
/* Our side: what the QP transmits                                           */

static int on_tx(void *ud, const uw_mpa_ulpdu *u)
{
    env *e = ud;
    if (e->ntx == e->captx) {
        e->captx = e->captx ? 2 * e->captx : 64;
        e->tx = realloc(e->tx, e->captx * sizeof(*e->tx));
        assert_non_null(e->tx);
    }
    e->tx[e->ntx].off = e->txdata.n;
    e->tx[e->ntx].len = u->len;
    for (size_t i = 0; i < u->iovcnt; i++)
        buf_put(&e->txdata, u->iov[i].iov_base, u->iov[i].iov_len);
    e->ntx++;
    return 0;
}

/* Takes everything the QP offers, a random part at a time (a socket taking
 * part of a writev), and decodes it. Returns the number of new ULPDUs. */
static size_t drain_tx(env *e)
{
    size_t before = e->ntx;
    buf chunk = {0};
    for (int guard = 0; guard < 100000; guard++) {
        struct iovec iov[64];
        int k = uw__qp_tx_iov(e->qp, iov, 64);
        assert_true(k >= 0);
        if (k == 0)
            break;
        size_t tot = 0;
        for (int i = 0; i < k; i++)
            tot += iov[i].iov_len;
        size_t take = tu_rng_below(e->rng, 2) ? tot : 1 + (size_t)tu_rng_below(e->rng, tot);
        chunk.n = 0;
        for (int i = 0; i < k && chunk.n < take; i++) {
            size_t t = iov[i].iov_len;
            if (t > take - chunk.n)
                t = take - chunk.n;
            buf_put(&chunk, iov[i].iov_base, t);
        }
        uw__qp_tx_advance(e->qp, take);
        ssize_t r = uw_mpa_rx_feed(e->txdec, chunk.d, chunk.n, on_tx, e);
        if (r != (ssize_t)chunk.n)
            fail_msg("transmitted stream does not decode: %s", uw_strerror((int)r));
    }
    buf_free(&chunk);
    return e->ntx - before;
}

static const uint8_t *txul(env *e, size_t i, size_t *len)
{
    assert_true(i < e->ntx);
    *len = e->tx[i].len;
    return e->txdata.d + e->tx[i].off;
}

/* A transmitted DDP segment, decoded by hand (not with the library's decoder,
 * so that its encoder is checked independently). */
typedef struct seg {
    bool tagged, last;
    uint8_t dv, rv, op, rsvd;
    uint32_t stag, qn, msn, mo;
    uint64_t to;
    const uint8_t *pay;
    size_t plen, len;
} seg;

static void parse_seg(const uint8_t *p, size_t n, seg *s)
{
    memset(s, 0, sizeof(*s));
    assert_true(n >= 2);
    s->tagged = p[0] & 0x80;
    s->last = p[0] & 0x40;
    s->rsvd = (uint8_t)((p[0] & 0x3C) | (p[1] & 0x30));
    s->dv = p[0] & 3;
    s->rv = p[1] >> 6;
    s->op = p[1] & 0xF;
    size_t h = s->tagged ? 14 : 18;
    assert_true(n >= h);
    s->stag = be32(p + 2);
    if (s->tagged) {
        s->to = be64(p + 6);
    } else {
        s->qn = be32(p + 6);
        s->msn = be32(p + 10);
        s->mo = be32(p + 14);
    }
    s->pay = p + h;
    s->plen = n - h;
    s->len = n;
}

static seg tx_seg(env *e, size_t i)
{
    size_t n;
    const uint8_t *p = txul(e, i, &n);
    seg s;
    parse_seg(p, n, &s);
    /* RFC 5041 4.1 / RFC 5040 4.1: version 1, reserved bits zero. */
    assert_int_equal(s.dv, 1);
    assert_int_equal(s.rv, 1);
    assert_int_equal(s.rsvd, 0);
    return s;
}

/* The QP's last transmission is exactly one Terminate (QN 2, MSN 1, MO 0,
 * L=1) with this layer/type/code; with hdr, M and D are set and the
 * offending segment's length and DDP header follow, with rdmap also R and
 * the 28-octet Read Request. Nothing follows it. */
static void expect_term(env *e, uint8_t layer, uint8_t etype, uint8_t ecode, const uint8_t *off,
                        size_t offlen, bool rdmap)
{
    size_t before = e->ntx;
    drain_tx(e);
    if (e->ntx == before)
        fail_msg("no Terminate was transmitted");
    size_t n;
    const uint8_t *p = txul(e, e->ntx - 1, &n);
    static const uint8_t head[] = {0x41, 0x47, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0};
    assert_true(n >= 22);
    assert_memory_equal(p, head, sizeof(head));
    if (p[18] != (layer << 4 | etype) || p[19] != ecode)
        fail_msg("Terminate %u/%u/%u, expected %u/%u/%u", p[18] >> 4, p[18] & 15, p[19], layer,
                 etype, ecode);
    uint8_t flags = off ? (rdmap ? 0xE0 : 0xC0) : 0;
    assert_int_equal(p[20], flags);
    assert_int_equal(p[21], 0);
    size_t want = 22;
    if (off) {
        size_t hl = (off[0] & 0x80) ? 14 : 18;
        assert_int_equal((p[22] << 8 | p[23]), offlen);
        assert_memory_equal(p + 24, off, hl);
        want = 24 + hl;
        if (rdmap) {
            assert_memory_equal(p + want, off + 18, 28);
            want += 28;
        }
    }
    assert_int_equal(n, want);
    assert_true(e->qp->rd.dead);
    /* RFC 5040: nothing follows a Terminate. */
    assert_int_equal(drain_tx(e), 0);
}

/* ------------------------------------------------------------------------ */
/* Verbs helpers                                                             */

static void post_recv(env *e, uint64_t wr_id, const uw_sge *sg, int n)
{
    uw_recv_wr w = {.wr_id = wr_id, .sg_list = sg, .num_sge = n};
    int bad = -1;
    assert_int_equal(uw_post_recv(e->qp, &w, 1, &bad), 0);
}

static void post_send(env *e, const uw_send_wr *w)
{
    int bad = -1;
    assert_int_equal(uw_post_send(e->qp, w, 1, &bad), 0);
}

static int poll_all(uw_cq *cq, uw_wc *wc, int n)
{
    int got = uw_cq_poll(cq, wc, n);
    assert_true(got >= 0);
    return got;
}

static void expect_no_wc(env *e)
{
    uw_wc wc[4];
    assert_int_equal(poll_all(e->rcq, wc, 4), 0);
    assert_int_equal(poll_all(e->scq, wc, 4), 0);
}

/* A one-SGE receive of len octets at off in MR_L. */
static void post_recv1(env *e, uint64_t wr_id, uint32_t off, uint32_t len)
{
    uw_sge sg = {addr_of(e, MR_L, off), len, stag_of(e, MR_L)};
    post_recv(e, wr_id, &sg, 1);
}

static void fill_rand(env *e, uint8_t *p, size_t n)
{
    tu_rng_fill(e->rng, p, n);
}

/* ------------------------------------------------------------------------ */
/* Placement property                                                        */

/* One random receive: 1-3 SGEs in disjoint slices of MR_L. Returns the total
 * length and fills sg. */
static uint32_t random_sges(env *e, uw_sge *sg, int *nsg)
{
    int n = 1 + (int)tu_rng_below(e->rng, 3);
    uint32_t tot = 0;
    for (int i = 0; i < n; i++) {
        uint32_t slice = mrdef[MR_L].len / 4; /* slice 3 is for Read sinks */
        uint32_t len = (uint32_t)tu_rng_below(e->rng, tu_rng_below(e->rng, 4) ? 3000 : 16000);
        uint32_t start = (uint32_t)tu_rng_below(e->rng, slice - len + 1);
        sg[i] = (uw_sge){addr_of(e, MR_L, (uint32_t)i * slice + start), len, stag_of(e, MR_L)};
        tot += len;
    }
    *nsg = n;
    return tot;
}

/* Scatters d over sg as placement must. */
static void shadow_scatter(env *e, const uw_sge *sg, int n, const uint8_t *d, size_t len)
{
    for (int i = 0; i < n && len; i++) {
        size_t t = sg[i].length < len ? sg[i].length : len;
        size_t off = (size_t)(sg[i].addr - (uint64_t)(uintptr_t)e->arena);
        memcpy(e->shadow + off, d, t);
        d += t;
        len -= t;
    }
}

static void shadow_put(env *e, const uint8_t *dst, const uint8_t *d, size_t len)
{
    memcpy(e->shadow + (dst - e->arena), d, len);
}

static void prop_round(env *e, int op, uint32_t *rd_msn, uint64_t id)
{
    buf s = {0};
    uint8_t *d = malloc(65536); /* a Send fills up to 3 SGEs of 16000 */
    assert_non_null(d);
    size_t segmax = tu_rng_below(e->rng, 3) == 0 ? 1 + tu_rng_below(e->rng, 16)
                                                 : 1 + tu_rng_below(e->rng, 4000);
    uw_wc wc[4];
    switch (op) {
    case 0: { /* RDMA Write into MR_W */
        uint32_t len = (uint32_t)tu_rng_below(e->rng, tu_rng_below(e->rng, 4) ? 2000 : 20000);
        uint32_t off = (uint32_t)tu_rng_below(e->rng, mrdef[MR_W].len - len + 1);
        fill_rand(e, d, len);
        peer_tagged(e, &s, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, off), d, len, segmax);
        assert_int_equal(feed_buf(e, &s), 0);
        shadow_put(e, e->base[MR_W] + off, d, len);
        expect_no_wc(e); /* a Write is silent at its target */
        break;
    }
    case 1:
    case 2: { /* Send, Send with SE; with Invalidate when op == 2 */
        uw_sge sg[3];
        int nsg;
        uint32_t cap = random_sges(e, sg, &nsg);
        uint32_t len = cap ? (uint32_t)tu_rng_below(e->rng, cap + 1) : 0;
        bool se = tu_rng_below(e->rng, 2);
        bool inv = op == 2;
        uint8_t opc =
            inv ? (se ? UW__OP_SEND_SE_INV : UW__OP_SEND_INV) : (se ? UW__OP_SEND_SE : UW__OP_SEND);
        uint32_t istag = inv ? stag_of(e, MR_INV) : 0;
        fill_rand(e, d, len);
        post_recv(e, id, sg, nsg);
        peer_send(e, &s, opc, istag, d, len, segmax);
        assert_int_equal(feed_buf(e, &s), 0);
        shadow_scatter(e, sg, nsg, d, len);
        assert_int_equal(poll_all(e->rcq, wc, 4), 1);
        assert_int_equal(wc[0].status, UW_WC_SUCCESS);
        assert_int_equal(wc[0].opcode, UW_WC_RECV);
        assert_int_equal(wc[0].wr_id, id);
        assert_int_equal(wc[0].byte_len, len);
        assert_int_equal(wc[0].flags, (se ? UW_WC_SOLICITED : 0) | (inv ? UW_WC_WITH_INV : 0));
        if (inv) {
            assert_int_equal(wc[0].invalidated_stag, istag);
            assert_false(uw_mr_valid(e->mr[MR_INV]));
            assert_int_equal(uw_mr_rereg(e->mr[MR_INV]), 0);
            assert_int_not_equal(stag_of(e, MR_INV), istag);
        }
        assert_int_equal(poll_all(e->scq, wc, 4), 0);
        break;
    }
    case 3: { /* the peer reads from MR_R */
        uint32_t len = (uint32_t)tu_rng_below(e->rng, tu_rng_below(e->rng, 4) ? 3000 : 20000);
        uint32_t off = (uint32_t)tu_rng_below(e->rng, mrdef[MR_R].len - len + 1);
        uint32_t sink = 0x12345600u | (uint32_t)(id & 0xFF);
        uint64_t sink_to = 0x7000000000ull + id * 65536;
        peer_read_req(e, &s, sink, sink_to, len, stag_of(e, MR_R), addr_of(e, MR_R, off));
        assert_int_equal(feed_buf(e, &s), 0);
        size_t first = e->ntx;
        drain_tx(e);
        size_t got = 0;
        for (size_t i = first; i < e->ntx; i++) {
            seg g = tx_seg(e, i);
            assert_true(g.tagged);
            assert_int_equal(g.op, UW__OP_READ_RESP);
            assert_int_equal(g.stag, sink);
            assert_true(g.to == sink_to + got);
            assert_true(g.len <= e->o.mulpdu);
            assert_int_equal(g.last, i == e->ntx - 1);
            assert_true(got + g.plen <= len);
            assert_memory_equal(g.pay, e->base[MR_R] + off + got, g.plen);
            got += g.plen;
        }
        assert_true(e->ntx > first);
        assert_int_equal(got, len);
        expect_no_wc(e);
        break;
    }
    default: { /* we read: the peer's Read Response lands in MR_L slice 3 */
        uint32_t len = (uint32_t)tu_rng_below(e->rng, 16000);
        uint32_t off = 3 * (mrdef[MR_L].len / 4) +
                       (uint32_t)tu_rng_below(e->rng, mrdef[MR_L].len / 4 - len + 1);
        uw_sge sg = {addr_of(e, MR_L, off), len, stag_of(e, MR_L)};
        uint32_t rkey = 0xABCDE000u | (uint32_t)(id & 0xFF);
        uint64_t raddr = 0x5500000000ull + id;
        uw_send_wr w = {.wr_id = id,
                        .opcode = UW_WR_RDMA_READ,
                        .flags = UW_SEND_SIGNALED,
                        .sg_list = &sg,
                        .num_sge = 1,
                        .remote_addr = raddr,
                        .rkey = rkey};
        post_send(e, &w);
        size_t first = e->ntx;
        assert_int_equal(drain_tx(e), 1);
        seg g = tx_seg(e, first);
        assert_false(g.tagged);
        assert_true(g.last);
        assert_int_equal(g.op, UW__OP_READ_REQ);
        assert_int_equal(g.qn, 1);
        assert_int_equal(g.msn, (*rd_msn)++);
        assert_int_equal(g.mo, 0);
        assert_int_equal(g.plen, 28);
        assert_int_equal(be32(g.pay), len ? stag_of(e, MR_L) : 0);
        assert_true(be64(g.pay + 4) == (len ? sg.addr : 0));
        assert_int_equal(be32(g.pay + 12), len);
        assert_int_equal(be32(g.pay + 16), rkey);
        assert_true(be64(g.pay + 20) == raddr);
        assert_int_equal(poll_all(e->scq, wc, 4), 0);
        fill_rand(e, d, len);
        peer_tagged(e, &s, UW__OP_READ_RESP, be32(g.pay), be64(g.pay + 4), d, len, segmax);
        assert_int_equal(feed_buf(e, &s), 0);
        shadow_put(e, e->base[MR_L] + off, d, len);
        assert_int_equal(poll_all(e->scq, wc, 4), 1);
        assert_int_equal(wc[0].status, UW_WC_SUCCESS);
        assert_int_equal(wc[0].opcode, UW_WC_RDMA_READ);
        assert_int_equal(wc[0].wr_id, id);
        assert_int_equal(wc[0].byte_len, len);
        assert_int_equal(poll_all(e->rcq, wc, 4), 0);
        break;
    }
    }
    check_arena(e);
    buf_free(&s);
    free(d);
}

static void test_placement_property(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0001));
    for (int cfg = 0; cfg < 8; cfg++) {
        opts o = opts_default();
        o.crc = cfg & 1;
        o.markers_rx = cfg & 2;
        o.markers_tx = cfg & 2;
        /* Half the runs start near the 2^32 wrap of the stream positions. */
        if (cfg & 4) {
            o.rx_pos = 0u - 4096u - 4u * (uint32_t)tu_rng_below(&rng, 300);
            o.tx_pos = 0u - 2048u - 4u * (uint32_t)tu_rng_below(&rng, 300);
        }
        o.mulpdu = 128 + (uint32_t)tu_rng_below(&rng, 3000);
        env e;
        env_init(&e, &o, &rng);
        uint32_t rd_msn = 1;
        for (int i = 0; i < 120; i++)
            prop_round(&e, (int)tu_rng_below(&rng, 5), &rd_msn,
                       1000u * (uint64_t)cfg + (uint64_t)i);
        assert_false(e.qp->rd.dead);
        env_fini(&e);
    }
}

/* ------------------------------------------------------------------------ */
/* Receive checks: one row per check, each with its exact Terminate          */

typedef struct row {
    const char *name;
    void (*build)(env *e, buf *s);
    uint8_t layer, etype, ecode;
    bool hdr, rdmap;
    int may_change;  /* an MR whose octets may change (data placed before the fault), or -1 */
    int prelude_wc;  /* receive completions the segments before the bad one produce */
    const opts *o;   /* NULL: opts_default() */
    const char *bug; /* a reported library bug: skipped unless UW_RUN_KNOWN_BUGS is set */
} row;

static void r_stag_invalid(env *e, buf *s)
{
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, 0x00ABCD01u, addr_of(e, MR_W, 0), d, 16, WHOLE);
}

static void r_stag_stale(env *e, buf *s)
{
    /* The region was registered again: the old key must not work. */
    uint32_t old = stag_of(e, MR_W);
    assert_int_equal(uw_mr_rereg(e->mr[MR_W]), 0);
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, old, addr_of(e, MR_W, 0), d, 16, WHOLE);
}

static void r_stag_invalidated(env *e, buf *s)
{
    /* Invalidated by the peer's Send with Invalidate, then written to. */
    post_recv1(e, 1, 0, 64);
    peer_send(e, s, UW__OP_SEND_INV, stag_of(e, MR_INV), NULL, 0, WHOLE);
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_INV), addr_of(e, MR_INV, 0), d, 16, WHOLE);
}

static void r_stag_deregistered(env *e, buf *s)
{
    uint32_t st = stag_of(e, MR_NOW);
    /* Registered again at once so that env_fini finds it; the new MR reuses
     * the index with a new key, so st is stale. */
    assert_int_equal(uw_mr_dereg(e->mr[MR_NOW]), 0);
    assert_int_equal(
        uw_mr_reg(e->pd, e->base[MR_NOW], mrdef[MR_NOW].len, mrdef[MR_NOW].access, &e->mr[MR_NOW]),
        0);
    assert_int_not_equal(stag_of(e, MR_NOW), st);
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, st, addr_of(e, MR_NOW, 0), d, 16, WHOLE);
}

static void r_base(env *e, buf *s)
{
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, 0) - 1, d, 16, WHOLE);
}

static void r_bounds(env *e, buf *s)
{
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, mrdef[MR_W].len - 15), d, 16,
                WHOLE);
}

static void r_bounds_2nd_seg(env *e, buf *s)
{
    /* The first segment fits and is placed; the second crosses the end. */
    uint8_t d[32];
    memset(d, 7, sizeof(d));
    uint32_t off = mrdef[MR_W].len - 24;
    size_t h = mk_hdr(e->scratch, true, false, UW__OP_WRITE, stag_of(e, MR_W),
                      addr_of(e, MR_W, off), 0, 0, 0);
    memcpy(e->scratch + h, d, 16);
    frame(e, s, e->scratch, h + 16);
    h = mk_hdr(e->scratch, true, true, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, off + 16),
               0, 0, 0);
    memcpy(e->scratch + h, d, 16);
    frame(e, s, e->scratch, h + 16);
    memcpy(e->shadow + (e->base[MR_W] + off - e->arena), d, 16);
}

static void r_pd(env *e, buf *s)
{
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_PD2), addr_of(e, MR_PD2, 0), d, 16, WHOLE);
}

static void r_no_remote_write(env *e, buf *s)
{
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_NOW), addr_of(e, MR_NOW, 0), d, 16, WHOLE);
}

static void r_to_wrap(env *e, buf *s)
{
    uint8_t d[32] = {1};
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_W), UINT64_MAX - 15, d, 32, WHOLE);
}

static void r_ddp_version_tagged(env *e, buf *s)
{
    uw__ddp_hdr h = {.tagged = true,
                     .last = true,
                     .dv = 0,
                     .rv = 1,
                     .opcode = UW__OP_WRITE,
                     .stag = stag_of(e, MR_W),
                     .to = addr_of(e, MR_W, 0)};
    size_t n = uw__ddp_hdr_encode(&h, e->scratch);
    memset(e->scratch + n, 1, 8);
    frame(e, s, e->scratch, n + 8);
}

static void r_ddp_version_untagged(env *e, buf *s)
{
    post_recv1(e, 1, 0, 64);
    uw__ddp_hdr h = {.last = true, .dv = 2, .rv = 1, .opcode = UW__OP_SEND, .msn = 1};
    size_t n = uw__ddp_hdr_encode(&h, e->scratch);
    memset(e->scratch + n, 1, 8);
    frame(e, s, e->scratch, n + 8);
}

static void r_rdmap_version_send(env *e, buf *s)
{
    post_recv1(e, 1, 0, 64);
    uw__ddp_hdr h = {.last = true, .dv = 1, .rv = 0, .opcode = UW__OP_SEND, .msn = 1};
    size_t n = uw__ddp_hdr_encode(&h, e->scratch);
    memset(e->scratch + n, 1, 8);
    frame(e, s, e->scratch, n + 8);
}

static void r_rdmap_version_write(env *e, buf *s)
{
    uw__ddp_hdr h = {.tagged = true,
                     .last = true,
                     .dv = 1,
                     .rv = 2,
                     .opcode = UW__OP_WRITE,
                     .stag = stag_of(e, MR_W),
                     .to = addr_of(e, MR_W, 0)};
    size_t n = uw__ddp_hdr_encode(&h, e->scratch);
    memset(e->scratch + n, 1, 8);
    frame(e, s, e->scratch, n + 8);
}

static void untagged_op(env *e, buf *s, uint8_t op, uint32_t qn)
{
    post_recv1(e, 1, 0, 64);
    size_t n = mk_hdr(e->scratch, false, true, op, 0, 0, qn, 1, 0);
    memset(e->scratch + n, 1, 8);
    frame(e, s, e->scratch, n + 8);
}

static void r_untagged_write(env *e, buf *s)
{
    untagged_op(e, s, UW__OP_WRITE, 0);
}
static void r_untagged_read_resp(env *e, buf *s)
{
    untagged_op(e, s, UW__OP_READ_RESP, 0);
}
static void r_untagged_op9(env *e, buf *s)
{
    untagged_op(e, s, 9, 0);
}
static void r_send_on_qn1(env *e, buf *s)
{
    untagged_op(e, s, UW__OP_SEND, 1);
}

static void tagged_op(env *e, buf *s, uint8_t op)
{
    uint8_t d[8] = {1};
    peer_tagged(e, s, op, stag_of(e, MR_W), addr_of(e, MR_W, 0), d, 8, WHOLE);
}

static void r_tagged_send(env *e, buf *s)
{
    tagged_op(e, s, UW__OP_SEND);
}
static void r_tagged_read_req(env *e, buf *s)
{
    tagged_op(e, s, UW__OP_READ_REQ);
}
static void r_tagged_term(env *e, buf *s)
{
    tagged_op(e, s, UW__OP_TERMINATE);
}
static void r_tagged_op15(env *e, buf *s)
{
    tagged_op(e, s, 15);
}

static void r_qn3(env *e, buf *s)
{
    untagged_op(e, s, UW__OP_SEND, 3);
}
static void r_qn_max(env *e, buf *s)
{
    untagged_op(e, s, UW__OP_SEND, 0xFFFFFFFFu);
}

static void r_msn_ahead(env *e, buf *s)
{
    post_recv1(e, 1, 0, 64);
    post_recv1(e, 2, 64, 64);
    e->peer_msn[0] = 2;
    uint8_t d[8] = {1};
    peer_send(e, s, UW__OP_SEND, 0, d, 8, WHOLE);
}

static void r_msn_repeat(env *e, buf *s)
{
    /* MSN 1 completes, then MSN 1 again. */
    post_recv1(e, 1, 0, 64);
    post_recv1(e, 2, 64, 64);
    uint8_t d[8] = {1};
    peer_send(e, s, UW__OP_SEND, 0, d, 8, WHOLE);
    e->peer_msn[0] = 1;
    peer_send(e, s, UW__OP_SEND, 0, d, 8, WHOLE);
    memcpy(e->shadow + (e->base[MR_L] - e->arena), d, 8);
}

static void r_no_buffer(env *e, buf *s)
{
    uint8_t d[8] = {1};
    peer_send(e, s, UW__OP_SEND, 0, d, 8, WHOLE);
}

static void r_mo_first(env *e, buf *s)
{
    post_recv1(e, 1, 0, 64);
    size_t n = mk_hdr(e->scratch, false, true, UW__OP_SEND, 0, 0, 0, 1, 8);
    memset(e->scratch + n, 1, 8);
    frame(e, s, e->scratch, n + 8);
}

static void r_mo_gap(env *e, buf *s)
{
    /* Second segment's MO skips 4 octets. */
    post_recv1(e, 1, 0, 64);
    size_t n = mk_hdr(e->scratch, false, false, UW__OP_SEND, 0, 0, 0, 1, 0);
    memset(e->scratch + n, 1, 8);
    frame(e, s, e->scratch, n + 8);
    memcpy(e->shadow + (e->base[MR_L] - e->arena), e->scratch + n, 8);
    n = mk_hdr(e->scratch, false, true, UW__OP_SEND, 0, 0, 0, 1, 12);
    memset(e->scratch + n, 2, 8);
    frame(e, s, e->scratch, n + 8);
}

static void r_too_long(env *e, buf *s)
{
    post_recv1(e, 1, 0, 32);
    uint8_t d[40] = {1};
    peer_send(e, s, UW__OP_SEND, 0, d, 40, WHOLE);
}

static void r_too_long_2nd_seg(env *e, buf *s)
{
    /* Two SGEs of 16: the first segment fills them, the second overflows. */
    uw_sge sg[2] = {{addr_of(e, MR_L, 0), 16, stag_of(e, MR_L)},
                    {addr_of(e, MR_L, 100), 16, stag_of(e, MR_L)}};
    post_recv(e, 1, sg, 2);
    uint8_t d[40];
    memset(d, 3, sizeof(d));
    size_t n = mk_hdr(e->scratch, false, false, UW__OP_SEND, 0, 0, 0, 1, 0);
    memcpy(e->scratch + n, d, 32);
    frame(e, s, e->scratch, n + 32);
    memcpy(e->shadow + (e->base[MR_L] - e->arena), d, 16);
    memcpy(e->shadow + (e->base[MR_L] + 100 - e->arena), d, 16);
    n = mk_hdr(e->scratch, false, true, UW__OP_SEND, 0, 0, 0, 1, 32);
    memcpy(e->scratch + n, d, 8);
    frame(e, s, e->scratch, n + 8);
}

static void r_inv_not_allowed(env *e, buf *s)
{
    /* MR_W has no REMOTE_INVALIDATE. */
    post_recv1(e, 1, 0, 64);
    uint8_t d[8] = {1};
    peer_send(e, s, UW__OP_SEND_INV, stag_of(e, MR_W), d, 8, WHOLE);
}

static void r_inv_unknown(env *e, buf *s)
{
    post_recv1(e, 1, 0, 64);
    uint8_t d[8] = {1};
    peer_send(e, s, UW__OP_SEND_SE_INV, 0x0BAD0001u, d, 8, WHOLE);
}

static void r_inv_other_pd(env *e, buf *s)
{
    post_recv1(e, 1, 0, 64);
    peer_send(e, s, UW__OP_SEND_INV, stag_of(e, MR_PD2), NULL, 0, WHOLE);
}

static void r_read_no_access(env *e, buf *s)
{
    /* MR_W grants remote write, not remote read. */
    peer_read_req(e, s, 0x100, 0, 16, stag_of(e, MR_W), addr_of(e, MR_W, 0));
}

static void r_read_stag(env *e, buf *s)
{
    peer_read_req(e, s, 0x100, 0, 16, 0x0BAD0001u, addr_of(e, MR_R, 0));
}

static void r_read_bounds(env *e, buf *s)
{
    peer_read_req(e, s, 0x100, 0, 16, stag_of(e, MR_R), addr_of(e, MR_R, mrdef[MR_R].len - 8));
}

static void r_read_base(env *e, buf *s)
{
    peer_read_req(e, s, 0x100, 0, 16, stag_of(e, MR_R), addr_of(e, MR_R, 0) - 4);
}

static void r_read_pd(env *e, buf *s)
{
    peer_read_req(e, s, 0x100, 0, 16, stag_of(e, MR_PD2), addr_of(e, MR_PD2, 0));
}

static void r_read_wrap(env *e, buf *s)
{
    peer_read_req(e, s, 0x100, 0, 64, stag_of(e, MR_R), UINT64_MAX - 31);
}

static void r_read_beyond_ird(env *e, buf *s)
{
    /* IRD 1 (row options); the first request is still being answered. */
    peer_read_req(e, s, 0x100, 0, 16, stag_of(e, MR_R), addr_of(e, MR_R, 0));
    peer_read_req(e, s, 0x200, 0, 16, stag_of(e, MR_R), addr_of(e, MR_R, 0));
}

static void r_read_short(env *e, buf *s)
{
    size_t h = mk_hdr(e->scratch, false, true, UW__OP_READ_REQ, 0, 0, 1, 1, 0);
    memset(e->scratch + h, 0, 20);
    frame(e, s, e->scratch, h + 20);
}

static void r_read_not_last(env *e, buf *s)
{
    size_t h = mk_hdr(e->scratch, false, false, UW__OP_READ_REQ, 0, 0, 1, 1, 0);
    memset(e->scratch + h, 0, 28);
    frame(e, s, e->scratch, h + 28);
}

static void r_read_msn(env *e, buf *s)
{
    e->peer_msn[1] = 5;
    peer_read_req(e, s, 0x100, 0, 16, stag_of(e, MR_R), addr_of(e, MR_R, 0));
}

static void r_read_resp_unexpected(env *e, buf *s)
{
    uint8_t d[16] = {1};
    peer_tagged(e, s, UW__OP_READ_RESP, stag_of(e, MR_L), addr_of(e, MR_L, 0), d, 16, WHOLE);
}

static void r_read_resp_too_long(env *e, buf *s)
{
    /* We asked for 16 octets; the response carries 32. */
    uw_sge sg = {addr_of(e, MR_L, 0), 16, stag_of(e, MR_L)};
    uw_send_wr w = {.wr_id = 9,
                    .opcode = UW_WR_RDMA_READ,
                    .sg_list = &sg,
                    .num_sge = 1,
                    .remote_addr = 0x1000,
                    .rkey = 0x4200};
    post_send(e, &w);
    assert_int_equal(drain_tx(e), 1);
    uint8_t d[32] = {1};
    peer_tagged(e, s, UW__OP_READ_RESP, stag_of(e, MR_L), addr_of(e, MR_L, 0), d, 32, WHOLE);
}

static void r_term_not_last(env *e, buf *s)
{
    size_t h = mk_hdr(e->scratch, false, false, UW__OP_TERMINATE, 0, 0, 2, 1, 0);
    static const uint8_t t[4] = {0x20, 0x07, 0, 0};
    memcpy(e->scratch + h, t, 4);
    frame(e, s, e->scratch, h + 4);
}

static void r_short_ulpdu(env *e, buf *s)
{
    /* 10 octets: an untagged control field, then too little for the header. */
    static const uint8_t u[10] = {0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0};
    frame(e, s, u, sizeof(u));
}

static void r_short_ulpdu_1(env *e, buf *s)
{
    static const uint8_t u[1] = {0xC1};
    frame(e, s, u, sizeof(u));
}

static void r_empty_ulpdu(env *e, buf *s)
{
    frame(e, s, NULL, 0);
}

/* Rewrites the marker at stream position mpos inside the last FPDU of s
 * (which starts at stream position fpos) and, with CRC on, makes the CRC
 * right again, so that only the marker is wrong. */
static void break_marker(env *e, buf *s, size_t fstart, uint32_t fpos, uint32_t mpos)
{
    uint8_t *f = s->d + fstart;
    size_t wire = s->n - fstart;
    size_t m = (size_t)(mpos - fpos);
    assert_true(m + 4 <= wire - 4);
    f[m + 3] ^= 0x40; /* FPDUPTR off by 64 */
    if (e->rxflags & UW_MPA_CRC) {
        uint32_t c = uw_crc32c(f, wire - 4);
        for (int i = 0; i < 4; i++)
            f[wire - 4 + i] = (uint8_t)(c >> (8 * i));
    }
}

static void r_marker_inner(env *e, buf *s)
{
    /* A 700-octet Write from position 0: the marker at 512 is inside it. */
    uint8_t *d = calloc(1, 700);
    size_t start = s->n;
    uint32_t fpos = e->rxpos;
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, 0), d, 700, WHOLE);
    break_marker(e, s, start, fpos, 512);
    /* The payload is placed before the FPDU ends (direct placement); only
     * the error matters here, so the region may change. */
    free(d);
}

static void r_marker_leading(env *e, buf *s)
{
    uint8_t d[8] = {1};
    size_t start = s->n;
    uint32_t fpos = e->rxpos;
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, 0), d, 8, WHOLE);
    break_marker(e, s, start, fpos, 0);
}

static const opts O_IRD1 = {.crc = true, .ird = 1, .ord = 16, .mulpdu = 1448};
static const opts O_MRK = {.crc = true, .markers_rx = true, .ird = 16, .ord = 16, .mulpdu = 1448};
static const opts O_MRK_NOCRC = {.markers_rx = true, .ird = 16, .ord = 16, .mulpdu = 1448};

static const row rows[] = {
    /* RFC 5041 7.1 tagged checks, reported with RFC 5041 7.2 type 1 codes. */
    {"invalid STag", r_stag_invalid, 1, 1, 0, true, false, -1, 0, NULL, NULL},
    {"stale STag key", r_stag_stale, 1, 1, 0, true, false, -1, 0, NULL, NULL},
    {"invalidated STag", r_stag_invalidated, 1, 1, 0, true, false, -1, 1, NULL, NULL},
    {"deregistered STag", r_stag_deregistered, 1, 1, 0, true, false, -1, 0, NULL, NULL},
    {"base violation", r_base, 1, 1, 1, true, false, -1, 0, NULL, NULL},
    {"bounds violation", r_bounds, 1, 1, 1, true, false, -1, 0, NULL, NULL},
    {"bounds violation, second segment", r_bounds_2nd_seg, 1, 1, 1, true, false, -1, 0, NULL, NULL},
    {"PD mismatch", r_pd, 1, 1, 2, true, false, -1, 0, NULL, NULL},
    {"TO wrap", r_to_wrap, 1, 1, 3, true, false, -1, 0, NULL, NULL},
    {"DDP version, tagged", r_ddp_version_tagged, 1, 1, 4, true, false, -1, 0, NULL, NULL},
    /* RFC 5040 remote protection: access rights. */
    {"no remote write", r_no_remote_write, 0, 1, 2, true, false, -1, 0, NULL, NULL},
    /* RFC 5041 7.1 untagged checks, RFC 5041 7.2 type 2 codes. */
    {"invalid QN 3", r_qn3, 1, 2, 1, true, false, -1, 0, NULL, NULL},
    {"invalid QN 0xFFFFFFFF", r_qn_max, 1, 2, 1, true, false, -1, 0, NULL, NULL},
    {"no receive buffer", r_no_buffer, 1, 2, 2, true, false, -1, 0, NULL, NULL},
    {"MSN ahead", r_msn_ahead, 1, 2, 3, true, false, -1, 0, NULL, NULL},
    {"MSN repeated", r_msn_repeat, 1, 2, 3, true, false, -1, 1, NULL, NULL},
    {"MO of first segment", r_mo_first, 1, 2, 4, true, false, -1, 0, NULL, NULL},
    {"MO gap", r_mo_gap, 1, 2, 4, true, false, -1, 0, NULL, NULL},
    {"message too long", r_too_long, 1, 2, 5, true, false, -1, 0, NULL, NULL},
    {"message too long, second segment", r_too_long_2nd_seg, 1, 2, 5, true, false, -1, 0, NULL,
     NULL},
    {"DDP version, untagged", r_ddp_version_untagged, 1, 2, 6, true, false, -1, 0, NULL, NULL},
    /* RFC 5040 remote operation errors. */
    {"RDMAP version 0, Send", r_rdmap_version_send, 0, 2, 5, true, false, -1, 0, NULL, NULL},
    {"RDMAP version 2, Write", r_rdmap_version_write, 0, 2, 5, true, false, -1, 0, NULL, NULL},
    {"Write opcode untagged", r_untagged_write, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    {"Read Response opcode untagged", r_untagged_read_resp, 0, 2, 6, true, false, -1, 0, NULL,
     NULL},
    {"undefined opcode 9 untagged", r_untagged_op9, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    {"Send on QN 1", r_send_on_qn1, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    {"Send opcode tagged", r_tagged_send, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    {"Read Request opcode tagged", r_tagged_read_req, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    {"Terminate opcode tagged", r_tagged_term, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    {"undefined opcode 15 tagged", r_tagged_op15, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    {"Read Response without a request", r_read_resp_unexpected, 0, 2, 6, true, false, -1, 0, NULL,
     NULL},
    {"Read Response longer than the request", r_read_resp_too_long, 0, 2, 6, true, false, -1, 0,
     NULL, NULL},
    {"Terminate without L", r_term_not_last, 0, 2, 6, true, false, -1, 0, NULL, NULL},
    /* Send with Invalidate (RFC 5040: code 9 for an STag that cannot be
     * invalidated). The payload lands in the receive buffer before the
     * invalidation is tried at the last segment, so MR_L may change. */
    {"invalidate without REMOTE_INVALIDATE", r_inv_not_allowed, 0, 1, 9, true, false, MR_L, 0, NULL,
     NULL},
    {"invalidate unknown STag", r_inv_unknown, 0, 1, 0, true, false, MR_L, 0, NULL, NULL},
    /* The Read Request path reports a foreign-PD STag as 1/3 ("not
     * associated with this stream"); Send with Invalidate reports 1/0. */
    {"invalidate STag of another PD", r_inv_other_pd, 0, 1, 3, true, false, -1, 0, NULL, NULL},
    /* RDMA Read Request validation: RDMAP remote protection, with R. */
    {"Read Request: invalid source STag", r_read_stag, 0, 1, 0, true, true, -1, 0, NULL, NULL},
    {"Read Request: bounds", r_read_bounds, 0, 1, 1, true, true, -1, 0, NULL, NULL},
    {"Read Request: base", r_read_base, 0, 1, 1, true, true, -1, 0, NULL, NULL},
    {"Read Request: no remote read", r_read_no_access, 0, 1, 2, true, true, -1, 0, NULL, NULL},
    {"Read Request: PD mismatch", r_read_pd, 0, 1, 3, true, true, -1, 0, NULL, NULL},
    {"Read Request: TO wrap", r_read_wrap, 0, 1, 4, true, true, -1, 0, NULL, NULL},
    {"Read Request beyond IRD", r_read_beyond_ird, 0, 2, 7, true, true, -1, 0, &O_IRD1, NULL},
    {"Read Request: MSN", r_read_msn, 1, 2, 3, true, false, -1, 0, NULL, NULL},
    {"Read Request shorter than 28", r_read_short, 1, 2, 5, true, false, -1, 0, NULL, NULL},
    {"Read Request without L", r_read_not_last, 1, 2, 5, true, false, -1, 0, NULL, NULL},
    /* Segments shorter than their header: nothing to name, so no header. */
    {"ULPDU of 10 octets", r_short_ulpdu, 1, 0, 0, false, false, -1, 0, NULL, NULL},
    {"ULPDU of 1 octet", r_short_ulpdu_1, 1, 0, 0, false, false, -1, 0, NULL, NULL},
    {"ULPDU of 0 octets", r_empty_ulpdu, 1, 0, 0, false, false, -1, 0, NULL, NULL},
    /* RFC 5044 4.3 / 8: FPDUPTR disagrees with the FPDU start: code 3. */
    {"marker inside FPDU, CRC on", r_marker_inner, 2, 0, 3, false, false, MR_W, 0, &O_MRK, NULL},
    {"marker inside FPDU, CRC off", r_marker_inner, 2, 0, 3, false, false, MR_W, 0, &O_MRK_NOCRC,
     NULL},
    {"leading marker, CRC on", r_marker_leading, 2, 0, 3, false, false, MR_W, 0, &O_MRK, NULL},
};

static void run_row(const row *r, tu_rng *rng, int split)
{
    opts o = r->o ? *r->o : opts_default();
    env e;
    env_init(&e, &o, rng);
    e.split = split;
    buf s = {0};
    r->build(&e, &s);
    buf bad = {0};
    buf_put(&bad, e.last_ul.d, e.last_ul.n);
    int rc = feed_buf(&e, &s);
    if (rc >= 0)
        fail_msg("row \"%s\": the bad segment was accepted", r->name);
    if (r->may_change >= 0) {
        /* Take the region's current octets as expected; the rest must hold. */
        size_t off = (size_t)(e.base[r->may_change] - e.arena);
        memcpy(e.shadow + off, e.arena + off, mrdef[r->may_change].len);
    }
    check_arena(&e);
    /* Only the segments before the bad one complete anything. */
    uw_wc wc[8];
    int n = poll_all(e.rcq, wc, 8);
    assert_int_equal(n, r->prelude_wc);
    for (int i = 0; i < n; i++) {
        assert_int_equal(wc[i].status, UW_WC_SUCCESS);
        assert_int_equal(wc[i].wr_id, 1);
    }
    if (split == 0)
        print_message("row %-42s -> %u/%u/%u\n", r->name, r->layer, r->etype, r->ecode);
    expect_term(&e, r->layer, r->etype, r->ecode, r->hdr ? bad.d : NULL, bad.n, r->rdmap);
    /* Dead: a valid segment is refused and changes nothing. */
    uint8_t d[16] = {9};
    peer_tagged(&e, &s, UW__OP_WRITE, stag_of(&e, MR_W), addr_of(&e, MR_W, 0), d, 16, WHOLE);
    assert_int_equal(feed_buf(&e, &s), UW_EPIPE);
    check_arena(&e);
    assert_int_equal(drain_tx(&e), 0);
    buf_free(&s);
    buf_free(&bad);
    env_fini(&e);
}

static void test_receive_checks(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0002));
    bool known = getenv("UW_RUN_KNOWN_BUGS") != NULL;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (rows[i].bug && !known) {
            print_message("row %-42s SKIPPED: %s\n", rows[i].name, rows[i].bug);
            continue;
        }
        for (int split = 0; split < 3; split++)
            run_row(&rows[i], &rng, split);
    }
}

/* ------------------------------------------------------------------------ */
/* CRC: every single-bit flip                                                */

/* Builds a small Send (into a posted receive) or Write FPDU, flips each bit
 * in turn and expects the LLP CRC Terminate, no completion, and destination
 * octets either untouched or zeroed (the scrub rule: octets placed by a
 * damaged FPDU are zeroed), never anything else anywhere. */
static void flip_fpdu(env *e, bool write, buf *fp)
{
    uint8_t d[13];
    for (int i = 0; i < 13; i++)
        d[i] = (uint8_t)(0x30 + i);
    /* Built in each environment: a Write names this arena's addresses. */
    if (write)
        peer_tagged(e, fp, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, 100), d, sizeof(d),
                    WHOLE);
    else
        peer_send(e, fp, UW__OP_SEND, 0, d, sizeof(d), WHOLE);
}

static void flip_all(bool write, bool markers, tu_rng *rng)
{
    opts o = opts_default();
    o.markers_rx = markers;
    const size_t plen = 13;
    size_t hdr_end = (markers ? 4 : 0) + 2 + (write ? 14 : 18);
    uint8_t *zeros = calloc(1, 70000);
    size_t nbits = 0;
    for (size_t bit = 0; bit == 0 || bit < nbits; bit++) {
        env e;
        env_init(&e, &o, rng);
        e.split = (int)(bit % 3);
        if (!write)
            post_recv1(&e, 77, 200, 64);
        buf fp = {0};
        flip_fpdu(&e, write, &fp);
        nbits = fp.n * 8;
        fp.d[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        int rc = feed(&e, fp.d, fp.n);
        /* A longer ULPDU_Length leaves the FPDU open: more octets close it. */
        for (int k = 0; rc == 0 && k < 20; k++)
            rc = feed(&e, zeros, 4096);
        assert_true(rc < 0);
        expect_term(&e, 2, 0, 2, NULL, 0, false);
        uw_wc wc[4];
        assert_int_equal(poll_all(e.rcq, wc, 4), 0);
        /* Per octet: unchanged, or zero inside the target region. */
        int dst = write ? MR_W : MR_L;
        uint8_t *lo = e.base[dst], *hi = lo + mrdef[dst].len;
        for (size_t i = 0; i < e.arena_len; i++) {
            uint8_t *p = e.arena + i;
            if (*p == e.shadow[i])
                continue;
            if (p >= lo && p < hi && *p == 0)
                continue;
            fail_msg("bit %zu: octet %zu is %02x (was %02x)", bit, i, *p, e.shadow[i]);
        }
        /* With the header intact, the payload was placed and must now be
         * all zero (the random arena makes a leftover visible). */
        if (bit / 8 >= hdr_end) {
            uint8_t *t = write ? e.base[MR_W] + 100 : e.base[MR_L] + 200;
            for (size_t i = 0; i < plen; i++)
                if (t[i] != 0)
                    fail_msg("bit %zu: destination octet %zu not scrubbed (%02x)", bit, i, t[i]);
        }
        buf_free(&fp);
        env_fini(&e);
    }
    free(zeros);
}

static void test_crc_bit_flips(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0003));
    flip_all(false, false, &rng);
    flip_all(true, false, &rng);
    flip_all(false, true, &rng);
}

/* Markers in the steady state, where consume takes a marker and the whole
 * interval of payload after it in one step: a long Write lands intact at
 * every feed granularity, and a damaged FPDUPTR deep inside it is caught
 * with CRC off, so that only the marker check can see it. */
static void test_marker_steady_state(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0009));
    enum { LEN = 5000 };
    uint8_t *d = malloc(LEN);
    assert_non_null(d);
    for (int i = 0; i < LEN; i++)
        d[i] = (uint8_t)(i * 7 + 1);
    for (int bad = 0; bad < 2; bad++)
        for (int split = 0; split < 4; split++) {
            opts o = opts_default();
            o.markers_rx = true;
            o.crc = false;
            env e;
            env_init(&e, &o, &rng);
            e.split = split;
            uint32_t start = e.rxpos;
            buf fp = {0};
            peer_tagged(&e, &fp, UW__OP_WRITE, stag_of(&e, MR_W), addr_of(&e, MR_W, 0), d, LEN,
                        WHOLE);
            if (bad) {
                size_t k, seen = 0;
                for (k = 1; k < fp.n; k++)
                    if ((start + k) % 512 == 0 && ++seen == 6)
                        break;
                assert_true(k + 4 <= fp.n);
                fp.d[k + 2] ^= 0x01; /* FPDUPTR off by 256 */
            }
            int rc = feed(&e, fp.d, fp.n);
            if (bad) {
                assert_true(rc < 0);
                expect_term(&e, 2, 0, 3, NULL, 0, false);
            } else {
                assert_int_equal(rc, 0);
                assert_memory_equal(e.base[MR_W], d, LEN);
            }
            buf_free(&fp);
            env_fini(&e);
        }
    free(d);
}

/* ------------------------------------------------------------------------ */
/* Received Terminate                                                        */

static void term_case(const uint8_t *payload, size_t n, uint8_t layer, uint8_t etype, uint8_t ecode,
                      tu_rng *rng)
{
    opts o = opts_default();
    env e;
    env_init(&e, &o, rng);
    buf s = {0};
    post_recv1(&e, 1, 0, 64);
    peer_term(&e, &s, payload, n);
    /* Anything after it is not processed. */
    uint8_t d[8] = {5};
    peer_send(&e, &s, UW__OP_SEND, 0, d, 8, 8);
    assert_int_equal(feed_buf(&e, &s), UW_ETERM_RECEIVED);
    check_arena(&e);
    uw_cm_event ev;
    assert_int_equal(uw_cm_get_event(e.ctx, &ev), 1);
    assert_int_equal(ev.type, UW_CM_TERMINATED);
    assert_ptr_equal(ev.qp, e.qp);
    assert_true(ev.term_received);
    assert_int_equal(ev.err, UW_ETERM_RECEIVED);
    if (ev.term.layer != layer || ev.term.etype != etype || ev.term.ecode != ecode)
        fail_msg("received Terminate reported as %u/%u/%u, expected %u/%u/%u", ev.term.layer,
                 ev.term.etype, ev.term.ecode, layer, etype, ecode);
    assert_int_equal(uw_cm_get_event(e.ctx, &ev), 0);
    /* No Terminate is sent in answer to one, and nothing else either. */
    assert_int_equal(drain_tx(&e), 0);
    expect_no_wc(&e);
    assert_true(e.qp->rd.dead);
    buf_free(&s);
    env_fini(&e);
}

static void test_terminate_received(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0004));
    /* RFC 5040 order: Layer in the high nibble. */
    static const uint8_t rfc[] = {0x20, 0x07, 0x00, 0x00};
    term_case(rfc, sizeof(rfc), 2, 0, 7, &rng);
    /* Linux siw's little-endian bitfields (siw-vm README 7): 02 07 00 00. */
    static const uint8_t siw[] = {0x02, 0x07, 0x00, 0x00};
    term_case(siw, sizeof(siw), 2, 0, 7, &rng);
    static const uint8_t siw6[] = {0x02, 0x06, 0x00, 0x00};
    term_case(siw6, sizeof(siw6), 2, 0, 6, &rng);
    static const uint8_t crc[] = {0x20, 0x02, 0x00, 0x00};
    term_case(crc, sizeof(crc), 2, 0, 2, &rng);
    /* DDP tagged invalid STag with M, D and the offending tagged header. */
    static const uint8_t ddp[] = {0x11, 0x00, 0xC0, 0x00, 0x00, 0x1E, 0xC1, 0x40, 0x00, 0x00,
                                  0x12, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00};
    term_case(ddp, sizeof(ddp), 1, 1, 0, &rng);
    /* RDMAP remote operation, unexpected opcode, with an untagged header. */
    uint8_t rop[4 + 2 + 18] = {0x02, 0x06, 0xC0, 0x00, 0x00, 0x1A, 0x41, 0x40};
    rop[6 + 13] = 1; /* MSN 1 */
    term_case(rop, sizeof(rop), 0, 2, 6, &rng);
    /* Read Request error with R: the 28-octet header follows. */
    uint8_t rrq[4 + 2 + 18 + 28] = {0x01, 0x02, 0xE0, 0x00, 0x00, 0x2E, 0x41, 0x41};
    rrq[6 + 9] = 1;  /* QN 1 */
    rrq[6 + 13] = 1; /* MSN 1 */
    term_case(rrq, sizeof(rrq), 0, 1, 2, &rng);
}

/* A Terminate that arrives while the responder still waits for the RTR (the
 * initiator found no RTR type it can send, RFC 6581 9.2: layer 2 code 7) is
 * a Terminate, not a missing RTR, and its code reaches the consumer. */
static void test_terminate_before_rtr(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0005));
    static const uint8_t variants[2][4] = {{0x20, 0x07, 0, 0}, {0x02, 0x07, 0, 0}};
    for (int v = 0; v < 2; v++) {
        opts o = opts_default();
        o.initiator = false;
        o.p2p = true;
        o.rtr = UW_MPA_RTR_WRITE | UW_MPA_RTR_READ;
        env e;
        env_init(&e, &o, &rng);
        buf s = {0};
        peer_term(&e, &s, variants[v], 4);
        assert_int_equal(feed_buf(&e, &s), UW_ETERM_RECEIVED);
        uw_cm_event ev;
        assert_int_equal(uw_cm_get_event(e.ctx, &ev), 1);
        assert_int_equal(ev.type, UW_CM_TERMINATED);
        assert_true(ev.term_received);
        if (ev.term.layer != 2 || ev.term.etype != 0 || ev.term.ecode != 7)
            fail_msg("Terminate before the RTR reported as %u/%u/%u, expected 2/0/7", ev.term.layer,
                     ev.term.etype, ev.term.ecode);
        assert_int_equal(drain_tx(&e), 0);
        buf_free(&s);
        env_fini(&e);
    }
}

/* ------------------------------------------------------------------------ */
/* RFC 6581 7 / 9.2: the RTR                                                 */

static void expect_established(env *e, bool yes)
{
    uw_cm_event ev;
    int r = uw_cm_get_event(e->ctx, &ev);
    if (!yes) {
        assert_int_equal(r, 0);
        return;
    }
    assert_int_equal(r, 1);
    assert_int_equal(ev.type, UW_CM_ESTABLISHED);
    assert_ptr_equal(ev.qp, e->qp);
}

/* Responder in p2p accepting exactly rtr: nothing goes out before the RTR;
 * the RTR consumes no receive and completes nothing; then the queued Send
 * goes out (after the zero-length Read Response for a Read RTR). */
static void rtr_responder(uint8_t rtr, tu_rng *rng)
{
    opts o = opts_default();
    o.initiator = false;
    o.p2p = true;
    o.rtr = rtr;
    env e;
    env_init(&e, &o, rng);
    post_recv1(&e, 11, 0, 64);
    uint8_t msg[5] = {'h', 'e', 'l', 'l', 'o'};
    memcpy(e.base[MR_R], msg, 5);
    memcpy(e.shadow + (e.base[MR_R] - e.arena), msg, 5);
    uw_sge sg = {addr_of(&e, MR_R, 0), 5, stag_of(&e, MR_R)};
    uw_send_wr w = {
        .wr_id = 21, .opcode = UW_WR_SEND, .flags = UW_SEND_SIGNALED, .sg_list = &sg, .num_sge = 1};
    post_send(&e, &w);
    /* RFC 6581 7.1: the responder sends nothing until the RTR. */
    struct iovec iov[4];
    assert_int_equal(uw__qp_tx_iov(e.qp, iov, 4), 0);
    buf s = {0};
    if (rtr == UW_MPA_RTR_SEND) {
        peer_send(&e, &s, UW__OP_SEND, 0, NULL, 0, 1);
    } else if (rtr == UW_MPA_RTR_WRITE) {
        /* siw's Write RTR: STag 1, TO 0, no payload; not an MR. */
        static const uint8_t wr[14] = {0xC1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
        frame(&e, &s, wr, sizeof(wr));
    } else {
        peer_read_req(&e, &s, 0, 0, 0, 1, 0);
    }
    /* Fed one octet at a time: the fence must hold until the last one. */
    for (size_t i = 0; i < s.n; i++) {
        if (i + 1 == s.n)
            expect_established(&e, false);
        assert_int_equal(feed(&e, s.d + i, 1), 0);
        if (i + 1 < s.n)
            assert_int_equal(uw__qp_tx_iov(e.qp, iov, 4), 0);
    }
    s.n = 0;
    expect_established(&e, true);
    check_arena(&e);
    expect_no_wc(&e);
    size_t first = e.ntx;
    drain_tx(&e);
    size_t k = first;
    if (rtr == UW_MPA_RTR_READ) {
        /* RFC 6581 7.1: a zero-length Read Response to sink STag 0, TO 0. */
        size_t n;
        const uint8_t *p = txul(&e, k++, &n);
        static const uint8_t rresp[14] = {0xC1, 0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal(n, 14);
        assert_memory_equal(p, rresp, 14);
    }
    assert_int_equal(e.ntx, k + 1);
    seg g = tx_seg(&e, k);
    assert_int_equal(g.op, UW__OP_SEND);
    assert_int_equal(g.msn, 1);
    assert_int_equal(g.plen, 5);
    assert_memory_equal(g.pay, msg, 5);
    uw_wc wc[4];
    assert_int_equal(poll_all(e.scq, wc, 4), 1);
    assert_int_equal(wc[0].wr_id, 21);
    /* The first real Send: MSN 2 after a Send RTR, else MSN 1; it lands in
     * the receive that was posted before the RTR. */
    peer_send(&e, &s, UW__OP_SEND, 0, msg, 3, 3);
    assert_int_equal(feed_buf(&e, &s), 0);
    memcpy(e.shadow + (e.base[MR_L] - e.arena), msg, 3);
    check_arena(&e);
    assert_int_equal(poll_all(e.rcq, wc, 4), 1);
    assert_int_equal(wc[0].wr_id, 11);
    assert_int_equal(wc[0].byte_len, 3);
    /* Only one RTR: a second zero-length Write to STag 1 is now an ordinary
     * zero-length Write (placed nowhere), a second Send RTR a real Send. */
    buf_free(&s);
    env_fini(&e);
}

static void test_rtr_responder(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0006));
    rtr_responder(UW_MPA_RTR_SEND, &rng);
    rtr_responder(UW_MPA_RTR_WRITE, &rng);
    rtr_responder(UW_MPA_RTR_READ, &rng);
}

/* RFC 5044 7.1.2 rule 4: in client-server mode too, the responder receives
 * and validates one FPDU before it sends any FPDU or marker. */
static void test_responder_waits_for_first_fpdu(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED000D));
    for (int markers = 0; markers < 2; markers++) {
        opts o = opts_default();
        o.initiator = false;
        o.markers_tx = markers;
        env e;
        env_init(&e, &o, &rng);
        uw_sge sg = {addr_of(&e, MR_R, 0), 4, stag_of(&e, MR_R)};
        uw_send_wr w = {.wr_id = 1, .opcode = UW_WR_SEND, .sg_list = &sg, .num_sge = 1};
        post_send(&e, &w);
        struct iovec iov[4];
        assert_int_equal(uw__qp_tx_iov(e.qp, iov, 4), 0);
        buf s = {0};
        uint8_t d[4] = {1, 2, 3, 4};
        peer_tagged(&e, &s, UW__OP_WRITE, stag_of(&e, MR_W), addr_of(&e, MR_W, 0), d, 4, WHOLE);
        /* Nothing until the FPDU is complete, CRC included. */
        assert_int_equal(feed(&e, s.d, s.n - 1), 0);
        assert_int_equal(uw__qp_tx_iov(e.qp, iov, 4), 0);
        assert_int_equal(feed(&e, s.d + s.n - 1, 1), 0);
        assert_int_equal(drain_tx(&e), 1);
        buf_free(&s);
        env_fini(&e);
    }
}

/* Anything but an accepted RTR first: Terminate layer 2 code 7. */
typedef void (*first_fn)(env *e, buf *s);
static void f_send(env *e, buf *s)
{
    uint8_t d[4] = {1};
    peer_send(e, s, UW__OP_SEND, 0, d, 4, WHOLE);
}
static void f_zsend(env *e, buf *s)
{
    peer_send(e, s, UW__OP_SEND, 0, NULL, 0, WHOLE);
}
static void f_zwrite(env *e, buf *s)
{
    peer_tagged(e, s, UW__OP_WRITE, 1, 0, NULL, 0, WHOLE);
}
static void f_write(env *e, buf *s)
{
    uint8_t d[4] = {1};
    peer_tagged(e, s, UW__OP_WRITE, stag_of(e, MR_W), addr_of(e, MR_W, 0), d, 4, WHOLE);
}
static void f_zread(env *e, buf *s)
{
    peer_read_req(e, s, 0, 0, 0, 1, 0);
}
static void f_read(env *e, buf *s)
{
    peer_read_req(e, s, 0x100, 0, 8, stag_of(e, MR_R), addr_of(e, MR_R, 0));
}
static void f_rresp(env *e, buf *s)
{
    peer_tagged(e, s, UW__OP_READ_RESP, 0, 0, NULL, 0, WHOLE);
}

static void test_rtr_wrong_first(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0007));
    static const struct {
        uint8_t accept;
        first_fn f;
        const char *name;
    } cases[] = {
        {UW_MPA_RTR_SEND, f_send, "Send with data, Send RTR expected"},
        {UW_MPA_RTR_SEND, f_zwrite, "zero Write, Send RTR expected"},
        {UW_MPA_RTR_SEND, f_zread, "zero Read, Send RTR expected"},
        {UW_MPA_RTR_WRITE, f_zsend, "zero Send, Write RTR expected"},
        {UW_MPA_RTR_WRITE, f_write, "Write with data, Write RTR expected"},
        {UW_MPA_RTR_WRITE, f_zread, "zero Read, Write RTR expected"},
        {UW_MPA_RTR_READ, f_read, "Read of 8, Read RTR expected"},
        {UW_MPA_RTR_READ, f_zwrite, "zero Write, Read RTR expected"},
        {UW_MPA_RTR_ALL, f_rresp, "Read Response, any RTR"},
        {UW_MPA_RTR_ALL, f_send, "Send with data, any RTR"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        opts o = opts_default();
        o.initiator = false;
        o.p2p = true;
        o.rtr = cases[i].accept;
        env e;
        env_init(&e, &o, &rng);
        post_recv1(&e, 1, 0, 64);
        buf s = {0};
        cases[i].f(&e, &s);
        print_message("RTR case: %s\n", cases[i].name);
        assert_true(feed_buf(&e, &s) < 0);
        check_arena(&e);
        expect_no_wc(&e);
        expect_established(&e, false);
        /* The Terminate goes out although the fence holds everything else. */
        expect_term(&e, 2, 0, 7, NULL, 0, false);
        buf_free(&s);
        env_fini(&e);
    }
}

/* Initiator in p2p: the first FPDU is the negotiated RTR, then the queued
 * Send; a Read RTR's zero-length Response completes nothing. */
static void rtr_initiator(uint8_t rtr, tu_rng *rng)
{
    opts o = opts_default();
    o.initiator = false;
    o.p2p = true;
    o.initiator = true; /* explicit: the initiator side of the RTR */
    o.rtr = rtr;
    o.ord = 1;
    env e;
    env_init(&e, &o, rng);
    uw_sge sg = {addr_of(&e, MR_R, 0), 7, stag_of(&e, MR_R)};
    uw_send_wr w = {
        .wr_id = 31, .opcode = UW_WR_SEND, .flags = UW_SEND_SIGNALED, .sg_list = &sg, .num_sge = 1};
    post_send(&e, &w);
    /* With ORD 1 a Read RTR holds the only slot: a Read waits for its
     * zero-length Response. */
    uw_sge rs = {addr_of(&e, MR_L, 0), 8, stag_of(&e, MR_L)};
    uw_send_wr rw = {.wr_id = 32,
                     .opcode = UW_WR_RDMA_READ,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &rs,
                     .num_sge = 1,
                     .remote_addr = 0x900,
                     .rkey = 0x3300};
    post_send(&e, &rw);
    drain_tx(&e);
    size_t n;
    const uint8_t *p = txul(&e, 0, &n);
    if (rtr == UW_MPA_RTR_SEND) {
        static const uint8_t z[18] = {0x41, 0x43, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0};
        assert_int_equal(n, 18);
        assert_memory_equal(p, z, 18);
    } else if (rtr == UW_MPA_RTR_WRITE) {
        static const uint8_t z[14] = {0xC1, 0x40, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
        assert_int_equal(n, 14);
        assert_memory_equal(p, z, 14);
    } else {
        /* siw's Read RTR: QN 1, MSN 1, sink 0/0, size 0, source STag 1/TO 0. */
        uint8_t z[46] = {0x41, 0x41, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1};
        z[18 + 19] = 1;
        assert_int_equal(n, 46);
        assert_memory_equal(p, z, 46);
    }
    seg g = tx_seg(&e, 1);
    assert_int_equal(g.op, UW__OP_SEND);
    assert_int_equal(g.msn, rtr == UW_MPA_RTR_SEND ? 2 : 1);
    uw_wc wc[4];
    buf s = {0};
    if (rtr == UW_MPA_RTR_READ) {
        /* Only the RTR and the Send: the Read waits for the ORD slot. */
        assert_int_equal(e.ntx, 2);
        peer_tagged(&e, &s, UW__OP_READ_RESP, 0, 0, NULL, 0, 1);
        assert_int_equal(feed_buf(&e, &s), 0);
        drain_tx(&e);
    }
    assert_int_equal(e.ntx, 3);
    g = tx_seg(&e, 2);
    assert_int_equal(g.op, UW__OP_READ_REQ);
    assert_int_equal(g.msn, rtr == UW_MPA_RTR_READ ? 2 : 1);
    /* The Send completed; no completion for the RTR or its Response. */
    assert_int_equal(poll_all(e.scq, wc, 4), 1);
    assert_int_equal(wc[0].wr_id, 31);
    assert_int_equal(poll_all(e.rcq, wc, 4), 0);
    check_arena(&e);
    buf_free(&s);
    env_fini(&e);
}

static void test_rtr_initiator(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0008));
    rtr_initiator(UW_MPA_RTR_SEND, &rng);
    rtr_initiator(UW_MPA_RTR_WRITE, &rng);
    rtr_initiator(UW_MPA_RTR_READ, &rng);
}

/* ------------------------------------------------------------------------ */
/* What a receiver must accept                                               */

/* RFC 5041 5.2: a zero-length tagged message is not checked against STag or
 * TO (siw's Write RTR relies on it); reserved control bits are ignored; a
 * zero-length Send completes with byte_len 0. */
static void test_accepted(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED000C));
    opts o = opts_default();
    env e;
    env_init(&e, &o, &rng);
    buf s = {0};
    peer_tagged(&e, &s, UW__OP_WRITE, 0xDEAD0000u, UINT64_MAX, NULL, 0, WHOLE);
    peer_tagged(&e, &s, UW__OP_WRITE, stag_of(&e, MR_PD2), 0, NULL, 0, WHOLE);
    assert_int_equal(feed_buf(&e, &s), 0);
    uint8_t d[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    size_t h = mk_hdr(e.scratch, true, true, UW__OP_WRITE, stag_of(&e, MR_W), addr_of(&e, MR_W, 8),
                      0, 0, 0);
    e.scratch[0] |= 0x3C; /* DDP Rsvd */
    e.scratch[1] |= 0x30; /* RDMAP reserved bits */
    memcpy(e.scratch + h, d, 8);
    frame(&e, &s, e.scratch, h + 8);
    assert_int_equal(feed_buf(&e, &s), 0);
    shadow_put(&e, e.base[MR_W] + 8, d, 8);
    post_recv1(&e, 5, 0, 0);
    peer_send(&e, &s, UW__OP_SEND_SE, 0, NULL, 0, WHOLE);
    assert_int_equal(feed_buf(&e, &s), 0);
    uw_wc wc[2];
    assert_int_equal(poll_all(e.rcq, wc, 2), 1);
    assert_int_equal(wc[0].wr_id, 5);
    assert_int_equal(wc[0].byte_len, 0);
    assert_int_equal(wc[0].flags, UW_WC_SOLICITED);
    check_arena(&e);
    assert_false(e.qp->rd.dead);
    assert_int_equal(drain_tx(&e), 0);
    buf_free(&s);
    env_fini(&e);
}

/* ------------------------------------------------------------------------ */
/* IRD / ORD                                                                 */

/* RFC 5040: Reads beyond ORD wait in the send queue; each Response frees a
 * slot, and Reads complete in order. */
static void test_ord(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0009));
    for (uint16_t ord = 1; ord <= 3; ord++) {
        opts o = opts_default();
        o.ord = ord;
        env e;
        env_init(&e, &o, &rng);
        const int nreads = 6;
        for (int i = 0; i < nreads; i++) {
            uw_sge sg = {addr_of(&e, MR_L, (uint32_t)i * 64), 32, stag_of(&e, MR_L)};
            uw_send_wr w = {.wr_id = 100u + (uint64_t)i,
                            .opcode = UW_WR_RDMA_READ,
                            .flags = UW_SEND_SIGNALED,
                            .sg_list = &sg,
                            .num_sge = 1,
                            .remote_addr = 0x1000u + (uint64_t)i,
                            .rkey = 0x7700};
            post_send(&e, &w);
        }
        int sent = (int)drain_tx(&e);
        assert_int_equal(sent, ord);
        buf s = {0};
        int answered = 0;
        while (answered < nreads) {
            seg g = tx_seg(&e, (size_t)answered);
            assert_int_equal(g.op, UW__OP_READ_REQ);
            assert_int_equal(g.msn, answered + 1);
            uint8_t d[32];
            fill_rand(&e, d, 32);
            peer_tagged(&e, &s, UW__OP_READ_RESP, be32(g.pay), be64(g.pay + 4), d, 32, 32);
            assert_int_equal(feed_buf(&e, &s), 0);
            memcpy(e.shadow + (e.base[MR_L] + answered * 64 - e.arena), d, 32);
            answered++;
            uw_wc wc[4];
            assert_int_equal(poll_all(e.scq, wc, 4), 1);
            assert_int_equal(wc[0].wr_id, 100u + (uint64_t)answered - 1);
            assert_int_equal(wc[0].opcode, UW_WC_RDMA_READ);
            int more = (int)drain_tx(&e);
            /* One slot freed: one more Request, while any are left. */
            assert_int_equal(more, answered + ord <= nreads ? 1 : 0);
            assert_true((int)e.ntx - answered <= ord);
        }
        check_arena(&e);
        buf_free(&s);
        env_fini(&e);
    }
}

/* IRD: up to IRD Read Requests may be outstanding; each fully transmitted
 * Response frees a slot, so a peer that respects IRD never sees an error. */
static void test_ird(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED000A));
    for (uint16_t ird = 1; ird <= 4; ird++) {
        opts o = opts_default();
        o.ird = ird;
        o.mulpdu = 200;
        env e;
        env_init(&e, &o, &rng);
        buf s = {0};
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < ird; i++)
                peer_read_req(&e, &s, 0x100, 0, 500, stag_of(&e, MR_R), addr_of(&e, MR_R, 0));
            assert_int_equal(feed_buf(&e, &s), 0);
            drain_tx(&e);
        }
        assert_false(e.qp->rd.dead);
        /* One more than IRD without draining: the peer's error. */
        for (int i = 0; i <= ird; i++)
            peer_read_req(&e, &s, 0x100, 0, 500, stag_of(&e, MR_R), addr_of(&e, MR_R, 0));
        assert_true(feed_buf(&e, &s) < 0);
        /* The Terminate goes out ahead of the Responses not yet built. */
        expect_term(&e, 0, 2, 7, e.last_ul.d, e.last_ul.n, true);
        buf_free(&s);
        env_fini(&e);
    }
}

/* ------------------------------------------------------------------------ */
/* Transmit segmentation                                                     */

typedef struct txmsg {
    int opcode;
    bool se;
    uint32_t len, rkey, inv;
    uint64_t raddr;
    uint8_t *data; /* the octets of the scatter list, concatenated */
} txmsg;

static void tx_property(opts o, tu_rng *rng)
{
    env e;
    env_init(&e, &o, rng);
    /* Source data anywhere in MR_R, MR_W or MR_L. */
    enum { N = 40 };
    txmsg m[N];
    int nreads = 0;
    for (int i = 0; i < N; i++) {
        int kind = (int)tu_rng_below(rng, 4);
        txmsg *q = &m[i];
        memset(q, 0, sizeof(*q));
        q->opcode = kind == 0   ? UW_WR_SEND
                    : kind == 1 ? UW_WR_SEND_WITH_INV
                    : kind == 2 ? UW_WR_RDMA_WRITE
                                : UW_WR_RDMA_READ;
        if (q->opcode == UW_WR_RDMA_READ && nreads >= o.ord)
            q->opcode = UW_WR_SEND;
        uw_sge sg[3];
        int nsg = q->opcode == UW_WR_RDMA_READ ? 1 : (int)tu_rng_below(rng, 4);
        for (int k = 0; k < nsg; k++) {
            int mr = q->opcode == UW_WR_RDMA_READ ? MR_L : (int)tu_rng_below(rng, 3);
            uint32_t len = (uint32_t)tu_rng_below(rng, tu_rng_below(rng, 3) ? 1500 : 9000);
            uint32_t off = (uint32_t)tu_rng_below(rng, mrdef[mr].len - len + 1);
            sg[k] = (uw_sge){addr_of(&e, mr, off), len, stag_of(&e, mr)};
            q->len += len;
        }
        q->data = malloc(q->len + 1);
        size_t at = 0;
        for (int k = 0; k < nsg; k++) {
            memcpy(q->data + at, (const void *)(uintptr_t)sg[k].addr, sg[k].length);
            at += sg[k].length;
        }
        q->se = tu_rng_below(rng, 2);
        q->rkey = (uint32_t)tu_rng_next(rng);
        q->inv = (uint32_t)tu_rng_next(rng);
        q->raddr = tu_rng_next(rng) >> 1;
        uw_send_wr w = {.wr_id = (uint64_t)i,
                        .opcode = q->opcode,
                        .flags = UW_SEND_SIGNALED | (q->se ? UW_SEND_SOLICITED : 0),
                        .sg_list = sg,
                        .num_sge = nsg,
                        .remote_addr = q->raddr,
                        .rkey = q->rkey,
                        .invalidate_stag = q->inv};
        post_send(&e, &w);
        if (q->opcode == UW_WR_RDMA_READ)
            nreads++;
    }
    drain_tx(&e);
    /* Walk the segments message by message. */
    size_t k = 0;
    uint32_t msn_send = 1, msn_read = 1;
    buf s = {0};
    for (int i = 0; i < N; i++) {
        txmsg *q = &m[i];
        if (q->opcode == UW_WR_RDMA_READ) {
            seg g = tx_seg(&e, k++);
            assert_false(g.tagged);
            assert_true(g.last);
            assert_int_equal(g.op, UW__OP_READ_REQ);
            assert_int_equal(g.qn, 1);
            assert_int_equal(g.msn, msn_read++);
            assert_int_equal(g.mo, 0);
            assert_int_equal(g.stag, 0);
            assert_int_equal(g.plen, 28);
            assert_int_equal(be32(g.pay + 12), q->len);
            assert_int_equal(be32(g.pay + 16), q->rkey);
            assert_true(be64(g.pay + 20) == q->raddr);
            continue;
        }
        bool tagged = q->opcode == UW_WR_RDMA_WRITE;
        uint32_t msn = tagged ? 0 : msn_send++;
        uint8_t want_op = tagged ? UW__OP_WRITE
                          : q->opcode == UW_WR_SEND_WITH_INV
                              ? (q->se ? UW__OP_SEND_SE_INV : UW__OP_SEND_INV)
                              : (q->se ? UW__OP_SEND_SE : UW__OP_SEND);
        uint32_t off = 0;
        for (;;) {
            seg g = tx_seg(&e, k++);
            /* RFC 5041 5.2: every segment fits the MULPDU. */
            assert_true(g.len <= o.mulpdu);
            assert_int_equal(g.tagged, tagged);
            assert_int_equal(g.op, want_op);
            if (tagged) {
                assert_int_equal(g.stag, q->rkey);
                assert_true(g.to == q->raddr + off);
            } else {
                assert_int_equal(g.qn, 0);
                assert_int_equal(g.msn, msn);
                assert_int_equal(g.mo, off);
                assert_int_equal(g.stag, q->opcode == UW_WR_SEND_WITH_INV ? q->inv : 0);
            }
            assert_true(off + g.plen <= q->len);
            assert_memory_equal(g.pay, q->data + off, g.plen);
            off += (uint32_t)g.plen;
            /* L on the last segment only; no empty segment except a
             * zero-length message. */
            if (g.last)
                break;
            assert_true(g.plen > 0);
        }
        assert_int_equal(off, q->len);
    }
    assert_int_equal(k, e.ntx);
    /* Answer the Reads so that everything completes, in posting order. */
    for (size_t i = 0; i < e.ntx; i++) {
        seg g = tx_seg(&e, i);
        if (g.op != UW__OP_READ_REQ)
            continue;
        uint32_t len = be32(g.pay + 12);
        uint8_t *d = malloc(len + 1);
        fill_rand(&e, d, len);
        peer_tagged(&e, &s, UW__OP_READ_RESP, be32(g.pay), be64(g.pay + 4), d, len, 1000);
        assert_int_equal(feed_buf(&e, &s), 0);
        if (len)
            shadow_put(&e, (uint8_t *)(uintptr_t)be64(g.pay + 4), d, len);
        free(d);
    }
    check_arena(&e);
    uw_wc wc[N + 1];
    assert_int_equal(poll_all(e.scq, wc, N + 1), N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(wc[i].wr_id, i);
        assert_int_equal(wc[i].status, UW_WC_SUCCESS);
        int want = m[i].opcode == UW_WR_RDMA_WRITE  ? UW_WC_RDMA_WRITE
                   : m[i].opcode == UW_WR_RDMA_READ ? UW_WC_RDMA_READ
                                                    : UW_WC_SEND;
        assert_int_equal(wc[i].opcode, want);
        free(m[i].data);
    }
    buf_free(&s);
    env_fini(&e);
}

static void test_tx_segmentation(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED000B));
    for (int cfg = 0; cfg < 16; cfg++) {
        opts o = opts_default();
        o.crc = cfg & 1;
        o.markers_tx = cfg & 2;
        o.ord = (uint16_t)(1 + tu_rng_below(&rng, 8));
        static const uint32_t mul[] = {128, 1448, 9000, 64768};
        o.mulpdu = cfg & 4 ? mul[(cfg >> 3) * 2 + (int)tu_rng_below(&rng, 2)]
                           : 128 + (uint32_t)tu_rng_below(&rng, 3000);
        if (cfg & 8)
            o.tx_pos = 0u - 1024u - 4u * (uint32_t)tu_rng_below(&rng, 256);
        tx_property(o, &rng);
    }
}

/* Without markers each FPDU costs the kernel two iovecs plus one: the
 * length and headers lead, and a frame's pad and CRC sit right before the
 * next frame's length and headers, so the gather joins them. More than 8
 * iovecs per 64 KiB message made the kernel allocate for every sendmsg. */
static void test_tx_iov_joined(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0010));
    opts o = opts_default(); /* MULPDU 1448: 1,434 octets of Write payload */
    env e;
    env_init(&e, &o, &rng);
    for (int i = 0; i < 3; i++) {
        uw_sge sg = {addr_of(&e, MR_L, (uint32_t)i * 4000), 4000, stag_of(&e, MR_L)};
        uw_send_wr w = {.wr_id = (uint64_t)i,
                        .opcode = UW_WR_RDMA_WRITE,
                        .sg_list = &sg,
                        .num_sge = 1,
                        .remote_addr = 0x1000,
                        .rkey = 0x1234};
        post_send(&e, &w);
    }
    struct iovec iov[64];
    int k = uw__qp_tx_iov(e.qp, iov, 64);
    /* 3 Writes of 4,000 octets: 1,434 + 1,434 + 1,132, then, each time, one
     * FPDU cut to end on the segment grid (RFC 5044 5.1; a full FPDU, 1,456
     * octets, is one step): 3, 4 and 4 FPDUs. */
    assert_int_equal(k, 1 + 2 * 11);
    assert_int_equal(iov[0].iov_len, 2 + UW__DDP_TAGGED_HLEN);
    /* pad and CRC, then the next length and header */
    assert_int_equal(iov[2].iov_len, uw__mpa_pad(1448) + 4 + 2 + UW__DDP_TAGGED_HLEN);
    /* The octets are still whole FPDUs, taken a random part at a time. */
    assert_int_equal(drain_tx(&e), 11);
    /* Every FPDU starts on the grid but the one after a message's short
     * last FPDU, which ends on it. */
    const uint32_t step = 2 + 1448 + 2 + 4; /* length, ULPDU, pad, CRC */
    uint32_t at = 0;
    bool after_short = false;
    for (size_t i = 0; i < 11; i++) {
        size_t n;
        (void)txul(&e, i, &n);
        uint32_t wire = 2 + (uint32_t)n + uw__mpa_pad((uint32_t)n) + 4;
        if (!after_short)
            assert_int_equal(at % step, 0);
        else
            assert_int_equal((at + wire) % step, 0);
        after_short = wire != step && at % step == 0;
        at += wire;
    }
    env_fini(&e);
}

/* The I/O layer reports a write that finds the kernel's send queue empty:
 * the kernel cuts segments from there, so the next FPDU is full-sized. */
static void test_tx_regrid(void **st)
{
    (void)st;
    tu_rng rng;
    tu_rng_init(&rng, tu_seed(0x5EED0011));
    opts o = opts_default(); /* MULPDU 1448 */
    env e;
    env_init(&e, &o, &rng);
    uw_sge sg = {addr_of(&e, MR_L, 0), 2000, stag_of(&e, MR_L)};
    uw_send_wr w = {.opcode = UW_WR_RDMA_WRITE,
                    .sg_list = &sg,
                    .num_sge = 1,
                    .remote_addr = 0x1000,
                    .rkey = 0x1234};
    assert_false(uw__rd_tx_offgrid(&e.qp->rd)); /* nothing sent yet */
    post_send(&e, &w);
    assert_int_equal(drain_tx(&e), 2); /* 1,434 + 566 */
    assert_true(uw__rd_tx_offgrid(&e.qp->rd));
    uw__rd_tx_regrid(&e.qp->rd);
    assert_false(uw__rd_tx_offgrid(&e.qp->rd));
    post_send(&e, &w);
    assert_int_equal(drain_tx(&e), 2); /* 1,434 + 566 again, not cut */
    size_t n;
    (void)txul(&e, 2, &n);
    assert_int_equal(n, UW__DDP_TAGGED_HLEN + 1434);
    env_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_placement_property),
        cmocka_unit_test(test_receive_checks),
        cmocka_unit_test(test_crc_bit_flips),
        cmocka_unit_test(test_marker_steady_state),
        cmocka_unit_test(test_terminate_received),
        cmocka_unit_test(test_terminate_before_rtr),
        cmocka_unit_test(test_rtr_responder),
        cmocka_unit_test(test_responder_waits_for_first_fpdu),
        cmocka_unit_test(test_rtr_wrong_first),
        cmocka_unit_test(test_rtr_initiator),
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_ord),
        cmocka_unit_test(test_ird),
        cmocka_unit_test(test_tx_segmentation),
        cmocka_unit_test(test_tx_iov_joined),
        cmocka_unit_test(test_tx_regrid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
