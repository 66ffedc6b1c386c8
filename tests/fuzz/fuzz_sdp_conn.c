/* Fuzz target: the SDP connection core's receive side (src/sdp/conn*.c),
 * Read Zcopy (9.2) and Write Zcopy (9.3) in both roles and the mode
 * changes (11, 12), two cores joined in memory by tests/unit/sdp_pair.h,
 * with messages from a peer that breaks the rules mixed into the real
 * peer's. The harness stands for the verbs layer as test_sdp_zcopy.c and
 * test_sdp_wzcopy.c do: a registry of each side's zero-copy buffers, RDMA
 * Reads served from it and RDMA Writes placed in it, STags invalidated by
 * Sends with Invalidate and revoked (the buffer freed, for ASan) when
 * zsend_poll or zsink_poll reports the end.
 *
 * Input:  b0  bits 0-1 Connecting Peer's receive buffer size (37, 100, 1024,
 *             70000), bits 2-3 the Accepting Peer's, bit 4/5 SO_OOBINLINE
 *             on side 0/1, bit 6/7 TCP_NODELAY on side 0/1
 *         b1  bits 0-3 side 0's receive buffers - 3, bits 4-7 side 1's
 *         b2  bits 0-1 send buffer size (37, 256, 4096, 70000) of side 0,
 *             bits 2-3 of side 1, bits 4-7 send slots - 2
 *         b3  bit 0/1 cfg.zcopy_sink on side 0/1
 *         then operations until the input ends: an octet o, side = o & 1,
 *         operation (o >> 1) % OP_COUNT, then its arguments:
 *   RAW      u8 h, u16 n, n octets: a message of n octets (at most the
 *            posted buffer's length) into side's next posted receive; with
 *            h & 0x80 the completion claims (h & 0x7f) + 1 more octets,
 *            without it h & 0x40 makes it a Send with Invalidate of side's
 *            current STag (h & 0x20) or of another (h & 0x1f away)
 *   MSG      u8 mid selector, u8 flags, u8 bufs mode, u16 bufs, s8 MSeq
 *            delta, s8 MSeqAck delta, u32 value, u16 payload length, the
 *            extended header's other octets and payload from the input: a
 *            well-formed message (Len right unless flags bit 3 is set; then
 *            Len comes from the value) with MSeq = next expected + delta,
 *            MSeqAck = side's last sent + delta, Bufs = the peer's real
 *            posted count or the raw value (bufs mode bit 0). Bufs mode bit
 *            1: a Send with Invalidate, of side's current STag (bit 2) or of
 *            another (bits 5-7 away); bit 3: a SrcAvail names the other
 *            side's current STag, at its VA + bufs; a SinkAvail the other
 *            side's current sink buffer, at its VA + bufs, with the
 *            NonDiscards of that side's last SinkAvail; an RdmaWrCompl is a
 *            Send with Invalidate of side's sink STag; a ModeChange asks
 *            for a move the receiver allows where there is one (value bit
 *            1: S=1 to Combined if its send half is Buffered; value bit 0:
 *            Pipelined rather than Buffered from Combined); bit 4: value
 *            at most side's current zero-copy length (RdmaRdCompl Len;
 *            RdmaWrCompl Len: its sink buffer's)
 *   SEND     u16 len (x 4 with the flags' bit 2), u8 flags (OOB, MORE)
 *   RECV     u16 len, u8 flags (OOB, PEEK)
 *   SHUT     u8 how      CHRCVBUF u32 size     SETOPT u8 opt, u32 value
 *   DELIVER  u8 n: up to n messages from side to the other
 *   SETTLE   deliver both ways until nothing moves
 *   HOLD     toggle side's held Send completions (releasing them)
 *   ABORT    the application aborts          LLPDOWN u8 errs: the LLP goes
 *   FAILMEM  u8 k: the (k % 8 + 1)th allocation from now fails
 *   QUERY    poll, FIONREAD, SIOCATMARK, SO_ERROR, outq, stats, zwaiting,
 *            zread_collect, mode_hint, zwrite_avail, zwrite_inflight
 *   ZSEND    u16 z: a zero-copy send of z octets (z & 0x8000: (z & 0x7fff)
 *            x 32, up to 1 MiB) of side's stream, from a registered copy
 *            with a fresh STag; one at a time
 *   ZPOLL    zsend_poll; at the end the STag is revoked and the copy freed
 *   ZREAD    u32 len: an RDMA Read of min(len, zavail) octets (at least 1),
 *            left in flight
 *   ZDONE    the Read in flight completes: the octets from the other side's
 *            registration, or UW_ERDMAP_STAG where it has no valid one
 *   FORCEBCOPY  force_bcopy
 *   ZCANCEL  zsend_cancel (9.5.4)
 *   ZSINK    u32 v: zsink of a receive buffer of side's receive buffer size
 *            + 1 + (v & 0xffff) octets (v & 0x80000000: of v & 0x3ffff),
 *            registered under a fresh STag; one at a time
 *   ZSPOLL   zsink_poll; at the end bcopy octets are read into the buffer
 *            with recv(), then the STag is revoked and the buffer freed
 *   ZSCANCEL zsink_cancel (9.5.5)
 *   ZWRITE   u32 v: zwrite of v % zwrite_avail + 1 octets of side's stream
 *            (all of zwrite_avail with v & 0x80000000); the RDMA Write is
 *            placed in the other side's sink buffer before side's next
 *            message is taken, or fails as a bad STag where it has no valid
 *            one (zwrite_done(false) at once); left in flight otherwise
 *   ZWDONE   u8 f: the oldest Write in flight completes: zwrite_done(ok),
 *            failed when f & 7 == 7
 *   SETMODE  u8 m: set_mode(m % 4) (3: an invalid mode)
 *   RXCOMB   rx_combined                     WANTPIPE u8 on: want_pipe(on & 1)
 *
 * Checked (abort on violation):
 *   - on_recv returns 0, UW_EPROTO or UW_EMSGSIZE; after an error the core
 *     is in ERROR, and once Send completions are released it has asked for
 *     an abortive LLP close (directly or after its AbortConn completed);
 *   - until a message is injected (RAW, MSG), the two real cores never
 *     disagree: no delivery fails, no Send finds no receive or one too
 *     short, a SrcAvail carries payload exactly when the receiving half is
 *     not Pipelined;
 *   - the real peer's payload is exactly its application's stream; a
 *     zero-copy send is part of it: its SrcAvail carries the first octets
 *     and, past the octets the sink Read (st.zcopy_sent), Data the rest;
 *     a zero-copy send cut short (cancelled, or crossed by a SinkAvail)
 *     holds the octets zsend_poll reports sent, and the stream goes on
 *     after them; octets placed by RDMA Write are the stream's next octets
 *     at their RdmaWrCompl (one per Write, in order, Len the Write's, with
 *     Invalidate of the STag written);
 *   - what the application reads is a subsequence, in order, of the payload
 *     octets delivered or injected (nothing made up, reordered or repeated,
 *     only urgent octets left out); a peek is one too; recv(MSG_OOB) gives
 *     the last octet of some OOB_PRES message; so are the octets read into
 *     the sink buffer with recv() after zsink_poll reported a bcopy end;
 *     the octets it reports placed are those of the real peer's Write
 *     (the stream's next octets at its RdmaWrCompl): nothing delivered
 *     before that RdmaWrCompl is read after it;
 *   - a Read of the real peer's advertisement starts where the last one
 *     ended, after its SrcAvail's payload (9.2 step 2b), and gives the
 *     stream's next octets: nothing delivered before it is read after it;
 *     until a message is injected, it finds the buffer still registered
 *     while the source's connection is open;
 *   - zsend_poll ends with 1 and every octet (fewer only after
 *     zsend_cancel or a SinkAvail reached the source), or with an error
 *     once the connection failed, never stays in process after the
 *     connection ended; send() takes nothing meanwhile, nor while a Write
 *     is in flight; zread_done's outcome is what zread_collect gives;
 *   - zsink_poll ends exactly once per advertisement (EINVAL otherwise),
 *     with 1 (placed and bcopy not both, placed within the buffer) or an
 *     error once the connection failed, never stays outstanding after the
 *     connection ended; zsink refuses while one is outstanding. Until a
 *     message is injected, while the sink is open: an RDMA Write finds the
 *     sink's advertised buffer still registered (no Write lands after its
 *     advertisement ended: the harness revokes the STag at the end), its
 *     RdmaWrCompl arrives while the advertisement is outstanding, and the
 *     advertisement ends with placed = the Write's length when a Write
 *     went into it, with placed 0 otherwise (no written octet is lost);
 *   - counters: Bufs posted equals the receives the harness holds, octets
 *     sent equal what send(), zwrite and ended zero-copy sends took,
 *     rdma_write_bytes what zwrite took, zcopy_sent at least that,
 *     rdma_read_bytes what completed Reads took, zwrite_inflight the
 *     Writes not yet done, FIONREAD never exceeds what arrived; zavail is
 *     0 without cfg.zcopy_sink;
 *   - no crash, leak or undefined behaviour (sanitizers).
 * UW_FUZZ_DEBUG prints every operation. */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../unit/sdp_pair.h"
