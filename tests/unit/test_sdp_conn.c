/* The SDP connection core, rule by rule, with two cores in memory
 * (sdp_pair.h): setup (8.1.1), credits (10.2-10.5), MSeq (6.1.5, 10.1),
 * Bcopy (9.1), forcing Bcopy (9.5.2), urgent data (9.5.3), resizing
 * (10.6), close (8.2), solicited events (14.2), Nagle and cork. */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "sdp_pair.h"
#include "testutil.h"

#define DATA UW_SDP_DATA

static uw_sdp_conn_cfg cfg(bool acc, uint32_t size, uint16_t bufs)
{
    uw_sdp_conn_cfg c;
    uw__sdp_conn_cfg_default(&c, acc);
    if (size)
        c.rcv_size = c.tx_size = size;
    if (bufs)
        c.rcv_bufs = bufs;
    /* Fixed windows: these tests count credits and messages exactly
     * (test_autotune covers growth). */
    c.rcv_bufs_max = c.tx_slots_max = 0;
    return c;
}

static void test_setup_params(void **st)
{
    (void)st;
    sp_pair p;
    uw_sdp_conn_cfg cc = cfg(false, 4096, 8), ac = cfg(true, 8192, 5);
    cc.ird = 4, cc.ord = 2, cc.max_adverts = 3;
    ac.ird = 3, ac.ord = 8, ac.max_adverts = 9;
    assert_int_equal(sp_setup(&p, &cc, &ac), 0);
    assert_int_equal(uw__sdp_conn_state(p.s[0].c), UW_SDP_S_OPEN);
    assert_int_equal(uw__sdp_conn_state(p.s[1].c), UW_SDP_S_OPEN);
    uw_sdp_params a, b;
    assert_int_equal(uw__sdp_conn_params(p.s[0].c, &a), 0);
    assert_int_equal(uw__sdp_conn_params(p.s[1].c, &b), 0);
    assert_int_equal(a.minv, 1);
    assert_int_equal(a.remote_max_adverts, 9);
    assert_int_equal(b.remote_max_adverts, 3);
    /* The Accepting Peer takes the smaller DesRemRcvSz (4096) for its buffers. */
    assert_int_equal(b.local_rcv_size, 4096);
    assert_int_equal(a.remote_rcv_size, 4096);
    assert_int_equal(b.remote_rcv_size, 4096);
    /* 4d: the acceptor's IRD drops to the Hello's LocORD (2); 4e: its ORD to
     * the Hello's LocIRD (4). 7c/7d: the connector's IRD to the HelloAck's
     * LocORD (4: unchanged), its ORD to the HelloAck's LocIRD (2: unchanged). */
    assert_int_equal(b.ird, 2);
    assert_int_equal(b.ord, 4);
    assert_int_equal(a.ird, 4);
    assert_int_equal(a.ord, 2);
    assert_int_equal(a.local_bufs, 8);
    assert_int_equal(a.remote_bufs, 5);
    /* Notes section 3: after the HelloAck the acceptor has Bufs(Hello) - 1. */
    uw_sdp_stats s;
    uw__sdp_conn_stats(p.s[1].c, &s);
    assert_int_equal(s.send_credit, 8 - 1);
    uw__sdp_conn_stats(p.s[0].c, &s);
    assert_int_equal(s.send_credit, 5);
    assert_int_equal(p.s[1].sent_msgs, 1);
    sp_free(&p);

    /* The HelloAck on the wire (6.2.2, 8.1.1 step 5): Flags 0, MSeq and
     * MSeqAck 0, MajV 1 and MinV 1 even for a Hello with MinV 0 (6.2.2.2),
     * sent as a Send with Solicited Event (14.2). */
    uw_sdp_conn *acc;
    uw_sdp_conn_cfg k = cfg(true, 4096, 5);
    assert_int_equal(uw__sdp_conn_create(&acc, &k), 0);
    uint8_t h[32];
    tu_unhex("00000004 00000020 00000000 00000000 10000008 00010000 00010000 00020004", h, 32);
    assert_int_equal(uw__sdp_conn_accept_hello(acc, h, 32, NULL), 0);
    uw_sdp_post po;
    uw_sdp_tx t;
    assert_int_equal(uw__sdp_conn_next_tx(acc, &t), 0); /* 4b: buffers first */
    while (uw__sdp_conn_next_post(acc, &po) == 1)
        ;
    assert_int_equal(uw__sdp_conn_next_tx(acc, &t), 1);
    assert_true(t.solicited);
    uw_sdp_msg m;
    assert_int_equal(uw__sdp_decode(t.addr, t.len, &m), 0);
    assert_int_equal(m.bsdh.mid, UW_SDP_HELLOACK);
    assert_int_equal(m.bsdh.flags, 0);
    assert_int_equal(m.bsdh.mseq, 0);
    assert_int_equal(m.bsdh.mseqack, 0);
    assert_int_equal(m.bsdh.bufs, 5);
    assert_int_equal(m.u.helloack.majv, 1);
    assert_int_equal(m.u.helloack.minv, 1);
    assert_int_equal(m.u.helloack.act_rcv_sz, 4096);
    uw__sdp_conn_destroy(acc);
}

static void test_hello_wire(void **st)
{
    (void)st;
    uw_sdp_conn *c;
    uw_sdp_conn_cfg k = cfg(false, 65536, 4);
    k.tx_size = 65536;
    k.max_adverts = 8, k.ird = 4, k.ord = 2;
    assert_int_equal(uw__sdp_conn_create(&c, &k), 0);
    uint8_t h[32];
    assert_int_equal(uw__sdp_conn_hello(c, h), UW_EBUSY); /* 8.1.1 step 1c */
    uw_sdp_post po;
    while (uw__sdp_conn_next_post(c, &po) == 1)
        ;
    assert_int_equal(uw__sdp_conn_hello(c, h), 0);
    uint8_t want[32];
    assert_int_equal(tu_unhex("00000004 00000020 00000000 00000000"
                              "11000008 00010000 00010000 00020004",
                              want, 32),
                     32);
    assert_memory_equal(h, want, 32);
    /* Nothing goes out before the HelloAck (step 2). */
    uw_sdp_tx t;
    assert_int_equal(uw__sdp_conn_next_tx(c, &t), 0);
    struct iovec v = {h, 1};
    assert_int_equal(uw__sdp_conn_send(c, &v, 1, 0), UW_ENOTCONN);
    uw__sdp_conn_destroy(c);
}

static void reject_hello(const char *hex)
{
    uw_sdp_conn *c;
    uw_sdp_conn_cfg k = cfg(true, 0, 0);
    assert_int_equal(uw__sdp_conn_create(&c, &k), 0);
    uint8_t h[40];
    long n = tu_unhex(hex, h, sizeof(h));
    const char *why = NULL;
    assert_int_equal(uw__sdp_conn_accept_hello(c, h, (size_t)n, &why), UW_EPROTO);
    assert_non_null(why);
    uw__sdp_conn_destroy(c);
}

