/* uwarp-cat: connection setup and the stdin/stdout <-> Send loop.
 *
 * One thread, one poll() over stdin and the context's file descriptor. The
 * library does all protocol work inside uw_ctx_progress(), uw_cq_poll() and
 * the post calls (include/uwarp/verbs.h, "Progress model").
 *
 * Receive-side flow control. RDMAP has none (RFC 5040 5.1: a Send needs a
 * posted receive, else the stream is terminated). We post CAT_NRECV buffers
 * and give the QP a receive CQ of only CAT_RECV_CQ entries: when it is full
 * the library stops reading the socket, so at most CAT_RECV_CQ completions
 * wait in the CQ, at most CAT_POLL_BATCH are being written to stdout by us,
 * and one message may be partly placed: 16 + 16 + 1 = 33 < 64 buffers in use,
 * whatever the sender does. TCP flow control then pushes back to the sender.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../cliutil.h"
#include "../rdmacli.h"
#include "cat.h"

_Static_assert(CAT_RECV_CQ + CAT_POLL_BATCH + 1 < CAT_NRECV, "receive buffers can run out");

#define CAT_MAX_EXTRA 16
/* wr_id of the initiator's opening empty Send: outside the send slots. */
#define CAT_OPENING_WR 0xFFFFu

struct cat {
    const cat_opts *o;
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *scq, *rcq;
    uw_qp *qp;
    uw_listener *lis;
    uw_qp *extra[CAT_MAX_EXTRA]; /* further connections to a one-shot listener */
    int nextra;
    uint8_t *rbuf, *sbuf;
    size_t rsz;
    uw_mr *rmr, *smr;
    bool busy[CAT_NSEND];
    unsigned inflight;
    bool in_eof, peer_closed;
    int64_t last_act;
    bool est_p2p;   /* the connection uses the peer-to-peer model */
    char what[128]; /* "connection to 127.0.0.1:7174" for messages */
    uint16_t peer_pd_len;
    uint8_t peer_pd[UW_MPA_MAX_PD];
};

static int fail_lib(const char *call, int err)
{
    char t[256];
    rc_err_text(err, t, sizeof(t));
    cli_msg("%s failed: %s", call, t);
    return rc_exit_for_err(err);
}

static void fill_param(const cat_opts *o, uw_conn_param *p)
{
    memset(p, 0, sizeof(*p));
    p->private_data = o->pd_len ? o->pd : NULL;
    p->private_data_len = o->pd_len;
    p->rev = o->rev;
    p->crc = o->no_crc ? UW_CRC_AVOID : UW_CRC_PREFER;
    p->markers = o->markers;
    p->ird = o->ird;
    p->ord = o->ord;
    p->p2p = o->p2p;
    p->rtr = o->rtr;
    p->accept_rev0 = o->accept_rev0;
    p->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 0;
}

static int setup_common(struct cat *c)
{
    const cat_opts *o = c->o;
    uw_ctx_attr attr;
    memset(&attr, 0, sizeof(attr));
    if (o->verbose >= 2) {
        attr.log = rc_log;
        attr.log_level = UW_LOG_DEBUG;
    }
    int rc = uw_ctx_create(&c->ctx, &attr);
    if (rc < 0)
        return fail_lib("uw_ctx_create", rc);
    if ((rc = uw_pd_alloc(c->ctx, &c->pd)) < 0)
        return fail_lib("uw_pd_alloc", rc);
    /* The send CQ never fills: at most CAT_NSEND sends are outstanding. */
    if ((rc = uw_cq_create(c->ctx, CAT_NSEND + 8, &c->scq)) < 0)
        return fail_lib("uw_cq_create", rc);
    if ((rc = uw_cq_create(c->ctx, CAT_RECV_CQ, &c->rcq)) < 0)
        return fail_lib("uw_cq_create", rc);
    c->rsz = o->msg_size > CAT_RECV_MIN ? o->msg_size : CAT_RECV_MIN;
    c->rbuf = malloc(c->rsz * CAT_NRECV);
    c->sbuf = malloc((size_t)o->msg_size * CAT_NSEND);
    if (!c->rbuf || !c->sbuf) {
        cli_msg("out of memory for %u receive buffers of %zu octets", CAT_NRECV, c->rsz);
        return RC_EXIT_PROTO;
    }
    rc = uw_mr_reg(c->pd, c->rbuf, c->rsz * CAT_NRECV, UW_ACCESS_LOCAL_WRITE, &c->rmr);
    if (rc < 0)
        return fail_lib("uw_mr_reg (receive buffers)", rc);
    /* Send sources are only read locally: no access rights needed. */
    rc = uw_mr_reg(c->pd, c->sbuf, (size_t)o->msg_size * CAT_NSEND, 0, &c->smr);
    if (rc < 0)
        return fail_lib("uw_mr_reg (send buffers)", rc);
    return -1;
}