#include "common.h"
#include "uwarp/error.h"

#define MAX_OPS 3000
#define MAX_IO (256u * 1024u)
#define LOG_CAP (4u << 20)
#define ZRECS 8      /* zero-copy sends a side's stream check keeps track of */
#define NSPOOF 16    /* STags of injected SrcAvails remembered per side */
#define ZMAX 0xFFFE0 /* longest zero-copy send ZSEND makes */
#define NWREC 64     /* RDMA Writes a side's stream check waits to see reported */

enum {
    OP_RAW,
    OP_MSG,
    OP_SEND,
    OP_RECV,
    OP_SHUT,
    OP_CHRCVBUF,
    OP_SETOPT,
    OP_DELIVER,
    OP_SETTLE,
    OP_HOLD,
    OP_ABORT,
    OP_LLPDOWN,
    OP_FAILMEM,
    OP_QUERY,
    OP_ZSEND,
    OP_ZPOLL,
    OP_ZREAD,
    OP_ZDONE,
    OP_FORCEBCOPY,
    OP_ZCANCEL,
    OP_ZSINK,
    OP_ZSPOLL,
    OP_ZSCANCEL,
    OP_ZWRITE,
    OP_ZWDONE,
    OP_SETMODE,
    OP_RXCOMB,
    OP_WANTPIPE,
    OP_COUNT
};

static const uint32_t rcv_sizes[4] = {UW_SDP_MIN_BUF, 100, 1024, 70000};
static const uint32_t tx_sizes[4] = {UW_SDP_MIN_BUF, 256, 4096, 70000};
static const uint8_t mids[] = {
    UW_SDP_DATA,
    UW_SDP_DATA,
    UW_SDP_DATA,
    UW_SDP_HELLO,
    UW_SDP_HELLOACK,
    UW_SDP_DISCONN,
    UW_SDP_ABORTCONN,
    UW_SDP_SENDSM,
    UW_SDP_RDMAWRCOMPL,
    UW_SDP_RDMARDCOMPL,
    UW_SDP_MODECHANGE,
    UW_SDP_SRCAVAILCANCEL,
    UW_SDP_SINKAVAILCANCEL,
    UW_SDP_SINKCANCELACK,
    UW_SDP_CHRCVBUF,
    UW_SDP_CHRCVBUFACK,
    UW_SDP_SUSPCOMM,
    UW_SDP_SUSPCOMMACK,
    UW_SDP_SRCAVAIL,
    UW_SDP_SINKAVAIL,
    0x40,
    0x7F,
    0x20,
    0xFC,
};

typedef struct side_log { /* payload octets offered to a side, in order */
    uint8_t *p;
    size_t n, cap;
    size_t rd;       /* octets of p the reader is past */
    uint64_t base;   /* octets dropped from the front (all read) */
    bool lost;       /* octets were dropped unread: the check gave up */
    uint8_t urg[32]; /* bitset: values an urgent octet had */
    bool any_urg;
} side_log;

/* One zero-copy send, from ZSEND until its end was reported and the
 * stream check has stepped over the octets the sink Read. */
typedef struct zrec {
    uint8_t *buf; /* the registered copy; NULL once revoked and freed */
    uint32_t stag, len;
    uint64_t va;
    uint64_t pos;     /* stream position of its first octet */
    uint64_t zc_base; /* the sender's st.zcopy_sent at the start */
    uint64_t read;    /* octets the sink Read, once ended */
    uint64_t skip;    /* octets the stream check stepped over */
    uint32_t pay;     /* octets its SrcAvail carried, once delivered */
    uint32_t rd_done; /* octets the peer's checked Reads took */
    uint64_t log_end; /* the reader's log position after the SrcAvail's payload */
    uint64_t sk_base; /* the sender's st.sinkavail_received at the start */
    bool sk_held;     /* ... and it may hold a SinkAvail (Pipelined, some came) */
    bool valid;       /* neither invalidated nor revoked */
    bool ended, seen, skipped;
    bool cancel; /* zsend_cancel took it */
} zrec;

typedef struct zside {
    zrec r[ZRECS]; /* FIFO: only the newest may be in process */
    unsigned head, n;
    /* Data Sink: the RDMA Read in flight */
    bool rd_busy, rd_checked;
    uw_sdp_zread rd;
    uint8_t *dst;
    /* STags named by injected SrcAvails: a Read of those is not the real
     * peer's advertisement even where the STag is its registration. */
    uint32_t spoof[NSPOOF];
    unsigned nspoof;
    bool spoof_all;
    uint64_t rd_bytes; /* octets our completed Reads took */
} zside;

/* Data Sink (Write Zcopy): side's advertised receive buffer, registered
 * for remote Write and remote invalidate from zsink() until zsink_poll
 * reports the end; the STag stays known after that. */
typedef struct ksink {
    uint8_t *buf; /* NULL: none registered */
    uint32_t len, stag;
    uint64_t va;
    bool valid;       /* neither invalidated nor revoked */
    bool live;        /* zsink took it and zsink_poll has not ended it */
    unsigned writes;  /* RDMA Writes placed in it */
    bool at0;         /* the last one at its start */
    uint32_t wlen;    /* ... of wlen octets */
    uint64_t wpos;    /* ... from the writer's stream position wpos */
    bool reported;    /* the real peer's RdmaWrCompl for a Write into it came */
    bool spoof;       /* an injected RdmaWrCompl reached the side meanwhile */
    uint32_t nd;      /* NonDiscards of the side's last SinkAvail */
    uint64_t log_end; /* the reader's log position at that RdmaWrCompl */
} ksink;

/* Data Source (Write Zcopy): Writes whose RdmaWrCompl the stream check has
 * not seen yet (FIFO), and those zwrite_done has not ended. */
typedef struct wrec {
    uint64_t pos; /* stream position of the first octet */
    uint32_t len, stag;
} wrec;

typedef struct wside {
    wrec r[NWREC];
    unsigned head, n;
    unsigned inflight;
    uint64_t bytes; /* octets zwrite took */
} wside;

static struct {
    sp_pair p;
    fz_failalloc fa;
    side_log log[2];
    uint64_t app_sent[2]; /* octets send() took */
    uint64_t wire_pos[2]; /* payload octets of side s delivered */
    uint32_t last_in[2];  /* MSeq of the last message given to side s */
    uint32_t last_out[2]; /* MSeq of the last message side s sent that left its queue */
    bool failed[2];       /* on_recv gave side s an error */
    bool llp_down;
    bool zsink[2];
    bool injected; /* a message was injected: the cores may disagree now */
    zside z[2];
    ksink k[2];
    wside w[2];
    uint32_t next_stag;
    uint8_t io[MAX_IO];
    uint8_t msg[80000];
} F;

static uint8_t pat(int s, uint64_t pos)
{
    uint64_t x = pos * 0x9E3779B97F4A7C15ull + (uint64_t)s * 0xD1B54A32D192ED03ull;
    return (uint8_t)(x >> 56);
}

