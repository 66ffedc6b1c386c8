/* Two SDP connection cores joined in memory: each side's receive queue
 * stands for the QP's posted receives, and a wire queue per direction holds
 * the Sends in order. Tests drive the application calls and choose when
 * messages are delivered and when Sends complete; nothing depends on time.
 * Header-only so every SDP test program can include it. */
#ifndef UW_TEST_SDP_PAIR_H
#define UW_TEST_SDP_PAIR_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sdp/codec.h"
#include "sdp/conn.h"

#define SP_MAXQ 2048

typedef struct sp_msg {
    uint8_t *data;
    uint32_t len;
    uint32_t tx_id; /* the sender's slot, completed on delivery or later */
    bool solicited;
    bool inv; /* Send with Invalidate of inv_stag */
    uint32_t inv_stag;
    uint32_t rq_at_send;   /* receives the sender had posted when it built it (its Bufs) */
    unsigned rcvd_at_send; /* messages the sender had received by then */
} sp_msg;

typedef struct sp_side {
    uw_sdp_conn *c;
    uw_sdp_post rq[SP_MAXQ]; /* posted receives, FIFO */
    unsigned rq_head, rq_n;
    sp_msg out[SP_MAXQ]; /* Sends on the wire towards the peer, FIFO */
    unsigned out_head, out_n;
    uint32_t pending_done[SP_MAXQ]; /* delivered Sends whose completion is held back */
    unsigned pd_n;
    bool hold_completions; /* tests of Nagle: complete Sends only when asked */
    int llp;               /* last llp_action seen */
    int rc;                /* first error on_recv returned */
    bool overrun;          /* a Send arrived with no receive posted (DDP would Terminate) */
    bool too_long;         /* a Send longer than the posted buffer */
    unsigned sent_msgs;
    uint8_t last_mid;
    unsigned rcvd_msgs; /* messages given to on_recv (delivered or injected) */
    int idx;            /* 0: Connecting Peer, 1: Accepting Peer */
    /* Optional tap (sp_setup_tap): sees every message of this side just
     * before sp_deliver1 delivers it, so a test can check the wire. */
    void (*tap)(void *ud, const struct sp_side *from, const sp_msg *m);
    void *tap_ud;
} sp_side;

typedef struct sp_pair {
    sp_side s[2];                    /* 0: Connecting Peer, 1: Accepting Peer */
    uint8_t hello[UW_SDP_HELLO_LEN]; /* the Hello of the setup (MPA private data) */
} sp_pair;

static inline void sp_drain_posts(sp_side *x)
{
    uw_sdp_post p;
    while (x->rq_n < SP_MAXQ && uw__sdp_conn_next_post(x->c, &p) == 1)
        x->rq[(x->rq_head + x->rq_n++) % SP_MAXQ] = p;
}

static inline void sp_complete(sp_side *x, uint32_t id)
{
    if (x->hold_completions)
        x->pending_done[x->pd_n++] = id;
    else
        uw__sdp_conn_tx_done(x->c, id);
}

static inline void sp_release_completions(sp_side *x)
{
    unsigned n = x->pd_n;
    x->pd_n = 0;
    for (unsigned i = 0; i < n; i++)
        uw__sdp_conn_tx_done(x->c, x->pending_done[i]);
}

/* Takes every due message of x onto the wire (copied, as the QP would). */
static inline unsigned sp_drain_tx(sp_side *x)
{
    uw_sdp_tx t;
    unsigned n = 0;
    sp_drain_posts(x);
    while (x->out_n < SP_MAXQ && uw__sdp_conn_next_tx(x->c, &t) == 1) {
        sp_msg *m = &x->out[(x->out_head + x->out_n++) % SP_MAXQ];
        m->data = malloc(t.len ? t.len : 1);
        memcpy(m->data, t.addr, t.len);
        m->len = t.len;
        m->tx_id = t.id;
        m->solicited = t.solicited;
        m->inv = t.invalidate;
        m->inv_stag = t.inv_stag;
        m->rq_at_send = x->rq_n;
        m->rcvd_at_send = x->rcvd_msgs;
        x->sent_msgs++;
        x->last_mid = m->data[0];
        n++;
    }
    x->llp = uw__sdp_conn_llp_action(x->c);
    return n;
}

/* Delivers one message from `from` to `to`; returns false if none queued. */
static inline bool sp_deliver1(sp_side *from, sp_side *to)
{
    if (!from->out_n)
        return false;
    sp_msg m = from->out[from->out_head];
    from->out_head = (from->out_head + 1) % SP_MAXQ;
    from->out_n--;
    if (from->tap)
        from->tap(from->tap_ud, from, &m);
    sp_complete(from, m.tx_id);
    if (!to->rq_n) {
        to->overrun = true;
    } else {
        uw_sdp_post p = to->rq[to->rq_head];
        to->rq_head = (to->rq_head + 1) % SP_MAXQ;
        to->rq_n--;
        if (m.len > p.len) {
            to->too_long = true;
        } else {
            memcpy(p.addr, m.data, m.len);
            to->rcvd_msgs++;
            int rc = m.inv ? uw__sdp_conn_on_recv_inv(to->c, p.id, m.len, m.inv_stag)
                           : uw__sdp_conn_on_recv(to->c, p.id, m.len);
            if (rc < 0 && !to->rc)
                to->rc = rc;
        }
    }
    free(m.data);
    sp_drain_tx(to);
    sp_drain_tx(from);
    return true;
}

