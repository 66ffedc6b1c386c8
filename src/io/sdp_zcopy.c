/* Read Zcopy for SDP sockets (draft-pinkerton-iwarp-sdp-01 9.2): the
 * socket-call side of src/sdp/conn_zcopy.c. A blocking send() of at least
 * the threshold lends its buffer to the peer, which RDMA-Reads it; a
 * blocking recv() Reads an advertised buffer straight into its own.
 *
 * Registrations. A uwarp MR names virtual addresses and pins nothing, so
 * "registering" a buffer is filling in an entry of the context's STag
 * table. Each socket keeps two MRs (its SrcAvail's buffer, its Read's
 * destination) and, per transfer, points one at exactly the caller's
 * buffer with exactly the access needed and a fresh key (as an iWARP Fast
 * Register would); at the end of the transfer the MR is invalidated. So a
 * grant lives only while the send() or recv() that owns the buffer is
 * still inside the call, nothing is cached across calls that memory
 * could outlive (a free() or munmap() between calls has nothing to
 * invalidate), an old STag never works again (the key changed), and a
 * peer's access outside the grant meets the RDMAP error path of the
 * engine (invalid STag or bounds: Terminate), never memory. The cost of
 * a grant is a few stores: there is no registration to cache. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "io/sdp_internal.h"
#include "verbs/internal.h"

/* A SrcAvail that no recv() takes within this long is answered with SendSm
 * (9.5.2.1), so the sender's send() returns as TCP's would once its data
 * is in the peer's buffers, however late the reader reads. */
#define UW__SDP_ZC_WAIT_MS 2
/* recv() Reads into a buffer of at least this much room (or room for all
 * that is advertised); smaller reads force Bcopy. */
#define UW__SDP_ZREAD_MIN (16u * 1024u)
/* A SrcAvail covers at most this much of one send() (2^31 is the limit). */
#define UW__SDP_ZSEND_MAX (1u << 30)
/* Default threshold: off. Measured against Bcopy in the same run (docs/sdp.md,
 * "Zero copy"), Read Zcopy does not win at any size yet: a blocking send()
 * idles for the SrcAvail/Read/RdmaRdCompl round trip that TCP's socket
 * buffer hides. */
#define UW__SDP_ZC_DEFAULT 0u

uint32_t uw__sdp_zc_default(void)
{
    const char *e = getenv("UWARP_SDP_ZCOPY_MIN");
    if (!e || !*e)
        return UW__SDP_ZC_DEFAULT;
    char *end;
    unsigned long v = strtoul(e, &end, 0);
    if (*end || v > UINT32_MAX)
        return UW__SDP_ZC_DEFAULT;
    return (uint32_t)v;
}

/* Points mr (made on first use) at exactly [addr, addr + len) with access
 * and a new key. */
static int grant(uw_sdp_sock *s, uw_mr **mr, void *addr, size_t len, unsigned access)
{
    if (!*mr)
        return uw_mr_reg(s->st->pd, addr, len, access, mr);
    (*mr)->addr = addr;
    (*mr)->len = len;
    (*mr)->access = access;
    return uw_mr_rereg(*mr);
}

static void revoke(uw_mr *mr)
{
    if (mr)
        mr->valid = false;
}

void uw__sdp_zc_free(uw_sdp_sock *s)
{
    if (s->zmr_src)
        uw_mr_dereg(s->zmr_src);
    if (s->zmr_dst)
        uw_mr_dereg(s->zmr_dst);
    if (s->zmr_sink)
        uw_mr_dereg(s->zmr_sink);
    if (s->zmr_wsrc)
        uw_mr_dereg(s->zmr_wsrc);
    s->zmr_src = s->zmr_dst = s->zmr_sink = s->zmr_wsrc = NULL;
}

/* One signaled RDMA Read or Write between [addr, addr + len) under mr and
 * the peer's stag/to. */
