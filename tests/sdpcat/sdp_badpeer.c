/* sdp_badpeer: a misbehaving SDP peer for the uwarp-sdpcat tests.
 *
 * It speaks SDP (draft-pinkerton-iwarp-sdp-01) over the verbs API directly,
 * not through uwarp/sdp.h, and builds every SDP header by hand with the byte
 * layout of ../shared/specs/sdp-iwarp-notes.md section 1, so it can send
 * what a correct implementation never would:
 *
 *   sdp_badpeer --mode MODE -l [ADDR:]PORT   Accepting Peer: MPA responder in
 *                                            peer-to-peer mode; takes the
 *                                            Hello from the Request's private
 *                                            data, answers with a HelloAck Send
 *   sdp_badpeer --mode MODE HOST PORT        Connecting Peer: MPA Rev 2
 *                                            initiator, peer-to-peer with
 *                                            Write and Read RTRs offered, the
 *                                            Hello as private data
 *
 * Modes (what happens after the Hello/HelloAck exchange unless noted):
 *   good          a well-behaved peer: stdin goes out in Data messages within
 *                 the credits, received Data payload goes to stdout, DisConn
 *                 at the end (checks this file's idea of the wire format)
 *   garbage       one Send of random octets (its BSDH Len never matches)
 *   overrun       stops reading the peer's credit updates and sends Data
 *                 messages with payload until the credits are used up, so
 *                 the messages sent with 2 and 1 credits left break the
 *                 section 10.5 rules
 *   mseq-gap      Data with the next MSeq, then Data with one MSeq skipped
 *   reserved-mid  a message with the reserved MID 0x20
 *   maxadverts0   the Hello (connecting) or HelloAck (accepting) has
 *                 MaxAdverts 0 (section 8.1.1 steps 3a and 7a)
 *   no-helloack   (accepting) accepts at MPA level, never sends the HelloAck
 *   die           sends --bytes N of Data (default 3000), then _exit()s
 *                 without any SDP or LLP close
 *   read-outside  waits for the peer's SrcAvail (section 9.2) and RDMA-Reads
 *                 4 KiB that straddle the end of the advertised buffer; the
 *                 peer must answer with a Terminate, the Read must fail and
 *                 place nothing (our buffer keeps its fill pattern)
 *
 * After misbehaving it waits for the other side to end the connection and
 * says how on stderr. Exit status: 0 the other side ended the connection (a
 * Terminate, a reset, an AbortConn, a close) or, for maxadverts0 connecting,
 * refused it with an MPA Reject; good: the exchange completed with DisConns
 * both ways; read-outside: the Terminate came, the Read failed and placed
 * nothing; 1 usage or setup failure, or an unexpected outcome; 4 the other
 * side was still connected when --timeout (default 10 s) expired.
 * Listening, it prints "listening on ADDR:PORT" on stderr. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../tools/cliutil.h"
#include "../../tools/rdmacli.h"
#include "uwarp/mpa.h"
#include "uwarp/verbs.h"

/* SDP wire constants (draft section 6, Figure 3). */
#define BSDH_LEN 16u
#define HH_LEN 16u
#define HAH_LEN 12u
#define MID_HELLO 0x00u
#define MID_HELLOACK 0x01u
#define MID_DISCONN 0x02u
#define MID_ABORTCONN 0x03u
#define MID_RESERVED 0x20u
#define MID_SRCAVAIL 0xFEu
#define SRCAH_LEN 16u /* Len, SrcSTag, VA (notes section 1) */
#define MID_DATA 0xFFu
#define BAD_READ_LEN 4096u

#define NRECV 8u        /* receive Private Buffers we post (Bufs) */
#define RCV_SIZE 65536u /* their size (LocalRcvSz / ActRcvSz) */
#define NSLOT 8u        /* send buffers */
#define SLOT_SIZE 65536u
#define PEER_SIZE_MIN 37u /* section 10 rule 4 */

enum mode {
    M_GOOD,
    M_GARBAGE,
    M_OVERRUN,
    M_MSEQ_GAP,
    M_RESERVED_MID,
    M_MAXADVERTS0,
    M_NO_HELLOACK,
    M_DIE,
    M_READ_OUTSIDE
};
static const char *const MODE_NAMES[] = {"good",        "garbage",      "overrun",
                                         "mseq-gap",    "reserved-mid", "maxadverts0",
                                         "no-helloack", "die",          "read-outside"};

/* Exit statuses. */
#define BP_OK 0
#define BP_FAIL 1
#define BP_TIMEOUT 4

