/* SDP connection core: setup (8.1), receive Private Buffers (10), the
 * receive side of every message (6, 9.5, 10.6, 11, 12) and teardown (8.2).
 * The send side is conn_tx.c, the application's view conn_app.c. */
#include <string.h>

#include "sdp/conn_internal.h"

void uw__sdp_conn_cfg_default(uw_sdp_conn_cfg *cfg, bool accepting)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->accepting = accepting;
    /* A 64 KiB send() fits one message with its BSDH. */
    cfg->rcv_size = 65536 + 64;
    cfg->rcv_bufs = 16;
    cfg->tx_size = 65536 + 64;
    cfg->tx_slots = 16;
    /* 16 x 64 KiB each way capped a preloaded iperf3 at 0.37x TCP; growing
     * to 32 made it 1.20x. 64 did as well there but cost a direct 64 KiB
     * stream 0.84x -> 0.64x TCP (4 MiB of buffers each way falls out of
     * cache); see docs/sdp.md "Autotuning". Growth keeps the idle and
     * request/response footprint of 16. */
    cfg->rcv_bufs_max = 32;
    cfg->tx_slots_max = 32;
    cfg->max_adverts = 8;
    cfg->ird = 1;
    cfg->ord = 1;
}

int uw__sdp_conn_create(uw_sdp_conn **out, const uw_sdp_conn_cfg *cfg)
{
    if (!out || !cfg)
        return UW_EINVAL;
    uw_sdp_conn_cfg k = *cfg;
    if (!k.rcv_size_min)
        k.rcv_size_min = UW_SDP_MIN_BUF;
    if (!k.rcv_size_max)
        k.rcv_size_max =
            k.rcv_size > UW_SDP_MAX_ADVERT_LEN / 4 ? UW_SDP_MAX_ADVERT_LEN : k.rcv_size * 4;
    /* Section 10 rules 2 and 4; 6.2.1.3-6.2.1.7 (MaxAdverts, LocIRD, LocORD >= 1). */
    if (k.rcv_size < UW_SDP_MIN_BUF || k.rcv_size > UW_SDP_MAX_ADVERT_LEN ||
        k.rcv_bufs < UW_SDP_SPEC_MIN_BUFS || k.rcv_bufs > RX_CAP || k.tx_size < UW_SDP_MIN_BUF ||
        k.tx_slots < 2 || k.tx_slots > TX_CAP || !k.max_adverts || !k.ird || !k.ord ||
        k.rcv_size_min < UW_SDP_MIN_BUF || k.rcv_size_min > k.rcv_size ||
        k.rcv_size_max < k.rcv_size)
        return UW_EINVAL;
    uw_allocator a = uw__allocator(k.alloc);
    uw_sdp_conn *c = a.alloc(a.ud, sizeof(*c));
    if (!c)
        return UW_ENOMEM;
    memset(c, 0, sizeof(*c));
    c->cfg = k;
    c->a = a;
    c->rcv_size = k.rcv_size;
    c->target_bufs = k.rcv_bufs;
    c->ird = k.ird;
    c->ord = k.ord;
    c->minv = 1;
    c->rcvlowat = 1;
    c->tx_mode = c->rx_mode = UW_SDP_COMB_MODE; /* 8.1.1 steps 6 and 7e */
    c->mc_want = 0xff;
    c->tx_usable = k.tx_slots;
    c->rx_grow_max = k.rcv_bufs_max > RX_CAP ? RX_CAP : k.rcv_bufs_max;
    c->tx_grow_max = k.tx_slots_max > TX_CAP ? TX_CAP : k.tx_slots_max;
    int rc = uw__sdp_tx_init(c);
    if (rc < 0) {
        a.free(a.ud, c);
        return rc;
    }
    *out = c;
    return 0;
}

void uw__sdp_conn_destroy(uw_sdp_conn *c)
{
    if (!c)
        return;
    for (uint32_t i = 0; i < RX_CAP; i++)
        c->a.free(c->a.ud, c->rx[i].mem);
    c->a.free(c->a.ud, c->zs_mem);
    uw__sdp_tx_free(c);
    c->a.free(c->a.ud, c);
}

int uw__sdp_conn_state(const uw_sdp_conn *c)
{
    return c->state;
}

int uw__sdp_conn_llp_action(const uw_sdp_conn *c)
{
    return c->llp;
}

const char *uw__sdp_conn_why(const uw_sdp_conn *c)
{
    return c->why;
}

int uw__sdp_conn_take_error(uw_sdp_conn *c)
{
    int e = c->err;
    c->err = 0;
    return e;
}

void uw__sdp_conn_mpa_limits(uw_sdp_conn *c, uint16_t ird, uint16_t ord)
{
    /* LocIRD/LocORD must stay >= 1 (6.2.1.6); an MPA peer that grants 0
     * leaves RDMA Reads unusable, which Bcopy never needs. */
    if (ird && ird < c->ird)
        c->ird = ird;
    if (ord && ord < c->ord)
        c->ord = ord;
}

