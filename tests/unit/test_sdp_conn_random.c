/* The SDP connection core driven at random from both sides (sdp_pair.h):
 * sends of 1 octet to 200 KiB with MSG_OOB and MSG_MORE, reads of random
 * sizes with MSG_PEEK and MSG_OOB, TCP_NODELAY/TCP_CORK, SO_RCVBUF,
 * SO_SNDBUF, ChRcvBuf, held Send completions, random delivery, and
 * shutdown(SHUT_WR) near the end, over random buffer configurations.
 *
 * Every message is decoded on the wire just before it is delivered and
 * checked against the draft with state kept here, independently of the core:
 *   6.1.5/10.1  MSeq is 0 for the HelloAck, then one more per message;
 *   6.1.6       MSeqAck is the MSeq of the last message the sender had
 *               received when it built the message (so never ahead);
 *   6.1.3       Bufs is what the sender really had posted (the harness's
 *               count of its posted receives when it took the message);
 *   10.2/10.5   the sender's credit, recomputed from the Bufs/MSeqAck of the
 *               last message it had received (the HelloAck counted as the
 *               notes, section 3, say), is >= 1, >= 3 for ULP payload, and
 *               at exactly 1 only a payload-free Data that gives credit;
 *   10 rule 3,  no message longer than the peer's Private Buffer size as
 *   10.6        the sender may know it (a requested decrease at once, the
 *               ChRcvBufAck's size once received); the harness also checks
 *               the buffer actually posted;
 *   9.5.3/6.1.2 OOB_PRES exactly on the message whose last payload octet is
 *               the sender's urgent octet, OOB_PEND once per urgent octet, no
 *               later and no more than 65,535 octets before it;
 *   14.2        HelloAck and Data with OOB flags solicited, nothing else;
 *   8.2.1       DisConn once, after all data, only after SHUT_WR.
 * The payload must be the sender's stream, in order.
 *
 * The reader's side is compared with a model of Linux TCP's visible
 * behaviour (tcp_recvmsg, tcp_check_urg, tcp_recv_urg, tcp_inq, tcp_poll),
 * checked against real TCP on loopback: one urgent mark at a time; a new
 * mark supersedes the old, whose octet then reads as normal data unless the
 * reader stands right at it (then it is dropped); reads stop at the mark;
 * without SO_OOBINLINE the urgent octet is skipped by normal reads and
 * recv(MSG_OOB) gives it until it is read or normal reading passes the mark
 * (then EINVAL); SIOCATMARK is true when the read position is at the mark;
 * FIONREAD counts up to a hidden urgent octet ahead. Every read, MSG_PEEK
 * (equal to the read that follows it), MSG_OOB read, FIONREAD, SIOCATMARK
 * and the POLLIN/POLLPRI bits are compared with the model after every step;
 * POLLOUT against whether the next send takes anything.
 *
 * UW_TEST_SEED picks the first run's seed; UW_SDP_RANDOM_RUNS and
 * UW_SDP_RANDOM_STEPS override the run count and the steps per run. */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "sdp_pair.h"
#include "testutil.h"

#define RUNS 200
#define PLEN 1048573u /* the stream pattern's period: a prime, aligned with nothing */
#define MAXSEND (200u * 1024u)
#define MAXRECV (256u * 1024u)
#define MAXMSG (1u << 20)

static uint8_t pat[2][PLEN]; /* direction s -> 1 - s carries pat[s] repeated */
static uint8_t sbuf[MAXSEND], rbuf[MAXRECV], pbuf[MAXRECV];
static char where[200];
static bool trace; /* UW_SDP_TRACE: print every message at delivery */

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        if (!(cond)) {                                                            \
            char m_[300];                                                         \
            snprintf(m_, sizeof(m_), __VA_ARGS__);                                \
            fail_msg("%s: %s (%s:%d: %s)", where, m_, __FILE__, __LINE__, #cond); \
        }                                                                         \
    } while (0)

static void pat_copy(int s, uint64_t pos, uint8_t *out, size_t n)
{
    while (n) {
        size_t o = (size_t)(pos % PLEN), k = PLEN - o;
        if (k > n)
            k = n;
        memcpy(out, &pat[s][o], k);
        out += k;
        pos += k;
        n -= k;
    }
}

static bool pat_equal(int s, uint64_t pos, const uint8_t *p, size_t n)
{
    while (n) {
        size_t o = (size_t)(pos % PLEN), k = PLEN - o;
        if (k > n)
            k = n;
        if (memcmp(p, &pat[s][o], k))
            return false;
        p += k;
        pos += k;
        n -= k;
    }
    return true;
}

/* ---- Linux TCP's receive side, as an application sees it ----------------- */

enum { M_URG_NONE = 0, M_URG_NOTYET, M_URG_VALID, M_URG_READ };

typedef struct tcpm {
    uint64_t rcv_nxt, copied; /* octets arrived / consumed (read or skipped) */
    int urg;                  /* tp->urg_data: 0, NOTYET, VALID (octet unread), READ */
    uint64_t urg_seq;         /* position of the urgent octet */
    uint8_t urg_byte;
    bool inl; /* SO_OOBINLINE */
    bool eof; /* DisConn arrived (FIN) */
} tcpm;

/* Data arrives; with urgent, its last octet is urgent (tcp_check_urg, then
 * tcp_urg, before the data is queued). */
