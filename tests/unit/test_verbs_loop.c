/* Two uwarp endpoints in one process over loopback TCP: connection setup
 * with every MPA option, Send/Write/Read data integrity, RTR, reject,
 * Terminate on bad STags, timeouts. One thread drives both contexts. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"
#include "uwarp/verbs.h"

#define BUF (1u << 20)

static unsigned g_cq_depth = 256;
static bool g_destroy_after_reject;

typedef struct side {
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_qp *qp;
    uint8_t *buf;
    uw_mr *mr;
    uw_listener *l;
    char trace[1024]; /* connection state changes, with g_trace */
} side;

typedef struct pair {
    side a, b; /* a initiator, b responder */
    uw_mpa_params pa, pb;
} pair;

static void logf_(void *ud, int level, const char *msg)
{
    fprintf(stderr, "[%s %d] %s\n", (const char *)ud, level, msg);
}

static bool g_trace;

/* Keeps the "QP[n]: FROM -> TO" lines of one side's context. */
static void trace_(void *ud, int level, const char *msg)
{
    side *s = ud;
    const char *q = strstr(msg, "]: ");
    if (q && strstr(msg, " -> ")) {
        size_t n = strlen(s->trace);
        snprintf(s->trace + n, sizeof(s->trace) - n, "%s;", q + 3);
    }
    if (getenv("UW_TEST_LOG"))
        logf_("ctx", level, msg);
}

static void side_init(side *s)
{
    memset(s, 0, sizeof(*s));
    uw_ctx_attr at = {.log = logf_, .log_ud = "ctx", .log_level = UW_LOG_DEBUG};
    uw_ctx_attr tr = {.log = trace_, .log_ud = s, .log_level = UW_LOG_DEBUG};
    assert_int_equal(uw_ctx_create(&s->ctx, g_trace ? &tr : getenv("UW_TEST_LOG") ? &at : NULL), 0);
    assert_int_equal(uw_pd_alloc(s->ctx, &s->pd), 0);
    assert_int_equal(uw_cq_create(s->ctx, g_cq_depth, &s->cq), 0);
    s->buf = calloc(1, BUF);
    assert_non_null(s->buf);
    assert_int_equal(uw_mr_reg(s->pd, s->buf, BUF,
                               UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE |
                                   UW_ACCESS_REMOTE_READ | UW_ACCESS_REMOTE_INVALIDATE,
                               &s->mr),
                     0);
}

static void side_fini(side *s)
{
    if (s->qp)
        assert_int_equal(uw_qp_destroy(s->qp), 0);
    if (s->l)
        assert_int_equal(uw_listener_destroy(s->l), 0);
    assert_int_equal(uw_mr_dereg(s->mr), 0);
    assert_int_equal(uw_cq_destroy(s->cq), 0);
    assert_int_equal(uw_pd_dealloc(s->pd), 0);
    assert_int_equal(uw_ctx_destroy(s->ctx), 0);
    free(s->buf);
}

/* Drives both contexts until pred holds or 5 s pass. */
static void spin(pair *p)
{
    uw_ctx_progress(p->a.ctx);
    uw_ctx_progress(p->b.ctx);
    usleep(100);
}

static int next_event(pair *p, side *s, uw_cm_event *ev)
{
    for (int i = 0; i < 50000; i++) {
        int r = uw_cm_get_event(s->ctx, ev);
        if (r)
            return r;
        spin(p);
    }
    return UW_ETIMEDOUT;
}

static int wait_wc(pair *p, side *s, uw_wc *wc)
{
    for (int i = 0; i < 50000; i++) {
        int r = uw_cq_poll(s->cq, wc, 1);
        if (r)
            return r;
        spin(p);
    }
    return UW_ETIMEDOUT;
}

/* Every established connection: the two ends agree on what they
 * negotiated (each case also checks the values it is about), and each
 * QP reports what its ESTABLISHED event said. */
static void agreed(const pair *p)
{
    const uw_mpa_params *a = &p->pa, *b = &p->pb;
    assert_int_equal(a->rev, b->rev);
    assert_int_equal(a->ddp_version, b->ddp_version);
    assert_int_equal(a->crc, b->crc);
    assert_int_equal(a->markers_tx, b->markers_rx);
    assert_int_equal(a->markers_rx, b->markers_tx);
    assert_int_equal(a->enhanced, b->enhanced);
    assert_int_equal(a->p2p, b->p2p);
    /* RFC 6581 9.1: neither end issues more Reads than the other accepts. */
    assert_true(a->ord <= b->ird);
    assert_true(b->ord <= a->ird);
    uw_mpa_params q[2];
    assert_int_equal(uw_qp_mpa_params(p->a.qp, &q[0]), 0);
    assert_int_equal(uw_qp_mpa_params(p->b.qp, &q[1]), 0);
    for (int i = 0; i < 2; i++) {
        const uw_mpa_params *e = i ? b : a;
        assert_int_equal(q[i].rev, e->rev);
        assert_int_equal(q[i].crc, e->crc);
        assert_int_equal(q[i].markers_rx, e->markers_rx);
        assert_int_equal(q[i].markers_tx, e->markers_tx);
        assert_int_equal(q[i].ird, e->ird);
        assert_int_equal(q[i].ord, e->ord);
        assert_int_equal(q[i].peer_ird, e->peer_ird);
        assert_int_equal(q[i].peer_ord, e->peer_ord);
        assert_int_equal(q[i].p2p, e->p2p);
        assert_int_equal(q[i].rtr, e->rtr);
    }
}

