/* SDP receive stream as the application sees it: reads with TCP's urgent
 * mark rules (9.5.3 carried onto Linux TCP's visible behaviour), FIONREAD,
 * SIOCATMARK and poll readiness. */
#include <poll.h>
#include <string.h>

#define UW__POLLRDHUP 0x2000u /* POLLRDHUP without _GNU_SOURCE */

#include "sdp/conn_internal.h"

/* Frees the head buffer once its payload is read; the repost it allows is
 * what the next credit update advertises. */
static void pop_head(uw_sdp_conn *c)
{
    uint32_t id = c->data_fifo[c->df_head];
    c->df_head = (c->df_head + 1) % RX_CAP;
    c->df_n--;
    uw__sdp_rx_release(c, id);
    /* The reader emptied the queue while the peer waited for credits: the
     * window paces the stream, so it doubles (TCP's receive autotuning
     * grows the window for a reader that keeps up, in the same spirit). */
    if (!c->df_n && c->rx_starved && c->target_bufs < c->rx_grow_max) {
        c->target_bufs = c->target_bufs * 2 > c->rx_grow_max ? c->rx_grow_max : c->target_bufs * 2;
        c->st.rx_grown++;
    }
    if (!c->df_n)
        c->rx_starved = false;
}

/* Moves up to n octets from the stream at the read position into dst (NULL:
 * drop them). peek leaves the queue as it is, starting skip octets in. */
static size_t take(uw_sdp_conn *c, uint8_t *dst, size_t n, bool peek, size_t skip)
{
    size_t got = 0;
    uint32_t i = 0;
    while (got < n && i < c->df_n) {
        uint32_t id = c->data_fifo[(c->df_head + i) % RX_CAP];
        rxbuf *b = &c->rx[id];
        uint32_t avail = b->end - b->off;
        if (skip >= avail) {
            skip -= avail;
            i++;
            continue;
        }
        size_t k = avail - skip;
        if (k > n - got)
            k = n - got;
        if (dst)
            memcpy(dst + got, b->mem + b->off + skip, k);
        got += k;
        skip = 0;
        if (peek) {
            i++;
            continue;
        }
        b->off += (uint32_t)k;
        if (b->off == b->end)
            pop_head(c);
    }
    return got;
}

void uw__sdp_skip_urgent(uw_sdp_conn *c)
{
    take(c, NULL, 1, false, 0);
    c->copied++;
}

static bool urg_live(const uw_sdp_conn *c)
{
    return (c->urg == URG_VALID || c->urg == URG_READ) && c->urg_off >= c->copied;
}

/* The read position stands on the urgent octet, which reads skip when it is
 * not inline (Linux tcp_recvmsg). */
static bool at_hidden_urgent(const uw_sdp_conn *c, uint64_t pos)
{
    return urg_live(c) && !c->oobinline && pos == c->urg_off;
}

static ssize_t recv_oob(uw_sdp_conn *c, const struct iovec *iov, int iovcnt, unsigned flags)
{
    if (c->oobinline || c->urg == URG_NONE || c->urg == URG_READ ||
        (c->urg == URG_VALID && c->urg_off < c->copied))
        return UW_EINVAL;
    if (c->urg == URG_PENDING)
        return (c->rcv_eof || c->shut_rd || c->state == UW_SDP_S_ERROR) ? 0 : UW_EAGAIN;
    for (int i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len) {
            *(uint8_t *)iov[i].iov_base = c->urg_byte;
            if (!(flags & UW_SDP_MSG_PEEK))
                c->urg = URG_READ;
            return 1;
        }
    }
    return 0;
}