static void m_arrive(tcpm *m, uint32_t n, bool urgent, uint8_t last)
{
    if (urgent) {
        uint64_t ptr = m->rcv_nxt + n - 1;
        /* The reader stands on the old urgent octet, which is there: it
         * would read it as data once the mark moves, so it is dropped. */
        if (m->urg && m->urg_seq == m->copied && !m->inl && m->copied != m->rcv_nxt)
            m->copied++;
        m->urg = M_URG_VALID;
        m->urg_seq = ptr;
        m->urg_byte = last;
    }
    m->rcv_nxt += n;
}

/* tcp_recvmsg with the receive queue as one run of octets. Returns the
 * octets copied, *start the position of the first (they are contiguous:
 * the only octet ever skipped is a hidden urgent one at the start). */
static size_t m_read(tcpm *m, size_t len, bool peek, uint64_t *start)
{
    uint64_t seq = m->copied;
    size_t copied = 0;
    *start = seq;
    while (len > 0) {
        if (m->urg && m->urg_seq == seq && copied)
            break; /* a read never crosses the mark */
        if (seq >= m->rcv_nxt)
            break;
        uint64_t used = m->rcv_nxt - seq;
        if (used > len)
            used = len;
        if (m->urg && m->urg_seq >= seq && m->urg_seq - seq < used) {
            if (m->urg_seq == seq) {
                if (!m->inl) {
                    seq++;
                    used--;
                    *start = seq;
                }
            } else {
                used = m->urg_seq - seq;
            }
        }
        seq += used;
        copied += used;
        len -= used;
        if (!peek) {
            m->copied = seq;
            if (m->urg && m->copied > m->urg_seq)
                m->urg = M_URG_NONE;
        }
    }
    return copied;
}

static size_t m_inq(const tcpm *m)
{
    if (m->inl || !m->urg || m->urg_seq < m->copied || m->urg_seq >= m->rcv_nxt)
        return (size_t)(m->rcv_nxt - m->copied);
    return (size_t)(m->urg_seq - m->copied);
}

static bool m_atmark(const tcpm *m)
{
    return m->urg && m->urg_seq == m->copied;
}

static bool m_pollin(const tcpm *m)
{
    uint64_t target = 1;
    if (m->urg && m->urg_seq == m->copied && !m->inl)
        target++;
    return m->rcv_nxt - m->copied >= target || m->eof;
}

/* ---- Per-direction state ----------------------------------------------------- */

typedef struct went {
    uint32_t mseq, mseqack, value;
    uint16_t bufs;
    uint8_t mid;
} went;

typedef struct dirst { /* side s's send direction, s -> 1 - s */
    /* the sender's application */
    uint64_t snt;
    uint64_t *marks; /* urgent octets' positions, in order */
    size_t mk_n, mk_head, mk_cap;
    bool shut;
    /* the wire, as delivered */
    went *log;
    size_t log_n, log_cap;
    uint32_t next_mseq;
    uint64_t pend_pos[64]; /* OOB_PEND flags waiting for their octet */
    unsigned pend_head, pend_n;
    bool disconn;
    uint32_t limit; /* largest message the sender may send (10 rule 3, 10.6) */
    size_t ack_cur; /* the peer's log: ChRcvBufAcks taken into limit */
    uint16_t prev_bufs;
    uint32_t prev_ack;
    /* counters for the report */
    unsigned long msgs, credit1, credit2, payload_msgs, oob_msgs, partial_oob;
    /* the receiver's view, Linux TCP */
    tcpm m;
} dirst;

static struct {
    sp_pair p;
    dirst d[2];
    uint16_t hello_bufs;
    uint32_t hello_rcv_sz;
    uint32_t tx_size[2];
    unsigned long reads, peeks, oobreads, oobgot, atmarks, dropped_marks, eagain_sends;
    unsigned long chr_ok, rcvbuf_ops, pokes;
    unsigned pure_run;
} X;

static void log_add(dirst *d, const went *e)
{
    if (d->log_n == d->log_cap) {
        d->log_cap = d->log_cap ? d->log_cap * 2 : 1024;
        d->log = realloc(d->log, d->log_cap * sizeof(*d->log));
        assert_non_null(d->log);
    }
    d->log[d->log_n++] = *e;
}

static void mark_add(dirst *d, uint64_t pos)
{
    if (d->mk_n == d->mk_cap) {
        d->mk_cap = d->mk_cap ? d->mk_cap * 2 : 256;
        d->marks = realloc(d->marks, d->mk_cap * sizeof(*d->marks));
        assert_non_null(d->marks);
    }
    d->marks[d->mk_n++] = pos;
}