/* Connects with the given parameters; returns the initiator's final event type. */
static int connect_pair(pair *p, const uw_conn_param *ca, const uw_conn_param *cb, bool reject)
{
    side_init(&p->a);
    side_init(&p->b);
    uw_qp_attr qa = {.pd = p->b.pd, .send_cq = p->b.cq, .recv_cq = p->b.cq};
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(uw_listen(p->b.ctx, (struct sockaddr *)&sin, sizeof(sin), &qa, cb, &p->b.l),
                     0);
    struct sockaddr_storage ss;
    socklen_t sl;
    assert_int_equal(uw_listener_addr(p->b.l, &ss, &sl), 0);
    uw_qp_attr qa2 = {.pd = p->a.pd, .send_cq = p->a.cq, .recv_cq = p->a.cq};
    assert_int_equal(uw_qp_create(p->a.ctx, &qa2, &p->a.qp), 0);
    assert_int_equal(uw_connect(p->a.qp, (struct sockaddr *)&ss, sl, ca), 0);
    uw_cm_event ev;
    assert_int_equal(next_event(p, &p->b, &ev), 1);
    assert_int_equal(ev.type, UW_CM_CONNECT_REQUEST);
    p->b.qp = ev.qp;
    if (reject) {
        assert_int_equal(uw_reject(p->b.qp, "no", 2), 0);
        if (g_destroy_after_reject) {
            /* The Reply must still reach the initiator. */
            assert_int_equal(uw_qp_destroy(p->b.qp), 0);
            p->b.qp = NULL;
        }
    } else {
        assert_int_equal(uw_accept(p->b.qp, NULL), 0);
    }
    assert_int_equal(next_event(p, &p->a, &ev), 1);
    int t = ev.type;
    if (t == UW_CM_ESTABLISHED) {
        p->pa = ev.mpa;
        assert_int_equal(next_event(p, &p->b, &ev), 1);
        assert_int_equal(ev.type, UW_CM_ESTABLISHED);
        p->pb = ev.mpa;
        agreed(p);
    }
    if (t == UW_CM_REJECTED) {
        assert_int_equal(ev.private_data_len, 2);
        assert_memory_equal(ev.private_data, "no", 2);
    }
    return t;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (uint8_t)(seed >> 16);
    }
}

static void exchange(pair *p, uint32_t len)
{
    side *a = &p->a, *b = &p->b;
    uw_wc wc;
    /* Send a -> b */
    fill(a->buf, len, len);
    memset(b->buf, 0, BUF);
    uw_sge rs = {(uint64_t)(uintptr_t)b->buf, BUF / 2, uw_mr_stag(b->mr)};
    uw_recv_wr rw = {.wr_id = 7, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(uw_post_recv(b->qp, &rw, 1, NULL), 0);
    uw_sge ss = {(uint64_t)(uintptr_t)a->buf, len, uw_mr_stag(a->mr)};
    uw_send_wr sw = {
        .wr_id = 1, .opcode = UW_WR_SEND, .flags = UW_SEND_SIGNALED, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(uw_post_send(a->qp, &sw, 1, NULL), 0);
    assert_int_equal(wait_wc(p, b, &wc), 1);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.opcode, UW_WC_RECV);
    assert_int_equal(wc.byte_len, len);
    assert_int_equal(wc.wr_id, 7);
    assert_memory_equal(a->buf, b->buf, len);
    assert_int_equal(wait_wc(p, a, &wc), 1);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.wr_id, 1);
    /* Write a -> b at offset BUF/2 */
    fill(a->buf, len, len + 1);
    uw_send_wr ww = {.wr_id = 2,
                     .opcode = UW_WR_RDMA_WRITE,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &ss,
                     .num_sge = 1,
                     .remote_addr = (uint64_t)(uintptr_t)(b->buf + BUF / 2),
                     .rkey = uw_mr_stag(b->mr)};
    assert_int_equal(uw_post_send(a->qp, &ww, 1, NULL), 0);
    assert_int_equal(wait_wc(p, a, &wc), 1);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    /* Read b -> a: a reads back what it wrote, into BUF/2. */
    uw_sge rd = {(uint64_t)(uintptr_t)(a->buf + BUF / 2), len, uw_mr_stag(a->mr)};
    uw_send_wr rr = {.wr_id = 3,
                     .opcode = UW_WR_RDMA_READ,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &rd,
                     .num_sge = 1,
                     .remote_addr = (uint64_t)(uintptr_t)(b->buf + BUF / 2),
                     .rkey = uw_mr_stag(b->mr)};
    assert_int_equal(uw_post_send(a->qp, &rr, 1, NULL), 0);
    assert_int_equal(wait_wc(p, a, &wc), 1);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.opcode, UW_WC_RDMA_READ);
    assert_int_equal(wc.byte_len, len);
    assert_memory_equal(a->buf, b->buf + BUF / 2, len);
    assert_memory_equal(a->buf, a->buf + BUF / 2, len);
}