static void qp_attr_of(const struct cat *c, uw_qp_attr *qa)
{
    memset(qa, 0, sizeof(*qa));
    qa->pd = c->pd;
    qa->send_cq = c->scq;
    qa->recv_cq = c->rcq;
    /* Room for an RTR the library may queue ahead of our Sends. */
    qa->max_send_wr = CAT_NSEND + 4;
    qa->max_recv_wr = CAT_NRECV;
}

static int post_recv(struct cat *c, unsigned i)
{
    uw_sge s = {.addr = (uint64_t)(uintptr_t)(c->rbuf + (size_t)i * c->rsz),
                .length = (uint32_t)c->rsz,
                .lkey = uw_mr_stag(c->rmr)};
    uw_recv_wr wr = {.wr_id = i, .sg_list = &s, .num_sge = 1};
    int bad = 0;
    return uw_post_recv(c->qp, &wr, 1, &bad);
}

static int post_all_recv(struct cat *c)
{
    for (unsigned i = 0; i < CAT_NRECV; i++) {
        int rc = post_recv(c, i);
        if (rc < 0)
            return fail_lib("uw_post_recv", rc);
    }
    return -1;
}

/* Another connection to our one-shot listener: refuse it with a reset. */
static void drop_extra(struct cat *c, uw_qp *qp)
{
    if (!qp || qp == c->qp)
        return;
    uw_abort(qp);
    if (c->nextra < CAT_MAX_EXTRA)
        c->extra[c->nextra++] = qp;
    else
        uw_qp_destroy(qp);
}

static void remember_peer_pd(struct cat *c, const uw_cm_event *ev)
{
    c->peer_pd_len = ev->private_data_len <= UW_MPA_MAX_PD ? ev->private_data_len : 0;
    memcpy(c->peer_pd, ev->private_data, c->peer_pd_len);
}

/* Waits for the ESTABLISHED event of c->qp. Returns -1 when established,
 * else an exit code. guard_ms bounds the wait in case the library's own
 * setup timer (uw_conn_param.timeout_ms) never fires. */
static int wait_established(struct cat *c, int guard_ms)
{
    int64_t deadline = rc_now_ms() + guard_ms;
    for (;;) {
        uw_cm_event ev;
        int rc = uw_cm_wait_event(c->ctx, &ev, rc_remaining_ms(deadline));
        if (rc == UW_ETIMEDOUT || (rc == 0 && rc_remaining_ms(deadline) == 0)) {
            cli_msg("%s: connection setup timed out (no result after %d ms)", c->what, guard_ms);
            return RC_EXIT_TIMEOUT;
        }
        if (rc < 0)
            return fail_lib("uw_cm_wait_event", rc);
        if (rc == 0)
            continue;
        if (ev.type == UW_CM_CONNECT_REQUEST) {
            drop_extra(c, ev.qp);
            continue;
        }
        if (ev.qp != c->qp) {
            /* A refused extra connection, or a failed setup the listener
             * reports without a QP: not ours to fail on. */
            continue;
        }
        if (ev.type == UW_CM_ESTABLISHED) {
            c->est_p2p = ev.mpa.p2p;
            /* The responder already has the initiator's private data from
             * CONNECT_REQUEST; keep it if this event carries none. */
            if (ev.private_data_len || !c->peer_pd_len)
                remember_peer_pd(c, &ev);
            char rtr[32];
            rc_rtr_str(ev.mpa.p2p ? ev.mpa.rtr : 0, rtr, sizeof(rtr));
            if (c->o->verbose) {
                char hex[2 * UW_MPA_MAX_PD + 1];
                cli_hex(hex, c->peer_pd, c->peer_pd_len);
                char line[1400];
                int n = snprintf(line, sizeof(line),
                                 "{\"rev\":%u,\"crc\":%s,\"markers_rx\":%s,\"markers_tx\":%s,"
                                 "\"ird\":%u,\"ord\":%u,\"p2p\":%s,\"rtr\":\"%s\","
                                 "\"peer_pd\":\"%s\"}\n",
                                 (unsigned)ev.mpa.rev, ev.mpa.crc ? "true" : "false",
                                 ev.mpa.markers_rx ? "true" : "false",
                                 ev.mpa.markers_tx ? "true" : "false", (unsigned)ev.mpa.ird,
                                 (unsigned)ev.mpa.ord, ev.mpa.p2p ? "true" : "false", rtr, hex);
                if (n > 0)
                    (void)cli_write_all(STDERR_FILENO, line, strlen(line));
            }
            return -1;
        }
        return rc_report_event(c->what, &ev);
    }
}

