/* Write Zcopy (draft-pinkerton-iwarp-sdp-01 9.3, 9.5.1, 9.5.5, 11.3) and the
 * mode changes (12) between two SDP cores in memory (sdp_pair.h). The
 * harness stands for the verbs layer: the Data Sink's registrations are a
 * table, valid from zsink() until the RdmaWrCompl's Invalidate or the end
 * zsink_poll() reports, and an RDMA Write copies into one only while it is
 * valid, so a Write after the transfer ended fails the test. */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "sdp_zreg.h"
#include "testutil.h"

#define KIB 1024u

static void setup(sp_pair *p)
{
    uw_sdp_conn_cfg a, b;
    uw__sdp_conn_cfg_default(&a, false);
    uw__sdp_conn_cfg_default(&b, true);
    a.zcopy_sink = b.zcopy_sink = true;
    reg_reset();
    assert_int_equal(sp_setup_tap(p, &a, &b, reg_tap, NULL), 0);
}

/* a's send half to Pipelined (12.3), delivered. */
static void to_pipe(sp_pair *p)
{
    assert_int_equal(uw__sdp_conn_set_mode(p->s[0].c, UW_SDP_PIPE_MODE), 0);
    sp_settle(p);
    uw_sdp_stats sa, sb;
    uw__sdp_conn_stats(p->s[0].c, &sa);
    uw__sdp_conn_stats(p->s[1].c, &sb);
    assert_int_equal(sa.tx_mode, UW_SDP_PIPE_MODE);
    assert_int_equal(sb.rx_mode, UW_SDP_PIPE_MODE);
}

/* The sink advertises a buffer of len (registered in the table). */
static zreg *zk_start(sp_side *x, uint32_t len, int expect)
{
    zreg *r = reg_new(len);
    assert_non_null(r);
    uw_sdp_zsink z = {.addr = r->addr, .len = len, .stag = r->stag, .va = r->va};
    assert_int_equal(uw__sdp_conn_zsink(x->c, &z), expect);
    sp_drain_tx(x);
    if (expect) {
        reg_drop(r);
        return NULL;
    }
    return r;
}

/* zsink_poll; at the end the driver revokes the STag. The buffer is kept
 * for the test to look at (zk_free). */
static int zk_poll(sp_side *x, zreg *r, uw_sdp_zsink_res *res)
{
    int rc = uw__sdp_conn_zsink_poll(x->c, res);
    if (rc != 0)
        r->valid = false;
    return rc;
}

/* The source's zwrite of len octets from src, and the RDMA Write as the
 * sink's engine would place it. Returns the Write's placement result. */
static int do_zwrite(sp_side *x, const uint8_t *src, uint32_t len)
{
    uw_sdp_zwrite wr;
    int rc = uw__sdp_conn_zwrite(x->c, len, &wr);
    if (rc < 0)
        return rc;
    zreg *r = reg_find(wr.stag);
    int out = 0;
    if (!r || !r->valid || wr.to < r->va || wr.to + wr.len > r->va + r->len)
        out = UW_ERDMAP_STAG;
    else
        memcpy(r->addr + (wr.to - r->va), src, wr.len);
    uw__sdp_conn_zwrite_done(x->c, out == 0);
    sp_drain_tx(x); /* the RdmaWrCompl, after the Write */
    return out;
}

/* The next MSeq x expects and the newest it may see acknowledged. */
static uint32_t next_in(const sp_side *x)
{
    uw_sdp_stats s;
    uw__sdp_conn_stats(x->c, &s);
    return (uint32_t)s.msgs_received + 1;
}

static uint32_t acked(const sp_side *x)
{
    uw_sdp_stats s;
    uw__sdp_conn_stats(x->c, &s);
    return (uint32_t)s.msgs_sent;
}