static void log_add(int s, const uint8_t *p, size_t n)
{
    side_log *l = &F.log[s];
    if (l->n + n > LOG_CAP && l->rd) { /* no check looks behind the reader */
        memmove(l->p, l->p + l->rd, l->n - l->rd);
        l->n -= l->rd;
        l->base += l->rd;
        l->rd = 0;
    }
    if (l->n + n > LOG_CAP) {
        n = LOG_CAP - l->n;
        l->lost = true;
    }
    if (l->n + n > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->n + n)
            cap *= 2;
        l->p = realloc(l->p, cap);
        FZ_CHECK(l->p != NULL);
        l->cap = cap;
    }
    memcpy(l->p + l->n, p, n);
    l->n += n;
}

/* Where the next octet logged for side s goes, counted from the start. */
static uint64_t log_pos(int s)
{
    return F.log[s].base + F.log[s].n;
}

/* The octets before pos were delivered before what the reader took by an
 * RDMA Read at pos: they may no longer be read. */
static void log_skip_to(int s, uint64_t pos)
{
    side_log *l = &F.log[s];
    if (pos > l->base + l->rd)
        l->rd = pos - l->base < l->n ? (size_t)(pos - l->base) : l->n;
}

static zrec *zat(int s, unsigned i)
{
    return &F.z[s].r[(F.z[s].head + i) % ZRECS];
}

static zrec *zlast(int s)
{
    return F.z[s].n ? zat(s, F.z[s].n - 1) : NULL;
}

/* Side s's zero-copy send in process (zsend_poll has not ended it). */
static zrec *zlive(int s)
{
    zrec *z = zlast(s);
    return z && !z->ended ? z : NULL;
}

static zrec *zfind(int s, uint32_t stag)
{
    for (unsigned i = 0; i < F.z[s].n; i++)
        if (zat(s, i)->stag == stag)
            return zat(s, i);
    return NULL;
}

static void zretire(int s)
{
    zside *zs = &F.z[s];
    while (zs->n && zs->r[zs->head].ended && zs->r[zs->head].skipped) {
        zs->head = (zs->head + 1) % ZRECS;
        zs->n--;
    }
}

/* A STag for a Send with Invalidate to side s: its current one (the
 * newest of its zero-copy send's and its sink buffer's), or one `away` past
 * it (never issued, or issued later). */
static uint32_t pick_stag(int s, bool cur, unsigned away)
{
    const zrec *z = zlast(s);
    uint32_t a = z ? z->stag : 0, b = F.k[s].buf ? F.k[s].stag : 0;
    uint32_t stag = a > b ? a : b;
    if (!stag)
        stag = F.next_stag;
    return cur ? stag : stag + 1 + away;
}

/* The engine invalidates before it delivers, whatever SDP then makes of
 * the message. */
static void invalidate(int s, uint32_t stag)
{
    zrec *z = zfind(s, stag);
    if (z)
        z->valid = false;
    if (F.k[s].buf && F.k[s].stag == stag)
        F.k[s].valid = false;
}

static void fill_pat(int s, uint64_t pos, uint8_t *dst, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = pat(s, pos + i);
}

static void spoof_add(int s, uint32_t stag)
{
    zside *zs = &F.z[s];
    for (unsigned i = 0; i < zs->nspoof; i++)
        if (zs->spoof[i] == stag)
            return;
    if (zs->nspoof < NSPOOF)
        zs->spoof[zs->nspoof++] = stag;
    else
        zs->spoof_all = true;
}

static bool spoofed(int s, uint32_t stag)
{
    const zside *zs = &F.z[s];
    for (unsigned i = 0; i < zs->nspoof; i++)
        if (zs->spoof[i] == stag)
            return true;
    return zs->spoof_all;
}

/* The octets the sink Read from a zero-copy send never cross the wire: once
 * the stream check is past its SrcAvail's payload, the next payload of s
 * continues after them. The sink's RdmaRdCompls (st.zcopy_sent) count them,
 * and no more can come once the send carries payload again (SendSm seen,
 * or ended). */
static void zskip(int s)
{
    for (unsigned i = 0; i < F.z[s].n; i++) {
        zrec *z = zat(s, i);
        if (z->skipped)
            continue;
        if (!z->seen || F.wire_pos[s] != z->pos + z->pay)
            break;
        if (z->ended) {
            z->skip = z->read;
        } else {
            uw_sdp_stats st;
            uw__sdp_conn_stats(F.p.s[s].c, &st);
            z->skip = st.zcopy_sent - z->zc_base;
        }
        F.wire_pos[s] += z->skip;
        z->skipped = true;
    }
    zretire(s);
}

/* The payload the core would see in this message, if it decodes. */
static void offer(int s, const uint8_t *m, uint32_t len)
{
    uw_sdp_msg d;
    if (uw__sdp_decode(m, len, &d) < 0)
        return;
    if (d.payload_len)
        log_add(s, d.payload, d.payload_len);
    if (d.payload_len && (d.bsdh.flags & UW_SDP_OOB_PRES)) {
        uint8_t b = d.payload[d.payload_len - 1];
        F.log[s].urg[b >> 3] |= (uint8_t)(1u << (b & 7));
        F.log[s].any_urg = true;
    }
}

/* Side s's connection is open and its LLP up. */
static bool up(int s)
{
    return !F.llp_down && uw__sdp_conn_state(F.p.s[s].c) == UW_SDP_S_OPEN;
}

/* The real peer's RdmaWrCompl (9.3 step 2): the Write it reports took the
 * stream's next octets, which the sink counts as read at once. */
static void wr_reported(int s, const uw_sdp_msg *d, const sp_msg *m)
{
    wside *ws = &F.w[s];
    FZ_CHECK(ws->n > 0); /* one per Write */
    wrec w = ws->r[ws->head];
    ws->head = (ws->head + 1) % NWREC;
    ws->n--;
    FZ_CHECK(m->inv && m->inv_stag == w.stag && d->u.value == w.len);
    zskip(s);
    FZ_CHECK(F.wire_pos[s] == w.pos); /* after everything sent before the Write */
    F.wire_pos[s] += w.len;
    ksink *k = &F.k[1 - s];
    if (k->buf && k->stag == w.stag) {
        if (!F.injected && up(1 - s)) /* reported while it is advertised */
            FZ_CHECK(k->valid && k->live);
        k->reported = true;
        k->log_end = log_pos(1 - s);
    }
}

/* Every real message, just before delivery. */
static void tap(void *ud, const sp_side *from, const sp_msg *m)
{
    (void)ud;
    int s = from->idx;
    uw_sdp_msg d;
    FZ_CHECK(uw__sdp_decode(m->data, m->len, &d) == 0); /* the core builds valid messages */
    F.last_out[s] = d.bsdh.mseq;
    F.last_in[1 - s] = d.bsdh.mseq;
    /* 9.2 step 3, 9.3 step 2: only RdmaRdCompl and RdmaWrCompl invalidate. */
    if (m->inv)
        FZ_CHECK(d.bsdh.mid == UW_SDP_RDMARDCOMPL || d.bsdh.mid == UW_SDP_RDMAWRCOMPL);
    if (d.bsdh.mid == UW_SDP_RDMAWRCOMPL)
        wr_reported(s, &d, m);
    if (m->inv)
        invalidate(1 - s, m->inv_stag);
    if (d.bsdh.mid == UW_SDP_SINKAVAIL) { /* our sink buffer, as zsink gave it */
        ksink *k = &F.k[s];
        FZ_CHECK(d.payload_len == 0);
        if (d.u.avail.stag == k->stag)
            FZ_CHECK(d.u.avail.len == k->len && d.u.avail.va == k->va);
        k->nd = d.u.avail.non_discards;
    }
    if (d.payload_len || d.bsdh.mid == UW_SDP_SRCAVAIL) /* (none in Pipelined Mode) */
        zskip(s);
    zrec *z = NULL;
    if (d.bsdh.mid == UW_SDP_SRCAVAIL) {
        z = zfind(s, d.u.avail.stag);
        FZ_CHECK(z && !z->seen);
        FZ_CHECK(d.u.avail.len == z->len && d.u.avail.va == z->va);
        FZ_CHECK(F.wire_pos[s] == z->pos); /* after what was queued before, whole */
        FZ_CHECK(d.payload_len < z->len);  /* 11.2 */
        if (!F.injected && up(1 - s)) {    /* 11.2: payload; 11.3: none */
            uw_sdp_stats rs;
            uw__sdp_conn_stats(F.p.s[1 - s].c, &rs);
            FZ_CHECK((d.payload_len == 0) == (rs.rx_mode == UW_SDP_PIPE_MODE));
        }
        z->seen = true;
        z->pay = d.payload_len;
    }
    for (uint32_t i = 0; i < d.payload_len; i++)
        FZ_CHECK(d.payload[i] == pat(s, F.wire_pos[s] + i));
    F.wire_pos[s] += d.payload_len;
    offer(1 - s, m->data, m->len);
    if (z)
        z->log_end = log_pos(1 - s);
}