static void pair_fini(pair *p)
{
    side_fini(&p->a);
    side_fini(&p->b);
}

static void run_combo(const uw_conn_param *ca, const uw_conn_param *cb)
{
    pair p;
    assert_int_equal(connect_pair(&p, ca, cb, false), UW_CM_ESTABLISHED);
    static const uint32_t lens[] = {0, 1, 13, 512, 4096, 65536, 300000};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        exchange(&p, lens[i]);
    pair_fini(&p);
}

static void test_default(void **st)
{
    (void)st;
    run_combo(NULL, NULL);
}

static void test_nocrc_markers_v1(void **st)
{
    (void)st;
    uw_conn_param a = {.rev = 1, .crc = UW_CRC_AVOID, .markers = true};
    uw_conn_param b = {.rev = 1, .crc = UW_CRC_AVOID, .markers = true};
    run_combo(&a, &b);
    uw_conn_param c = {.markers = true};
    run_combo(&c, NULL);
}

/* max_fpdu caps each side's FPDUs (the listener's value applies to the
 * responder); data of every size still arrives intact. */
static void test_max_fpdu(void **st)
{
    (void)st;
    uw_conn_param a = {.max_fpdu = 200};
    uw_conn_param b = {.max_fpdu = 1000, .markers = true};
    pair p;
    assert_int_equal(connect_pair(&p, &a, &b, false), UW_CM_ESTABLISHED);
    assert_int_equal(uw_qp_mulpdu(p.a.qp), 200);
    assert_int_equal(uw_qp_mulpdu(p.b.qp), 1000);
    static const uint32_t lens[] = {0, 1, 199, 200, 201, 4096, 100000};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        exchange(&p, lens[i]);
    /* The caps hold when the EMSS is read again during traffic. */
    for (int i = 0; i < 4; i++)
        exchange(&p, 300000);
    assert_int_equal(uw_qp_mulpdu(p.a.qp), 200);
    assert_int_equal(uw_qp_mulpdu(p.b.qp), 1000);
    pair_fini(&p);
    uw_conn_param tiny = {.max_fpdu = 5};
    assert_int_equal(connect_pair(&p, &tiny, NULL, false), UW_CM_ESTABLISHED);
    assert_int_equal(uw_qp_mulpdu(p.a.qp), UW_MPA_MULPDU_MIN);
    assert_true(uw_qp_mulpdu(p.b.qp) > 1000); /* loopback MSS */
    exchange(&p, 5000);
    pair_fini(&p);
}

/* RFC 5044 4.5: the MULPDU follows the EMSS. Linux starts a loopback
 * connection's MSS at half the peer's first window and raises it as the
 * window opens; without markers the transmitter follows, and data sent
 * across the change arrives intact. With markers too: the transmit slots
 * are sized at the start for the path MTU's MSS (65,536 on loopback), and
 * the MULPDU never grows past what they hold. */
static void test_mulpdu_follows_emss(void **st)
{
    (void)st;
    pair p;
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    uint32_t a0 = uw_qp_mulpdu(p.a.qp), b0 = uw_qp_mulpdu(p.b.qp);
    for (int i = 0; i < 8; i++)
        exchange(&p, 300000);
    assert_true(uw_qp_mulpdu(p.a.qp) > a0);
    assert_true(uw_qp_mulpdu(p.b.qp) > b0); /* it sent the Read Responses */
    assert_true(uw_qp_mulpdu(p.a.qp) <= UW_MPA_MULPDU_MAX);
    pair_fini(&p);
    uw_conn_param m = {.markers = true};
    assert_int_equal(connect_pair(&p, &m, &m, false), UW_CM_ESTABLISHED);
    a0 = uw_qp_mulpdu(p.a.qp);
    b0 = uw_qp_mulpdu(p.b.qp);
    for (int i = 0; i < 8; i++)
        exchange(&p, 300000);
    assert_true(uw_qp_mulpdu(p.a.qp) > a0);
    assert_true(uw_qp_mulpdu(p.b.qp) > b0);
    assert_true(uw_qp_mulpdu(p.a.qp) <= uw_mpa_mulpdu(65536 - 40, true));
    pair_fini(&p);
}