static int post_rdma(uw_sdp_sock *s, uint64_t wr_id, int opcode, void *addr, uint32_t len,
                     const uw_mr *mr, uint64_t to, uint32_t stag)
{
    uw_sge sge = {.addr = (uint64_t)(uintptr_t)addr, .length = len, .lkey = uw_mr_stag(mr)};
    uw_send_wr w = {.wr_id = wr_id,
                    .opcode = opcode,
                    .flags = UW_SEND_SIGNALED,
                    .sg_list = &sge,
                    .num_sge = 1,
                    .remote_addr = to,
                    .rkey = stag};
    return uw_post_send(s->qp, &w, 1, NULL);
}

static bool qp_live(const uw_sdp_sock *s)
{
    int q = s->qp ? uw_qp_state(s->qp) : UW_QPS_ERROR;
    return q == UW_QPS_RTS || q == UW_QPS_CLOSING || q == UW_QPS_CONNECTING;
}

/* Read Responses already accepted from our buffer are still being sent
 * after the sink said it was done only if the peer misbehaved; the buffer
 * goes back to the application only once none is left (or the QP is dead). */
static void drain_responses(uw_sdp_sock *s)
{
    uint64_t end = uw__sdp_deadline_ms(5000);
    while (s->qp && s->qp->rd.irq_count && qp_live(s)) {
        if (uw__sdp_now_ns() >= end) {
            uw__sdp_log(s->st, UW_LOG_WARN,
                        "SDP: Read Responses from a finished SrcAvail still queued after 5 s: "
                        "aborting the connection");
            uw_abort(s->qp);
            break;
        }
        uw__sdp_wait(s, 0, uw__sdp_deadline_ms(1));
    }
}

/* Write Zcopy (9.3): the buffer goes into the SinkAvails the peer holds
 * out, one RDMA Write each, each followed by the core's RdmaWrCompl. The
 * call returns once the Writes completed locally (their octets are in the
 * LLP's hands), as TCP's send() returns once its data is queued. */
static size_t zwrite_send(uw_sdp_sock *s, const uint8_t *buf, size_t len)
{
    uw_sdp_conn *c = s->conn;
    size_t total = 0;
    uint32_t avail;
    while (s->conn == c && total < len && !uw__sdp_conn_zwrite_inflight(c) &&
           (avail = uw__sdp_conn_zwrite_avail(c)) != 0) {
        size_t n = len - total < avail ? len - total : avail;
        void *p = (void *)(buf + total);
        if (grant(s, &s->zmr_wsrc, p, n, UW_ACCESS_LOCAL_WRITE) < 0)
            break;
        uw_sdp_zwrite wr;
        if (uw__sdp_conn_zwrite(c, (uint32_t)n, &wr) < 0) {
            revoke(s->zmr_wsrc);
            break;
        }
        /* Posted before the pump that sends its RdmaWrCompl: the QP keeps
         * the order, so the sink sees the report after the data. */
        if (post_rdma(s, UW__SDP_WRID_ZWRITE, UW_WR_RDMA_WRITE, p, (uint32_t)n, s->zmr_wsrc, wr.to,
                      wr.stag) < 0)
            uw__sdp_conn_zwrite_done(c, false);
        uw__sdp_pump(s);
        /* The Write reads buf until it completes or the QP dies. */
        while (s->conn == c && uw__sdp_conn_zwrite_inflight(c))
            uw__sdp_wait(s, POLLOUT, 0);
        revoke(s->zmr_wsrc);
        if (s->conn != c)
            break;
        total += n;
    }
    return total;
}

/* Mode Master policy for our send half (docs/sdp.md, "Zero copy"): a peer
 * that asks for Pipelined (REQ_PIPE: it pre-posts large receives) gets it.
 * A peer that refuses every advertisement (a nonblocking or late reader
 * answers SendSm) costs each large send() a round trip for nothing: after
 * UW__SDP_ZC_REFUSALS in a row the send half steps down (Pipelined to
 * Combined, Combined to Buffered, Figure 26), and in Buffered the reader
 * masters it: it asks for Combined again once it blocks in a large
 * receive (uw__sdp_zc_reader). */