/* The tap: every message, just before delivery. */
static void tap(void *ud, const sp_side *from, const sp_msg *m)
{
    (void)ud;
    int s = from->idx;
    dirst *d = &X.d[s], *rv = &X.d[1 - s];
    uw_sdp_msg mm;
    int rc = uw__sdp_decode(m->data, m->len, &mm);
    CHECK(rc == 0, "side %d sent an undecodable message (%d)", s, rc);
    const uw_sdp_bsdh *h = &mm.bsdh;
    d->msgs++;
    if (trace)
        fprintf(stderr,
                "  %s: %d->%d %s flags %#x bufs %u mseq %u ack %u len %u value %u (rcvd %u posted "
                "%u)\n",
                where, s, 1 - s, uw__sdp_mid_name(h->mid), h->flags, h->bufs, h->mseq, h->mseqack,
                h->len, mm.u.value, m->rcvd_at_send, m->rq_at_send);

    /* 6.1.5 / 10.1 */
    CHECK(h->mseq == d->next_mseq, "side %d MSeq %u, want %u", s, h->mseq, d->next_mseq);
    d->next_mseq++;

    /* 6.1.6: the last message received when this one was built. */
    unsigned k = m->rcvd_at_send;
    CHECK(k <= rv->log_n, "side %d had received %u of %zu", s, k, rv->log_n);
    uint32_t want_ack = k ? rv->log[k - 1].mseq : 0;
    CHECK(h->mseqack == want_ack, "side %d MSeqAck %u, last received MSeq %u", s, h->mseqack,
          want_ack);

    /* 6.1.3 */
    CHECK(h->bufs == m->rq_at_send, "side %d Bufs %u but %u receives posted", s, h->bufs,
          m->rq_at_send);

    /* 10.2 / 10.5 at the time the sender built it. */
    uint16_t bb;
    uint32_t ba;
    if (k) {
        bb = rv->log[k - 1].bufs;
        ba = rv->log[k - 1].mseqack;
    } else {
        CHECK(s == 1, "the Connecting Peer sent before the HelloAck");
        bb = X.hello_bufs; /* notes section 3: the HelloAck uses one of them */
        ba = UINT32_MAX;
    }
    int64_t credit = (int64_t)bb - uw__sdp_seq_diff(h->mseq - 1, ba);
    bool payload = mm.payload_len > 0;
    CHECK(credit >= 1, "side %d sent MID %u MSeq %u with credit %lld", s, h->mid, h->mseq,
          (long long)credit);
    CHECK(!payload || credit >= 3, "side %d sent payload with credit %lld", s, (long long)credit);
    if (credit == 1) {
        d->credit1++;
        CHECK(h->mid == UW_SDP_DATA && !payload, "side %d sent MID %u with the last credit", s,
              h->mid);
        int64_t more = (int64_t)h->bufs - d->prev_bufs + uw__sdp_seq_diff(h->mseqack, d->prev_ack);
        CHECK(more > 0, "side %d used its last credit for an update that gives none (%lld)", s,
              (long long)more);
    } else if (credit == 2) {
        d->credit2++;
    }
    d->prev_bufs = h->bufs;
    d->prev_ack = h->mseqack;

    /* Section 10 rule 3 and 10.6: what the sender knew of our buffer size. */
    for (; d->ack_cur < k; d->ack_cur++)
        if (rv->log[d->ack_cur].mid == UW_SDP_CHRCVBUFACK)
            d->limit = rv->log[d->ack_cur].value;
    CHECK(m->len <= d->limit, "side %d sent %u octets, peer's buffers %u", s, m->len, d->limit);

    /* Reserved flag bits are sent as zero; REQ_PIPE only on Rdma*Compl. */
    CHECK(!(h->flags & ~(unsigned)(UW_SDP_OOB_PRES | UW_SDP_OOB_PEND)), "side %d flags %#x", s,
          h->flags);

    /* 14.2 */
    bool sol = h->mid == UW_SDP_HELLOACK ||
               (h->mid == UW_SDP_DATA && (h->flags & (UW_SDP_OOB_PRES | UW_SDP_OOB_PEND)));
    CHECK(m->solicited == sol, "side %d MID %u flags %#x solicited %d", s, h->mid, h->flags,
          m->solicited);

    /* No endless exchange of payload-free messages. */
    if (payload || h->mid != UW_SDP_DATA)
        X.pure_run = 0;
    else
        CHECK(++X.pure_run < 1000, "1000 payload-free Data messages in a row (credit %lld)",
              (long long)credit);
    went e = {h->mseq, h->mseqack, 0, h->bufs, h->mid};
    tcpm *tm = &d->m;
    switch (h->mid) {
    case UW_SDP_HELLOACK:
        CHECK(s == 1 && h->mseq == 0, "HelloAck from side %d MSeq %u", s, h->mseq);
        X.d[0].limit = mm.u.helloack.act_rcv_sz;
        X.d[0].prev_bufs = X.hello_bufs;
        X.d[0].prev_ack = UINT32_MAX;
        break;
    case UW_SDP_DATA:
        if (h->flags & UW_SDP_OOB_PEND) {
            CHECK(d->pend_n < 64, "too many OOB_PEND");
            d->pend_pos[(d->pend_head + d->pend_n++) % 64] = tm->rcv_nxt;
        }
        if (!payload)
            break;
        d->payload_msgs++;
        CHECK(!d->disconn, "side %d sent payload after its DisConn", s);
        CHECK(tm->rcv_nxt + mm.payload_len <= d->snt, "side %d sent more than its application", s);
        CHECK(pat_equal(s, tm->rcv_nxt, mm.payload, mm.payload_len),
              "side %d payload at %llu is not its stream", s, (unsigned long long)tm->rcv_nxt);
        uint64_t last = tm->rcv_nxt + mm.payload_len - 1;
        bool mark = d->mk_head < d->mk_n && d->marks[d->mk_head] <= last;
        if (mark)
            CHECK(d->marks[d->mk_head] == last && (h->flags & UW_SDP_OOB_PRES),
                  "side %d urgent octet at %llu not marked (message ends at %llu, flags %#x)", s,
                  (unsigned long long)d->marks[d->mk_head], (unsigned long long)last, h->flags);
        else
            CHECK(!(h->flags & UW_SDP_OOB_PRES), "side %d OOB_PRES on a normal octet", s);
        if (mark) {
            d->mk_head++;
            d->oob_msgs++;
            CHECK(d->pend_n > 0, "side %d OOB_PRES without an OOB_PEND before", s);
            uint64_t fp = d->pend_pos[d->pend_head % 64];
            d->pend_head++;
            d->pend_n--;
            CHECK(last - fp <= 65535, "side %d OOB_PEND %llu octets before its urgent octet", s,
                  (unsigned long long)(last - fp));
        }
        m_arrive(tm, mm.payload_len, mark, mm.payload[mm.payload_len - 1]);
        break;
    case UW_SDP_DISCONN:
        CHECK(!d->disconn && d->shut, "side %d DisConn twice or without SHUT_WR", s);
        CHECK(tm->rcv_nxt == d->snt, "side %d DisConn before all data (%llu of %llu)", s,
              (unsigned long long)tm->rcv_nxt, (unsigned long long)d->snt);
        CHECK(d->pend_n == 0, "side %d DisConn with OOB_PEND outstanding", s);
        d->disconn = true;
        tm->eof = true;
        break;
    case UW_SDP_CHRCVBUF:
        e.value = mm.u.value;
        if (mm.u.value < d->limit) /* 10.6: a decrease applies at once */
            d->limit = mm.u.value;
        break;
    case UW_SDP_CHRCVBUFACK:
        e.value = mm.u.value;
        break;
    default:
        CHECK(0, "side %d sent MID %u", s, h->mid);
    }
    log_add(d, &e);
}