struct bp {
    enum mode mode;
    bool accepting;
    int timeout_ms;
    uint32_t die_bytes;
    uint64_t seed;

    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    uw_qp *qp;
    uw_listener *lis;
    uint8_t *mem; /* NRECV receive buffers, then NSLOT send slots */
    uw_mr *mr;
    bool slot_busy[NSLOT];
    unsigned slots_in_use;

    /* SDP state */
    uint32_t lsseq;      /* MSeq of the last message we sent */
    uint32_t rx_mseq;    /* MSeq of the last message received (our MSeqAck) */
    uint32_t acked_sent; /* the MSeqAck our last message carried */
    uint16_t peer_bufs;  /* Bufs of the peer's latest message */
    uint32_t peer_ack;   /* MSeqAck of the peer's latest message */
    uint32_t peer_rcv_size;
    bool frozen; /* overrun: stop reading the peer's credit updates */
    bool got_helloack, peer_disconn, peer_abort, sent_disconn;
    uint64_t rx_payload, tx_payload;
    /* read-outside: the peer's SrcAvail, and how our Read ended */
    bool got_srcavail, read_done, read_ok;
    uint32_t sa_len, sa_stag;
    uint64_t sa_va;

    /* how the connection ended (set once) */
    bool over;
    char why[256];
};

static struct bp B;

/* ------------------------------------------------------------------------ */
/* Big-endian helpers and the headers, by hand                              */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* BSDH: 0 MID, 1 Flags, 2-3 Bufs, 4-7 Len, 8-11 MSeq, 12-15 MSeqAck. */
static void put_bsdh(uint8_t *p, uint8_t mid, uint8_t flags, uint16_t bufs, uint32_t len,
                     uint32_t mseq, uint32_t mseqack)
{
    p[0] = mid;
    p[1] = flags;
    put16(p + 2, bufs);
    put32(p + 4, len);
    put32(p + 8, mseq);
    put32(p + 12, mseqack);
}

/* Hello: BSDH + HH (0 MajV<<4|MinV, 1 Rsvd, 2-3 MaxAdverts, 4-7 DesRemRcvSz,
 * 8-11 LocalRcvSz, 12-13 LocORD, 14-15 LocIRD). */
static void build_hello(uint8_t out[BSDH_LEN + HH_LEN], uint16_t max_adverts)
{
    memset(out, 0, BSDH_LEN + HH_LEN);
    put_bsdh(out, MID_HELLO, 0, NRECV, BSDH_LEN + HH_LEN, 0, 0);
    uint8_t *h = out + BSDH_LEN;
    h[0] = 1u << 4 | 1u;
    put16(h + 2, max_adverts);
    put32(h + 4, SLOT_SIZE);
    put32(h + 8, RCV_SIZE);
    put16(h + 12, 1); /* LocORD */
    put16(h + 14, 1); /* LocIRD */
}

/* HelloAck: BSDH + HAH (0 MajV<<4|MinV, 1 Rsvd, 2-3 MaxAdverts, 4-7
 * ActRcvSz, 8-9 LocORD, 10-11 LocIRD). */
static void build_helloack(uint8_t out[BSDH_LEN + HAH_LEN], uint16_t max_adverts)
{
    memset(out, 0, BSDH_LEN + HAH_LEN);
    put_bsdh(out, MID_HELLOACK, 0, NRECV, BSDH_LEN + HAH_LEN, 0, 0);
    uint8_t *h = out + BSDH_LEN;
    h[0] = 1u << 4 | 1u;
    put16(h + 2, max_adverts);
    put32(h + 4, RCV_SIZE);
    put16(h + 8, 1);  /* LocORD */
    put16(h + 10, 1); /* LocIRD */
}

/* ------------------------------------------------------------------------ */
/* Verbs plumbing                                                            */

static uint8_t *rbuf(unsigned i)
{
    return B.mem + (size_t)i * RCV_SIZE;
}

static uint8_t *slot(unsigned i)
{
    return B.mem + (size_t)NRECV * RCV_SIZE + (size_t)i * SLOT_SIZE;
}

