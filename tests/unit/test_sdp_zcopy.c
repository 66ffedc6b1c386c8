/* Read Zcopy (draft-pinkerton-iwarp-sdp-01 9.2, 9.5.2.1, 11.2) between two
 * SDP cores in memory (sdp_pair.h). The harness stands for the verbs layer:
 * a table of the Data Source's registrations (valid from zsend until the
 * RdmaRdCompl that invalidates it or the end zsend_poll reports), and RDMA
 * Reads that copy from it when the test lets them complete, so a Read that
 * would touch a buffer after its transfer ended fails the test (and, since
 * buffers are freed at that moment, ASan too). */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "sdp_zreg.h"
#include "testutil.h"

#define MIB (1u << 20)
static void setup(sp_pair *p, bool zsink)
{
    uw_sdp_conn_cfg a, b;
    uw__sdp_conn_cfg_default(&a, false);
    uw__sdp_conn_cfg_default(&b, true);
    a.zcopy_sink = b.zcopy_sink = zsink;
    a.ird = a.ord = b.ird = b.ord = 4;
    reg_reset();
    assert_int_equal(sp_setup_tap(p, &a, &b, reg_tap, NULL), 0);
}

/* Starts a zero-copy send of a copy of src; the copy is the buffer the
 * harness "registered". */
static zreg *zs_start(sp_side *x, const uint8_t *src, uint32_t len, int expect)
{
    zreg *r = reg_new(len);
    assert_non_null(r);
    memcpy(r->addr, src, len);
    uw_sdp_zsrc z = {.addr = r->addr, .len = len, .stag = r->stag, .va = r->va};
    assert_int_equal(uw__sdp_conn_zsend(x->c, &z), expect);
    sp_drain_tx(x);
    if (expect) {
        reg_drop(r);
        return NULL;
    }
    return r;
}

/* zsend_poll; at the end the driver revokes the STag and the buffer goes. */
static int zs_poll(sp_side *x, zreg *r, uint64_t *sent)
{
    int rc = uw__sdp_conn_zsend_poll(x->c, sent);
    if (rc != 0) {
        free(r->addr);
        memset(r, 0, sizeof(*r));
    }
    return rc;
}

/* An RDMA Read as the peer's engine would serve it. */
static int64_t do_read(const uw_sdp_zread *rd, uint8_t *dst)
{
    zreg *r = reg_find(rd->stag);
    if (!r || !r->valid || rd->to < r->va || rd->to + rd->len > r->va + r->len)
        return UW_ERDMAP_STAG;
    memcpy(dst, r->addr + (rd->to - r->va), rd->len);
    return rd->len;
}

