/* The SDP flow-control modes of draft-pinkerton-iwarp-sdp-01 as two tables,
 * run on two connection cores in memory (sdp_pair.h; STag table sdp_zreg.h).
 *
 * The core under test is p.s[0], "a" (Host A of Figure 25); p.s[1], "b", is
 * its real peer. Each row runs on a fresh pair: the modes are driven with
 * the real API (set_mode on either side, delivered both ways and settled),
 * then the row's message is crafted (sp_build, uw__sdp_encode_hdr) and
 * injected into a, or the row's API call is made on a. Accepted: a stays
 * OPEN and does what the draft says (SrcAvail offered by zavail, payload
 * readable, SinkAvail usable by zwrite, ...). Violation: a is in ERROR with
 * an abortive close and uw__sdp_conn_why names the rule the code cites.
 *
 * mtab, Figure 25 (section 11, "Summary of Permitted Actions By Mode
 * Pair") and 11.1-11.3: each data-carrying message or call against the
 * mode of the half-connection it depends on. SrcAvail, RdmaWrCompl and
 * payload behind a SrcAvail depend on B->A (a's rx_mode); SinkAvail,
 * Transaction (SinkAvail with payload, 9.4) and RdmaRdCompl on A->B (a's
 * tx_mode). ANY runs the row once with that half in each mode, so all nine
 * mode pairs of Figure 25 are covered.
 *
 * ttab, section 12 (Figures 26-31): every edge and non-edge of Figure 26
 * asked through our API (Mode Master or not, Figure 27), every ModeChange
 * a peer can send (from each mode, to each mode, S=0/1), the preconditions
 * of 12.1-12.4 / Figures 28-29, and the modes both cores end in.
 *
 * F_DRAFT rows keep the draft's expectation where the code disagrees and
 * are not asserted. F_OPEN rows are cells the draft leaves open: their
 * result is asserted as the code has it (a regression guard, not the
 * draft's word) and their follow-up is only printed.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "sdp_zreg.h"
#include "testutil.h"

#define M_B UW_SDP_BUFF_MODE
#define M_C UW_SDP_COMB_MODE
#define M_P UW_SDP_PIPE_MODE
#define ANY 0xffu
#define NOMC (-1)
#define MCH(s, mode) ((s) << 7 | (mode) << 4) /* MCH octet 0 (notes section 1) */
#define F_DRAFT 1u                            /* code disagrees: draft's row, not asserted */
#define F_OPEN 2u                             /* follow-up undecided by the draft */

#define PAY 16u        /* payload of a crafted Combined SrcAvail, Data or Transaction */
#define SA_LEN 48u     /* a crafted SrcAvail's buffer */
#define SA_LEN2 64u    /* ... a second one */
#define ZS_LEN 8192u   /* our zero-copy send */
#define SK_LEN 262144u /* a SinkAvail's buffer (larger than a Private Buffer, 9.5.1) */
#define WR_LEN 1000u   /* octets an RdmaWrCompl reports */
#define N(t) (sizeof(t) / sizeof((t)[0]))

#define CHECK(cond)       \
    do {                  \
        if (!(cond))      \
            return #cond; \
    } while (0)

typedef struct ctx {
    sp_pair p;
    sp_side *a, *b;
    bool ack_set; /* the MSeqAck crafted messages carry, when not a's last MSeq */
    uint32_t ack;
    uint8_t m[256];
} ctx;

static ctx X;
static uint8_t pat[256];

static const char *mname(unsigned m)
{
    return m == M_B ? "Buffered" : m == M_C ? "Combined" : m == M_P ? "Pipelined" : "reserved";
}

static uw_sdp_stats stats_of(const sp_side *s)
{
    uw_sdp_stats t;
    uw__sdp_conn_stats(s->c, &t);
    return t;
}

static uint32_t next_in(const sp_side *s)
{
    return (uint32_t)stats_of(s).msgs_received + 1;
}

/* a's last MSeq: what a peer that saw everything acknowledges. */
static uint32_t acked(const sp_side *s)
{
    return (uint32_t)stats_of(s).msgs_sent;
}

static uint32_t ack_of(const ctx *x)
{
    return x->ack_set ? x->ack : acked(x->a);
}

static void fresh(ctx *x)
{
    uw_sdp_conn_cfg ca, cb;
    uw__sdp_conn_cfg_default(&ca, false);
    uw__sdp_conn_cfg_default(&cb, true);
    ca.zcopy_sink = cb.zcopy_sink = true; /* a SrcAvail waits for zread or force_bcopy */
    reg_reset();
    assert_int_equal(sp_setup_tap(&x->p, &ca, &cb, reg_tap, NULL), 0);
    x->a = &x->p.s[0];
    x->b = &x->p.s[1];
    x->ack_set = false;
}

static void done(ctx *x)
{
    sp_free(&x->p);
    for (int i = 0; i < NREG; i++)
        if (regs[i].addr)
            reg_drop(&regs[i]);
}

/* a's modes (and, once settled, b's mirror image: b.rx = a.tx, b.tx = a.rx). */
static bool modes_are(const ctx *x, unsigned tx, unsigned rx, bool mirror)
{
    uw_sdp_stats sa = stats_of(x->a), sb = stats_of(x->b);
    if (sa.tx_mode != tx || sa.rx_mode != rx)
        return false;
    return !mirror || (sb.rx_mode == tx && sb.tx_mode == rx && !x->a->rc && !x->b->rc);
}

/* a's send half to tx (a masters it), its receive half to rx (b does). */
static const char *drive(ctx *x, unsigned tx, unsigned rx)
{
    if (rx != M_C)
        CHECK(uw__sdp_conn_set_mode(x->b->c, (uint8_t)rx) == 0);
    if (tx != M_C)
        CHECK(uw__sdp_conn_set_mode(x->a->c, (uint8_t)tx) == 0);
    sp_settle(&x->p);
    CHECK(modes_are(x, tx, rx, true));
    return NULL;
}

/* ---- Crafted messages from the peer into a ------------------------------------ */

static int inj_as(ctx *x, uint8_t mid, uint8_t flags, uint32_t ack, uint32_t value, const void *pay,
                  uint32_t plen, bool inv, uint32_t stag)
{
    uint32_t n = sp_build(x->m, mid, flags, 16, next_in(x->a), ack, value, pay, plen);
    return sp_inject_as(x->a, x->m, n, inv, stag);
}

/* A plain Send; a SinkAvail (sp_build: NonDiscards 0, as ours) with payload
 * is a Transaction's request (9.4). */
