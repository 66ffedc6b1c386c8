/* The connection manager over the in-memory transport on a virtual clock
 * (mem_world.h): setup in every MPA variant, reject, every timeout,
 * Terminate both ways, FIN ordering, a peer that vanishes. No sockets, no
 * sleeps: every run takes the same path. The loopback tests
 * (test_verbs_loop, test_cm_badpeer) keep covering the socket code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "mem_world.h"

static const uint32_t lens[] = {0, 1, 13, 1000, 5000, 40000};

/* RFC 5044 and RFC 6581: each revision with CRC and markers on and off,
 * both ends asking the same; the negotiated result and the data. */
static void test_setup_variants(void **st)
{
    (void)st;
    for (int rev = 1; rev <= 2; rev++)
        for (int crc = 0; crc < 2; crc++)
            for (int mk = 0; mk < 2; mk++) {
                uw_conn_param p = {
                    .rev = (uint8_t)rev, .crc = crc ? UW_CRC_REQUIRE : UW_CRC_AVOID, .markers = mk};
                mw w;
                mw_init(&w, 0, 0);
                uw_mpa_params m = mw_connect(&w, &p, &p);
                assert_int_equal(m.rev, rev);
                assert_int_equal(m.crc, crc);
                assert_int_equal(m.markers_tx, mk);
                assert_int_equal(m.markers_rx, mk);
                for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
                    mw_exchange(&w, lens[i], false);
                    mw_exchange(&w, lens[i], true);
                }
                mw_fini(&w);
            }
}

/* RFC 6581 peer-to-peer with each RTR: the responder's ESTABLISHED waits
 * for the initiator's RTR, which comes only once the initiator runs. */
static void test_p2p_rtr(void **st)
{
    (void)st;
    static const uint8_t rtrs[] = {UW_MPA_RTR_SEND, UW_MPA_RTR_WRITE, UW_MPA_RTR_READ};
    for (int i = 0; i < 3; i++) {
        uw_conn_param pa = {.p2p = true, .rtr = rtrs[i]};
        uw_conn_param pb = {.p2p = true, .rtr = UW_MPA_RTR_ALL};
        mw w;
        mw_init(&w, 0, 0);
        mw_dial(&w, &pa, &pb);
        uw_cm_event ev = mw_expect(&w, &w.b, UW_CM_CONNECT_REQUEST);
        w.b.qp = ev.qp;
        assert_int_equal(uw_accept(w.b.qp, NULL), 0);
        mw_run(&w, MW_B, w.now);
        assert_int_equal(uw_cm_get_event(w.b.ctx, &ev), 0);
        ev = mw_expect(&w, &w.a, UW_CM_ESTABLISHED);
        assert_true(ev.mpa.p2p);
        assert_int_equal(ev.mpa.rtr, rtrs[i]);
        ev = mw_expect(&w, &w.b, UW_CM_ESTABLISHED);
        assert_int_equal(ev.mpa.rtr, rtrs[i]);
        mw_exchange(&w, 100, false);
        mw_exchange(&w, 100, true);
        mw_fini(&w);
    }
}

/* uw_reject() with private data: the initiator gets it in REJECTED; the
 * responder writes the Reply, then its FIN, and closes at the
 * initiator's FIN, reporting nothing. */
static void test_reject_private_data(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    mw_dial(&w, NULL, NULL);
    uw_cm_event ev = mw_expect(&w, &w.b, UW_CM_CONNECT_REQUEST);
    w.b.qp = ev.qp;
    assert_int_equal(uw_reject(w.b.qp, "not now", 7), 0);
    ev = mw_expect(&w, &w.a, UW_CM_REJECTED);
    assert_int_equal(ev.err, UW_ECONNREFUSED);
    assert_int_equal(ev.private_data_len, 7);
    assert_memory_equal(ev.private_data, "not now", 7);
    mw_idle(&w);
    assert_int_equal(uw_qp_state(w.a.qp), UW_QPS_ERROR);
    assert_int_equal(uw_qp_state(w.b.qp), UW_QPS_CLOSED);
    mw_no_event(&w, &w.b);
    assert_int_equal(uw__mem_fin_at(w.b.end), (int64_t)uw__mem_sent(w.b.end));
    assert_non_null(strstr(w.b.trace, "WAIT_ACCEPT -> LINGER (uw_reject)"));
    assert_non_null(strstr(w.b.trace, "LINGER -> DRAIN"));
    assert_non_null(strstr(w.b.trace, "DRAIN -> CLOSED (peer's FIN)"));
    mw_fini(&w);
}

