/* The I/O engine: nonblocking TCP sockets in one epoll set per context,
 * driven from the application's calls (no threads). Each ready QP is
 * serviced in place: whole FPDUs out with writev, received octets read
 * straight to where the QP's receive state machine says they go. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <poll.h>

#include "io/engine.h"
#include "io/transport.h"

void uw__qp_update_io(uw_qp *qp)
{
    if (qp->fd < 0 || qp->ctx->detached == qp)
        return; /* a detached socket comes back with uw__ctx_attach() */
    /* After the peer's FIN the socket stays readable forever: stop asking. */
    unsigned want = qp->eof_seen ? 0 : EPOLLIN | EPOLLRDHUP;
    bool tx = qp->cm == UW__CM_CONNECTING || qp->hs_off < qp->hs_len ||
              ((uw__cm_established(qp->cm) || qp->cm >= UW__CM_LINGER) && qp->rd.txf_count);
    if (qp->tp) {
        /* What epoll would report at once (it is level-triggered): a
         * transport only wakes us when its state changes. */
        unsigned r = qp->tp->ready(qp->tp_ep);
        if ((r & POLLIN && want & EPOLLIN) || (r & POLLOUT && tx))
            uw__kick(qp);
        return;
    }
    if (tx)
        want |= EPOLLOUT;
    if (!want) {
        /* Nothing to ask for: leave the set. epoll reports EPOLLHUP and
         * EPOLLERR whatever the mask, so a socket shut both ways and kept
         * registered with a mask of 0 made every wait return at once (a
         * sender waiting for a Terminate spun for minutes). */
        if (qp->ep_added && epoll_ctl(qp->ctx->epfd, EPOLL_CTL_DEL, qp->fd, NULL) == 0) {
            qp->ep_added = false;
            qp->epmask = 0;
        }
        return;
    }
    if (qp->ep_added && qp->epmask == want)
        return;
    struct epoll_event ev = {.events = want, .data.ptr = qp};
    int op = qp->ep_added ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(qp->ctx->epfd, op, qp->fd, &ev) == 0) {
        qp->epmask = want;
        qp->ep_added = true;
    }
}