static uint32_t build_sinkavail(uint8_t *out, uint32_t mseq, uint32_t ack, uint32_t len,
                                uint32_t stag, uint32_t nd)
{
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    m.bsdh.mid = UW_SDP_SINKAVAIL;
    m.bsdh.bufs = 16;
    m.bsdh.mseq = mseq;
    m.bsdh.mseqack = ack;
    m.bsdh.len = UW_SDP_BSDH_LEN + UW_SDP_SINKAH_LEN;
    m.u.avail.len = len;
    m.u.avail.stag = stag;
    m.u.avail.va = 0x2000;
    m.u.avail.non_discards = nd;
    if (uw__sdp_encode_hdr(&m, out, 64) < 0)
        abort();
    return m.bsdh.len;
}

/* ---- Modes (12) ------------------------------------------------------------ */

static void test_modes(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    /* The current mode: no message at all (12). */
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_COMB_MODE), 0);
    assert_int_equal(a->out_n, 0);
    /* Combined to Pipelined: S=0, Mode 2 (12.3). */
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_PIPE_MODE), 0);
    sp_drain_tx(a);
    assert_int_equal(a->out_n, 1);
    const uint8_t *w = a->out[a->out_head].data;
    assert_int_equal(w[0], UW_SDP_MODECHANGE);
    assert_int_equal(w[16] >> 4, 0x0 | UW_SDP_PIPE_MODE); /* S=0, Mode=2 */
    sp_settle(&p);
    uw_sdp_stats s;
    uw__sdp_conn_stats(b->c, &s);
    assert_int_equal(s.rx_mode, UW_SDP_PIPE_MODE);
    /* Figure 26: Pipelined to Buffered only by way of Combined. */
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_BUFF_MODE), UW_EINVAL);
    /* Pipelined to Combined; the next move waits for the acknowledgement
     * of that ModeChange (12.4). */
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_COMB_MODE), 0);
    sp_drain_tx(a);
    assert_int_equal(a->last_mid, UW_SDP_MODECHANGE);
    unsigned before = a->sent_msgs;
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_BUFF_MODE), 0);
    sp_drain_tx(a);
    assert_int_equal(a->sent_msgs, before); /* held */
    /* b acknowledges with its next message (a Data message here). */
    assert_int_equal(sp_deliver1(a, b), true);
    assert_int_equal(sp_send(b, "ack", 3, 0), 3);
    sp_settle(&p);
    uw__sdp_conn_stats(a->c, &s);
    assert_int_equal(s.tx_mode, UW_SDP_BUFF_MODE);
    uw__sdp_conn_stats(b->c, &s);
    assert_int_equal(s.rx_mode, UW_SDP_BUFF_MODE);
    /* In Buffered the sink masters (Figure 27): a cannot leave it... */
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_COMB_MODE), UW_EPERM);
    uint8_t big[8192] = {0};
    uw_sdp_zsrc z = {.addr = big, .len = sizeof(big), .stag = 1, .va = 0};
    assert_int_equal(uw__sdp_conn_zsend(a->c, &z), UW_EPERM);
    /* ...b brings it back with S=1 (12.2). */
    assert_int_equal(uw__sdp_conn_rx_combined(a->c), UW_EPERM);
    assert_int_equal(uw__sdp_conn_rx_combined(b->c), 0);
    sp_drain_tx(b);
    w = b->out[(b->out_head + b->out_n - 1) % SP_MAXQ].data;
    assert_int_equal(w[0], UW_SDP_MODECHANGE);
    assert_int_equal(w[16] >> 4, 0x8 | UW_SDP_COMB_MODE); /* S=1, Mode=1 */
    sp_settle(&p);
    uw__sdp_conn_stats(a->c, &s);
    assert_int_equal(s.tx_mode, UW_SDP_COMB_MODE);
    assert_int_equal(s.mode_changes, 3);
    assert_int_equal(a->rc, 0);
    assert_int_equal(b->rc, 0);
    sp_free(&p);
}

