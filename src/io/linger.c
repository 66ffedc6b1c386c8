/* Lingering closes that outlive their QP. A QP destroyed right after its
 * Terminate (or a reject Reply, or a graceful close) still owes the peer an
 * orderly end: what it queued, then FIN, and no reset. Closing a socket
 * whose receive queue holds unread octets makes the kernel send a reset,
 * and the reset destroys our octets still in flight (a Terminate after a
 * flipped bit with markers was lost about one run in ten on a busy host).
 * So the context takes over the socket as an "orphan": it writes the rest,
 * shuts down its direction and reads, discarding, until the peer's FIN or
 * a deadline, then closes. Orphans are driven by the engine's passes like
 * QPs and finished at context destroy at the latest. Deliberate aborts
 * (destroying a live connection, uw_abort()) still reset. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/transport.h"
#include "verbs/internal.h"

/* RFC 5040 leaves the timeout open; 2 s, as the QP's own linger. */
#define UW__ORPHAN_LINGER_NS 2000000000u

/* Whether closing qp's socket must be orderly. The API promises a reset
 * only for destroying a live connection nobody asked to close. */
static bool owes_orderly_end(const uw_qp *qp)
{
    return qp->cm == UW__CM_LINGER || qp->cm == UW__CM_DRAIN || qp->rd.term_queued ||
           qp->disconnect_req || (qp->release_fin && qp->state != UW_QPS_ERROR);
}

static void orphan_free(struct uw__orphan *o)
{
    uw_ctx *c = o->ctx;
    for (struct uw__orphan **p = &c->orphans; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            break;
        }
    if (o->tp)
        o->tp->close(o->tp_ep, false);
    else
        close(o->fd); /* also leaves the epoll set */
    c->deadline_dirty = true;
    c->alloc.free(c->alloc.ud, o->out);
    c->alloc.free(c->alloc.ud, o);
}

static void orphan_watch(struct uw__orphan *o, unsigned want)
{
    if (want == o->epmask || o->tp)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = o};
    if (epoll_ctl(o->ctx->epfd, EPOLL_CTL_MOD, o->fd, &ev) == 0)
        o->epmask = want;
}

void uw__orphan_service(struct uw__orphan *o)
{
    /* Reading goes on while writing: a peer blocked on a full window
     * toward us might otherwise never read what we still owe it. */
    bool eof = false;
    char sink[4096];
    struct iovec iov = {sink, sizeof(sink)};
    for (;;) {
        ssize_t r =
            o->tp ? o->tp->recv(o->tp_ep, &iov, 1) : recv(o->fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (r > 0)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        if (r < 0) {
            orphan_free(o); /* reset by the peer: nothing left to protect */
            return;
        }
        eof = true;
        break;
    }
    while (o->out_off < o->out_len) {
        struct iovec out = {o->out + o->out_off, o->out_len - o->out_off};
        ssize_t w = o->tp ? o->tp->send(o->tp_ep, &out, 1)
                          : send(o->fd, out.iov_base, out.iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            /* After the peer's FIN the socket stays readable: stop asking. */
            orphan_watch(o, EPOLLOUT | (eof ? 0u : EPOLLIN | EPOLLRDHUP));
            return;
        }
        if (w <= 0) {
            orphan_free(o);
            return;
        }
        o->out_off += (size_t)w;
    }
    if (!o->fin_sent) {
        o->ctx->alloc.free(o->ctx->alloc.ud, o->out);
        o->out = NULL;
        o->out_len = o->out_off = 0;
        if (o->tp)
            o->tp->shutdown_wr(o->tp_ep);
        else
            shutdown(o->fd, SHUT_WR);
        o->fin_sent = true;
    }
    if (eof) {
        orphan_free(o);
        return;
    }
    orphan_watch(o, EPOLLIN | EPOLLRDHUP);
}

static void orphan_wake(void *ud)
{
    struct uw__orphan *o = ud;
    o->kick = true;
    o->ctx->orphan_kick = true;
    uw__ctx_signal(o->ctx);
}

/* Takes over qp's socket with the octets it still owes. */
static bool adopt(uw_qp *qp)
{
    uw_ctx *c = qp->ctx;
    struct uw__orphan *o = c->alloc.alloc(c->alloc.ud, sizeof(*o));
    if (!o)
        return false;
    memset(o, 0, sizeof(*o));
    /* What the socket takes now goes at once; the orphan writes the rest
     * of the startup frame, then any FPDUs. */
    ssize_t left = uw__cm_hs_move(qp, NULL);
    size_t hs = left > 0 ? (size_t)left : 0;
    uint8_t *frames = NULL;
    ssize_t nf = 0;
    if (uw__cm_established(qp->cm) || (qp->rd.term_queued && !qp->rd.term_done))
        nf = uw__qp_tx_take(qp, &frames);
    size_t total = hs + (nf > 0 ? (size_t)nf : 0);
    if (nf >= 0 && total) {
        o->out = hs ? c->alloc.alloc(c->alloc.ud, total) : frames;
        if (o->out && hs) {
            uw__cm_hs_move(qp, o->out);
            if (nf > 0)
                memcpy(o->out + hs, frames, (size_t)nf);
            c->alloc.free(c->alloc.ud, frames);
        }
    }
    if (nf < 0 || (total && !o->out)) {
        c->alloc.free(c->alloc.ud, frames);
        c->alloc.free(c->alloc.ud, o);
        return false;
    }
    o->out_len = total;
    o->tag = UW__EP_ORPHAN;
    o->ctx = c;
    o->fd = qp->fd;
    /* Sentinel: orphan_watch() below registers the first real mask. */
    o->epmask = ~0u;
    o->tp = qp->tp;
    o->tp_ep = qp->tp_ep;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = o};
    int op = qp->ep_added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (o->tp) {
        o->tp->watch(o->tp_ep, orphan_wake, o);
    } else if (epoll_ctl(c->epfd, op, o->fd, &ev) < 0) {
        c->alloc.free(c->alloc.ud, o->out);
        c->alloc.free(c->alloc.ud, o);
        return false;
    }
    o->epmask = EPOLLIN | EPOLLRDHUP;
    qp->fd = -1;
    qp->tp = NULL;
    qp->ep_added = false;
    o->deadline_ns = uw__ctx_now(c) + UW__ORPHAN_LINGER_NS;
    o->next = c->orphans;
    c->orphans = o;
    c->deadline_dirty = true;
    uw__orphan_service(o);
    return true;
}

