/* uwarp-rping: client and server (see rping.h for the exchange). */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cliutil.h"
#include "../rdmacli.h"
#include "rping.h"

#define RP_STEP_DEFAULT_MS 30000
#define RP_MAX_PENDING 8

/* One connection's resources. rping keeps exactly one receive posted and
 * re-posts it before acting on what arrived, so the peer's next message
 * always finds it; every message is one 16-octet record. */
struct rp {
    const rp_opts *o;
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_qp *qp;
    uint8_t recv_buf[RP_INFO_LEN], send_buf[RP_INFO_LEN];
    uint8_t *rdma_buf, *start_buf;
    uw_mr *recv_mr, *send_mr, *rdma_mr, *start_mr;
    unsigned sends_out; /* Sends whose completion has not been polled */
    bool disconnected;
    char what[128];
    /* -P: clients that arrived while another was served, in order. */
    uw_cm_event pending[RP_MAX_PENDING];
    int npending;
};

/* A CONNECT_REQUEST while another connection is served: a persistent server
 * keeps it for later (rping -P serves clients concurrently; we serve them
 * one after another), otherwise it is refused with a reset. */
static void other_request(struct rp *r, const uw_cm_event *ev)
{
    if (ev->type != UW_CM_CONNECT_REQUEST || !ev->qp)
        return;
    if (r->o->persistent && r->npending < RP_MAX_PENDING) {
        r->pending[r->npending++] = *ev;
        return;
    }
    uw_abort(ev->qp);
    uw_qp_destroy(ev->qp);
}

static int fail_lib(const char *call, int err)
{
    char t[256];
    rc_err_text(err, t, sizeof(t));
    cli_msg("%s failed: %s", call, t);
    return rc_exit_for_err(err);
}