static void check_rc(int s, int rc)
{
    if (rc < 0)
        FZ_DEBUG("  side %d: on_recv %d (%s)\n", s, rc,
                 uw__sdp_conn_why(F.p.s[s].c) ? uw__sdp_conn_why(F.p.s[s].c) : "-");
    FZ_CHECK(rc == 0 || rc == UW_EPROTO || rc == UW_EMSGSIZE);
    if (rc < 0) {
        F.failed[s] = true;
        FZ_CHECK(uw__sdp_conn_state(F.p.s[s].c) == UW_SDP_S_ERROR);
    }
}

/* A message into side s's next posted receive, as the driver reports it;
 * with inv, a Send with Invalidate of stag. */
static void inject(int s, const uint8_t *m, uint32_t n, uint32_t claimed, bool inv, uint32_t stag)
{
    sp_side *x = &F.p.s[s];
    if (!x->rq_n || F.llp_down)
        return;
    uw_sdp_post p = x->rq[x->rq_head];
    if (n > p.len)
        n = p.len;
    if (claimed < n)
        claimed = n;
    x->rq_head = (x->rq_head + 1) % SP_MAXQ;
    x->rq_n--;
    F.injected = true;
    memcpy(p.addr, m, n);
    if (claimed == n)
        offer(s, m, n);
    uw_sdp_msg d;
    if (uw__sdp_decode(m, n, &d) == 0)
        F.last_in[s] = d.bsdh.mseq;
    /* As the core will decode it: beyond n the buffer still holds an older
     * message, maybe the real peer's SrcAvail. */
    if (claimed <= p.len && uw__sdp_decode(p.addr, claimed, &d) == 0) {
        if (d.bsdh.mid == UW_SDP_SRCAVAIL)
            spoof_add(s, d.u.avail.stag);
        if (d.bsdh.mid == UW_SDP_RDMAWRCOMPL && F.k[s].live)
            F.k[s].spoof = true; /* what it reports placed is not the real peer's */
    }
    if (inv)
        invalidate(s, stag);
    x->rcvd_msgs++;
    int rc = inv ? uw__sdp_conn_on_recv_inv(x->c, p.id, claimed, stag)
                 : uw__sdp_conn_on_recv(x->c, p.id, claimed);
    FZ_DEBUG("  inject side %d: %u octets (claimed %u) into %u%s -> %d\n", s, n, claimed, p.id,
             inv ? " with Invalidate" : "", rc);
    check_rc(s, rc);
    sp_drain_tx(x);
}

static uint32_t last_sent(int s)
{
    sp_side *x = &F.p.s[s];
    if (x->out_n) {
        const sp_msg *m = &x->out[(x->out_head + x->out_n - 1) % SP_MAXQ];
        uw_sdp_msg d;
        if (uw__sdp_decode(m->data, m->len, &d) == 0)
            return d.bsdh.mseq;
    }
    return F.last_out[s];
}

static void put16(uint8_t *p, uint32_t v)
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

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* The Mode field of a ModeChange side s's modes allow (Figures 26, 27). */
static uint8_t legal_mode(int s, uint32_t value)
{
    uw_sdp_stats st;
    uw__sdp_conn_stats(F.p.s[s].c, &st);
    if ((value & 2) && st.tx_mode == UW_SDP_BUFF_MODE) /* 12.2: S=1, from the sink */
        return 0x80 | UW_SDP_COMB_MODE << 4;
    if (st.rx_mode == UW_SDP_COMB_MODE)
        return (uint8_t)(((value & 1) ? UW_SDP_PIPE_MODE : UW_SDP_BUFF_MODE) << 4);
    return UW_SDP_COMB_MODE << 4;
}

static void op_msg(int s, fz_in *in)
{
    sp_side *x = &F.p.s[s];
    uint8_t sel = fz_u8(in), flags = fz_u8(in), bmode = fz_u8(in);
    uint16_t braw = fz_u16(in);
    int8_t dseq = (int8_t)fz_u8(in), dack = (int8_t)fz_u8(in);
    uint32_t value = fz_u32(in);
    uint16_t plen = fz_u16(in);
    uint8_t mid = sel >= 0xF0 ? (uint8_t)(sel << 4 | sel >> 4) : mids[sel % sizeof(mids)];
    if (bmode & 0x10) { /* a Len the Data Source (the Sink, for RdmaWrCompl) may accept */
        const zrec *z = zlast(s);
        uint32_t lim = z ? z->len : 65536u;
        if (mid == UW_SDP_RDMAWRCOMPL)
            lim = F.k[s].buf ? F.k[s].len : 65536u;
        value %= 1u + lim;
    }
    int ext = uw__sdp_ext_len(mid);
    if (ext < 0)
        ext = 0;
    if (!uw__sdp_mid_has_payload(mid) && !(flags & 0x08))
        plen = 0;
    uint32_t cap = x->rq_n ? x->rq[x->rq_head].len : 0;
    if (UW_SDP_BSDH_LEN + (uint32_t)ext + plen > cap)
        plen = cap > UW_SDP_BSDH_LEN + (uint32_t)ext
                   ? (uint16_t)(cap - UW_SDP_BSDH_LEN - (uint32_t)ext)
                   : 0;
    uint32_t len = UW_SDP_BSDH_LEN + (uint32_t)ext + plen;
    uint8_t *m = F.msg;
    m[0] = mid;
    m[1] = flags & 0xF7; /* bit 3 steers the target */
    uint16_t bufs = (bmode & 1) ? braw : (uint16_t)F.p.s[1 - s].rq_n;
    put16(m + 2, bufs);
    put32(m + 4, (flags & 0x08) ? value : len);
    put32(m + 8, F.last_in[s] + 1 + (uint32_t)(int32_t)dseq);
    put32(m + 12, last_sent(s) + (uint32_t)(int32_t)dack);
    size_t k = (size_t)ext;
    const uint8_t *e = fz_take(in, &k);
    memset(m + 16, 0, (size_t)ext);
    if (k)
        memcpy(m + 16, e, k);
    if (ext == 4 && mid != UW_SDP_MODECHANGE)
        put32(m + 16, value); /* RWCH, RRCH, CRBH, CRBAH */
    if (mid == UW_SDP_SRCAVAIL || mid == UW_SDP_SINKAVAIL)
        put32(m + 16, value);
    if (mid == UW_SDP_SRCAVAIL && (bmode & 8)) { /* the real peer's buffer */
        const zrec *z = zlast(1 - s);
        put32(m + 20, z ? z->stag : F.next_stag);
        put64(m + 24, (z ? z->va : 0) + braw);
    }
    if (mid == UW_SDP_SINKAVAIL && (bmode & 8)) { /* the real sink's buffer */
        const ksink *ks = &F.k[1 - s];
        put32(m + 20, ks->buf ? ks->stag : F.next_stag);
        put64(m + 24, (ks->buf ? ks->va : 0) + braw);
        put32(m + 32, ks->nd);
    }
    if (mid == UW_SDP_MODECHANGE && (bmode & 8))
        m[16] = legal_mode(s, value);
    bool inv = (bmode & 2) != 0;
    uint32_t stag = pick_stag(s, (bmode & 4) != 0, bmode >> 5);
    if (mid == UW_SDP_RDMAWRCOMPL && (bmode & 8)) { /* names side's sink buffer */
        inv = true;
        stag = F.k[s].stag ? F.k[s].stag : F.next_stag;
    }
    k = plen;
    const uint8_t *pl = fz_take(in, &k);
    if (k)
        memcpy(m + 16 + ext, pl, k);
    for (size_t i = k; i < plen; i++)
        m[16 + (size_t)ext + i] = (uint8_t)(i * 7 + 1);
    FZ_DEBUG("  msg side %d: mid %#x flags %#x bufs %u len %u payload %u\n", s, mid, m[1], bufs,
             len, plen);
    inject(s, m, len, len, inv, stag);
}