static void test_hello_rejected(void **st)
{
    (void)st;
    /* 8.1.1 step 3a: MajV 2, MaxAdverts 0, LocIRD 0, LocORD 0; 10.3 Bufs 2;
     * section 10 rule 4: LocalRcvSz 36; not a Hello; Len disagreeing. */
    reject_hello("00000004 00000020 00000000 00000000 21000008 00010000 00010000 00020004");
    reject_hello("00000004 00000020 00000000 00000000 11000000 00010000 00010000 00020004");
    reject_hello("00000004 00000020 00000000 00000000 11000008 00010000 00010000 00020000");
    reject_hello("00000004 00000020 00000000 00000000 11000008 00010000 00010000 00000004");
    reject_hello("00000002 00000020 00000000 00000000 11000008 00010000 00010000 00020004");
    reject_hello("00000004 00000020 00000000 00000000 11000008 00010000 00000024 00020004");
    reject_hello("01000004 00000020 00000000 00000000 11000008 00010000 00010000 00020004");
    reject_hello("00000004 00000021 00000000 00000000 11000008 00010000 00010000 00020004");
    /* 6.2.1: the Hello's MSeq and MSeqAck are not checked on receipt. */
    {
        uw_sdp_conn *c0;
        uw_sdp_conn_cfg k0 = cfg(true, 0, 0);
        assert_int_equal(uw__sdp_conn_create(&c0, &k0), 0);
        uint8_t h0[32];
        tu_unhex("00000004 00000020 00000005 fffffff7 11000008 00010000 00010000 00020004", h0, 32);
        assert_int_equal(uw__sdp_conn_accept_hello(c0, h0, 32, NULL), 0);
        uw__sdp_conn_destroy(c0);
    }
    /* MinV differences are accepted and the minimum is used (3b). */
    uw_sdp_conn *c;
    uw_sdp_conn_cfg k = cfg(true, 0, 0);
    assert_int_equal(uw__sdp_conn_create(&c, &k), 0);
    uint8_t h[32];
    tu_unhex("00000004 00000020 00000000 00000000 1F000008 00010000 00010000 00020004", h, 32);
    assert_int_equal(uw__sdp_conn_accept_hello(c, h, 32, NULL), 0);
    uw_sdp_params pa;
    assert_int_equal(uw__sdp_conn_params(c, &pa), 0);
    assert_int_equal(pa.minv, 1);
    uw__sdp_conn_destroy(c);
    assert_int_equal(uw__sdp_conn_create(&c, &k), 0);
    tu_unhex("00000004 00000020 00000000 00000000 10000008 00010000 00010000 00020004", h, 32);
    assert_int_equal(uw__sdp_conn_accept_hello(c, h, 32, NULL), 0);
    assert_int_equal(uw__sdp_conn_params(c, &pa), 0);
    assert_int_equal(pa.minv, 0);
    uw__sdp_conn_destroy(c);
}

/* A Connecting Peer (4 buffers, IRD 4, ORD 2) that sent its Hello and was
 * given the HelloAck in hex; sp_inject must say want. */
static void connector_after(sp_side *x, const char *hah_hex, int want)
{
    uw_sdp_conn_cfg k = cfg(false, 0, 4);
    k.ird = 4, k.ord = 2;
    memset(x, 0, sizeof(*x));
    assert_int_equal(uw__sdp_conn_create(&x->c, &k), 0);
    sp_drain_posts(x);
    uint8_t h[32];
    assert_int_equal(uw__sdp_conn_hello(x->c, h), 0);
    uint8_t m[28];
    tu_unhex(hah_hex, m, 28);
    assert_int_equal(sp_inject(x, m, 28), want);
}

/* The Connecting Peer gets a HelloAck that breaks 7a. */
static void helloack_case(const char *hah_hex, int want)
{
    sp_side x;
    connector_after(&x, hah_hex, want);
    if (want < 0) {
        assert_int_equal(uw__sdp_conn_state(x.c), UW_SDP_S_ERROR);
        /* No DisConn was sent: the LLP goes at once (8.2.2). */
        assert_int_equal(uw__sdp_conn_llp_action(x.c), UW_SDP_LLP_ABORT);
        assert_non_null(uw__sdp_conn_why(x.c));
    } else {
        assert_int_equal(uw__sdp_conn_state(x.c), UW_SDP_S_OPEN);
    }
    sp_free_side(&x);
}

/* Steps 7b-7d: what the connector settled on after the HelloAck given. */
static uw_sdp_params helloack_params(const char *hah_hex)
{
    sp_side x;
    connector_after(&x, hah_hex, 0);
    uw_sdp_params pa;
    assert_int_equal(uw__sdp_conn_params(x.c, &pa), 0);
    sp_free_side(&x);
    return pa;
}

static void test_helloack_checks(void **st)
{
    (void)st;
    helloack_case("0100000a 0000001c 00000000 00000000 11000008 00010000 00010001", 0);
    /* 6.2.2: its MSeq and MSeqAck are not checked on receipt. */
    helloack_case("0100000a 0000001c 00000009 80000003 11000008 00010000 00010001", 0);
    /* 7b: MinV is the smaller of ours (1) and the HAH's. */
    assert_int_equal(
        helloack_params("0100000a 0000001c 00000000 00000000 10000008 00010000 00040004").minv, 0);
    assert_int_equal(
        helloack_params("0100000a 0000001c 00000000 00000000 11000008 00010000 00040004").minv, 1);
    /* 7c: IRD down to the HAH's LocORD (3 < 4); 7d: ORD down to its LocIRD
     * (1 < 2). Neither ever goes up (LocORD 8, LocIRD 8). */
    uw_sdp_params pa =
        helloack_params("0100000a 0000001c 00000000 00000000 11000008 00010000 00030001");
    assert_int_equal(pa.ird, 3);
    assert_int_equal(pa.ord, 1);
    pa = helloack_params("0100000a 0000001c 00000000 00000000 11000008 00010000 00080008");
    assert_int_equal(pa.ird, 4);
    assert_int_equal(pa.ord, 2);
    helloack_case("0100000a 0000001c 00000000 00000000 21000008 00010000 00010001", UW_EPROTO);
    helloack_case("0100000a 0000001c 00000000 00000000 11000000 00010000 00010001", UW_EPROTO);
    helloack_case("0100000a 0000001c 00000000 00000000 11000008 00010000 00000001", UW_EPROTO);
    helloack_case("0100000a 0000001c 00000000 00000000 11000008 00010000 00010000", UW_EPROTO);
    /* The first message is not a HelloAck. */
    helloack_case("ff00000a 0000001c 00000000 00000000 11000008 00010000 00010000", UW_EPROTO);
}

static void test_stream_and_credits(void **st)
{
    (void)st;
    sp_pair p;
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    enum { N = 3 << 20 };
    uint8_t *src = malloc(N), *dst = malloc(N);
    tu_rng r;
    tu_rng_init(&r, tu_seed(11));
    tu_rng_fill(&r, src, N);
    size_t sent = 0, got = 0;
    while (got < N) {
        if (sent < N) {
            size_t k = 1 + tu_rng_below(&r, 200000);
            if (k > N - sent)
                k = N - sent;
            long n = sp_send(&p.s[0], src + sent, k, 0);
            if (n > 0)
                sent += (size_t)n;
            else
                assert_int_equal(n, UW_EAGAIN);
        }
        for (int i = 0; i < 5; i++)
            sp_deliver1(&p.s[0], &p.s[1]);
        long n = sp_recv(&p.s[1], dst + got, 1 + tu_rng_below(&r, 100000), 0);
        if (n > 0)
            got += (size_t)n;
        else
            assert_int_equal(n, UW_EAGAIN);
        sp_settle(&p);
        assert_false(p.s[1].overrun);
        assert_false(p.s[0].overrun);
        assert_int_equal(p.s[0].rc, 0);
        assert_int_equal(p.s[1].rc, 0);
    }
    assert_memory_equal(src, dst, N);
    uw_sdp_stats s;
    uw__sdp_conn_stats(p.s[0].c, &s);
    assert_int_equal(s.sent, N);
    /* A 64 KiB message per send at most: the peer's buffer size bounds it. */
    assert_true(s.data_msgs_sent >= N / 65536);
    uw__sdp_conn_stats(p.s[1].c, &s);
    assert_true(s.credit_updates_sent > 0);
    free(src);
    free(dst);
    sp_free(&p);
}