static void test_read_whole(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p, true);
    sp_side *a = &p.s[0], *b = &p.s[1];
    uint8_t *src = malloc(MIB), *dst = malloc(MIB);
    fill_pattern(src, MIB, 1);
    zreg *r = zs_start(a, src, MIB, 0);
    uint64_t sent = 99;
    assert_int_equal(uw__sdp_conn_zsend_poll(a->c, &sent), 0);
    assert_int_equal(sent, UW_SDP_SRCAVAIL_PAYLOAD); /* the SrcAvail went */
    /* Another writer waits: 11.2 allows no payload behind the SrcAvail. */
    assert_int_equal(sp_send(a, "x", 1, 0), UW_EAGAIN);
    assert_false(uw__sdp_conn_poll(a->c) & POLLOUT);
    sp_settle(&p);
    /* The SrcAvail's payload reads like data; the rest only by a Read. */
    assert_true(uw__sdp_conn_poll(b->c) & POLLIN);
    assert_int_equal(sp_recv(b, dst, MIB, 0), UW_SDP_SRCAVAIL_PAYLOAD);
    uint32_t rest = MIB - UW_SDP_SRCAVAIL_PAYLOAD;
    assert_int_equal(uw__sdp_conn_zavail(b->c), rest);
    assert_true(uw__sdp_conn_poll(b->c) & POLLIN);
    assert_int_equal(sp_recv(b, dst, MIB, 0), UW_EAGAIN);
    uw_sdp_zread rd;
    assert_int_equal(uw__sdp_conn_zread(b->c, rest + 1, &rd), UW_EINVAL);
    assert_int_equal(uw__sdp_conn_zread(b->c, rest, &rd), 0);
    assert_int_equal(rd.stag, r->stag);
    assert_true(rd.to == r->va + UW_SDP_SRCAVAIL_PAYLOAD); /* 9.2 step 2b */
    assert_int_equal(rd.len, rest);
    assert_int_equal(uw__sdp_conn_zavail(b->c), 0);
    assert_int_equal(uw__sdp_conn_zread_collect(b->c), UW_EAGAIN);
    assert_int_equal(uw__sdp_conn_force_bcopy(b->c), UW_EAGAIN);
    assert_int_equal(uw__sdp_conn_zread(b->c, 1, &rd), UW_EAGAIN);
    uw__sdp_conn_zread_done(b->c, do_read(&rd, dst + UW_SDP_SRCAVAIL_PAYLOAD));
    assert_int_equal(uw__sdp_conn_zread_collect(b->c), rest);
    assert_int_equal(uw__sdp_conn_zread_collect(b->c), 0);
    sp_drain_tx(b);
    sp_settle(&p);
    assert_memory_equal(dst, src, MIB);
    assert_int_equal(invalidations, 1);
    assert_int_equal(bad_invalidations, 0);
    assert_int_equal(zs_poll(a, r, &sent), 1);
    assert_int_equal(sent, MIB);
    assert_true(uw__sdp_conn_poll(a->c) & POLLOUT);
    uw_sdp_stats sa, sb;
    uw__sdp_conn_stats(a->c, &sa);
    uw__sdp_conn_stats(b->c, &sb);
    assert_int_equal(sa.srcavail_sent, 1);
    assert_int_equal(sa.rdmardcompl_received, 1);
    assert_int_equal(sa.zcopy_sent, rest);
    assert_int_equal(sa.bcopy_sent, UW_SDP_SRCAVAIL_PAYLOAD);
    assert_int_equal(sa.sent, MIB);
    assert_int_equal(sb.srcavail_received, 1);
    assert_int_equal(sb.rdmardcompl_sent, 1);
    assert_int_equal(sb.rdma_read_bytes, rest);
    assert_int_equal(sb.received, MIB);
    assert_int_equal(sb.sendsm_sent, 0);
    assert_int_equal(a->rc, 0);
    assert_int_equal(b->rc, 0);
    /* The stream goes on by Bcopy afterwards. */
    assert_int_equal(sp_send(a, "tail", 4, 0), 4);
    sp_settle(&p);
    assert_int_equal(sp_recv(b, dst, 16, 0), 4);
    assert_memory_equal(dst, "tail", 4);
    free(src);
    free(dst);
    sp_free(&p);
}

/* Several Reads, each reported by its own RdmaRdCompl (Len since the last
 * one), only the last one with Invalidate. */
static void test_read_in_parts(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p, true);
    sp_side *a = &p.s[0], *b = &p.s[1];
    uint8_t *src = malloc(MIB), *dst = malloc(MIB);
    fill_pattern(src, MIB, 2);
    zreg *r = zs_start(a, src, MIB, 0);
    sp_settle(&p);
    size_t got = (size_t)sp_recv(b, dst, MIB, 0);
    unsigned parts = 0;
    while (got < MIB) {
        uint32_t k = uw__sdp_conn_zavail(b->c);
        assert_true(k > 0);
        if (k > 300000)
            k = 300000;
        uw_sdp_zread rd;
        assert_int_equal(uw__sdp_conn_zread(b->c, k, &rd), 0);
        assert_true(rd.to == r->va + got);
        uw__sdp_conn_zread_done(b->c, do_read(&rd, dst + got));
        assert_int_equal(uw__sdp_conn_zread_collect(b->c), k);
        sp_drain_tx(b);
        /* The RdmaRdCompl of this part. */
        sp_msg *m = &b->out[(b->out_head + b->out_n - 1) % SP_MAXQ];
        assert_int_equal(m->data[0], UW_SDP_RDMARDCOMPL);
        assert_int_equal(be32(m->data + 16), k);
        assert_true(m->solicited);
        got += k;
        assert_int_equal(m->inv, got == MIB);
        uint64_t sent;
        sp_settle(&p);
        parts++;
        if (got < MIB) {
            assert_int_equal(uw__sdp_conn_zsend_poll(a->c, &sent), 0);
            assert_int_equal(sent, got);
        } else {
            assert_int_equal(zs_poll(a, r, &sent), 1);
        }
    }
    assert_int_equal(parts, 4);
    assert_memory_equal(dst, src, MIB);
    assert_int_equal(invalidations, 1);
    free(src);
    free(dst);
    sp_free(&p);
}