int uw__sdp_conn_test_shift_seq(uw_sdp_conn *c, uint32_t ours, uint32_t theirs)
{
    if (c->state != UW_SDP_S_OPEN || ours % HIST || theirs % HIST)
        return UW_EINVAL;
    c->last_sent += ours;
    c->peer_ack += ours;
    c->last_rcvd += theirs;
    c->adv_ack += theirs;
    for (uint32_t i = 0; i < HIST; i++)
        c->hist[i].mseqack += theirs;
    for (uint32_t i = 0; i < 64; i++)
        c->sa[i].sendsm_mseq += ours;
    c->proc_mseq += ours;
    c->rx_pc_ack += ours;
    c->zs.cancel_mseq += ours;
    c->mc_mseq += ours;
    return 0;
}

/* Abortive close (8.2.2): with a DisConn already sent and the LLP up, an
 * AbortConn goes first; otherwise no further message and the LLP is torn
 * down at once. Unsent data is discarded either way. */
static void begin_abort(uw_sdp_conn *c)
{
    for (uint32_t i = 0; i < c->tf_n; i++) {
        uint32_t id = c->tx_fifo[(c->tf_head + i) % TX_CAP];
        c->tx[id].state = TX_FREE;
        c->tx[id].fill = 0;
        c->tx_used--;
    }
    c->tf_n = 0;
    c->chr_pending = c->chra_due = c->sendsm_due = c->sinkcancelack_due = false;
    c->sendsm_extra = 0;
    c->rrc_due = false;
    c->sk_n = c->wrc_n = 0;
    c->mc_want = 0xff;
    c->mc_rx_comb = false;
    uw__sdp_zs_abort(c);
    if (c->disconn_sent && !c->llp_gone && !c->abortconn_sent && c->state == UW_SDP_S_OPEN)
        c->abort_pending = true;
    else if (!c->llp_gone)
        c->llp = UW_SDP_LLP_ABORT;
    c->state = UW_SDP_S_ERROR;
}

void uw__sdp_fail(uw_sdp_conn *c, int err, const char *why)
{
    if (c->state == UW_SDP_S_ERROR)
        return;
    c->err = c->fatal = err;
    if (!c->why)
        c->why = why;
    begin_abort(c);
}

void uw__sdp_conn_abort(uw_sdp_conn *c)
{
    if (c->state == UW_SDP_S_ERROR || c->state == UW_SDP_S_CLOSED) {
        if (!c->llp_gone && c->llp == UW_SDP_LLP_NONE)
            c->llp = UW_SDP_LLP_ABORT;
        return;
    }
    c->fatal = UW_EPIPE;
    begin_abort(c);
}

/* Both DisConns are through and our last Send completed: 8.2.1 ends with
 * the LLP's own orderly teardown. */
void uw__sdp_check_closed(uw_sdp_conn *c);
void uw__sdp_check_closed(uw_sdp_conn *c)
{
    if (c->state == UW_SDP_S_OPEN && c->disconn_done && c->rcv_eof && !c->abort_rcvd) {
        c->state = UW_SDP_S_CLOSED;
        c->st.graceful = true;
        if (!c->llp_gone)
            c->llp = UW_SDP_LLP_DISCONNECT;
    }
}

void uw__sdp_conn_llp_closed(uw_sdp_conn *c, int err)
{
    c->llp_gone = true;
    if (c->state == UW_SDP_S_CLOSED)
        return;
    if (c->state == UW_SDP_S_ERROR) {
        if (!c->fatal)
            c->fatal = UW_ECONNRESET;
        return;
    }
    /* 8.2.1 step 4 / 8.2.2: graceful only with a DisConn and no AbortConn.
     * With the peer's DisConn in, all its data is too, so the receive side
     * ends as it would have (data, then EOF) even after a reset: TCP keeps
     * what it received readable through a reset. Only our unsent data is
     * lost, which TCP reports as EPIPE. */
    if (c->rcv_eof && !c->abort_rcvd && c->state == UW_SDP_S_OPEN) {
        c->disconn_done = true;
        c->state = UW_SDP_S_CLOSED;
        c->st.graceful = c->disconn_sent && !err;
        if (c->tf_n && (err || !c->disconn_sent))
            c->err = c->fatal = UW_EPIPE;
        if (c->zs.state != ZS_NONE && c->zs.state != ZS_DONE) {
            /* A zero-copy send the peer will never finish: its buffer
             * goes back with EPIPE, as unsent Bcopy data does. */
            c->err = c->fatal = UW_EPIPE;
            uw__sdp_zs_abort(c);
        }
        return;
    }
    /* UW_EPROTO: our verbs layer sent a Terminate, the peer broke a rule
     * below SDP (a Read outside our grant, a CRC error): not a reset. */
    int e = err == UW_ETIMEDOUT || err == UW_EPROTO ? err : UW_ECONNRESET;
    c->err = c->fatal = e;
    if (!c->why && e == UW_EPROTO)
        c->why = "the peer broke an RDMAP, DDP or MPA rule: Terminate sent";
    if (!c->why && c->state != UW_SDP_S_OPEN)
        c->why = "8.1.2: the LLP connection was torn down during setup";
    begin_abort(c);
}

/* ---- Receive Private Buffers (section 10) --------------------------------- */

uint32_t uw__sdp_conn_max_ids(const uw_sdp_conn *c)
{
    (void)c;
    return ZS_ID + 1;
}