#define inj(x, mid, flags, ack, value, pay, plen) inj_as(x, mid, flags, ack, value, pay, plen, 0, 0)

/* The peer's SrcAvail as its Mode wants it: PAY octets of payload in
 * Combined (11.2), none in Pipelined (11.3). */
static int inj_src(ctx *x, unsigned rx, uint32_t len)
{
    return inj(x, UW_SDP_SRCAVAIL, 0, acked(x->a), len, pat, rx == M_C ? PAY : 0);
}

static int inj_mc(ctx *x, unsigned s, unsigned mode)
{
    uint32_t n = sp_build(x->m, UW_SDP_MODECHANGE, 0, 16, next_in(x->a), ack_of(x), 0, NULL, 0);
    x->m[16] = (uint8_t)MCH(s, mode);
    return sp_inject(x->a, x->m, n);
}

/* ---- Our zero-copy calls, on buffers registered in the STag table --------------- */

static int zsend_on(sp_side *s, zreg **zp)
{
    zreg *z = *zp = reg_new(ZS_LEN);
    fill_pattern(z->addr, ZS_LEN, 5);
    uw_sdp_zsrc q = {.addr = z->addr, .len = ZS_LEN, .stag = z->stag, .va = z->va};
    return uw__sdp_conn_zsend(s->c, &q);
}

static int zsink_on(sp_side *s, zreg **zp)
{
    zreg *z = *zp = reg_new(SK_LEN);
    uw_sdp_zsink q = {.addr = z->addr, .len = SK_LEN, .stag = z->stag, .va = z->va};
    return uw__sdp_conn_zsink(s->c, &q);
}

/* s takes the SrcAvail at its read position whole by RDMA Read, as a
 * driver would (from the table when the STag is registered there). */
static const char *read_all(ctx *x, sp_side *s)
{
    uint8_t buf[UW_SDP_SRCAVAIL_PAYLOAD];
    (void)sp_recv(s, buf, sizeof(buf), 0); /* a Combined SrcAvail's payload first */
    uint32_t n = uw__sdp_conn_zavail(s->c);
    uw_sdp_zread rd;
    CHECK(n > 0 && uw__sdp_conn_zread(s->c, n, &rd) == 0);
    zreg *z = reg_find(rd.stag);
    if (z)
        CHECK(z->valid && rd.to >= z->va && rd.to + rd.len <= z->va + z->len);
    uw__sdp_conn_zread_done(s->c, rd.len);
    CHECK(uw__sdp_conn_zread_collect(s->c) == (ssize_t)rd.len);
    sp_drain_tx(s);
    CHECK(s->last_mid == UW_SDP_RDMARDCOMPL);
    if (s == x->b)
        sp_settle(&x->p);
    return NULL;
}