/* Reads the stream of b until n octets arrived, settling as it goes. */
static size_t read_all(sp_pair *p, sp_side *b, uint8_t *dst, size_t n)
{
    size_t got = 0;
    for (int guard = 0; got < n && guard < 100000; guard++) {
        sp_settle(p);
        long k = sp_recv(b, dst + got, n - got, 0);
        if (k > 0)
            got += (size_t)k;
    }
    sp_settle(p);
    return got;
}

/* 9.5.2.1: the sink refuses (SendSm), or takes a part and then refuses; the
 * rest comes by Bcopy and the source's buffer is free once copied. */
static void test_sendsm(void **st)
{
    (void)st;
    for (int partial = 0; partial < 2; partial++) {
        sp_pair p;
        setup(&p, true);
        sp_side *a = &p.s[0], *b = &p.s[1];
        uint32_t len = 3 * MIB + 77;
        uint8_t *src = malloc(len), *dst = malloc(len);
        fill_pattern(src, len, 3);
        zreg *r = zs_start(a, src, len, 0);
        sp_settle(&p);
        size_t got = (size_t)sp_recv(b, dst, len, 0);
        if (partial) {
            uw_sdp_zread rd;
            assert_int_equal(uw__sdp_conn_zread(b->c, 200000, &rd), 0);
            uw__sdp_conn_zread_done(b->c, do_read(&rd, dst + got));
            assert_int_equal(uw__sdp_conn_zread_collect(b->c), 200000);
            got += 200000;
        }
        assert_int_equal(uw__sdp_conn_force_bcopy(b->c), 0);
        assert_int_equal(uw__sdp_conn_force_bcopy(b->c), UW_EAGAIN);
        assert_int_equal(uw__sdp_conn_zavail(b->c), 0);
        sp_drain_tx(b);
        if (partial) { /* the RdmaRdCompl goes before the SendSm */
            assert_int_equal(b->out[b->out_head].data[0], UW_SDP_RDMARDCOMPL);
            assert_false(b->out[b->out_head].inv);
        }
        assert_int_equal(b->last_mid, UW_SDP_SENDSM);
        uint64_t sent = 0;
        int rc = 0;
        for (int guard = 0; got < len && guard < 100000; guard++) {
            sp_settle(&p);
            long k = sp_recv(b, dst + got, len - got, 0);
            if (k > 0)
                got += (size_t)k;
            if (r && (rc = zs_poll(a, r, &sent)) != 0)
                r = NULL;
        }
        assert_null(r);
        assert_int_equal(rc, 1);
        assert_int_equal(sent, len);
        assert_int_equal(got, len);
        assert_memory_equal(dst, src, len);
        uw_sdp_stats sa;
        uw__sdp_conn_stats(a->c, &sa);
        assert_int_equal(sa.sendsm_received, 1);
        assert_int_equal(sa.zcopy_sent, partial ? 200000 : 0);
        assert_int_equal(sa.sent, len);
        assert_int_equal(invalidations, 0); /* the source revokes it itself */
        assert_int_equal(a->rc, 0);
        assert_int_equal(b->rc, 0);
        free(src);
        free(dst);
        sp_free(&p);
    }
}

/* SrcAvail revocation (9.5.4) from the Data Source, as a send() timeout
 * does it: case 0 before the SrcAvail went (nothing on the wire), 1 an
 * Unprocessed SrcAvail (the sink drops it and answers SendSm; the source
 * ends with the payload sent), 2 an In-Process one (the sink Read part:
 * it goes on and its RdmaRdCompl Processes all), 3 the sink's refusal
 * crossing the cancel (the SendSm Processed the SrcAvail before the sink
 * saw the cancel: the sink ignores the cancel and waits for the rest, so
 * the source, whose cancel that SendSm does not acknowledge, sends it all
 * by Bcopy), 4 after the SendSm (too late: UW_EALREADY, all of it goes).
 * The stream stays exact: what the source reports taken is what the sink
 * reads, and the next send follows it. */
