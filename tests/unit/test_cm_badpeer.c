/* The connection manager against misbehaving peers on loopback: garbage
 * instead of a Request, oversized private data, a peer that stalls
 * mid-frame or never answers, a peer that disappears mid-transfer. Each
 * must end in a clear error within its timeout, with nothing leaked (the
 * context can be destroyed, which fails while any QP exists). */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "uwarp/verbs.h"

typedef struct ep {
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_listener *l;
    struct sockaddr_storage ss;
    socklen_t sl;
} ep;

static void ep_init(ep *e)
{
    memset(e, 0, sizeof(*e));
    assert_int_equal(uw_ctx_create(&e->ctx, NULL), 0);
    assert_int_equal(uw_pd_alloc(e->ctx, &e->pd), 0);
    assert_int_equal(uw_cq_create(e->ctx, 64, &e->cq), 0);
}

static void ep_listen(ep *e, int timeout_ms)
{
    uw_qp_attr qa = {.pd = e->pd, .send_cq = e->cq, .recv_cq = e->cq};
    uw_conn_param p = {.timeout_ms = timeout_ms};
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(uw_listen(e->ctx, (struct sockaddr *)&sin, sizeof(sin), &qa, &p, &e->l), 0);
    assert_int_equal(uw_listener_addr(e->l, &e->ss, &e->sl), 0);
}

static void ep_fini(ep *e)
{
    if (e->l)
        assert_int_equal(uw_listener_destroy(e->l), 0);
    assert_int_equal(uw_cq_destroy(e->cq), 0);
    assert_int_equal(uw_pd_dealloc(e->pd), 0);
    assert_int_equal(uw_ctx_destroy(e->ctx), 0);
}

static int raw_connect(const ep *e)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (const struct sockaddr *)&e->ss, e->sl), 0);
    return fd;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The raw peer sees the connection closed (EOF or reset) within ms. */
static void assert_closed(int fd, int ms)
{
    char b[256];
    double end = now_s() + ms / 1000.0;
    while (now_s() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0) {
            ssize_t r = recv(fd, b, sizeof(b), 0);
            if (r <= 0)
                return;
        }
    }
    fail_msg("connection still open after %d ms", ms);
}

static void listener_error(const char *bytes, size_t len, int want_err, int timeout_ms)
{
    ep e;
    ep_init(&e);
    ep_listen(&e, timeout_ms);
    int fd = raw_connect(&e);
    if (len)
        assert_int_equal(send(fd, bytes, len, 0), (ssize_t)len);
    uw_cm_event ev;
    double t0 = now_s();
    assert_int_equal(uw_cm_wait_event(e.ctx, &ev, timeout_ms + 3000), 1);
    assert_int_equal(ev.type, UW_CM_CONNECT_ERROR);
    assert_null(ev.qp);
    assert_ptr_equal(ev.listener, e.l);
    assert_int_equal(ev.err, want_err);
    assert_true(now_s() - t0 < timeout_ms / 1000.0 + 2.0);
    assert_closed(fd, 2000);
    close(fd);
    ep_fini(&e); /* fails with EBUSY if a QP leaked */
}

static void test_garbage_request(void **st)
{
    (void)st;
    char junk[40];
    memset(junk, 'x', sizeof(junk));
    listener_error(junk, sizeof(junk), UW_EMPA_KEY, 5000);
    assert_int_equal(uw_mpa_error_code(UW_EMPA_KEY), 4);
}

static void test_pd_length_over_512(void **st)
{
    (void)st;
    uint8_t req[20] = "MPA ID Req Frame";
    req[16] = 0x40; /* C */
    req[17] = 1;    /* rev 1 */
    req[18] = 0x02; /* PD_Length 600 */
    req[19] = 0x58;
    listener_error((const char *)req, sizeof(req), UW_EMPA_PD_LENGTH, 5000);
}

static void test_stall_mid_frame(void **st)
{
    (void)st;
    listener_error("MPA ID Req", 10, UW_ETIMEDOUT, 300);
}