void uw__ctx_arm_timer(uw_ctx *c)
{
    /* Deadlines change rarely (connection setup and teardown): scan the QPs
     * only then, not on every pass. */
    if (!c->deadline_dirty)
        return;
    c->deadline_dirty = false;
    uint64_t first = 0;
    for (uw_qp *q = c->qps; q; q = q->next)
        if (q->deadline_ns && (!first || q->deadline_ns < first))
            first = q->deadline_ns;
    uint64_t o = uw__orphans_timers(c, 0);
    if (o && (!first || o < first))
        first = o;
    /* A syscall per progress call is measurable: only touch the timer when
     * the earliest deadline moves. */
    if (first == c->timer_ns)
        return;
    c->timer_ns = first;
    if (c->clock)
        return; /* virtual time: progress() fires what expired */
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    if (first) {
        /* Absolute CLOCK_MONOTONIC, the clock of uw__now_ns(). */
        its.it_value.tv_sec = (time_t)(first / 1000000000u);
        its.it_value.tv_nsec = (long)(first % 1000000000u);
    }
    timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void event_simple(uw_qp *qp, int type, int err)
{
    uw_cm_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.type = type;
    ev.qp = qp;
    ev.err = err;
    ev.mpa = qp->rd.mpa;
    ev.peer = qp->peer;
    uw__event_push(qp->ctx, &ev);
}

/* The connection failed with err: reports it, unless a Terminate already
 * did, and closes. */
static void qp_fail(uw_qp *qp, int err)
{
    if (qp->cm == UW__CM_CLOSED)
        return; /* it ended once already */
    uw__log(qp->ctx, UW_LOG_WARN, "QP[%u]: connection ends: %s", qp->id, uw_strerror(err));
    /* An expired deadline is still set here: it was a startup's. */
    bool startup = !uw__cm_established(qp->cm) || qp->deadline_ns || qp->setup_failed;
    uw_listener *l = qp->listener;
    /* Still the listener's and not in WAIT_ACCEPT: never seen by the
     * application (a refused Request lingers with its listener too). */
    if (l && qp->cm != UW__CM_WAIT_ACCEPT) {
        /* Report on the listener, then free. */
        uw_cm_event ev;
        memset(&ev, 0, sizeof(ev));
        ev.type = UW_CM_CONNECT_ERROR;
        ev.listener = l;
        ev.err = err;
        ev.peer = qp->peer;
        uw__log(qp->ctx, UW_LOG_WARN, "listener: startup failed: %s", uw_strerror(err));
        uw__event_push(qp->ctx, &ev);
        uw_qp_destroy(qp);
        return;
    }
    /* A received Terminate was reported as it came (term_received()), and
     * one we sent when DRAIN was entered. */
    if (err != UW_ETERM_RECEIVED && !(qp->cm == UW__CM_DRAIN && qp->rd.term_done))
        event_simple(qp, startup ? UW_CM_CONNECT_ERROR : UW_CM_CONN_ERROR, err);
    uw__cm_to(qp, UW__CM_CLOSED, err, uw_strerror(err));
}

/* A small FPDU is several short iovecs (length, headers, payload, pad and
 * CRC): gathered here into one buffer and sent with send(), the kernel
 * neither copies in an iovec array nor walks short segments (both showed in
 * the busy-poll ping-pong profile). */
#define UW__TX_GATHER 512u
static ssize_t sock_write(int fd, const struct iovec *iov, int n)
{
    const int fl = MSG_NOSIGNAL | MSG_DONTWAIT;
    if (n == 1)
        return send(fd, iov[0].iov_base, iov[0].iov_len, fl);
    size_t total = 0;
    for (int i = 0; i < n && total <= UW__TX_GATHER; i++)
        total += iov[i].iov_len;
    if (total <= UW__TX_GATHER) {
        uint8_t buf[UW__TX_GATHER];
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
            off += iov[i].iov_len;
        }
        return send(fd, buf, off, fl);
    }
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
    return sendmsg(fd, &mh, fl);
}

static void emss_check(uw_qp *qp, size_t sent)
{
    if (sent < qp->emss_left) {
        qp->emss_left -= (uint32_t)sent;
        return;
    }
    uint32_t m = uw__cm_mulpdu(qp, qp->rd.flags_tx & UW_MPA_MARKERS);
    qp->rd.mulpdu = m < qp->rd.mulpdu_max ? m : qp->rd.mulpdu_max;
    if (qp->emss_every < UW__EMSS_LAST)
        qp->emss_every *= 2;
    qp->emss_left = qp->emss_every;
}

/* Where the kernel cuts the next write into segments (qp_tx.c, grid()):
 * asked only when that write would begin off the grid, which at an
 * Ethernet MTU is after a message's short last FPDU. */
static void regrid(uw_qp *qp)
{
    int unsent;
    if (!qp->tp && uw__rd_tx_offgrid(&qp->rd) && ioctl(qp->fd, SIOCOUTQNSD, &unsent) == 0 &&
        unsent == 0)
        uw__rd_tx_regrid(&qp->rd);
}