static void test_source_cancel(void **st)
{
    (void)st;
    for (int k = 0; k < 5; k++) {
        sp_pair p;
        setup(&p, true);
        sp_side *a = &p.s[0], *b = &p.s[1];
        uint32_t len = k == 4 ? 8 * MIB : MIB; /* 4: more than the send slots take */
        uint8_t *src = malloc(len), *dst = malloc(len + 16);
        fill_pattern(src, len, 40 + k);
        zreg *r;
        if (k == 0) {
            /* Not yet sent (no pass since zsend). */
            r = reg_new(len);
            memcpy(r->addr, src, len);
            uw_sdp_zsrc z = {.addr = r->addr, .len = len, .stag = r->stag, .va = r->va};
            assert_int_equal(uw__sdp_conn_zsend(a->c, &z), 0);
        } else {
            r = zs_start(a, src, len, 0);
            sp_settle(&p);
        }
        size_t got = 0;
        if (k >= 1) {
            got = (size_t)sp_recv(b, dst, len, 0);
            assert_int_equal(got, UW_SDP_SRCAVAIL_PAYLOAD);
        }
        if (k == 2) {
            uw_sdp_zread rd;
            assert_int_equal(uw__sdp_conn_zread(b->c, 100000, &rd), 0);
            uw__sdp_conn_zread_done(b->c, do_read(&rd, dst + got));
            assert_int_equal(uw__sdp_conn_zread_collect(b->c), 100000);
            got += 100000;
            sp_drain_tx(b);
        }
        if (k == 3 || k == 4) {
            assert_int_equal(uw__sdp_conn_force_bcopy(b->c), 0);
            sp_drain_tx(b); /* the SendSm is on its way */
            if (k == 4)
                sp_settle(&p); /* it arrived: the source copies */
        }
        assert_int_equal(uw__sdp_conn_zsend_cancel(a->c), k == 4 ? UW_EALREADY : 0);
        sp_drain_tx(a);
        if (k == 1)
            assert_int_equal(a->last_mid, UW_SDP_SRCAVAILCANCEL);
        uint64_t sent = 0;
        int rc = 0;
        for (int guard = 0; r && guard < 1000; guard++) {
            sp_settle(&p);
            if (k == 2 && uw__sdp_conn_zavail(b->c)) { /* our sink finishes it */
                uw_sdp_zread rd;
                uint32_t n = uw__sdp_conn_zavail(b->c);
                assert_int_equal(uw__sdp_conn_zread(b->c, n, &rd), 0);
                uw__sdp_conn_zread_done(b->c, do_read(&rd, dst + got));
                got += (size_t)uw__sdp_conn_zread_collect(b->c);
                sp_drain_tx(b);
            }
            long n = sp_recv(b, dst + got, len - got, 0);
            if (n > 0)
                got += (size_t)n;
            if ((rc = zs_poll(a, r, &sent)) != 0)
                r = NULL;
        }
        assert_null(r);
        assert_int_equal(rc, 1);
        uint32_t want = k == 0 ? 0 : k == 1 ? UW_SDP_SRCAVAIL_PAYLOAD : len;
        assert_int_equal(sent, want);
        /* The stream: what was taken, then the next send. */
        bool queued = false;
        for (int guard = 0; got < want + 4 && guard < 1000; guard++) {
            if (!queued) { /* 4: the copied part fills the send slots first */
                long q = sp_send(a, "next", 4, 0);
                assert_true(q == 4 || q == UW_EAGAIN);
                queued = q == 4;
            }
            sp_settle(&p);
            long n = sp_recv(b, dst + got, len + 16 - got, 0);
            if (n > 0)
                got += (size_t)n;
        }
        assert_int_equal(got, want + 4);
        assert_memory_equal(dst, src, want);
        assert_memory_equal(dst + want, "next", 4);
        uw_sdp_stats sa, sb;
        uw__sdp_conn_stats(a->c, &sa);
        uw__sdp_conn_stats(b->c, &sb);
        assert_int_equal(sa.cancels_sent, k == 0 || k == 4 ? 0 : 1);
        assert_int_equal(sa.srcavail_sent, k == 0 ? 0 : 1);
        assert_int_equal(sb.sendsm_sent, k == 1 || k == 3 || k == 4 ? 1 : 0);
        assert_int_equal(uw__sdp_conn_zsend_cancel(a->c), UW_EINVAL);
        assert_int_equal(a->rc, 0);
        assert_int_equal(b->rc, 0);
        free(src);
        free(dst);
        sp_free(&p);
    }
}