/* 12.1: Combined to Buffered waits until the SrcAvail is Processed. */
static void test_buffered_waits_srcavail(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    static uint8_t src[64 * KIB], dst[64 * KIB];
    fill_pattern(src, sizeof(src), 3);
    uw_sdp_zsrc z = {.addr = src, .len = sizeof(src), .stag = 0x77, .va = 0};
    assert_int_equal(uw__sdp_conn_zsend(a->c, &z), 0);
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_BUFF_MODE), 0);
    sp_settle(&p);
    uw_sdp_stats s;
    uw__sdp_conn_stats(a->c, &s);
    assert_int_equal(s.tx_mode, UW_SDP_COMB_MODE); /* not yet */
    /* b refuses the Read: SendSm Processes the SrcAvail, then the move. */
    assert_int_equal(sp_recv(b, dst, sizeof(dst), 0), UW_SDP_SRCAVAIL_PAYLOAD);
    assert_int_equal(uw__sdp_conn_force_bcopy(b->c), 0);
    sp_drain_tx(b);
    sp_settle(&p);
    size_t got = UW_SDP_SRCAVAIL_PAYLOAD;
    for (int i = 0; i < 100 && got < sizeof(dst); i++) {
        long n = sp_recv(b, dst + got, sizeof(dst) - got, 0);
        if (n > 0)
            got += (size_t)n;
        sp_settle(&p);
    }
    assert_int_equal(got, sizeof(dst));
    assert_memory_equal(dst, src, sizeof(src));
    uint64_t sent;
    assert_int_equal(uw__sdp_conn_zsend_poll(a->c, &sent), 1);
    uw__sdp_conn_stats(a->c, &s);
    assert_int_equal(s.tx_mode, UW_SDP_BUFF_MODE);
    assert_int_equal(a->rc, 0);
    assert_int_equal(b->rc, 0);
    sp_free(&p);
}

/* ---- Write Zcopy (9.3) -------------------------------------------------------- */

static void test_write(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    static uint8_t src[600 * KIB];
    fill_pattern(src, sizeof(src), 9);
    /* Not before the receive half is Pipelined (Figure 25). */
    assert_null(zk_start(b, 512 * KIB, UW_EPERM));
    to_pipe(&p);
    uw_sdp_params bp;
    assert_int_equal(uw__sdp_conn_params(b->c, &bp), 0);
    /* 9.5.1: only buffers larger than a receive Private Buffer. */
    assert_null(zk_start(b, bp.local_rcv_size, UW_EINVAL));
    zreg *r = zk_start(b, 512 * KIB, 0);
    assert_null(zk_start(b, 512 * KIB, UW_EAGAIN)); /* one at a time */
    assert_int_equal(b->last_mid, UW_SDP_SINKAVAIL);
    const uint8_t *w = b->out[(b->out_head + b->out_n - 1) % SP_MAXQ].data;
    assert_int_equal(be32(w + 16), 512 * KIB);       /* Len */
    assert_int_equal(be32(w + 20), r->stag);         /* STag */
    assert_int_equal(be32(w + 28), (uint32_t)r->va); /* VA (0-31) */
    assert_int_equal(be32(w + 32), 0);               /* NonDiscards */
    uw_sdp_zsink_res res;
    assert_int_equal(zk_poll(b, r, &res), 0);
    sp_settle(&p);
    assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 512 * KIB);
    /* A 200 KiB send fills it partly and completes it (9.3 step 3). */
    assert_int_equal(uw__sdp_conn_zwrite(a->c, 512 * KIB + 1, &(uw_sdp_zwrite){0}), UW_EINVAL);
    assert_int_equal(do_zwrite(a, src, 200 * KIB), 0);
    assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 0);
    assert_int_equal(a->last_mid, UW_SDP_RDMAWRCOMPL);
    w = a->out[(a->out_head + a->out_n - 1) % SP_MAXQ].data;
    assert_int_equal(be32(w + 16), 200 * KIB);
    assert_true(a->out[(a->out_head + a->out_n - 1) % SP_MAXQ].inv);
    sp_settle(&p);
    assert_true(uw__sdp_conn_poll(b->c) & POLLIN);
    assert_int_equal(zk_poll(b, r, &res), 1);
    assert_int_equal(res.placed, 200 * KIB);
    assert_int_equal(res.bcopy, 0);
    assert_memory_equal(r->addr, src, 200 * KIB);
    assert_int_equal(invalidations, 1);
    assert_int_equal(bad_invalidations, 0);
    reg_drop(r);
    /* The next one takes the rest; the one after that meets Bcopy data. */
    r = zk_start(b, 512 * KIB, 0);
    sp_settle(&p);
    assert_int_equal(do_zwrite(a, src + 200 * KIB, 400 * KIB), 0);
    assert_int_equal(sp_send(a, "tail", 4, 0), 4);
    sp_settle(&p);
    assert_int_equal(zk_poll(b, r, &res), 1);
    assert_int_equal(res.placed, 400 * KIB);
    assert_memory_equal(r->addr, src + 200 * KIB, 400 * KIB);
    reg_drop(r);
    char t[8];
    assert_int_equal(sp_recv(b, t, sizeof(t), 0), 4);
    assert_memory_equal(t, "tail", 4);
    uw_sdp_stats sa, sb;
    uw__sdp_conn_stats(a->c, &sa);
    uw__sdp_conn_stats(b->c, &sb);
    assert_int_equal(sa.rdma_write_bytes, 600 * KIB);
    assert_int_equal(sa.rdmawrcompl_sent, 2);
    assert_int_equal(sa.sinkavail_received, 2);
    assert_int_equal(sa.sent, 600 * KIB + 4);
    assert_int_equal(sb.sinkavail_sent, 2);
    assert_int_equal(sb.rdmawrcompl_received, 2);
    assert_int_equal(sb.received, 600 * KIB + 4);
    assert_int_equal(a->rc, 0);
    assert_int_equal(b->rc, 0);
    sp_free(&p);
}