#define UW__SDP_ZC_REFUSALS 8u
static void mode_policy(uw_sdp_sock *s, bool refused)
{
    if (s->mode_fixed)
        return;
    s->zc_refused = refused ? s->zc_refused + 1 : 0;
    uw_sdp_stats st;
    uw__sdp_conn_stats(s->conn, &st);
    uint8_t to = st.tx_mode;
    if (s->zc_refused >= UW__SDP_ZC_REFUSALS)
        to = st.tx_mode == UW_SDP_PIPE_MODE ? UW_SDP_COMB_MODE : UW_SDP_BUFF_MODE;
    else if (st.tx_mode == UW_SDP_COMB_MODE && uw__sdp_conn_mode_hint(s->conn))
        to = UW_SDP_PIPE_MODE;
    if (to != st.tx_mode && uw__sdp_conn_set_mode(s->conn, to) == 0) {
        s->zc_refused = 0; /* each step down takes its own run of refusals */
        uw__sdp_pump(s);
    }
}

void uw__sdp_zc_reader(uw_sdp_sock *s, size_t room)
{
    if (!s->conn || !s->zc_min || room < s->zc_min || room < UW__SDP_ZREAD_MIN)
        return;
    uw_sdp_stats st;
    uw__sdp_conn_stats(s->conn, &st);
    if (st.rx_mode == UW_SDP_BUFF_MODE && uw__sdp_conn_rx_combined(s->conn) == 0)
        uw__sdp_pump(s);
}

ssize_t uw__sdp_zsend(uw_sdp_sock *s, const void *buf, size_t len, uint64_t deadline_ns, int *cut)
{
    *cut = 0;
    if (!s->conn || !s->qp || !s->zc_min || len < s->zc_min)
        return 0;
    if (len > UW__SDP_ZSEND_MAX)
        len = UW__SDP_ZSEND_MAX;
    uw_sdp_stats before;
    uw__sdp_conn_stats(s->conn, &before);
    size_t w = zwrite_send(s, buf, len);
    if (w)
        s->zc_refused = 0;
    if (w || !s->conn)
        return (ssize_t)w;
    int r = grant(s, &s->zmr_src, (void *)buf, len,
                  UW_ACCESS_REMOTE_READ | UW_ACCESS_REMOTE_INVALIDATE);
    if (r < 0)
        return 0;
    uw_sdp_zsrc z = {.addr = buf,
                     .len = (uint32_t)len,
                     .stag = uw_mr_stag(s->zmr_src),
                     .va = (uint64_t)(uintptr_t)buf};
    r = uw__sdp_conn_zsend(s->conn, &z);
    if (r < 0) {
        revoke(s->zmr_src);
        /* Buffered Mode, urgent state, another zero-copy send: Bcopy. The
         * connection's errors come back from the Bcopy path too. */
        return 0;
    }
    uw__sdp_pump(s);
    uint64_t sent = 0, hard = 0;
    uw_sdp_conn *c = s->conn;
    bool intr = false;
    for (;;) {
        r = uw__sdp_conn_zsend_poll(c, &sent);
        if (r != 0)
            break;
        uint64_t now = uw__sdp_now_ns();
        if (!*cut && (intr || (deadline_ns && now >= deadline_ns))) {
            /* SO_SNDTIMEO or a signal: revoke (9.5.4). The peer may be
             * reading, so the buffer is the peer's until it answers. */
            int cr = uw__sdp_conn_zsend_cancel(c);
            if (cr == UW_EALREADY) {
                /* Too late: the peer's SendSm Processed the SrcAvail and
                 * it waits for all the rest by Bcopy (9.5.4 cancels only
                 * Unprocessed ones). The call finishes it, without the
                 * timeout: docs/sdp.md lists this difference from TCP. */
                deadline_ns = 0;
                intr = false;
                continue;
            }
            *cut = intr ? -EINTR : UW_EAGAIN;
            hard = uw__sdp_deadline_ms(5000);
            if (cr == 0)
                uw__sdp_pump(s);
            continue;
        }
        if (*cut && uw__sdp_conn_zsend_cancel(c) == UW_EALREADY) {
            /* The sink's refusal crossed our cancel: it Processed the
             * SrcAvail, ignores the cancel and waits for the rest by Bcopy,
             * which this call now finishes (as in the branch above). */
            *cut = 0;
            deadline_ns = 0;
            intr = false;
            continue;
        }
        if (*cut && now >= hard) {
            uw__sdp_log(s->st, UW_LOG_WARN,
                        "SDP: no answer to SrcAvailCancel within 5 s: aborting the connection");
            uw_abort(s->qp); /* no Read can reach the buffer after this */
            uw__sdp_conn_zsend_poll(c, &sent);
            r = UW_ECONNRESET;
            break;
        }
        if (uw__sdp_wait(s, POLLOUT, *cut ? hard : deadline_ns) == -EINTR)
            intr = true;
        if (s->conn != c)
            break;
    }
    revoke(s->zmr_src);
    drain_responses(s);
    if (!s->conn)
        return sent ? (ssize_t)sent : -EPIPE;
    if (r < 0)
        return sent ? (ssize_t)sent : r;
    if (*cut)
        return (ssize_t)sent;
    /* A SinkAvail crossed the SrcAvail (11.3): the rest goes into it. */
    if (sent < len)
        sent += zwrite_send(s, (const uint8_t *)buf + sent, len - sent);
    if (s->conn == c) {
        uw_sdp_stats after;
        uw__sdp_conn_stats(c, &after);
        mode_policy(s, after.zcopy_sent == before.zcopy_sent);
    }
    return (ssize_t)sent;
}