/* ---- Random choices ------------------------------------------------------------- */

static tu_rng R;
/* Fewest receive buffers a side keeps posted: the core's floor,
 * UW_SDP_MIN_BUFS (why 4 and not the draft's 3: src/sdp/conn.h). */
static unsigned min_bufs = UW_SDP_MIN_BUFS;

static uint32_t rnd(uint32_t n)
{
    return (uint32_t)tu_rng_below(&R, n);
}

static bool chance(uint32_t one_in)
{
    return rnd(one_in) == 0;
}

static uint32_t pick_size(uint32_t lo, uint32_t hi)
{
    return tu_rng_size(&R, lo, hi);
}

static int split_iov(struct iovec *v, uint8_t *buf, size_t n)
{
    int cnt = 1 + (int)rnd(3);
    size_t off = 0;
    for (int i = 0; i < cnt; i++) {
        size_t k = i == cnt - 1 ? n - off : rnd((uint32_t)(n - off + 1));
        v[i].iov_base = buf + off;
        v[i].iov_len = k;
        off += k;
    }
    return cnt;
}

/* ---- Application calls ------------------------------------------------------------ */

static void app_send(int s)
{
    sp_side *x = &X.p.s[s];
    dirst *d = &X.d[s];
    uint32_t n = rnd(10) < 9 ? pick_size(1, 65536) : pick_size(1, MAXSEND);
    unsigned fl = 0;
    if (chance(8))
        fl |= UW_SDP_MSG_OOB;
    if (chance(8))
        fl |= UW_SDP_MSG_MORE;
    pat_copy(s, d->snt, sbuf, n);
    struct iovec v[3];
    int cnt = split_iov(v, sbuf, n);
    unsigned pb = uw__sdp_conn_poll(x->c);
    int sndbuf = uw__sdp_conn_getopt(x->c, UW_SDP_OPT_SNDBUF);
    ssize_t r = uw__sdp_conn_send(x->c, v, cnt, fl);
    bool grew = uw__sdp_conn_getopt(x->c, UW_SDP_OPT_SNDBUF) != sndbuf;
    sp_drain_tx(x);
    if (d->shut) {
        CHECK(r == UW_EPIPE, "side %d send after SHUT_WR: %zd", s, r);
        CHECK(pb & POLLOUT, "side %d: no POLLOUT after SHUT_WR", s);
        return;
    }
    if (r == UW_EAGAIN) {
        X.eagain_sends++;
        CHECK(!(pb & POLLOUT), "side %d: POLLOUT but send gave EAGAIN", s);
        return;
    }
    CHECK(r > 0 && (uint32_t)r <= n, "side %d send(%u) = %zd", s, n, r);
    /* Without POLLOUT fewer than a third of the slots are free (TCP's
     * writeable rule), and a send still fills the open slot: it takes that
     * much at most, unless the queue grew under it. */
    uint32_t slot_payload = X.tx_size[s] - UW_SDP_BSDH_LEN;
    uint64_t free_max = (uint64_t)sndbuf / X.tx_size[s] / 3 + 1;
    if (!(pb & POLLOUT) && !grew)
        CHECK((uint64_t)r <= free_max * slot_payload + (slot_payload + 1) / 2,
              "side %d: no POLLOUT, yet send took %zd", s, r);
    d->snt += (uint64_t)r;
    if (fl & UW_SDP_MSG_OOB) {
        /* As Linux: the mark goes on the last octet taken. */
        mark_add(d, d->snt - 1);
        if ((uint32_t)r < n)
            d->partial_oob++;
    }
}