static int run_initiator(struct cat *c)
{
    const cat_opts *o = c->o;
    struct sockaddr_storage ss;
    socklen_t len;
    if (rc_resolve(o->host, o->port, false, &ss, &len) < 0)
        return RC_EXIT_USAGE;
    char as[96];
    rc_addr_str((struct sockaddr *)&ss, as, sizeof(as));
    snprintf(c->what, sizeof(c->what), "connection to %s", as);
    int rc = setup_common(c);
    if (rc >= 0)
        return rc;
    uw_qp_attr qa;
    qp_attr_of(c, &qa);
    if ((rc = uw_qp_create(c->ctx, &qa, &c->qp)) < 0)
        return fail_lib("uw_qp_create", rc);
    /* Receives go first: the responder may send as soon as it is
     * established, before we have even seen our ESTABLISHED event. */
    if ((rc = post_all_recv(c)) >= 0)
        return rc;
    uw_conn_param p;
    fill_param(o, &p);
    if ((rc = uw_connect(c->qp, (struct sockaddr *)&ss, len, &p)) < 0)
        return fail_lib("uw_connect", rc);
    rc = wait_established(c, (o->timeout_ms > 0 ? o->timeout_ms : 10000) + 2000);
    if (rc >= 0 || c->est_p2p)
        return rc;
    /* RFC 5044 7.1.2: in the client-server model the responder sends no FPDU
     * before it has received one, so a responder with data and an initiator
     * without would wait for each other. The initiator therefore opens with
     * an empty Send (its receiver writes nothing for it). In the peer-to-peer
     * model the RTR plays that part (RFC 6581 7.1). */
    uw_send_wr wr = {.wr_id = CAT_OPENING_WR, .opcode = UW_WR_SEND, .flags = UW_SEND_SIGNALED};
    int bad = 0;
    if ((rc = uw_post_send(c->qp, &wr, 1, &bad)) < 0)
        return fail_lib("uw_post_send (opening empty Send)", rc);
    return -1;
}

/* Rejects the request on qp. uw_reject() only queues the Reply (the QP is
 * CLOSED at once and the library writes the Reply while lingering), and the
 * API has no event for "Reply written"; so the context is progressed for a
 * while before uw_qp_destroy(), which would otherwise close the socket with
 * the Reply still unsent. */
static int reject_and_wait(struct cat *c, uw_qp *qp)
{
    const cat_opts *o = c->o;
    int rc = uw_reject(qp, o->pd_len ? o->pd : NULL, o->pd_len);
    if (rc < 0)
        return fail_lib("uw_reject", rc);
    int64_t deadline = rc_now_ms() + 500;
    while (rc_remaining_ms(deadline) > 0) {
        uw_cm_event ev;
        if (uw_cm_wait_event(c->ctx, &ev, rc_remaining_ms(deadline)) == 1 && ev.qp != qp)
            drop_extra(c, ev.qp);
    }
    cli_msg("%s: rejected as asked (--reject)", c->what);
    return RC_EXIT_OK;
}

