/* uwarp-perf over uwarp: the server accepts any number of connections, each
 * configured by the client's MPA private data; the client measures.
 * Flow control for Sends is explicit credits, since RDMAP has none: the
 * server grants a credit for every receive it re-posts. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "perf.h"
#include "uwarp/verbs.h"

#define CTRL_SLOTS 16u
#define CTRL_SZ 64u
#define CLIENT_RECVS 64u

enum { MSG_END = 1, MSG_STATS = 2, MSG_CREDIT = 3 };

typedef struct sconn {
    struct sconn *next;
    uw_qp *qp;
    perf_cfg c;
    uint8_t *mem;
    size_t memlen;
    uw_mr *mr;
    uint8_t *data; /* write/read target */
    uint8_t *recv; /* nrecv receive buffers of rsz, rstride apart */
    uint8_t *ctrl; /* CTRL_SLOTS * CTRL_SZ */
    uint32_t nrecv, rsz, since_credit, ctrl_next;
    uint32_t rstride; /* between receive buffers; 0: all share one */
    uint64_t bytes, cpu0;
    bool closing;
} sconn;

static uint32_t max32(uint32_t a, uint32_t b)
{
    return a > b ? a : b;
}

static int post_recv(uw_qp *qp, uw_mr *mr, uint8_t *buf, uint32_t len, uint64_t id)
{
    uw_sge s = {(uint64_t)(uintptr_t)buf, len, uw_mr_stag(mr)};
    uw_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1};
    return uw_post_recv(qp, &w, 1, NULL);
}

static int post_ctrl(uw_qp *qp, uw_mr *mr, uint8_t *slot, uint32_t type, uint64_t a, uint64_t b)
{
    perf_put32(slot, type);
    perf_put64(slot + 4, a);
    perf_put64(slot + 12, b);
    uw_sge s = {(uint64_t)(uintptr_t)slot, 20, uw_mr_stag(mr)};
    uw_send_wr w = {
        .wr_id = 0, .opcode = UW_WR_SEND, .flags = UW_SEND_SOLICITED, .sg_list = &s, .num_sge = 1};
    return uw_post_send(qp, &w, 1, NULL);
}

static sconn *sconn_new(uw_pd *pd, uw_qp *qp, const perf_cfg *c)
{
    sconn *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->qp = qp;
    s->c = *c;
    /* Sends need a posted receive each: 2 x depth + 8 of them. Throughput
     * runs land them all in one buffer, as the TCP baseline reads every
     * message into one buffer and as perftest's send_bw does above half a
     * page: cycling through 40 buffers measured the cache, not the
     * transport (at 1 MiB they left the L3 cache). Ping-pong echoes from
     * the buffer it received into, so there each receive has its own, at
     * most about 8 MiB of them (at least 8). The client's credits follow
     * the count. */
    s->nrecv = c->op == OP_SEND ? 2 * c->depth + 8 : 8;
    s->rsz = c->op == OP_SEND ? max32(c->size, CTRL_SZ) : CTRL_SZ;
    uint32_t cap = (uint32_t)((8u << 20) / max32(c->size, 1));
    if (c->op == OP_SEND && c->lat && s->nrecv > cap)
        s->nrecv = cap < 8 ? 8 : cap;
    s->rstride = c->op == OP_SEND && !c->lat ? 0 : s->rsz;
    size_t dlen = c->op == OP_SEND ? 0 : max32(c->size, 64);
    size_t rlen = s->rstride ? (size_t)s->nrecv * s->rsz : s->rsz;
    s->memlen = dlen + rlen + CTRL_SLOTS * CTRL_SZ;
    if (posix_memalign((void **)&s->mem, 4096, s->memlen) != 0) {
        free(s);
        return NULL;
    }
    memset(s->mem, 0xA5, s->memlen);
    s->data = s->mem;
    s->recv = s->mem + dlen;
    s->ctrl = s->recv + rlen;
    if (uw_mr_reg(pd, s->mem, s->memlen,
                  UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE | UW_ACCESS_REMOTE_READ,
                  &s->mr) < 0) {
        free(s->mem);
        free(s);
        return NULL;
    }
    uw_qp_set_context(qp, s);
    for (uint32_t i = 0; i < s->nrecv; i++)
        post_recv(qp, s->mr, s->recv + (size_t)i * s->rstride, s->rsz, i);
    return s;
}