/* 9.5.1 rule 1: a Data message crossing the SinkAvail completes it with its
 * payload alone; both counters stay in step, so the next one is current. */
static void test_stale_crossing(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    to_pipe(&p);
    static uint8_t src[256 * KIB];
    fill_pattern(src, sizeof(src), 5);
    zreg *r = zk_start(b, 256 * KIB, 0);
    assert_int_equal(sp_send(a, "first", 5, 0), 5);
    assert_int_equal(sp_send(a, "second", 6, 0), 6); /* Nagle: one message */
    sp_settle(&p);
    uw_sdp_zsink_res res;
    assert_int_equal(zk_poll(b, r, &res), 1);
    assert_int_equal(res.placed, 0);
    assert_true(res.bcopy >= 5);
    reg_drop(r);
    char t[16];
    assert_int_equal(sp_recv(b, t, res.bcopy, 0), res.bcopy);
    while (res.bcopy < 11) {
        long n = sp_recv(b, t + res.bcopy, sizeof(t) - res.bcopy, 0);
        assert_true(n > 0);
        res.bcopy += (uint32_t)n;
    }
    assert_memory_equal(t, "firstsecond", 11);
    uw_sdp_stats sa;
    uw__sdp_conn_stats(a->c, &sa);
    assert_int_equal(sa.sinkavail_stale, 1);
    /* In step again: the next SinkAvail is used. */
    r = zk_start(b, 256 * KIB, 0);
    sp_settle(&p);
    assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 256 * KIB);
    assert_int_equal(do_zwrite(a, src, 256 * KIB), 0);
    sp_settle(&p);
    assert_int_equal(zk_poll(b, r, &res), 1);
    assert_int_equal(res.placed, 256 * KIB);
    assert_memory_equal(r->addr, src, 256 * KIB);
    reg_drop(r);
    assert_int_equal(a->rc, 0);
    assert_int_equal(b->rc, 0);
    sp_free(&p);
}

/* 9.5.2.2: the source holds a current SinkAvail and sends Bcopy data anyway;
 * that message consumes it at the sink, and the one after is current (no
 * cascade of stale advertisements). */
static void test_source_forces_bcopy(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    to_pipe(&p);
    for (int round = 0; round < 3; round++) {
        zreg *r = zk_start(b, 128 * KIB, 0);
        sp_settle(&p);
        assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 128 * KIB);
        assert_int_equal(sp_send(a, "small", 5, 0), 5);
        sp_settle(&p);
        assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 0);
        uw_sdp_zsink_res res;
        assert_int_equal(zk_poll(b, r, &res), 1);
        assert_int_equal(res.bcopy, 5);
        reg_drop(r);
        char t[8];
        assert_int_equal(sp_recv(b, t, 5, 0), 5);
    }
    uw_sdp_stats sa;
    uw__sdp_conn_stats(a->c, &sa);
    assert_int_equal(sa.sinkavail_stale, 0);
    zreg *r = zk_start(b, 128 * KIB, 0);
    sp_settle(&p);
    assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 128 * KIB);
    reg_drop(r);
    sp_free(&p);
}