/* Data queued before the zero-copy send goes first, whole; Nagle's partial
 * message is not held behind the SrcAvail. */
static void test_order(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p, true);
    sp_side *a = &p.s[0], *b = &p.s[1];
    uint8_t *src = malloc(MIB), *dst = malloc(MIB + 200000);
    fill_pattern(src, MIB, 4);
    a->hold_completions = true; /* Nagle holds the second partial message */
    assert_int_equal(sp_send(a, src, 100000, 0), 100000);
    assert_int_equal(sp_send(a, src, 5000, 0), 5000);
    zreg *r = zs_start(a, src, MIB, 0);
    /* Nothing after the first 64 KiB went yet: the rest waits for credits
     * and completions, and the SrcAvail waits for it. */
    sp_settle(&p);
    a->hold_completions = false;
    sp_release_completions(a);
    sp_drain_tx(a);
    sp_settle(&p);
    size_t got = read_all(&p, b, dst, 105000 + UW_SDP_SRCAVAIL_PAYLOAD);
    assert_int_equal(got, 105000 + UW_SDP_SRCAVAIL_PAYLOAD);
    assert_memory_equal(dst, src, 100000);
    assert_memory_equal(dst + 100000, src, 5000);
    assert_memory_equal(dst + 105000, src, UW_SDP_SRCAVAIL_PAYLOAD);
    uw_sdp_zread rd;
    assert_int_equal(uw__sdp_conn_zread(b->c, uw__sdp_conn_zavail(b->c), &rd), 0);
    uw__sdp_conn_zread_done(b->c, do_read(&rd, dst + got));
    assert_true(uw__sdp_conn_zread_collect(b->c) > 0);
    sp_drain_tx(b);
    sp_settle(&p);
    assert_memory_equal(dst + 105000, src, MIB);
    uint64_t sent;
    assert_int_equal(zs_poll(a, r, &sent), 1);
    free(src);
    free(dst);
    sp_free(&p);
}

/* 9.2's deadlock: both sides advertise and neither reads. Each sink sees
 * its own send waiting and answers SendSm; both finish by Bcopy. */
static void test_both_advertise(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p, true);
    uint32_t len = 2 * MIB;
    uint8_t *src[2], *dst[2];
    zreg *r[2];
    for (int i = 0; i < 2; i++) {
        src[i] = malloc(len);
        dst[i] = malloc(len);
        fill_pattern(src[i], len, 10 + (uint32_t)i);
        r[i] = zs_start(&p.s[i], src[i], len, 0);
    }
    size_t got[2] = {0, 0};
    for (int guard = 0; (got[0] < len || got[1] < len) && guard < 100000; guard++) {
        sp_settle(&p);
        for (int i = 0; i < 2; i++) {
            long k = sp_recv(&p.s[i], dst[i] + got[i], len - got[i], 0);
            if (k > 0)
                got[i] += (size_t)k;
            uint64_t sent;
            if (r[i] && zs_poll(&p.s[i], r[i], &sent) == 1)
                r[i] = NULL;
        }
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(got[i], len);
        assert_memory_equal(dst[i], src[1 - i], len);
        assert_null(r[i]);
        uw_sdp_stats s;
        uw__sdp_conn_stats(p.s[i].c, &s);
        assert_int_equal(s.sendsm_sent, 1);
        assert_int_equal(p.s[i].rc, 0);
    }
    for (int i = 0; i < 2; i++) {
        free(src[i]);
        free(dst[i]);
    }
    sp_free(&p);
}