static void sconn_free(sconn *s)
{
    uw_qp_destroy(s->qp);
    uw_mr_dereg(s->mr);
    free(s->mem);
    free(s);
}

static void server_wc(sconn *s, const uw_wc *wc)
{
    if (wc->status != UW_WC_SUCCESS || wc->opcode != UW_WC_RECV)
        return;
    uint8_t *buf = s->recv + (size_t)wc->wr_id * s->rstride;
    uint8_t *slot = s->ctrl + (size_t)(s->ctrl_next++ % CTRL_SLOTS) * CTRL_SZ;
    if (wc->flags & UW_WC_SOLICITED) {
        if (perf_get32(buf) == MSG_END)
            post_ctrl(s->qp, s->mr, slot, MSG_STATS, perf_cpu_ns() - s->cpu0, s->bytes);
    } else {
        s->bytes += wc->byte_len;
        if (s->c.lat) {
            /* Echo from the receive buffer itself: in ping-pong the next
             * message cannot arrive before this echo has gone out. */
            uw_sge sg = {(uint64_t)(uintptr_t)buf, wc->byte_len, uw_mr_stag(s->mr)};
            uw_send_wr w = {.opcode = UW_WR_SEND, .sg_list = &sg, .num_sge = 1};
            uw_post_send(s->qp, &w, 1, NULL);
        } else if (++s->since_credit >= max32(s->nrecv / 4, 1)) {
            post_ctrl(s->qp, s->mr, slot, MSG_CREDIT, s->since_credit, 0);
            s->since_credit = 0;
        }
    }
    post_recv(s->qp, s->mr, buf, s->rsz, wc->wr_id);
}