static long recv_all(sp_side *s, uint8_t *buf, size_t want)
{
    size_t got = 0;
    while (got < want) {
        long n = sp_recv(s, buf + got, want - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    return (long)got;
}

/* rc as the row wants it: a violation leaves a in ERROR, aborting, with
 * the code's reason; anything else leaves it OPEN. */
static const char *verdict(const ctx *x, int want, const char *why, int rc)
{
    if (rc != want)
        return "unexpected result";
    int s = uw__sdp_conn_state(x->a->c);
    if (want == UW_EPROTO) {
        const char *w = uw__sdp_conn_why(x->a->c);
        CHECK(s == UW_SDP_S_ERROR && uw__sdp_conn_llp_action(x->a->c) == UW_SDP_LLP_ABORT);
        CHECK(w && why && strstr(w, why));
    } else {
        CHECK(s == UW_SDP_S_OPEN);
    }
    CHECK(bad_invalidations == 0);
    return NULL;
}

/* Judges one run: v from verdict, e from the row's own checks. F_DRAFT
 * rows are printed, F_OPEN rows' follow-ups too; anything else fails. */
static void report(const char *tab, size_t i, const char *what, unsigned tx, unsigned rx, int want,
                   const char *why, unsigned flags, int rc, const char *v, const char *e)
{
    const char *w = uw__sdp_conn_why(X.a->c);
    uw_sdp_stats s = stats_of(X.a);
    if (flags & F_DRAFT)
        printf("[ draft ] %s \"%s\": draft %d (%s), code %d (%s)\n", tab, what, want, why, rc,
               w ? w : "-");
    else if (v || (e && !(flags & F_OPEN)))
        fail_msg("%s row %zu \"%s\" (A->B %s, B->A %s): expected %d (%s), got %d (%s), now A->B "
                 "%s, B->A %s: %s",
                 tab, i, what, mname(tx), mname(rx), want, why ? why : "-", rc, w ? w : "-",
                 mname(s.tx_mode), mname(s.rx_mode), v ? v : e);
    else if (flags & F_OPEN)
        printf("[ open  ] %s \"%s\": %d as the code has it; its follow-up %s%s\n", tab, what, rc,
               e ? "differs: " : "holds as commented", e ? e : "");
}

/* ==== Table 1: Figure 25 ============================================================= */

/* Each data-carrying message or call of Figure 25: its name when a row fails. */
#define ACTS(X)                                                    \
    X(A_DATA, "Data with payload")                                 \
    X(A_DATA_REQPIPE, "Data with REQ_PIPE")                        \
    X(A_SRC_PAY, "SrcAvail with payload")                          \
    X(A_SRC_NOPAY, "SrcAvail without payload")                     \
    X(A_SRC_SECOND, "second SrcAvail outstanding")                 \
    X(A_SRC_AFTER_DONE, "SrcAvail after the first was Processed")  \
    X(A_SRC_MAXADV, "MaxAdverts+1 SrcAvails")                      \
    X(A_SRC_CROSS, "SrcAvail crossing our SinkAvail")              \
    X(A_ADV_MIXED, "MaxAdverts SrcAvails + 1 SinkAvail")           \
    X(A_SINK, "SinkAvail")                                         \
    X(A_TRANS, "Transaction (SinkAvail with payload)")             \
    X(A_SINK_STALE, "stale SinkAvail")                             \
    X(A_TRANS_BEHIND, "Transaction behind a SrcAvail")             \
    X(A_WRCOMPL, "RdmaWrCompl (REQ_PIPE)")                         \
    X(A_RDCOMPL, "RdmaRdCompl (REQ_PIPE)")                         \
    X(A_BEHIND_NOSM, "payload behind a SrcAvail, no SendSm")       \
    X(A_BEHIND_UNSEEN, "payload behind a SrcAvail, SendSm unseen") \
    X(A_BEHIND_SEEN, "payload behind a SrcAvail, after SendSm")    \
    X(A_BEHIND_REST2, "two SrcAvails, SendSm, the first's rest")   \
    X(A_BEHIND_MORE2, "two SrcAvails, SendSm, more than its rest") \
    X(A_API_ZSEND, "API zsend")                                    \
    X(A_API_ZSINK, "API zsink")
#define ACT_ENUM(e, name) e,
#define ACT_NAME(e, name) name,
enum act { ACTS(ACT_ENUM) };
static const char *const act_name[] = {ACTS(ACT_NAME)};

typedef struct mrow {
    uint8_t tx, rx; /* a's send / receive half (ANY: each) */
    uint8_t act;
    int rc;          /* 0 accepted, UW_EPROTO violation, or the API's result */
    const char *why; /* what uw__sdp_conn_why contains for a violation */
    unsigned flags;
} mrow;

static const mrow mtab[] = {
    /* Bcopy is valid in every Mode (Figure 24, 11.1-11.3). 6.1.2: REQ_PIPE
     * is examined only in RdmaRdCompl and RdmaWrCompl. */
    {ANY, ANY, A_DATA, 0, NULL, 0},
    {ANY, ANY, A_DATA_REQPIPE, 0, NULL, 0},
    /* Accept SrcAvail: NO when B->A is Buffered, "1" Combined (with payload,
     * 11.2), YES Pipelined (without, 11.3). */
    {ANY, M_B, A_SRC_PAY, UW_EPROTO, "Figure 25", 0},
    {ANY, M_C, A_SRC_PAY, 0, NULL, 0},
    {ANY, M_P, A_SRC_PAY, UW_EPROTO, "11.3", 0},
    {ANY, M_B, A_SRC_NOPAY, UW_EPROTO, "Figure 25", 0},
    {ANY, M_C, A_SRC_NOPAY, UW_EPROTO, "11.2", 0},
    {ANY, M_P, A_SRC_NOPAY, 0, NULL, 0},
    {ANY, M_C, A_SRC_SECOND, UW_EPROTO, "11.2", 0},
    {ANY, M_P, A_SRC_SECOND, 0, NULL, 0},
    {ANY, M_C, A_SRC_AFTER_DONE, 0, NULL, 0},          /* "1" is one at a time */
    {ANY, M_P, A_SRC_MAXADV, UW_EPROTO, "6.2.1.3", 0}, /* 11.3, last paragraph */
    {ANY, M_P, A_SRC_CROSS, 0, NULL, 0},               /* 11.3 rule 2b: ignored */
    /* 6.2.1.3: MaxAdverts bounds the SrcAvails and SinkAvails outstanding
     * at us together. */
    {M_P, M_P, A_ADV_MIXED, UW_EPROTO, "6.2.1.3", 0},
    /* Accept SinkAvail and Transaction: only when A->B is Pipelined (11.1:
     * a Buffered source may use Transactions if the opposite half is). */
    {M_B, ANY, A_SINK, UW_EPROTO, "Figure 25", 0},
    {M_C, ANY, A_SINK, UW_EPROTO, "Figure 25", 0},
    {M_P, ANY, A_SINK, 0, NULL, 0},
    {M_B, ANY, A_TRANS, UW_EPROTO, "Figure 25", 0},
    {M_C, ANY, A_TRANS, UW_EPROTO, "Figure 25", 0},
    {M_P, ANY, A_TRANS, 0, NULL, 0},
    {M_P, ANY, A_SINK_STALE, 0, NULL, 0}, /* 11.3: 9.5.1 takes precedence */
    {M_P, M_C, A_TRANS_BEHIND, UW_EPROTO, "11.2", 0},
    {M_P, M_P, A_TRANS_BEHIND, UW_EPROTO, "11.3", 0},
    /* The peer may Post RDMA Write only when B->A is Pipelined, so an
     * RdmaWrCompl needs our SinkAvail (9.3); REQ_PIPE in it is about A->B
     * and is ignored while that is Buffered (6.1.2). */
    {ANY, M_B, A_WRCOMPL, UW_EPROTO, "9.3", 0},
    {ANY, M_C, A_WRCOMPL, UW_EPROTO, "9.3", 0},
    {ANY, M_P, A_WRCOMPL, 0, NULL, 0},
    /* RdmaRdCompl answers our SrcAvail: none in Buffered (Send SrcAvail NO). */
    {M_B, ANY, A_RDCOMPL, UW_EPROTO, "9.2 step 3", 0},
    {M_C, ANY, A_RDCOMPL, 0, NULL, 0},
    {M_P, ANY, A_RDCOMPL, 0, NULL, 0},
    /* 11.2/11.3: no payload while a SrcAvail is outstanding, except its
     * rest after a SendSm; later SrcAvails stay valid (11.3). */
    {ANY, M_C, A_BEHIND_NOSM, UW_EPROTO, "11.2/11.3", 0},
    {ANY, M_P, A_BEHIND_NOSM, UW_EPROTO, "11.2/11.3", 0},
    {ANY, M_C, A_BEHIND_UNSEEN, UW_EPROTO, "11.2/11.3", 0},
    {ANY, M_P, A_BEHIND_UNSEEN, UW_EPROTO, "11.2/11.3", 0},
    {ANY, M_C, A_BEHIND_SEEN, 0, NULL, 0},
    {ANY, M_P, A_BEHIND_SEEN, 0, NULL, 0},
    {ANY, M_P, A_BEHIND_REST2, 0, NULL, 0},
    {ANY, M_P, A_BEHIND_MORE2, UW_EPROTO, "11.2/11.3", 0},
    /* Our side of the Send columns: SrcAvail needs A->B not Buffered,
     * SinkAvail needs B->A Pipelined. */
    {M_B, ANY, A_API_ZSEND, UW_EPERM, NULL, 0},
    {M_C, ANY, A_API_ZSEND, 0, NULL, 0},
    {M_P, ANY, A_API_ZSEND, 0, NULL, 0},
    {ANY, M_B, A_API_ZSINK, UW_EPERM, NULL, 0},
    {ANY, M_C, A_API_ZSINK, UW_EPERM, NULL, 0},
    {ANY, M_P, A_API_ZSINK, 0, NULL, 0},
};

/* rc = the outcome of the row's message or call; then, if it was accepted
 * and follow is set, what the draft says a does with it. */
#define GOT(expr)           \
    do {                    \
        rc = *rcp = (expr); \
        if (!follow || rc)  \
            return NULL;    \
    } while (0)

static const char *cell(ctx *x, const mrow *r, unsigned tx, unsigned rx, bool follow, int *rcp)
{
    sp_side *a = x->a;
    uint8_t buf[256];
    zreg *z = NULL;
    uw_sdp_zsink_res res;
    uint64_t sent;
    const char *e;
    int rc, zrc;
    uint32_t pay = rx == M_C ? PAY : 0, sm;
    switch (r->act) {
    case A_DATA:
    case A_DATA_REQPIPE:
        GOT(inj(x, UW_SDP_DATA, r->act == A_DATA ? 0 : UW_SDP_REQ_PIPE, acked(a), 0, pat, PAY));
        CHECK(sp_recv(a, buf, sizeof(buf), 0) == PAY && !memcmp(buf, pat, PAY));
        CHECK(!uw__sdp_conn_mode_hint(a->c));
        return NULL;
    case A_SRC_PAY:
        GOT(inj(x, UW_SDP_SRCAVAIL, 0, acked(a), SA_LEN, pat, PAY));
        CHECK(sp_recv(a, buf, sizeof(buf), 0) == PAY && !memcmp(buf, pat, PAY));
        CHECK(uw__sdp_conn_zavail(a->c) == SA_LEN - PAY); /* the rest by Read Zcopy */
        return NULL;
    case A_SRC_NOPAY:
        GOT(inj(x, UW_SDP_SRCAVAIL, 0, acked(a), SA_LEN, NULL, 0));
        CHECK(uw__sdp_conn_zavail(a->c) == SA_LEN);
        return NULL;
    case A_SRC_SECOND:
        CHECK(inj_src(x, rx, SA_LEN) == 0);
        GOT(inj_src(x, rx, SA_LEN2));
        CHECK(stats_of(a).srcavail_received == 2);
        CHECK(uw__sdp_conn_zavail(a->c) == SA_LEN); /* oldest first */
        return NULL;
    case A_SRC_AFTER_DONE:
        CHECK(inj_src(x, rx, SA_LEN) == 0);
        if ((e = read_all(x, a)) != NULL)
            return e;
        GOT(inj_src(x, rx, SA_LEN2));
        CHECK(sp_recv(a, buf, sizeof(buf), 0) == PAY);
        CHECK(uw__sdp_conn_zavail(a->c) == SA_LEN2 - PAY);
        return NULL;
    case A_SRC_MAXADV:
    case A_ADV_MIXED: {
        uw_sdp_params pr;
        CHECK(uw__sdp_conn_params(a->c, &pr) == 0);
        for (unsigned i = 0; i < pr.local_max_adverts; i++)
            CHECK(inj_src(x, rx, SA_LEN) == 0);
        GOT(r->act == A_SRC_MAXADV ? inj_src(x, rx, SA_LEN)
                                   : inj(x, UW_SDP_SINKAVAIL, 0, acked(a), SK_LEN, NULL, 0));
        return NULL;
    }
    case A_SRC_CROSS:
        CHECK(zsink_on(a, &z) == 0);
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_SINKAVAIL);
        /* Sent before our SinkAvail arrived (MSeqAck one short of it). */
        GOT(inj(x, UW_SDP_SRCAVAIL, 0, acked(a) - 1, SA_LEN, NULL, 0));
        CHECK(uw__sdp_conn_zavail(a->c) == 0 && !uw__sdp_conn_zwaiting(a->c));
        CHECK(uw__sdp_conn_zsink_poll(a->c, &res) == 0); /* ours stands */
        return NULL;
    case A_SINK:
    case A_TRANS:
        GOT(inj(x, UW_SDP_SINKAVAIL, 0, acked(a), SK_LEN, pat, r->act == A_TRANS ? PAY : 0));
        CHECK(uw__sdp_conn_zwrite_avail(a->c) == SK_LEN);
        if (r->act == A_TRANS)
            CHECK(sp_recv(a, buf, sizeof(buf), 0) == PAY && !memcmp(buf, pat, PAY));
        return NULL;
    case A_SINK_STALE:
        /* Our Data raises PotentialNonDiscards (9.5.1 step 3); a SinkAvail
         * sent before it arrived carries NonDiscards 0 and is stale. */
        CHECK(sp_send(a, "s", 1, 0) == 1 && a->last_mid == UW_SDP_DATA);
        GOT(inj(x, UW_SDP_SINKAVAIL, 0, acked(a) - 1, SK_LEN, NULL, 0));
        CHECK(uw__sdp_conn_zwrite_avail(a->c) == 0 && stats_of(a).sinkavail_stale == 1);
        return NULL;
    case A_TRANS_BEHIND:
        CHECK(inj_src(x, rx, SA_LEN) == 0);
        GOT(inj(x, UW_SDP_SINKAVAIL, 0, acked(a), SK_LEN, pat + SA_LEN, PAY));
        return NULL;
    case A_WRCOMPL:
        zrc = zsink_on(a, &z);
        sp_drain_tx(a);
        GOT(zrc == 0 ? inj_as(x, UW_SDP_RDMAWRCOMPL, UW_SDP_REQ_PIPE, acked(a), WR_LEN, NULL, 0,
                              true, z->stag)
                     : inj(x, UW_SDP_RDMAWRCOMPL, UW_SDP_REQ_PIPE, acked(a), WR_LEN, NULL, 0));
        CHECK(uw__sdp_conn_zsink_poll(a->c, &res) == 1 && res.placed == WR_LEN);
        CHECK(uw__sdp_conn_mode_hint(a->c) == (tx != M_B));
        return NULL;
    case A_RDCOMPL:
        zrc = zsend_on(a, &z);
        sp_drain_tx(a);
        pay = tx == M_C ? UW_SDP_SRCAVAIL_PAYLOAD : 0;
        GOT(zrc == 0 ? inj_as(x, UW_SDP_RDMARDCOMPL, UW_SDP_REQ_PIPE, acked(a), ZS_LEN - pay, NULL,
                              0, true, z->stag)
                     : inj(x, UW_SDP_RDMARDCOMPL, UW_SDP_REQ_PIPE, acked(a), 100, NULL, 0));
        CHECK(uw__sdp_conn_zsend_poll(a->c, &sent) == 1 && sent == ZS_LEN);
        CHECK(uw__sdp_conn_mode_hint(a->c)); /* 6.1.2, Figure 30 */
        return NULL;
    case A_BEHIND_NOSM:
        CHECK(inj_src(x, rx, SA_LEN) == 0);
        GOT(inj(x, UW_SDP_DATA, 0, acked(a), 0, pat + pay, PAY));
        return NULL;
    case A_BEHIND_UNSEEN:
    case A_BEHIND_SEEN:
        CHECK(inj_src(x, rx, SA_LEN) == 0);
        CHECK(uw__sdp_conn_force_bcopy(a->c) == 0);
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_SENDSM);
        sm = acked(a);
        GOT(inj(x, UW_SDP_DATA, 0, r->act == A_BEHIND_SEEN ? sm : sm - 1, 0, pat + pay,
                SA_LEN - pay));
        CHECK(recv_all(a, buf, SA_LEN) == SA_LEN && !memcmp(buf, pat, SA_LEN));
        CHECK(!uw__sdp_conn_zwaiting(a->c));
        return NULL;
    case A_BEHIND_REST2:
    case A_BEHIND_MORE2:
        CHECK(inj_src(x, rx, SA_LEN) == 0 && inj_src(x, rx, SA_LEN2) == 0);
        CHECK(uw__sdp_conn_force_bcopy(a->c) == 0);
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_SENDSM);
        GOT(inj(x, UW_SDP_DATA, 0, acked(a), 0, pat, SA_LEN + (r->act == A_BEHIND_MORE2) * 8));
        CHECK(recv_all(a, buf, SA_LEN) == SA_LEN && !memcmp(buf, pat, SA_LEN));
        CHECK(uw__sdp_conn_zavail(a->c) == SA_LEN2); /* the second stays valid */
        return NULL;
    case A_API_ZSEND:
        GOT(zsend_on(a, &z));
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_SRCAVAIL);
        /* 11.2: payload in Combined; 11.3: none in Pipelined. */
        CHECK(be32(a->out[(a->out_head + a->out_n - 1) % SP_MAXQ].data + 4) ==
              UW_SDP_BSDH_LEN + UW_SDP_SRCAH_LEN + (tx == M_C ? UW_SDP_SRCAVAIL_PAYLOAD : 0));
        return NULL;
    case A_API_ZSINK:
        GOT(zsink_on(a, &z));
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_SINKAVAIL);
        return NULL;
    default:
        return "no such action";
    }
}