/* 10.4/10.5: the receiver updates the sender's credit without waiting for a
 * message from it, as soon as its application frees buffers. */
static void test_gratuitous_update(void **st)
{
    (void)st;
    sp_pair p;
    uw_sdp_conn_cfg ac = cfg(true, 1024, 4);
    uw_sdp_conn_cfg cc = cfg(false, 1024, 4);
    assert_int_equal(sp_setup(&p, &cc, &ac), 0);
    uint8_t buf[8192] = {0};
    uw__sdp_conn_setopt(p.s[0].c, UW_SDP_OPT_NODELAY, 1);
    /* Four buffers at the acceptor: the connector may fill two with payload
     * (two credits stay reserved). */
    long n = sp_send(&p.s[0], buf, sizeof(buf), 0);
    assert_true(n > 0);
    sp_settle(&p);
    uw_sdp_stats s;
    uw__sdp_conn_stats(p.s[0].c, &s);
    assert_int_equal(s.data_msgs_sent, 2);
    assert_int_equal(s.send_credit, 2);
    unsigned before = p.s[1].sent_msgs;
    uint8_t rb[8192];
    /* The acceptor's application reads; a credit update goes out at once. */
    n = sp_recv(&p.s[1], rb, sizeof(rb), 0);
    assert_int_equal(n, 2 * (1024 - 16));
    assert_true(p.s[1].sent_msgs > before);
    assert_int_equal(p.s[1].last_mid, DATA);
    sp_settle(&p);
    uw__sdp_conn_stats(p.s[0].c, &s);
    assert_int_equal(s.data_msgs_sent, 4);
    sp_free(&p);
}

/* One round of a stream: the writer queues what it may of src from *sent
 * on, both sides settle, and the reader (when it reads) takes everything
 * into dst from *got on. */
static void stream_round(sp_pair *p, const uint8_t *src, size_t *sent, uint8_t *dst, size_t *got,
                         bool read)
{
    long n = sp_send(&p->s[0], src + *sent, 1 << 20, 0);
    assert_true(n > 0 || n == UW_EAGAIN);
    if (n > 0)
        *sent += (size_t)n;
    sp_settle(p);
    while (read) {
        long r = sp_recv(&p->s[1], dst + *got, 1 << 20, 0);
        if (r <= 0)
            break;
        *got += (size_t)r;
        sp_settle(p);
    }
}

/* Autotuning (docs/sdp.md "Buffers"): a reader that keeps up with a writer
 * the window paces doubles the window up to its ceiling, and a writer that
 * fills its queue doubles the queue; a reader that falls behind never grows
 * the window, and a size the application set stays. */
static void test_autotune(void **st)
{
    (void)st;
    enum { SZ = 4096, ROUNDS = 6 };
    static uint8_t src[(ROUNDS + 1) << 20], dst[(ROUNDS + 1) << 20];
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (uint8_t)(i * 7 + i / 251);
    uw_sdp_stats s;
    for (int mode = 0; mode < 3; mode++) {
        sp_pair p;
        uw_sdp_conn_cfg cc = cfg(false, SZ, 16), ac = cfg(true, SZ, 16);
        cc.rcv_bufs_max = ac.rcv_bufs_max = cc.tx_slots_max = ac.tx_slots_max = 64;
        assert_int_equal(sp_setup(&p, &cc, &ac), 0);
        if (mode == 2) {
            assert_int_equal(uw__sdp_conn_setopt(p.s[1].c, UW_SDP_OPT_RCVBUF, 16 * SZ), 0);
            assert_int_equal(uw__sdp_conn_setopt(p.s[0].c, UW_SDP_OPT_SNDBUF, 16 * SZ), 0);
        }
        size_t sent = 0, got = 0;
        for (int r = 0; r < ROUNDS; r++)
            stream_round(&p, src, &sent, dst, &got, mode != 1);
        assert_memory_equal(dst, src, got);
        if (mode != 1)
            assert_int_equal(got, sent);
        int rcvbuf = uw__sdp_conn_getopt(p.s[1].c, UW_SDP_OPT_RCVBUF);
        int sndbuf = uw__sdp_conn_getopt(p.s[0].c, UW_SDP_OPT_SNDBUF);
        uw__sdp_conn_stats(p.s[1].c, &s);
        uint32_t rx_grown = s.rx_grown;
        uw__sdp_conn_stats(p.s[0].c, &s);
        if (mode == 0) {
            assert_int_equal(rcvbuf, 64 * SZ);
            assert_int_equal(rx_grown, 2);
            assert_int_equal(sndbuf, 64 * SZ);
            assert_int_equal(s.tx_grown, 2);
        } else if (mode == 1) {
            assert_int_equal(rcvbuf, 16 * SZ);
            assert_int_equal(rx_grown, 0);
            assert_int_equal(sndbuf, 64 * SZ); /* the writer still ran into a full queue */
        } else {
            assert_int_equal(rcvbuf, 16 * SZ);
            assert_int_equal(sndbuf, 16 * SZ);
            assert_int_equal(rx_grown + s.tx_grown, 0);
            assert_true(got > 0);
        }
        sp_free(&p);
    }
}

/* Credits of the peer checked on receipt (10.5), MSeq order (10.1) and
 * MSeqAck (6.1.6). p.s[1] plays a misbehaving peer through sp_inject. */