static int do_tx(uw_qp *qp)
{
    int round;
    for (round = 0; round < 64; round++) {
        /* IOV_MAX: a marked 64 KiB FPDU alone needs some 260 iovecs. */
        struct iovec iov[UW__TX_IOV];
        regrid(qp);
        int n = uw__qp_tx_iov(qp, iov, UW__TX_IOV);
        if (n <= 0)
            break;
        ssize_t w = qp->tp ? qp->tp->send(qp->tp_ep, iov, n) : sock_write(qp->fd, iov, n);
        if (w < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            return -errno;
        }
        uw__qp_tx_advance(qp, (size_t)w);
        emss_check(qp, (size_t)w);
        if (qp->rd.term_done) {
            uw__cm_to(qp, UW__CM_DRAIN, 0, "Terminate written");
            return 0;
        }
    }
    /* Out of rounds with the socket still taking data: build what is queued
     * so that txf_count says so, or nothing would ask for EPOLLOUT and a
     * single-connection wait would sleep in recvmsg with requests unsent
     * (seen with markers, whose few slots make each round short). */
    if (round == 64) {
        regrid(qp);
        uw__qp_tx_pending(qp);
    }
    /* Graceful close once everything queued has gone out. */
    if (qp->disconnect_req && qp->cm != UW__CM_CLOSING && !qp->rd.txf_count && !qp->rd.dead) {
        bool idle = !qp->rd.txf_count && qp->rd.sq_next >= qp->rd.sq_count &&
                    qp->rd.irq_tx >= qp->rd.irq_count;
        if (idle)
            uw__cm_to(qp, qp->cm == UW__CM_PEER_CLOSED ? UW__CM_CLOSED : UW__CM_CLOSING, 0,
                      "all sent, our FIN");
    }
    return 0;
}

/* The peer's FIN: judged once everything staged before it has been
 * processed (a full CQ can hold staged FPDUs back). Returns 1 when it ends
 * the stream cleanly (the caller moves on to PEER_CLOSED), 0 when it must
 * wait or our Terminate answers it, or UW_ETERM_RECEIVED. */
static int at_eof(uw_qp *qp)
{
    qp->eof_seen = true;
    int e = uw__qp_rx_advance(qp, 0);
    if (e == UW_ETERM_RECEIVED)
        return e;
    if (qp->rd.dead)
        return 0;
    if (qp->rd.rx.st_head < qp->rd.rx.st_tail && !qp->rd.rx.in_fpdu)
        return 0; /* paused: come back when the application polls */
    e = uw__qp_rx_eof(qp);
    if (e < 0) {
        uw__qp_terminate(qp, e, NULL, NULL);
        return 0;
    }
    return 1;
}

/* recv() for a single buffer: recvmsg() would copy in a msghdr and an
 * iovec array on every call, which shows in a busy-poll spin. */
static ssize_t sock_read(int fd, struct iovec *iov, int n, int flags)
{
    if (n == 1)
        return recv(fd, iov[0].iov_base, iov[0].iov_len, flags);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    return recvmsg(fd, &mh, flags);
}

/* Returns 1 when the peer's FIN has just ended the stream cleanly, 0, or
 * an error that ends the connection. */
static int do_rx(uw_qp *qp)
{
    if (qp->eof_seen)
        return qp->cm == UW__CM_PEER_CLOSED || qp->rd.dead ? 0 : at_eof(qp);
    if (qp->rd.rx.st_head < qp->rd.rx.st_tail) {
        /* Octets staged while a full CQ paused us: first those. */
        int e = uw__qp_rx_advance(qp, 0);
        if (e < 0)
            return e == UW_ETERM_RECEIVED ? e : 0;
    }
    for (int round = 0; round < 64 && !qp->rd.dead; round++) {
        struct iovec iov[UW__RX_PLAN];
        int n = uw__qp_rx_iov(qp, iov, UW__RX_PLAN);
        if (n <= 0)
            return 0;
        ssize_t r =
            qp->tp ? qp->tp->recv(qp->tp_ep, iov, n) : sock_read(qp->fd, iov, n, MSG_DONTWAIT);
        if (r < 0)
            return (errno == EAGAIN || errno == EINTR) ? 0 : -errno;
        if (r == 0)
            return at_eof(qp);
        int e = uw__qp_rx_advance(qp, (size_t)r);
        if (e < 0)
            return e == UW_ETERM_RECEIVED ? e : 0; /* our own Terminate is on its way */
        size_t asked = 0;
        for (int i = 0; i < n; i++)
            asked += iov[i].iov_len;
        if ((size_t)r < asked)
            break; /* the socket is drained: skip the recvmsg that would say EAGAIN */
    }
    /* Octets staged but not consumed (a full CQ) are resumed by a kick. */
    return 0;
}