static void test_figure25(void **st)
{
    (void)st;
    unsigned runs = 0;
    for (size_t i = 0; i < N(mtab); i++) {
        const mrow *r = &mtab[i];
        for (unsigned tx = M_B; tx <= M_P; tx++) {
            for (unsigned rx = M_B; rx <= M_P; rx++) {
                if ((r->tx != ANY && r->tx != tx) || (r->rx != ANY && r->rx != rx))
                    continue;
                fresh(&X);
                int rc = INT_MIN;
                const char *e = drive(&X, tx, rx);
                if (!e)
                    e = cell(&X, r, tx, rx, r->rc == 0 && !r->flags, &rc);
                report("Figure 25", i, act_name[r->act], tx, rx, r->rc, r->why, r->flags, rc,
                       verdict(&X, r->rc, r->why, rc), e);
                done(&X);
                runs++;
            }
        }
    }
    printf("Figure 25: %zu rows, %u runs\n", N(mtab), runs);
}

/* ==== Table 2: section 12, Figures 26-31 =========================================== */

enum who {
    T_SET,  /* our set_mode(to): our send half, which we master in C and P */
    T_RXC,  /* our rx_combined(): our receive half, which we master in B */
    T_MC,   /* a ModeChange from the peer with S and Mode = to */
    T_SINK, /* a SinkAvail from the peer (s: with payload, a Transaction) */
};