static void test_receive_violations(void **st)
{
    (void)st;
    uint8_t m[128], pl[8] = "payload";
    struct {
        int step;
        const char *name;
    } cases[] = {
        {0, "gap"},          {1, "ack ahead"}, {2, "payload at two credits"}, {3, "overrun"},
        {4, "reserved mid"}, {5, "sendsm"},    {6, "data after disconn"},     {7, "hello"}};
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sp_pair p;
        uw_sdp_conn_cfg cc = cfg(false, 1024, 4);
        assert_int_equal(sp_setup(&p, &cc, NULL), 0);
        sp_side *x = &p.s[0]; /* connector: it gave the peer 4 credits, 1 used by the HelloAck */
        int rc = 0;
        switch (cases[i].step) {
        case 0:
            rc = sp_inject(x, m, sp_build(m, DATA, 0, 16, 2, 0, 0, pl, 4));
            break;
        case 1:
            rc = sp_inject(x, m, sp_build(m, DATA, 0, 16, 1, 5, 0, pl, 4));
            break;
        case 2:
            assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 1, 0, 0, pl, 4)), 0);
            rc = sp_inject(x, m, sp_build(m, DATA, 0, 16, 2, 0, 0, pl, 4));
            break;
        case 3:
            assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 1, 0, 0, NULL, 0)), 0);
            assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 2, 0, 0, NULL, 0)), 0);
            /* The connector reposts as it goes, so its buffers are there, but
             * the peer was never told: its credit is gone. */
            /* One credit left: a payload-free update is still allowed. */
            assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 3, 0, 0, NULL, 0)), 0);
            rc = sp_inject(x, m, sp_build(m, DATA, 0, 16, 4, 0, 0, NULL, 0));
            break;
        case 4:
            m[0] = 0x20;
            rc = sp_inject(x, m, 16);
            break;
        case 5:
            rc = sp_inject(x, m, sp_build(m, UW_SDP_SENDSM, 0, 16, 1, 0, 0, NULL, 0));
            break;
        case 6:
            assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_DISCONN, 0, 16, 1, 0, 0, NULL, 0)),
                             0);
            rc = sp_inject(x, m, sp_build(m, DATA, 0, 16, 2, 0, 0, pl, 4));
            break;
        case 7:
            rc = sp_inject(x, m, sp_build(m, UW_SDP_HELLO, 0, 16, 1, 0, 0, NULL, 0));
            break;
        }
        if (rc != UW_EPROTO)
            fail_msg("case %s: rc %d", cases[i].name, rc);
        assert_int_equal(uw__sdp_conn_state(x->c), UW_SDP_S_ERROR);
        assert_int_equal(uw__sdp_conn_llp_action(x->c), UW_SDP_LLP_ABORT);
        assert_int_equal(uw__sdp_conn_take_error(x->c), UW_EPROTO);
        assert_non_null(uw__sdp_conn_why(x->c));
        struct iovec v = {m, 4};
        assert_true(uw__sdp_conn_send(x->c, &v, 1, 0) < 0);
        sp_free(&p);
    }
}

static void test_graceful_close(void **st)
{
    (void)st;
    sp_pair p;
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    uint8_t b[100];
    assert_int_equal(sp_send(&p.s[0], "hello", 5, 0), 5);
    assert_int_equal(uw__sdp_conn_shutdown(p.s[0].c, SHUT_WR), 0);
    assert_int_equal(sp_send(&p.s[0], "x", 1, 0), UW_EPIPE);
    sp_settle(&p);
    /* Data first, then end of stream; the other direction still works. */
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 5);
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 0);
    assert_true(uw__sdp_conn_poll(p.s[1].c) & POLLIN);
    assert_int_equal(sp_send(&p.s[1], "reply", 5, 0), 5);
    sp_settle(&p);
    assert_int_equal(sp_recv(&p.s[0], b, sizeof(b), 0), 5);
    assert_int_equal(uw__sdp_conn_llp_action(p.s[0].c), UW_SDP_LLP_NONE);
    assert_int_equal(uw__sdp_conn_shutdown(p.s[1].c, SHUT_WR), 0);
    sp_settle(&p);
    assert_int_equal(sp_recv(&p.s[0], b, sizeof(b), 0), 0);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(uw__sdp_conn_state(p.s[i].c), UW_SDP_S_CLOSED);
        assert_int_equal(uw__sdp_conn_llp_action(p.s[i].c), UW_SDP_LLP_DISCONNECT);
        uw_sdp_stats s;
        uw__sdp_conn_stats(p.s[i].c, &s);
        assert_true(s.graceful);
        assert_true(uw__sdp_conn_poll(p.s[i].c) & POLLHUP);
    }
    uw__sdp_conn_llp_closed(p.s[0].c, 0);
    assert_int_equal(uw__sdp_conn_take_error(p.s[0].c), 0);
    sp_free(&p);
}

/* A reset after the peer's DisConn: everything the peer sent is in, so it
 * reads to the end and then EOF, as TCP keeps its receive queue through a
 * reset; only our own unsent data is lost (EPIPE). A slow reader of a
 * server that closed and exited must not lose the server's last data. */
static void test_reset_after_disconn(void **st)
{
    (void)st;
    for (int corked = 0; corked < 2; corked++) {
        sp_pair p;
        assert_int_equal(sp_setup(&p, NULL, NULL), 0);
        uint8_t b[100];
        assert_int_equal(sp_send(&p.s[0], "the tail", 8, 0), 8);
        assert_int_equal(uw__sdp_conn_shutdown(p.s[0].c, SHUT_WR), 0);
        sp_settle(&p);
        if (corked) {
            uw__sdp_conn_setopt(p.s[1].c, UW_SDP_OPT_CORK, 1);
            assert_int_equal(sp_send(&p.s[1], "unsent", 6, 0), 6);
        }
        uw__sdp_conn_llp_closed(p.s[1].c, UW_ECONNRESET);
        assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 8);
        assert_memory_equal(b, "the tail", 8);
        assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 0);
        assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 0);
        assert_int_equal(uw__sdp_conn_take_error(p.s[1].c), corked ? UW_EPIPE : 0);
        assert_int_equal(sp_send(&p.s[1], "x", 1, 0), UW_EPIPE);
        uw_sdp_stats s;
        uw__sdp_conn_stats(p.s[1].c, &s);
        assert_false(s.graceful);
        assert_int_equal(uw__sdp_conn_outq(p.s[1].c), corked ? 6 : 0);
        sp_free(&p);
    }
}