void uw__qp_close_socket(uw_qp *qp)
{
    if (qp->fd < 0)
        return;
    if (owes_orderly_end(qp) && adopt(qp))
        return;
    if (qp->tp) {
        /* Out of memory, or abortive: as for a socket below. */
        qp->tp->close(qp->tp_ep, !owes_orderly_end(qp) && qp->state != UW_QPS_CLOSED);
        qp->tp = NULL;
        qp->fd = -1;
        return;
    }
    if (owes_orderly_end(qp)) {
        /* Out of memory: the best the kernel can do on its own. */
        shutdown(qp->fd, SHUT_WR);
    } else if (qp->state != UW_QPS_CLOSED) {
        /* Abortive: an application that destroys a live QP does not wait. */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(qp->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    close(qp->fd); /* also leaves the epoll set */
    qp->fd = -1;
    qp->ep_added = false;
}

uint64_t uw__orphans_timers(uw_ctx *c, uint64_t now)
{
    uint64_t first = 0;
    for (struct uw__orphan *o = c->orphans, *next; o; o = next) {
        next = o->next;
        if (now && o->deadline_ns <= now) {
            orphan_free(o); /* the peer never closed: give up, bounded */
            continue;
        }
        if (!first || o->deadline_ns < first)
            first = o->deadline_ns;
    }
    return first;
}

/* Everything we sent, FIN included, has been acknowledged: what we owed
 * is in the peer's kernel, which keeps it readable even after a reset. */
static bool all_acked(const struct uw__orphan *o)
{
    if (o->tp)
        return o->fin_sent && o->tp->outq(o->tp_ep) == 0;
    int outq = -1;
    return o->fin_sent && ioctl(o->fd, SIOCOUTQ, &outq) == 0 && outq == 0;
}

#define UW__ORPHAN_POLL 64
void uw__orphans_finish(uw_ctx *c)
{
    /* The context is going away, so waiting for every peer's FIN would
     * make destroy take up to the whole linger time for nothing: an orphan
     * stays only while what it owes is not yet acknowledged. */
    for (;;) {
        for (struct uw__orphan *o = c->orphans, *next; o; o = next) {
            next = o->next;
            if (all_acked(o))
                orphan_free(o);
        }
        uint64_t now = uw__ctx_now(c);
        uint64_t first = uw__orphans_timers(c, now);
        if (!c->orphans)
            return;
        if (c->clock) {
            /* Virtual time does not pass while we wait: one more pass for
             * each, then they end (a test's destroy never blocks). */
            while (c->orphans) {
                struct uw__orphan *o = c->orphans;
                uw__orphan_service(o);
                if (c->orphans == o)
                    orphan_free(o);
            }
            return;
        }
        struct pollfd p[UW__ORPHAN_POLL];
        struct uw__orphan *os[UW__ORPHAN_POLL];
        nfds_t n = 0;
        for (struct uw__orphan *o = c->orphans; o && n < UW__ORPHAN_POLL; o = o->next) {
            short ev = o->out ? POLLOUT : 0;
            if (o->epmask & EPOLLIN)
                ev |= POLLIN | POLLRDHUP;
            p[n].fd = o->tp ? -1 : o->fd; /* a transport's is served above */
            p[n].events = ev;
            p[n].revents = 0;
            os[n++] = o;
        }
        /* Acknowledgements make no event: look again soon. */
        int ms = (int)((first - now) / 1000000u) + 1;
        ms = ms < 10 ? ms : 10;
        if (poll(p, n, ms) <= 0)
            continue; /* timed out (the timers close them) or interrupted */
        for (nfds_t i = 0; i < n; i++)
            if (p[i].revents)
                uw__orphan_service(os[i]); /* frees only os[i] */
    }
}