/* Is a[0..n) a subsequence of the log from its read position? Commits the
 * position unless peek. */
static bool subseq(int s, const uint8_t *a, size_t n, bool peek)
{
    side_log *l = &F.log[s];
    size_t j = l->rd;
    for (size_t i = 0; i < n; i++) {
        while (j < l->n && l->p[j] != a[i])
            j++;
        if (j >= l->n)
            return l->lost; /* maybe one of those dropped */
        j++;
    }
    if (!peek)
        l->rd = j;
    return true;
}

static void op_recv(int s, fz_in *in)
{
    sp_side *x = &F.p.s[s];
    size_t len = fz_u16(in) + 1u;
    uint8_t fl = fz_u8(in);
    unsigned flags = (fl & 1 ? UW_SDP_MSG_OOB : 0) | (fl & 2 ? UW_SDP_MSG_PEEK : 0);
    struct iovec v[2] = {{F.io, len / 2}, {F.io + len / 2, len - len / 2}};
    ssize_t r = uw__sdp_conn_recv(x->c, v, (fl & 4) ? 2 : 1, flags);
    sp_drain_tx(x);
    FZ_DEBUG("  recv side %d: %zu flags %#x -> %zd\n", s, len, flags, r);
    FZ_CHECK(r <= (ssize_t)len);
    if (r <= 0)
        return;
    if (flags & UW_SDP_MSG_OOB) {
        FZ_CHECK(r == 1);
        FZ_CHECK(F.log[s].any_urg && (F.log[s].urg[F.io[0] >> 3] & (1u << (F.io[0] & 7))));
        return;
    }
    FZ_CHECK(subseq(s, F.io, (size_t)r, (flags & UW_SDP_MSG_PEEK) != 0));
}

static void op_send(int s, fz_in *in)
{
    sp_side *x = &F.p.s[s];
    size_t len = fz_u16(in);
    uint8_t fl = fz_u8(in);
    if (fl & 4)
        len *= 4;
    if (len > MAX_IO)
        len = MAX_IO;
    unsigned flags = (fl & 1 ? UW_SDP_MSG_OOB : 0) | (fl & 2 ? UW_SDP_MSG_MORE : 0);
    for (size_t i = 0; i < len; i++)
        F.io[i] = pat(s, F.app_sent[s] + i);
    struct iovec v = {F.io, len};
    ssize_t r = uw__sdp_conn_send(x->c, &v, 1, flags);
    sp_drain_tx(x);
    FZ_DEBUG("  send side %d: %zu flags %#x -> %zd\n", s, len, flags, r);
    FZ_CHECK(r <= (ssize_t)len);
    if (zlive(s) || F.w[s].inflight) /* they own the stream until they end */
        FZ_CHECK(r <= 0);
    if (r > 0)
        F.app_sent[s] += (uint64_t)r;
}

static void op_zsend(int s, fz_in *in)
{
    sp_side *x = &F.p.s[s];
    zside *zs = &F.z[s];
    uint16_t v = fz_u16(in);
    uint32_t len = (v & 0x8000) ? (uint32_t)(v & 0x7fff) << 5 : v;
    if (zlive(s)) {
        uw_sdp_zsrc again = {.addr = F.io, .len = 1 + len % MAX_IO, .stag = 1, .va = 0};
        int rc = uw__sdp_conn_zsend(x->c, &again);
        FZ_DEBUG("  zsend side %d: %u while one is in process -> %d\n", s, again.len, rc);
        FZ_CHECK(rc < 0);
        return;
    }
    if (zs->n == ZRECS)
        return;
    zrec *z = zat(s, zs->n);
    memset(z, 0, sizeof(*z));
    z->buf = malloc(len ? len : 1);
    FZ_CHECK(z->buf != NULL);
    for (uint32_t i = 0; i < len; i++)
        z->buf[i] = pat(s, F.app_sent[s] + i);
    z->len = len;
    z->stag = F.next_stag++;
    z->va = (uint64_t)z->stag << 32 | 0x3000; /* not the address: Reads must use the VA */
    z->pos = F.app_sent[s];
    z->valid = true;
    uw_sdp_stats st;
    uw__sdp_conn_stats(x->c, &st);
    z->zc_base = st.zcopy_sent;
    z->sk_base = st.sinkavail_received;
    z->sk_held = st.tx_mode == UW_SDP_PIPE_MODE && st.sinkavail_received > 0;
    uw_sdp_zsrc src = {.addr = z->buf, .len = len, .stag = z->stag, .va = z->va};
    int rc = uw__sdp_conn_zsend(x->c, &src);
    FZ_DEBUG("  zsend side %d: %u octets stag %#x -> %d\n", s, len, z->stag, rc);
    if (rc < 0) {
        free(z->buf);
        z->buf = NULL;
        return;
    }
    FZ_CHECK(rc == 0 && len > 0);
    zs->n++;
    sp_drain_tx(x);
}

/* A SrcAvail of side s naming stag is on the wire, not yet delivered. */
static bool srcavail_queued(int s, uint32_t stag)
{
    const sp_side *x = &F.p.s[s];
    for (unsigned i = 0; i < x->out_n; i++) {
        const sp_msg *m = &x->out[(x->out_head + i) % SP_MAXQ];
        uw_sdp_msg d;
        if (uw__sdp_decode(m->data, m->len, &d) == 0 && d.bsdh.mid == UW_SDP_SRCAVAIL &&
            d.u.avail.stag == stag)
            return true;
    }
    return false;
}

static void op_zcancel(int s)
{
    sp_side *x = &F.p.s[s];
    zrec *z = zlive(s);
    int rc = uw__sdp_conn_zsend_cancel(x->c);
    FZ_DEBUG("  zsend_cancel side %d -> %d\n", s, rc);
    if (!z) {
        FZ_CHECK(rc == UW_EINVAL);
        return;
    }
    FZ_CHECK(rc == 0 || rc == UW_EALREADY);
    if (rc == 0)
        z->cancel = true;
    sp_drain_tx(x);
}

static void op_zpoll(int s)
{
    sp_side *x = &F.p.s[s];
    zrec *z = zlive(s);
    uint64_t sent = UINT64_MAX;
    int rc = uw__sdp_conn_zsend_poll(x->c, &sent);
    FZ_DEBUG("  zsend_poll side %d -> %d, sent %llu\n", s, rc, (unsigned long long)sent);
    if (!z) {
        FZ_CHECK(rc == UW_EINVAL);
        return;
    }
    int state = uw__sdp_conn_state(x->c);
    FZ_CHECK(sent <= z->len);
    if (rc == 0) { /* a connection that ended can never finish it */
        FZ_CHECK(state == UW_SDP_S_OPEN);
        return;
    }
    uw_sdp_stats st;
    uw__sdp_conn_stats(x->c, &st);
    z->read = st.zcopy_sent - z->zc_base;
    FZ_CHECK(z->read <= sent);
    if (rc == 1) {
        /* Cut short only by the revocation (9.5.4) or a crossing SinkAvail
         * (11.3); the stream goes on after what it sent. */
        if (sent < z->len)
            FZ_CHECK(z->cancel || z->sk_held || st.sinkavail_received > z->sk_base);
        F.app_sent[s] += sent;
    } else {
        FZ_CHECK(rc < 0 && (state == UW_SDP_S_ERROR || state == UW_SDP_S_CLOSED));
        /* Nothing more can go: what it counted is what its messages
         * carried. */
        FZ_CHECK(st.sent >= F.app_sent[s] && st.sent - F.app_sent[s] <= z->len);
        F.app_sent[s] = st.sent;
    }
    FZ_CHECK(z->read <= z->len);
    if (!z->seen && !srcavail_queued(s, z->stag)) {
        /* Never advertised (revoked or crossed while queued), or lost
         * with the LLP: it adds nothing to the wire. */
        z->seen = true;
        z->pay = 0;
        z->log_end = log_pos(1 - s);
    }
    if (z->skipped)
        FZ_CHECK(z->skip == z->read);
    z->ended = true;
    z->valid = false;
    free(z->buf);
    z->buf = NULL;
    zretire(s);
}