/* A Request the responder cannot serve (no RTR type both sides take,
 * RFC 6581 9) is refused with a rejecting Reply: the initiator hears why
 * in REJECTED, the responder's application never sees the connection, and
 * its listener reports the failed startup once the Reply and FIN are out
 * and the initiator has closed (the QP is freed, not left behind). */
static void test_refused_request(void **st)
{
    (void)st;
    /* Only a Read RTR on the responder, with no IRD slot for it: our ORD
     * 0x3FFF leaves its IRD at 0 (RFC 6581 9.1), so it supports no type. */
    uw_conn_param pa = {.p2p = true, .rtr = UW_MPA_RTR_READ, .ord = UW_MPA_NO_NEGOTIATION};
    uw_conn_param pb = {.p2p = true, .rtr = UW_MPA_RTR_READ, .ird = UW_CONN_ZERO};
    mw w;
    mw_init(&w, 0, 0);
    mw_dial(&w, &pa, &pb);
    uw_cm_event ev = mw_expect(&w, &w.a, UW_CM_REJECTED);
    assert_int_equal(ev.err, UW_ECONNREFUSED);
    mw_idle(&w);
    ev = mw_expect(&w, &w.b, UW_CM_CONNECT_ERROR);
    assert_ptr_equal(ev.listener, w.b.l);
    assert_null(ev.qp);
    assert_int_equal(ev.err, UW_EMPA_RTR);
    mw_no_event(&w, &w.b);
    assert_non_null(strstr(w.b.trace, "WAIT_REQUEST -> LINGER (refusing Reply)"));
    assert_non_null(strstr(w.b.trace, "LINGER -> DRAIN"));
    /* The Reply went before the FIN. */
    assert_int_equal(uw__mem_fin_at(w.b.end), (int64_t)uw__mem_sent(w.b.end));
    mw_fini(&w);
}

/* Checks that nothing happens on s until just before t, and that event
 * `type` with err comes at t. */
static uw_cm_event fires_at(mw *w, int mask, mw_side *s, uint64_t t, int type, int err)
{
    mw_run(w, mask, t - 1);
    uw_cm_event ev;
    assert_int_equal(uw_cm_get_event(s->ctx, &ev), 0);
    mw_run(w, mask, t);
    assert_int_equal(uw_cm_get_event(s->ctx, &ev), 1);
    assert_int_equal(ev.type, type);
    assert_int_equal(ev.err, err);
    return ev;
}

/* The initiator's peer accepts the connection and never answers. */
static void test_timeout_reply(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    uw_conn_param pa = {.timeout_ms = 3000};
    uint64_t t0 = w.now;
    mw_dial_a(&w, &pa);
    mw_idle(&w);
    assert_non_null(strstr(w.a.trace, "CONNECTING -> WAIT_REPLY"));
    assert_int_equal(uw_qp_state(w.a.qp), UW_QPS_CONNECTING);
    fires_at(&w, MW_AB, &w.a, t0 + 3000 * MW_MS, UW_CM_CONNECT_ERROR, UW_ETIMEDOUT);
    assert_int_equal(uw_qp_state(w.a.qp), UW_QPS_ERROR);
    mw_fini(&w);
}

/* A connection arrives and no Request comes: the listener reports it
 * (the QP was never shown) at the listener's timeout. */
static void test_timeout_request(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    uw_conn_param pb = {.timeout_ms = 2000};
    uint64_t t0 = w.now;
    mw_dial_b(&w, &pb);
    uw_cm_event ev =
        fires_at(&w, MW_AB, &w.b, t0 + 2000 * MW_MS, UW_CM_CONNECT_ERROR, UW_ETIMEDOUT);
    assert_ptr_equal(ev.listener, w.b.l);
    assert_null(ev.qp);
    mw_fini(&w);
}