/* Without zcopy_sink every SrcAvail is answered with SendSm at once. */
static void test_sink_off(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p, false);
    sp_side *a = &p.s[0], *b = &p.s[1];
    uint8_t *src = malloc(MIB), *dst = malloc(MIB);
    fill_pattern(src, MIB, 5);
    zreg *r = zs_start(a, src, MIB, 0);
    sp_settle(&p);
    assert_int_equal(uw__sdp_conn_zavail(b->c), 0);
    assert_int_equal(read_all(&p, b, dst, MIB), MIB);
    assert_memory_equal(dst, src, MIB);
    uint64_t sent;
    assert_int_equal(zs_poll(a, r, &sent), 1);
    free(src);
    free(dst);
    sp_free(&p);
}

static void test_refusals(void **st)
{
    (void)st;
    sp_pair p;
    setup(&p, true);
    sp_side *a = &p.s[0];
    uint8_t src[4096];
    fill_pattern(src, sizeof(src), 6);
    zs_start(a, src, UW_SDP_SRCAVAIL_PAYLOAD, UW_EINVAL); /* nothing left to read */
    uw_sdp_zsrc z = {.addr = src, .len = 0, .stag = 1, .va = 0};
    assert_int_equal(uw__sdp_conn_zsend(a->c, &z), UW_EINVAL);
    z.len = UW_SDP_MAX_ADVERT_LEN + 1;
    assert_int_equal(uw__sdp_conn_zsend(a->c, &z), UW_EINVAL);
    uint64_t sent;
    assert_int_equal(uw__sdp_conn_zsend_poll(a->c, &sent), UW_EINVAL);
    zreg *r = zs_start(a, src, sizeof(src), 0);
    zs_start(a, src, sizeof(src), UW_EBUSY);
    assert_int_equal(uw__sdp_conn_zread_collect(a->c), 0);
    /* Shut down: the connection dies under the zero-copy send. */
    uw__sdp_conn_llp_closed(a->c, UW_ECONNRESET);
    assert_int_equal(zs_poll(a, r, &sent), UW_ECONNRESET);
    assert_int_equal(sent, 0);
    sp_free(&p);
}

/* Messages a Data Source must refuse: RdmaRdCompl or SendSm with no
 * SrcAvail In-Process, a Len beyond the buffer, an Invalidate of another
 * STag, and an Invalidate on any other message. */
static void test_violations(void **st)
{
    (void)st;
    uint8_t m[64], src[8192];
    fill_pattern(src, sizeof(src), 7);
    for (int k = 0; k < 5; k++) {
        sp_pair p;
        setup(&p, true);
        sp_side *a = &p.s[0];
        zreg *r = k >= 2 ? zs_start(a, src, sizeof(src), 0) : NULL;
        /* The SrcAvail (if any) was MSeq 1 from a; a's next from b is 1. */
        uint32_t ack = r ? 1 : 0;
        int rc;
        switch (k) {
        case 0:
            rc = sp_inject(a, m, sp_build(m, UW_SDP_RDMARDCOMPL, 0, 16, 1, ack, 10, NULL, 0));
            break;
        case 1:
            rc = sp_inject(a, m, sp_build(m, UW_SDP_SENDSM, 0, 16, 1, ack, 0, NULL, 0));
            break;
        case 2:
            rc = sp_inject(a, m,
                           sp_build(m, UW_SDP_RDMARDCOMPL, 0, 16, 1, ack,
                                    sizeof(src) - UW_SDP_SRCAVAIL_PAYLOAD + 1, NULL, 0));
            break;
        case 3:
            rc = sp_inject_inv(a, m,
                               sp_build(m, UW_SDP_RDMARDCOMPL, 0, 16, 1, ack,
                                        sizeof(src) - UW_SDP_SRCAVAIL_PAYLOAD, NULL, 0),
                               r->stag + 1);
            break;
        default:
            rc = sp_inject_inv(a, m, sp_build(m, UW_SDP_DATA, 0, 16, 1, ack, 0, "x", 1), r->stag);
            break;
        }
        assert_int_equal(rc, UW_EPROTO);
        assert_non_null(uw__sdp_conn_why(a->c));
        if (r) {
            uint64_t sent;
            assert_true(zs_poll(a, r, &sent) < 0);
        }
        sp_free(&p);
    }
    /* The right Len with the right STag completes it. */
    sp_pair p;
    setup(&p, true);
    sp_side *a = &p.s[0];
    zreg *r = zs_start(a, src, sizeof(src), 0);
    assert_int_equal(sp_inject_inv(a, m,
                                   sp_build(m, UW_SDP_RDMARDCOMPL, 0, 16, 1, 1,
                                            sizeof(src) - UW_SDP_SRCAVAIL_PAYLOAD, NULL, 0),
                                   r->stag),
                     0);
    uint64_t sent;
    assert_int_equal(zs_poll(a, r, &sent), 1);
    sp_free(&p);
}