/* One normal read of len octets, compared with the model; returns the core's result. */
static ssize_t app_read(int x, size_t len, unsigned flags, uint8_t *buf)
{
    sp_side *sd = &X.p.s[x];
    dirst *d = &X.d[1 - x];
    bool peek = (flags & UW_SDP_MSG_PEEK) != 0;
    struct iovec v[3];
    int cnt = split_iov(v, buf, len);
    ssize_t r = uw__sdp_conn_recv(sd->c, v, cnt, flags);
    sp_drain_tx(sd);
    uint64_t start;
    size_t n = m_read(&d->m, len, peek, &start);
    ssize_t want = n ? (ssize_t)n : d->m.eof ? 0 : UW_EAGAIN;
    if (trace)
        fprintf(stderr,
                "  %s: side %d recv(%zu, %#x) = %zd model %zd from %llu (copied %llu rcv_nxt %llu "
                "urg %d@%llu)\n",
                where, x, len, flags, r, want, (unsigned long long)start,
                (unsigned long long)d->m.copied, (unsigned long long)d->m.rcv_nxt, d->m.urg,
                (unsigned long long)d->m.urg_seq);
    CHECK(r == want, "side %d recv(%zu%s) = %zd, model %zd (copied %llu rcv_nxt %llu urg %d@%llu)",
          x, len, peek ? ", PEEK" : "", r, want, (unsigned long long)d->m.copied,
          (unsigned long long)d->m.rcv_nxt, d->m.urg, (unsigned long long)d->m.urg_seq);
    if (n)
        CHECK(pat_equal(1 - x, start, buf, n), "side %d read wrong octets at %llu", x,
              (unsigned long long)start);
    return r;
}

static void app_recv_oob(int x, unsigned flags)
{
    sp_side *sd = &X.p.s[x];
    tcpm *m = &X.d[1 - x].m;
    uint8_t b = 0;
    struct iovec v = {&b, 1 + rnd(4)};
    uint8_t big[8];
    v.iov_base = v.iov_len > 1 ? (void *)big : (void *)&b;
    ssize_t r = uw__sdp_conn_recv(sd->c, &v, 1, UW_SDP_MSG_OOB | flags);
    sp_drain_tx(sd);
    if (v.iov_len > 1)
        b = big[0];
    ssize_t want;
    /* tcp_recv_urg */
    if (m->inl || m->urg == M_URG_NONE || m->urg == M_URG_READ)
        want = UW_EINVAL;
    else if (m->urg == M_URG_VALID) {
        want = 1;
        if (!(flags & UW_SDP_MSG_PEEK))
            m->urg = M_URG_READ;
    } else
        want = m->eof ? 0 : UW_EAGAIN;
    X.oobreads++;
    CHECK(r == want, "side %d recv(MSG_OOB%s) = %zd, model %zd", x,
          (flags & UW_SDP_MSG_PEEK) ? "|PEEK" : "", r, want);
    if (r == 1) {
        X.oobgot++;
        CHECK(b == m->urg_byte, "side %d urgent octet %#x, want %#x", x, b, m->urg_byte);
    }
}

static void app_recv(int x)
{
    uint32_t len = rnd(4) ? pick_size(1, 65536) : pick_size(1, MAXRECV);
    uint32_t k = rnd(20);
    X.reads++;
    if (k < 3) {
        /* MSG_PEEK, then the same read for real: both give the same. */
        ssize_t a = app_read(x, len, UW_SDP_MSG_PEEK, pbuf);
        ssize_t b = app_read(x, len, 0, rbuf);
        CHECK(a == b, "side %d peek %zd then read %zd", x, a, b);
        if (a > 0)
            CHECK(!memcmp(pbuf, rbuf, (size_t)a), "side %d peeked other octets", x);
        X.peeks++;
    } else if (k < 6) {
        app_recv_oob(x, chance(3) ? UW_SDP_MSG_PEEK : 0);
    } else {
        app_read(x, len, 0, rbuf);
    }
}

static void app_shutdown(int s)
{
    sp_side *x = &X.p.s[s];
    CHECK(uw__sdp_conn_shutdown(x->c, SHUT_WR) == 0, "side %d shutdown", s);
    X.d[s].shut = true;
    sp_drain_tx(x);
}

static void app_misc(int s)
{
    sp_side *x = &X.p.s[s];
    int r;
    switch (rnd(6)) {
    case 0:
        r = uw__sdp_conn_setopt(x->c, UW_SDP_OPT_NODELAY, (int)rnd(2));
        CHECK(r == 0, "NODELAY");
        break;
    case 1:
        r = uw__sdp_conn_setopt(x->c, UW_SDP_OPT_CORK, chance(3));
        CHECK(r == 0, "CORK");
        break;
    case 2: {
        /* SO_RCVBUF in buffers of the current size (a 3-buffer receiver
         * stalls its peer: see min_bufs). */
        uw_sdp_params pa;
        assert_int_equal(uw__sdp_conn_params(x->c, &pa), 0);
        uint64_t v = (uint64_t)pa.local_rcv_size * (min_bufs + rnd(40)) + rnd(pa.local_rcv_size);
        r = uw__sdp_conn_setopt(x->c, UW_SDP_OPT_RCVBUF, v > INT32_MAX ? INT32_MAX : (int)v);
        CHECK(r == 0, "RCVBUF");
        X.rcvbuf_ops++;
        break;
    }
    case 3:
        r = uw__sdp_conn_setopt(x->c, UW_SDP_OPT_SNDBUF, (int)pick_size(0, 4u << 20));
        CHECK(r == 0, "SNDBUF");
        break;
    default:
        r = uw__sdp_conn_chrcvbuf(x->c, pick_size(UW_SDP_MIN_BUF, 256u * 1024u));
        if (X.d[s].shut)
            CHECK(r == UW_EINVAL, "side %d ChRcvBuf after SHUT_WR: %d", s, r);
        else
            CHECK(r == 0 || r == UW_EBUSY || r == UW_EPERM, "side %d ChRcvBuf: %d", s, r);
        if (!r)
            X.chr_ok++;
        break;
    }
    sp_drain_tx(x);
}

