/* Endpoints for the middlebox tests: a uwarp sender that streams Sends and
 * RDMA Writes with a deterministic pattern, and a receiver that checks every
 * octet a completion hands it. Run through uwarp-testproxy, they show that
 * re-segmentation never breaks a stream and that corruption is always caught
 * (MPA CRC error, Terminate sent) before any damaged octet reaches the
 * consumer.
 *   mb_peer recv PORT [--markers] [--no-crc] [--expect-crc-error]
 *   mb_peer send HOST PORT BYTES [--markers] [--no-crc] [--expect-term]
 * Exit 0 when the expectation holds, 1 otherwise (with a reason). */
#define _DEFAULT_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "uwarp/verbs.h"

#define MSG 65536u
#define NRECV 32u
#define CREDIT_EVERY 8u
#define SLOT 4096u
#define WREGION (8u << 20)
#define FILL 0xEEu

static uint8_t pat(uint64_t msg, uint32_t off)
{
    uint64_t x = (msg + 1) * 0x9E3779B97F4A7C15ull + off * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (uint8_t)(x * 0x94D049BB133111EBull >> 56);
}

static int die(const char *m)
{
    fprintf(stderr, "mb_peer: %s\n", m);
    return 1;
}

typedef struct ep {
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_qp *qp;
    uint8_t *mem;
    uw_mr *mr;
    uw_listener *l;
} ep;

/* The one endpoint of this process; torn down in main() so that the
 * sanitizer build also proves the library frees everything. */
static ep E;

static void ep_fini(ep *e)
{
    if (e->qp)
        uw_qp_destroy(e->qp);
    if (e->l)
        uw_listener_destroy(e->l);
    if (e->mr)
        uw_mr_dereg(e->mr);
    if (e->cq)
        uw_cq_destroy(e->cq);
    if (e->pd)
        uw_pd_dealloc(e->pd);
    if (e->ctx && uw_ctx_destroy(e->ctx) != 0)
        fprintf(stderr, "mb_peer: context still busy at exit\n");
    free(e->mem);
}

static void ep_init(ep *e, size_t len)
{
    memset(e, 0, sizeof(*e));
    if (uw_ctx_create(&e->ctx, NULL) || uw_pd_alloc(e->ctx, &e->pd) ||
        uw_cq_create(e->ctx, 1024, &e->cq))
        exit(die("setup failed"));
    len = (len + 4095) & ~(size_t)4095; /* aligned_alloc wants a multiple */
    e->mem = aligned_alloc(4096, len);
    if (!e->mem)
        exit(die("out of memory"));
    memset(e->mem, FILL, len);
    if (uw_mr_reg(e->pd, e->mem, len,
                  UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE | UW_ACCESS_REMOTE_READ, &e->mr))
        exit(die("mr_reg failed"));
}

static void post_recv(ep *e, uint8_t *b, uint64_t id)
{
    uw_sge s = {(uint64_t)(uintptr_t)b, MSG, uw_mr_stag(e->mr)};
    uw_recv_wr w = {.wr_id = id, .sg_list = &s, .num_sge = 1};
    /* Fails once the QP has left RTS (after a Terminate): the event says why. */
    if (uw_post_recv(e->qp, &w, 1, NULL) && uw_qp_state(e->qp) == UW_QPS_RTS)
        exit(die("post_recv failed"));
}

static void post_send(ep *e, uint8_t *b, uint32_t len, int op, uint64_t raddr, uint32_t rkey,
                      uint64_t id)
{
    uw_sge s = {(uint64_t)(uintptr_t)b, len, uw_mr_stag(e->mr)};
    uw_send_wr w = {.wr_id = id,
                    .opcode = op,
                    .flags = UW_SEND_SIGNALED,
                    .sg_list = &s,
                    .num_sge = 1,
                    .remote_addr = raddr,
                    .rkey = rkey};
    if (uw_post_send(e->qp, &w, 1, NULL) && uw_qp_state(e->qp) == UW_QPS_RTS)
        exit(die("post_send failed"));
}

