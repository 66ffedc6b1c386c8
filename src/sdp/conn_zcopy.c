/* Read Zcopy (draft-pinkerton-iwarp-sdp-01 9.2, 9.5.2.1, 11.2, 11.3) in
 * both roles: our SrcAvail and what answers it, and the peer's SrcAvail
 * taken by RDMA Read or refused with SendSm. conn.h describes the calls. */
#include <string.h>

#include "sdp/conn_internal.h"

/* ---- Data Source -------------------------------------------------------- */

static void zs_finish(uw_sdp_conn *c);

int uw__sdp_conn_zsend(uw_sdp_conn *c, const uw_sdp_zsrc *z)
{
    if (!z || !z->addr || !z->len || z->len > UW_SDP_MAX_ADVERT_LEN)
        return UW_EINVAL;
    int e = uw__sdp_send_state_error(c);
    if (e)
        return e;
    if (c->zs.state != ZS_NONE)
        return UW_EBUSY;
    /* 6.2.1.3: with our SinkAvail outstanding too, within the peer's limit. */
    if ((c->zk.state == ZK_QUEUED || c->zk.state == ZK_SENT) && c->remote_max_adverts < 2)
        return UW_EBUSY;
    /* Figure 25: no SrcAvail in Buffered Mode, nor once we asked for it. */
    if (c->tx_mode == UW_SDP_BUFF_MODE || c->mc_want == UW_SDP_BUFF_MODE)
        return UW_EPERM;
    uint32_t room = uw__sdp_max_payload(c);
    if (room <= UW_SDP_SRCAH_LEN)
        return UW_EPERM;
    /* 11.2: payload in Combined Mode; 11.3: none in Pipelined. */
    uint32_t pay = c->tx_mode == UW_SDP_PIPE_MODE
                       ? 0
                       : uw__sdp_min32(UW_SDP_SRCAVAIL_PAYLOAD, room - UW_SDP_SRCAH_LEN);
    if (z->len <= pay)
        return UW_EINVAL;
    if (!c->zs_mem) {
        c->zs_mem = c->a.alloc(c->a.ud, ZS_MEM);
        if (!c->zs_mem)
            return UW_ENOMEM;
    }
    uw__sdp_seal(c); /* what was queued before goes first, whole */
    memset(&c->zs, 0, sizeof(c->zs));
    c->zs.addr = z->addr;
    c->zs.len = z->len;
    c->zs.stag = z->stag;
    c->zs.va = z->va;
    c->zs.pay = pay;
    c->zs.barrier = c->sealed;
    c->zs.state = ZS_QUEUED;
    return 0;
}

int uw__sdp_conn_zsend_poll(uw_sdp_conn *c, uint64_t *sent)
{
    zsrc *z = &c->zs;
    if (z->state == ZS_NONE)
        return UW_EINVAL;
    uint64_t got = z->state == ZS_QUEUED ? 0 : (uint64_t)z->pay + z->acked + z->copied;
    if (sent)
        *sent = got;
    if (z->state != ZS_DONE)
        return 0;
    z->state = ZS_NONE;
    if (z->err) {
        /* The peer has the payload and what it reported read; what it may
         * have read beyond that, unreported, cannot be known. */
        if (sent)
            *sent = z->acked ? (uint64_t)z->pay + z->acked : 0;
        return z->err;
    }
    if (sent && !z->crossed && !z->cancelled)
        *sent = z->len;
    return 1;
}

int uw__sdp_conn_zsend_cancel(uw_sdp_conn *c)
{
    zsrc *z = &c->zs;
    switch (z->state) {
    case ZS_NONE:
        return UW_EINVAL;
    case ZS_QUEUED: /* never advertised: nothing to revoke */
        z->pay = 0;
        z->cancelled = true;
        z->state = ZS_DONE;
        return 0;
    case ZS_SENT:
        if (!z->cancel_due && !z->cancel_sent)
            z->cancel_due = true;
        return 0;
    case ZS_BCOPY: /* Processed by a refusal: the sink waits for all the rest */
        return UW_EALREADY;
    default:
        return UW_EALREADY;
    }
}

/* 9.5.4: the SrcAvailCancel, a payload-free message (credit 2, a control
 * slot: the caller checked both). */