/* 9.5.1's example: PotentialNonDiscards 2, three SinkAvails with
 * NonDiscards 0: the first two are stale, RDMA goes to the third. */
static void test_three_adverts(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    to_pipe(&p);
    assert_int_equal(sp_send(a, "one", 3, 0), 3);
    sp_settle(&p);
    assert_int_equal(sp_send(a, "two", 3, 0), 3);
    sp_settle(&p);
    char t[8];
    assert_int_equal(sp_recv(b, t, 8, 0), 6);
    uint8_t m[64];
    for (uint32_t i = 0; i < 3; i++) {
        uint32_t n = build_sinkavail(m, next_in(a), acked(a), 100 * KIB, 0x900 + i, 0);
        assert_int_equal(sp_inject(a, m, n), 0);
    }
    uw_sdp_stats sa;
    uw__sdp_conn_stats(a->c, &sa);
    assert_int_equal(sa.sinkavail_stale, 2);
    uw_sdp_zwrite wr;
    assert_int_equal(uw__sdp_conn_zwrite(a->c, 10, &wr), 0);
    assert_int_equal(wr.stag, 0x902);
    assert_int_equal(a->rc, 0);
    sp_free(&p);
}

/* 9.5.5: SinkAvailCancel; the source drops its unused SinkAvail and answers
 * with one SinkCancelAck. A cancel that meets a Write already reported is
 * ignored, and the RdmaWrCompl Processes it. */
static void test_cancel(void **st)
{
    (void)st;
    for (int k = 0; k < 2; k++) {
        sp_pair p;
        setup(&p);
        sp_side *a = &p.s[0], *b = &p.s[1];
        to_pipe(&p);
        static uint8_t src[64 * KIB];
        fill_pattern(src, sizeof(src), 11);
        zreg *r = zk_start(b, 256 * KIB, 0);
        sp_settle(&p);
        if (k == 1)
            assert_int_equal(do_zwrite(a, src, sizeof(src)), 0);
        assert_int_equal(uw__sdp_conn_zsink_cancel(b->c), 0);
        assert_int_equal(uw__sdp_conn_zsink_cancel(b->c), UW_EAGAIN);
        sp_drain_tx(b);
        assert_int_equal(b->last_mid, UW_SDP_SINKAVAILCANCEL);
        uw_sdp_zsink_res res;
        assert_int_equal(zk_poll(b, r, &res), 0); /* until Processed */
        sp_settle(&p);
        assert_int_equal(zk_poll(b, r, &res), 1);
        uw_sdp_stats sa;
        uw__sdp_conn_stats(a->c, &sa);
        if (k == 0) {
            assert_int_equal(a->last_mid, UW_SDP_SINKCANCELACK);
            assert_int_equal(res.placed, 0);
            assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 0);
        } else {
            assert_int_equal(res.placed, sizeof(src));
            assert_memory_equal(r->addr, src, sizeof(src));
        }
        assert_int_equal(sa.cancels_received, 1);
        reg_drop(r);
        /* The stream goes on. */
        assert_int_equal(sp_send(a, "go", 2, 0), 2);
        sp_settle(&p);
        char t[4];
        assert_int_equal(sp_recv(b, t, 4, 0), 2);
        assert_int_equal(a->rc, 0);
        assert_int_equal(b->rc, 0);
        sp_free(&p);
    }
}

/* 11.3: our SrcAvail (no payload in Pipelined Mode) and the sink's SinkAvail
 * cross: the sink ignores the SrcAvail, the source's send ends with nothing
 * taken, and Writes the data instead. */