ssize_t uw__sdp_conn_recv(uw_sdp_conn *c, const struct iovec *iov, int iovcnt, unsigned flags)
{
    if (iovcnt < 0 || (iovcnt && !iov))
        return UW_EINVAL;
    if (c->state == UW_SDP_S_IDLE || c->state == UW_SDP_S_HELLO)
        return UW_ENOTCONN;
    if (flags & UW_SDP_MSG_OOB)
        return recv_oob(c, iov, iovcnt, flags);
    bool peek = (flags & UW_SDP_MSG_PEEK) != 0;
    size_t want = 0;
    for (int i = 0; i < iovcnt; i++)
        want += iov[i].iov_len;
    size_t done = 0;
    uint64_t pos = c->copied;
    int vi = 0;
    size_t voff = 0;
    while (done < want && pos < c->rcv_nxt) {
        if (at_hidden_urgent(c, pos)) {
            if (done) /* a read never crosses the mark */
                break;
            if (!peek)
                take(c, NULL, 1, false, 0);
            pos++;
            if (!peek)
                c->copied = pos;
            continue;
        }
        uint64_t lim = c->rcv_nxt;
        if (urg_live(c) && c->urg_off > pos && c->urg_off < lim)
            lim = c->urg_off; /* stop just before the mark */
        while (vi < iovcnt && voff == iov[vi].iov_len) {
            vi++;
            voff = 0;
        }
        if (vi >= iovcnt)
            break;
        size_t k = iov[vi].iov_len - voff;
        if (k > lim - pos)
            k = (size_t)(lim - pos);
        size_t got = take(c, (uint8_t *)iov[vi].iov_base + voff, k, peek,
                          peek ? (size_t)(pos - c->copied) : 0);
        voff += got;
        done += got;
        pos += got;
        if (!peek)
            c->copied = pos;
        if (lim != c->rcv_nxt && pos == lim)
            break; /* reached the mark after copying something */
    }
    if (!peek && urg_live(c) == false && (c->urg == URG_VALID || c->urg == URG_READ))
        c->urg = URG_NONE; /* the mark is behind us */
    if (done)
        return (ssize_t)done;
    if (want == 0)
        return 0;
    /* Linux tcp_recvmsg's order: the peer's FIN, then a pending error. */
    if (c->rcv_eof)
        return 0;
    if (c->err && c->rcv_nxt == c->copied) {
        int e = c->err;
        c->err = 0;
        return e;
    }
    if (c->shut_rd || c->state == UW_SDP_S_CLOSED)
        return 0;
    if (c->state == UW_SDP_S_ERROR)
        return c->fatal == UW_EPIPE ? 0 : c->fatal;
    return UW_EAGAIN;
}

size_t uw__sdp_conn_inq(const uw_sdp_conn *c)
{
    /* Linux tcp_inq(): with a hidden urgent octet ahead, up to the mark. */
    if (!c->oobinline && urg_live(c) && c->urg_off < c->rcv_nxt)
        return (size_t)(c->urg_off - c->copied);
    return (size_t)(c->rcv_nxt - c->copied);
}

int uw__sdp_conn_atmark(const uw_sdp_conn *c)
{
    return urg_live(c) && c->urg_off == c->copied;
}

unsigned uw__sdp_conn_poll(const uw_sdp_conn *c)
{
    unsigned m = 0;
    if (c->state == UW_SDP_S_IDLE || c->state == UW_SDP_S_HELLO)
        return 0;
    uint64_t avail = c->rcv_nxt - c->copied;
    /* Standing on a hidden urgent octet, one more octet is needed (Linux). */
    if (avail && at_hidden_urgent(c, c->copied))
        avail--;
    if (avail >= c->rcvlowat || (avail && (c->rcv_eof || c->shut_rd)))
        m |= POLLIN;
    /* Octets only a Read can take are readable too (recv() reads them),
     * and so is the end of our Read. */
    if (uw__sdp_conn_zavail(c) || (c->zr_busy && c->zr_doneflag) || c->zk.state == ZK_DONE)
        m |= POLLIN;
    if (c->rcv_eof || c->shut_rd)
        m |= POLLIN | UW__POLLRDHUP;
    if (c->urg == URG_VALID && c->urg_off >= c->copied)
        m |= POLLPRI;
    /* A zero-copy send owns the stream until it ends (conn_zcopy.c); its
     * end shows as writability, which wakes the sender. */
    bool can_send = c->state == UW_SDP_S_OPEN && !c->shut_wr &&
                    (c->zs.state == ZS_NONE || c->zs.state == ZS_DONE) && !c->zw_inflight;
    if (can_send) {
        /* TCP's rule (sk_stream_is_writeable): writable once the free room
         * is half what is queued, so a woken writer has a third of the
         * buffer to fill instead of one slot per wakeup. */
        uint32_t free_slots = c->tx_usable > c->tx_used ? c->tx_usable - c->tx_used : 0;
        bool room = free_slots && free_slots * 2 >= c->tx_used;
        if (!room && c->tf_n) {
            const txslot *t = &c->tx[c->tx_fifo[(c->tf_head + c->tf_n - 1) % TX_CAP]];
            room = t->state == TX_FILLING && t->fill < uw__sdp_max_payload(c) / 2;
        }
        if (room)
            m |= POLLOUT;
    }
    if (c->state == UW_SDP_S_ERROR || c->state == UW_SDP_S_CLOSED) {
        m |= POLLIN | POLLOUT | UW__POLLRDHUP | POLLHUP;
        if (c->err)
            m |= POLLERR;
    } else if (c->shut_wr && (c->rcv_eof || c->shut_rd)) {
        m |= POLLHUP;
    }
    if (c->shut_wr)
        m |= POLLOUT; /* send fails at once with EPIPE: it does not block */
    return m;
}

uint64_t uw__sdp_conn_rcv_total(const uw_sdp_conn *c)
{
    return c->rcv_nxt;
}