int perf_uw_server(const char *addr, int port, const perf_cfg *base, int ready_fd)
{
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_listener *l;
    if (uw_ctx_create(&ctx, NULL) < 0 || uw_pd_alloc(ctx, &pd) < 0 ||
        uw_cq_create(ctx, 1u << 16, &cq) < 0) {
        fprintf(stderr, "uwarp-perf: cannot set up the uwarp context\n");
        perf_ready(ready_fd, false);
        return -1;
    }
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(addr, port, &ss, &sl) < 0) {
        fprintf(stderr, "uwarp-perf: cannot resolve %s\n", addr);
        perf_ready(ready_fd, false);
        return -1;
    }
    uw_qp_attr qa = {
        .pd = pd, .send_cq = cq, .recv_cq = cq, .max_send_wr = 512, .max_recv_wr = 8200};
    uw_conn_param p = {.rev = (uint8_t)base->rev,
                       .crc = base->crc ? UW_CRC_PREFER : UW_CRC_AVOID,
                       .markers = base->markers,
                       .tcp_congestion = base->cc};
    int r = uw_listen(ctx, (struct sockaddr *)&ss, sl, &qa, &p, &l);
    if (r < 0) {
        fprintf(stderr, "uwarp-perf: listen on port %d: %s\n", port, uw_strerror(r));
        perf_ready(ready_fd, false);
        return -1;
    }
    perf_ready(ready_fd, true);
    sconn *conns = NULL;
    unsigned idle = 0;
    for (;;) {
        bool busy = false;
        for (sconn *s = conns; s; s = s->next)
            busy |= s->c.busy;
        uw_wc wc[64];
        int n = busy ? uw_cq_poll(cq, wc, 64) : uw_cq_wait(cq, wc, 64, 200);
        for (int i = 0; i < n; i++) {
            sconn *s = uw_qp_get_context(wc[i].qp);
            if (s)
                server_wc(s, &wc[i]);
        }
        /* Busy-polling, events are looked for only now and then: a pass
         * made for events that reads a message queues its completion where
         * this call cannot return it, and the context must then signal its
         * fd (a write and a read per message). */
        if (busy && (n > 0 || ++idle % 64 != 0))
            continue;
        uw_cm_event ev;
        while (uw_cm_get_event(ctx, &ev) == 1) {
            if (ev.type == UW_CM_CONNECT_REQUEST) {
                perf_cfg c;
                sconn *s = NULL;
                if (ev.private_data_len < PERF_HDR_LEN ||
                    perf_hdr_decode(ev.private_data, &c) < 0 || !(s = sconn_new(pd, ev.qp, &c))) {
                    uw_reject(ev.qp, "bad config", 10);
                    continue;
                }
                uint8_t pd_out[24];
                perf_put64(pd_out, (uint64_t)(uintptr_t)s->data);
                perf_put32(pd_out + 8, uw_mr_stag(s->mr));
                perf_put32(pd_out + 12, max32(c.size, 64));
                perf_put32(pd_out + 16, s->nrecv);
                /* The client's wishes decide CRC and markers: both sides of
                 * a measurement must run the configuration it reports. */
                uw_conn_param ap = {.private_data = pd_out,
                                    .private_data_len = 20,
                                    .crc = c.crc ? UW_CRC_PREFER : UW_CRC_AVOID,
                                    .markers = c.markers,
                                    .max_fpdu = c.fpdu};
                if (uw_accept(ev.qp, &ap) < 0) {
                    sconn_free(s);
                    continue;
                }
                s->next = conns;
                conns = s;
            } else if (ev.type == UW_CM_ESTABLISHED) {
                sconn *s = uw_qp_get_context(ev.qp);
                if (s)
                    s->cpu0 = perf_cpu_ns();
            } else if (ev.qp) {
                sconn *s = uw_qp_get_context(ev.qp);
                if (s) {
                    if (ev.type == UW_CM_DISCONNECTED)
                        uw_disconnect(ev.qp);
                    else
                        uw_abort(ev.qp);
                    s->closing = true;
                }
            }
        }
        /* Free closed connections once their completions are drained (a
         * check that costs an engine pass: only while one is closing). */
        bool closing = false;
        for (sconn *s = conns; s; s = s->next)
            closing |= s->closing;
        if (closing && uw_cq_poll(cq, wc, 0) == 0) {
            for (sconn **pp = &conns; *pp;) {
                sconn *s = *pp;
                int st = uw_qp_state(s->qp);
                if (s->closing && (st == UW_QPS_CLOSED || st == UW_QPS_ERROR)) {
                    uw_wc junk[64];
                    while (uw_cq_poll(cq, junk, 64) > 0)
                        ;
                    *pp = s->next;
                    sconn_free(s);
                } else {
                    pp = &s->next;
                }
            }
        }
    }
}

/* ------------------------------------------------------------------------ */

typedef struct cconn {
    uw_qp *qp;
    uint8_t *mem;
    uw_mr *mr;
    uint8_t *data, *recv, *ctrl;
    uint32_t rsz;
    uint64_t raddr;
    uint32_t rkey, rlen, credits;
    uint32_t outstanding;
    bool stats_in;
    uint64_t srv_cpu, srv_bytes;
    bool up, down;
} cconn;

static int client_fail(perf_res *r, const char *what, int err)
{
    snprintf(r->err, sizeof(r->err), "%s: %s", what, uw_strerror(err));
    return -1;
}