static void end_with(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void end_with(const char *fmt, ...)
{
    if (B.over)
        return;
    B.over = true;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(B.why, sizeof(B.why), fmt, ap);
    va_end(ap);
}

static int post_recv(unsigned i)
{
    uw_sge s = {.addr = (uint64_t)(uintptr_t)rbuf(i), .length = RCV_SIZE, .lkey = uw_mr_stag(B.mr)};
    uw_recv_wr wr = {.wr_id = i, .sg_list = &s, .num_sge = 1};
    int bad = 0;
    return uw_post_recv(B.qp, &wr, 1, &bad);
}

static void handle_msg(const uint8_t *m, uint32_t len);

/* One pass: completions, events, then a short sleep on the context fd when
 * nothing happened. Returns the number of things handled. */
static int pump(int max_sleep_ms)
{
    int done = 0;
    uw_wc wc[16];
    int n = uw_cq_poll(B.cq, wc, 16);
    for (int i = 0; i < n; i++) {
        done++;
        if (wc[i].opcode == UW_WC_RECV) {
            if (wc[i].status != UW_WC_SUCCESS) {
                if (wc[i].status != UW_WC_WR_FLUSH_ERR)
                    end_with("receive completion failed: %s (%s)", rc_wc_status_name(wc[i].status),
                             uw_err_name(wc[i].err));
                continue;
            }
            unsigned id = (unsigned)wc[i].wr_id;
            handle_msg(rbuf(id), wc[i].byte_len);
            if (!B.over && uw_qp_state(B.qp) == UW_QPS_RTS && post_recv(id) < 0)
                end_with("re-posting a receive failed");
        } else if (wc[i].opcode == UW_WC_RDMA_READ) {
            B.read_done = true;
            B.read_ok = wc[i].status == UW_WC_SUCCESS;
        } else {
            unsigned id = (unsigned)wc[i].wr_id;
            if (id < NSLOT && B.slot_busy[id]) {
                B.slot_busy[id] = false;
                B.slots_in_use--;
            }
            if (wc[i].status != UW_WC_SUCCESS && wc[i].status != UW_WC_WR_FLUSH_ERR)
                end_with("send completion failed: %s (%s)", rc_wc_status_name(wc[i].status),
                         uw_err_name(wc[i].err));
        }
    }
    uw_cm_event ev;
    while (uw_cm_get_event(B.ctx, &ev) == 1) {
        done++;
        if (ev.qp != B.qp || !B.qp)
            continue;
        switch (ev.type) {
        case UW_CM_ESTABLISHED:
            break;
        case UW_CM_DISCONNECTED:
            /* The LLP closed in order: after the peer's DisConn that is the
             * graceful end, before it the peer gave up on us. */
            if (!B.peer_disconn || B.mode != M_GOOD)
                end_with("the peer closed the LLP (TCP FIN)%s",
                         B.peer_disconn ? " after its DisConn" : " without a DisConn");
            break;
        case UW_CM_TERMINATED:
            end_with("Terminate %s: %s (layer %u type 0x%x code 0x%02x)",
                     ev.term_received ? "received from the peer" : "sent by us",
                     uw_term_describe(ev.term), ev.term.layer, ev.term.etype, ev.term.ecode);
            break;
        case UW_CM_CONN_ERROR:
            end_with("connection failed: %s", uw_err_name(ev.err));
            break;
        case UW_CM_REJECTED:
            end_with("rejected by the peer (MPA Reject)");
            break;
        case UW_CM_CONNECT_ERROR:
            end_with("connection setup failed: %s", uw_err_name(ev.err));
            break;
        default:
            break;
        }
    }
    if (done == 0 && max_sleep_ms != 0) {
        struct pollfd p = {.fd = uw_ctx_fd(B.ctx), .events = POLLIN};
        /* verbs.h: queued work does not wake the fd, so sleep in slices. */
        int t =
            max_sleep_ms < 0 || max_sleep_ms > RC_WAIT_SLICE_MS ? RC_WAIT_SLICE_MS : max_sleep_ms;
        (void)poll(&p, 1, t);
    }
    return done;
}

static int credit(void)
{
    return (int)B.peer_bufs - (int)(int32_t)(B.lsseq - B.peer_ack);
}

/* Waits (bounded) for a free send slot; -1 when none comes. */
static int free_slot(int64_t deadline)
{
    for (;;) {
        for (unsigned i = 0; i < NSLOT; i++)
            if (!B.slot_busy[i])
                return (int)i;
        if (B.over || rc_remaining_ms(deadline) == 0)
            return -1;
        pump(rc_remaining_ms(deadline));
    }
}

/* Sends len octets already written into slot s. */
static int post_slot(int s, uint32_t len, bool solicited)
{
    uw_sge g = {
        .addr = (uint64_t)(uintptr_t)slot((unsigned)s), .length = len, .lkey = uw_mr_stag(B.mr)};
    uw_send_wr wr = {.wr_id = (uint64_t)s,
                     .opcode = UW_WR_SEND,
                     .flags = UW_SEND_SIGNALED | (solicited ? UW_SEND_SOLICITED : 0),
                     .sg_list = &g,
                     .num_sge = 1};
    int bad = 0;
    int rc = uw_post_send(B.qp, &wr, 1, &bad);
    if (rc < 0) {
        end_with("posting a Send failed: %s", uw_err_name(rc));
        return rc;
    }
    B.slot_busy[s] = true;
    B.slots_in_use++;
    return 0;
}

/* Sends an SDP message with a BSDH and payload. Its MSeq is the next one
 * plus skip (mseq-gap), taken once the slot is found: waiting for a slot
 * handles received messages, which may send a credit update first. */
static int send_msg(uint8_t mid, uint32_t skip, const void *payload, uint32_t plen)
{
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    int s = free_slot(deadline);
    if (s < 0)
        return -1;
    uint32_t mseq = B.lsseq + 1 + skip;
    uint32_t ack = B.frozen ? B.acked_sent : B.rx_mseq;
    put_bsdh(slot((unsigned)s), (uint8_t)mid, 0, NRECV, BSDH_LEN + plen, mseq, ack);
    if (plen)
        memcpy(slot((unsigned)s) + BSDH_LEN, payload, plen);
    B.acked_sent = ack;
    if ((int32_t)(mseq - B.lsseq) > 0)
        B.lsseq = mseq;
    return post_slot(s, BSDH_LEN + plen, false);
}

/* Section 10.5 (well-behaved): payload needs 3 credits, other messages 2,
 * a pure credit update 1. Waits for the credit; -1 when it never comes. */
static int wait_credit(int need)
{
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    while (credit() < need) {
        if (B.over || rc_remaining_ms(deadline) == 0)
            return -1;
        pump(rc_remaining_ms(deadline));
    }
    return 0;
}

/* Gives the peer credits back when its credit as we know it is low. */
static void maybe_credit_update(void)
{
    /* After our DisConn too: the peer may still send data (8.2.1 step 2). */
    if (B.frozen || B.over)
        return;
    uint32_t unacked = B.rx_mseq - B.acked_sent;
    if (unacked + 2 >= NRECV && credit() >= 1)
        (void)send_msg(MID_DATA, 0, NULL, 0);
}

static void write_out(const void *p, size_t n)
{
    if (cli_write_all(STDOUT_FILENO, p, n) < 0)
        end_with("cannot write stdout: %s", strerror(errno));
}

static void handle_msg(const uint8_t *m, uint32_t len)
{
    if (len < BSDH_LEN) {
        end_with("the peer sent a %u-octet message, shorter than a BSDH", len);
        return;
    }
    uint8_t mid = m[0];
    uint32_t mseq = get32(m + 8);
    if (B.frozen)
        return; /* overrun: the peer's credit updates go unread */
    if (mid == MID_HELLOACK && !B.accepting && !B.got_helloack) {
        if (len < BSDH_LEN + HAH_LEN) {
            end_with("HelloAck of %u octets", len);
            return;
        }
        B.got_helloack = true;
        B.peer_bufs = get16(m + 2);
        B.peer_ack = get32(m + 12);
        B.rx_mseq = mseq;
        B.peer_rcv_size = get32(m + BSDH_LEN + 4);
        return;
    }
    B.peer_bufs = get16(m + 2);
    B.peer_ack = get32(m + 12);
    B.rx_mseq = mseq;
    switch (mid) {
    case MID_DATA:
        if (len > BSDH_LEN) {
            B.rx_payload += len - BSDH_LEN;
            if (B.mode == M_GOOD)
                write_out(m + BSDH_LEN, len - BSDH_LEN);
        }
        break;
    case MID_SRCAVAIL:
        if (len >= BSDH_LEN + SRCAH_LEN && !B.got_srcavail) {
            B.got_srcavail = true;
            B.sa_len = get32(m + BSDH_LEN);
            B.sa_stag = get32(m + BSDH_LEN + 4);
            B.sa_va = (uint64_t)get32(m + BSDH_LEN + 8) << 32 | get32(m + BSDH_LEN + 12);
        }
        break;
    case MID_DISCONN:
        B.peer_disconn = true;
        break;
    case MID_ABORTCONN:
        B.peer_abort = true;
        end_with("AbortConn received");
        break;
    default:
        break;
    }
    maybe_credit_update();
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */

static int setup_common(void)
{
    int rc;
    if ((rc = uw_ctx_create(&B.ctx, NULL)) < 0 || (rc = uw_pd_alloc(B.ctx, &B.pd)) < 0 ||
        (rc = uw_cq_create(B.ctx, 4 * (NRECV + NSLOT), &B.cq)) < 0) {
        cli_msg("verbs setup failed: %s", uw_err_name(rc));
        return -1;
    }
    size_t len = (size_t)NRECV * RCV_SIZE + (size_t)NSLOT * SLOT_SIZE;
    B.mem = calloc(1, len);
    if (!B.mem) {
        cli_msg("out of memory");
        return -1;
    }
    if ((rc = uw_mr_reg(B.pd, B.mem, len, UW_ACCESS_LOCAL_WRITE, &B.mr)) < 0) {
        cli_msg("uw_mr_reg failed: %s", uw_err_name(rc));
        return -1;
    }
    return 0;
}

static void qp_attr(uw_qp_attr *qa)
{
    memset(qa, 0, sizeof(*qa));
    qa->pd = B.pd;
    qa->send_cq = B.cq;
    qa->recv_cq = B.cq;
    qa->max_send_wr = NSLOT + 4;
    qa->max_recv_wr = NRECV;
}

static void conn_param(uw_conn_param *p)
{
    memset(p, 0, sizeof(*p));
    p->rev = 2;
    p->p2p = true;
    /* Notes section 2: the Connecting Peer offers Write and Read RTRs. */
    p->rtr = UW_MPA_RTR_WRITE | UW_MPA_RTR_READ;
    p->timeout_ms = B.timeout_ms;
}

static int run_connect(const char *host, const char *port)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    if (rc_resolve(host, port, false, &ss, &sl) < 0)
        return BP_FAIL;
    if (setup_common() < 0)
        return BP_FAIL;
    uw_qp_attr qa;
    qp_attr(&qa);
    int rc = uw_qp_create(B.ctx, &qa, &B.qp);
    if (rc < 0) {
        cli_msg("uw_qp_create: %s", uw_err_name(rc));
        return BP_FAIL;
    }
    /* 8.1.1 step 1c: the buffers the Hello advertises are posted first. */
    for (unsigned i = 0; i < NRECV; i++)
        if (post_recv(i) < 0)
            return BP_FAIL;
    uint8_t hello[BSDH_LEN + HH_LEN];
    build_hello(hello, B.mode == M_MAXADVERTS0 ? 0 : 8);
    uw_conn_param p;
    conn_param(&p);
    p.private_data = hello;
    p.private_data_len = sizeof(hello);
    if ((rc = uw_connect(B.qp, (struct sockaddr *)&ss, sl, &p)) < 0) {
        cli_msg("uw_connect: %s", uw_err_name(rc));
        return BP_FAIL;
    }
    B.rx_mseq = 0;
    B.lsseq = 0; /* the Hello's MSeq */
    /* Setup ends with the HelloAck (or the connection's end). */
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    while (!B.got_helloack && !B.over && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    if (B.mode == M_MAXADVERTS0) {
        if (B.over && strstr(B.why, "rejected")) {
            cli_msg("as expected: %s", B.why);
            return BP_OK;
        }
        cli_msg("the Hello with MaxAdverts 0 was not refused with an MPA Reject (%s)",
                B.over           ? B.why
                : B.got_helloack ? "a HelloAck came back"
                                 : "no answer");
        return BP_FAIL;
    }
    if (!B.got_helloack) {
        cli_msg("no HelloAck: %s", B.over ? B.why : "timed out");
        return B.over ? BP_FAIL : BP_TIMEOUT;
    }
    if (B.peer_rcv_size < PEER_SIZE_MIN) {
        cli_msg("HelloAck ActRcvSz %u is below the minimum", B.peer_rcv_size);
        return BP_FAIL;
    }
    return -1;
}

static int run_listen(const char *spec)
{
    char hostbuf[256];
    const char *host, *port;
    struct sockaddr_storage ss;
    socklen_t sl;
    if (rc_split_listen(spec, hostbuf, sizeof(hostbuf), &host, &port) < 0 ||
        rc_resolve(host, port, true, &ss, &sl) < 0)
        return BP_FAIL;
    if (setup_common() < 0)
        return BP_FAIL;
    uw_qp_attr qa;
    qp_attr(&qa);
    uw_conn_param p;
    conn_param(&p);
    int rc = uw_listen(B.ctx, (struct sockaddr *)&ss, sl, &qa, &p, &B.lis);
    if (rc < 0) {
        cli_msg("uw_listen: %s", uw_err_name(rc));
        return BP_FAIL;
    }
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    char as[96];
    if (uw_listener_addr(B.lis, &bound, &bl) == 0) {
        rc_addr_str((struct sockaddr *)&bound, as, sizeof(as));
        cli_msg("listening on %s", as);
    }
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    uw_cm_event ev;
    for (;;) {
        rc = uw_cm_wait_event(B.ctx, &ev, rc_remaining_ms(deadline));
        if (rc == UW_ETIMEDOUT || rc_remaining_ms(deadline) == 0) {
            cli_msg("nobody connected within --timeout");
            return BP_TIMEOUT;
        }
        if (rc == 1 && ev.type == UW_CM_CONNECT_REQUEST)
            break;
    }
    B.qp = ev.qp;
    if (ev.private_data_len < BSDH_LEN + HH_LEN || ev.private_data[0] != MID_HELLO) {
        cli_msg("the Request's private data (%u octets) is not a Hello", ev.private_data_len);
        return BP_FAIL;
    }
    const uint8_t *h = ev.private_data;
    B.peer_bufs = get16(h + 2);
    B.peer_rcv_size = get32(h + BSDH_LEN + 8);
    if (B.peer_rcv_size < PEER_SIZE_MIN || B.peer_bufs < 3) {
        cli_msg("Hello with LocalRcvSz %u, Bufs %u", B.peer_rcv_size, B.peer_bufs);
        return BP_FAIL;
    }
    /* Notes section 3: the HelloAck uses one of the peer's buffers, so our
     * credit after it is Bufs - 1: an MSeqAck one behind our LSSeq (0). */
    B.peer_ack = UINT32_MAX;
    B.lsseq = 0;
    B.rx_mseq = 0;
    for (unsigned i = 0; i < NRECV; i++)
        if (post_recv(i) < 0)
            return BP_FAIL;
    if ((rc = uw_accept(B.qp, NULL)) < 0) {
        cli_msg("uw_accept: %s", uw_err_name(rc));
        return BP_FAIL;
    }
    if (B.mode == M_NO_HELLOACK)
        return -1;
    int s = free_slot(deadline);
    if (s < 0)
        return BP_FAIL;
    build_helloack(slot((unsigned)s), B.mode == M_MAXADVERTS0 ? 0 : 8);
    /* Section 8.1.1 step 5: a Send with Solicited Event. */
    if (post_slot(s, BSDH_LEN + HAH_LEN, true) < 0)
        return BP_FAIL;
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Misbehaviour                                                              */

/* Waits for the other side to end the connection. */
static int wait_end(void)
{
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    while (!B.over && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    if (!B.over) {
        cli_msg("the peer still holds the connection after %d ms", B.timeout_ms);
        return BP_TIMEOUT;
    }
    cli_msg("the peer ended the connection: %s", B.why);
    return BP_OK;
}

static uint64_t rnd(void)
{
    /* splitmix64 */
    uint64_t z = (B.seed += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int do_garbage(void)
{
    uint8_t g[200];
    uint32_t len = 64 + (uint32_t)(rnd() % 136);
    for (uint32_t i = 0; i < len; i++)
        g[i] = (uint8_t)rnd();
    /* Whatever the MID, a BSDH Len that is not the message's length is
     * malformed (section 6.1). */
    if (get32(g + 4) == len)
        put32(g + 4, len + 1);
    int s = free_slot(rc_now_ms() + B.timeout_ms);
    if (s < 0)
        return BP_FAIL;
    memcpy(slot((unsigned)s), g, len);
    if (post_slot(s, len, false) < 0)
        return BP_FAIL;
    cli_msg("sent %u random octets (MID 0x%02x)", len, g[0]);
    return wait_end();
}

static uint32_t chunk_for_peer(uint32_t want)
{
    uint32_t max = B.peer_rcv_size - BSDH_LEN;
    if (max > SLOT_SIZE - BSDH_LEN)
        max = SLOT_SIZE - BSDH_LEN;
    return want < max ? want : max;
}

static int do_overrun(void)
{
    B.frozen = true;
    static uint8_t payload[1000];
    memset(payload, 'o', sizeof(payload));
    uint32_t plen = chunk_for_peer(sizeof(payload));
    int sent = 0, late = 0;
    /* Down to credit 0: the messages sent with 2 and 1 credits left carry
     * payload, which section 10.5 forbids. */
    while (credit() >= 1 && !B.over) {
        int c = credit();
        if (send_msg(MID_DATA, 0, payload, plen) < 0)
            break;
        sent++;
        if (c <= 2)
            late++;
    }
    cli_msg("sent %d Data messages with payload, %d of them with 2 or fewer credits", sent, late);
    return wait_end();
}

static int do_mseq_gap(void)
{
    static const char a[] = "first, in sequence\n";
    static const char b[] = "second, one MSeq skipped\n";
    if (wait_credit(3) < 0)
        return wait_end();
    (void)send_msg(MID_DATA, 0, a, sizeof(a) - 1);
    if (wait_credit(3) < 0)
        return wait_end();
    (void)send_msg(MID_DATA, 1, b, sizeof(b) - 1);
    cli_msg("sent MSeq %u then %u", B.lsseq - 2, B.lsseq);
    return wait_end();
}

static int do_reserved_mid(void)
{
    if (wait_credit(2) < 0)
        return wait_end();
    (void)send_msg(MID_RESERVED, 0, NULL, 0);
    cli_msg("sent a message with MID 0x%02x", MID_RESERVED);
    return wait_end();
}

static int do_die(void)
{
    static uint8_t buf[4096];
    uint32_t left = B.die_bytes;
    unsigned k = 0;
    while (left && !B.over) {
        uint32_t n = chunk_for_peer(left < 1000 ? left : 1000);
        for (uint32_t i = 0; i < n; i++)
            buf[i] = (uint8_t)('a' + (k++ % 26));
        if (wait_credit(3) < 0 || send_msg(MID_DATA, 0, buf, n) < 0)
            break;
        left -= n;
        B.tx_payload += n;
    }
    /* Let the Sends complete (they are on the wire), then vanish: no
     * DisConn, no uw_disconnect, no clean-up. */
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    while (B.slots_in_use && !B.over && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    /* A moment for the peer to read the data, so a test can check it
     * arrived whatever the peer does with unread data at the end. */
    deadline = rc_now_ms() + 300;
    while (!B.over && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    cli_msg("sent %llu octets of Data; exiting without closing", (unsigned long long)B.tx_payload);
    _exit(BP_OK);
}

/* An RDMA Read half inside, half beyond the advertised buffer, into the
 * last send slot filled with 0xA5: only a Terminate may come back. */
static int do_read_outside(void)
{
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    while (!B.got_srcavail && !B.over && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    if (!B.got_srcavail) {
        cli_msg("no SrcAvail from the peer: %s", B.over ? B.why : "timeout");
        return BP_FAIL;
    }
    uint8_t *dst = slot(NSLOT - 1);
    memset(dst, 0xA5, BAD_READ_LEN);
    uint64_t at = B.sa_va + B.sa_len - BAD_READ_LEN / 2;
    cli_msg("SrcAvail: %u octets at VA 0x%llx, STag 0x%08x; reading %u octets at 0x%llx", B.sa_len,
            (unsigned long long)B.sa_va, B.sa_stag, BAD_READ_LEN, (unsigned long long)at);
    uw_sge g = {.addr = (uint64_t)(uintptr_t)dst, .length = BAD_READ_LEN, .lkey = uw_mr_stag(B.mr)};
    uw_send_wr wr = {.wr_id = 1000,
                     .opcode = UW_WR_RDMA_READ,
                     .flags = UW_SEND_SIGNALED,
                     .sg_list = &g,
                     .num_sge = 1,
                     .remote_addr = at,
                     .rkey = B.sa_stag};
    int bad = 0;
    int rc = uw_post_send(B.qp, &wr, 1, &bad);
    if (rc < 0) {
        cli_msg("posting the RDMA Read failed: %s", uw_err_name(rc));
        return BP_FAIL;
    }
    rc = wait_end();
    deadline = rc_now_ms() + 2000;
    while (!B.read_done && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    bool untouched = true;
    for (uint32_t i = 0; i < BAD_READ_LEN; i++)
        untouched &= dst[i] == 0xA5;
    cli_msg("the Read %s; our buffer %s",
            !B.read_done ? "never completed"
            : B.read_ok  ? "SUCCEEDED"
                         : "failed",
            untouched ? "untouched" : "WRITTEN");
    if (rc != BP_OK)
        return rc;
    return strstr(B.why, "Terminate received") && !B.read_ok && untouched ? BP_OK : BP_FAIL;
}

static int do_good(void)
{
    static uint8_t buf[SLOT_SIZE];
    bool eof = false;
    int64_t deadline = rc_now_ms() + B.timeout_ms;
    while (!eof && !B.over) {
        uint32_t want = chunk_for_peer(sizeof(buf) - BSDH_LEN);
        ssize_t n = cli_read_some(STDIN_FILENO, buf, want);
        if (n < 0) {
            cli_msg("reading stdin: %s", strerror(errno));
            return BP_FAIL;
        }
        if (n == 0) {
            eof = true;
            break;
        }
        if (wait_credit(3) < 0 || send_msg(MID_DATA, 0, buf, (uint32_t)n) < 0)
            break;
        B.tx_payload += (uint64_t)n;
        pump(0);
    }
    if (!B.over && wait_credit(2) == 0 && send_msg(MID_DISCONN, 0, NULL, 0) == 0)
        B.sent_disconn = true;
    deadline = rc_now_ms() + B.timeout_ms;
    while (!B.peer_disconn && !B.over && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    if (B.over) {
        cli_msg("the exchange failed: %s", B.why);
        return BP_FAIL;
    }
    if (!B.peer_disconn) {
        cli_msg("no DisConn from the peer within --timeout");
        return BP_TIMEOUT;
    }
    /* Both DisConns seen: close the LLP and wait for it to be done. */
    while (B.slots_in_use && !B.over && rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    (void)uw_disconnect(B.qp);
    deadline = rc_now_ms() + B.timeout_ms;
    while (uw_qp_state(B.qp) != UW_QPS_CLOSED && uw_qp_state(B.qp) != UW_QPS_ERROR &&
           rc_remaining_ms(deadline) > 0)
        pump(rc_remaining_ms(deadline));
    cli_msg("done: sent %llu, received %llu octets, closed %s", (unsigned long long)B.tx_payload,
            (unsigned long long)B.rx_payload,
            uw_qp_state(B.qp) == UW_QPS_CLOSED ? "gracefully" : "with an error");
    return uw_qp_state(B.qp) == UW_QPS_CLOSED ? BP_OK : BP_FAIL;
}

static void teardown(void)
{
    if (B.qp)
        uw_qp_destroy(B.qp);
    if (B.lis)
        uw_listener_destroy(B.lis);
    if (B.mr)
        uw_mr_dereg(B.mr);
    if (B.cq)
        uw_cq_destroy(B.cq);
    if (B.pd)
        uw_pd_dealloc(B.pd);
    if (B.ctx && uw_ctx_destroy(B.ctx) < 0)
        cli_msg("context still busy at exit");
    free(B.mem);
}

static int usage(void)
{
    fputs("usage: sdp_badpeer --mode MODE [--timeout S] [--seed N] [--bytes N] -l [ADDR:]PORT\n"
          "       sdp_badpeer --mode MODE [--timeout S] [--seed N] [--bytes N] HOST PORT\n"
          "modes: good garbage overrun mseq-gap reserved-mid maxadverts0 no-helloack die\n"
          "       read-outside\n",
          stderr);
    return BP_FAIL;
}

int main(int argc, char **argv)
{
    cli_set_prog("sdp_badpeer");
    const char *listen_spec = NULL, *pos[2];
    int npos = 0, mode = -1;
    B.timeout_ms = 10000;
    B.die_bytes = 3000;
    B.seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int r;
        if (!strcmp(a, "-l") && i + 1 < argc) {
            listen_spec = argv[++i];
        } else if ((r = cli_opt(argc, argv, &i, "--mode", &v)) != 0) {
            if (r < 0)
                return BP_FAIL;
            for (size_t m = 0; m < sizeof(MODE_NAMES) / sizeof(MODE_NAMES[0]); m++)
                if (!strcmp(v, MODE_NAMES[m]))
                    mode = (int)m;
            if (mode < 0)
                return usage();
        } else if ((r = cli_opt(argc, argv, &i, "--timeout", &v)) != 0) {
            if (r < 0 || !rc_parse_seconds(v, &B.timeout_ms) || B.timeout_ms == 0)
                return usage();
        } else if ((r = cli_opt(argc, argv, &i, "--seed", &v)) != 0) {
            uint32_t s;
            if (r < 0 || !cli_parse_u32(v, &s))
                return usage();
            B.seed = s;
        } else if ((r = cli_opt(argc, argv, &i, "--bytes", &v)) != 0) {
            if (r < 0 || !cli_parse_u32(v, &B.die_bytes))
                return usage();
        } else if (a[0] == '-' && a[1]) {
            return usage();
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return usage();
        }
    }
    if (mode < 0 || (listen_spec ? npos != 0 : npos != 2))
        return usage();
    B.mode = (enum mode)mode;
    B.accepting = listen_spec != NULL;
    if (B.mode == M_NO_HELLOACK && !B.accepting) {
        cli_msg("no-helloack is a mode of the Accepting Peer (-l)");
        return BP_FAIL;
    }
    int rc = B.accepting ? run_listen(listen_spec) : run_connect(pos[0], pos[1]);
    if (rc < 0) {
        switch (B.mode) {
        case M_GOOD:
            rc = do_good();
            break;
        case M_GARBAGE:
            rc = do_garbage();
            break;
        case M_OVERRUN:
            rc = do_overrun();
            break;
        case M_MSEQ_GAP:
            rc = do_mseq_gap();
            break;
        case M_RESERVED_MID:
            rc = do_reserved_mid();
            break;
        case M_DIE:
            rc = do_die();
            break;
        case M_READ_OUTSIDE:
            rc = do_read_outside();
            break;
        case M_MAXADVERTS0:
        case M_NO_HELLOACK:
            rc = wait_end();
            break;
        }
    }
    teardown();
    return rc;
}