/* ---- Randomized: both directions, every choice at random ------------------ */

#define RLEN (3u * MIB)

typedef struct rdir {
    uint8_t *pat;          /* the stream's pattern, RLEN octets repeated */
    uint64_t queued, rcvd; /* octets the writer handed over / the reader got */
    zreg *zr;              /* the writer's zero-copy send, if any */
    uint32_t zlen;
    bool rd_pending; /* the reader's RDMA Read in flight */
    uw_sdp_zread rd;
    uint8_t *rd_dst;
    uint64_t zsends, zreads, refusals;
} rdir;

static tu_rng R;
static uint64_t tot_zsends, tot_zreads, tot_refusals;

static uint32_t rnd(uint32_t n)
{
    return (uint32_t)tu_rng_below(&R, n);
}

static void pat_slice(const rdir *d, uint64_t pos, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = d->pat[(pos + i) % RLEN];
}

static void check_slice(const rdir *d, uint64_t pos, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != d->pat[(pos + i) % RLEN])
            fail_msg("stream differs at octet %llu", (unsigned long long)(pos + i));
}

static void r_write(sp_side *x, rdir *d)
{
    if (d->zr) {
        uint64_t sent;
        int rc = zs_poll(x, d->zr, &sent);
        assert_true(rc >= 0);
        if (rc == 1) {
            assert_int_equal(sent, d->zlen);
            d->queued += d->zlen;
            d->zr = NULL;
        }
        return;
    }
    uint32_t len = 1 + rnd(rnd(4) ? 300000 : 2 * MIB);
    uint8_t *buf = malloc(len);
    pat_slice(d, d->queued, buf, len);
    if (len > 4096 && rnd(2)) {
        d->zr = zs_start(x, buf, len, 0);
        d->zlen = len;
        d->zsends++;
    } else {
        long n = sp_send(x, buf, len, rnd(4) ? 0 : UW_SDP_MSG_MORE);
        assert_true(n > 0 || n == UW_EAGAIN);
        if (n > 0)
            d->queued += (uint64_t)n;
    }
    free(buf);
}

/* The reader's RDMA Read in flight completes now. */
static void r_complete(sp_side *x, rdir *d)
{
    int64_t n = do_read(&d->rd, d->rd_dst);
    assert_true(n > 0); /* the source's buffer is still granted */
    uw__sdp_conn_zread_done(x->c, n);
    ssize_t k = uw__sdp_conn_zread_collect(x->c);
    assert_int_equal(k, n);
    check_slice(d, d->rcvd, d->rd_dst, (size_t)k);
    d->rcvd += (uint64_t)k;
    free(d->rd_dst);
    d->rd_pending = false;
    d->zreads++;
    sp_drain_tx(x);
}

static void r_read(sp_side *x, rdir *d)
{
    if (d->rd_pending) {
        if (!rnd(2))
            r_complete(x, d); /* else still in flight */
        return;
    }
    uint32_t za = uw__sdp_conn_zavail(x->c);
    if (za) {
        switch (rnd(3)) {
        case 0:
            assert_int_equal(uw__sdp_conn_force_bcopy(x->c), 0);
            d->refusals++;
            sp_drain_tx(x);
            return;
        case 1: {
            uint32_t k = 1 + rnd(za);
            assert_int_equal(uw__sdp_conn_zread(x->c, k, &d->rd), 0);
            d->rd_dst = malloc(k);
            d->rd_pending = true;
            return;
        }
        default:
            return; /* the reader is busy */
        }
    }
    uint32_t len = 1 + rnd(400000);
    uint8_t *buf = malloc(len);
    long n = sp_recv(x, buf, len, 0);
    assert_true(n > 0 || n == UW_EAGAIN);
    if (n > 0) {
        check_slice(d, d->rcvd, buf, (size_t)n);
        d->rcvd += (uint64_t)n;
    }
    free(buf);
}