int uw__sdp_zs_cancel_next(uw_sdp_conn *c, uw_sdp_tx *out)
{
    zsrc *z = &c->zs;
    if (!z->cancel_due || z->state != ZS_SENT)
        return 0;
    int r = uw__sdp_send_ctl(c, UW_SDP_SRCAVAILCANCEL, 0, true, out);
    if (r > 0) {
        z->cancel_due = false;
        z->cancel_sent = true;
        z->cancel_mseq = c->last_sent;
        c->st.cancels_sent++;
    }
    return r;
}

void uw__sdp_zs_crossed(uw_sdp_conn *c)
{
    zsrc *z = &c->zs;
    if (z->state == ZS_QUEUED)
        z->pay = 0; /* never sent */
    else if (z->state != ZS_SENT)
        return;
    /* The sink ignores our SrcAvail (11.3 rule 2b): what its payload
     * carried is sent, the rest goes into the SinkAvails. */
    z->crossed = true;
    z->state = ZS_DONE;
    c->st.sent += z->acked;
}

/* Holds payload behind an In-Process SrcAvail (11.2), and behind one not
 * yet sent but queued after the data now going out. */
bool uw__sdp_zs_holds_data(const uw_sdp_conn *c)
{
    return (c->zs.state == ZS_QUEUED || c->zs.state == ZS_SENT) &&
           c->sent_msgs_data >= c->zs.barrier;
}

/* The SrcAvail, once everything queued before it went out. */
int uw__sdp_zs_next(uw_sdp_conn *c, int32_t credit, uw_sdp_tx *out)
{
    zsrc *z = &c->zs;
    if (z->state != ZS_QUEUED || credit < 3 || c->sent_msgs_data < z->barrier || c->zs_mem_busy)
        return 0;
    /* A ChRcvBuf decrease since zsend() (10.6) applies at once. */
    uint32_t room = uw__sdp_max_payload(c);
    if (room > UW_SDP_SRCAH_LEN && z->pay > room - UW_SDP_SRCAH_LEN)
        z->pay = room - UW_SDP_SRCAH_LEN;
    if (c->tx_mode == UW_SDP_PIPE_MODE)
        z->pay = 0; /* 11.3: moved to Pipelined since zsend() */
    if (c->sk_n) {  /* 11.3 rule 1a: a current SinkAvail takes the data */
        uw__sdp_zs_crossed(c);
        return 0;
    }
    if (c->tx_mode == UW_SDP_BUFF_MODE || room <= UW_SDP_SRCAH_LEN) {
        /* No SrcAvail possible now (mode changed, buffers too small for
         * one with payload): Bcopy it all. */
        z->pay = 0;
        z->state = ZS_BCOPY;
        return 0;
    }
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    m.bsdh.mid = UW_SDP_SRCAVAIL;
    m.bsdh.len = UW_SDP_BSDH_LEN + UW_SDP_SRCAH_LEN + z->pay;
    m.u.avail.len = z->len;
    m.u.avail.stag = z->stag;
    m.u.avail.va = z->va;
    memcpy(c->zs_mem + UW_SDP_BSDH_LEN + UW_SDP_SRCAH_LEN, z->addr, z->pay);
    uw__sdp_stamp(c, &m, c->zs_mem);
    c->zs_mem_busy = true;
    c->ctl_inflight++; /* a Send the close waits for, like a control message */
    z->state = ZS_SENT;
    c->poke_due = false;
    if (z->pay)
        uw__sdp_wz_payload_out(c); /* 9.5.1 step 3: it carries payload */
    c->st.srcavail_sent++;
    c->st.bcopy_sent += z->pay;
    c->st.sent += z->pay;
    out->id = ZS_ID;
    out->addr = c->zs_mem;
    out->len = m.bsdh.len;
    out->solicited = true; /* 14.2: the sink has work to do */
    out->invalidate = false;
    return 1;
}

static void zs_finish(uw_sdp_conn *c)
{
    c->zs.state = ZS_DONE;
    c->st.sent += c->zs.acked + c->zs.copied;
}

/* After a SendSm: the rest of the buffer by Bcopy (9.2 step 3), as slots
 * free up; the application's buffer is released once all is copied. */
void uw__sdp_zs_fill(uw_sdp_conn *c)
{
    zsrc *z = &c->zs;
    if (z->state != ZS_BCOPY)
        return;
    uint32_t off = z->pay + z->acked + z->copied;
    size_t k = uw__sdp_fill_from(c, z->addr + off, z->len - off, uw__sdp_max_payload(c));
    z->copied += (uint32_t)k;
    if (z->pay + z->acked + z->copied == z->len) {
        uw__sdp_seal(c);
        zs_finish(c);
    }
}