/* ---- Checks after every step ------------------------------------------------------- */

static void check_side(int x, bool closing)
{
    sp_side *sd = &X.p.s[x];
    tcpm *m = &X.d[1 - x].m;
    CHECK(!sd->overrun, "side %d: a message arrived with no receive posted", x);
    CHECK(!sd->too_long, "side %d: a message longer than the posted buffer", x);
    CHECK(sd->rc == 0, "side %d: on_recv failed %d (%s)", x, sd->rc,
          uw__sdp_conn_why(sd->c) ? uw__sdp_conn_why(sd->c) : "");
    int st = uw__sdp_conn_state(sd->c);
    (void)closing;
    CHECK(st == UW_SDP_S_OPEN || (X.d[0].shut && X.d[1].shut && st == UW_SDP_S_CLOSED),
          "side %d state %d", x, st);
    size_t inq = uw__sdp_conn_inq(sd->c);
    CHECK(inq == m_inq(m),
          "side %d FIONREAD %zu, model %zu (copied %llu rcv_nxt %llu urg %d@%llu inline %d)", x,
          inq, m_inq(m), (unsigned long long)m->copied, (unsigned long long)m->rcv_nxt, m->urg,
          (unsigned long long)m->urg_seq, m->inl);
    int am = uw__sdp_conn_atmark(sd->c);
    CHECK(am == (int)m_atmark(m), "side %d SIOCATMARK %d, model %d", x, am, m_atmark(m));
    if (am)
        X.atmarks++;
    unsigned pb = uw__sdp_conn_poll(sd->c);
    bool pin = m_pollin(m);
    CHECK(!!(pb & POLLIN) == pin, "side %d POLLIN %d, model %d", x, !!(pb & POLLIN), pin);
    /* The model agrees with itself: POLLIN iff a read would not be EAGAIN. */
    tcpm cp = *m;
    uint64_t start;
    bool would = m_read(&cp, 1, false, &start) > 0 || m->eof;
    CHECK(would == pin, "model: POLLIN %d but a read would %s", pin, would ? "succeed" : "fail");
    CHECK(!!(pb & POLLPRI) == (m->urg == M_URG_VALID), "side %d POLLPRI %d, model urg %d", x,
          !!(pb & POLLPRI), m->urg);
}

static void check_all(bool closing)
{
    check_side(0, closing);
    check_side(1, closing);
}

/* ---- One run ------------------------------------------------------------------------ */

/* kind 0: any sizes; 1: messages above 64 KiB both ways; 2: tiny buffers. */
static uw_sdp_conn_cfg rand_cfg(bool acc, int kind)
{
    static const uint32_t lo[3] = {UW_SDP_MIN_BUF, 65536 + 64, UW_SDP_MIN_BUF};
    static const uint32_t hi[3] = {128u * 1024u, 128u * 1024u, 200};
    uw_sdp_conn_cfg c;
    uw__sdp_conn_cfg_default(&c, acc);
    c.rcv_size = lo[kind] + rnd(hi[kind] - lo[kind] + 1);
    if (!kind)
        c.rcv_size = pick_size(UW_SDP_MIN_BUF, 128u * 1024u);
    c.tx_size = chance(3) ? c.rcv_size
                : kind    ? lo[kind] + rnd(hi[kind] - lo[kind] + 1)
                          : pick_size(UW_SDP_MIN_BUF, 128u * 1024u);
    c.rcv_bufs = (uint16_t)(min_bufs + rnd(33 - min_bufs));
    c.tx_slots = (uint16_t)(2 + rnd(15));
    /* Autotuning on in half the runs, with ceilings up to 64 above the start. */
    c.rcv_bufs_max = chance(2) ? 0 : (uint16_t)(c.rcv_bufs + rnd(65));
    c.tx_slots_max = chance(2) ? 0 : (uint16_t)(c.tx_slots + rnd(65));
    c.max_adverts = (uint16_t)(1 + rnd(8));
    return c;
}

static void free_dirs(void)
{
    for (int s = 0; s < 2; s++) {
        free(X.d[s].log);
        free(X.d[s].marks);
    }
}