int uw__sdp_conn_next_post(uw_sdp_conn *c, uw_sdp_post *out)
{
    if (c->state == UW_SDP_S_ERROR || c->state == UW_SDP_S_CLOSED || c->llp_gone)
        return 0;
    /* Buffers holding unread data count against SO_RCVBUF too: the peer
     * stops when the reader does, as TCP's window closes. */
    if (c->posted + c->df_n >= c->target_bufs || c->posted >= 65535)
        return 0;
    for (uint32_t id = 0; id < RX_CAP; id++) {
        rxbuf *b = &c->rx[id];
        if (b->state != RX_FREE)
            continue;
        /* 10.6.2: new posts take the new size at once, without waiting for
         * the old-size buffers to complete. */
        if (!b->mem || b->size != c->rcv_size) {
            uint8_t *m = c->a.alloc(c->a.ud, c->rcv_size);
            if (!m)
                return UW_ENOMEM;
            c->a.free(c->a.ud, b->mem);
            b->mem = m;
            b->size = c->rcv_size;
        }
        b->state = RX_POSTED;
        c->post_fifo[(c->pf_head + c->pf_n) % RX_CAP] = id;
        c->pf_n++;
        c->posted++;
        out->id = id;
        out->addr = b->mem;
        out->len = b->size;
        return 1;
    }
    return 0;
}

/* A buffer's payload is consumed (or it carried none): it may be posted
 * again, which is what later credit updates advertise. */
void uw__sdp_rx_release(uw_sdp_conn *c, uint32_t id)
{
    c->rx[id].state = RX_FREE;
    c->owed++;
}

/* ---- Setup (8.1.1) ---------------------------------------------------------- */

static int check_setup_common(uint8_t majv, uint16_t max_adverts, uint16_t ird, uint16_t ord,
                              uint16_t bufs, uint32_t rcv_sz, const char **why)
{
    const char *w = NULL;
    if (majv != 1)
        w = "6.2.1.1/8.1.1 step 3a: unsupported SDP major version";
    else if (!max_adverts)
        w = "6.2.1.3/8.1.1 step 3a: MaxAdverts is zero";
    else if (!ird || !ord)
        w = "8.1.1 step 3a: LocIRD or LocORD is zero";
    else if (bufs < 3)
        w = "10.3: initial send credit below three";
    else if (rcv_sz < UW_SDP_MIN_BUF || rcv_sz > UW_SDP_MAX_ADVERT_LEN)
        w = "section 10 rule 4: receive Private Buffer size out of range";
    if (why)
        *why = w;
    return w ? UW_EPROTO : 0;
}

int uw__sdp_conn_hello(uw_sdp_conn *c, uint8_t out[UW_SDP_HELLO_LEN])
{
    if (c->cfg.accepting || c->state != UW_SDP_S_IDLE)
        return UW_EINVAL;
    /* 8.1.1 step 1c: the buffers Bufs advertises are posted first. */
    if (c->posted < c->target_bufs)
        return UW_EBUSY;
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    m.bsdh.mid = UW_SDP_HELLO;
    m.bsdh.bufs = (uint16_t)c->posted;
    m.bsdh.len = UW_SDP_HELLO_LEN;
    m.u.hello.majv = 1;
    m.u.hello.minv = 1;
    m.u.hello.max_adverts = c->cfg.max_adverts;
    m.u.hello.des_rem_rcv_sz = c->cfg.tx_size;
    m.u.hello.local_rcv_sz = c->rcv_size;
    m.u.hello.loc_ird = c->ird;
    m.u.hello.loc_ord = c->ord;
    ssize_t n = uw__sdp_encode_hdr(&m, out, UW_SDP_HELLO_LEN);
    if (n < 0)
        return (int)n;
    c->setup_bufs = (uint16_t)c->posted;
    /* Notes section 3: the Hello is MSeq 0; it uses no Private Buffer, so
     * the peer's first message after the HelloAck will acknowledge it with
     * MSeqAck 0 while its credit counts the HelloAck. */
    c->hist[0].bufs = (uint16_t)c->posted;
    c->hist[0].mseqack = UINT32_MAX;
    c->last_sent = 0;
    c->any_sent = true;
    c->adv_bufs = (uint16_t)c->posted;
    c->adv_ack = UINT32_MAX;
    c->state = UW_SDP_S_HELLO;
    return 0;
}

int uw__sdp_conn_accept_hello(uw_sdp_conn *c, const uint8_t *pd, size_t len, const char **why)
{
    if (why)
        *why = NULL;
    if (!c->cfg.accepting || c->state != UW_SDP_S_IDLE)
        return UW_EINVAL;
    uw_sdp_msg m;
    if (uw__sdp_decode(pd, len, &m) < 0 || m.bsdh.mid != UW_SDP_HELLO) {
        if (why)
            *why = "6.2.1/8.1.1: the MPA Request's private data is not an SDP Hello";
        return UW_EPROTO;
    }
    const uw_sdp_hh *h = &m.u.hello;
    int rc = check_setup_common(h->majv, h->max_adverts, h->loc_ird, h->loc_ord, m.bsdh.bufs,
                                h->local_rcv_sz, why);
    if (rc < 0)
        return rc;
    c->minv = h->minv < 1 ? h->minv : 1; /* step 3b */
    c->remote_max_adverts = h->max_adverts;
    if (h->loc_ord < c->ird) /* step 4d: the peer never has more Reads outstanding */
        c->ird = h->loc_ord;
    if (h->loc_ird < c->ord) /* step 4e */
        c->ord = h->loc_ird;
    /* 6.2.1.4: DesRemRcvSz is a hint; smaller buffers than configured save
     * memory when the peer's sends are small, larger ones are not granted. */
    if (!c->posted) {
        uint32_t want =
            h->des_rem_rcv_sz < c->cfg.rcv_size_min ? c->cfg.rcv_size_min : h->des_rem_rcv_sz;
        if (want < c->rcv_size)
            c->rcv_size = want;
    }
    c->remote_rcv_size = c->fill_limit = h->local_rcv_sz;
    c->remote_setup_bufs = m.bsdh.bufs;
    c->peer_bufs = m.bsdh.bufs;
    c->peer_ack = UINT32_MAX; /* notes section 3: our HelloAck uses one of them */
    c->last_rcvd = 0;
    c->state = UW_SDP_S_HELLO; /* the HelloAck goes out through next_tx */
    return 0;
}