void uw__sdp_zs_abort(uw_sdp_conn *c)
{
    zsrc *z = &c->zs;
    if (z->state == ZS_NONE || z->state == ZS_DONE)
        return;
    z->err = c->fatal ? c->fatal : UW_ECONNRESET;
    z->state = ZS_DONE;
}

int uw__sdp_on_rdmardcompl(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    zsrc *z = &c->zs;
    c->st.rdmardcompl_received++;
    if (z->state != ZS_SENT)
        return uw__sdp_violate(c, "9.2 step 3: RdmaRdCompl without an In-Process SrcAvail of ours");
    if (m->u.value > z->len - z->pay - z->acked)
        return uw__sdp_violate(c, "9.2 step 2b: RdmaRdCompl Len beyond the advertised buffer");
    if (c->rx_inv && c->rx_inv_stag != z->stag)
        return uw__sdp_violate(c, "9.2 step 3: RdmaRdCompl invalidated a STag other than "
                                  "the SrcAvail's");
    z->acked += m->u.value;
    c->st.zcopy_sent += m->u.value;
    c->peer_wants_pipe = (m->bsdh.flags & UW_SDP_REQ_PIPE) != 0; /* 6.1.2 */
    if (z->pay + z->acked == z->len)
        zs_finish(c);
    return 0;
}

int uw__sdp_on_sendsm(uw_sdp_conn *c, const uw_sdp_msg *m)
{
    c->st.sendsm_received++;
    if (c->zs.state != ZS_SENT)
        return uw__sdp_violate(c, "9.5.2.1: SendSm without an In-Process SrcAvail of ours");
    zsrc *z = &c->zs;
    if (z->cancel_sent && uw__sdp_seq_diff(m->bsdh.mseqack, z->cancel_mseq) >= 0) {
        /* 9.5.4: the answer to our SrcAvailCancel: the sink dropped the
         * rest of the advertisement. */
        z->cancelled = true;
        zs_finish(c);
        return 0;
    }
    /* A refusal (9.5.2.1), also one sent before the sink saw our cancel:
     * the SrcAvail is Processed, the sink ignores the cancel and waits
     * for all of the rest by Bcopy. */
    z->cancel_due = false;
    z->state = ZS_BCOPY;
    uw__sdp_zs_fill(c);
    return 0;
}

/* ---- Data Sink -------------------------------------------------------------- */

int uw__sdp_on_srcavail(uw_sdp_conn *c, uint32_t id, const uw_sdp_msg *m)
{
    c->st.srcavail_received++;
    /* Figure 25: SrcAvail is accepted in Combined (one at a time) and
     * Pipelined receive modes; Combined needs payload, Pipelined forbids it. */
    if (c->rx_mode == UW_SDP_BUFF_MODE)
        return uw__sdp_violate(c, "11.1/Figure 25: SrcAvail received in Buffered Mode");
    if (c->rx_mode == UW_SDP_COMB_MODE && (c->sa_n || !m->payload_len))
        return uw__sdp_violate(c, "11.2: Combined Mode allows one SrcAvail, with ULP payload");
    if (c->rx_mode == UW_SDP_PIPE_MODE && m->payload_len)
        return uw__sdp_violate(c, "11.3: SrcAvail with ULP payload in Pipelined Mode");
    if (c->zk.state == ZK_SENT) {
        /* 11.3 rule 2b: our SinkAvail crossed it; the source Writes. */
        uw__sdp_rx_release(c, id);
        return 0;
    }
    uw__sdp_zk_drop(c); /* 11.3 rule 2a: a queued SinkAvail stays unsent */
    /* 6.2.1.3: one limit for the SrcAvails and SinkAvails we hold. */
    if (uw__sdp_adverts_held(c) >= c->cfg.max_adverts || c->sa_n >= 64)
        return uw__sdp_violate(c, "6.2.1.3: more SrcAvail advertisements than MaxAdverts");
    if (m->payload_len > m->u.avail.len)
        return uw__sdp_violate(c, "6.3.2: SrcAvail payload longer than the advertised buffer");
    srcavail *s = &c->sa[(c->sa_head + c->sa_n) % 64];
    memset(s, 0, sizeof(*s));
    s->remaining = m->u.avail.len - m->payload_len;
    s->stag = m->u.avail.stag;
    /* 9.2 step 2b: Reads start after the octets the payload carried. */
    s->next_to = m->u.avail.va + m->payload_len;
    c->sa_n++;
    if (m->payload_len)
        uw__sdp_queue_payload(c, id, m);
    else
        uw__sdp_rx_release(c, id);
    if (!s->remaining) { /* Processed by its payload alone */
        c->sa_n--;
        c->sa_head++;
        c->sendsm_due = c->sa_n > 0 && !c->cfg.zcopy_sink;
        return 0;
    }
    /* Without Read Zcopy every SrcAvail is refused, oldest first. With it
     * the driver decides, except in 9.2's deadlock: both sides advertise
     * and wait for the other to read. Our own send is blocked on its
     * SrcAvail, so this one is forced to Bcopy. */
    bool ours_waits = c->zs.state == ZS_QUEUED || c->zs.state == ZS_SENT;
    if (c->sa_n == 1 && (!c->cfg.zcopy_sink || ours_waits))
        c->sendsm_due = true;
    return 0;
}