static void one_run(uint64_t seed, unsigned run, unsigned steps)
{
    tu_rng_init(&R, seed);
    free_dirs();
    memset(&X.d, 0, sizeof(X.d));
    for (int s = 0; s < 2; s++) /* a fresh stream per run */
        tu_rng_fill(&R, pat[s], PLEN);
    int kind = rnd(5) < 3 ? 0 : 1 + (int)rnd(2);
    uw_sdp_conn_cfg cc = rand_cfg(false, kind), ac = rand_cfg(true, kind);
    X.tx_size[0] = cc.tx_size;
    X.tx_size[1] = ac.tx_size;
    snprintf(where, sizeof(where),
             "run %u seed %#llx setup (C: rcv %u x%u tx %u x%u; A: rcv %u x%u tx %u x%u)", run,
             (unsigned long long)seed, cc.rcv_size, cc.rcv_bufs, cc.tx_size, cc.tx_slots,
             ac.rcv_size, ac.rcv_bufs, ac.tx_size, ac.tx_slots);
    /* The Hello's Bufs and LocalRcvSz, for the tap of the HelloAck. */
    X.hello_bufs = cc.rcv_bufs;
    X.hello_rcv_sz = cc.rcv_size;
    X.d[1].limit = cc.rcv_size;
    X.d[1].next_mseq = 0;
    X.d[0].next_mseq = 1;
    assert_int_equal(sp_setup_tap(&X.p, &cc, &ac, tap, NULL), 0);
    uw_sdp_msg hm;
    assert_int_equal(uw__sdp_decode(X.p.hello, sizeof(X.p.hello), &hm), 0);
    assert_int_equal(hm.bsdh.bufs, X.hello_bufs);
    assert_int_equal(hm.u.hello.local_rcv_sz, X.hello_rcv_sz);
    for (int s = 0; s < 2; s++) {
        CHECK(uw__sdp_conn_state(X.p.s[s].c) == UW_SDP_S_OPEN, "side %d not OPEN", s);
        if (chance(3)) { /* before any traffic */
            uw__sdp_conn_setopt(X.p.s[s].c, UW_SDP_OPT_OOBINLINE, 1);
            X.d[1 - s].m.inl = true;
        }
        if (chance(3))
            uw__sdp_conn_setopt(X.p.s[s].c, UW_SDP_OPT_NODELAY, 1);
    }
    check_all(false);
    /* Each side shuts down its sending half somewhere in the last tenth. */
    unsigned shut_at[2] = {steps - 1 - rnd(steps / 10 + 1), steps - 1 - rnd(steps / 10 + 1)};
    /* Some runs favour one direction, some stall a reader for a while. */
    uint32_t send_w[2] = {1 + rnd(4), 1 + rnd(4)}, recv_w[2] = {1 + rnd(4), 1 + rnd(4)};
    for (unsigned step = 0; step < steps; step++) {
        snprintf(where, sizeof(where), "run %u seed %#llx step %u", run, (unsigned long long)seed,
                 step);
        for (int s = 0; s < 2; s++)
            if (step == shut_at[s] && !X.d[s].shut)
                app_shutdown(s);
        unsigned ops = 1 + rnd(4);
        for (unsigned i = 0; i < ops; i++) {
            int s = (int)rnd(2);
            uint32_t k = rnd(20);
            if (k < 2 * send_w[s])
                app_send(s);
            else if (k < 2 * send_w[s] + 2 * recv_w[s])
                app_recv(s);
            else if (k < 2 * send_w[s] + 2 * recv_w[s] + 2)
                app_misc(s);
            check_all(false);
        }
        for (int s = 0; s < 2; s++) {
            sp_side *x = &X.p.s[s];
            if (!x->hold_completions && chance(30))
                x->hold_completions = true;
            else if (x->hold_completions && chance(6)) {
                x->hold_completions = false;
                sp_release_completions(x);
                sp_drain_tx(x);
            }
        }
        /* The driver's poke timer (uw__sdp_conn_stalled): needed against
         * a 3-buffer peer; sides drawn independently, so that pokes do not
         * keep crossing. */
        for (int s = 0; s < 2; s++)
            if (chance(8) && uw__sdp_conn_stalled(X.p.s[s].c)) {
                CHECK(uw__sdp_conn_poke(X.p.s[s].c) == 0, "side %d poke", s);
                sp_drain_tx(&X.p.s[s]);
                X.pokes++;
            }
        if (chance(25)) {
            sp_settle(&X.p);
        } else {
            int first = (int)rnd(2);
            for (int j = 0; j < 2; j++) {
                int s = first ^ j;
                unsigned n = rnd(9);
                for (unsigned i = 0; i < n; i++)
                    if (!sp_deliver1(&X.p.s[s], &X.p.s[1 - s]))
                        break;
            }
        }
        check_all(false);
    }
    /* Closing: everything flows, both readers read to the end. */
    snprintf(where, sizeof(where), "run %u seed %#llx closing", run, (unsigned long long)seed);
    for (int s = 0; s < 2; s++)
        if (!X.d[s].shut)
            app_shutdown(s);
    bool eof[2] = {false, false};
    for (unsigned it = 0; it < 100000 && !(eof[0] && eof[1]); it++) {
        for (int s = 0; s < 2; s++) {
            sp_side *x = &X.p.s[s];
            x->hold_completions = false;
            sp_release_completions(x);
            sp_drain_tx(x);
        }
        sp_settle(&X.p);
        check_all(true);
        for (int s = 0; s < 2; s++)
            if (chance(2) && uw__sdp_conn_stalled(X.p.s[s].c)) {
                CHECK(uw__sdp_conn_poke(X.p.s[s].c) == 0, "side %d poke", s);
                sp_drain_tx(&X.p.s[s]);
                X.pokes++;
            }
        for (int x = 0; x < 2; x++) {
            if (chance(4))
                app_recv_oob(x, 0);
            for (int j = 0; j < 64; j++) {
                ssize_t r = app_read(x, rnd(2) ? MAXRECV : pick_size(1, MAXRECV), 0, rbuf);
                check_all(true);
                if (r == 0)
                    eof[x] = true;
                if (r <= 0)
                    break;
            }
        }
    }
    sp_settle(&X.p);
    check_all(true);
    if (!(eof[0] && eof[1]))
        for (int s = 0; s < 2; s++) {
            uw_sdp_stats st;
            uw_sdp_params pa;
            uw__sdp_conn_stats(X.p.s[s].c, &st);
            uw__sdp_conn_params(X.p.s[s].c, &pa);
            fprintf(stderr,
                    "side %d: state %d credit %u peer credit %u bufs %u posted %u outq %zu "
                    "idle %d rcv size %u remote %u, RCVBUF %d SNDBUF %d cork %d nodelay %d\n",
                    s, uw__sdp_conn_state(X.p.s[s].c), st.send_credit, st.peer_credit,
                    st.bufs_posted, X.p.s[s].rq_n, uw__sdp_conn_outq(X.p.s[s].c),
                    uw__sdp_conn_tx_idle(X.p.s[s].c), pa.local_rcv_size, pa.remote_rcv_size,
                    uw__sdp_conn_getopt(X.p.s[s].c, UW_SDP_OPT_RCVBUF),
                    uw__sdp_conn_getopt(X.p.s[s].c, UW_SDP_OPT_SNDBUF),
                    uw__sdp_conn_getopt(X.p.s[s].c, UW_SDP_OPT_CORK),
                    uw__sdp_conn_getopt(X.p.s[s].c, UW_SDP_OPT_NODELAY));
        }
    for (int s = 0; s < 2; s++) {
        dirst *d = &X.d[s];
        sp_side *x = &X.p.s[s];
        CHECK(eof[s], "side %d never read end of stream (copied %llu of %llu, arrived %llu)", s,
              (unsigned long long)X.d[1 - s].m.copied, (unsigned long long)X.d[1 - s].snt,
              (unsigned long long)X.d[1 - s].m.rcv_nxt);
        CHECK(d->m.copied == d->snt && d->m.rcv_nxt == d->snt,
              "direction %d: sent %llu, arrived %llu, consumed %llu", s, (unsigned long long)d->snt,
              (unsigned long long)d->m.rcv_nxt, (unsigned long long)d->m.copied);
        CHECK(d->mk_head == d->mk_n, "direction %d: urgent marks left", s);
        CHECK(uw__sdp_conn_state(x->c) == UW_SDP_S_CLOSED, "side %d state %d at the end", s,
              uw__sdp_conn_state(x->c));
        CHECK(uw__sdp_conn_llp_action(x->c) == UW_SDP_LLP_DISCONNECT, "side %d llp %d", s,
              uw__sdp_conn_llp_action(x->c));
        uw_sdp_stats st;
        uw__sdp_conn_stats(x->c, &st);
        CHECK(st.graceful, "side %d not graceful", s);
        CHECK(st.sent == d->snt, "side %d stats sent %llu", s, (unsigned long long)st.sent);
        CHECK(st.received == X.d[1 - s].snt, "side %d stats received %llu", s,
              (unsigned long long)st.received);
        CHECK(st.oob_sent == d->mk_n, "side %d oob_sent %llu of %zu", s,
              (unsigned long long)st.oob_sent, d->mk_n);
        CHECK(x->out_n == 0 && x->pd_n == 0, "side %d messages left", s);
    }
    sp_free(&X.p);
}