int uw__sdp_conn_params(const uw_sdp_conn *c, uw_sdp_params *out)
{
    if (c->state == UW_SDP_S_IDLE)
        return UW_ENOTCONN;
    out->majv = 1;
    out->minv = c->minv;
    out->local_max_adverts = c->cfg.max_adverts;
    out->remote_max_adverts = c->remote_max_adverts;
    out->local_rcv_size = c->rcv_size;
    out->remote_rcv_size = c->remote_rcv_size;
    out->ird = c->ird;
    out->ord = c->ord;
    out->local_bufs = c->setup_bufs;
    out->remote_bufs = c->remote_setup_bufs;
    return 0;
}

static int on_helloack(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    const uw_sdp_hah *h = &m->u.helloack;
    const char *why = NULL;
    if (check_setup_common(h->majv, h->max_adverts, h->loc_ird, h->loc_ord, m->bsdh.bufs,
                           h->act_rcv_sz, &why) < 0) {
        uw__sdp_fail(c, UW_EPROTO, why);
        return UW_EPROTO;
    }
    c->minv = h->minv < c->minv ? h->minv : c->minv; /* step 7b */
    c->remote_max_adverts = h->max_adverts;
    if (h->loc_ord < c->ird) /* step 7c */
        c->ird = h->loc_ord;
    if (h->loc_ird < c->ord) /* step 7d */
        c->ord = h->loc_ird;
    c->remote_rcv_size = c->fill_limit = h->act_rcv_sz;
    c->remote_setup_bufs = m->bsdh.bufs;
    c->peer_bufs = m->bsdh.bufs;
    c->peer_ack = 0;          /* 6.2.2: MSeqAck of the HelloAck is not checked */
    c->state = UW_SDP_S_OPEN; /* step 7e: Combined Mode both ways */
    return 0;
}

/* ---- Receiving messages ------------------------------------------------------- */

int uw__sdp_violate(uw_sdp_conn *c, const char *why)
{
    uw__sdp_fail(c, UW_EPROTO, why);
    return UW_EPROTO;
}

/* Section 10.5 seen from the receiver: the credit the peer had when it sent
 * m follows from the Bufs/MSeqAck of our message it had last received. */
static int check_peer_credit(uw_sdp_conn *c, const uw_sdp_msg *m, bool payload)
{
    uint32_t k = m->bsdh.mseqack;
    if (uw__sdp_seq_diff(c->last_sent, k) >= (int32_t)HIST)
        return 0; /* older than our history: cannot judge */
    const hist_ent *h = &c->hist[k % HIST];
    int64_t credit = (int64_t)h->bufs - (int64_t)uw__sdp_seq_diff(m->bsdh.mseq - 1, h->mseqack);
    if (credit < 1)
        return uw__sdp_violate(c, "10.5: message sent without a send credit (credit overrun)");
    if (credit <= 2 && payload)
        return uw__sdp_violate(c, "10.5: ULP payload sent with two or fewer credits left");
    return 0;
}

/* Data payload goes to the read queue; the buffer stays the reader's. */
void uw__sdp_queue_payload(uw_sdp_conn *c, uint32_t id, const uw_sdp_msg *m)
{
    c->rcv_nxt += m->payload_len;
    c->st.received += m->payload_len;
    /* A small payload joins the unread one before it when it fits, so its
     * buffer can be posted again at once: a buffer per message would
     * otherwise cap what is buffered at Bufs messages however small they
     * are (9.5.6 asks for SO_RCVBUF worth of data). */
    if (c->df_n && m->payload_len <= SMALL_PAYLOAD) {
        rxbuf *t = &c->rx[c->data_fifo[(c->df_head + c->df_n - 1) % RX_CAP]];
        if (t->size - t->end >= m->payload_len) {
            memcpy(t->mem + t->end, m->payload, m->payload_len);
            t->end += m->payload_len;
            uw__sdp_rx_release(c, id);
            return;
        }
    }
    /* The peer cannot send payload with two credits or fewer (10.5): our
     * window, not its data, may be what paces the stream. */
    if (uw__sdp_peer_credit_est(c) <= 2)
        c->rx_starved = true;
    rxbuf *b = &c->rx[id];
    b->state = RX_DATA;
    b->off = (uint32_t)(m->payload - b->mem);
    b->end = b->off + m->payload_len;
    c->data_fifo[(c->df_head + c->df_n) % RX_CAP] = id;
    c->df_n++;
}