uint32_t uw__sdp_conn_zavail(const uw_sdp_conn *c)
{
    if (!c->cfg.zcopy_sink || c->state != UW_SDP_S_OPEN || c->df_n || !c->sa_n || c->zr_busy ||
        c->shut_rd || c->sendsm_due)
        return 0;
    const srcavail *s = &c->sa[c->sa_head % 64];
    if (s->sendsm_sent || s->reading)
        return 0;
    return s->remaining;
}

bool uw__sdp_conn_zwaiting(const uw_sdp_conn *c)
{
    if (!c->cfg.zcopy_sink || c->state != UW_SDP_S_OPEN || !c->sa_n || c->sendsm_due)
        return false;
    const srcavail *s = &c->sa[c->sa_head % 64];
    return !s->sendsm_sent && !s->started;
}

int uw__sdp_conn_zread(uw_sdp_conn *c, uint32_t len, uw_sdp_zread *rd)
{
    uint32_t avail = uw__sdp_conn_zavail(c);
    if (!avail)
        return UW_EAGAIN;
    if (!len || len > avail || !rd)
        return UW_EINVAL;
    srcavail *s = &c->sa[c->sa_head % 64];
    s->reading = s->started = true;
    s->rd_len = len;
    c->zr_busy = true;
    c->zr_doneflag = false;
    rd->stag = s->stag;
    rd->to = s->next_to;
    rd->len = len;
    return 0;
}

void uw__sdp_conn_zread_done(uw_sdp_conn *c, int64_t n)
{
    if (!c->zr_busy || c->zr_doneflag || !c->sa_n)
        return;
    srcavail *s = &c->sa[c->sa_head % 64];
    c->zr_doneflag = true;
    s->reading = false;
    if (n != (int64_t)s->rd_len || c->state == UW_SDP_S_ERROR) {
        c->zr_ret = n < 0 ? n : UW_ECONNRESET;
        if (c->state != UW_SDP_S_ERROR)
            uw__sdp_fail(c, UW_ECONNRESET, "9.2: our RDMA Read of a SrcAvail failed");
        return;
    }
    uint32_t k = (uint32_t)n;
    s->remaining -= k;
    s->next_to += k;
    c->rrc_len += k;
    c->rrc_due = true;
    if (!s->remaining) {
        /* 9.2 step 3: the last RdmaRdCompl invalidates the source's STag. */
        c->rrc_inv = true;
        c->rrc_stag = s->stag;
        c->sa_head++;
        c->sa_n--;
    }
    c->rcv_nxt += k;
    c->copied += k;
    c->st.received += k;
    c->st.rdma_read_bytes += k;
    c->zr_ret = k;
}

ssize_t uw__sdp_conn_zread_collect(uw_sdp_conn *c)
{
    if (!c->zr_busy)
        return 0;
    if (!c->zr_doneflag)
        return UW_EAGAIN;
    c->zr_busy = false;
    return (ssize_t)c->zr_ret;
}

int uw__sdp_conn_force_bcopy(uw_sdp_conn *c)
{
    if (!c->sa_n || c->sendsm_due || c->zr_busy)
        return UW_EAGAIN;
    srcavail *s = &c->sa[c->sa_head % 64];
    if (s->sendsm_sent || s->reading)
        return UW_EAGAIN;
    c->sendsm_due = true;
    return 0;
}
