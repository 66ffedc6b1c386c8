/* The driver of the in-memory CM tests (mem_world.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mem_world.h"
#include "verbs/internal.h"

static uint64_t vclock(void *ud)
{
    return ((const mw *)ud)->now;
}

/* Keeps the connection state changes: the tests check paths, not only
 * where a connection ended up. UW_TEST_LOG shows everything. */
static void trace(void *ud, int level, const char *msg)
{
    mw_side *s = ud;
    const char *q = strstr(msg, "]: ");
    if (q && strstr(msg, " -> ")) {
        size_t n = strlen(s->trace);
        snprintf(s->trace + n, sizeof(s->trace) - n, "%s;", q + 3);
    }
    if (getenv("UW_TEST_LOG"))
        fprintf(stderr, "[%p %d] %s\n", ud, level, msg);
}

static void side_init(mw *w, mw_side *s, unsigned cq_depth)
{
    uw_ctx_attr at = {.log = trace, .log_ud = s, .log_level = UW_LOG_DEBUG};
    struct uw__ctx_hooks h = {.clock = vclock, .clock_ud = w};
    assert_int_equal(uw__ctx_create_with(&s->ctx, &at, &h), 0);
    assert_int_equal(uw_pd_alloc(s->ctx, &s->pd), 0);
    assert_int_equal(uw_cq_create(s->ctx, cq_depth ? cq_depth : 64, &s->cq), 0);
    s->buf = calloc(1, MW_BUF);
    assert_non_null(s->buf);
    assert_int_equal(
        uw_mr_reg(s->pd, s->buf, MW_BUF,
                  UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE | UW_ACCESS_REMOTE_READ, &s->mr),
        0);
}

void mw_init(mw *w, size_t cap, unsigned cq_depth)
{
    memset(w, 0, sizeof(*w));
    w->now = 1000 * MW_MS; /* deadlines are absolute: 0 means none */
    side_init(w, &w->a, cq_depth);
    side_init(w, &w->b, cq_depth);
    assert_int_equal(uw__mem_pair(&w->a.end, &w->b.end, cap ? cap : 65536, 0), 0);
}

void mw_dial_a(mw *w, const uw_conn_param *pa)
{
    uw_qp_attr qa = {.pd = w->a.pd, .send_cq = w->a.cq, .recv_cq = w->a.cq};
    assert_int_equal(uw_qp_create(w->a.ctx, &qa, &w->a.qp), 0);
    assert_int_equal(uw__tp_connect(w->a.qp, &uw__mem_ops, w->a.end, pa), 0);
    w->a.end_used = true;
}

void mw_dial_b(mw *w, const uw_conn_param *pb)
{
    uw_qp_attr qb = {.pd = w->b.pd, .send_cq = w->b.cq, .recv_cq = w->b.cq};
    assert_int_equal(uw__tp_listen(w->b.ctx, &qb, pb, &w->b.l), 0);
    assert_int_equal(uw__tp_accept(w->b.l, &uw__mem_ops, w->b.end), 0);
    w->b.end_used = true;
}

void mw_dial(mw *w, const uw_conn_param *pa, const uw_conn_param *pb)
{
    mw_dial_a(w, pa);
    mw_dial_b(w, pb);
}

static void side_fini(mw_side *s)
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

void mw_fini(mw *w)
{
    side_fini(&w->a);
    side_fini(&w->b);
    for (int k = 0; k < 2; k++) {
        mw_side *s = k ? &w->b : &w->a;
        if (!s->end_used)
            uw__mem_close_unused(s->end);
    }
    uw__mem_release(w->a.end);
}

static bool busy(mw *w, int mask)
{
    return ((mask & MW_A) && uw__ctx_busy(w->a.ctx)) || ((mask & MW_B) && uw__ctx_busy(w->b.ctx));
}

void mw_run(mw *w, int mask, uint64_t until)
{
    for (int guard = 0;; guard++) {
        if (guard > 10000)
            fail_msg("a deadline keeps firing");
        for (int i = 0;; i++) {
            if (i > 1000000)
                fail_msg("the engine never went idle");
            if (mask & MW_A)
                assert_true(uw_ctx_progress(w->a.ctx) >= 0);
            if (mask & MW_B)
                assert_true(uw_ctx_progress(w->b.ctx) >= 0);
            if (!busy(w, mask))
                break;
        }
        uint64_t d = 0;
        for (int k = 0; k < 2; k++) {
            uint64_t t = (mask >> k) & 1 ? uw__ctx_next_deadline(k ? w->b.ctx : w->a.ctx) : 0;
            if (t && (!d || t < d))
                d = t;
        }
        if (!d || d > until)
            break;
        /* The next pass fires it (the engine's virtual-time check). */
        if (d > w->now)
            w->now = d;
    }
    if (until > w->now)
        w->now = until;
}

void mw_idle(mw *w)
{
    mw_run(w, MW_AB, w->now);
}

uw_cm_event mw_event(mw *w, mw_side *s)
{
    mw_idle(w);
    uw_cm_event ev;
    memset(&ev, 0, sizeof(ev));
    if (uw_cm_get_event(s->ctx, &ev) != 1)
        ev.type = 0;
    return ev;
}