static void test_p2p(void **st)
{
    (void)st;
    static const uint8_t rtrs[] = {UW_MPA_RTR_SEND, UW_MPA_RTR_WRITE, UW_MPA_RTR_READ};
    for (int i = 0; i < 3; i++) {
        uw_conn_param a = {.p2p = true, .rtr = rtrs[i]};
        uw_conn_param b = {.p2p = true, .rtr = UW_MPA_RTR_ALL};
        pair p;
        assert_int_equal(connect_pair(&p, &a, &b, false), UW_CM_ESTABLISHED);
        assert_true(p.pa.p2p);
        assert_int_equal(p.pa.rtr, rtrs[i]);
        exchange(&p, 100);
        pair_fini(&p);
    }
}

static void test_reject(void **st)
{
    (void)st;
    pair p;
    assert_int_equal(connect_pair(&p, NULL, NULL, true), UW_CM_REJECTED);
    pair_fini(&p);
    g_destroy_after_reject = true;
    assert_int_equal(connect_pair(&p, NULL, NULL, true), UW_CM_REJECTED);
    g_destroy_after_reject = false;
    pair_fini(&p);
}

static void test_bad_stag(void **st)
{
    (void)st;
    pair p;
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    memset(p.b.buf, 0x5A, BUF);
    uw_sge ss = {(uint64_t)(uintptr_t)p.a.buf, 100, uw_mr_stag(p.a.mr)};
    uw_send_wr ww = {.wr_id = 2,
                     .opcode = UW_WR_RDMA_WRITE,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &ss,
                     .num_sge = 1,
                     .remote_addr = (uint64_t)(uintptr_t)(p.b.buf + BUF - 50),
                     .rkey = uw_mr_stag(p.b.mr)};
    assert_int_equal(uw_post_send(p.a.qp, &ww, 1, NULL), 0);
    uw_cm_event ev;
    assert_int_equal(next_event(&p, &p.b, &ev), 1);
    assert_int_equal(ev.type, UW_CM_TERMINATED);
    assert_false(ev.term_received);
    assert_int_equal(ev.term.layer, UW_TERM_DDP);
    assert_int_equal(ev.term.etype, 1);
    assert_int_equal(ev.term.ecode, 1);
    assert_int_equal(next_event(&p, &p.a, &ev), 1);
    assert_int_equal(ev.type, UW_CM_TERMINATED);
    assert_true(ev.term_received);
    assert_int_equal(ev.term.layer, UW_TERM_DDP);
    assert_int_equal(ev.term.ecode, 1);
    for (size_t i = 0; i < BUF; i++)
        if (p.b.buf[i] != 0x5A)
            fail_msg("memory touched at %zu", i);
    pair_fini(&p);
}

/* The side that sends a Terminate is destroyed at once, with a megabyte of
 * the peer's Sends still unread: its socket lingers in the context (no
 * reset), so the Terminate arrives; the context destroy that follows
 * finishes the lingering close. */
static void test_destroy_after_terminate(void **st)
{
    (void)st;
    pair p;
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    /* b posted no receive: the first Send is a DDP error. */
    for (uint32_t i = 0; i < 16; i++) {
        uw_sge ss = {(uint64_t)(uintptr_t)p.a.buf + i * 65536u, 65536, uw_mr_stag(p.a.mr)};
        uw_send_wr sw = {.wr_id = i, .opcode = UW_WR_SEND, .sg_list = &ss, .num_sge = 1};
        assert_int_equal(uw_post_send(p.a.qp, &sw, 1, NULL), 0);
    }
    uw_cm_event ev;
    assert_int_equal(next_event(&p, &p.b, &ev), 1);
    assert_int_equal(ev.type, UW_CM_TERMINATED);
    assert_false(ev.term_received);
    uw_term sent = ev.term;
    assert_int_equal(uw_qp_destroy(p.b.qp), 0);
    p.b.qp = NULL;
    assert_int_equal(next_event(&p, &p.a, &ev), 1);
    assert_int_equal(ev.type, UW_CM_TERMINATED);
    assert_true(ev.term_received);
    assert_int_equal(ev.term.layer, sent.layer);
    assert_int_equal(ev.term.etype, sent.etype);
    assert_int_equal(ev.term.ecode, sent.ecode);
    pair_fini(&p);
}