static void params(uw_conn_param *p, int argc, char **argv, bool *a, bool *b)
{
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--markers"))
            p->markers = true;
        else if (!strcmp(argv[i], "--no-crc"))
            p->crc = UW_CRC_AVOID;
        else if (!strcmp(argv[i], "--expect-crc-error"))
            *a = true;
        else if (!strcmp(argv[i], "--expect-term"))
            *b = true;
    }
    p->timeout_ms = 10000;
}

/* Receiver layout: NRECV receive buffers, a control buffer, the Write region. */
static int run_recv(int port, int argc, char **argv)
{
    uw_conn_param p = {0};
    bool expect_crc = false, unused = false;
    params(&p, argc, argv, &expect_crc, &unused);
    size_t rlen = (size_t)NRECV * MSG;
    ep_init(&E, rlen + 64 + WREGION);
    uint8_t *ctrl = E.mem + rlen, *wreg = ctrl + 64;
    uw_qp_attr qa = {.pd = E.pd, .send_cq = E.cq, .recv_cq = E.cq, .max_recv_wr = NRECV};
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (uw_listen(E.ctx, (struct sockaddr *)&sin, sizeof(sin), &qa, &p, &E.l))
        return die("listen failed");
    struct sockaddr_storage bound;
    socklen_t blen = sizeof(bound);
    if (uw_listener_addr(E.l, &bound, &blen) < 0)
        return die("no listening address");
    /* Port 0 asks the kernel: the script reads the port from this line. */
    printf("LISTENING %u\n", ntohs(((struct sockaddr_in *)&bound)->sin_port));
    fflush(stdout);
    uw_cm_event ev;
    if (uw_cm_wait_event(E.ctx, &ev, 20000) != 1 || ev.type != UW_CM_CONNECT_REQUEST)
        return die("no connection");
    E.qp = ev.qp;
    for (uint32_t i = 0; i < NRECV; i++)
        post_recv(&E, E.mem + (size_t)i * MSG, i);
    uint8_t apd[12];
    uint64_t wa = (uint64_t)(uintptr_t)wreg;
    for (int i = 0; i < 8; i++)
        apd[i] = (uint8_t)(wa >> (56 - 8 * i));
    uint32_t stag = uw_mr_stag(E.mr);
    for (int i = 0; i < 4; i++)
        apd[8 + i] = (uint8_t)(stag >> (24 - 8 * i));
    uw_conn_param ap = p;
    ap.private_data = apd;
    ap.private_data_len = 12;
    if (uw_accept(E.qp, &ap))
        return die("accept failed");
    uint64_t msgs = 0, bytes = 0;
    uint32_t since = 0;
    int result = -1;
    while (result < 0) {
        uw_wc wc[16];
        int n = uw_cq_poll(E.cq, wc, 16);
        for (int i = 0; i < n; i++) {
            if (wc[i].opcode != UW_WC_RECV || wc[i].status != UW_WC_SUCCESS)
                continue;
            uint8_t *b = E.mem + (size_t)wc[i].wr_id * MSG;
            for (uint32_t k = 0; k < wc[i].byte_len; k++)
                if (b[k] != pat(msgs, k)) {
                    fprintf(stderr, "mb_peer: message %llu octet %u: got %02x want %02x\n",
                            (unsigned long long)msgs, k, b[k], pat(msgs, k));
                    return 1;
                }
            msgs++;
            bytes += wc[i].byte_len;
            post_recv(&E, b, wc[i].wr_id);
            if (++since == CREDIT_EVERY) {
                post_send(&E, ctrl, 4, UW_WR_SEND, 0, 0, 99);
                since = 0;
            }
        }
        if (n)
            continue;
        int r = uw_cm_wait_event(E.ctx, &ev, 0);
        if (r == 1) {
            if (ev.type == UW_CM_ESTABLISHED)
                continue;
            if (ev.type == UW_CM_DISCONNECTED) {
                result = expect_crc ? die("stream ended without the expected CRC error") : 0;
                break;
            }
            if (ev.type == UW_CM_TERMINATED && !ev.term_received) {
                printf("terminate-sent layer=%u etype=%u ecode=%u (%s) err=%s\n", ev.term.layer,
                       ev.term.etype, ev.term.ecode, uw_term_describe(ev.term),
                       uw_err_name(ev.err));
                bool crc = ev.term.layer == UW_TERM_LLP && ev.term.ecode == 2;
                result = expect_crc && crc ? 0 : die("unexpected Terminate");
                break;
            }
            fprintf(stderr, "mb_peer: event %s err %s\n", uw_cm_event_name(ev.type),
                    uw_err_name(ev.err));
            result = 1;
            break;
        }
        /* CQ and event queue are drained: now the context fd tells. */
        uw_ctx_wait(E.ctx, 10000);
    }
    /* The Write region: every octet is the pattern, untouched, or zero
     * (placed by a segment whose CRC then failed). */
    for (uint32_t s = 0; s < WREGION / SLOT; s++)
        for (uint32_t k = 0; k < SLOT; k++) {
            uint8_t v = wreg[(size_t)s * SLOT + k];
            if (v != FILL && v != 0 && v != pat(1000000 + s, k)) {
                fprintf(stderr, "mb_peer: write slot %u octet %u holds %02x\n", s, k, v);
                return 1;
            }
        }
    printf("received %llu messages, %llu octets\n", (unsigned long long)msgs,
           (unsigned long long)bytes);
    uw_disconnect(E.qp);
    for (int i = 0; i < 50 && uw_qp_state(E.qp) != UW_QPS_CLOSED; i++)
        uw_ctx_wait(E.ctx, 20);
    return result;
}