static void test_abortive_close(void **st)
{
    (void)st;
    /* No DisConn sent: no message, the LLP goes at once. */
    sp_pair p;
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    assert_int_equal(sp_send(&p.s[0], "abc", 3, 0), 3);
    unsigned before = p.s[0].out_n;
    uw__sdp_conn_abort(p.s[0].c);
    sp_drain_tx(&p.s[0]);
    assert_int_equal(p.s[0].llp, UW_SDP_LLP_ABORT);
    assert_int_equal(p.s[0].out_n, before);
    /* The peer sees the LLP reset without a DisConn: abortive. */
    uw__sdp_conn_llp_closed(p.s[1].c, UW_ECONNRESET);
    uint8_t b[8];
    sp_settle(&p);
    long n = sp_recv(&p.s[1], b, sizeof(b), 0);
    /* Data that arrived before the reset is still readable, then the error. */
    if (n > 0)
        n = sp_recv(&p.s[1], b, sizeof(b), 0);
    assert_int_equal(n, UW_ECONNRESET);
    sp_free(&p);

    /* After a DisConn: AbortConn, then the LLP once it completed. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    assert_int_equal(uw__sdp_conn_shutdown(p.s[0].c, SHUT_WR), 0);
    sp_settle(&p);
    p.s[0].hold_completions = true;
    uw__sdp_conn_abort(p.s[0].c);
    sp_drain_tx(&p.s[0]);
    assert_int_equal(p.s[0].last_mid, UW_SDP_ABORTCONN);
    /* 14.2: AbortConn is a solicited message. */
    assert_true(p.s[0].out[(p.s[0].out_head + p.s[0].out_n - 1) % SP_MAXQ].solicited);
    assert_int_equal(p.s[0].llp, UW_SDP_LLP_NONE);
    sp_deliver1(&p.s[0], &p.s[1]);
    sp_release_completions(&p.s[0]);
    sp_drain_tx(&p.s[0]);
    /* 8.2.2: the normal LLP teardown after the AbortConn, not a reset. */
    assert_int_equal(p.s[0].llp, UW_SDP_LLP_DISCONNECT);
    assert_int_equal(uw__sdp_conn_take_error(p.s[1].c), UW_ECONNRESET);
    assert_int_equal(p.s[1].llp, UW_SDP_LLP_ABORT);
    sp_free(&p);

    /* 8.2.2: unsent data is discarded, not sent ahead of the teardown:
     * corked, then held by credit. */
    for (int k = 0; k < 2; k++) {
        assert_int_equal(sp_setup(&p, NULL, NULL), 0);
        sp_side *x = &p.s[0];
        static uint8_t big[1 << 20];
        if (k == 0) {
            uw__sdp_conn_setopt(x->c, UW_SDP_OPT_CORK, 1);
            assert_int_equal(sp_send(x, "queued", 6, 0), 6);
        } else {
            assert_true(sp_send(x, big, sizeof(big), 0) > 0);
        }
        assert_true(uw__sdp_conn_outq(x->c) > 0);
        unsigned on_wire = x->out_n;
        uw__sdp_conn_abort(x->c);
        sp_drain_tx(x);
        uw__sdp_conn_llp_closed(x->c, 0);
        sp_drain_tx(x);
        assert_int_equal(x->out_n, on_wire);
        assert_int_equal(uw__sdp_conn_outq(x->c), 0);
        assert_int_equal(x->llp, UW_SDP_LLP_ABORT);
        sp_free(&p);
    }

    /* The LLP closes without a DisConn: abortive for the reader. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    uw__sdp_conn_llp_closed(p.s[1].c, 0);
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), UW_ECONNRESET);
    sp_free(&p);
}

static void test_oob(void **st)
{
    (void)st;
    sp_pair p;
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    uint8_t b[16];
    assert_int_equal(sp_recv(&p.s[1], b, 1, UW_SDP_MSG_OOB), UW_EINVAL);
    assert_int_equal(sp_send(&p.s[0], "abc", 3, UW_SDP_MSG_OOB), 3);
    assert_int_equal(sp_send(&p.s[0], "def", 3, 0), 3);
    sp_settle(&p);
    uw_sdp_stats s;
    uw__sdp_conn_stats(p.s[0].c, &s);
    assert_int_equal(s.oob_sent, 1);
    assert_true(uw__sdp_conn_poll(p.s[1].c) & POLLPRI);
    assert_int_equal(uw__sdp_conn_atmark(p.s[1].c), 0);
    /* A read stops before the mark. */
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 2);
    assert_memory_equal(b, "ab", 2);
    assert_int_equal(uw__sdp_conn_atmark(p.s[1].c), 1);
    assert_int_equal(sp_recv(&p.s[1], b, 1, UW_SDP_MSG_OOB | UW_SDP_MSG_PEEK), 1);
    assert_int_equal(sp_recv(&p.s[1], b, 1, UW_SDP_MSG_OOB), 1);
    assert_int_equal(b[0], 'c');
    assert_int_equal(sp_recv(&p.s[1], b, 1, UW_SDP_MSG_OOB), UW_EINVAL);
    /* The urgent octet is not in the stream. */
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 3);
    assert_memory_equal(b, "def", 3);
    assert_int_equal(uw__sdp_conn_atmark(p.s[1].c), 0);
    sp_free(&p);

    /* SO_OOBINLINE: it stays in the stream; MSG_OOB is EINVAL. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    uw__sdp_conn_setopt(p.s[1].c, UW_SDP_OPT_OOBINLINE, 1);
    assert_int_equal(sp_send(&p.s[0], "abc", 3, UW_SDP_MSG_OOB), 3);
    assert_int_equal(sp_send(&p.s[0], "def", 3, 0), 3);
    sp_settle(&p);
    assert_int_equal(sp_recv(&p.s[1], b, 1, UW_SDP_MSG_OOB), UW_EINVAL);
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 2);
    assert_int_equal(uw__sdp_conn_atmark(p.s[1].c), 1);
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 4);
    assert_memory_equal(b, "cdef", 4);
    sp_free(&p);

    /* Read past the mark without MSG_OOB: the urgent octet is gone. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    assert_int_equal(sp_send(&p.s[0], "x", 1, UW_SDP_MSG_OOB), 1);
    assert_int_equal(sp_send(&p.s[0], "yz", 2, 0), 2);
    sp_settle(&p);
    assert_int_equal(uw__sdp_conn_atmark(p.s[1].c), 1);
    assert_int_equal(uw__sdp_conn_inq(p.s[1].c), 0);
    assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 2);
    assert_memory_equal(b, "yz", 2);
    /* As on Linux TCP: once normal reads pass the mark, the octet is gone. */
    assert_int_equal(sp_recv(&p.s[1], b, 1, UW_SDP_MSG_OOB), UW_EINVAL);
    sp_free(&p);
}

/* OOB_PEND on the wire exactly once, on the message with the octet, and
 * that message is solicited (14.2). */
static void test_oob_wire(void **st)
{
    (void)st;
    sp_pair p;
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    uw__sdp_conn_setopt(p.s[0].c, UW_SDP_OPT_NODELAY, 1);
    assert_int_equal(sp_send(&p.s[0], "ab", 2, UW_SDP_MSG_OOB), 2);
    assert_int_equal(p.s[0].out_n, 1);
    sp_msg *m = &p.s[0].out[p.s[0].out_head];
    assert_int_equal(m->data[0], DATA);
    assert_int_equal(m->data[1], UW_SDP_OOB_PRES | UW_SDP_OOB_PEND);
    assert_true(m->solicited);
    assert_int_equal(sp_send(&p.s[0], "cd", 2, 0), 2);
    sp_drain_tx(&p.s[0]);
    sp_msg *m2 = &p.s[0].out[(p.s[0].out_head + 1) % SP_MAXQ];
    assert_int_equal(m2->data[1], 0);
    assert_false(m2->solicited);
    sp_free(&p);
}

/* A SrcAvail is answered with SendSm (9.5.2.1); its data then comes by
 * Bcopy; payload before the peer saw the SendSm is a violation (11.2). */