static void test_silent_responder(void **st)
{
    (void)st;
    /* A TCP listener that accepts and never sends a Reply. */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(lfd, 4), 0);
    socklen_t sl = sizeof(sin);
    getsockname(lfd, (struct sockaddr *)&sin, &sl);
    ep e;
    ep_init(&e);
    uw_qp_attr qa = {.pd = e.pd, .send_cq = e.cq, .recv_cq = e.cq};
    uw_qp *qp;
    assert_int_equal(uw_qp_create(e.ctx, &qa, &qp), 0);
    uw_conn_param p = {.timeout_ms = 400};
    assert_int_equal(uw_connect(qp, (struct sockaddr *)&sin, sl, &p), 0);
    uw_cm_event ev;
    double t0 = now_s();
    assert_int_equal(uw_cm_wait_event(e.ctx, &ev, 5000), 1);
    assert_int_equal(ev.type, UW_CM_CONNECT_ERROR);
    assert_int_equal(ev.err, UW_ETIMEDOUT);
    assert_true(now_s() - t0 < 2.0);
    assert_int_equal(uw_qp_destroy(qp), 0);
    close(lfd);
    ep_fini(&e);
}

static void test_refused(void **st)
{
    (void)st;
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    socklen_t sl = sizeof(sin);
    getsockname(lfd, (struct sockaddr *)&sin, &sl);
    close(lfd); /* nothing listens on the port now */
    ep e;
    ep_init(&e);
    uw_qp_attr qa = {.pd = e.pd, .send_cq = e.cq, .recv_cq = e.cq};
    uw_qp *qp;
    assert_int_equal(uw_qp_create(e.ctx, &qa, &qp), 0);
    assert_int_equal(uw_connect(qp, (struct sockaddr *)&sin, sl, NULL), 0);
    uw_cm_event ev;
    assert_int_equal(uw_cm_wait_event(e.ctx, &ev, 5000), 1);
    assert_int_equal(ev.type, UW_CM_CONNECT_ERROR);
    assert_int_equal(ev.err, UW_ECONNREFUSED);
    assert_int_equal(uw_qp_destroy(qp), 0);
    ep_fini(&e);
}

/* A peer that sends a valid Request, gets its Reply, then resets the
 * connection in the middle of an FPDU. */
static void test_disappear_mid_transfer(void **st)
{
    (void)st;
    ep e;
    ep_init(&e);
    ep_listen(&e, 2000);
    int fd = raw_connect(&e);
    static const uint8_t req[] = "MPA ID Req Frame\x40\x01\x00\x00";
    assert_int_equal(send(fd, req, 20, 0), 20);
    uw_cm_event ev;
    assert_int_equal(uw_cm_wait_event(e.ctx, &ev, 3000), 1);
    assert_int_equal(ev.type, UW_CM_CONNECT_REQUEST);
    uw_qp *qp = ev.qp;
    assert_int_equal(uw_accept(qp, NULL), 0);
    assert_int_equal(uw_cm_wait_event(e.ctx, &ev, 3000), 1);
    assert_int_equal(ev.type, UW_CM_ESTABLISHED);
    /* Half an FPDU (length 100, then 10 octets), then gone. */
    static const uint8_t half[12] = {0x00, 0x64, 0x41, 0x43};
    assert_int_equal(send(fd, half, sizeof(half), 0), (ssize_t)sizeof(half));
    close(fd);
    double t0 = now_s();
    assert_int_equal(uw_cm_wait_event(e.ctx, &ev, 5000), 1);
    /* The peer never read our Reply, so its close() sends a reset: that
     * reset usually beats the truncated FPDU to the engine (a reset in
     * reading, EPIPE on the Terminate it tries to send); if the half FPDU
     * is seen first, the stream ended inside it and a Terminate went out. */
    assert_true(ev.type == UW_CM_TERMINATED || ev.type == UW_CM_CONN_ERROR);
    assert_ptr_equal(ev.qp, qp);
    if (ev.type == UW_CM_TERMINATED)
        assert_int_equal(ev.err, UW_EMPA_TRUNCATED);
    else
        assert_true(ev.err == UW_EPIPE || ev.err == UW_ECONNRESET);
    assert_true(now_s() - t0 < 3.0);
    assert_int_equal(uw_qp_destroy(qp), 0);
    ep_fini(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_garbage_request), cmocka_unit_test(test_pd_length_over_512),
        cmocka_unit_test(test_stall_mid_frame), cmocka_unit_test(test_silent_responder),
        cmocka_unit_test(test_refused),         cmocka_unit_test(test_disappear_mid_transfer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