static int run_responder(struct cat *c)
{
    const cat_opts *o = c->o;
    char hostbuf[256];
    const char *host, *port;
    if (rc_split_listen(o->listen_spec, hostbuf, sizeof(hostbuf), &host, &port) < 0)
        return RC_EXIT_USAGE;
    struct sockaddr_storage ss;
    socklen_t len;
    if (rc_resolve(host, port, true, &ss, &len) < 0)
        return RC_EXIT_USAGE;
    int rc = setup_common(c);
    if (rc >= 0)
        return rc;
    uw_qp_attr qa;
    qp_attr_of(c, &qa);
    uw_conn_param p;
    fill_param(o, &p);
    if ((rc = uw_listen(c->ctx, (struct sockaddr *)&ss, len, &qa, &p, &c->lis)) < 0)
        return fail_lib("uw_listen", rc);
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    char as[96];
    if (uw_listener_addr(c->lis, &bound, &blen) == 0) {
        rc_addr_str((struct sockaddr *)&bound, as, sizeof(as));
        /* With port 0 the caller cannot know the port otherwise. */
        if (o->verbose || !strcmp(port, "0"))
            cli_msg("listening on %s", as);
    }

    /* Wait for a valid Request. A connection that arrives just before
     * --timeout has its own setup limit of --timeout inside the library,
     * which reports it as CONNECT_REQUEST or CONNECT_ERROR; our own limit
     * leaves room for that verdict. */
    int64_t deadline = o->timeout_ms > 0 ? rc_now_ms() + 2 * (int64_t)o->timeout_ms + 500 : -1;
    for (;;) {
        uw_cm_event ev;
        rc = uw_cm_wait_event(c->ctx, &ev, rc_remaining_ms(deadline));
        if (rc == UW_ETIMEDOUT || (rc == 0 && deadline >= 0 && rc_remaining_ms(deadline) == 0)) {
            cli_msg("no connection established within the --timeout");
            return RC_EXIT_TIMEOUT;
        }
        if (rc < 0)
            return fail_lib("uw_cm_wait_event", rc);
        if (rc == 0)
            continue;
        if (ev.type == UW_CM_CONNECT_REQUEST) {
            c->qp = ev.qp;
            rc_addr_str((struct sockaddr *)&ev.peer, as, sizeof(as));
            snprintf(c->what, sizeof(c->what), "connection from %s", as);
            remember_peer_pd(c, &ev);
            break;
        }
        /* A failed incoming setup (garbage instead of a Request, a bad
         * PD_Length, a stalled peer): this listener serves one connection,
         * so that attempt was it. */
        if (ev.type == UW_CM_CONNECT_ERROR || ev.type == UW_CM_TERMINATED ||
            ev.type == UW_CM_CONN_ERROR) {
            rc_addr_str((struct sockaddr *)&ev.peer, as, sizeof(as));
            snprintf(c->what, sizeof(c->what), "connection from %s", as);
            if (ev.qp)
                drop_extra(c, ev.qp);
            return rc_report_event(c->what, &ev);
        }
    }
    if (o->reject)
        return reject_and_wait(c, c->qp);
    if ((rc = post_all_recv(c)) >= 0)
        return rc;
    if ((rc = uw_accept(c->qp, &p)) < 0)
        return fail_lib("uw_accept", rc);
    return wait_established(c, (o->timeout_ms > 0 ? o->timeout_ms : 5000) + 2000);
}

/* ------------------------------------------------------------------------ */
/* Data phase                                                                */

/* Waits a little for the event that explains a failed completion (the
 * Terminate or the transport error), reports it and returns the exit code. */
static int explain_failure(struct cat *c, const uw_wc *wc)
{
    int64_t deadline = rc_now_ms() + 1000;
    uw_cm_event ev;
    while (rc_remaining_ms(deadline) > 0) {
        int rc = uw_cm_wait_event(c->ctx, &ev, rc_remaining_ms(deadline));
        if (rc != 1)
            break;
        if (ev.qp == c->qp && (ev.type == UW_CM_TERMINATED || ev.type == UW_CM_CONN_ERROR))
            return rc_report_event(c->what, &ev);
    }
    char t[256];
    rc_err_text(wc->err, t, sizeof(t));
    if (wc->status == UW_WC_LOC_LEN_ERR)
        cli_msg("%s: a received message was longer than our %zu-octet receive buffers "
                "(the peer's --msg-size is larger than ours)",
                c->what, c->rsz);
    else
        cli_msg("%s: %s completion failed: %s: %s", c->what,
                wc->opcode == UW_WC_RECV ? "receive" : "send", rc_wc_status_name(wc->status), t);
    return wc->status == UW_WC_TIMEOUT_ERR ? RC_EXIT_TIMEOUT : RC_EXIT_PROTO;
}

/* A post or disconnect call refused because the QP failed (UW_EPERM in
 * ERROR): the event that moved it there says why; report that if it comes
 * within a second, else the refused call. */
static int fail_qp(struct cat *c, const char *call, int err)
{
    int64_t deadline = rc_now_ms() + 1000;
    uw_cm_event ev;
    while (uw_qp_state(c->qp) == UW_QPS_ERROR && rc_remaining_ms(deadline) > 0) {
        if (uw_cm_wait_event(c->ctx, &ev, rc_remaining_ms(deadline)) != 1)
            break;
        if (ev.qp == c->qp && (ev.type == UW_CM_TERMINATED || ev.type == UW_CM_CONN_ERROR))
            return rc_report_event(c->what, &ev);
    }
    return fail_lib(call, err);
}