bool uw__sdp_zsink_fits(const uw_sdp_sock *s, size_t room)
{
    if (!s->conn || !s->qp || !s->zc_min || room < s->zc_min)
        return false;
    uw_sdp_params pa;
    if (uw__sdp_conn_params(s->conn, &pa) < 0 || room <= pa.local_rcv_size)
        return false;
    uw_sdp_stats st;
    uw__sdp_conn_stats(s->conn, &st);
    return st.rx_mode == UW_SDP_PIPE_MODE;
}

ssize_t uw__sdp_zsink_recv(uw_sdp_sock *s, void *buf, size_t room, uint64_t deadline_ns,
                           bool *advertised)
{
    uw_sdp_conn *c = s->conn;
    *advertised = false;
    if (!uw__sdp_zsink_fits(s, room))
        return 0;
    if (room > UW__SDP_ZSEND_MAX)
        room = UW__SDP_ZSEND_MAX;
    if (grant(s, &s->zmr_sink, buf, room,
              UW_ACCESS_LOCAL_WRITE | UW_ACCESS_REMOTE_WRITE | UW_ACCESS_REMOTE_INVALIDATE) < 0)
        return 0;
    uw_sdp_zsink z = {.addr = buf,
                      .len = (uint32_t)room,
                      .stag = uw_mr_stag(s->zmr_sink),
                      .va = (uint64_t)(uintptr_t)buf};
    if (uw__sdp_conn_zsink(c, &z) < 0) {
        revoke(s->zmr_sink);
        return 0;
    }
    *advertised = true;
    s->zc_ns = 0;
    uw__sdp_pump(s);
    uw_sdp_zsink_res res = {0, 0};
    int r;
    bool cancelled = false, intr = false;
    uint64_t hard = 0;
    for (;;) {
        r = uw__sdp_conn_zsink_poll(c, &res);
        if (r != 0)
            break;
        uint64_t now = uw__sdp_now_ns();
        if (!cancelled && (intr || (deadline_ns && now >= deadline_ns))) {
            /* SO_RCVTIMEO or a signal: revoke (9.5.5). The peer may be
             * writing, so the buffer is the peer's until it answers. */
            cancelled = true;
            hard = uw__sdp_deadline_ms(5000);
            if (uw__sdp_conn_zsink_cancel(c) == 0)
                uw__sdp_pump(s);
        }
        if (cancelled && now >= hard) {
            uw__sdp_log(s->st, UW_LOG_WARN,
                        "SDP: no answer to SinkAvailCancel within 5 s: aborting the connection");
            uw_abort(s->qp);
            r = UW_ECONNRESET;
            break;
        }
        int w = uw__sdp_wait(s, POLLIN, cancelled ? hard : deadline_ns);
        if (w == -EINTR)
            intr = true;
        if (s->conn != c) {
            r = UW_ECONNRESET;
            break;
        }
    }
    revoke(s->zmr_sink);
    if (r < 0)
        return r;
    if (res.placed)
        return res.placed;
    if (res.bcopy) {
        /* 9.5.1 rule 1: the one message that crossed it, into the same
         * buffer. */
        struct iovec v = {buf, res.bcopy < room ? res.bcopy : room};
        ssize_t n = uw__sdp_conn_recv(c, &v, 1, 0);
        uw__sdp_pump(s);
        if (n > 0)
            return n;
    }
    return intr ? -EINTR : 0;
}