static void op_zread(int s, fz_in *in)
{
    sp_side *x = &F.p.s[s];
    zside *zs = &F.z[s];
    uint32_t len = fz_u32(in);
    uint32_t za = uw__sdp_conn_zavail(x->c);
    uw_sdp_zread rd;
    if (zs->rd_busy || !za) {
        FZ_CHECK(za == 0 || !zs->rd_busy); /* one at a time */
        FZ_CHECK(uw__sdp_conn_zread(x->c, 1, &rd) == UW_EAGAIN);
        return;
    }
    FZ_CHECK(uw__sdp_conn_zread(x->c, za + 1, &rd) == UW_EINVAL);
    uint32_t k = len < za ? len : za;
    if (!k)
        k = 1;
    FZ_CHECK(uw__sdp_conn_zread(x->c, k, &zs->rd) == 0);
    FZ_DEBUG("  zread side %d: %u of %u: stag %#x to %#llx\n", s, k, za, zs->rd.stag,
             (unsigned long long)zs->rd.to);
    FZ_CHECK(zs->rd.len == k);
    zrec *z = zfind(1 - s, zs->rd.stag);
    zs->rd_checked = z && !spoofed(s, zs->rd.stag);
    if (zs->rd_checked) { /* the real peer's advertisement */
        FZ_CHECK(z->seen);
        FZ_CHECK(zs->rd.to == z->va + z->pay + z->rd_done); /* 9.2 step 2b */
        FZ_CHECK(k <= z->len - z->pay - z->rd_done);
    }
    /* No registration is longer: a longer Read fails without a buffer. */
    zs->dst = k <= ZMAX ? malloc(k) : NULL;
    zs->rd_busy = true;
}

/* The Read in flight completes, as the peer's engine serves it. */
static void zdone(int s)
{
    sp_side *x = &F.p.s[s];
    zside *zs = &F.z[s];
    if (!zs->rd_busy)
        return;
    const uw_sdp_zread *rd = &zs->rd;
    zrec *z = zfind(1 - s, rd->stag);
    int64_t n = UW_ERDMAP_STAG;
    if (z && z->valid && rd->to >= z->va && rd->to - z->va <= z->len &&
        rd->len <= z->len - (rd->to - z->va)) {
        FZ_CHECK(zs->dst != NULL);
        memcpy(zs->dst, z->buf + (rd->to - z->va), rd->len);
        n = rd->len;
    }
    /* The source keeps its buffer registered until the sink reported. */
    if (zs->rd_checked && !F.injected && up(1 - s))
        FZ_CHECK(n > 0);
    uw__sdp_conn_zread_done(x->c, n);
    ssize_t k = uw__sdp_conn_zread_collect(x->c);
    FZ_DEBUG("  zread_done side %d: %lld -> %zd\n", s, (long long)n, k);
    FZ_CHECK(k == n || (n > 0 && k == UW_ECONNRESET && uw__sdp_conn_state(x->c) == UW_SDP_S_ERROR));
    if (k > 0)
        zs->rd_bytes += (uint64_t)k;
    if (k > 0 && zs->rd_checked) {
        for (ssize_t i = 0; i < k; i++)
            FZ_CHECK(zs->dst[i] == pat(1 - s, z->pos + z->pay + z->rd_done + (uint64_t)i));
        z->rd_done += (uint32_t)k;
        log_skip_to(s, z->log_end);
    }
    FZ_CHECK(uw__sdp_conn_zread_collect(x->c) == 0);
    free(zs->dst);
    zs->dst = NULL;
    zs->rd_busy = false;
    sp_drain_tx(x);
}

/* ---- Write Zcopy (9.3) ---------------------------------------------------- */

static void op_zsink(int s, fz_in *in)
{
    sp_side *x = &F.p.s[s];
    ksink *k = &F.k[s];
    uint32_t v = fz_u32(in);
    uw_sdp_params pa;
    uint32_t rs = uw__sdp_conn_params(x->c, &pa) == 0 ? pa.local_rcv_size : UW_SDP_MIN_BUF;
    uint32_t len = (v & 0x80000000u) ? (v & 0x3ffffu) : rs + 1 + (v & 0xffffu);
    if (k->live) {
        uint8_t one = 0;
        uw_sdp_zsink again = {.addr = &one, .len = len, .stag = 1, .va = 0};
        int rc = uw__sdp_conn_zsink(x->c, &again);
        FZ_DEBUG("  zsink side %d: %u while one is outstanding -> %d\n", s, len, rc);
        FZ_CHECK(rc < 0);
        return;
    }
    uint32_t nd = k->nd;
    memset(k, 0, sizeof(*k));
    k->nd = nd;
    k->buf = malloc(len ? len : 1);
    FZ_CHECK(k->buf != NULL);
    memset(k->buf, 0xe5, len ? len : 1);
    k->len = len;
    k->stag = F.next_stag++;
    k->va = (uint64_t)k->stag << 32 | 0x5000; /* not the address: Writes must use the VA */
    k->valid = true;
    uw_sdp_zsink z = {.addr = k->buf, .len = len, .stag = k->stag, .va = k->va};
    int rc = uw__sdp_conn_zsink(x->c, &z);
    FZ_DEBUG("  zsink side %d: %u octets (buffers %u) stag %#x -> %d\n", s, len, rs, k->stag, rc);
    if (rc < 0) {
        free(k->buf);
        k->buf = NULL;
        k->valid = false;
        return;
    }
    FZ_CHECK(rc == 0 && len > rs); /* 9.5.1: larger than our receive buffers */
    k->live = true;
    sp_drain_tx(x);
}

/* zsink_poll reported the end of side s's advertisement with r. */
static void zsink_ended(int s, const uw_sdp_zsink_res *r)
{
    sp_side *x = &F.p.s[s];
    ksink *k = &F.k[s];
    FZ_CHECK(!(r->placed && r->bcopy) && r->placed <= k->len);
    /* The one Write of the real peer, at the start, reported by its own
     * RdmaWrCompl. */
    bool real = k->writes == 1 && k->at0 && k->reported && !k->spoof && k->wlen == r->placed;
    if (r->placed) {
        if (!F.injected)
            FZ_CHECK(real);
        if (real) { /* the stream's next octets: nothing before is read after */
            for (uint32_t i = 0; i < r->placed; i++)
                FZ_CHECK(k->buf[i] == pat(1 - s, k->wpos + i));
            log_skip_to(s, k->log_end);
        }
    } else if (!F.injected) {
        FZ_CHECK(k->writes == 0); /* no octet written into it is lost */
    }
    if (r->bcopy) { /* 9.5.1 rule 1: that message, into the same buffer */
        struct iovec v = {k->buf, r->bcopy < k->len ? r->bcopy : k->len};
        ssize_t n = uw__sdp_conn_recv(x->c, &v, 1, 0);
        FZ_DEBUG("  recv side %d into the sink buffer: %zu -> %zd\n", s, v.iov_len, n);
        FZ_CHECK(n <= (ssize_t)v.iov_len);
        if (n > 0)
            FZ_CHECK(subseq(s, k->buf, (size_t)n, false));
    }
}

static void op_zspoll(int s)
{
    sp_side *x = &F.p.s[s];
    ksink *k = &F.k[s];
    uw_sdp_zsink_res r = {UINT32_MAX, UINT32_MAX};
    int rc = uw__sdp_conn_zsink_poll(x->c, &r);
    FZ_DEBUG("  zsink_poll side %d -> %d, placed %u bcopy %u\n", s, rc, r.placed, r.bcopy);
    if (!k->live) { /* once per advertisement */
        FZ_CHECK(rc == UW_EINVAL);
        return;
    }
    int state = uw__sdp_conn_state(x->c);
    if (rc == 0) { /* a connection that ended can never finish it */
        FZ_CHECK(state == UW_SDP_S_OPEN);
        return;
    }
    if (rc < 0)
        FZ_CHECK(state == UW_SDP_S_ERROR);
    else
        FZ_CHECK(rc == 1);
    if (rc == 1)
        zsink_ended(s, &r);
    /* The driver revokes the STag: no Write may land in it any more. */
    k->live = false;
    k->valid = false;
    free(k->buf);
    k->buf = NULL;
    sp_drain_tx(x);
}