enum pre {
    P_NONE,
    P_OUR_SRC,             /* our SrcAvail is at b, undecided */
    P_OUR_WRC,             /* we Wrote into b's SinkAvail, RdmaWrCompl not yet sent */
    P_HELD_SINK,           /* we hold b's SinkAvail */
    P_UNACKED,             /* we moved P->C, b got it and has not answered */
    P_MC_UNSEEN,           /* we moved P->C, the peer's message predates it */
    P_MC_SEEN,             /* ... the peer's message acknowledges it */
    P_PEER_SRC,            /* the peer's SrcAvail, Unprocessed */
    P_PEER_SRC_READ,       /* ... our RDMA Read of it In-Process */
    P_PEER_SRC_RDC,        /* ... Read whole, RdmaRdCompl seen by the peer */
    P_PEER_SRC_RDC_UNSEEN, /* ... RdmaRdCompl sent, not yet seen */
    P_PEER_SRC_SM,         /* ... answered with SendSm, seen */
    P_PEER_SRC_SM_UNSEEN,  /* ... SendSm sent, not yet seen */
    P_PEER_SRC2,           /* two SrcAvails of the peer, Unprocessed (Pipelined) */
    P_OUR_SINK,            /* our SinkAvail is outstanding */
    P_PEER_PC,             /* the peer moved us P->C and saw nothing of ours since */
    P_PEER_PC_ACKED,       /* ... and saw our next message */
};

enum post {
    Q_NONE,
    Q_SENDSM,     /* b answers our SrcAvail with SendSm */
    Q_RDCOMPL,    /* b Reads it whole (RdmaRdCompl) */
    Q_ACK,        /* b sends a Data message (acknowledging ours) */
    Q_BCOPY_REST, /* the peer's SrcAvail's rest as Data after our SendSm */
    Q_ZSEND,      /* we send a SrcAvail */
};

typedef struct trow {
    const char *what;
    uint8_t tx, rx, pre, who, s, to; /* a's modes before; the action */
    int rc;
    const char *why;
    uint8_t tx1, rx1; /* a's modes after (API rows: once settled, b mirrors them) */
    int mch;          /* API rows: the MCH octet a sent at once, or NOMC */
    uint8_t post, tx2, rx2;
    unsigned flags;
} trow;

/* Row shapes. API: our call, then the pair settled (b mirrors a); a
 * violation by the peer leaves nothing more to compare; an accepted peer
 * message moves a to tx1/rx1, where a follow-up (post) leaves it. */
/* clang-format off */
#define API(what, tx, rx, pre, who, to, rc, tx1, rx1, mch, post, tx2, rx2) \
    {what, tx, rx, pre, who, 0, to, rc, NULL, tx1, rx1, mch, post, tx2, rx2, 0}
#define SET(what, tx, to, rc, tx1, mch) API(what, tx, M_C, P_NONE, T_SET, to, rc, tx1, M_C, mch, \
                                            Q_NONE, tx1, M_C)
#define VIOL(what, tx, rx, pre, who, s, to, why, fl) \
    {what, tx, rx, pre, who, s, to, UW_EPROTO, why, 0, 0, NOMC, Q_NONE, 0, 0, fl}