/* A send refused because the peer reset the connection: what the peer sent
 * before its reset is still readable, and a Terminate there says more than
 * the reset does. */
static int tx_failed(uw_qp *qp, int r)
{
    if ((r == UW_ECONNRESET || r == UW_EPIPE) && !qp->rd.dead && !qp->eof_seen &&
        do_rx(qp) == UW_ETERM_RECEIVED)
        return UW_ETERM_RECEIVED;
    return r;
}

/* LINGER and DRAIN: the rest of the final frame, our FIN, then reading
 * (discarding) until the peer closes, so that closing never resets what
 * we sent. True when the QP is gone (a refused Request's, freed with its
 * report to the listener). */
static bool linger(uw_qp *qp)
{
    if (qp->cm == UW__CM_LINGER) {
        if (uw__cm_hs_move(qp, NULL) > 0)
            return false; /* the socket is full */
        /* Written, or the socket failed: either way the FIN is next. */
        uw__cm_to(qp, UW__CM_DRAIN, 0, "final frame written");
    }
    char sink[4096];
    struct iovec iov = {sink, sizeof(sink)};
    for (;;) {
        ssize_t r = qp->tp ? qp->tp->recv(qp->tp_ep, &iov, 1)
                           : recv(qp->fd, sink, sizeof(sink), MSG_DONTWAIT);
        if (r > 0)
            continue;
        if (r < 0 && errno == EAGAIN)
            return false;
        break;
    }
    /* A responder's refusal of a Request nobody has seen yet ends as a
     * failed startup. After uw_reject() there is nothing to report, and
     * our Terminate was reported when it was written. */
    if (qp->listener && qp->state != UW_QPS_CLOSED) {
        qp_fail(qp, qp->close_err ? qp->close_err : UW_ECONNABORTED);
        return true;
    }
    uw__cm_to(qp, UW__CM_CLOSED, 0, "peer's FIN");
    return false;
}

static void service(uw_qp *qp, unsigned events)
{
    qp->kick = false;
    if (qp->fd < 0)
        return;
    if (qp->cm == UW__CM_LINGER || qp->cm == UW__CM_DRAIN) {
        if (!linger(qp))
            uw__qp_update_io(qp);
        return;
    }
    if (qp->cm < UW__CM_WAIT_ACCEPT && qp->cm != UW__CM_IDLE) {
        int r = uw__cm_handshake(qp, events);
        if (r < 0) {
            qp_fail(qp, r);
            return;
        }
        if (qp->cm == UW__CM_LINGER) {
            if (!linger(qp))
                uw__qp_update_io(qp);
            return;
        }
        if (qp->cm != UW__CM_RTS) {
            uw__qp_update_io(qp);
            return;
        }
        if (qp->rd.rx.st_head < qp->rd.rx.st_tail) {
            /* FPDUs that came with the Reply. */
            int e = uw__qp_rx_advance(qp, 0);
            if (e == UW_ETERM_RECEIVED) {
                qp_fail(qp, e);
                return;
            }
        }
    }
    if (!uw__cm_established(qp->cm))
        return;
    /* The responder's Reply goes out before any FPDU. */
    ssize_t left = uw__cm_hs_move(qp, NULL);
    if (left > 0) {
        uw__qp_update_io(qp);
        return;
    }
    if (left < 0) {
        qp_fail(qp, (int)left);
        return;
    }
    int r = do_rx(qp);
    if (r < 0) {
        qp_fail(qp, r);
        return;
    }
    /* Acted on after transmission, as the Terminate or error that a send
     * can still bring says more than the FIN. */
    bool fin = r > 0;
    r = do_tx(qp);
    if (r < 0) {
        qp_fail(qp, tx_failed(qp, r));
        return;
    }
    if (!uw__cm_established(qp->cm)) {
        uw__qp_update_io(qp);
        return;
    }
    if (fin && !qp->rd.dead) {
        uw__cm_to(qp, qp->cm == UW__CM_CLOSING ? UW__CM_CLOSED : UW__CM_PEER_CLOSED, 0,
                  "peer's FIN");
        if (qp->cm == UW__CM_CLOSED)
            return;
    }
    uw__qp_update_io(qp);
}