__attribute__((format(printf, 2, 3))) static void dbg(const struct rp *r, const char *fmt, ...)
{
    if (!r->o->debug)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    cli_msg("%s", line);
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static int step_ms(const rp_opts *o)
{
    return o->timeout_ms > 0 ? o->timeout_ms : RP_STEP_DEFAULT_MS;
}

static void fill_param(const rp_opts *o, uw_conn_param *p)
{
    memset(p, 0, sizeof(*p));
    p->rev = o->rev;
    p->crc = o->no_crc ? UW_CRC_AVOID : UW_CRC_PREFER;
    p->markers = o->markers;
    p->p2p = o->p2p;
    p->rtr = o->rtr;
    p->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 0;
    if (o->client) {
        /* rping asks for responder_resources = initiator_depth = 1: one
         * RDMA Read in each direction is all the exchange needs. */
        p->ird = 1;
        p->ord = 1;
    }
}

static int ctx_setup(struct rp *r)
{
    uw_ctx_attr attr;
    memset(&attr, 0, sizeof(attr));
    if (r->o->debug) {
        attr.log = rc_log;
        attr.log_level = r->o->debug > 1 ? UW_LOG_DEBUG : UW_LOG_INFO;
    }
    int rc = uw_ctx_create(&r->ctx, &attr);
    if (rc < 0)
        return fail_lib("uw_ctx_create", rc);
    if ((rc = uw_pd_alloc(r->ctx, &r->pd)) < 0)
        return fail_lib("uw_pd_alloc", rc);
    /* rping's CQ: twice its send queue depth of 16. */
    if ((rc = uw_cq_create(r->ctx, 32, &r->cq)) < 0)
        return fail_lib("uw_cq_create", rc);
    return -1;
}

static void qp_attr_of(const struct rp *r, uw_qp_attr *qa)
{
    memset(qa, 0, sizeof(*qa));
    qa->pd = r->pd;
    qa->send_cq = r->cq;
    qa->recv_cq = r->cq;
    qa->max_send_wr = 16;
    qa->max_recv_wr = 2;
}

/* rping's four regions: the receive and send records, the RDMA buffer
 * (Read sink on the server, Write sink on the client) and, on the client,
 * the start buffer the server reads. */
static int buffers_setup(struct rp *r)
{
    const unsigned remote = UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_READ | UW_ACCESS_REMOTE_WRITE;
    uint32_t size = r->o->size;
    int rc;
    memset(r->send_buf, 0, sizeof(r->send_buf));
    if ((rc = uw_mr_reg(r->pd, r->recv_buf, sizeof(r->recv_buf), UW_ACCESS_LOCAL_WRITE,
                        &r->recv_mr)) < 0)
        return fail_lib("uw_mr_reg", rc);
    if ((rc = uw_mr_reg(r->pd, r->send_buf, sizeof(r->send_buf), 0, &r->send_mr)) < 0)
        return fail_lib("uw_mr_reg", rc);
    r->rdma_buf = calloc(1, size);
    if (!r->rdma_buf || (rc = uw_mr_reg(r->pd, r->rdma_buf, size, remote, &r->rdma_mr)) < 0)
        return r->rdma_buf ? fail_lib("uw_mr_reg", rc) : fail_lib("calloc", UW_ENOMEM);
    if (r->o->client) {
        r->start_buf = calloc(1, size);
        if (!r->start_buf || (rc = uw_mr_reg(r->pd, r->start_buf, size, remote, &r->start_mr)) < 0)
            return r->start_buf ? fail_lib("uw_mr_reg", rc) : fail_lib("calloc", UW_ENOMEM);
    }
    return -1;
}

static int post_recv(struct rp *r)
{
    uw_sge s = {.addr = (uint64_t)(uintptr_t)r->recv_buf,
                .length = RP_INFO_LEN,
                .lkey = uw_mr_stag(r->recv_mr)};
    uw_recv_wr wr = {.wr_id = 1, .sg_list = &s, .num_sge = 1};
    int bad = 0, rc = uw_post_recv(r->qp, &wr, 1, &bad);
    return rc < 0 ? fail_lib("uw_post_recv", rc) : -1;
}

static int post(struct rp *r, int opcode, void *buf, uint32_t len, uint32_t lkey, uint64_t raddr,
                uint32_t rkey)
{
    uw_sge s = {.addr = (uint64_t)(uintptr_t)buf, .length = len, .lkey = lkey};
    uw_send_wr wr = {.wr_id = (uint64_t)opcode,
                     .opcode = opcode,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &s,
                     .num_sge = 1,
                     .remote_addr = raddr,
                     .rkey = rkey};
    int bad = 0, rc = uw_post_send(r->qp, &wr, 1, &bad);
    if (rc < 0)
        return fail_lib("uw_post_send", rc);
    if (opcode == UW_WR_SEND)
        r->sends_out++;
    return -1;
}

static int send_info(struct rp *r, const void *buf, uw_mr *mr)
{
    put_be(r->send_buf, (uint64_t)(uintptr_t)buf, 8);
    put_be(r->send_buf + 8, uw_mr_stag(mr), 4);
    put_be(r->send_buf + 12, r->o->size, 4);
    return post(r, UW_WR_SEND, r->send_buf, RP_INFO_LEN, uw_mr_stag(r->send_mr), 0, 0);
}

/* A failed completion: find the event that explains it (a Terminate, a
 * transport error, or the peer's close that flushed our receive). */
static int wc_failed(struct rp *r, const uw_wc *wc, bool may_end)
{
    int64_t deadline = rc_now_ms() + 1000;
    while (!r->disconnected && rc_remaining_ms(deadline) > 0) {
        uw_cm_event ev;
        if (uw_cm_wait_event(r->ctx, &ev, rc_remaining_ms(deadline)) != 1)
            break;
        if (ev.qp != r->qp) {
            other_request(r, &ev);
            continue;
        }
        if (ev.type == UW_CM_DISCONNECTED)
            r->disconnected = true;
        else
            return rc_report_event(r->what, &ev);
    }
    if (wc->status == UW_WC_WR_FLUSH_ERR && r->disconnected && may_end)
        return -2;
    char t[256];
    rc_err_text(wc->err, t, sizeof(t));
    cli_msg("%s: completion failed: %s: %s", r->what, rc_wc_status_name(wc->status), t);
    return wc->status == UW_WC_TIMEOUT_ERR ? RC_EXIT_TIMEOUT : RC_EXIT_PROTO;
}

/* Waits for the completion of kind want (a UW_WC_* opcode). Send
 * completions met on the way are counted; a receive is re-posted at once.
 * Returns -1 when it arrived, -2 when the peer disconnected instead (only
 * when may_end), else an exit code. */
static int wait_wc(struct rp *r, int want, bool may_end, uw_wc *out)
{
    int64_t deadline = rc_now_ms() + step_ms(r->o);
    for (;;) {
        uw_wc wc;
        int n = uw_cq_poll(r->cq, &wc, 1);
        if (n < 0)
            return fail_lib("uw_cq_poll", n);
        if (n == 1) {
            if (wc.status != UW_WC_SUCCESS)
                return wc_failed(r, &wc, may_end);
            if (wc.opcode == UW_WC_SEND && r->sends_out)
                r->sends_out--;
            if (wc.opcode == UW_WC_RECV && want != UW_WC_RECV) {
                cli_msg("%s: the peer sent a message out of turn", r->what);
                return RC_EXIT_PROTO;
            }
            if (wc.opcode == UW_WC_RECV && wc.byte_len != RP_INFO_LEN) {
                cli_msg("%s: received bogus data, size %u", r->what, wc.byte_len);
                return RC_EXIT_PROTO;
            }
            if (wc.opcode == want) {
                *out = wc;
                return -1;
            }
            continue;
        }
        if (r->disconnected && may_end)
            return -2;
        uw_cm_event ev;
        int rc = uw_cm_get_event(r->ctx, &ev);
        if (rc < 0)
            return fail_lib("uw_cm_get_event", rc);
        if (rc == 1) {
            if (ev.qp != r->qp) {
                other_request(r, &ev);
                continue;
            }
            if (ev.type == UW_CM_DISCONNECTED) {
                r->disconnected = true;
                continue; /* completions already queued come first */
            }
            return rc_report_event(r->what, &ev);
        }
        if (r->disconnected) {
            cli_msg("%s: the peer closed the connection in the middle of a ping", r->what);
            return RC_EXIT_PROTO;
        }
        int left = rc_remaining_ms(deadline);
        if (left == 0) {
            cli_msg("%s: timed out waiting for the peer (%d ms)", r->what, step_ms(r->o));
            return RC_EXIT_TIMEOUT;
        }
        rc = uw_ctx_wait(r->ctx, left < RC_WAIT_SLICE_MS ? left : RC_WAIT_SLICE_MS);
        if (rc < 0 && rc != UW_ETIMEDOUT) /* a slice ending is not the deadline */
            return fail_lib("uw_ctx_wait", rc);
    }
}

/* Waits for a received record and re-posts the receive buffer, keeping a
 * copy of the record in rec. */
static int wait_record(struct rp *r, bool may_end, uint8_t rec[RP_INFO_LEN])
{
    uw_wc wc;
    int rc = wait_wc(r, UW_WC_RECV, may_end, &wc);
    if (rc != -1)
        return rc;
    memcpy(rec, r->recv_buf, RP_INFO_LEN);
    return post_recv(r);
}

static int wait_established(struct rp *r, int guard_ms)
{
    int64_t deadline = rc_now_ms() + guard_ms;
    for (;;) {
        uw_cm_event ev;
        int rc = uw_cm_wait_event(r->ctx, &ev, rc_remaining_ms(deadline));
        if (rc == UW_ETIMEDOUT || (rc == 0 && rc_remaining_ms(deadline) == 0)) {
            cli_msg("%s: connection setup timed out", r->what);
            return RC_EXIT_TIMEOUT;
        }
        if (rc < 0)
            return fail_lib("uw_cm_wait_event", rc);
        if (rc == 0)
            continue;
        if (ev.qp != r->qp) {
            other_request(r, &ev);
            continue;
        }
        if (ev.type == UW_CM_ESTABLISHED) {
            dbg(r, "%s: established", r->what);
            return -1;
        }
        return rc_report_event(r->what, &ev);
    }
}

/* Graceful close, then lets both FINs pass before the QP is destroyed. */
static void close_conn(struct rp *r)
{
    if (!r->qp)
        return;
    if (uw_qp_state(r->qp) == UW_QPS_RTS || uw_qp_state(r->qp) == UW_QPS_CLOSING)
        uw_disconnect(r->qp);
    int64_t deadline = rc_now_ms() + 2000;
    while (uw_qp_state(r->qp) != UW_QPS_CLOSED && uw_qp_state(r->qp) != UW_QPS_ERROR &&
           rc_remaining_ms(deadline) > 0) {
        uw_cm_event ev;
        if (uw_cm_wait_event(r->ctx, &ev, 50) == 1 && ev.qp != r->qp)
            other_request(r, &ev);
        uw_wc wc;
        while (uw_cq_poll(r->cq, &wc, 1) == 1) {
        }
    }
}

/* Frees the connection's QP and buffers, keeping context, PD and CQ. */
static void conn_free(struct rp *r)
{
    if (r->qp)
        uw_qp_destroy(r->qp);
    r->qp = NULL;
    uw_mr **mrs[] = {&r->recv_mr, &r->send_mr, &r->rdma_mr, &r->start_mr};
    for (size_t i = 0; i < sizeof(mrs) / sizeof(mrs[0]); i++) {
        if (*mrs[i])
            uw_mr_dereg(*mrs[i]);
        *mrs[i] = NULL;
    }
    free(r->rdma_buf);
    free(r->start_buf);
    r->rdma_buf = r->start_buf = NULL;
    r->sends_out = 0;
    r->disconnected = false;
}

static void ctx_free(struct rp *r)
{
    conn_free(r);
    for (int i = 0; i < r->npending; i++)
        uw_qp_destroy(r->pending[i].qp);
    r->npending = 0;
    if (r->cq)
        uw_cq_destroy(r->cq);
    if (r->pd)
        uw_pd_dealloc(r->pd);
    if (r->ctx) {
        int rc = uw_ctx_destroy(r->ctx);
        if (rc < 0)
            cli_msg("uw_ctx_destroy: %s", uw_strerror(rc));
    }
}

/* ------------------------------------------------------------------------ */
/* Client                                                                    */

/* rping's ping data: "rdma-ping-<n>: " then printable characters from 'A'
 * to 'z' cycling, starting one character later on each ping, NUL-terminated. */
static void format_ping(uint8_t *buf, uint32_t size, long ping, int start)
{
    int cc = snprintf((char *)buf, size, "rdma-ping-%ld: ", ping);
    if (cc < 0)
        cc = 0;
    int ch = start;
    for (uint32_t i = (uint32_t)cc; i < size; i++) {
        buf[i] = (uint8_t)ch;
        if (++ch > 'z')
            ch = 'A';
    }
    buf[size - 1] = 0;
}

static int client_pings(struct rp *r)
{
    const rp_opts *o = r->o;
    int start = 'A';
    uint8_t rec[RP_INFO_LEN];
    for (long ping = 0; !o->count || ping < o->count; ping++) {
        format_ping(r->start_buf, o->size, ping, start);
        if (++start > 'z')
            start = 'A';
        int rc = send_info(r, r->start_buf, r->start_mr);
        if (rc >= 0)
            return rc;
        dbg(r, "ping %ld: start buffer advertised", ping);
        if ((rc = wait_record(r, false, rec)) >= 0)
            return rc;
        dbg(r, "ping %ld: go-ahead after the RDMA Read", ping);
        /* Our send record is reused below: its Send must be done. */
        uw_wc wc;
        while (r->sends_out)
            if ((rc = wait_wc(r, UW_WC_SEND, false, &wc)) >= 0)
                return rc;
        /* A stale sink would hide a Write that never happened. */
        memset(r->rdma_buf, 0, o->size);
        if ((rc = send_info(r, r->rdma_buf, r->rdma_mr)) >= 0)
            return rc;
        dbg(r, "ping %ld: sink buffer advertised", ping);
        if ((rc = wait_record(r, false, rec)) >= 0)
            return rc;
        dbg(r, "ping %ld: go-ahead after the RDMA Write", ping);
        while (r->sends_out)
            if ((rc = wait_wc(r, UW_WC_SEND, false, &wc)) >= 0)
                return rc;
        if (o->validate && memcmp(r->start_buf, r->rdma_buf, o->size) != 0) {
            cli_msg("%s: data mismatch in ping %ld", r->what, ping);
            return RC_EXIT_PROTO;
        }
        if (o->verbose)
            printf("ping data: %.*s\n", (int)strnlen((char *)r->rdma_buf, o->size),
                   (char *)r->rdma_buf);
    }
    return -1;
}

int rp_run_client(const rp_opts *o)
{
    struct rp r;
    memset(&r, 0, sizeof(r));
    r.o = o;
    struct sockaddr_storage ss;
    socklen_t len;
    if (rc_resolve(o->addr, o->port, false, &ss, &len) < 0)
        return RC_EXIT_USAGE;
    char as[96];
    rc_addr_str((struct sockaddr *)&ss, as, sizeof(as));
    snprintf(r.what, sizeof(r.what), "connection to %s", as);

    /* rc: -1 while all is well, else the exit code (the tools' convention). */
    int rc = ctx_setup(&r);
    if (rc < 0) {
        uw_qp_attr qa;
        qp_attr_of(&r, &qa);
        int e = uw_qp_create(r.ctx, &qa, &r.qp);
        if (e < 0)
            rc = fail_lib("uw_qp_create", e);
    }
    if (rc < 0)
        rc = buffers_setup(&r);
    if (rc < 0)
        rc = post_recv(&r);
    if (rc < 0) {
        uw_conn_param p;
        fill_param(o, &p);
        int e = uw_connect(r.qp, (struct sockaddr *)&ss, len, &p);
        if (e < 0)
            rc = fail_lib("uw_connect", e);
        else
            rc = wait_established(&r, (o->timeout_ms > 0 ? o->timeout_ms : 10000) + 2000);
    }
    if (rc < 0 && o->pause_ms > 0) {
        /* siw-vm README, pitfall 13: Linux siw as server can lose the first
         * FPDU that follows its MPA Reply within ~2 ms. Keep progressing the
         * context meanwhile. */
        int64_t until = rc_now_ms() + o->pause_ms;
        while (rc_remaining_ms(until) > 0)
            uw_ctx_wait(r.ctx, rc_remaining_ms(until));
    }
    if (rc < 0)
        rc = client_pings(&r);
    if (rc < 0) {
        dbg(&r, "%s: done, disconnecting", r.what);
        close_conn(&r);
        rc = RC_EXIT_OK;
    }
    fflush(stdout);
    ctx_free(&r);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Server                                                                    */

/* Serves one connected client until it disconnects. Returns -1 on a clean
 * end, else an exit code; *iters counts complete pings. */
static int server_pings(struct rp *r, long *iters)
{
    const rp_opts *o = r->o;
    uint8_t rec[RP_INFO_LEN];
    for (;;) {
        int rc = wait_record(r, true, rec);
        if (rc == -2)
            return -1; /* the client is done */
        if (rc >= 0)
            return rc;
        uint64_t raddr = get_be(rec, 8);
        uint32_t rkey = (uint32_t)get_be(rec + 8, 4), rlen = (uint32_t)get_be(rec + 12, 4);
        dbg(r, "ping %ld: start buffer 0x%llx STag 0x%x len %u", *iters, (unsigned long long)raddr,
            rkey, rlen);
        if (rlen > o->size) {
            cli_msg("%s: the client's buffer (%u octets) is larger than ours (-S %u)", r->what,
                    rlen, o->size);
            return RC_EXIT_PROTO;
        }
        if ((rc = post(r, UW_WR_RDMA_READ, r->rdma_buf, rlen, uw_mr_stag(r->rdma_mr), raddr,
                       rkey)) >= 0)
            return rc;
        uw_wc wc;
        if ((rc = wait_wc(r, UW_WC_RDMA_READ, false, &wc)) >= 0)
            return rc;
        dbg(r, "ping %ld: RDMA Read done", *iters);
        if (o->verbose)
            printf("server ping data: %.*s\n", (int)strnlen((char *)r->rdma_buf, o->size),
                   (char *)r->rdma_buf);
        /* Go-ahead: the 16-octet record, content unused (zeros, as rping). */
        if ((rc = post(r, UW_WR_SEND, r->send_buf, RP_INFO_LEN, uw_mr_stag(r->send_mr), 0, 0)) >= 0)
            return rc;
        if ((rc = wait_record(r, false, rec)) >= 0)
            return rc;
        raddr = get_be(rec, 8);
        rkey = (uint32_t)get_be(rec + 8, 4);
        rlen = (uint32_t)get_be(rec + 12, 4);
        dbg(r, "ping %ld: sink buffer 0x%llx STag 0x%x len %u", *iters, (unsigned long long)raddr,
            rkey, rlen);
        /* rping writes back the string and its NUL. */
        uint32_t wlen = (uint32_t)strnlen((char *)r->rdma_buf, o->size) + 1;
        if (wlen > o->size)
            wlen = o->size;
        if (wlen > rlen) {
            cli_msg("%s: the client's sink (%u octets) is too small for %u", r->what, rlen, wlen);
            return RC_EXIT_PROTO;
        }
        if ((rc = post(r, UW_WR_RDMA_WRITE, r->rdma_buf, wlen, uw_mr_stag(r->rdma_mr), raddr,
                       rkey)) >= 0)
            return rc;
        if ((rc = wait_wc(r, UW_WC_RDMA_WRITE, false, &wc)) >= 0)
            return rc;
        dbg(r, "ping %ld: RDMA Write done", *iters);
        if ((rc = post(r, UW_WR_SEND, r->send_buf, RP_INFO_LEN, uw_mr_stag(r->send_mr), 0, 0)) >= 0)
            return rc;
        (*iters)++;
    }
}

/* Accepts qp (a CONNECT_REQUEST) and runs the pings. */
static int serve(struct rp *r, uw_qp *qp, const struct sockaddr_storage *peer)
{
    const rp_opts *o = r->o;
    char as[96];
    rc_addr_str((const struct sockaddr *)peer, as, sizeof(as));
    snprintf(r->what, sizeof(r->what), "connection from %s", as);
    r->qp = qp;
    int rc = buffers_setup(r);
    if (rc < 0)
        rc = post_recv(r);
    if (rc < 0) {
        int e = uw_accept(qp, NULL);
        if (e < 0)
            rc = fail_lib("uw_accept", e);
    }
    if (rc < 0)
        rc = wait_established(r, (o->timeout_ms > 0 ? o->timeout_ms : 5000) + 2000);
    long iters = 0;
    if (rc < 0)
        rc = server_pings(r, &iters);
    if (rc < 0) {
        dbg(r, "%s: the client disconnected", r->what);
        if (o->count_given && iters < o->count) {
            cli_msg("%s: the client disconnected after %ld of %ld pings", r->what, iters, o->count);
            rc = RC_EXIT_PROTO;
        }
    }
    fflush(stdout);
    close_conn(r);
    conn_free(r);
    return rc < 0 ? RC_EXIT_OK : rc;
}

int rp_run_server(const rp_opts *o)
{
    struct rp r;
    memset(&r, 0, sizeof(r));
    r.o = o;
    struct sockaddr_storage ss;
    socklen_t len;
    char hostbuf[256];
    const char *host = o->addr;
    if (host && host[0] == '[' && strlen(host) < sizeof(hostbuf) + 2) {
        /* Accept "[v6]" as well as a bare address. */
        snprintf(hostbuf, sizeof(hostbuf), "%.*s", (int)strlen(host) - 2, host + 1);
        host = hostbuf;
    }
    if (rc_resolve(host, o->port, true, &ss, &len) < 0)
        return RC_EXIT_USAGE;
    int rc = ctx_setup(&r);
    uw_listener *lis = NULL;
    uw_qp_attr qa;
    qp_attr_of(&r, &qa);
    uw_conn_param p;
    fill_param(o, &p);
    if (rc < 0) {
        int e = uw_listen(r.ctx, (struct sockaddr *)&ss, len, &qa, &p, &lis);
        if (e < 0)
            rc = fail_lib("uw_listen", e);
    }
    if (rc < 0) {
        struct sockaddr_storage b;
        socklen_t bl = sizeof(b);
        char as[96];
        if (uw_listener_addr(lis, &b, &bl) == 0) {
            rc_addr_str((struct sockaddr *)&b, as, sizeof(as));
            if (o->debug || !strcmp(o->port, "0"))
                cli_msg("listening on %s", as);
        }
    }
    /* As uwarp-cat: -t bounds the wait for a connection, plus its setup. */
    int64_t deadline = o->timeout_ms > 0 ? rc_now_ms() + 2 * (int64_t)o->timeout_ms + 500 : -1;
    while (rc < 0) {
        uw_cm_event ev;
        int w;
        if (r.npending) {
            /* A client that arrived while the previous one was served. */
            ev = r.pending[0];
            memmove(r.pending, r.pending + 1, sizeof(r.pending[0]) * (size_t)--r.npending);
            w = 1;
        } else {
            w = uw_cm_wait_event(r.ctx, &ev, rc_remaining_ms(deadline));
        }
        if (w == UW_ETIMEDOUT || (w == 0 && deadline >= 0 && rc_remaining_ms(deadline) == 0)) {
            cli_msg("no connection within -t");
            rc = RC_EXIT_TIMEOUT;
            break;
        }
        if (w < 0) {
            rc = fail_lib("uw_cm_wait_event", w);
            break;
        }
        if (w == 0)
            continue;
        if (ev.type == UW_CM_CONNECT_REQUEST) {
            int s = serve(&r, ev.qp, &ev.peer);
            if (!o->persistent) {
                rc = s;
                break;
            }
            /* rping -P keeps serving whatever happened to one client. */
            deadline = o->timeout_ms > 0 ? rc_now_ms() + 2 * (int64_t)o->timeout_ms + 500 : -1;
            continue;
        }
        if (ev.type == UW_CM_CONNECT_ERROR && !ev.qp) {
            char as[96];
            rc_addr_str((struct sockaddr *)&ev.peer, as, sizeof(as));
            char what[128];
            snprintf(what, sizeof(what), "connection from %s", as);
            int e = rc_report_event(what, &ev);
            if (!o->persistent) {
                rc = e;
                break;
            }
        }
    }
    if (lis)
        uw_listener_destroy(lis);
    fflush(stdout);
    ctx_free(&r);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_prog("uwarp-rping");
    rp_opts o;
    int rc = rp_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    signal(SIGPIPE, SIG_IGN);
    /* Each ping's line should appear as it happens, even through a pipe. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    return o.client ? rp_run_client(&o) : rp_run_server(&o);
}