static void op_zscancel(int s)
{
    sp_side *x = &F.p.s[s];
    int rc = uw__sdp_conn_zsink_cancel(x->c);
    FZ_DEBUG("  zsink_cancel side %d -> %d\n", s, rc);
    FZ_CHECK(rc == 0 || rc == UW_EAGAIN);
    if (!F.k[s].live)
        FZ_CHECK(rc == UW_EAGAIN);
    sp_drain_tx(x);
}

/* zwrite, and the RDMA Write as the peer's engine places it, before side
 * s's next message is taken (the driver posts it before it pumps). */
static void op_zwrite(int s, fz_in *in)
{
    sp_side *x = &F.p.s[s];
    wside *ws = &F.w[s];
    uint32_t v = fz_u32(in);
    uint32_t av = uw__sdp_conn_zwrite_avail(x->c);
    uw_sdp_zwrite wr;
    if (!av) {
        FZ_CHECK(uw__sdp_conn_zwrite(x->c, 1, &wr) == UW_EAGAIN);
        return;
    }
    FZ_CHECK(!zlive(s)); /* the zero-copy send owns the stream until it ends */
    if (ws->n == NWREC)
        return;
    FZ_CHECK(uw__sdp_conn_zwrite(x->c, 0, &wr) == UW_EINVAL);
    FZ_CHECK(uw__sdp_conn_zwrite(x->c, av + 1, &wr) == UW_EINVAL);
    uint32_t n = (v & 0x80000000u) ? av : v % av + 1;
    FZ_CHECK(uw__sdp_conn_zwrite(x->c, n, &wr) == 0 && wr.len == n);
    uint64_t pos = F.app_sent[s];
    F.app_sent[s] += n; /* the octets count as sent */
    ws->bytes += n;
    ksink *k = &F.k[1 - s];
    uint64_t off = wr.to - k->va;
    bool ok = k->buf && k->valid && wr.stag == k->stag && wr.to >= k->va && off <= k->len &&
              n <= k->len - off;
    FZ_DEBUG("  zwrite side %d: %u of %u: stag %#x to %#llx -> %s\n", s, n, av, wr.stag,
             (unsigned long long)wr.to, ok ? "placed" : "bad STag");
    /* The real sink's advertisement, at its start, still registered. */
    if (!F.injected && up(1 - s))
        FZ_CHECK(ok && off == 0);
    if (!ok) { /* a remote access error: the Write fails, the QP with it */
        uw__sdp_conn_zwrite_done(x->c, false);
        sp_drain_tx(x);
        return;
    }
    fill_pat(s, pos, k->buf + off, n);
    k->writes++;
    k->at0 = off == 0;
    k->wlen = n;
    k->wpos = pos;
    ws->r[(ws->head + ws->n) % NWREC] = (wrec){.pos = pos, .len = n, .stag = wr.stag};
    ws->n++;
    ws->inflight++;
    sp_drain_tx(x);
}

/* The oldest Write in flight completes. */
static void zwdone(int s, bool ok)
{
    sp_side *x = &F.p.s[s];
    if (!F.w[s].inflight)
        return;
    F.w[s].inflight--;
    uw__sdp_conn_zwrite_done(x->c, ok);
    FZ_DEBUG("  zwrite_done side %d: %s\n", s, ok ? "ok" : "failed");
    sp_drain_tx(x);
}

static void check_side(int s)
{
    sp_side *x = &F.p.s[s];
    uw_sdp_stats st;
    uw__sdp_conn_stats(x->c, &st);
    /* (A Send longer than its receive took the receive without the core
     * hearing of it: the DDP error that closes the LLP.) */
    if (!x->too_long)
        FZ_CHECK(st.bufs_posted == x->rq_n);
    const zrec *z = zlive(s);
    if (z) /* counted as its messages carry it, or all at its end */
        FZ_CHECK(st.sent >= F.app_sent[s] && st.sent - F.app_sent[s] <= z->len);
    else
        FZ_CHECK(st.sent == F.app_sent[s]);
    if (!F.zsink[s])
        FZ_CHECK(uw__sdp_conn_zavail(x->c) == 0);
    FZ_CHECK(st.rdma_write_bytes == F.w[s].bytes);
    FZ_CHECK(st.zcopy_sent >= st.rdma_write_bytes);
    FZ_CHECK(st.rdma_read_bytes == F.z[s].rd_bytes);
    FZ_CHECK(uw__sdp_conn_zwrite_inflight(x->c) == F.w[s].inflight);
    FZ_CHECK(uw__sdp_conn_inq(x->c) <= st.received);
    if (x->rc) { /* an error from a real delivery */
        check_rc(s, x->rc);
        FZ_CHECK(F.injected); /* two real cores never disagree */
        x->rc = 0;
    }
    if (F.failed[s])
        FZ_CHECK(uw__sdp_conn_state(x->c) == UW_SDP_S_ERROR);
}

static void llp_down(uint8_t e)
{
    static const int errs[4] = {0, UW_ECONNRESET, UW_ETIMEDOUT, UW_ETERM_RECEIVED};
    for (int s = 0; s < 2; s++) {
        sp_side *x = &F.p.s[s];
        if (x->out_n)
            F.last_out[s] = last_sent(s);
        while (x->out_n) { /* what was on the wire is lost */
            free(x->out[x->out_head].data);
            x->out_head = (x->out_head + 1) % SP_MAXQ;
            x->out_n--;
        }
        uw__sdp_conn_llp_closed(x->c, errs[(e >> (2 * s)) & 3]);
    }
    F.llp_down = true;
}

/* A Send with no receive posted, or longer than the one posted (the
 * injected peer can fool a sender about both), is a DDP error: the QP
 * Terminates and the LLP goes (the harness dropped the message). */
static bool ddp_error(void)
{
    if (F.llp_down)
        return true;
    for (int i = 0; i < 2; i++)
        if (F.p.s[i].overrun || F.p.s[i].too_long) {
            FZ_CHECK(F.injected); /* the real peer keeps to its credits and sizes */
            llp_down(i ? 0x0c : 0x03);
            return true;
        }
    return false;
}

/* One message from side s, unless the LLP is gone. */
static bool deliver1(int s)
{
    if (ddp_error())
        return false;
    bool moved = sp_deliver1(&F.p.s[s], &F.p.s[1 - s]);
    return !ddp_error() && moved;
}

/* sp_settle, stopping at a DDP error. */
static void settle(void)
{
    for (int i = 0; i < (1 << 20); i++) {
        sp_drain_tx(&F.p.s[0]);
        sp_drain_tx(&F.p.s[1]);
        bool a = deliver1(0), b = deliver1(1);
        if (!a && !b)
            return;
    }
}