/* Peer-to-peer: the responder accepted, and the RTR never comes (the
 * initiator is never run again). The startup deadline starts again at
 * uw_accept(). */
static void test_timeout_rtr(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    uw_conn_param pa = {.p2p = true, .rtr = UW_MPA_RTR_SEND};
    uw_conn_param pb = {.p2p = true, .rtr = UW_MPA_RTR_ALL, .timeout_ms = 1500};
    mw_dial(&w, &pa, &pb);
    uw_cm_event ev = mw_expect(&w, &w.b, UW_CM_CONNECT_REQUEST);
    w.b.qp = ev.qp;
    w.now += 700 * MW_MS; /* the application took its time */
    uint64_t t1 = w.now;
    assert_int_equal(uw_accept(w.b.qp, NULL), 0);
    ev = fires_at(&w, MW_B, &w.b, t1 + 1500 * MW_MS, UW_CM_CONNECT_ERROR, UW_ETIMEDOUT);
    assert_ptr_equal(ev.qp, w.b.qp);
    assert_int_equal(uw_qp_state(w.b.qp), UW_QPS_ERROR);
    mw_fini(&w);
}

/* After a reject Reply and our FIN, the responder waits 2 s for the
 * initiator's FIN (it never comes), then closes without a word. */
static void test_timeout_linger_reject(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    mw_dial(&w, NULL, NULL);
    uw_cm_event ev = mw_expect(&w, &w.b, UW_CM_CONNECT_REQUEST);
    w.b.qp = ev.qp;
    uint64_t t1 = w.now;
    assert_int_equal(uw_reject(w.b.qp, "no", 2), 0);
    mw_run(&w, MW_B, t1 + 2000 * MW_MS - 1);
    assert_non_null(strstr(w.b.trace, "LINGER -> DRAIN"));
    assert_null(strstr(w.b.trace, "-> CLOSED"));
    assert_int_equal(uw__mem_fin_at(w.b.end), (int64_t)uw__mem_sent(w.b.end));
    mw_run(&w, MW_B, t1 + 2000 * MW_MS);
    assert_non_null(strstr(w.b.trace, "DRAIN -> CLOSED (linger timed out)"));
    assert_int_equal(uw_cm_get_event(w.b.ctx, &ev), 0);
    /* The Reply was there all along, before the FIN. */
    ev = mw_expect(&w, &w.a, UW_CM_REJECTED);
    assert_int_equal(ev.private_data_len, 2);
    mw_fini(&w);
}