static void test_srcavail_forced_bcopy(void **st)
{
    (void)st;
    sp_pair p;
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    sp_side *x = &p.s[0];
    uint8_t m[256];
    /* Combined Mode: SrcAvail with payload "ab" for a 6-octet buffer. */
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 16, 1, 0, 6, "ab", 2)), 0);
    assert_int_equal(x->last_mid, UW_SDP_SENDSM);
    sp_msg *sm = &x->out[(x->out_head + x->out_n - 1) % SP_MAXQ];
    assert_true(sm->solicited);
    uint32_t sm_mseq =
        (uint32_t)sm->data[8] << 24 | sm->data[9] << 16 | sm->data[10] << 8 | sm->data[11];
    /* The rest, sent after the SendSm was received. */
    assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 2, sm_mseq, 0, "cdef", 4)), 0);
    assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 3, sm_mseq, 0, "gh", 2)), 0);
    uint8_t b[16];
    assert_int_equal(sp_recv(x, b, sizeof(b), 0), 8);
    assert_memory_equal(b, "abcdefgh", 8);
    uw_sdp_stats s;
    uw__sdp_conn_stats(x->c, &s);
    assert_int_equal(s.sendsm_sent, 1);
    sp_free(&p);

    /* Payload that did not wait for the SendSm. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 16, 1, 0, 6, "ab", 2)), 0);
    assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 2, 0, 0, "cdef", 4)), UW_EPROTO);
    sp_free(&p);

    /* Combined Mode: a SrcAvail without payload, or a second one at once. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 16, 1, 0, 6, NULL, 0)),
                     UW_EPROTO);
    sp_free(&p);
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 16, 1, 0, 6, "a", 1)), 0);
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 16, 2, 0, 6, "a", 1)),
                     UW_EPROTO);
    sp_free(&p);

    /* Buffered Mode after a ModeChange (S=0): SrcAvail is not permitted
     * (Figure 25); a ModeChange to the current Mode is a violation (12). */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    uint32_t n = sp_build(m, UW_SDP_MODECHANGE, 0, 16, 1, 0, 0, NULL, 0);
    m[16] = UW_SDP_BUFF_MODE << 4;
    assert_int_equal(sp_inject(x, m, n), 0);
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 16, 2, 0, 6, "a", 1)),
                     UW_EPROTO);
    sp_free(&p);
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    n = sp_build(m, UW_SDP_MODECHANGE, 0, 16, 1, 0, 0, NULL, 0);
    m[16] = UW_SDP_COMB_MODE << 4;
    assert_int_equal(sp_inject(x, m, n), UW_EPROTO);
    sp_free(&p);
    /* 9.5.4: a SrcAvailCancel after the SrcAvail was answered changes
     * nothing: no second SendSm, and its Bcopy data still counts. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 16, 1, 0, 6, "ab", 2)), 0);
    uint64_t sendsm = 0;
    uw__sdp_conn_stats(x->c, &s);
    sendsm = s.sendsm_sent;
    assert_int_equal(sendsm, 1);
    sm = &x->out[(x->out_head + x->out_n - 1) % SP_MAXQ];
    sm_mseq = (uint32_t)sm->data[8] << 24 | sm->data[9] << 16 | sm->data[10] << 8 | sm->data[11];
    assert_int_equal(
        sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAILCANCEL, 0, 16, 2, sm_mseq, 0, NULL, 0)), 0);
    uw__sdp_conn_stats(x->c, &s);
    assert_int_equal(s.sendsm_sent, 1);
    assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 3, sm_mseq, 0, "cdef", 4)), 0);
    assert_int_equal(sp_recv(x, b, sizeof(b), 0), 6);
    assert_memory_equal(b, "abcdef", 6);
    sp_free(&p);

    /* A SrcAvailCancel before the SendSm could go (the peer's Bufs leave
     * one credit, 10.5): the SrcAvail is discarded and exactly one SendSm
     * follows once credit allows; its remaining data is then plain Bcopy. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAIL, 0, 1, 1, 0, 6, "ab", 2)), 0);
    uw__sdp_conn_stats(x->c, &s);
    assert_int_equal(s.sendsm_sent, 0);
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SRCAVAILCANCEL, 0, 1, 2, 0, 0, NULL, 0)),
                     0);
    uw__sdp_conn_stats(x->c, &s);
    assert_int_equal(s.sendsm_sent, 0);
    /* A credit update from the peer (Data, no payload). */
    assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 3, 0, 0, NULL, 0)), 0);
    uw__sdp_conn_stats(x->c, &s);
    assert_int_equal(s.sendsm_sent, 1);
    assert_int_equal(x->last_mid, UW_SDP_SENDSM);
    sm = &x->out[(x->out_head + x->out_n - 1) % SP_MAXQ];
    sm_mseq = (uint32_t)sm->data[8] << 24 | sm->data[9] << 16 | sm->data[10] << 8 | sm->data[11];
    sp_drain_tx(x);
    assert_int_equal(x->last_mid, UW_SDP_SENDSM);
    assert_int_equal(sp_inject(x, m, sp_build(m, DATA, 0, 16, 4, sm_mseq, 0, "zz", 2)), 0);
    uw__sdp_conn_stats(x->c, &s);
    assert_int_equal(s.sendsm_sent, 1);
    assert_int_equal(sp_recv(x, b, sizeof(b), 0), 4);
    assert_memory_equal(b, "abzz", 4);
    sp_free(&p);

    /* 9.5.5: a SinkAvailCancel with every SinkAvail Processed (there were
     * none) is ignored: no SinkCancelAck, no error. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    unsigned before = x->out_n;
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SINKAVAILCANCEL, 0, 16, 1, 0, 0, NULL, 0)),
                     0);
    sp_drain_tx(x);
    assert_int_equal(x->out_n, before);
    assert_int_equal(uw__sdp_conn_state(x->c), UW_SDP_S_OPEN);
    sp_free(&p);

    /* SinkAvail while our send half is Combined (Figure 25). */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    x = &p.s[0];
    assert_int_equal(sp_inject(x, m, sp_build(m, UW_SDP_SINKAVAIL, 0, 16, 1, 0, 4096, NULL, 0)),
                     UW_EPROTO);
    sp_free(&p);
}

static void test_chrcvbuf(void **st)
{
    (void)st;
    sp_pair p;
    uw_sdp_conn_cfg ac = cfg(true, 4096, 6);
    ac.rcv_size_max = 65536;
    assert_int_equal(sp_setup(&p, NULL, &ac), 0);
    /* Growth: acknowledged only after the old-size buffers are consumed. */
    assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 16384), 0);
    assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 8192), UW_EBUSY);
    sp_settle(&p);
    uw_sdp_stats s;
    uw__sdp_conn_stats(p.s[1].c, &s);
    assert_int_equal(s.chrcvbuf_received, 1);
    assert_int_equal(s.chrcvbufack_sent, 0);
    uint8_t *big = calloc(1, 1 << 20);
    uint8_t *rb = malloc(1 << 20);
    size_t sent = 0, got = 0;
    for (int i = 0; i < 200 && got < (1u << 20); i++) {
        long n = sp_send(&p.s[0], big + sent, (1u << 20) - sent, 0);
        if (n > 0)
            sent += (size_t)n;
        sp_settle(&p);
        n = sp_recv(&p.s[1], rb + got, (1u << 20) - got, 0);
        if (n > 0)
            got += (size_t)n;
        sp_settle(&p);
        assert_false(p.s[1].too_long);
        assert_int_equal(p.s[1].rc, 0);
    }
    assert_int_equal(got, 1u << 20);
    uw__sdp_conn_stats(p.s[1].c, &s);
    assert_int_equal(s.chrcvbufack_sent, 1);
    uw_sdp_params pa;
    uw__sdp_conn_params(p.s[0].c, &pa);
    assert_int_equal(pa.remote_rcv_size, 16384);
    /* Decrease: applies at once; the peer keeps at least what was asked. */
    assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 2048), 0);
    sp_settle(&p);
    uw__sdp_conn_params(p.s[0].c, &pa);
    assert_int_equal(pa.remote_rcv_size, 2048);
    uw__sdp_conn_params(p.s[1].c, &pa);
    assert_int_equal(pa.local_rcv_size, 2048);
    free(big);
    free(rb);
    sp_free(&p);

    /* 10.6.1: both at once; the acceptor ignores the connector's, the
     * connector answers and then asks again. */
    assert_int_equal(sp_setup(&p, NULL, NULL), 0);
    assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 8192), 0);
    assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[1].c, 4096), 0);
    sp_drain_tx(&p.s[0]);
    sp_drain_tx(&p.s[1]);
    sp_settle(&p);
    uw_sdp_stats s0, s1;
    uw__sdp_conn_stats(p.s[0].c, &s0);
    uw__sdp_conn_stats(p.s[1].c, &s1);
    assert_int_equal(s0.chrcvbufack_sent, 1);
    assert_int_equal(s0.chrcvbuf_sent, 2);
    assert_int_equal(s1.chrcvbufack_sent, 1);
    assert_int_equal(s1.chrcvbufack_received, 1);
    assert_int_equal(p.s[0].rc, 0);
    assert_int_equal(p.s[1].rc, 0);
    sp_free(&p);

    /* 10.6: a growth answered with the original size (the peer's limit)
     * ends growth requests; a shrink refused likewise ends shrinks. */
    {
        uw_sdp_conn_cfg lim = cfg(true, 4096, 6);
        lim.rcv_size_max = 4096;
        lim.rcv_size_min = 4096;
        assert_int_equal(sp_setup(&p, NULL, &lim), 0);
        assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 16384), 0);
        sp_settle(&p);
        uw_sdp_params pr;
        uw__sdp_conn_params(p.s[0].c, &pr);
        assert_int_equal(pr.remote_rcv_size, 4096);
        assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 32768), UW_EPERM);
        assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 2048), 0);
        sp_settle(&p);
        uw__sdp_conn_params(p.s[0].c, &pr);
        assert_int_equal(pr.remote_rcv_size, 4096);
        assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 1024), UW_EPERM);
        assert_int_equal(p.s[0].rc, 0);
        assert_int_equal(p.s[1].rc, 0);
        sp_free(&p);
    }

    /* 10.6: a decrease may not go below the size requested, and an Ack
     * without a request is a violation. */
    for (int k = 0; k < 2; k++) {
        assert_int_equal(sp_setup(&p, NULL, NULL), 0);
        if (k == 0)
            assert_int_equal(uw__sdp_conn_chrcvbuf(p.s[0].c, 2048), 0);
        sp_drain_tx(&p.s[0]);
        uint8_t m[64];
        uw_sdp_stats st0;
        uw__sdp_conn_stats(p.s[0].c, &st0);
        uint32_t ours = (uint32_t)st0.msgs_sent; /* our last MSeq */
        assert_int_equal(sp_inject(&p.s[0], m,
                                   sp_build(m, UW_SDP_CHRCVBUFACK, 0, 16, 1, ours,
                                            k == 0 ? 1024 : 4096, NULL, 0)),
                         UW_EPROTO);
        assert_non_null(uw__sdp_conn_why(p.s[0].c));
        sp_free(&p);
    }
}