#define ACC(what, tx, rx, pre, who, s, to, tx1, rx1, post, fl) \
    {what, tx, rx, pre, who, s, to, 0, NULL, tx1, rx1, NOMC, post, tx1, rx1, fl}
/* clang-format on */

static const trow ttab[] = {
    /* Our calls: Figure 26's edges, Figure 27's masters; 12: never a
     * ModeChange naming the current Mode (the call is then a no-op). */
    SET("12.1 C->B", M_C, M_B, 0, M_B, MCH(0, M_B)),
    SET("12.3 C->P", M_C, M_P, 0, M_P, MCH(0, M_P)),
    SET("12 C->C: nothing", M_C, M_C, 0, M_C, NOMC),
    SET("12.4 P->C", M_P, M_C, 0, M_C, MCH(0, M_C)),
    SET("Figure 26: P->B", M_P, M_B, UW_EINVAL, M_P, NOMC),
    SET("12 P->P: nothing", M_P, M_P, 0, M_P, NOMC),
    SET("Figure 27: B->C is the sink's", M_B, M_C, UW_EPERM, M_B, NOMC),
    SET("Figures 26/27: B->P", M_B, M_P, UW_EPERM, M_B, NOMC),
    SET("12 B->B: nothing", M_B, M_B, 0, M_B, NOMC),
    SET("Figure 12: reserved Mode", M_C, 3, UW_EINVAL, M_C, NOMC),
    API("12.2 B->C by the sink, S=1", M_C, M_B, P_NONE, T_RXC, 0, 0, M_C, M_C, MCH(1, M_C), Q_NONE,
        M_C, M_C),
    API("Figure 27: Combined is the source's", M_C, M_C, P_NONE, T_RXC, 0, UW_EPERM, M_C, M_C, NOMC,
        Q_NONE, M_C, M_C),
    API("Figure 27: Pipelined is the source's", M_C, M_P, P_NONE, T_RXC, 0, UW_EPERM, M_C, M_P,
        NOMC, Q_NONE, M_C, M_P),
    /* Preconditions of our moves. */
    API("12.1/Figure 30: C->B waits for SendSm", M_C, M_C, P_OUR_SRC, T_SET, M_B, 0, M_C, M_C, NOMC,
        Q_SENDSM, M_B, M_C),
    API("12.1/Figure 30: C->B waits for RdmaRdCompl", M_C, M_C, P_OUR_SRC, T_SET, M_B, 0, M_C, M_C,
        NOMC, Q_RDCOMPL, M_B, M_C),
    API("12.3: C->P need not wait", M_C, M_C, P_OUR_SRC, T_SET, M_P, 0, M_P, M_C, MCH(0, M_P),
        Q_RDCOMPL, M_P, M_C),
    API("Figure 28: RdmaWrCompls first", M_P, M_C, P_OUR_WRC, T_SET, M_C, 0, M_C, M_C, MCH(0, M_C),
        Q_NONE, M_C, M_C),
    API("Figures 28/29: P->C discards SinkAvails", M_P, M_C, P_HELD_SINK, T_SET, M_C, 0, M_C, M_C,
        MCH(0, M_C), Q_NONE, M_C, M_C),
    API("12.4: P->C->B waits for the ack", M_P, M_C, P_UNACKED, T_SET, M_B, 0, M_C, M_C, NOMC,
        Q_ACK, M_B, M_C),
    API("12.4: P->C->P waits for the ack", M_P, M_C, P_UNACKED, T_SET, M_P, 0, M_C, M_C, NOMC,
        Q_ACK, M_P, M_C),
    /* Figure 28 re-issues outstanding SrcAvails; the code decides later
     * instead (12.5: the master MAY change modes at any time). */
    API("Figure 28: P->C deferred for our SrcAvail", M_P, M_C, P_OUR_SRC, T_SET, M_C, 0, M_P, M_C,
        NOMC, Q_SENDSM, M_C, M_C),
    /* The peer's ModeChange, S=0: our receive half, which the peer (Data
     * Source) masters in Combined and Pipelined only (Figure 27). */
    VIOL("Figure 27: S=0 B->B", M_C, M_B, P_NONE, T_MC, 0, M_B, "Figure 26", 0),
    VIOL("12.2/Figure 27: S=0 B->C", M_C, M_B, P_NONE, T_MC, 0, M_C, "Figure 26", 0),
    VIOL("Figure 26: S=0 B->P", M_C, M_B, P_NONE, T_MC, 0, M_P, "Figure 26", 0),
    ACC("12.1/Figure 31: S=0 C->B", M_C, M_C, P_NONE, T_MC, 0, M_B, M_C, M_B, Q_NONE, 0),
    VIOL("12: S=0 C->C", M_C, M_C, P_NONE, T_MC, 0, M_C, "Figure 26", 0),
    ACC("12.3/Figure 31: S=0 C->P", M_C, M_C, P_NONE, T_MC, 0, M_P, M_C, M_P, Q_NONE, 0),
    VIOL("Figure 26: S=0 P->B", M_C, M_P, P_NONE, T_MC, 0, M_B, "Figure 26", 0),
    ACC("12.4/Figure 31: S=0 P->C", M_C, M_P, P_NONE, T_MC, 0, M_C, M_C, M_C, Q_NONE, 0),
    VIOL("12: S=0 P->P", M_C, M_P, P_NONE, T_MC, 0, M_P, "Figure 26", 0),
    /* S=1: our send half, which the peer (Data Sink) masters in Buffered. */
    VIOL("12: S=1 B->B", M_B, M_C, P_NONE, T_MC, 1, M_B, "Figure 27", 0),
    ACC("12.2/Figure 30: S=1 B->C", M_B, M_C, P_NONE, T_MC, 1, M_C, M_C, M_C, Q_ZSEND, 0),
    VIOL("Figure 26: S=1 B->P", M_B, M_C, P_NONE, T_MC, 1, M_P, "Figure 27", 0),
    VIOL("Figure 27: S=1 C->B", M_C, M_C, P_NONE, T_MC, 1, M_B, "Figure 27", 0),
    VIOL("Figure 27: S=1 C->C", M_C, M_C, P_NONE, T_MC, 1, M_C, "Figure 27", 0),
    VIOL("Figure 27: S=1 C->P", M_C, M_C, P_NONE, T_MC, 1, M_P, "Figure 27", 0),
    VIOL("Figure 27: S=1 P->B", M_P, M_C, P_NONE, T_MC, 1, M_B, "Figure 27", 0),
    VIOL("Figure 27: S=1 P->C", M_P, M_C, P_NONE, T_MC, 1, M_C, "Figure 27", 0),
    VIOL("Figure 27: S=1 P->P", M_P, M_C, P_NONE, T_MC, 1, M_P, "Figure 27", 0),
    /* OPEN: Figure 12 only calls Mode 3-7 "reserved"; the codec rejects the
     * message as malformed (codec.c), which the row keeps. */
    VIOL("Figure 12: reserved Mode 3", M_C, M_C, P_NONE, T_MC, 0, 3, "6:", F_OPEN),
    /* Preconditions of the peer's moves. */
    VIOL("12.1: C->B, SrcAvail Unprocessed", M_C, M_C, P_PEER_SRC, T_MC, 0, M_B, "12.1", 0),
    VIOL("12.1: C->B, our Read In-Process", M_C, M_C, P_PEER_SRC_READ, T_MC, 0, M_B, "12.1", 0),
    ACC("12.1: C->B after RdmaRdCompl", M_C, M_C, P_PEER_SRC_RDC, T_MC, 0, M_B, M_C, M_B, Q_NONE,
        0),
    ACC("12.1: C->B after SendSm, rest in Buffered", M_C, M_C, P_PEER_SRC_SM, T_MC, 0, M_B, M_C,
        M_B, Q_BCOPY_REST, 0),
    /* 12.1: the source sent the ModeChange before it had our RdmaRdCompl /
     * SendSm (MSeqAck older than it). */
    VIOL("12.1: C->B before RdmaRdCompl seen", M_C, M_C, P_PEER_SRC_RDC_UNSEEN, T_MC, 0, M_B,
         "12.1", 0),
    VIOL("12.1: C->B before SendSm seen", M_C, M_C, P_PEER_SRC_SM_UNSEEN, T_MC, 0, M_B, "12.1", 0),
    ACC("12.3: C->P, SrcAvail stays valid", M_C, M_C, P_PEER_SRC, T_MC, 0, M_P, M_C, M_P, Q_NONE,
        0),
    ACC("Figure 29: P->C drops our SinkAvail", M_C, M_P, P_OUR_SINK, T_MC, 0, M_C, M_C, M_C, Q_NONE,
        0),
    /* OPEN: 12.4 neither forbids the move with several payload-free
     * SrcAvails outstanding (only "after the transition ... only one
     * SrcAvail Message may be outstanding") nor says what the sink does
     * with them; the code accepts and keeps them. */
    ACC("12.4: P->C, 2 SrcAvails out (kept?)", M_C, M_P, P_PEER_SRC2, T_MC, 0, M_C, M_C, M_C,
        Q_NONE, F_OPEN),
    /* 12.4: the source moved again before any message of ours
     * acknowledged its P->C. */
    VIOL("12.4: P->C->P before the ack", M_C, M_P, P_PEER_PC, T_MC, 0, M_P, "12.4", 0),
    ACC("12.4: P->C->P after the ack", M_C, M_P, P_PEER_PC_ACKED, T_MC, 0, M_P, M_C, M_P, Q_NONE,
        0),
    /* Late SinkAvails after our P->C (12.4, Figure 28). OPEN: "ignores the
     * SinkAvail" does not say whether a Transaction's payload is ignored
     * too; the code delivers it. */
    ACC("12.4: late SinkAvail ignored", M_P, M_C, P_MC_UNSEEN, T_SINK, 0, 0, M_C, M_C, Q_NONE, 0),
    ACC("12.4: late Transaction (payload?)", M_P, M_C, P_MC_UNSEEN, T_SINK, 1, 0, M_C, M_C, Q_NONE,
        F_OPEN),
    VIOL("Figure 25: SinkAvail after the ack", M_P, M_C, P_MC_SEEN, T_SINK, 0, 0, "Figure 25", 0),
};