static void urgent_arrived(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    /* 9.5.3: the urgent octet is the last of the payload. As TCP does, a new
     * mark replaces an older one, whose octet then reads as normal data
     * unless the reader stands right at it (then it is dropped). */
    if ((c->urg == URG_VALID || c->urg == URG_READ) && !c->oobinline && c->copied == c->urg_off &&
        c->urg_off < c->rcv_nxt - m->payload_len)
        uw__sdp_skip_urgent(c);
    c->urg = URG_VALID;
    c->urg_off = c->rcv_nxt - 1;
    c->urg_byte = m->payload[m->payload_len - 1];
    c->st.oob_received++;
}

/* Bcopy data of a SrcAvail we answered with SendSm (9.5.2.1, 11.2, 11.3). */
static int account_srcavail(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    uint32_t n = m->payload_len;
    while (n && c->sa_n) {
        srcavail *s = &c->sa[c->sa_head % 64];
        if (!s->sendsm_sent || uw__sdp_seq_diff(m->bsdh.mseqack, s->sendsm_mseq) < 0)
            return uw__sdp_violate(c,
                                   "11.2/11.3: ULP payload sent while a SrcAvail is outstanding");
        uint32_t k = n < s->remaining ? n : s->remaining;
        s->remaining -= k;
        n -= k;
        if (!s->remaining) {
            c->sa_head++;
            c->sa_n--;
            if (c->sa_n && !c->cfg.zcopy_sink)
                c->sendsm_due = true; /* the next one is answered now */
        } else
            break;
    }
    return 0;
}

static int on_modechange(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    uint8_t to = m->u.mch.mode;
    if (m->u.mch.s) {
        /* Our send half: the peer (Data Sink) is Mode Master only in
         * Buffered Mode, and may only move it to Combined (12.2). */
        if (c->tx_mode != UW_SDP_BUFF_MODE || to != UW_SDP_COMB_MODE)
            return uw__sdp_violate(
                c, "12/Figure 27: ModeChange for our send half from the Mode Slave");
        c->tx_mode = to;
        return 0;
    }
    /* Our receive half: the peer (Data Source) masters Combined and
     * Pipelined (Figure 27); Figure 26 transitions only. */
    uint8_t from = c->rx_mode;
    bool ok = (from == UW_SDP_COMB_MODE && (to == UW_SDP_BUFF_MODE || to == UW_SDP_PIPE_MODE)) ||
              (from == UW_SDP_PIPE_MODE && to == UW_SDP_COMB_MODE);
    if (!ok)
        return uw__sdp_violate(c, "12/Figure 26: ModeChange to the current or an unreachable Mode");
    if (from == UW_SDP_COMB_MODE && to == UW_SDP_BUFF_MODE && c->sa_n &&
        !c->sa[c->sa_head % 64].sendsm_sent) /* SendSm Processes it (12.1) */
        return uw__sdp_violate(c, "12.1: ModeChange to Buffered before the SrcAvail was Processed");
    /* 12.1: ... Processed as the source saw it: by a SendSm or RdmaRdCompl
     * of ours that its MSeqAck acknowledges. */
    /* A sink may hold its MSeqAck below our SrcAvailCancel while it
     * finishes Reads (9.5.4): no MSeqAck check until that is answered. */
    bool held = c->zs.state == ZS_SENT && c->zs.cancel_sent;
    if (to == UW_SDP_BUFF_MODE && c->proc_valid && !held &&
        uw__sdp_seq_diff(m->bsdh.mseqack, c->proc_mseq) < 0)
        return uw__sdp_violate(
            c, "12.1: ModeChange to Buffered before our SendSm or RdmaRdCompl reached the source");
    /* 12.4: no further move until the source received a message of ours
     * sent after its move out of Pipelined. */
    if (c->rx_pc_pending && !held && uw__sdp_seq_diff(m->bsdh.mseqack, c->rx_pc_ack) < 0)
        return uw__sdp_violate(
            c, "12.4: ModeChange before the move out of Pipelined was acknowledged");
    c->rx_pc_pending = false;
    if (from == UW_SDP_PIPE_MODE) { /* Figure 29: our SinkAvail is discarded */
        uw__sdp_zk_drop(c);
        c->rx_pc_pending = true;
        c->rx_pc_ack = c->last_sent + 1;
    }
    c->rx_mode = to;
    c->st.mode_changes++;
    return 0;
}

static int on_chrcvbuf(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    c->st.chrcvbuf_received++;
    if (c->chr_outstanding) {
        /* 10.6.1: both sent one at once. */
        if (c->cfg.accepting)
            return 0;
        c->chr_outstanding = false;
        c->chr_resend = true;
    }
    if (c->chra_due)
        return uw__sdp_violate(c, "10.6: a second ChRcvBuf before our ChRcvBufAck");
    uint32_t want = m->u.value, old = c->rcv_size, now = old;
    if (want > old) /* an increase: grow or stay */
        now = uw__sdp_min32(want, c->cfg.rcv_size_max);
    else if (want < old) /* a decrease: never below the size asked for */
        now = want < c->cfg.rcv_size_min ? c->cfg.rcv_size_min : want;
    if (now < old && now < want)
        now = old;
    c->rcv_size = now;
    c->chra_size = now;
    c->chra_due = true;
    /* Growth is acknowledged once every old-size buffer is consumed; the
     * buffers posted from now on already have the new size (10.6.2). */
    c->chra_wait_old = now > old;
    c->old_size_left = c->chra_wait_old ? c->posted : 0;
    return 0;
}