uw_cm_event mw_expect(mw *w, mw_side *s, int type)
{
    uw_cm_event ev = mw_event(w, s);
    if (ev.type != type)
        fail_msg("%s: event %d (err %d: %s), expected %d", s == &w->a ? "a" : "b", ev.type, ev.err,
                 uw_strerror(ev.err), type);
    return ev;
}

void mw_no_event(mw *w, mw_side *s)
{
    uw_cm_event ev = mw_event(w, s);
    if (ev.type)
        fail_msg("%s: unexpected event %d (err %d)", s == &w->a ? "a" : "b", ev.type, ev.err);
}

uw_mpa_params mw_connect(mw *w, const uw_conn_param *pa, const uw_conn_param *pb)
{
    mw_dial(w, pa, pb);
    uw_cm_event ev = mw_expect(w, &w->b, UW_CM_CONNECT_REQUEST);
    w->b.qp = ev.qp;
    assert_int_equal(uw_accept(w->b.qp, NULL), 0);
    ev = mw_expect(w, &w->a, UW_CM_ESTABLISHED);
    uw_mpa_params pm = ev.mpa;
    ev = mw_expect(w, &w->b, UW_CM_ESTABLISHED);
    assert_int_equal(ev.mpa.rev, pm.rev);
    assert_int_equal(ev.mpa.crc, pm.crc);
    assert_int_equal(ev.mpa.markers_rx, pm.markers_tx);
    assert_int_equal(ev.mpa.markers_tx, pm.markers_rx);
    assert_int_equal(uw_qp_state(w->a.qp), UW_QPS_RTS);
    assert_int_equal(uw_qp_state(w->b.qp), UW_QPS_RTS);
    return pm;
}

uw_wc mw_wc(mw *w, mw_side *s)
{
    mw_idle(w);
    uw_wc wc;
    if (uw_cq_poll(s->cq, &wc, 1) != 1)
        fail_msg("%s: no completion", s == &w->a ? "a" : "b");
    return wc;
}

static void fill(uint8_t *b, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        b[i] = (uint8_t)(seed >> 16);
    }
}

void mw_exchange(mw *w, uint32_t len, bool rev)
{
    mw_side *x = rev ? &w->b : &w->a, *y = rev ? &w->a : &w->b;
    assert_true(len <= MW_BUF / 4);
    fill(x->buf, len, len);
    memset(y->buf, 0, MW_BUF);
    uw_sge rs = {(uint64_t)(uintptr_t)y->buf, MW_BUF / 4, uw_mr_stag(y->mr)};
    uw_recv_wr rw = {.wr_id = 7, .sg_list = &rs, .num_sge = 1};
    assert_int_equal(uw_post_recv(y->qp, &rw, 1, NULL), 0);
    uw_sge ss = {(uint64_t)(uintptr_t)x->buf, len, uw_mr_stag(x->mr)};
    uw_send_wr sw = {
        .wr_id = 1, .opcode = UW_WR_SEND, .flags = UW_SEND_SIGNALED, .sg_list = &ss, .num_sge = 1};
    assert_int_equal(uw_post_send(x->qp, &sw, 1, NULL), 0);
    uw_wc wc = mw_wc(w, y);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.opcode, UW_WC_RECV);
    assert_int_equal(wc.byte_len, len);
    assert_memory_equal(x->buf, y->buf, len);
    wc = mw_wc(w, x);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.wr_id, 1);
    /* Write into y at MW_BUF/2, then Read it back to x at MW_BUF/2. */
    fill(x->buf, len, len + 1);
    uw_send_wr ww = {.wr_id = 2,
                     .opcode = UW_WR_RDMA_WRITE,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &ss,
                     .num_sge = 1,
                     .remote_addr = (uint64_t)(uintptr_t)(y->buf + MW_BUF / 2),
                     .rkey = uw_mr_stag(y->mr)};
    assert_int_equal(uw_post_send(x->qp, &ww, 1, NULL), 0);
    assert_int_equal(mw_wc(w, x).status, UW_WC_SUCCESS);
    uw_sge rd = {(uint64_t)(uintptr_t)(x->buf + MW_BUF / 2), len, uw_mr_stag(x->mr)};
    uw_send_wr rr = {.wr_id = 3,
                     .opcode = UW_WR_RDMA_READ,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &rd,
                     .num_sge = 1,
                     .remote_addr = (uint64_t)(uintptr_t)(y->buf + MW_BUF / 2),
                     .rkey = uw_mr_stag(y->mr)};
    assert_int_equal(uw_post_send(x->qp, &rr, 1, NULL), 0);
    wc = mw_wc(w, x);
    assert_int_equal(wc.status, UW_WC_SUCCESS);
    assert_int_equal(wc.opcode, UW_WC_RDMA_READ);
    assert_int_equal(wc.byte_len, len);
    assert_memory_equal(x->buf, y->buf + MW_BUF / 2, len);
    assert_memory_equal(x->buf, x->buf + MW_BUF / 2, len);
}