static void test_crossing(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    to_pipe(&p);
    static uint8_t src[300 * KIB];
    fill_pattern(src, sizeof(src), 13);
    uw_sdp_zsrc z = {.addr = src, .len = sizeof(src), .stag = 0x4444, .va = 0x10};
    assert_int_equal(uw__sdp_conn_zsend(a->c, &z), 0);
    sp_drain_tx(a);
    const uint8_t *w = a->out[(a->out_head + a->out_n - 1) % SP_MAXQ].data;
    assert_int_equal(w[0], UW_SDP_SRCAVAIL);
    assert_int_equal(be32(w + 4), UW_SDP_BSDH_LEN + UW_SDP_SRCAH_LEN); /* no payload */
    zreg *r = zk_start(b, 512 * KIB, 0);
    sp_settle(&p);
    uint64_t sent = 1;
    assert_int_equal(uw__sdp_conn_zsend_poll(a->c, &sent), 1);
    assert_int_equal(sent, 0);
    assert_int_equal(uw__sdp_conn_zavail(b->c), 0); /* the SrcAvail was ignored */
    assert_int_equal(do_zwrite(a, src, sizeof(src)), 0);
    sp_settle(&p);
    uw_sdp_zsink_res res;
    assert_int_equal(zk_poll(b, r, &res), 1);
    assert_int_equal(res.placed, sizeof(src));
    assert_memory_equal(r->addr, src, sizeof(src));
    reg_drop(r);
    assert_int_equal(a->rc, 0);
    assert_int_equal(b->rc, 0);
    sp_free(&p);
}

/* 12.4 / Figures 28-29: the move back to Combined discards the SinkAvail at
 * both ends; one still in flight is ignored until the ModeChange is acked,
 * and is a violation after that. */
static void test_pipe_to_comb(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    to_pipe(&p);
    zreg *r = zk_start(b, 256 * KIB, 0);
    sp_settle(&p);
    assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 256 * KIB);
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_COMB_MODE), 0);
    sp_drain_tx(a);
    assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 0); /* discarded */
    sp_settle(&p);
    uw_sdp_zsink_res res;
    assert_int_equal(zk_poll(b, r, &res), 1);
    assert_int_equal(res.placed + res.bcopy, 0);
    reg_drop(r);
    uw_sdp_stats sb;
    uw__sdp_conn_stats(b->c, &sb);
    assert_int_equal(sb.rx_mode, UW_SDP_COMB_MODE);
    assert_null(zk_start(b, 256 * KIB, UW_EPERM));
    /* Back to Pipelined once b acknowledged the ModeChange. */
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_PIPE_MODE), 0);
    sp_drain_tx(a);
    uw_sdp_stats sa;
    uw__sdp_conn_stats(a->c, &sa);
    assert_int_equal(sa.tx_mode, UW_SDP_COMB_MODE);
    assert_int_equal(sp_send(b, "x", 1, 0), 1);
    sp_settle(&p);
    uw__sdp_conn_stats(a->c, &sa);
    assert_int_equal(sa.tx_mode, UW_SDP_PIPE_MODE);
    /* A SinkAvail crossing the ModeChange to Combined is ignored. */
    r = zk_start(b, 256 * KIB, 0);
    assert_int_equal(uw__sdp_conn_set_mode(a->c, UW_SDP_COMB_MODE), 0);
    sp_drain_tx(a);
    assert_true(sp_deliver1(b, a));
    assert_int_equal(a->rc, 0);
    assert_int_equal(uw__sdp_conn_zwrite_avail(a->c), 0);
    sp_settle(&p);
    assert_int_equal(zk_poll(b, r, &res), 1);
    assert_int_equal(res.placed + res.bcopy, 0);
    reg_drop(r);
    /* Acked now: a SinkAvail is a violation (Figure 25). */
    assert_int_equal(sp_send(b, "y", 1, 0), 1);
    sp_settle(&p);
    uint8_t m[64];
    uint32_t n = build_sinkavail(m, next_in(a), acked(a), 200 * KIB, 0x998, 0);
    assert_int_equal(sp_inject(a, m, n), UW_EPROTO);
    assert_int_equal(b->rc, 0);
    sp_free(&p);
}