static int run_send(const char *host, int port, uint64_t total, int argc, char **argv)
{
    uw_conn_param p = {0};
    bool unused = false, expect_term = false;
    params(&p, argc, argv, &unused, &expect_term);
    size_t slen = 2 * (size_t)MSG;
    ep_init(&E, slen + (size_t)NRECV * 64 + SLOT);
    uw_qp_attr qa = {.pd = E.pd, .send_cq = E.cq, .recv_cq = E.cq, .max_send_wr = 256};
    if (uw_qp_create(E.ctx, &qa, &E.qp))
        return die("qp_create failed");
    uint8_t *rb = E.mem + slen;
    for (uint32_t i = 0; i < NRECV; i++) {
        uw_sge s = {(uint64_t)(uintptr_t)(rb + i * 64), 64, uw_mr_stag(E.mr)};
        uw_recv_wr w = {.wr_id = i, .sg_list = &s, .num_sge = 1};
        uw_post_recv(E.qp, &w, 1, NULL);
    }
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &sin.sin_addr);
    if (uw_connect(E.qp, (struct sockaddr *)&sin, sizeof(sin), &p))
        return die("connect failed");
    uw_cm_event ev;
    if (uw_cm_wait_event(E.ctx, &ev, 20000) != 1 || ev.type != UW_CM_ESTABLISHED)
        return die("connection not established");
    uint64_t raddr = 0;
    uint32_t rkey = 0;
    for (int i = 0; i < 8; i++)
        raddr = raddr << 8 | ev.private_data[i];
    for (int i = 0; i < 4; i++)
        rkey = rkey << 8 | ev.private_data[8 + i];
    uint64_t sent = 0, msg = 0, acked = 0, writes = 0;
    uint32_t inflight = 0;
    bool peer_closed = false;
    uint8_t *wsrc = rb + (size_t)NRECV * 64; /* reused for Writes: one at a time */
    bool write_busy = false;
    while (sent < total || inflight) {
        /* Credits: at most NRECV messages beyond those the receiver re-posted. */
        while (sent < total && msg - acked < NRECV - 2 && inflight < 16) {
            uint32_t len = (uint32_t)(total - sent < MSG ? total - sent : MSG);
            uint8_t *b = E.mem + (msg & 1) * MSG;
            for (uint32_t k = 0; k < len; k++)
                b[k] = pat(msg, k);
            post_send(&E, b, len, UW_WR_SEND, 0, 0, 1);
            inflight++;
            sent += len;
            msg++;
            if (!write_busy && writes < WREGION / SLOT) {
                for (uint32_t k = 0; k < SLOT; k++)
                    wsrc[k] = pat(1000000 + writes, k);
                post_send(&E, wsrc, SLOT, UW_WR_RDMA_WRITE, raddr + writes * SLOT, rkey, 2);
                write_busy = true;
                writes++;
            }
            /* Two send buffers alternate: wait before reusing one. */
            if (inflight >= 2)
                break;
        }
        uw_wc wc[16];
        int n = uw_cq_wait(E.cq, wc, 16, 200);
        for (int i = 0; i < n; i++) {
            if (wc[i].status != UW_WC_SUCCESS)
                continue;
            if (wc[i].opcode == UW_WC_RECV) {
                acked += CREDIT_EVERY;
                uw_sge s = {(uint64_t)(uintptr_t)(rb + wc[i].wr_id * 64), 64, uw_mr_stag(E.mr)};
                uw_recv_wr w = {.wr_id = wc[i].wr_id, .sg_list = &s, .num_sge = 1};
                uw_post_recv(E.qp, &w, 1, NULL);
            } else if (wc[i].wr_id == 1) {
                inflight--;
            } else if (wc[i].wr_id == 2) {
                write_busy = false;
            }
        }
        if (uw_cm_get_event(E.ctx, &ev) == 1) {
            if (ev.type == UW_CM_TERMINATED && ev.term_received) {
                printf("terminate-received layer=%u etype=%u ecode=%u (%s)\n", ev.term.layer,
                       ev.term.etype, ev.term.ecode, uw_term_describe(ev.term));
                return expect_term ? 0 : 1;
            }
            if (ev.type == UW_CM_DISCONNECTED && !expect_term) {
                peer_closed = true; /* its direction only: ours stays open */
                continue;
            }
            if (expect_term && (ev.type == UW_CM_DISCONNECTED || ev.type == UW_CM_CONN_ERROR)) {
                /* The receiver lingers after its Terminate instead of
                 * resetting (docs/design.md), so the relay has no reset to
                 * pass on and the Terminate comes before any close. */
                printf("terminate-lost: %s (%s) came first\n", uw_cm_event_name(ev.type),
                       uw_err_name(ev.err));
                return 1;
            }
            fprintf(stderr, "mb_peer: event %s err %s\n", uw_cm_event_name(ev.type),
                    uw_err_name(ev.err));
            return 1;
        }
    }
    printf("sent %llu messages, %llu octets, %llu writes\n", (unsigned long long)msg,
           (unsigned long long)sent, (unsigned long long)writes);
    if (expect_term) {
        /* The receiver's Terminate can still be on its way. */
        if (uw_cm_wait_event(E.ctx, &ev, 10000) == 1 && ev.type == UW_CM_TERMINATED &&
            ev.term_received) {
            printf("terminate-received layer=%u etype=%u ecode=%u (%s)\n", ev.term.layer,
                   ev.term.etype, ev.term.ecode, uw_term_describe(ev.term));
            return 0;
        }
        return die("no Terminate received");
    }
    uw_disconnect(E.qp);
    for (int i = 0; i < 500 && !peer_closed; i++) {
        if (uw_cm_wait_event(E.ctx, &ev, 20) == 1 && ev.type == UW_CM_DISCONNECTED)
            peer_closed = true;
    }
    return peer_closed ? 0 : die("peer did not close");
}

int main(int argc, char **argv)
{
    int rc;
    if (argc >= 3 && !strcmp(argv[1], "recv")) {
        rc = run_recv(atoi(argv[2]), argc - 3, argv + 3);
        ep_fini(&E);
        return rc;
    }
    if (argc >= 5 && !strcmp(argv[1], "send")) {
        rc = run_send(argv[2], atoi(argv[3]), strtoull(argv[4], NULL, 0), argc - 5, argv + 5);
        ep_fini(&E);
        return rc;
    }
    fprintf(stderr, "usage: mb_peer recv PORT [opts] | mb_peer send HOST PORT BYTES [opts]\n");
    return 1;
}