/* Handles one client completion; returns 1 for a finished data operation. */
static int client_wc(cconn *k, const uw_wc *wc, double *rtt_done)
{
    if (wc->status != UW_WC_SUCCESS)
        return wc->status == UW_WC_WR_FLUSH_ERR ? 0 : -1;
    if (wc->opcode != UW_WC_RECV) {
        if (wc->wr_id == 1) {
            k->outstanding--;
            return 1;
        }
        return 0;
    }
    uint8_t *buf = k->recv + (size_t)wc->wr_id * k->rsz;
    if (wc->flags & UW_WC_SOLICITED) {
        uint32_t t = perf_get32(buf);
        if (t == MSG_CREDIT)
            k->credits += (uint32_t)perf_get64(buf + 4);
        else if (t == MSG_STATS) {
            k->srv_cpu = perf_get64(buf + 4);
            k->srv_bytes = perf_get64(buf + 12);
            k->stats_in = true;
        }
    } else if (rtt_done) {
        *rtt_done = 1;
    }
    post_recv(k->qp, k->mr, buf, k->rsz, wc->wr_id);
    return 0;
}

/* Posts n data requests (n >= 1) in one call, as a list: an application
 * with several messages queued hands them over together, and the library can
 * then write them to the socket with one system call. */
static int post_data_n(cconn *k, const perf_cfg *c, unsigned n)
{
    uw_sge s = {(uint64_t)(uintptr_t)k->data, c->size, uw_mr_stag(k->mr)};
    uw_send_wr w[64];
    if (n > 64)
        n = 64;
    for (unsigned i = 0; i < n; i++) {
        w[i] = (uw_send_wr){.wr_id = 1,
                            .flags = UW_SEND_SIGNALED,
                            .sg_list = &s,
                            .num_sge = 1,
                            .remote_addr = k->raddr,
                            .rkey = k->rkey};
        w[i].opcode = c->op == OP_WRITE  ? UW_WR_RDMA_WRITE
                      : c->op == OP_READ ? UW_WR_RDMA_READ
                                         : UW_WR_SEND;
    }
    int r = uw_post_send(k->qp, w, (int)n, NULL);
    if (r < 0)
        return r;
    k->outstanding += n;
    if (c->op == OP_SEND)
        k->credits -= n;
    return (int)n;
}

static int post_data(cconn *k, const perf_cfg *c)
{
    int r = post_data_n(k, c, 1);
    return r < 0 ? r : 0;
}