static void one_run(uint64_t seed, unsigned steps)
{
    tu_rng_init(&R, seed);
    sp_pair p;
    setup(&p, true);
    rdir d[2];
    memset(d, 0, sizeof(d));
    for (int i = 0; i < 2; i++) {
        d[i].pat = malloc(RLEN);
        fill_pattern(d[i].pat, RLEN, (uint32_t)seed + (uint32_t)i);
    }
    for (unsigned s = 0; s < steps; s++) {
        int i = (int)rnd(2);
        switch (rnd(5)) {
        case 0:
            r_write(&p.s[i], &d[i]); /* d[i]: the stream i writes */
            break;
        case 1:
            r_read(&p.s[i], &d[1 - i]);
            break;
        default:
            for (unsigned k = rnd(8); k; k--)
                sp_deliver1(&p.s[i], &p.s[1 - i]);
            break;
        }
        assert_int_equal(p.s[0].rc, 0);
        assert_int_equal(p.s[1].rc, 0);
        assert_false(p.s[0].overrun || p.s[1].overrun);
    }
    /* Both readers now keep reading (taking every Read offered): every
     * send must end and every octet arrive within a bounded number of
     * steps. */
    for (unsigned s = 0; s < 200000; s++) {
        bool busy = false;
        for (int i = 0; i < 2; i++) {
            rdir *w = &d[i], *rdd = &d[1 - i];
            uw__sdp_conn_release_held(p.s[i].c); /* MSG_MORE's 200 ms passed */
            sp_drain_tx(&p.s[i]);
            if (w->zr)
                r_write(&p.s[i], w);
            if (rdd->rd_pending)
                r_complete(&p.s[i], rdd);
            uint32_t za = uw__sdp_conn_zavail(p.s[i].c);
            if (za) {
                assert_int_equal(uw__sdp_conn_zread(p.s[i].c, za, &rdd->rd), 0);
                rdd->rd_dst = malloc(za);
                rdd->rd_pending = true;
            } else {
                uint8_t buf[65536];
                long n = sp_recv(&p.s[i], buf, sizeof(buf), 0);
                if (n > 0) {
                    check_slice(rdd, rdd->rcvd, buf, (size_t)n);
                    rdd->rcvd += (uint64_t)n;
                }
            }
            if (w->zr || rdd->rd_pending || d[i].rcvd < d[i].queued)
                busy = true;
        }
        sp_settle(&p);
        if (!busy && d[0].rcvd == d[0].queued && d[1].rcvd == d[1].queued)
            break;
    }
    for (int i = 0; i < 2; i++) {
        tot_zsends += d[i].zsends;
        tot_zreads += d[i].zreads;
        tot_refusals += d[i].refusals;
        if (d[i].zr || d[i].rcvd != d[i].queued)
            fail_msg("seed %llu: direction %d stuck: %llu of %llu octets, zsend %s",
                     (unsigned long long)seed, i, (unsigned long long)d[i].rcvd,
                     (unsigned long long)d[i].queued, d[i].zr ? "pending" : "done");
        free(d[i].pat);
    }
    assert_int_equal(bad_invalidations, 0);
    sp_free(&p);
}

static void test_random(void **st)
{
    (void)st;
    uint64_t seed = tu_seed(0x5eed2c0f);
    const char *e = getenv("UW_SDP_ZCOPY_RUNS");
    unsigned runs = e ? (unsigned)atoi(e) : 60;
    for (unsigned i = 0; i < runs; i++)
        one_run(seed + i, 400);
    printf("# %llu zero-copy sends, %llu Reads, %llu refusals\n", (unsigned long long)tot_zsends,
           (unsigned long long)tot_zreads, (unsigned long long)tot_refusals);
    /* Every path was taken. */
    assert_true(tot_zsends > runs && tot_zreads > runs && tot_refusals > runs / 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_whole), cmocka_unit_test(test_read_in_parts),
        cmocka_unit_test(test_sendsm),     cmocka_unit_test(test_source_cancel),
        cmocka_unit_test(test_order),      cmocka_unit_test(test_both_advertise),
        cmocka_unit_test(test_sink_off),   cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_violations), cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
