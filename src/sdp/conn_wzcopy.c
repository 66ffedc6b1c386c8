/* Write Zcopy (draft-pinkerton-iwarp-sdp-01 9.3, 9.5.1, 9.5.2.2, 9.5.5) in
 * both roles, and the mode changes we master (11, 12). conn.h describes
 * the calls.
 *
 * Keeping NonDiscards (sink) and PotentialNonDiscards (source) in step.
 * A Data message that meets an outstanding SinkAvail at the sink completes
 * it and leaves NonDiscards alone (6.3.3.4, 9.5.1 rule 1). The source sees
 * the same thing happen when it sends payload while holding a current
 * SinkAvail it did not use: that message consumes the oldest one, so it is
 * dropped instead of counting the message in PotentialNonDiscards (9.5.2.2
 * points to 9.5.1 for exactly this case). Counting it as well would leave
 * the source one ahead for good, and every later SinkAvail would be taken
 * for stale while the sink keeps one outstanding. */
#include <string.h>

#include "sdp/conn_internal.h"

#define MC_NONE 0xffu

/* ---- Modes we master (12, Figures 26-28) ------------------------------------ */

static void mc_acked(uw_sdp_conn *c)
{
    /* 12.4: signed comparison of MSeqAck with the ModeChange's MSeq. */
    if (c->mc_wait_ack && uw__sdp_seq_diff(c->peer_ack, c->mc_mseq) >= 0)
        c->mc_wait_ack = false;
}

int uw__sdp_conn_set_mode(uw_sdp_conn *c, uint8_t mode)
{
    if (mode > UW_SDP_PIPE_MODE)
        return UW_EINVAL;
    if (c->state != UW_SDP_S_OPEN)
        return UW_ENOTCONN;
    if (c->tx_mode == UW_SDP_BUFF_MODE)
        return mode == UW_SDP_BUFF_MODE ? 0 : UW_EPERM; /* the sink masters Buffered */
    if (mode == c->tx_mode) {
        c->mc_want = MC_NONE; /* 12: never a ModeChange to the current mode */
        return 0;
    }
    if (c->tx_mode == UW_SDP_PIPE_MODE && mode == UW_SDP_BUFF_MODE)
        return UW_EINVAL; /* Figure 26: by way of Combined */
    c->mc_want = mode;
    return 0;
}

int uw__sdp_conn_rx_combined(uw_sdp_conn *c)
{
    if (c->state != UW_SDP_S_OPEN)
        return UW_ENOTCONN;
    if (c->rx_mode != UW_SDP_BUFF_MODE)
        return UW_EPERM; /* the source masters Combined and Pipelined */
    c->mc_rx_comb = true;
    return 0;
}

bool uw__sdp_conn_mode_hint(const uw_sdp_conn *c)
{
    /* 6.1.2: the master ignores REQ_PIPE in Buffered Mode. */
    return c->tx_mode != UW_SDP_BUFF_MODE && c->peer_wants_pipe;
}

void uw__sdp_conn_want_pipe(uw_sdp_conn *c, bool on)
{
    c->want_rx_pipe = on;
}

static bool zs_active(const uw_sdp_conn *c)
{
    return c->zs.state == ZS_QUEUED || c->zs.state == ZS_SENT;
}

/* Whether section 12 lets our ModeChange go now. */
static bool mc_ready(const uw_sdp_conn *c)
{
    if (c->mc_want == MC_NONE || c->mc_wait_ack)
        return false;
    if (c->mc_want == UW_SDP_BUFF_MODE) /* 12.1: the SrcAvail Processed first */
        return !zs_active(c);
    if (c->tx_mode == UW_SDP_PIPE_MODE)    /* Figure 28: Writes reported first; */
        return !c->wrc_n && !zs_active(c); /* no SrcAvail to re-issue */
    return true;                           /* 12.3 */
}

static int send_modechange(uw_sdp_conn *c, uw_sdp_tx *out)
{
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    m.bsdh.mid = UW_SDP_MODECHANGE;
    m.u.mch.mode = c->mc_want;
    m.u.mch.s = false; /* the peer's receive half */
    int r = uw__sdp_send_msg(c, &m, false, out);
    if (r <= 0)
        return r;
    if (c->tx_mode == UW_SDP_PIPE_MODE) {
        /* Figure 28: incomplete SinkAvails are discarded (the sink drops
         * them too on the ModeChange), later ones ignored until acked. */
        c->sk_n = 0;
        c->mc_wait_ack = true;
        c->mc_pnd = c->pnd;
        c->mc_mseq = c->last_sent;
    }
    c->tx_mode = c->mc_want; /* 12: at once */
    c->mc_want = MC_NONE;
    c->st.mode_changes++;
    return 1;
}