static void post_recv(mw_side *s, uint32_t len)
{
    uw_sge rs = {(uint64_t)(uintptr_t)s->buf, len, uw_mr_stag(s->mr)};
    uw_recv_wr rw = {.wr_id = 50, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(uw_post_recv(s->qp, &rw, 1, NULL), 0);
}

/* One Write of 100 octets from x ending 50 past y's region: y must answer
 * with a Terminate (RFC 5040 base or bounds violation). */
static void bad_write(mw_side *x, mw_side *y)
{
    memset(y->buf, 0x5A, MW_BUF);
    uw_sge ss = {(uint64_t)(uintptr_t)x->buf, 100, uw_mr_stag(x->mr)};
    uw_send_wr ww = {.wr_id = 9,
                     .opcode = UW_WR_RDMA_WRITE,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &ss,
                     .num_sge = 1,
                     .remote_addr = (uint64_t)(uintptr_t)(y->buf + MW_BUF - 50),
                     .rkey = uw_mr_stag(y->mr)};
    assert_int_equal(uw_post_send(x->qp, &ww, 1, NULL), 0);
}

static void untouched(const mw_side *y)
{
    for (size_t i = 0; i < MW_BUF; i++)
        if (y->buf[i] != 0x5A)
            fail_msg("memory touched at %zu", i);
}

/* A Terminate sent after our FIN is never seen: it is written, then the
 * FIN (DRAIN), and the peer reads it before the FIN. While the peer says
 * nothing, DRAIN lasts 2 s. */
static void test_timeout_linger_terminate(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    mw_connect(&w, NULL, NULL);
    bad_write(&w.a, &w.b);
    mw_run(&w, MW_B, w.now);
    uint64_t t1 = w.now;
    uw_cm_event ev;
    assert_int_equal(uw_cm_get_event(w.b.ctx, &ev), 1);
    assert_int_equal(ev.type, UW_CM_TERMINATED);
    assert_false(ev.term_received);
    assert_int_equal(ev.err, UW_EDDP_BOUNDS);
    assert_int_equal(uw_qp_state(w.b.qp), UW_QPS_ERROR);
    assert_int_equal(uw__mem_fin_at(w.b.end), (int64_t)uw__mem_sent(w.b.end));
    mw_run(&w, MW_B, t1 + 2000 * MW_MS - 1);
    assert_null(strstr(w.b.trace, "-> CLOSED"));
    mw_run(&w, MW_B, t1 + 2000 * MW_MS);
    assert_non_null(strstr(w.b.trace, "DRAIN -> CLOSED (linger timed out)"));
    untouched(&w.b);
    ev = mw_expect(&w, &w.a, UW_CM_TERMINATED);
    assert_true(ev.term_received);
    assert_int_equal(ev.term.layer, UW_TERM_DDP);
    mw_fini(&w);
}

/* A bad Write each way: the target sends the Terminate, then its FIN; the
 * writer reports the Terminate (not the FIN: it came first), its request
 * is flushed, both QPs end in ERROR and no octet of the target moved. */
static void test_terminate_both_ways(void **st)
{
    (void)st;
    for (int dir = 0; dir < 2; dir++) {
        mw w;
        mw_init(&w, 0, 0);
        mw_connect(&w, NULL, NULL);
        mw_side *x = dir ? &w.b : &w.a, *y = dir ? &w.a : &w.b;
        /* The responder sends nothing before the initiator's first FPDU. */
        mw_exchange(&w, 13, false);
        post_recv(x, 100);
        bad_write(x, y);
        uw_cm_event ev = mw_expect(&w, y, UW_CM_TERMINATED);
        assert_false(ev.term_received);
        assert_int_equal(ev.term.layer, UW_TERM_DDP);
        assert_int_equal(ev.term.etype, 1);
        assert_int_equal(ev.term.ecode, 1);
        uw_term sent = ev.term;
        ev = mw_expect(&w, x, UW_CM_TERMINATED);
        assert_true(ev.term_received);
        assert_int_equal(ev.err, UW_ETERM_RECEIVED);
        assert_int_equal(ev.term.layer, sent.layer);
        assert_int_equal(ev.term.etype, sent.etype);
        assert_int_equal(ev.term.ecode, sent.ecode);
        mw_no_event(&w, x);
        mw_no_event(&w, y);
        assert_int_equal(uw__mem_fin_at(y->end), (int64_t)uw__mem_sent(y->end));
        /* A Write completes once it is sent; the receive is flushed. */
        uw_wc wc = mw_wc(&w, x);
        assert_int_equal(wc.wr_id, 9);
        assert_int_equal(wc.status, UW_WC_SUCCESS);
        wc = mw_wc(&w, x);
        assert_int_equal(wc.wr_id, 50);
        assert_int_equal(wc.status, UW_WC_WR_FLUSH_ERR);
        assert_int_equal(uw_qp_state(x->qp), UW_QPS_ERROR);
        assert_int_equal(uw_qp_state(y->qp), UW_QPS_ERROR);
        untouched(y);
        mw_fini(&w);
    }
}

/* One flipped bit in a Send's FPDU: an MPA CRC error (RFC 5044 error 2),
 * reported in an LLP Terminate; the receive never completes with data. */
static void test_terminate_crc(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    uw_conn_param p = {.crc = UW_CRC_REQUIRE};
    mw_connect(&w, &p, &p);
    memset(w.b.buf, 0, MW_BUF);
    uw_sge rs = {(uint64_t)(uintptr_t)w.b.buf, 1000, uw_mr_stag(w.b.mr)};
    uw_recv_wr rw = {.wr_id = 5, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(uw_post_recv(w.b.qp, &rw, 1, NULL), 0);
    memset(w.a.buf, 0xEE, 600);
    uw__mem_flip(w.a.end, 300); /* in the payload */
    uw_sge ss = {(uint64_t)(uintptr_t)w.a.buf, 600, uw_mr_stag(w.a.mr)};
    uw_send_wr sw = {.wr_id = 6, .opcode = UW_WR_SEND, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(uw_post_send(w.a.qp, &sw, 1, NULL), 0);
    uw_cm_event ev = mw_expect(&w, &w.b, UW_CM_TERMINATED);
    assert_false(ev.term_received);
    assert_int_equal(ev.err, UW_EMPA_CRC);
    assert_int_equal(ev.term.layer, UW_TERM_LLP);
    ev = mw_expect(&w, &w.a, UW_CM_TERMINATED);
    assert_true(ev.term_received);
    assert_int_equal(ev.term.layer, UW_TERM_LLP);
    uw_wc wc = mw_wc(&w, &w.b);
    assert_int_equal(wc.wr_id, 5);
    assert_int_not_equal(wc.status, UW_WC_SUCCESS);
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(w.b.buf[i], 0);
    mw_fini(&w);
}

static void send_then_fin(mw_side *s, uint32_t len)
{
    memset(s->buf, 0xC3, len);
    uw_sge ss = {(uint64_t)(uintptr_t)s->buf, len, uw_mr_stag(s->mr)};
    uw_send_wr sw = {
        .wr_id = 51, .opcode = UW_WR_SEND, .flags = UW_SEND_SIGNALED, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(uw_post_send(s->qp, &sw, 1, NULL), 0);
    assert_int_equal(uw_disconnect(s->qp), 0);
}

static void got_all(mw *w, mw_side *s, uint32_t len)
{
    uw_wc wc = mw_wc(w, s);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.opcode, UW_WC_RECV);
    assert_int_equal(wc.byte_len, len);
    for (uint32_t i = 0; i < len; i++)
        assert_int_equal(s->buf[i], 0xC3);
}

/* A Send far larger than the pair holds, then uw_disconnect() at once,
 * from each side in turn: the FIN waits for the last FPDU, the receiver
 * gets the whole message and then DISCONNECTED, and both end CLOSED by
 * the paths of the state diagram. */
static void test_graceful_close_order(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 4096, 0);
    mw_connect(&w, NULL, NULL);
    post_recv(&w.b, 60000);
    send_then_fin(&w.a, 60000);
    got_all(&w, &w.b, 60000);
    assert_int_equal(mw_wc(&w, &w.a).status, UW_WC_SUCCESS);
    mw_expect(&w, &w.b, UW_CM_DISCONNECTED);
    assert_int_equal(uw__mem_fin_at(w.a.end), (int64_t)uw__mem_sent(w.a.end));
    assert_int_equal(uw_qp_state(w.a.qp), UW_QPS_CLOSING);
    assert_int_equal(uw_qp_state(w.b.qp), UW_QPS_RTS);
    mw_no_event(&w, &w.a);

    post_recv(&w.a, 30000);
    send_then_fin(&w.b, 30000);
    got_all(&w, &w.a, 30000);
    assert_int_equal(mw_wc(&w, &w.b).status, UW_WC_SUCCESS);
    mw_expect(&w, &w.a, UW_CM_DISCONNECTED);
    assert_int_equal(uw__mem_fin_at(w.b.end), (int64_t)uw__mem_sent(w.b.end));
    assert_int_equal(uw_qp_state(w.a.qp), UW_QPS_CLOSED);
    assert_int_equal(uw_qp_state(w.b.qp), UW_QPS_CLOSED);
    assert_non_null(strstr(w.a.trace, "RTS -> CLOSING"));
    assert_non_null(strstr(w.a.trace, "CLOSING -> CLOSED"));
    assert_non_null(strstr(w.b.trace, "RTS -> PEER_CLOSED"));
    assert_non_null(strstr(w.b.trace, "PEER_CLOSED -> CLOSED"));
    mw_no_event(&w, &w.a);
    mw_no_event(&w, &w.b);
    mw_fini(&w);
}

/* The responder's host vanishes (reset) after the Request reached it:
 * the initiator's setup fails with ECONNRESET. */
static void test_vanish_handshake_initiator(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    mw_dial(&w, NULL, NULL);
    mw_run(&w, MW_A, w.now);
    assert_non_null(strstr(w.a.trace, "CONNECTING -> WAIT_REPLY"));
    uw__mem_reset(w.b.end);
    mw_run(&w, MW_A, w.now);
    uw_cm_event ev;
    assert_int_equal(uw_cm_get_event(w.a.ctx, &ev), 1);
    assert_int_equal(ev.type, UW_CM_CONNECT_ERROR);
    assert_int_equal(ev.err, UW_ECONNRESET);
    assert_int_equal(uw_qp_state(w.a.qp), UW_QPS_ERROR);
    mw_fini(&w);
}

/* The initiator's host vanishes before its Request: the listener reports
 * the failed startup; no QP is shown. */
static void test_vanish_handshake_responder(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 0, 0);
    mw_dial(&w, NULL, NULL);
    uw__mem_reset(w.a.end);
    mw_run(&w, MW_B, w.now);
    uw_cm_event ev;
    assert_int_equal(uw_cm_get_event(w.b.ctx, &ev), 1);
    assert_int_equal(ev.type, UW_CM_CONNECT_ERROR);
    assert_int_equal(ev.err, UW_ECONNRESET);
    assert_ptr_equal(ev.listener, w.b.l);
    assert_null(ev.qp);
    mw_fini(&w);
}

/* A peer vanishes in the middle of a large Send: both sides report a
 * connection error (ECONNRESET) and flush what they had posted. */
static void test_vanish_stream(void **st)
{
    (void)st;
    mw w;
    mw_init(&w, 8192, 0);
    mw_connect(&w, NULL, NULL);
    post_recv(&w.b, 100000);
    memset(w.a.buf, 1, 100000);
    uw_sge ss = {(uint64_t)(uintptr_t)w.a.buf, 100000, uw_mr_stag(w.a.mr)};
    uw_send_wr sw = {
        .wr_id = 52, .opcode = UW_WR_SEND, .flags = UW_SEND_SIGNALED, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(uw_post_send(w.a.qp, &sw, 1, NULL), 0);
    mw_run(&w, MW_B, w.now); /* b takes some of it */
    uw__mem_reset(w.b.end);
    uw_cm_event ev = mw_expect(&w, &w.a, UW_CM_CONN_ERROR);
    assert_int_equal(ev.err, UW_ECONNRESET);
    ev = mw_expect(&w, &w.b, UW_CM_CONN_ERROR);
    assert_int_equal(ev.err, UW_ECONNRESET);
    uw_wc wc = mw_wc(&w, &w.a);
    assert_int_equal(wc.wr_id, 52);
    assert_int_equal(wc.status, UW_WC_WR_FLUSH_ERR);
    wc = mw_wc(&w, &w.b);
    assert_int_equal(wc.wr_id, 50);
    assert_int_equal(wc.status, UW_WC_WR_FLUSH_ERR);
    assert_int_equal(uw_qp_state(w.a.qp), UW_QPS_ERROR);
    assert_int_equal(uw_qp_state(w.b.qp), UW_QPS_ERROR);
    mw_fini(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_setup_variants),
        cmocka_unit_test(test_p2p_rtr),
        cmocka_unit_test(test_reject_private_data),
        cmocka_unit_test(test_refused_request),
        cmocka_unit_test(test_timeout_reply),
        cmocka_unit_test(test_timeout_request),
        cmocka_unit_test(test_timeout_rtr),
        cmocka_unit_test(test_timeout_linger_reject),
        cmocka_unit_test(test_timeout_linger_terminate),
        cmocka_unit_test(test_terminate_both_ways),
        cmocka_unit_test(test_terminate_crc),
        cmocka_unit_test(test_graceful_close_order),
        cmocka_unit_test(test_vanish_handshake_initiator),
        cmocka_unit_test(test_vanish_handshake_responder),
        cmocka_unit_test(test_vanish_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