int perf_uw_client(const char *host, int port, const perf_cfg *c, perf_res *r)
{
    memset(r, 0, sizeof(*r));
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    unsigned nq = c->qps ? c->qps : 1;
    if (uw_ctx_create(&ctx, NULL) < 0 || uw_pd_alloc(ctx, &pd) < 0 ||
        uw_cq_create(ctx, nq * (c->depth + CLIENT_RECVS + 16), &cq) < 0)
        return client_fail(r, "setup", UW_ENOMEM);
    struct sockaddr_storage ss;
    unsigned sl;
    if (perf_resolve(host, port, &ss, &sl) < 0) {
        snprintf(r->err, sizeof(r->err), "cannot resolve %s", host);
        return -1;
    }
    cconn *k = calloc(nq, sizeof(*k));
    uint8_t hdr[PERF_HDR_LEN];
    perf_hdr_encode(c, hdr);
    uw_conn_param p = {.private_data = hdr,
                       .private_data_len = PERF_HDR_LEN,
                       .rev = (uint8_t)c->rev,
                       .crc = c->crc ? UW_CRC_PREFER : UW_CRC_AVOID,
                       .markers = c->markers,
                       .timeout_ms = c->timeout_ms,
                       .max_fpdu = c->fpdu,
                       .tcp_congestion = c->cc};
    int ret = -1;
    for (unsigned i = 0; i < nq; i++) {
        uw_qp_attr qa = {.pd = pd,
                         .send_cq = cq,
                         .recv_cq = cq,
                         .max_send_wr = c->depth + 8,
                         .max_recv_wr = CLIENT_RECVS};
        k[i].rsz = max32(c->size, CTRL_SZ);
        size_t len = max32(c->size, 64) + (size_t)CLIENT_RECVS * k[i].rsz + CTRL_SZ;
        if (posix_memalign((void **)&k[i].mem, 4096, len) != 0 ||
            uw_mr_reg(pd, k[i].mem, len, UW_ACCESS_LOCAL_WRITE, &k[i].mr) < 0 ||
            uw_qp_create(ctx, &qa, &k[i].qp) < 0) {
            client_fail(r, "setup", UW_ENOMEM);
            goto out;
        }
        memset(k[i].mem, 0x5A, len);
        k[i].data = k[i].mem;
        k[i].recv = k[i].mem + max32(c->size, 64);
        k[i].ctrl = k[i].recv + (size_t)CLIENT_RECVS * k[i].rsz;
        uw_qp_set_context(k[i].qp, &k[i]);
        for (uint32_t j = 0; j < CLIENT_RECVS; j++)
            post_recv(k[i].qp, k[i].mr, k[i].recv + (size_t)j * k[i].rsz, k[i].rsz, j);
        int e = uw_connect(k[i].qp, (struct sockaddr *)&ss, sl, &p);
        if (e < 0) {
            client_fail(r, "connect", e);
            goto out;
        }
    }
    for (unsigned up = 0; up < nq;) {
        uw_cm_event ev;
        int e = uw_cm_wait_event(ctx, &ev, c->timeout_ms ? c->timeout_ms : 10000);
        if (e < 0) {
            client_fail(r, "waiting for the connection", e);
            goto out;
        }
        cconn *q = ev.qp ? uw_qp_get_context(ev.qp) : NULL;
        if (ev.type != UW_CM_ESTABLISHED || !q) {
            snprintf(r->err, sizeof(r->err), "connection failed: %s (%s)",
                     uw_cm_event_name(ev.type), uw_strerror(ev.err));
            goto out;
        }
        if (ev.mpa.crc != c->crc || ev.mpa.markers_tx != c->markers ||
            ev.mpa.markers_rx != c->markers) {
            snprintf(r->err, sizeof(r->err),
                     "negotiated crc=%d markers=%d/%d, not the configuration asked for", ev.mpa.crc,
                     ev.mpa.markers_tx, ev.mpa.markers_rx);
            goto out;
        }
        q->raddr = perf_get64(ev.private_data);
        q->rkey = perf_get32(ev.private_data + 8);
        q->rlen = perf_get32(ev.private_data + 12);
        q->credits = perf_get32(ev.private_data + 16) - 1; /* one kept for END */
        up++;
    }
    size_t nsamp = 0, capsamp = c->lat ? 1u << 20 : 0;
    double *samp = capsamp ? malloc(capsamp * sizeof(double)) : NULL;
    uint64_t cpu0 = perf_cpu_ns(), t0 = perf_now_ns();
    uint64_t tend = t0 + (uint64_t)(c->duration * 1e9);
    uint64_t posted = 0, done = 0;
    bool stop = false;
    uw_wc wc[64];
    if (c->lat) {
        while (!stop) {
            uint64_t s0 = perf_now_ns();
            if (post_data(&k[0], c) < 0) {
                client_fail(r, "post", UW_EPERM);
                goto out_s;
            }
            double got = 0;
            while (!got) {
                int n = c->busy ? uw_cq_poll(cq, wc, 64) : uw_cq_wait(cq, wc, 64, 5000);
                if (n < 0) {
                    client_fail(r, "waiting for the echo", n);
                    goto out_s;
                }
                for (int i = 0; i < n; i++)
                    if (client_wc(uw_qp_get_context(wc[i].qp), &wc[i], &got) < 0) {
                        client_fail(r, "completion", wc[i].err);
                        goto out_s;
                    }
            }
            uint64_t s1 = perf_now_ns();
            if (nsamp < capsamp)
                samp[nsamp++] = (double)(s1 - s0) / 2000.0;
            done++;
            k[0].credits++;
            stop = c->iters ? done >= c->iters : s1 >= tend;
        }
    } else {
        for (;;) {
            for (unsigned i = 0; i < nq && !stop; i++)
                while (k[i].outstanding < c->depth && (c->op != OP_SEND || k[i].credits) && !stop) {
                    unsigned n = c->depth - k[i].outstanding;
                    if (c->op == OP_SEND && n > k[i].credits)
                        n = k[i].credits;
                    if (c->post_list && n > c->post_list)
                        n = c->post_list;
                    /* The TCP baseline asks for one Read at a time. */
                    if (c->op == OP_READ)
                        n = 1;
                    if (c->iters && n > c->iters - posted)
                        n = (unsigned)(c->iters - posted);
                    int e = post_data_n(&k[i], c, n);
                    if (e < 0) {
                        client_fail(r, "post", e);
                        goto out_s;
                    }
                    posted += (uint64_t)e;
                    if (c->iters && posted >= c->iters)
                        stop = true;
                }
            unsigned outst = 0;
            for (unsigned i = 0; i < nq; i++)
                outst += k[i].outstanding;
            if (stop && !outst)
                break;
            int n = c->busy ? uw_cq_poll(cq, wc, 64) : uw_cq_wait(cq, wc, 64, 5000);
            if (n < 0) {
                client_fail(r, "waiting for completions", n);
                goto out_s;
            }
            for (int i = 0; i < n; i++) {
                int d = client_wc(uw_qp_get_context(wc[i].qp), &wc[i], NULL);
                if (d < 0) {
                    client_fail(r, "completion", wc[i].err);
                    goto out_s;
                }
                done += (uint64_t)d;
            }
            if (!c->iters && perf_now_ns() >= tend)
                stop = true;
        }
    }
    /* Server statistics: END on every connection, STATS back. The END
     * follows all data on its stream, so STATS also marks that the server
     * has everything: the clock stops there, as in the TCP baseline. */
    for (unsigned i = 0; i < nq; i++)
        post_ctrl(k[i].qp, k[i].mr, k[i].ctrl, MSG_END, 0, 0);
    for (unsigned got = 0; got < nq;) {
        int n = uw_cq_wait(cq, wc, 64, 5000);
        if (n < 0) {
            client_fail(r, "waiting for server statistics", n);
            goto out_s;
        }
        for (int i = 0; i < n; i++) {
            cconn *q = uw_qp_get_context(wc[i].qp);
            bool had = q->stats_in;
            client_wc(q, &wc[i], NULL);
            if (!had && q->stats_in) {
                got++;
                if (q->srv_cpu > r->cpu_server_ns)
                    r->cpu_server_ns = (double)q->srv_cpu;
            }
        }
    }
    uint64_t t1 = perf_now_ns();
    r->cpu_client_ns = (double)(perf_cpu_ns() - cpu0);
    r->secs = (double)(t1 - t0) / 1e9;
    r->msgs = done;
    r->bytes = done * c->size;
    if (c->lat) {
        r->bytes *= 2;
        perf_lat_stats(samp, nsamp, r);
    }
    ret = 0;
out_s:
    free(samp);
out:
    for (unsigned i = 0; i < nq; i++)
        if (k[i].qp)
            uw_disconnect(k[i].qp);
    for (int i = 0; i < 200; i++) {
        uw_ctx_wait(ctx, 10);
        bool all = true;
        for (unsigned j = 0; j < nq; j++)
            if (k[j].qp && uw_qp_state(k[j].qp) != UW_QPS_CLOSED &&
                uw_qp_state(k[j].qp) != UW_QPS_ERROR && uw_qp_state(k[j].qp) != UW_QPS_IDLE)
                all = false;
        if (all)
            break;
    }
    uw_wc junk[64];
    while (uw_cq_poll(cq, junk, 64) > 0)
        ;
    for (unsigned i = 0; i < nq; i++) {
        if (k[i].qp)
            uw_qp_destroy(k[i].qp);
        if (k[i].mr)
            uw_mr_dereg(k[i].mr);
        free(k[i].mem);
    }
    free(k);
    uw_cq_destroy(cq);
    uw_pd_dealloc(pd);
    uw_ctx_destroy(ctx);
    return ret;
}