/* ---- Data Sink ------------------------------------------------------------------ */

static void zk_end(uw_sdp_conn *c, uint32_t placed, uint32_t bcopy)
{
    zsink *k = &c->zk;
    /* 9.5.5: a cancel Processed by other means may still be acked (a peer
     * that canceled the SinkAvail In-Process reports the Write, then acks). */
    c->zk_stray_ack = k->cancel_sent;
    k->state = ZK_DONE;
    k->placed = placed;
    k->bcopy = bcopy;
    k->cancel_due = k->cancel_sent = false;
}

void uw__sdp_zk_drop(uw_sdp_conn *c)
{
    if (c->zk.state == ZK_QUEUED || c->zk.state == ZK_SENT)
        zk_end(c, 0, 0);
}

int uw__sdp_conn_zsink(uw_sdp_conn *c, const uw_sdp_zsink *z)
{
    if (!z || !z->addr)
        return UW_EINVAL;
    if (c->state == UW_SDP_S_ERROR)
        return c->fatal ? c->fatal : UW_ECONNRESET;
    if (c->state != UW_SDP_S_OPEN)
        return UW_ENOTCONN;
    if (c->rx_mode != UW_SDP_PIPE_MODE || !c->remote_max_adverts)
        return UW_EPERM;
    /* 6.2.1.3: with our SrcAvail outstanding too, within the peer's limit. */
    if ((c->zs.state == ZS_QUEUED || c->zs.state == ZS_SENT) && c->remote_max_adverts < 2)
        return UW_EAGAIN;
    /* 9.5.1: only buffers larger than our receive Private Buffers. */
    if (z->len <= c->rcv_size || z->len > UW_SDP_MAX_ADVERT_LEN)
        return UW_EINVAL;
    /* Data first; 11.3 rule 2a: a SrcAvail is Read, not answered. */
    if (c->zk.state != ZK_NONE || c->rcv_nxt != c->copied || c->df_n || c->sa_n || c->rcv_eof ||
        c->shut_rd || c->abort_rcvd)
        return UW_EAGAIN;
    memset(&c->zk, 0, sizeof(c->zk));
    c->zk.len = z->len;
    c->zk.stag = z->stag;
    c->zk.va = z->va;
    c->zk.state = ZK_QUEUED;
    return 0;
}

int uw__sdp_conn_zsink_poll(uw_sdp_conn *c, uw_sdp_zsink_res *r)
{
    zsink *k = &c->zk;
    if (k->state == ZK_NONE)
        return UW_EINVAL;
    if (c->state == UW_SDP_S_ERROR) {
        /* The LLP is gone or going: nothing writes into the buffer again. */
        k->state = ZK_NONE;
        return c->fatal ? c->fatal : UW_ECONNRESET;
    }
    if (k->state != ZK_DONE)
        return 0;
    k->state = ZK_NONE;
    if (r) {
        r->placed = k->placed;
        r->bcopy = k->bcopy;
    }
    return 1;
}

int uw__sdp_conn_zsink_cancel(uw_sdp_conn *c)
{
    zsink *k = &c->zk;
    if (k->state == ZK_QUEUED) {
        zk_end(c, 0, 0);
        return 0;
    }
    if (k->state != ZK_SENT || k->cancel_due || k->cancel_sent)
        return UW_EAGAIN;
    k->cancel_due = true;
    return 0;
}

void uw__sdp_wz_payload_in(uw_sdp_conn *c, uint32_t payload_len)
{
    if (c->zk.state == ZK_SENT) {
        /* 9.5.1 rule 1: this message, and only it, completes the buffer;
         * NonDiscards does not count it (6.3.3.4). */
        zk_end(c, 0, payload_len);
        c->st.sinkavail_bcopy++;
        return;
    }
    if (c->zk.state == ZK_QUEUED) /* not sent: the data is simply read */
        zk_end(c, 0, 0);
    c->nd++;
}