static bool closed_gracefully(const struct cat *c)
{
    return uw_qp_state(c->qp) == UW_QPS_CLOSED;
}

/* Polls both CQs. Returns -1 to go on or an exit code. */
static int drain_cqs(struct cat *c, int *got)
{
    uw_wc wc[CAT_POLL_BATCH];
    int n;
    while ((n = uw_cq_poll(c->scq, wc, CAT_POLL_BATCH)) > 0) {
        *got += n;
        for (int i = 0; i < n; i++) {
            if (wc[i].status != UW_WC_SUCCESS)
                return explain_failure(c, &wc[i]);
            if (wc[i].wr_id < CAT_NSEND && c->busy[wc[i].wr_id]) {
                c->busy[wc[i].wr_id] = false;
                c->inflight--;
            }
        }
    }
    if (n < 0)
        return fail_lib("uw_cq_poll", n);
    /* One batch per call: every buffer we hold here is written out and
     * re-posted before the library can read more (see the top comment). */
    n = uw_cq_poll(c->rcq, wc, CAT_POLL_BATCH);
    if (n < 0)
        return fail_lib("uw_cq_poll", n);
    *got += n;
    for (int i = 0; i < n; i++) {
        /* Both sides closed gracefully: the library flushes the receives
         * that are still posted (they were never needed). */
        if (wc[i].status == UW_WC_WR_FLUSH_ERR && closed_gracefully(c))
            continue;
        if (wc[i].status != UW_WC_SUCCESS)
            return explain_failure(c, &wc[i]);
        uint64_t id = wc[i].wr_id;
        if (id >= CAT_NRECV || wc[i].byte_len > c->rsz) {
            cli_msg("%s: receive completion with unknown wr_id %llu or length %u", c->what,
                    (unsigned long long)id, wc[i].byte_len);
            return RC_EXIT_PROTO;
        }
        if (wc[i].byte_len &&
            cli_write_all(STDOUT_FILENO, c->rbuf + id * c->rsz, wc[i].byte_len) < 0) {
            cli_msg("cannot write to stdout: %s", strerror(errno));
            return RC_EXIT_PROTO;
        }
        int rc = post_recv(c, (unsigned)id);
        /* After the peer's FIN nothing more can arrive; a refused re-post
         * then does not matter. */
        if (rc < 0 && !c->peer_closed && !closed_gracefully(c))
            return fail_qp(c, "uw_post_recv", rc);
    }
    return -1;
}

static int handle_events(struct cat *c, int *got)
{
    uw_cm_event ev;
    int rc;
    while ((rc = uw_cm_get_event(c->ctx, &ev)) == 1) {
        (*got)++;
        if (ev.type == UW_CM_CONNECT_REQUEST) {
            drop_extra(c, ev.qp);
            continue;
        }
        if (ev.qp != c->qp)
            continue;
        if (ev.type == UW_CM_DISCONNECTED) {
            c->peer_closed = true;
            continue;
        }
        return rc_report_event(c->what, &ev);
    }
    if (rc < 0)
        return fail_lib("uw_cm_get_event", rc);
    return -1;
}

static int read_stdin(struct cat *c)
{
    unsigned slot = 0;
    while (slot < CAT_NSEND && c->busy[slot])
        slot++;
    if (slot == CAT_NSEND)
        return -1;
    uint8_t *buf = c->sbuf + (size_t)slot * c->o->msg_size;
    ssize_t n = cli_read_some(STDIN_FILENO, buf, c->o->msg_size);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return -1;
        cli_msg("cannot read stdin: %s", strerror(errno));
        return RC_EXIT_PROTO;
    }
    c->last_act = rc_now_ms();
    if (n == 0) {
        c->in_eof = true;
        /* Graceful half-close: the library sends what is queued, then FIN;
         * we keep receiving until the peer closes too. */
        int rc = uw_disconnect(c->qp);
        if (rc < 0)
            return fail_qp(c, "uw_disconnect", rc);
        return -1;
    }
    uw_sge s = {
        .addr = (uint64_t)(uintptr_t)buf, .length = (uint32_t)n, .lkey = uw_mr_stag(c->smr)};
    uw_send_wr wr = {.wr_id = slot,
                     .opcode = UW_WR_SEND,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &s,
                     .num_sge = 1};
    int bad = 0;
    int rc = uw_post_send(c->qp, &wr, 1, &bad);
    if (rc < 0)
        return fail_qp(c, "uw_post_send", rc);
    c->busy[slot] = true;
    c->inflight++;
    return -1;
}