static void timers(uw_ctx *c)
{
    uint64_t now = uw__ctx_now(c);
    for (uw_qp *q = c->qps, *next; q; q = next) {
        next = q->next;
        if (!q->deadline_ns || q->deadline_ns > now)
            continue;
        if (q->cm == UW__CM_LINGER || q->cm == UW__CM_DRAIN) {
            if (q->listener && q->state != UW_QPS_CLOSED)
                qp_fail(q, q->close_err ? q->close_err : UW_ETIMEDOUT);
            else
                uw__cm_to(q, UW__CM_CLOSED, 0, "linger timed out");
            continue;
        }
        uw__log(c, UW_LOG_WARN, "QP[%u]: connection setup timed out", q->id);
        qp_fail(q, UW_ETIMEDOUT);
    }
    uw__orphans_timers(c, now);
}

/* Orphans on a transport other than a socket are not in the epoll set:
 * their wake() marks them. */
static void orphans_kicked(uw_ctx *c)
{
    c->orphan_kick = false;
    for (struct uw__orphan *o = c->orphans, *next; o; o = next) {
        next = o->next;
        if (o->kick) {
            o->kick = false;
            uw__orphan_service(o); /* may free only o */
        }
    }
}

bool uw__ctx_busy(const uw_ctx *c)
{
    return c->ready_head || c->orphan_kick;
}

uint64_t uw__ctx_next_deadline(uw_ctx *c)
{
    uw__ctx_arm_timer(c);
    return c->timer_ns;
}

/* One established connection: a non-blocking pass can go to its socket
 * directly. Busy-polling then costs one recv per spin instead of an
 * epoll_wait, and a message that arrived is read by that same call. A
 * listener or an armed timer is still watched, by every UW__DIRECT_EPOLL-th
 * pass going through epoll: an accept or a timeout waits a few microseconds
 * of spinning, where an epoll_wait per message would cost every message. */
#define UW__DIRECT_EPOLL 16u
static uw_qp *direct_qp(const uw_ctx *c)
{
    uw_qp *q = c->qps;
    if (!q || q->next || c->ev_armed || q->deadline_ns || !uw__cm_established(q->cm) || q->fd < 0 ||
        q->rd.dead || q->eof_seen || q->tp)
        return NULL;
    return q;
}

/* A socket in an epoll set costs the kernel a wakeup callback (a lock and a
 * ready-list update) for every segment that arrives, on the sender's side of
 * loopback: about a microsecond per round trip here. A socket driven by
 * direct calls does not need it, so it leaves the set; a pass that sleeps
 * watches it with poll() beside the epoll fd (poll_detached()). It comes
 * back when it stops being the only connection or stops qualifying for
 * direct calls. An application holding the context fd may sleep on it
 * itself: its sockets never leave. */
static void detach(uw_ctx *c, uw_qp *q)
{
    if (c->detached == q || c->fd_taken)
        return;
    if (q->ep_added && epoll_ctl(c->epfd, EPOLL_CTL_DEL, q->fd, NULL) < 0)
        return;
    q->ep_added = false;
    q->epmask = 0;
    c->detached = q;
}

void uw__ctx_attach(uw_ctx *c)
{
    uw_qp *q = c->detached;
    if (!q)
        return;
    c->detached = NULL;
    uw__qp_update_io(q);
}

/* Sleeps for the detached connection and for everything still in the epoll
 * set (listeners, the timer, the signal), without putting the connection
 * back: poll() hooks the socket's wait queue only while it sleeps, where an
 * epoll set runs a wakeup callback in the sender's send() for every segment
 * received, and taking the socket out again at the next non-blocking pass
 * cost a server mixing uw_cq_wait() and uw_cm_get_event() two epoll_ctl
 * calls per wait. Returns whether the epoll set has anything ready; the
 * connection is kicked when its socket is. */