static int on_chrcvbufack(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    c->st.chrcvbufack_received++;
    if (!c->chr_outstanding)
        return uw__sdp_violate(c, "10.6: ChRcvBufAck without a ChRcvBuf");
    c->chr_outstanding = false;
    uint32_t act = m->u.value;
    if (act < UW_SDP_MIN_BUF || act > UW_SDP_MAX_ADVERT_LEN)
        return uw__sdp_violate(c, "10.6: ChRcvBufAck size out of range");
    bool grow = c->chr_size > c->chr_prev;
    if (grow ? act < c->chr_prev : act > c->chr_prev)
        return uw__sdp_violate(
            c, "10.6: ChRcvBufAck changed the size against the request's direction");
    if (!grow && act < c->chr_size) /* we already fill messages of chr_size */
        return uw__sdp_violate(c, "10.6: ChRcvBufAck decreased below the size requested");
    if (act == c->chr_prev) {
        if (grow)
            c->chr_no_grow = true;
        else
            c->chr_no_shrink = true;
    }
    c->remote_rcv_size = act;
    c->fill_limit = act;
    return 0;
}

static int dispatch(uw_sdp_conn *c, uint32_t id, const uw_sdp_msg *m)
{
    bool payload = m->payload_len > 0;
    if (payload && (c->rcv_eof || c->abort_rcvd))
        return uw__sdp_violate(c, "8.2.1: ULP payload after DisConn");
    if (payload)
        uw__sdp_wz_payload_in(c, m->payload_len);
    if (payload && m->bsdh.mid != UW_SDP_SRCAVAIL && c->sa_n) {
        int rc = account_srcavail(c, m);
        if (rc < 0)
            return rc;
    }
    if (m->bsdh.flags & UW_SDP_OOB_PEND) {
        /* A new mark is announced (Linux tcp_check_urg): a reader standing on
         * the old urgent octet, which is there, would read it as data once
         * the mark moves, so it is dropped; also when it was already read
         * with MSG_OOB, which the state below forgets. */
        if ((c->urg == URG_VALID || c->urg == URG_READ) && !c->oobinline &&
            c->copied == c->urg_off && c->urg_off < c->rcv_nxt)
            uw__sdp_skip_urgent(c);
        if (c->urg != URG_VALID || c->urg_off < c->copied)
            c->urg = URG_PENDING;
    }
    switch (m->bsdh.mid) {
    case UW_SDP_DATA:
        if (!payload) {
            /* A credit update: its buffer goes back without obliging us to
             * answer, or two updates could answer each other for ever. */
            c->rx[id].state = RX_FREE;
            return 0;
        }
        c->st.data_msgs_received++;
        uw__sdp_queue_payload(c, id, m);
        if (m->bsdh.flags & UW_SDP_OOB_PRES)
            urgent_arrived(c, m);
        return 0;
    case UW_SDP_SRCAVAIL:
        return uw__sdp_on_srcavail(c, id, m);
    case UW_SDP_SINKAVAIL:
        return uw__sdp_on_sinkavail(c, id, m);
    default:
        break;
    }
    uw__sdp_rx_release(c, id); /* no payload for the reader */
    switch (m->bsdh.mid) {
    case UW_SDP_DISCONN:
        if (c->rcv_eof)
            return uw__sdp_violate(c, "8.2.1: a second DisConn");
        c->rcv_eof = true;
        /* 8.2.1 remote step 1: our SinkAvails are canceled. */
        uw__sdp_zk_drop(c);
        uw__sdp_check_closed(c);
        return 0;
    case UW_SDP_ABORTCONN:
        c->abort_rcvd = true;
        c->err = c->fatal = UW_ECONNRESET;
        c->why = "8.2.2: the peer closed abortively (AbortConn)";
        begin_abort(c);
        c->llp = UW_SDP_LLP_ABORT;
        return 0;
    case UW_SDP_SENDSM:
        return uw__sdp_on_sendsm(c, m);
    case UW_SDP_RDMARDCOMPL:
        return uw__sdp_on_rdmardcompl(c, m);
    case UW_SDP_RDMAWRCOMPL:
        return uw__sdp_on_rdmawrcompl(c, m);
    case UW_SDP_SINKCANCELACK:
        return uw__sdp_on_sinkcancelack(c);
    case UW_SDP_MODECHANGE:
        return on_modechange(c, m);
    case UW_SDP_SRCAVAILCANCEL: {
        /* 9.5.4: Unprocessed SrcAvails (no SendSm yet) are discarded; if any
         * was, exactly one SendSm completes the cancel. */
        uint32_t keep = 0;
        for (uint32_t i = 0; i < c->sa_n; i++) {
            const srcavail *sa = &c->sa[(c->sa_head + i) % 64];
            /* In-Process ones (a Read of ours began) are kept: 9.5.4's
             * SHOULD; their RdmaRdCompls Process them. */
            if (sa->sendsm_sent || sa->started)
                keep = i + 1;
        }
        /* Kept In-Process ones: a SendSm for them now reads as the answer
         * to the cancel (9.5.4 step 3), so it must end them here too. */
        for (uint32_t i = 0; i < keep; i++) {
            srcavail *sa = &c->sa[(c->sa_head + i) % 64];
            sa->revoked = !sa->sendsm_sent;
        }
        if (keep < c->sa_n) {
            c->sa_n = keep;
            c->sendsm_due = false;
            c->sendsm_extra++;
        }
        return 0;
    }
    case UW_SDP_SINKAVAILCANCEL:
        uw__sdp_on_sinkavailcancel(c);
        return 0;
    case UW_SDP_CHRCVBUF:
        return on_chrcvbuf(c, m);
    case UW_SDP_CHRCVBUFACK:
        return on_chrcvbufack(c, m);
    case UW_SDP_SUSPCOMM:
    case UW_SDP_SUSPCOMMACK:
        return uw__sdp_violate(c,
                               "13: socket duplication (SuspComm) is not supported by this peer");
    case UW_SDP_HELLO:
    case UW_SDP_HELLOACK:
        return uw__sdp_violate(c, "8.1.1: Hello or HelloAck after setup");
    default: /* experimental MIDs: flow-control fields only */
        return 0;
    }
}