static unsigned env_uint(const char *name, unsigned def)
{
    const char *e = getenv(name);
    return e && *e ? (unsigned)strtoul(e, NULL, 0) : def;
}

static void test_random(void **st)
{
    (void)st;
    uint64_t seed = tu_seed(0x5d9c0a17u);
    trace = getenv("UW_SDP_TRACE") != NULL;
    min_bufs = env_uint("UW_SDP_RANDOM_MIN_BUFS", 4);
    if (min_bufs < 3 || min_bufs > 32)
        min_bufs = 4;
    unsigned runs = env_uint("UW_SDP_RANDOM_RUNS", RUNS);
    unsigned steps_max = env_uint("UW_SDP_RANDOM_STEPS", 0);
    unsigned long steps_total = 0;
    unsigned long long octets = 0, msgs = 0, c1 = 0, c2 = 0, oob = 0, poob = 0;
    for (unsigned run = 0; run < runs; run++) {
        uint64_t rs = seed + run;
        tu_rng pick;
        tu_rng_init(&pick, rs * 0x9E3779B97F4A7C15ull + 1);
        unsigned steps = steps_max ? steps_max : 1500 + (unsigned)tu_rng_below(&pick, 2500);
        one_run(rs, run, steps);
        steps_total += steps;
        for (int s = 0; s < 2; s++) {
            octets += X.d[s].snt;
            msgs += X.d[s].msgs;
            c1 += X.d[s].credit1;
            c2 += X.d[s].credit2;
            oob += X.d[s].mk_n;
            poob += X.d[s].partial_oob;
        }
    }
    free_dirs();
    memset(&X.d, 0, sizeof(X.d));
    fprintf(stderr,
            "# %u runs, %lu steps: %llu octets, %llu messages (%llu at credit 1, %llu at 2), "
            "%llu urgent (%llu on partial sends); %lu reads, %lu peeks, %lu OOB reads (%lu got "
            "the octet), %lu at mark; %lu ChRcvBuf, %lu SO_RCVBUF, %lu EAGAIN sends, %lu pokes\n",
            runs, steps_total, octets, msgs, c1, c2, oob, poob, X.reads, X.peeks, X.oobreads,
            X.oobgot, X.atmarks, X.chr_ok, X.rcvbuf_ops, X.eagain_sends, X.pokes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