static bool poll_detached(uw_ctx *c, uw_qp *q, int timeout_ms)
{
    short want = POLLIN | POLLRDHUP;
    if (q->rd.txf_count || q->hs_off < q->hs_len)
        want |= POLLOUT;
    struct pollfd p[2] = {{.fd = q->fd, .events = want}, {.fd = c->epfd, .events = POLLIN}};
    if (poll(p, 2, timeout_ms) <= 0)
        return false;
    if (p[0].revents)
        uw__kick(q);
    return p[1].revents != 0;
}

static int progress(uw_ctx *c, int timeout_ms)
{
    uint64_t before = c->produced;
    if (c->sig_soft) {
        c->sig_soft = false;
        timeout_ms = 0;
    }
    if (c->clock && c->timer_ns && uw__ctx_now(c) >= c->timer_ns) {
        /* What the timerfd does for real time. */
        c->timer_ns = 0;
        c->deadline_dirty = true;
        timers(c);
    }
    if (c->orphan_kick)
        orphans_kicked(c);
    uw_qp *dq = direct_qp(c);
    if (dq && !timeout_ms &&
        ((!c->nlisten && !c->timer_ns) || ++c->direct_spins % UW__DIRECT_EPOLL != 0)) {
        detach(c, dq);
        service(dq, EPOLLIN | EPOLLOUT);
        uw__ctx_arm_timer(c);
        return (int)(c->produced - before);
    }
    if (c->detached && c->detached != dq)
        uw__ctx_attach(c);
    if (dq && timeout_ms)
        detach(c, dq);
    bool skip_epoll = false;
    if (dq && c->detached == dq) {
        if (timeout_ms && !c->ready_head)
            skip_epoll = !poll_detached(c, dq, timeout_ms);
        else
            uw__kick(dq); /* serviced below, still without epoll */
        timeout_ms = 0;
    }
    uint64_t junk;
    struct epoll_event evs[64];
    int n = skip_epoll ? 0 : epoll_wait(c->epfd, evs, 64, timeout_ms);
    for (int i = 0; i < n; i++) {
        uint64_t u = evs[i].data.u64;
        if (u == UW__EP_EVFD) {
            if (read(c->evfd, &junk, sizeof(junk)) > 0) {
            }
            c->ev_armed = false;
            continue;
        }
        if (u == UW__EP_TIMERFD) {
            if (read(c->tfd, &junk, sizeof(junk)) > 0) {
            }
            c->timer_ns = 0; /* expired: disarmed */
            c->deadline_dirty = true;
            timers(c);
            continue;
        }
        int *tag = evs[i].data.ptr;
        if (*tag == UW__EP_LISTENER) {
            uw__cm_accept_fd((uw_listener *)tag);
        } else if (*tag == UW__EP_ORPHAN) {
            uw__orphan_service((struct uw__orphan *)tag); /* may free it */
        } else {
            uw_qp *q = (uw_qp *)tag;
            uw__kick(q);
            q->last_events |= evs[i].events;
        }
    }
    /* Only the QPs that were kicked. A pass can kick QPs again (or new ones):
     * they wait for the next pass, and the fd says so. Servicing a QP can
     * destroy only that QP, so the detached list stays valid. */
    uw_qp *list = c->ready_head;
    c->ready_head = c->ready_tail = NULL;
    while (list) {
        uw_qp *q = list;
        list = q->rnext;
        q->queued = false;
        if (q->kick) {
            unsigned e = q->last_events;
            q->last_events = 0;
            service(q, e);
        }
    }
    uw__ctx_arm_timer(c);
    if (c->ready_head)
        uw__ctx_signal(c);
    return (int)(c->produced - before);
}

int uw_ctx_progress(uw_ctx *c)
{
    if (!c)
        return UW_EINVAL;
    return progress(c, 0);
}

/* With a single connection and nothing else to watch, block in recvmsg()
 * itself: the same one system call per received message that a blocking TCP
 * application makes, where epoll would add a second. */