int uw__sdp_on_rdmawrcompl(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    zsink *k = &c->zk;
    c->st.rdmawrcompl_received++;
    if (k->state != ZK_SENT)
        return uw__sdp_violate(c, "9.3: RdmaWrCompl without a SinkAvail of ours");
    if (m->u.value > k->len)
        return uw__sdp_violate(c, "6.3.6.1: RdmaWrCompl Len beyond the SinkAvail's buffer");
    if (c->rx_inv && c->rx_inv_stag != k->stag)
        return uw__sdp_violate(c, "9.3 step 2: RdmaWrCompl invalidated a STag other than "
                                  "the SinkAvail's");
    /* 6.1.2: REQ_PIPE here is about the opposite half: our send half. */
    c->peer_wants_pipe = (m->bsdh.flags & UW_SDP_REQ_PIPE) != 0;
    uint32_t n = m->u.value;
    c->rcv_nxt += n;
    c->copied += n;
    c->st.received += n;
    zk_end(c, n, 0);
    return 0;
}

int uw__sdp_on_sinkcancelack(uw_sdp_conn *c)
{
    zsink *k = &c->zk;
    if (k->state == ZK_SENT && k->cancel_sent) {
        zk_end(c, 0, 0);
        c->zk_stray_ack = false;
        return 0;
    }
    if (c->zk_stray_ack) {
        c->zk_stray_ack = false;
        return 0;
    }
    return uw__sdp_violate(c, "9.5.5: SinkCancelAck without a SinkAvailCancel of ours");
}

/* ---- Data Source ---------------------------------------------------------------- */

void uw__sdp_wz_payload_out(uw_sdp_conn *c)
{
    if (c->sk_n) {
        c->sk_head = (c->sk_head + 1) % SK_CAP;
        c->sk_n--;
    } else {
        c->pnd++; /* 9.5.1 step 3 */
    }
}

int uw__sdp_on_sinkavail(uw_sdp_conn *c, uint32_t id, const uw_sdp_msg *m)
{
    c->st.sinkavail_received++;
    mc_acked(c);
    /* 12.4: after our move out of Pipelined, SinkAvails the sink sent
     * before it saw the ModeChange still arrive, until it is acked. */
    bool late = c->tx_mode == UW_SDP_COMB_MODE && c->mc_wait_ack;
    if (c->tx_mode != UW_SDP_PIPE_MODE && !late)
        return uw__sdp_violate(
            c, "Figure 25: SinkAvail received while our send half is not Pipelined");
    if (!m->u.avail.len || m->u.avail.len > UW_SDP_MAX_ADVERT_LEN)
        return uw__sdp_violate(c, "6.3.3.1: SinkAvail Len zero or above 2^31");
    /* 9.5.1 step 4, for every SinkAvail. A late one (12.4) was consumed
     * at the sink only by payload we sent before the ModeChange: what we
     * sent after it reaches the sink once it dropped the SinkAvail (Figure
     * 29), and counts in its NonDiscards. */
    if (late) {
        if (m->u.avail.non_discards != c->mc_pnd) {
            c->mc_pnd--;
            c->pnd--;
            c->st.sinkavail_stale++;
        }
    } else if (m->u.avail.non_discards != c->pnd) {
        c->pnd--;
        c->st.sinkavail_stale++;
    } else {
        if (c->sk_n >= SK_CAP || uw__sdp_adverts_held(c) >= c->cfg.max_adverts) /* 6.2.1.3 */
            return uw__sdp_violate(c, "6.2.1.3: more SinkAvail advertisements than MaxAdverts");
        /* 11.3 rule 1: a crossing SinkAvail wins over our SrcAvail. */
        uw__sdp_zs_crossed(c);
        sinkadv *a = &c->sk[(c->sk_head + c->sk_n) % SK_CAP];
        a->len = m->u.avail.len;
        a->stag = m->u.avail.stag;
        a->va = m->u.avail.va;
        c->sk_n++;
    }
    if (m->payload_len) /* a Transaction's request data (9.4): read as usual */
        uw__sdp_queue_payload(c, id, m);
    else
        uw__sdp_rx_release(c, id);
    return 0;
}

void uw__sdp_on_sinkavailcancel(uw_sdp_conn *c)
{
    c->st.cancels_received++;
    /* 9.5.5: Unprocessed ones are dropped; a Write we already made is
     * reported by its RdmaWrCompl, owed before the SinkCancelAck. With
     * every SinkAvail Processed the cancel is ignored. */
    if (c->sk_n) {
        c->sk_n = 0;
        c->sinkcancelack_due = true;
    }
}