int uw__sdp_conn_on_recv_inv(uw_sdp_conn *c, uint32_t id, uint32_t len, uint32_t inv_stag)
{
    c->rx_inv = true;
    c->rx_inv_stag = inv_stag;
    int rc = uw__sdp_conn_on_recv(c, id, len);
    c->rx_inv = false;
    return rc;
}

int uw__sdp_conn_on_recv(uw_sdp_conn *c, uint32_t id, uint32_t len)
{
    if (id >= RX_CAP || c->rx[id].state != RX_POSTED || !c->pf_n || c->post_fifo[c->pf_head] != id)
        return UW_EINVAL;
    rxbuf *b = &c->rx[id];
    c->pf_head = (c->pf_head + 1) % RX_CAP;
    c->pf_n--;
    c->posted--;
    if (c->old_size_left && --c->old_size_left == 0)
        c->chra_wait_old = false;
    if (c->state == UW_SDP_S_ERROR || c->state == UW_SDP_S_CLOSED) {
        uw__sdp_rx_release(c, id);
        if (c->state == UW_SDP_S_ERROR)
            return 0;
        /* 8.2.1: the peer's DisConn came before its payload-free messages
         * that it built before our DisConn reached it (credit updates, a
         * ChRcvBufAck for our last ChRcvBuf): they may still arrive. */
        uw_sdp_msg lm;
        if (len <= b->size && uw__sdp_decode(b->mem, len, &lm) == 0 && !lm.payload_len)
            return 0;
        return uw__sdp_violate(c, "8.2.1: message after the close");
    }
    if (len > b->size) {
        uw__sdp_rx_release(c, id);
        uw__sdp_fail(c, UW_EMSGSIZE, "10 rule 3: message larger than our receive Private Buffer");
        return UW_EMSGSIZE;
    }
    uw_sdp_msg m;
    int rc = uw__sdp_decode(b->mem, len, &m);
    if (rc < 0) {
        uw__sdp_rx_release(c, id);
        return uw__sdp_violate(c, rc == UW_EMSGSIZE
                                      ? "6.1: message shorter than its headers"
                                      : "6: malformed SDP message (Len, MID or flags)");
    }
    c->st.msgs_received++;
    if (c->state == UW_SDP_S_HELLO && !c->cfg.accepting) {
        uw__sdp_rx_release(c, id);
        if (m.bsdh.mid != UW_SDP_HELLOACK)
            return uw__sdp_violate(c, "8.1.1 step 2: the first message was not a HelloAck");
        c->last_rcvd = 0;
        c->st.msgs_received--;
        return on_helloack(c, &m);
    }
    if (c->state != UW_SDP_S_OPEN) {
        uw__sdp_rx_release(c, id);
        return uw__sdp_violate(c, "8.1.1: message before setup completed");
    }
    /* 10.1: in MSeq order, no gaps; 6.1.6: no acknowledgement from the future. */
    if (m.bsdh.mseq != c->last_rcvd + 1) {
        uw__sdp_rx_release(c, id);
        return uw__sdp_violate(c, "6.1.5/10.1: MSeq out of order (a gap or a repeat)");
    }
    if (uw__sdp_seq_diff(m.bsdh.mseqack, c->last_sent) > 0) {
        uw__sdp_rx_release(c, id);
        return uw__sdp_violate(c, "6.1.6: MSeqAck acknowledges a message we never sent");
    }
    rc = check_peer_credit(c, &m, m.payload_len > 0);
    if (rc < 0) {
        uw__sdp_rx_release(c, id);
        return rc;
    }
    c->last_rcvd = m.bsdh.mseq;
    c->peer_bufs = m.bsdh.bufs;
    c->peer_ack = m.bsdh.mseqack;
    /* The 12.1/12.4 marks are met once acknowledged: dropped then, so an
     * old MSeq is never compared again after 2^31 more messages. */
    if (c->proc_valid && uw__sdp_seq_diff(c->peer_ack, c->proc_mseq) >= 0)
        c->proc_valid = false;
    if (c->rx_pc_pending && uw__sdp_seq_diff(c->peer_ack, c->rx_pc_ack) >= 0)
        c->rx_pc_pending = false;
    if (c->rx_inv && m.bsdh.mid != UW_SDP_RDMARDCOMPL && m.bsdh.mid != UW_SDP_RDMAWRCOMPL) {
        uw__sdp_rx_release(c, id);
        return uw__sdp_violate(c, "9.2 step 3/9.3 step 2: Send with Invalidate on a message "
                                  "other than RdmaRdCompl or RdmaWrCompl");
    }
    rc = dispatch(c, id, &m);
    if (rc < 0 && c->rx[id].state == RX_POSTED)
        uw__sdp_rx_release(c, id);
    return rc;
}