static int wait_in_recv(uw_ctx *c, int timeout_ms)
{
    uw_qp *q = c->qps;
    if (!q || q->next || c->nlisten || c->ev_armed || c->sig_soft || c->timer_ns || !timeout_ms ||
        !uw__cm_established(q->cm) || q->fd < 0 || q->tp || q->rd.dead || q->kick ||
        q->rd.txf_count || q->eof_seen || q->hs_off < q->hs_len || q->disconnect_req)
        return -1;
    detach(c, q);
    struct iovec iov[UW__RX_PLAN];
    int n = uw__qp_rx_iov(q, iov, UW__RX_PLAN);
    if (n <= 0)
        return -1;
    if (timeout_ms != q->rcvtimeo_ms) {
        struct timeval tv = {0, 0};
        if (timeout_ms > 0) {
            tv.tv_sec = timeout_ms / 1000;
            tv.tv_usec = (timeout_ms % 1000) * 1000;
        }
        if (setsockopt(q->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
            return -1;
        q->rcvtimeo_ms = timeout_ms;
    }
    ssize_t r = sock_read(q->fd, iov, n, 0);
    if (r < 0)
        return (errno == EAGAIN || errno == EINTR) ? 0 : -1; /* timeout: nothing happened */
    if (r == 0) {
        uw__kick(q); /* EOF: let the normal path read it again and judge */
        return -1;
    }
    int e = uw__qp_rx_advance(q, (size_t)r);
    if (e == UW_ETERM_RECEIVED) {
        qp_fail(q, e);
        return 1;
    }
    if (q->rd.dead) {
        uw__kick(q); /* our Terminate goes out through the normal path */
        return -1;
    }
    /* Data can unlock transmission (Read Responses, a Send after the RTR). */
    regrid(q);
    if (uw__qp_tx_pending(q))
        uw__qp_doorbell(q);
    return 1;
}

int uw_ctx_wait(uw_ctx *c, int timeout_ms)
{
    if (!c)
        return UW_EINVAL;
    uint64_t before = c->produced, start = uw__ctx_now(c);
    int r;
    int w = wait_in_recv(c, timeout_ms);
    if (w >= 0)
        r = (int)(c->produced - before);
    else
        r = progress(c, timeout_ms);
    /* As uw_cq_wait() and uw_cm_wait_event() say it: nothing by the end of
     * the time given. A wake-up that produced nothing before then is 0. */
    if (r == 0 && timeout_ms >= 0 && uw__ctx_now(c) - start >= (uint64_t)timeout_ms * 1000000u)
        return UW_ETIMEDOUT;
    return r;
}

void uw__qp_doorbell(uw_qp *qp)
{
    if (!uw__cm_established(qp->cm) || qp->fd < 0 || qp->rd.dead) {
        uw__kick(qp); /* runs once the connection is up */
        return;
    }
    int r = do_tx(qp);
    if (r < 0) {
        qp_fail(qp, tx_failed(qp, r));
        return;
    }
    /* What did not fit in the socket waits for EPOLLOUT. */
    uw__qp_update_io(qp);
}

int uw_disconnect(uw_qp *qp)
{
    if (!qp)
        return UW_EINVAL;
    if (!uw__cm_established(qp->cm))
        return qp->cm == UW__CM_CLOSED ? 0 : UW_ENOTCONN;
    qp->disconnect_req = true;
    uw__kick(qp);
    uw__ctx_signal(qp->ctx);
    return 0;
}

int uw_abort(uw_qp *qp)
{
    if (!qp)
        return UW_EINVAL;
    if (qp->tp && qp->fd >= 0) {
        qp->tp->close(qp->tp_ep, true);
        qp->fd = -1;
        qp->tp = NULL;
    } else if (qp->fd >= 0) {
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(qp->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    /* Asked for: nothing to report. */
    uw__cm_to(qp, UW__CM_CLOSED, UW_ECONNABORTED, "uw_abort");
    return 0;
}