static const char *t_pre(ctx *x, const trow *r)
{
    sp_side *a = x->a, *b = x->b;
    uint8_t buf[UW_SDP_SRCAVAIL_PAYLOAD];
    zreg *z;
    uw_sdp_zwrite wr;
    uint32_t mark;
    const char *e;
    switch (r->pre) {
    case P_OUR_SRC:
        CHECK(zsend_on(a, &z) == 0);
        sp_settle(&x->p);
        CHECK(uw__sdp_conn_zwaiting(b->c));
        return NULL;
    case P_OUR_WRC:
    case P_HELD_SINK:
        CHECK(zsink_on(b, &z) == 0);
        sp_settle(&x->p);
        CHECK(uw__sdp_conn_zwrite_avail(a->c) == SK_LEN);
        if (r->pre == P_HELD_SINK)
            return NULL;
        CHECK(uw__sdp_conn_zwrite(a->c, WR_LEN, &wr) == 0 && wr.stag == z->stag && z->valid);
        memset(z->addr + (wr.to - z->va), 0x5a, WR_LEN); /* the Write, placed */
        uw__sdp_conn_zwrite_done(a->c, true);
        return NULL; /* not drained: the RdmaWrCompl is still owed */
    case P_UNACKED:
        CHECK(uw__sdp_conn_set_mode(a->c, M_C) == 0);
        sp_drain_tx(a);
        CHECK(sp_deliver1(a, b) && b->out_n == 0);
        CHECK(modes_are(x, M_C, r->rx, true));
        return NULL;
    case P_MC_UNSEEN:
    case P_MC_SEEN:
        CHECK(uw__sdp_conn_set_mode(a->c, M_C) == 0);
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_MODECHANGE);
        x->ack_set = true;
        x->ack = acked(a) - (r->pre == P_MC_UNSEEN);
        return NULL;
    case P_PEER_SRC:
    case P_PEER_SRC_READ:
    case P_PEER_SRC_RDC:
    case P_PEER_SRC_RDC_UNSEEN:
    case P_PEER_SRC_SM:
    case P_PEER_SRC_SM_UNSEEN:
        CHECK(inj_src(x, r->rx, SA_LEN) == 0);
        if (r->pre == P_PEER_SRC)
            return NULL;
        if (r->pre == P_PEER_SRC_READ) {
            uw_sdp_zread rd;
            CHECK(sp_recv(a, buf, sizeof(buf), 0) == PAY);
            CHECK(uw__sdp_conn_zread(a->c, SA_LEN - PAY, &rd) == 0);
            return NULL;
        }
        if (r->pre == P_PEER_SRC_RDC || r->pre == P_PEER_SRC_RDC_UNSEEN) {
            if ((e = read_all(x, a)) != NULL)
                return e;
        } else {
            CHECK(uw__sdp_conn_force_bcopy(a->c) == 0);
            sp_drain_tx(a);
            CHECK(a->last_mid == UW_SDP_SENDSM);
        }
        x->ack_set = true;
        x->ack = acked(a) - (r->pre == P_PEER_SRC_RDC_UNSEEN || r->pre == P_PEER_SRC_SM_UNSEEN);
        return NULL;
    case P_PEER_SRC2:
        CHECK(inj_src(x, r->rx, SA_LEN) == 0 && inj_src(x, r->rx, SA_LEN2) == 0);
        return NULL;
    case P_OUR_SINK:
        CHECK(zsink_on(a, &z) == 0);
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_SINKAVAIL);
        return NULL;
    case P_PEER_PC:
    case P_PEER_PC_ACKED:
        mark = acked(a); /* our last message before the ModeChange reached us */
        CHECK(inj_mc(x, 0, M_C) == 0);
        if (r->pre == P_PEER_PC_ACKED) {
            CHECK(sp_send(a, "z", 1, 0) == 1 && acked(a) > mark);
            mark = acked(a);
        }
        x->ack_set = true;
        x->ack = mark;
        return NULL;
    default:
        return NULL;
    }
}