static int data_loop(struct cat *c)
{
    const int tmo = c->o->timeout_ms;
    c->last_act = rc_now_ms();
    for (;;) {
        int got = 0, rc;
        if ((rc = uw_ctx_progress(c->ctx)) < 0)
            return fail_lib("uw_ctx_progress", rc);
        if ((rc = drain_cqs(c, &got)) >= 0)
            return rc;
        if ((rc = handle_events(c, &got)) >= 0)
            return rc;
        if (got)
            c->last_act = rc_now_ms();
        if (c->in_eof && c->inflight == 0 && c->peer_closed) {
            /* The peer's FIN came after all its data; take what is left. */
            do {
                got = 0;
                uw_ctx_progress(c->ctx);
                if ((rc = drain_cqs(c, &got)) >= 0)
                    return rc;
            } while (got);
            return RC_EXIT_OK;
        }
        if (got)
            continue;

        struct pollfd pf[2];
        int npf = 0;
        pf[npf++] = (struct pollfd){.fd = uw_ctx_fd(c->ctx), .events = POLLIN};
        bool want_in = !c->in_eof && c->inflight < CAT_NSEND;
        if (want_in)
            pf[npf++] = (struct pollfd){.fd = STDIN_FILENO, .events = POLLIN};
        int wait = RC_WAIT_SLICE_MS; /* see rdmacli.h */
        if (tmo > 0) {
            int left = rc_remaining_ms(c->last_act + tmo);
            if (left == 0) {
                cli_msg("%s: no activity for %d ms (--timeout)", c->what, tmo);
                return RC_EXIT_TIMEOUT;
            }
            if (left < wait)
                wait = left;
        }
        int pr = poll(pf, (nfds_t)npf, wait);
        if (pr < 0 && errno != EINTR) {
            cli_msg("poll: %s", strerror(errno));
            return RC_EXIT_PROTO;
        }
        /* POLLHUP without POLLIN (a closed pipe) still means EOF on read. */
        if (pr > 0 && want_in && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            if ((rc = read_stdin(c)) >= 0)
                return rc;
        }
    }
}

/* Lets a graceful close finish (both FINs) before uw_qp_destroy, which
 * resets a connection that is still open. */
static void wait_closed(struct cat *c)
{
    int64_t deadline = rc_now_ms() + 2000;
    while (c->qp && uw_qp_state(c->qp) != UW_QPS_CLOSED && uw_qp_state(c->qp) != UW_QPS_ERROR &&
           rc_remaining_ms(deadline) > 0) {
        uw_cm_event ev;
        if (uw_cm_wait_event(c->ctx, &ev, 50) == 1 && ev.type == UW_CM_CONNECT_REQUEST)
            drop_extra(c, ev.qp);
    }
}

static void teardown(struct cat *c)
{
    if (!c->ctx)
        return;
    for (int i = 0; i < c->nextra; i++)
        uw_qp_destroy(c->extra[i]);
    if (c->qp)
        uw_qp_destroy(c->qp);
    if (c->lis)
        uw_listener_destroy(c->lis);
    if (c->rmr)
        uw_mr_dereg(c->rmr);
    if (c->smr)
        uw_mr_dereg(c->smr);
    if (c->scq)
        uw_cq_destroy(c->scq);
    if (c->rcq)
        uw_cq_destroy(c->rcq);
    if (c->pd)
        uw_pd_dealloc(c->pd);
    int rc = uw_ctx_destroy(c->ctx);
    if (rc < 0)
        cli_msg("uw_ctx_destroy: %s", uw_strerror(rc));
    free(c->rbuf);
    free(c->sbuf);
}

int cat_run(const cat_opts *o)
{
    /* A reader that went away must show up as a write error, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    struct cat c;
    memset(&c, 0, sizeof(c));
    c.o = o;
    snprintf(c.what, sizeof(c.what), "connection");
    int rc = o->listen ? run_responder(&c) : run_initiator(&c);
    if (rc < 0) {
        /* One connection only: later connects are refused by the kernel. */
        if (c.lis && uw_listener_destroy(c.lis) == 0)
            c.lis = NULL;
        rc = data_loop(&c);
        if (rc == RC_EXIT_OK)
            wait_closed(&c);
    }
    teardown(&c);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_prog("uwarp-cat");
    cat_opts o;
    int rc = cat_parse_args(argc, argv, &o);
    if (rc >= 0)
        return rc;
    return cat_run(&o);
}