static void run_op(fz_in *in)
{
    uint8_t o = fz_u8(in);
    int s = o & 1;
    sp_side *x = &F.p.s[s];
    switch ((o >> 1) % OP_COUNT) {
    case OP_RAW: {
        uint8_t h = fz_u8(in);
        size_t n = fz_u16(in);
        const uint8_t *b = fz_take(in, &n);
        uint32_t claimed = (uint32_t)n + ((h & 0x80) ? (h & 0x7fu) + 1u : 0u);
        bool inv = (h & 0xc0) == 0x40;
        uint32_t stag = pick_stag(s, (h & 0x20) != 0, h & 0x1fu);
        if (x->rq_n && claimed <= x->rq[x->rq_head].len)
            inject(s, b, (uint32_t)n, claimed, inv, stag);
        else if (x->rq_n && (h & 0x80))
            inject(s, b, (uint32_t)n, claimed, inv, stag); /* longer than the buffer: EMSGSIZE */
        break;
    }
    case OP_MSG:
        op_msg(s, in);
        break;
    case OP_SEND:
        op_send(s, in);
        break;
    case OP_RECV:
        op_recv(s, in);
        break;
    case OP_SHUT: {
        static const int how[3] = {SHUT_RD, SHUT_WR, SHUT_RDWR};
        int rc = uw__sdp_conn_shutdown(x->c, how[fz_u8(in) % 3]);
        FZ_CHECK(rc == 0 || rc == UW_ENOTCONN);
        sp_drain_tx(x);
        break;
    }
    case OP_CHRCVBUF: {
        int rc = uw__sdp_conn_chrcvbuf(x->c, fz_u32(in) % 200000u);
        FZ_CHECK(rc == 0 || rc == UW_EBUSY || rc == UW_EPERM || rc == UW_EINVAL);
        sp_drain_tx(x);
        break;
    }
    case OP_SETOPT: {
        uint8_t opt = fz_u8(in);
        uint32_t v = fz_u32(in);
        if (opt & 0x80) /* mostly small values */
            v %= 1u << (opt & 0x1f);
        (void)uw__sdp_conn_setopt(x->c, opt % 8, (int)v);
        (void)uw__sdp_conn_getopt(x->c, (opt >> 3) % 8);
        sp_drain_tx(x);
        break;
    }
    case OP_DELIVER: {
        unsigned n = fz_u8(in) % 16u;
        for (unsigned i = 0; i < n; i++)
            if (!deliver1(s))
                break;
        break;
    }
    case OP_SETTLE:
        settle();
        break;
    case OP_HOLD:
        x->hold_completions = !x->hold_completions;
        if (!x->hold_completions) {
            sp_release_completions(x);
            sp_drain_tx(x);
        }
        break;
    case OP_ABORT:
        uw__sdp_conn_abort(x->c);
        sp_drain_tx(x);
        break;
    case OP_LLPDOWN:
        if (!F.llp_down)
            llp_down(fz_u8(in));
        break;
    case OP_FAILMEM:
        F.fa.fail_at = F.fa.count + 1 + fz_u8(in) % 8u;
        break;
    case OP_ZSEND:
        op_zsend(s, in);
        break;
    case OP_ZPOLL:
        op_zpoll(s);
        break;
    case OP_ZREAD:
        op_zread(s, in);
        break;
    case OP_ZDONE:
        zdone(s);
        break;
    case OP_FORCEBCOPY: {
        int rc = uw__sdp_conn_force_bcopy(x->c);
        FZ_DEBUG("  force_bcopy side %d -> %d\n", s, rc);
        FZ_CHECK(rc == 0 || rc == UW_EAGAIN);
        sp_drain_tx(x);
        break;
    }
    case OP_ZCANCEL:
        op_zcancel(s);
        break;
    case OP_ZSINK:
        op_zsink(s, in);
        break;
    case OP_ZSPOLL:
        op_zspoll(s);
        break;
    case OP_ZSCANCEL:
        op_zscancel(s);
        break;
    case OP_ZWRITE:
        op_zwrite(s, in);
        break;
    case OP_ZWDONE:
        zwdone(s, (fz_u8(in) & 7) != 7);
        break;
    case OP_SETMODE: {
        uint8_t md = fz_u8(in) % 4;
        int rc = uw__sdp_conn_set_mode(x->c, md);
        FZ_DEBUG("  set_mode side %d: %u -> %d\n", s, md, rc);
        FZ_CHECK(rc == 0 || rc == UW_EINVAL || rc == UW_ENOTCONN || rc == UW_EPERM);
        if (md > UW_SDP_PIPE_MODE)
            FZ_CHECK(rc == UW_EINVAL);
        sp_drain_tx(x);
        break;
    }
    case OP_RXCOMB: {
        int rc = uw__sdp_conn_rx_combined(x->c);
        FZ_DEBUG("  rx_combined side %d -> %d\n", s, rc);
        FZ_CHECK(rc == 0 || rc == UW_ENOTCONN || rc == UW_EPERM);
        sp_drain_tx(x);
        break;
    }
    case OP_WANTPIPE:
        uw__sdp_conn_want_pipe(x->c, (fz_u8(in) & 1) != 0);
        sp_drain_tx(x);
        break;
    default: {
        unsigned pb = uw__sdp_conn_poll(x->c);
        (void)pb;
        (void)uw__sdp_conn_atmark(x->c);
        (void)uw__sdp_conn_take_error(x->c);
        (void)uw__sdp_conn_outq(x->c);
        (void)uw__sdp_conn_tx_idle(x->c);
        (void)uw__sdp_conn_why(x->c);
        uw_sdp_params pa;
        (void)uw__sdp_conn_params(x->c, &pa);
        (void)uw__sdp_conn_zwaiting(x->c);
        (void)uw__sdp_conn_mode_hint(x->c);
        (void)uw__sdp_conn_zwrite_avail(x->c);
        FZ_CHECK(uw__sdp_conn_zread_collect(x->c) == (F.z[s].rd_busy ? UW_EAGAIN : 0));
        break;
    }
    }
    ddp_error();
    check_side(0);
    check_side(1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    uint8_t b0 = fz_u8(&in), b1 = fz_u8(&in), b2 = fz_u8(&in), b3 = fz_u8(&in);
    memset(&F.log, 0, sizeof(F.log));
    memset(F.z, 0, sizeof(F.z));
    memset(F.k, 0, sizeof(F.k));
    memset(F.w, 0, sizeof(F.w));
    F.injected = false;
    F.next_stag = 0x5a000100;
    memset(F.app_sent, 0, sizeof(F.app_sent));
    memset(F.wire_pos, 0, sizeof(F.wire_pos));
    memset(F.last_in, 0, sizeof(F.last_in));
    memset(F.last_out, 0, sizeof(F.last_out));
    memset(F.failed, 0, sizeof(F.failed));
    F.llp_down = false;
    fz_failalloc_init(&F.fa, 0);
    uw_sdp_conn_cfg cfg[2];
    for (int s = 0; s < 2; s++) {
        uw__sdp_conn_cfg_default(&cfg[s], s == 1);
        cfg[s].rcv_size = rcv_sizes[(b0 >> (2 * s)) & 3];
        cfg[s].rcv_bufs = (uint16_t)(UW_SDP_MIN_BUFS + ((b1 >> (4 * s)) & 15));
        cfg[s].tx_size = tx_sizes[(b2 >> (2 * s)) & 3];
        cfg[s].tx_slots = (uint16_t)(2 + (b2 >> 4));
        cfg[s].zcopy_sink = F.zsink[s] = (b3 >> s) & 1;
        cfg[s].alloc = &F.fa.a;
    }
    FZ_CHECK(sp_setup_tap(&F.p, &cfg[0], &cfg[1], tap, NULL) == 0);
    for (int s = 0; s < 2; s++) {
        FZ_CHECK(uw__sdp_conn_state(F.p.s[s].c) == UW_SDP_S_OPEN);
        if (b0 & (0x10 << s))
            uw__sdp_conn_setopt(F.p.s[s].c, UW_SDP_OPT_OOBINLINE, 1);
        if (b0 & (0x40 << s))
            uw__sdp_conn_setopt(F.p.s[s].c, UW_SDP_OPT_NODELAY, 1);
    }
    for (unsigned i = 0; i < MAX_OPS && fz_left(&in); i++)
        run_op(&in);
    /* Reads and Writes in flight end; completions come back; a core that
     * failed has asked for the abort. */
    for (int s = 0; s < 2; s++) {
        sp_side *x = &F.p.s[s];
        zdone(s);
        while (F.w[s].inflight)
            zwdone(s, true);
        x->hold_completions = false;
        sp_release_completions(x);
        sp_drain_tx(x);
    }
    settle(); /* AbortConns and their completions */
    for (int s = 0; s < 2; s++) {
        check_side(s);
        /* A reset, or the normal teardown once an AbortConn went (8.2.2). */
        if (F.failed[s] && !F.llp_down)
            FZ_CHECK(uw__sdp_conn_llp_action(F.p.s[s].c) != UW_SDP_LLP_NONE);
    }
    sp_free(&F.p);
    for (int s = 0; s < 2; s++) {
        free(F.log[s].p);
        for (unsigned i = 0; i < F.z[s].n; i++)
            free(zat(s, i)->buf); /* the core is gone: nothing refers to them */
        free(F.k[s].buf);
    }
    return 0;
}