static const char *t_cell(ctx *x, const trow *r, int *rcp)
{
    sp_side *a = x->a, *b = x->b;
    uint8_t buf[256];
    zreg *z;
    uw_sdp_zsink_res res;
    const char *e = t_pre(x, r);
    if (e)
        return e;
    unsigned o = a->out_n;
    int rc = *rcp = r->who == T_SET   ? uw__sdp_conn_set_mode(a->c, r->to)
                    : r->who == T_RXC ? uw__sdp_conn_rx_combined(a->c)
                    : r->who == T_MC
                        ? inj_mc(x, r->s, r->to)
                        : inj(x, UW_SDP_SINKAVAIL, 0, ack_of(x), SK_LEN, pat, r->s ? PAY : 0);
    sp_drain_tx(a);
    if (rc != r->rc || rc == UW_EPROTO)
        return NULL;
    /* API: what went on the wire at once (12: the master changes when it
     * sends; Figure 28: no RdmaWrCompl after the ModeChange), then settled
     * with b. After a crafted message b's numbering is not a's any more,
     * so only a is looked at. */
    bool api = r->who == T_SET || r->who == T_RXC;
    if (api) {
        int mch = NOMC;
        bool wrc_before = false, wrc_after = false;
        for (unsigned i = o; i < a->out_n; i++) {
            const uint8_t *w = a->out[(a->out_head + i) % SP_MAXQ].data;
            if (w[0] == UW_SDP_MODECHANGE)
                mch = w[16];
            else if (w[0] == UW_SDP_RDMAWRCOMPL)
                *(mch == NOMC ? &wrc_before : &wrc_after) = true;
        }
        CHECK(mch == r->mch);
        CHECK(!wrc_after);
        CHECK(r->pre != P_OUR_WRC || wrc_before);
        sp_settle(&x->p);
    }
    CHECK(modes_are(x, r->tx1, r->rx1, api));
    switch (r->pre) {
    case P_HELD_SINK: /* Figure 28 at a, Figure 29 at b */
        CHECK(uw__sdp_conn_zwrite_avail(a->c) == 0);
        CHECK(uw__sdp_conn_zsink_poll(b->c, &res) == 1 && res.placed + res.bcopy == 0);
        break;
    case P_OUR_WRC:
        CHECK(uw__sdp_conn_zsink_poll(b->c, &res) == 1 && res.placed == WR_LEN);
        break;
    case P_OUR_SINK: /* Figure 29; and no SinkAvail in Combined (12) */
        CHECK(uw__sdp_conn_zsink_poll(a->c, &res) == 1 && res.placed + res.bcopy == 0);
        CHECK(zsink_on(a, &z) == UW_EPERM);
        break;
    case P_PEER_SRC: /* 12.3: nothing special for the SrcAvail */
        CHECK(sp_recv(a, buf, sizeof(buf), 0) == PAY);
        CHECK(uw__sdp_conn_zavail(a->c) == SA_LEN - PAY);
        break;
    case P_PEER_SRC2:
        CHECK(uw__sdp_conn_zavail(a->c) == SA_LEN);
        break;
    case P_MC_UNSEEN: /* ignored, flow control processed */
        CHECK(uw__sdp_conn_zwrite_avail(a->c) == 0);
        if (r->s)
            CHECK(sp_recv(a, buf, sizeof(buf), 0) == PAY && !memcmp(buf, pat, PAY));
        break;
    default:
        break;
    }
    bool real = true;
    switch (r->post) {
    case Q_NONE:
        return NULL;
    case Q_SENDSM:
        CHECK(uw__sdp_conn_force_bcopy(b->c) == 0);
        sp_settle(&x->p);
        break;
    case Q_RDCOMPL:
        if ((e = read_all(x, b)) != NULL)
            return e;
        break;
    case Q_ACK:
        CHECK(sp_send(b, "k", 1, 0) == 1);
        sp_settle(&x->p);
        break;
    case Q_BCOPY_REST:
        CHECK(inj(x, UW_SDP_DATA, 0, acked(a), 0, pat + PAY, SA_LEN - PAY) == 0);
        CHECK(recv_all(a, buf, SA_LEN) == SA_LEN && !memcmp(buf, pat, SA_LEN));
        real = false;
        break;
    case Q_ZSEND:
        CHECK(zsend_on(a, &z) == 0);
        sp_drain_tx(a);
        CHECK(a->last_mid == UW_SDP_SRCAVAIL);
        real = false;
        break;
    }
    CHECK(modes_are(x, r->tx2, r->rx2, real));
    return NULL;
}

static void test_transitions(void **st)
{
    (void)st;
    for (size_t i = 0; i < N(ttab); i++) {
        const trow *r = &ttab[i];
        fresh(&X);
        int rc = INT_MIN;
        const char *e = drive(&X, r->tx, r->rx);
        if (!e)
            e = t_cell(&X, r, &rc);
        report("Section 12", i, r->what, r->tx, r->rx, r->rc, r->why, r->flags, rc,
               verdict(&X, r->rc, r->why, rc), e);
        done(&X);
    }
    printf("Section 12: %zu rows\n", N(ttab));
}

int main(void)
{
    fill_pattern(pat, sizeof(pat), 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figure25),
        cmocka_unit_test(test_transitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