/* uw_disconnect() then uw_qp_destroy() at once, with most of a large Send
 * still queued in the QP: the queued octets are copied and still go out,
 * then FIN, and the peer gets the whole message. */
static void test_disconnect_then_destroy(void **st)
{
    (void)st;
    pair p;
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    const uint32_t len = BUF - 4096;
    uw_sge rs = {(uint64_t)(uintptr_t)p.b.buf, BUF, uw_mr_stag(p.b.mr)};
    uw_recv_wr rw = {.wr_id = 5, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(uw_post_recv(p.b.qp, &rw, 1, NULL), 0);
    fill(p.a.buf, len, 77);
    uw_sge ss = {(uint64_t)(uintptr_t)p.a.buf, len, uw_mr_stag(p.a.mr)};
    uw_send_wr sw = {.wr_id = 1, .opcode = UW_WR_SEND, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(uw_post_send(p.a.qp, &sw, 1, NULL), 0);
    assert_int_equal(uw_disconnect(p.a.qp), 0);
    assert_int_equal(uw_qp_destroy(p.a.qp), 0);
    p.a.qp = NULL;
    /* The application's buffer is free at once: the copy goes out. */
    uint8_t *want = malloc(len);
    assert_non_null(want);
    memcpy(want, p.a.buf, len);
    memset(p.a.buf, 0, len);
    uw_wc wc;
    assert_int_equal(wait_wc(&p, &p.b, &wc), 1);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.byte_len, len);
    assert_memory_equal(p.b.buf, want, len);
    free(want);
    uw_cm_event ev;
    assert_int_equal(next_event(&p, &p.b, &ev), 1);
    assert_int_equal(ev.type, UW_CM_DISCONNECTED);
    pair_fini(&p);
}

/* Each side closes its direction in turn: the first to close is CLOSING,
 * the other PEER_CLOSED (its public state still RTS), and both end
 * CLOSED, each having seen DISCONNECTED. */
static void test_graceful_close(void **st)
{
    (void)st;
    pair p;
    g_trace = true;
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    g_trace = false;
    assert_int_equal(uw_disconnect(p.a.qp), 0);
    uw_cm_event ev;
    assert_int_equal(next_event(&p, &p.b, &ev), 1);
    assert_int_equal(ev.type, UW_CM_DISCONNECTED);
    assert_int_equal(uw_qp_state(p.a.qp), UW_QPS_CLOSING);
    assert_int_equal(uw_qp_state(p.b.qp), UW_QPS_RTS);
    assert_int_equal(uw_disconnect(p.b.qp), 0);
    assert_int_equal(next_event(&p, &p.a, &ev), 1);
    assert_int_equal(ev.type, UW_CM_DISCONNECTED);
    for (int i = 0; i < 50000 && uw_qp_state(p.b.qp) != UW_QPS_CLOSED; i++)
        spin(&p);
    assert_int_equal(uw_qp_state(p.a.qp), UW_QPS_CLOSED);
    assert_int_equal(uw_qp_state(p.b.qp), UW_QPS_CLOSED);
    assert_int_equal(uw_disconnect(p.a.qp), 0);
    assert_non_null(strstr(p.a.trace, "RTS -> CLOSING"));
    assert_non_null(strstr(p.a.trace, "CLOSING -> CLOSED"));
    assert_non_null(strstr(p.b.trace, "RTS -> PEER_CLOSED"));
    assert_non_null(strstr(p.b.trace, "PEER_CLOSED -> CLOSED"));
    pair_fini(&p);
}

/* A receive CQ far smaller than the burst: the receiver pauses while the
 * CQ is full, with octets staged, and must resume where it stopped once the
 * application polls. */
static void test_small_cq_pause(void **st)
{
    (void)st;
    pair p;
    g_cq_depth = 4; /* both sides: the receiver's CQ fills after 4 messages */
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    g_cq_depth = 256;
    enum { N = 200, LEN = 100 };
    for (int i = 0; i < N; i++) {
        uw_sge rs = {(uint64_t)(uintptr_t)(p.b.buf + (size_t)i * LEN), LEN, uw_mr_stag(p.b.mr)};
        uw_recv_wr rw = {.wr_id = (uint64_t)i, .sg_list = &rs, .num_sge = 1};
        if (i < 128)
            assert_int_equal(uw_post_recv(p.b.qp, &rw, 1, NULL), 0);
    }
    fill(p.a.buf, (size_t)N * LEN, 3);
    int posted = 0, got = 0, acked = 0;
    for (long guard = 0; got < N; guard++) {
        if (guard > 200000)
            fail_msg("receiver stalled after %d of %d messages", got, N);
        while (posted < N && posted - acked < 64) {
            uw_sge ss = {(uint64_t)(uintptr_t)(p.a.buf + (size_t)posted * LEN), LEN,
                         uw_mr_stag(p.a.mr)};
            uw_send_wr sw = {.wr_id = 1000 + (uint64_t)posted,
                             .opcode = UW_WR_SEND,
                             .flags = UW_SEND_SIGNALED,
                             .sg_list = &ss,
                             .num_sge = 1};
            assert_int_equal(uw_post_send(p.a.qp, &sw, 1, NULL), 0);
            posted++;
        }
        uw_wc wc;
        /* Sender side: keep its CQ drained. */
        while (uw_cq_poll(p.a.cq, &wc, 1) == 1)
            assert_int_equal(wc.status, UW_WC_SUCCESS);
        /* Receiver: let a burst arrive (it pauses with octets staged when the
         * CQ is full), then take one completion at a time. */
        for (int k = 0; k < 20; k++)
            uw_ctx_progress(p.b.ctx);
        if (uw_cq_poll(p.b.cq, &wc, 1) == 1) {
            assert_int_equal(wc.status, UW_WC_SUCCESS);
            assert_int_equal(wc.wr_id, (uint64_t)got);
            got++;
            if (got + 127 < N) {
                int i = got + 127;
                uw_sge rs = {(uint64_t)(uintptr_t)(p.b.buf + (size_t)i * LEN), LEN,
                             uw_mr_stag(p.b.mr)};
                uw_recv_wr rw = {.wr_id = (uint64_t)i, .sg_list = &rs, .num_sge = 1};
                assert_int_equal(uw_post_recv(p.b.qp, &rw, 1, NULL), 0);
            }
            acked = got;
        }
        uw_ctx_progress(p.a.ctx);
    }
    assert_memory_equal(p.a.buf, p.b.buf, (size_t)N * LEN);
    pair_fini(&p);
}

/* One Send of len octets b -> a into a's buffer, posted by b at once. */
static void post_b_to_a(pair *p, uint32_t len, uint64_t id)
{
    uw_sge rs = {(uint64_t)(uintptr_t)p->a.buf, BUF, uw_mr_stag(p->a.mr)};
    uw_recv_wr rw = {.wr_id = id, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(uw_post_recv(p->a.qp, &rw, 1, NULL), 0);
    uw_sge ss = {(uint64_t)(uintptr_t)p->b.buf, len, uw_mr_stag(p->b.mr)};
    uw_send_wr sw = {.wr_id = id, .opcode = UW_WR_SEND, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(uw_post_send(p->b.qp, &sw, 1, NULL), 0);
}

/* A lone connection leaves the epoll set while it is busy-polled (engine.c).
 * Whatever the application does next must still see its data: a blocking
 * wait, and an fd taken only after the busy-polling. */
static void test_busy_then_wait(void **st)
{
    (void)st;
    pair p;
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    exchange(&p, 13); /* the responder sends only after a first FPDU */
    uw_wc wc;
    for (int i = 0; i < 100; i++)
        assert_int_equal(uw_cq_poll(p.a.cq, &wc, 1), 0);
    post_b_to_a(&p, 64, 1);
    assert_int_equal(uw_cq_wait(p.a.cq, &wc, 1, 5000), 1);
    assert_int_equal(wc.wr_id, 1);
    assert_int_equal(wc.byte_len, 64);

    /* Again, but through epoll: a second, idle QP makes the context use it. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(uw_cq_poll(p.a.cq, &wc, 1), 0);
    uw_qp *extra;
    uw_qp_attr qa = {.pd = p.a.pd, .send_cq = p.a.cq, .recv_cq = p.a.cq};
    assert_int_equal(uw_qp_create(p.a.ctx, &qa, &extra), 0);
    post_b_to_a(&p, 100, 2);
    assert_int_equal(uw_cq_wait(p.a.cq, &wc, 1, 5000), 1);
    assert_int_equal(wc.wr_id, 2);
    assert_int_equal(uw_qp_destroy(extra), 0);

    /* The fd, taken after busy-polling, must become readable on data. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(uw_cq_poll(p.a.cq, &wc, 1), 0);
    int fd = uw_ctx_fd(p.a.ctx);
    assert_true(fd >= 0);
    post_b_to_a(&p, 200, 3);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 5000), 1);
    int got = 0;
    for (int i = 0; i < 100 && !got; i++)
        got = uw_cq_poll(p.a.cq, &wc, 1);
    assert_int_equal(got, 1);
    assert_int_equal(wc.wr_id, 3);
    /* And once taken, busy-polling keeps the socket registered. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(uw_cq_poll(p.a.cq, &wc, 1), 0);
    post_b_to_a(&p, 300, 4);
    pf.revents = 0;
    assert_int_equal(poll(&pf, 1, 5000), 1);
    got = 0;
    for (int i = 0; i < 100 && !got; i++)
        got = uw_cq_poll(p.a.cq, &wc, 1);
    assert_int_equal(got, 1);
    assert_int_equal(wc.wr_id, 4);
    pair_fini(&p);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A second initiator, driven by its own thread while the main thread sleeps
 * in the listener's context. */
typedef struct dialer {
    struct sockaddr_storage ss;
    socklen_t sl;
    int last; /* the dialer's last event type, or a negative code */
} dialer;

static void *dial(void *arg)
{
    dialer *d = arg;
    side s;
    side_init(&s);
    uw_qp_attr qa = {.pd = s.pd, .send_cq = s.cq, .recv_cq = s.cq};
    d->last = uw_qp_create(s.ctx, &qa, &s.qp);
    if (d->last == 0)
        d->last = uw_connect(s.qp, (struct sockaddr *)&d->ss, d->sl, NULL);
    uw_cm_event ev;
    if (d->last == 0)
        d->last = uw_cm_wait_event(s.ctx, &ev, 5000) == 1 ? ev.type : UW_ETIMEDOUT;
    side_fini(&s);
    return NULL;
}

/* A listener checks its qp_attr at once, and the PD and CQs it will give
 * its QPs stay in use (UW_EBUSY) until it is destroyed. */
static void test_listener_holds_attr(void **st)
{
    (void)st;
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_listener *l;
    assert_int_equal(uw_ctx_create(&ctx, NULL), 0);
    assert_int_equal(uw_pd_alloc(ctx, &pd), 0);
    assert_int_equal(uw_cq_create(ctx, 16, &cq), 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    uw_qp_attr bad = {.pd = NULL, .send_cq = cq, .recv_cq = cq};
    assert_int_equal(uw_listen(ctx, (struct sockaddr *)&a, sizeof(a), &bad, NULL, &l), UW_EINVAL);
    uw_qp_attr deep = {.pd = pd, .send_cq = cq, .recv_cq = cq, .max_send_wr = 70000};
    assert_int_equal(uw_listen(ctx, (struct sockaddr *)&a, sizeof(a), &deep, NULL, &l), UW_EINVAL);
    uw_qp_attr ok = {.pd = pd, .send_cq = cq, .recv_cq = cq};
    assert_int_equal(uw_listen(ctx, (struct sockaddr *)&a, sizeof(a), &ok, NULL, &l), 0);
    assert_int_equal(uw_pd_dealloc(pd), UW_EBUSY);
    assert_int_equal(uw_cq_destroy(cq), UW_EBUSY);
    assert_int_equal(uw_listener_destroy(l), 0);
    assert_int_equal(uw_cq_destroy(cq), 0);
    assert_int_equal(uw_pd_dealloc(pd), 0);
    assert_int_equal(uw_ctx_destroy(ctx), 0);
}

/* The three waits say "timed out" the same way: UW_ETIMEDOUT, after the
 * time given (0 included), on an idle context. */
static void test_wait_timeouts(void **st)
{
    (void)st;
    uw_ctx *ctx;
    uw_cq *cq;
    assert_int_equal(uw_ctx_create(&ctx, NULL), 0);
    assert_int_equal(uw_cq_create(ctx, 16, &cq), 0);
    uw_wc wc;
    uw_cm_event ev;
    for (int ms = 0; ms <= 60; ms += 60) {
        double t0 = now_s();
        assert_int_equal(uw_ctx_wait(ctx, ms), UW_ETIMEDOUT);
        assert_int_equal(uw_cq_wait(cq, &wc, 1, ms), UW_ETIMEDOUT);
        assert_int_equal(uw_cm_wait_event(ctx, &ev, ms), UW_ETIMEDOUT);
        double el = now_s() - t0;
        assert_true(el >= 3 * ms / 1000.0 * 0.9);
        assert_true(el < 3 * ms / 1000.0 + 1.0);
    }
    assert_int_equal(uw_cq_destroy(cq), 0);
    assert_int_equal(uw_ctx_destroy(ctx), 0);
}

/* Drives a's context until its CQ has given *done completions in all,
 * at most 5 s. On loopback a Send that completed is in b's socket: the
 * kernel delivered it inside the sending system call. */
static void sends_done(pair *p, int *done, int want)
{
    uw_wc wc;
    for (int i = 0; i < 50000 && *done < want; i++) {
        uw_ctx_progress(p->a.ctx);
        if (uw_cq_poll(p->a.cq, &wc, 1) == 1) {
            assert_int_equal(wc.status, UW_WC_SUCCESS);
            (*done)++;
        } else {
            usleep(100);
        }
    }
    assert_int_equal(*done, want);
}

/* A server's lone connection stays out of the epoll set while the server
 * sleeps (poll() on it and the epoll fd together) and while it signals work
 * to itself with a flag instead of the eventfd (engine.c). Neither may cost
 * a wakeup: data, a new connection and work queued by a non-blocking call
 * must each end a long wait at once. */
static void test_server_sleeps_detached(void **st)
{
    (void)st;
    pair p;
    assert_int_equal(connect_pair(&p, NULL, NULL, false), UW_CM_ESTABLISHED);
    exchange(&p, 13);
    uw_wc wc;
    uw_cm_event ev;
    /* Non-blocking passes take the server's socket out of the epoll set. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(uw_cq_poll(p.b.cq, &wc, 1), 0);

    /* Data ends a blocking wait that has a listener beside it. */
    uw_sge rs = {(uint64_t)(uintptr_t)p.b.buf, BUF, uw_mr_stag(p.b.mr)};
    uw_recv_wr rw = {.wr_id = 1, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(uw_post_recv(p.b.qp, &rw, 1, NULL), 0);
    uw_sge ss = {(uint64_t)(uintptr_t)p.a.buf, 64, uw_mr_stag(p.a.mr)};
    uw_send_wr sw = {
        .wr_id = 1, .opcode = UW_WR_SEND, .sg_list = &ss, .num_sge = 1, .flags = UW_SEND_SIGNALED};
    assert_int_equal(uw_post_send(p.a.qp, &sw, 1, NULL), 0);
    int sent = 0;
    double t0 = now_s();
    assert_int_equal(uw_cq_wait(p.b.cq, &wc, 1, 5000), 1);
    assert_true(now_s() - t0 < 2.0);
    assert_int_equal(wc.wr_id, 1);

    /* A completion queued by a call that returns only events must not let
     * the next wait sleep. */
    rw.wr_id = 2;
    assert_int_equal(uw_post_recv(p.b.qp, &rw, 1, NULL), 0);
    assert_int_equal(uw_post_send(p.a.qp, &sw, 1, NULL), 0);
    sends_done(&p, &sent, 2);
    assert_int_equal(uw_cm_get_event(p.b.ctx, &ev), 0); /* reads it, queues the completion */
    t0 = now_s();
    assert_true(uw_ctx_wait(p.b.ctx, 5000) >= 0);
    assert_true(now_s() - t0 < 2.0);
    assert_int_equal(uw_cq_poll(p.b.cq, &wc, 1), 1);
    assert_int_equal(wc.wr_id, 2);

    /* A connection request ends a wait on the listener's context. */
    for (int i = 0; i < 100; i++)
        assert_int_equal(uw_cq_poll(p.b.cq, &wc, 1), 0);
    dialer d;
    memset(&d, 0, sizeof(d));
    assert_int_equal(uw_listener_addr(p.b.l, &d.ss, &d.sl), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, dial, &d), 0);
    t0 = now_s();
    assert_int_equal(uw_cm_wait_event(p.b.ctx, &ev, 5000), 1);
    assert_true(now_s() - t0 < 2.0);
    assert_int_equal(ev.type, UW_CM_CONNECT_REQUEST);
    assert_int_equal(uw_reject(ev.qp, "busy", 4), 0);
    for (int i = 0; i < 500 && !d.last; i++)
        uw_ctx_progress(p.b.ctx), usleep(1000);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(d.last, UW_CM_REJECTED);
    assert_int_equal(uw_qp_destroy(ev.qp), 0);

    /* With the fd taken, the same queued completion makes it readable. */
    int fd = uw_ctx_fd(p.b.ctx);
    assert_true(fd >= 0);
    rw.wr_id = 3;
    assert_int_equal(uw_post_recv(p.b.qp, &rw, 1, NULL), 0);
    assert_int_equal(uw_post_send(p.a.qp, &sw, 1, NULL), 0);
    sends_done(&p, &sent, 3);
    while (uw_cm_get_event(p.b.ctx, &ev) == 1)
        ;
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 0), 1);
    assert_int_equal(uw_cq_poll(p.b.cq, &wc, 1), 1);
    assert_int_equal(wc.wr_id, 3);
    exchange(&p, 4096);
    pair_fini(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wait_timeouts),
        cmocka_unit_test(test_listener_holds_attr),
        cmocka_unit_test(test_default),
        cmocka_unit_test(test_nocrc_markers_v1),
        cmocka_unit_test(test_p2p),
        cmocka_unit_test(test_max_fpdu),
        cmocka_unit_test(test_mulpdu_follows_emss),
        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_bad_stag),
        cmocka_unit_test(test_destroy_after_terminate),
        cmocka_unit_test(test_disconnect_then_destroy),
        cmocka_unit_test(test_graceful_close),
        cmocka_unit_test(test_small_cq_pause),
        cmocka_unit_test(test_busy_then_wait),
        cmocka_unit_test(test_server_sleeps_detached),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