uint32_t uw__sdp_conn_zwrite_avail(const uw_sdp_conn *c)
{
    /* Queued data goes first, and consumes the SinkAvail at the sink. */
    if (c->state != UW_SDP_S_OPEN || c->shut_wr || c->tx_mode != UW_SDP_PIPE_MODE || !c->sk_n ||
        c->tf_n || c->zs.state != ZS_NONE || c->wrc_n >= SK_CAP)
        return 0;
    return c->sk[c->sk_head].len;
}

int uw__sdp_conn_zwrite(uw_sdp_conn *c, uint32_t len, uw_sdp_zwrite *wr)
{
    uint32_t avail = uw__sdp_conn_zwrite_avail(c);
    if (!avail)
        return UW_EAGAIN;
    if (!len || len > avail || !wr)
        return UW_EINVAL;
    const sinkadv *a = &c->sk[c->sk_head];
    wr->stag = a->stag;
    wr->to = a->va;
    wr->len = len;
    wrcompl *w = &c->wrc[(c->wrc_head + c->wrc_n) % SK_CAP];
    w->len = len;
    w->stag = a->stag;
    c->wrc_n++;
    c->sk_head = (c->sk_head + 1) % SK_CAP;
    c->sk_n--;
    c->zw_inflight++;
    c->st.rdma_write_bytes += len;
    c->st.zcopy_sent += len;
    c->st.sent += len;
    return 0;
}

void uw__sdp_conn_zwrite_done(uw_sdp_conn *c, bool ok)
{
    if (c->zw_inflight)
        c->zw_inflight--;
    if (!ok)
        uw__sdp_fail(c, UW_ECONNRESET, "9.3: our RDMA Write into a SinkAvail failed");
}

uint32_t uw__sdp_conn_zwrite_inflight(const uw_sdp_conn *c)
{
    return c->zw_inflight;
}

/* ---- Control messages ------------------------------------------------------- */

int uw__sdp_wz_next(uw_sdp_conn *c, uw_sdp_tx *out)
{
    mc_acked(c);
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    if (c->wrc_n) {
        /* 9.3 step 2: Send with SE and Invalidate of the sink's STag. */
        const wrcompl *w = &c->wrc[c->wrc_head];
        m.bsdh.mid = UW_SDP_RDMAWRCOMPL;
        m.bsdh.flags = c->want_rx_pipe ? UW_SDP_REQ_PIPE : 0;
        m.u.value = w->len;
        int r = uw__sdp_send_msg(c, &m, true, out);
        if (r <= 0)
            return r;
        out->invalidate = true;
        out->inv_stag = w->stag;
        c->wrc_head = (c->wrc_head + 1) % SK_CAP;
        c->wrc_n--;
        c->st.rdmawrcompl_sent++;
        return 1;
    }
    if (c->sinkcancelack_due) {
        c->sinkcancelack_due = false;
        return uw__sdp_send_ctl(c, UW_SDP_SINKCANCELACK, 0, true, out);
    }
    if (c->zk.cancel_due && c->zk.state == ZK_SENT) {
        int r = uw__sdp_send_ctl(c, UW_SDP_SINKAVAILCANCEL, 0, true, out);
        if (r > 0) {
            c->zk.cancel_due = false;
            c->zk.cancel_sent = true;
            c->st.cancels_sent++;
        }
        return r;
    }
    if (mc_ready(c))
        return send_modechange(c, out);
    if (c->mc_rx_comb) {
        c->mc_rx_comb = false;
        if (c->rx_mode == UW_SDP_BUFF_MODE) { /* 12.2 */
            m.bsdh.mid = UW_SDP_MODECHANGE;
            m.u.mch.mode = UW_SDP_COMB_MODE;
            m.u.mch.s = true;
            int r = uw__sdp_send_msg(c, &m, false, out);
            if (r > 0) {
                c->rx_mode = UW_SDP_COMB_MODE;
                c->st.mode_changes++;
            }
            return r;
        }
    }
    if (c->zk.state == ZK_QUEUED && c->rx_mode == UW_SDP_PIPE_MODE) {
        m.bsdh.mid = UW_SDP_SINKAVAIL;
        m.u.avail.len = c->zk.len;
        m.u.avail.stag = c->zk.stag;
        m.u.avail.va = c->zk.va;
        m.u.avail.non_discards = c->nd; /* 6.3.3.4 */
        int r = uw__sdp_send_msg(c, &m, true, out);
        if (r > 0) {
            c->zk.state = ZK_SENT;
            c->st.sinkavail_sent++;
        }
        return r;
    }
    return 0;
}