/* Runs both directions until nothing moves. */
static inline void sp_settle(sp_pair *p)
{
    for (int guard = 0; guard < 1000000; guard++) {
        sp_drain_tx(&p->s[0]);
        sp_drain_tx(&p->s[1]);
        bool a = sp_deliver1(&p->s[0], &p->s[1]);
        bool b = sp_deliver1(&p->s[1], &p->s[0]);
        if (!a && !b)
            return;
    }
}

static inline void sp_free_side(sp_side *x)
{
    while (x->out_n) {
        free(x->out[x->out_head].data);
        x->out_head = (x->out_head + 1) % SP_MAXQ;
        x->out_n--;
    }
    uw__sdp_conn_destroy(x->c);
    x->c = NULL;
}

static inline void sp_free(sp_pair *p)
{
    sp_free_side(&p->s[0]);
    sp_free_side(&p->s[1]);
}

/* Creates both cores from the configurations (NULL: defaults) and runs the
 * setup: posts, Hello, accept_hello, HelloAck. Returns accept_hello's code
 * (the Hello is delivered as MPA private data, not through the wire). The
 * tap (may be NULL) is installed on both sides before the first message. */
static inline int sp_setup_tap(sp_pair *p, const uw_sdp_conn_cfg *ccfg, const uw_sdp_conn_cfg *acfg,
                               void (*tap)(void *ud, const sp_side *from, const sp_msg *m),
                               void *tap_ud)
{
    memset(p, 0, sizeof(*p));
    for (int i = 0; i < 2; i++) {
        p->s[i].idx = i;
        p->s[i].tap = tap;
        p->s[i].tap_ud = tap_ud;
    }
    uw_sdp_conn_cfg cc, ac;
    if (ccfg)
        cc = *ccfg;
    else
        uw__sdp_conn_cfg_default(&cc, false);
    if (acfg)
        ac = *acfg;
    else
        uw__sdp_conn_cfg_default(&ac, true);
    cc.accepting = false;
    ac.accepting = true;
    if (uw__sdp_conn_create(&p->s[0].c, &cc) < 0 || uw__sdp_conn_create(&p->s[1].c, &ac) < 0)
        abort();
    sp_drain_posts(&p->s[0]);
    if (uw__sdp_conn_hello(p->s[0].c, p->hello) < 0)
        abort();
    int rc = uw__sdp_conn_accept_hello(p->s[1].c, p->hello, sizeof(p->hello), NULL);
    if (rc < 0)
        return rc;
    sp_settle(p);
    return 0;
}

static inline int sp_setup(sp_pair *p, const uw_sdp_conn_cfg *ccfg, const uw_sdp_conn_cfg *acfg)
{
    return sp_setup_tap(p, ccfg, acfg, NULL, NULL);
}

/* Application helpers. */
static inline long sp_send(sp_side *x, const void *buf, size_t len, unsigned flags)
{
    struct iovec v = {(void *)buf, len};
    long n = (long)uw__sdp_conn_send(x->c, &v, 1, flags);
    sp_drain_tx(x);
    return n;
}

static inline long sp_recv(sp_side *x, void *buf, size_t len, unsigned flags)
{
    struct iovec v = {buf, len};
    long n = (long)uw__sdp_conn_recv(x->c, &v, 1, flags);
    sp_drain_tx(x);
    return n;
}

/* Injects a raw message into x as if the peer had sent it; with inv, as a
 * Send with Invalidate of stag. */
static inline int sp_inject_as(sp_side *x, const void *msg, uint32_t len, bool inv, uint32_t stag)
{
    if (!x->rq_n)
        return -1000;
    uw_sdp_post p = x->rq[x->rq_head];
    x->rq_head = (x->rq_head + 1) % SP_MAXQ;
    x->rq_n--;
    memcpy(p.addr, msg, len);
    x->rcvd_msgs++;
    int rc = inv ? uw__sdp_conn_on_recv_inv(x->c, p.id, len, stag)
                 : uw__sdp_conn_on_recv(x->c, p.id, len);
    sp_drain_tx(x);
    return rc;
}

static inline int sp_inject(sp_side *x, const void *msg, uint32_t len)
{
    return sp_inject_as(x, msg, len, false, 0);
}

static inline int sp_inject_inv(sp_side *x, const void *msg, uint32_t len, uint32_t stag)
{
    return sp_inject_as(x, msg, len, true, stag);
}

/* Builds a header-only or Data message with the given fields. */
static inline uint32_t sp_build(uint8_t *out, uint8_t mid, uint8_t flags, uint16_t bufs,
                                uint32_t mseq, uint32_t mseqack, uint32_t value,
                                const void *payload, uint32_t plen)
{
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    m.bsdh.mid = mid;
    m.bsdh.flags = flags;
    m.bsdh.bufs = bufs;
    m.bsdh.mseq = mseq;
    m.bsdh.mseqack = mseqack;
    int ext = uw__sdp_ext_len(mid);
    if (mid == UW_SDP_SRCAVAIL || mid == UW_SDP_SINKAVAIL) {
        m.u.avail.len = value;
        m.u.avail.stag = 0x1234;
        m.u.avail.va = 0x1000;
    } else {
        m.u.value = value;
    }
    m.bsdh.len = UW_SDP_BSDH_LEN + (uint32_t)(ext > 0 ? ext : 0) + plen;
    m.payload_len = plen;
    ssize_t h = uw__sdp_encode_hdr(&m, out, 64);
    if (h < 0)
        abort();
    if (plen)
        memcpy(out + h, payload, plen);
    return m.bsdh.len;
}

#endif