/* ---- Application controls ------------------------------------------------------- */

int uw__sdp_conn_shutdown(uw_sdp_conn *c, int how)
{
    if (how != UW_SDP_SHUT_RD && how != UW_SDP_SHUT_WR && how != UW_SDP_SHUT_RDWR)
        return UW_EINVAL;
    if (c->state == UW_SDP_S_IDLE || c->state == UW_SDP_S_HELLO)
        return UW_ENOTCONN;
    if (how != UW_SDP_SHUT_WR)
        c->shut_rd = true;
    if (how != UW_SDP_SHUT_RD && !c->shut_wr && c->state == UW_SDP_S_OPEN) {
        c->shut_wr = true;
        uw__sdp_seal(c); /* 8.2.1 step 1: everything queued goes before the DisConn */
    }
    return 0;
}

int uw__sdp_conn_chrcvbuf(uw_sdp_conn *c, uint32_t size)
{
    if (c->state != UW_SDP_S_OPEN || size < UW_SDP_MIN_BUF || size > UW_SDP_MAX_ADVERT_LEN ||
        c->shut_wr)
        return UW_EINVAL;
    if (c->chr_pending || c->chr_outstanding)
        return UW_EBUSY; /* 10.6: one unacknowledged ChRcvBuf at a time */
    uint32_t cur = c->remote_rcv_size;
    if ((size > cur && c->chr_no_grow) || (size < cur && c->chr_no_shrink))
        return UW_EPERM;
    c->chr_prev = cur;
    c->chr_size = size;
    c->chr_pending = true;
    /* It goes out after the data queued so far; a decrease applies to
     * everything filled from now on (10.6), an increase only after the Ack. */
    uw__sdp_seal(c);
    c->chr_barrier = c->sealed;
    if (size < c->fill_limit)
        c->fill_limit = size;
    return 0;
}

int uw__sdp_conn_setopt(uw_sdp_conn *c, int opt, int v)
{
    switch (opt) {
    case UW_SDP_OPT_NODELAY:
        c->nodelay = v != 0;
        return 0;
    case UW_SDP_OPT_CORK:
        c->cork = v != 0;
        return 0;
    case UW_SDP_OPT_OOBINLINE:
        c->oobinline = v != 0;
        return 0;
    case UW_SDP_OPT_RCVLOWAT:
        c->rcvlowat = v < 1 ? 1 : (uint32_t)v;
        return 0;
    case UW_SDP_OPT_RCVBUF: {
        /* More buffers may be posted at any time (10.3); fewer just means
         * not posting again, so Bufs shrinks as messages arrive. */
        uint64_t n = v <= 0 ? 0 : (uint64_t)v / c->rcv_size;
        c->rx_grow_max = 0; /* a size the application chose stays (TCP's SOCK_RCVBUF_LOCK) */
        c->target_bufs = (uint32_t)(n < UW_SDP_MIN_BUFS ? UW_SDP_MIN_BUFS
                                    : n > RX_CAP        ? RX_CAP
                                                        : n);
        return 0;
    }
    case UW_SDP_OPT_SNDBUF: {
        uint64_t n = v <= 0 ? 0 : (uint64_t)v / c->cfg.tx_size;
        c->tx_grow_max = 0;
        c->tx_usable = (uint32_t)(n < 2 ? 2 : n > TX_CAP ? TX_CAP : n);
        return 0;
    }
    default:
        return UW_EINVAL;
    }
}

int uw__sdp_conn_getopt(const uw_sdp_conn *c, int opt)
{
    switch (opt) {
    case UW_SDP_OPT_NODELAY:
        return c->nodelay;
    case UW_SDP_OPT_CORK:
        return c->cork;
    case UW_SDP_OPT_OOBINLINE:
        return c->oobinline;
    case UW_SDP_OPT_RCVLOWAT:
        return (int)c->rcvlowat;
    case UW_SDP_OPT_RCVBUF: {
        uint64_t v = (uint64_t)c->target_bufs * c->rcv_size;
        return v > INT32_MAX ? INT32_MAX : (int)v;
    }
    case UW_SDP_OPT_SNDBUF: {
        uint64_t v = (uint64_t)c->tx_usable * c->cfg.tx_size;
        return v > INT32_MAX ? INT32_MAX : (int)v;
    }
    default:
        return UW_EINVAL;
    }
}

void uw__sdp_conn_stats(const uw_sdp_conn *c, uw_sdp_stats *out)
{
    *out = c->st;
    int32_t cr = uw__sdp_send_credit(c);
    int32_t pc = uw__sdp_peer_credit_est(c);
    out->send_credit = cr < 0 ? 0 : (uint32_t)cr;
    out->peer_credit = pc < 0 ? 0 : (uint32_t)pc;
    out->bufs_posted = c->posted;
    out->tx_mode = c->tx_mode;
    out->rx_mode = c->rx_mode;
}