/* Nagle: while a data message is in flight, small sends coalesce; with
 * TCP_NODELAY each goes at once; cork holds until uncorked. */
static void test_nagle_and_cork(void **st)
{
    (void)st;
    for (int mode = 0; mode < 3; mode++) {
        sp_pair p;
        assert_int_equal(sp_setup(&p, NULL, NULL), 0);
        sp_side *x = &p.s[0];
        x->hold_completions = true;
        if (mode == 1)
            uw__sdp_conn_setopt(x->c, UW_SDP_OPT_NODELAY, 1);
        if (mode == 2)
            uw__sdp_conn_setopt(x->c, UW_SDP_OPT_CORK, 1);
        for (int i = 0; i < 100; i++)
            assert_int_equal(sp_send(x, "0123456789", 10, 0), 10);
        unsigned on_wire = x->out_n;
        if (mode == 0)
            assert_int_equal(on_wire, 1); /* the first, then the rest waits */
        else if (mode == 1)
            assert_true(on_wire >= 10); /* credits limit it, not Nagle */
        else
            assert_int_equal(on_wire, 0);
        if (mode == 2) {
            uw__sdp_conn_setopt(x->c, UW_SDP_OPT_CORK, 0);
            sp_drain_tx(x);
            assert_int_equal(x->out_n, 1);
        }
        x->hold_completions = false;
        sp_release_completions(x);
        sp_settle(&p);
        uint8_t b[2000];
        assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 1000);
        sp_free(&p);
    }
    /* TCP's 200 ms ceiling on cork and MSG_MORE (the driver's timer):
     * held() names the wait, release_held() ends it; cork stays set. */
    for (int mode = 0; mode < 2; mode++) {
        sp_pair p;
        assert_int_equal(sp_setup(&p, NULL, NULL), 0);
        sp_side *x = &p.s[0];
        if (mode == 0)
            uw__sdp_conn_setopt(x->c, UW_SDP_OPT_CORK, 1);
        assert_false(uw__sdp_conn_held(x->c));
        assert_int_equal(sp_send(x, "abc", 3, mode == 1 ? UW_SDP_MSG_MORE : 0), 3);
        assert_int_equal(x->out_n, 0);
        assert_true(uw__sdp_conn_held(x->c));
        uw__sdp_conn_release_held(x->c);
        assert_false(uw__sdp_conn_held(x->c));
        sp_drain_tx(x);
        assert_int_equal(x->out_n, 1);
        sp_settle(&p);
        assert_int_equal(sp_send(x, "de", 2, mode == 1 ? UW_SDP_MSG_MORE : 0), 2);
        assert_int_equal(x->out_n, 0);
        assert_true(uw__sdp_conn_held(x->c)); /* still corked, or MSG_MORE again */
        uw__sdp_conn_release_held(x->c);
        sp_drain_tx(x);
        sp_settle(&p);
        uint8_t b[8];
        assert_int_equal(sp_recv(&p.s[1], b, sizeof(b), 0), 5);
        assert_memory_equal(b, "abcde", 5);
        sp_free(&p);
    }
}

/* A peer with the minimum of 3 buffers that updates our credit only at one
 * credit or less (all 10.5 asks) leaves us at two with data queued; a poke
 * (a credit update, legal at two) brings us to one and so obliges its
 * answer. The peer is played by hand. */
static void test_poke_minimal_peer(void **st)
{
    (void)st;
    sp_side x;
    /* HelloAck: Bufs 3. */
    connector_after(&x, "01000003 0000001c 00000000 00000000 11000008 00010000 00010001", 0);
    uw_sdp_conn *c = x.c;
    uint8_t m[64];
    uw__sdp_conn_setopt(c, UW_SDP_OPT_NODELAY, 1);
    assert_false(uw__sdp_conn_stalled(c));
    assert_int_equal(uw__sdp_conn_poke(c), UW_EAGAIN); /* credit 3, nothing queued */
    assert_int_equal(sp_send(&x, "abc", 3, 0), 3);
    assert_int_equal(x.out_n, 1);
    sp_release_completions(&x);
    assert_false(uw__sdp_conn_stalled(c)); /* credit 2, nothing queued */
    assert_int_equal(sp_send(&x, "def", 3, 0), 3);
    assert_int_equal(x.out_n, 1); /* held: payload needs three */
    assert_true(uw__sdp_conn_stalled(c));
    /* The peer's application read "abc" and its buffer is posted again,
     * but it says nothing: we are at two, not one. The poke: */
    assert_int_equal(uw__sdp_conn_poke(c), 0);
    assert_false(uw__sdp_conn_stalled(c));
    sp_drain_tx(&x);
    assert_int_equal(x.out_n, 2);
    sp_msg *pk = &x.out[(x.out_head + 1) % SP_MAXQ];
    assert_int_equal(pk->len, UW_SDP_BSDH_LEN);
    assert_int_equal(pk->data[0], DATA);
    sp_release_completions(&x);
    uw_sdp_stats s;
    uw__sdp_conn_stats(c, &s);
    assert_int_equal(s.pokes_sent, 1);
    assert_int_equal(s.send_credit, 1);
    assert_false(uw__sdp_conn_stalled(c)); /* at one the peer must answer */
    /* Its answer: Bufs 3, MSeqAck our poke (MSeq 2). */
    assert_int_equal(sp_inject(&x, m, sp_build(m, DATA, 0, 3, 1, 2, 0, NULL, 0)), 0);
    assert_int_equal(x.out_n, 3);
    sp_msg *d = &x.out[(x.out_head + 2) % SP_MAXQ];
    assert_int_equal(d->len, UW_SDP_BSDH_LEN + 3);
    assert_memory_equal(d->data + UW_SDP_BSDH_LEN, "def", 3);
    sp_free_side(&x);
}