bool uw__sdp_zrecv_fits(const uw_sdp_sock *s, size_t room)
{
    if (!s->conn || !s->zc_min)
        return false;
    uint32_t za = uw__sdp_conn_zavail(s->conn);
    return za && (room >= UW__SDP_ZREAD_MIN || room >= za);
}

ssize_t uw__sdp_zrecv(uw_sdp_sock *s, void *buf, size_t room, bool nb)
{
    uw_sdp_conn *c = s->conn;
    uint32_t za = c ? uw__sdp_conn_zavail(c) : 0;
    if (!za)
        return 0;
    if (nb || !uw__sdp_zrecv_fits(s, room)) {
        /* A nonblocking reader cannot lend its buffer beyond the call, and
         * a small one would take the advertisement in slivers: Bcopy. */
        if (uw__sdp_conn_force_bcopy(c) == 0)
            uw__sdp_pump(s);
        return 0;
    }
    uint32_t n = room < za ? (uint32_t)room : za;
    /* 6.1.2: a reader that posts buffers this large asks for Pipelined. */
    uw__sdp_conn_want_pipe(c, room >= s->zc_min);
    if (grant(s, &s->zmr_dst, buf, n, UW_ACCESS_LOCAL_WRITE) < 0) {
        if (uw__sdp_conn_force_bcopy(c) == 0)
            uw__sdp_pump(s);
        return 0;
    }
    uw_sdp_zread rd;
    if (uw__sdp_conn_zread(c, n, &rd) < 0) {
        revoke(s->zmr_dst);
        return 0;
    }
    s->zc_ns = 0;
    int r = post_rdma(s, UW__SDP_WRID_ZREAD, UW_WR_RDMA_READ, buf, n, s->zmr_dst, rd.to, rd.stag);
    if (r < 0) {
        uw__sdp_conn_zread_done(c, r);
        uw__sdp_pump(s);
    }
    ssize_t got;
    for (;;) {
        got = uw__sdp_conn_zread_collect(c);
        if (got != UW_EAGAIN)
            break;
        /* The Read writes into buf until it completes or the QP dies:
         * the call waits for either, whatever signals come. */
        uw__sdp_wait(s, POLLIN, 0);
        if (s->conn != c) {
            got = UW_ECONNRESET;
            break;
        }
    }
    revoke(s->zmr_dst);
    uw__sdp_pump(s); /* the RdmaRdCompl */
    return got;
}

/* A SrcAvail arrived: a blocked reader takes it; otherwise a nonblocking
 * socket refuses it at once and a blocking one after UW__SDP_ZC_WAIT_MS. */
void uw__sdp_zc_arrived(uw_sdp_sock *s)
{
    if (!s->conn || !uw__sdp_conn_zwaiting(s->conn) || s->zc_readers)
        return;
    if (s->nonblock || !s->zc_min) {
        if (uw__sdp_conn_force_bcopy(s->conn) == 0)
            uw__sdp_pump(s);
        return;
    }
    if (!s->zc_ns) {
        s->zc_ns = uw__sdp_deadline_ms(UW__SDP_ZC_WAIT_MS);
        uw__sdp_arm(s->st, s->zc_ns);
    }
}

void uw__sdp_zc_fire(uw_sdp_sock *s, uint64_t now)
{
    if (!s->zc_ns || now < s->zc_ns)
        return;
    s->zc_ns = 0;
    if (s->conn && s->qp && uw__sdp_conn_zwaiting(s->conn) &&
        uw__sdp_conn_force_bcopy(s->conn) == 0)
        uw__sdp_pump(s);
}