/* REQ_PIPE (6.1.2): the sink's hint in its RdmaRdCompl reaches the source. */
static void test_req_pipe(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p);
    sp_side *a = &p.s[0], *b = &p.s[1];
    static uint8_t src[32 * KIB], dst[32 * KIB];
    uw_sdp_zsrc z = {.addr = src, .len = sizeof(src), .stag = 0x55, .va = 0};
    assert_int_equal(uw__sdp_conn_zsend(a->c, &z), 0);
    sp_settle(&p);
    uw__sdp_conn_want_pipe(b->c, true);
    assert_int_equal(sp_recv(b, dst, sizeof(dst), 0), UW_SDP_SRCAVAIL_PAYLOAD);
    uw_sdp_zread rd;
    assert_int_equal(uw__sdp_conn_zread(b->c, uw__sdp_conn_zavail(b->c), &rd), 0);
    uw__sdp_conn_zread_done(b->c, rd.len);
    sp_drain_tx(b);
    assert_int_equal(b->last_mid, UW_SDP_RDMARDCOMPL);
    assert_true(b->out[(b->out_head + b->out_n - 1) % SP_MAXQ].data[1] & UW_SDP_REQ_PIPE);
    assert_false(uw__sdp_conn_mode_hint(a->c));
    sp_settle(&p);
    assert_true(uw__sdp_conn_mode_hint(a->c));
    assert_int_equal(a->rc, 0);
    sp_free(&p);
}

static void test_violations(void **st)
{
    (void)st;
    uint8_t m[64];
    for (int k = 0; k < 6; k++) {
        sp_pair p;
        setup(&p);
        sp_side *a = &p.s[0], *b = &p.s[1];
        if (k != 0)
            to_pipe(&p);
        zreg *r = k >= 2 && k <= 4 ? zk_start(b, 256 * KIB, 0) : NULL;
        sp_settle(&p);
        int rc;
        switch (k) {
        case 0: /* SinkAvail to a Combined send half */
            rc = sp_inject(a, m, build_sinkavail(m, next_in(a), acked(a), 100 * KIB, 1, 0));
            break;
        case 1: /* RdmaWrCompl without a SinkAvail */
            rc = sp_inject(
                b, m, sp_build(m, UW_SDP_RDMAWRCOMPL, 0, 16, next_in(b), acked(b), 1, NULL, 0));
            break;
        case 2: /* Len beyond the buffer */
            rc = sp_inject(b, m,
                           sp_build(m, UW_SDP_RDMAWRCOMPL, 0, 16, next_in(b), acked(b),
                                    256 * KIB + 1, NULL, 0));
            break;
        case 3: /* Invalidate of another STag */
            rc = sp_inject_inv(
                b, m, sp_build(m, UW_SDP_RDMAWRCOMPL, 0, 16, next_in(b), acked(b), 10, NULL, 0),
                r->stag + 1);
            break;
        case 4: /* SinkCancelAck without a cancel */
            rc = sp_inject(
                b, m, sp_build(m, UW_SDP_SINKCANCELACK, 0, 16, next_in(b), acked(b), 0, NULL, 0));
            break;
        default: /* SinkAvail Len 0 */
            rc = sp_inject(a, m, build_sinkavail(m, next_in(a), acked(a), 0, 1, 0));
            break;
        }
        assert_int_equal(rc, UW_EPROTO);
        assert_non_null(uw__sdp_conn_why(k == 0 || k == 5 ? a->c : b->c));
        if (r) {
            uw_sdp_zsink_res res;
            assert_true(zk_poll(b, r, &res) < 0);
            reg_drop(r);
        }
        sp_free(&p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_modes),
        cmocka_unit_test(test_buffered_waits_srcavail),
        cmocka_unit_test(test_write),
        cmocka_unit_test(test_stale_crossing),
        cmocka_unit_test(test_source_forces_bcopy),
        cmocka_unit_test(test_three_adverts),
        cmocka_unit_test(test_cancel),
        cmocka_unit_test(test_crossing),
        cmocka_unit_test(test_pipe_to_comb),
        cmocka_unit_test(test_req_pipe),
        cmocka_unit_test(test_violations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