/* Configurations outside section 10 and 6.2.1 are refused at creation. */
static void test_config_rejected(void **st)
{
    (void)st;
    uw_sdp_conn *c;
    uw_sdp_conn_cfg k = cfg(false, 0, 0);
    k.rcv_bufs = 2;
    assert_int_equal(uw__sdp_conn_create(&c, &k), UW_EINVAL);
    k = cfg(false, 0, 0);
    k.rcv_size = 36;
    assert_int_equal(uw__sdp_conn_create(&c, &k), UW_EINVAL);
    k = cfg(false, 0, 0);
    k.max_adverts = 0;
    assert_int_equal(uw__sdp_conn_create(&c, &k), UW_EINVAL);
    k = cfg(false, 0, 0);
    k.ird = 0;
    assert_int_equal(uw__sdp_conn_create(&c, &k), UW_EINVAL);
    /* 6.2.1.7, 6.2.2.6: LocORD above 0. */
    k = cfg(false, 0, 0);
    k.ord = 0;
    assert_int_equal(uw__sdp_conn_create(&c, &k), UW_EINVAL);
    k = cfg(true, 0, 0);
    k.ord = 0;
    assert_int_equal(uw__sdp_conn_create(&c, &k), UW_EINVAL);
}

/* notes section 2: MPA's IRD/ORD bound the Hello's and HelloAck's; a grant
 * of 0 (no RDMA Read) leaves them at 1, as 6.2.1.6 requires. */
static void test_mpa_limits(void **st)
{
    (void)st;
    uw_sdp_conn *c;
    uw_sdp_conn_cfg k = cfg(true, 0, 0);
    k.ird = 4, k.ord = 4;
    assert_int_equal(uw__sdp_conn_create(&c, &k), 0);
    uw__sdp_conn_mpa_limits(c, 2, 3);
    uw__sdp_conn_mpa_limits(c, 0, 0);
    uw__sdp_conn_mpa_limits(c, 8, 8); /* never up */
    uint8_t h[32];
    tu_unhex("00000004 00000020 00000000 00000000 11000008 00010000 00010000 00040004", h, 32);
    assert_int_equal(uw__sdp_conn_accept_hello(c, h, 32, NULL), 0);
    uw_sdp_post po;
    while (uw__sdp_conn_next_post(c, &po) == 1)
        ;
    uw_sdp_tx t;
    assert_int_equal(uw__sdp_conn_next_tx(c, &t), 1);
    uw_sdp_msg m;
    assert_int_equal(uw__sdp_decode(t.addr, t.len, &m), 0);
    assert_int_equal(m.bsdh.mid, UW_SDP_HELLOACK);
    assert_int_equal(m.u.helloack.loc_ird, 2);
    assert_int_equal(m.u.helloack.loc_ord, 3);
    uw__sdp_conn_destroy(c);
}

/* 6.1.5: MSeq and MSeqAck wrap to 0 after 0xFFFFFFFF; credits, ordering
 * and acknowledgements hold across it. Small buffers make the stream cross
 * the wrap in both directions. */
static void test_mseq_wrap(void **st)
{
    (void)st;
    sp_pair p;
    uw_sdp_conn_cfg cc = cfg(false, 1024, 6), ac = cfg(true, 1024, 5);
    assert_int_equal(sp_setup(&p, &cc, &ac), 0);
    const uint32_t d0 = 0xFFFFFF00u, d1 = 0xFFFFFE00u;
    assert_int_equal(uw__sdp_conn_test_shift_seq(p.s[0].c, d0, d1), 0);
    assert_int_equal(uw__sdp_conn_test_shift_seq(p.s[1].c, d1, d0), 0);
    assert_int_equal(uw__sdp_conn_test_shift_seq(p.s[1].c, 5, 0), UW_EINVAL);
    enum { N = 700000 };
    uint8_t *src[2], *dst[2];
    size_t sent[2] = {0, 0}, got[2] = {0, 0};
    tu_rng r;
    tu_rng_init(&r, tu_seed(29));
    for (int i = 0; i < 2; i++) {
        src[i] = malloc(N);
        dst[i] = malloc(N);
        tu_rng_fill(&r, src[i], N);
    }
    bool wrapped[2] = {false, false};
    uint32_t prev[2] = {0, 0};
    for (int round = 0; round < 100000 && (got[0] < N || got[1] < N); round++) {
        for (int i = 0; i < 2; i++) {
            sp_side *x = &p.s[i], *y = &p.s[1 - i];
            if (sent[i] < N) {
                size_t k = 1 + tu_rng_below(&r, 5000);
                if (k > N - sent[i])
                    k = N - sent[i];
                long n = sp_send(x, src[i] + sent[i], k, 0);
                if (n > 0)
                    sent[i] += (size_t)n;
                else
                    assert_int_equal(n, UW_EAGAIN);
            }
            for (int j = 0; j < 3; j++)
                sp_deliver1(x, y);
            long n = sp_recv(y, dst[i] + got[i], 1 + tu_rng_below(&r, 4000), 0);
            if (n > 0)
                got[i] += (size_t)n;
            else
                assert_int_equal(n, UW_EAGAIN);
        }
        sp_settle(&p);
        for (int i = 0; i < 2; i++) {
            assert_int_equal(p.s[i].rc, 0);
            assert_false(p.s[i].overrun);
            uw_sdp_stats s;
            uw__sdp_conn_stats(p.s[i].c, &s);
            uint32_t last = (uint32_t)(s.msgs_sent + (i ? d1 : d0));
            if (last < prev[i])
                wrapped[i] = true;
            prev[i] = last;
        }
    }
    assert_true(wrapped[0] && wrapped[1]);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(got[i], N);
        assert_memory_equal(src[i], dst[i], N);
        free(src[i]);
        free(dst[i]);
    }
    sp_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_params),
        cmocka_unit_test(test_hello_wire),
        cmocka_unit_test(test_hello_rejected),
        cmocka_unit_test(test_helloack_checks),
        cmocka_unit_test(test_stream_and_credits),
        cmocka_unit_test(test_gratuitous_update),
        cmocka_unit_test(test_receive_violations),
        cmocka_unit_test(test_graceful_close),
        cmocka_unit_test(test_abortive_close),
        cmocka_unit_test(test_reset_after_disconn),
        cmocka_unit_test(test_oob),
        cmocka_unit_test(test_oob_wire),
        cmocka_unit_test(test_srcavail_forced_bcopy),
        cmocka_unit_test(test_chrcvbuf),
        cmocka_unit_test(test_nagle_and_cork),
        cmocka_unit_test(test_config_rejected),
        cmocka_unit_test(test_mpa_limits),
        cmocka_unit_test(test_mseq_wrap),
        cmocka_unit_test(test_poke_minimal_peer),
        cmocka_unit_test(test_autotune),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
