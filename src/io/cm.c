/* Connection manager: TCP connect/listen/accept and the MPA startup
 * exchange (RFC 5044 7.1, RFC 6581), driven by io/engine.c. The startup
 * frames are read through the QP's staging buffer, so octets that follow the
 * Reply (the peer's first FPDUs) stay there for the FPDU receiver. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "io/engine.h"
#include "io/transport.h"

static void policy_from(uw_mpa_policy *pol, const uw_conn_param *p)
{
    uw_mpa_policy_default(pol);
    if (!p)
        return;
    pol->rev = p->rev ? p->rev : 2;
    pol->enhanced = pol->rev >= 2;
    pol->crc = p->crc != UW_CRC_AVOID;
    pol->markers = p->markers;
    if (p->ird)
        pol->ird = p->ird == UW_CONN_ZERO ? 0 : p->ird;
    if (p->ord)
        pol->ord = p->ord == UW_CONN_ZERO ? 0 : p->ord;
    pol->ird_max = pol->ird;
    pol->p2p = p->p2p;
    if (p->p2p)
        pol->rtr = p->rtr ? p->rtr : UW_MPA_RTR_ALL;
    pol->accept_rev0 = p->accept_rev0;
}

/* Copies p with its private data and congestion-control name, so that the
 * caller's buffers need not outlive the call. */
static int copy_param(uw_conn_param *dst, uint8_t *pdbuf, char *ccbuf, const uw_conn_param *src)
{
    memset(dst, 0, sizeof(*dst));
    if (!src)
        return 0;
    if (src->private_data_len > UW_MPA_MAX_PD || (src->private_data_len && !src->private_data))
        return UW_EINVAL;
    if (src->rev > 2 || src->crc < 0 || src->crc > UW_CRC_REQUIRE || src->rtr > UW_MPA_RTR_ALL ||
        src->timeout_ms < 0)
        return UW_EINVAL;
    if (src->tcp_congestion && strlen(src->tcp_congestion) >= UW__CC_MAX)
        return UW_EINVAL;
    *dst = *src;
    if (src->private_data_len)
        memcpy(pdbuf, src->private_data, src->private_data_len);
    dst->private_data = pdbuf;
    if (src->tcp_congestion) {
        strcpy(ccbuf, src->tcp_congestion);
        dst->tcp_congestion = ccbuf;
    }
    return 0;
}

static uint64_t deadline(const uw_qp *qp, bool initiator)
{
    const uw_conn_param *p = &qp->param;
    int ms = p->timeout_ms ? p->timeout_ms : (initiator ? 10000 : 5000);
    return uw__ctx_now(qp->ctx) + (uint64_t)ms * 1000000u;
}

static int sock_setup(int fd, const uw_conn_param *p)
{
    int one = 1;
    /* Small FPDUs (Read Requests, RTRs, latency-bound Sends) must not wait
     * for Nagle; the transmitter batches whole FPDUs per writev itself. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* A peer that vanishes with our data unacknowledged is an error within
     * the connection's timeout, not a hang. */
    unsigned ut = (unsigned)(p->timeout_ms ? p->timeout_ms : 10000);
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
    if (p->tcp_congestion && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, p->tcp_congestion,
                                        (socklen_t)strlen(p->tcp_congestion)) < 0)
        return -errno;
    return 0;
}

/* Everything uw_connect() decides before there is a connection: the
 * parameters and the Request. */
static int connect_prep(uw_qp *qp, const uw_conn_param *p)
{
    if (qp->state != UW_QPS_IDLE || qp->cm != UW__CM_IDLE)
        return UW_EALREADY;
    int r = copy_param(&qp->param, qp->param_pd, qp->param_cc, p);
    if (r < 0)
        return r;
    policy_from(&qp->pol, p);
    if (qp->param.crc == UW_CRC_REQUIRE)
        qp->pol.crc = true;
    r = uw_mpa_request(&qp->pol, qp->param.private_data, qp->param.private_data_len, &qp->req);
    if (r < 0)
        return r;
    ssize_t n = uw_mpa_frame_encode(&qp->req, qp->hs_out, sizeof(qp->hs_out));
    if (n < 0)
        return (int)n;
    qp->hs_len = (uint32_t)n;
    qp->hs_off = 0;
    return 0;
}

static void connect_started(uw_qp *qp)
{
    uw_mpa_frame_parser_init(&qp->parser, UW_MPA_REPLY, UW_MPA_MAX_PD);
    uw__cm_to(qp, UW__CM_CONNECTING, 0, "uw_connect");
    uw__qp_update_io(qp);
    uw__ctx_arm_timer(qp->ctx);
}

static void tp_wake(void *ud)
{
    uw_qp *qp = ud;
    uw__kick(qp);
    uw__ctx_signal(qp->ctx);
}

int uw__tp_connect(uw_qp *qp, const struct uw__tp_ops *tp, void *ep, const uw_conn_param *p)
{
    if (!qp || !tp || !ep)
        return UW_EINVAL;
    int r = connect_prep(qp, p);
    if (r < 0)
        return r;
    qp->fd = UW__FD_TP;
    qp->tp = tp;
    qp->tp_ep = ep;
    tp->watch(ep, tp_wake, qp);
    connect_started(qp);
    uw__kick(qp); /* connected already: the first pass sends the Request */
    return 0;
}

int uw_connect(uw_qp *qp, const struct sockaddr *addr, socklen_t len, const uw_conn_param *p)
{
    if (!qp || !addr || len > sizeof(qp->peer))
        return UW_EINVAL;
    int r = connect_prep(qp, p);
    if (r < 0)
        return r;
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if ((r = sock_setup(fd, &qp->param)) < 0) {
        close(fd);
        return r;
    }
    memcpy(&qp->peer, addr, len);
    if (connect(fd, addr, len) < 0 && errno != EINPROGRESS) {
        int e = -errno;
        close(fd);
        return e;
    }
    qp->fd = fd;
    connect_started(qp);
    return 0;
}

static int listener_new(uw_ctx *ctx, const uw_qp_attr *qa, const uw_conn_param *p,
                        uw_listener **out)
{
    /* Checked now: a bad attr would otherwise fail every incoming
     * connection, each dropped with nothing said to the application. */
    if (uw__qp_attr_check(ctx, qa) < 0)
        return UW_EINVAL;
    uw_listener *l = ctx->alloc.alloc(ctx->alloc.ud, sizeof(*l));
    if (!l)
        return UW_ENOMEM;
    memset(l, 0, sizeof(*l));
    int r = copy_param(&l->param, l->param_pd, l->param_cc, p);
    if (r < 0) {
        ctx->alloc.free(ctx->alloc.ud, l);
        return r;
    }
    l->ctx = ctx;
    l->qp_attr = *qa;
    l->tag = UW__EP_LISTENER;
    l->fd = -1;
    *out = l;
    return 0;
}

/* The listener exists: it counts, and holds what its QPs will use. */
static void listener_open(uw_listener *l)
{
    uw_ctx *ctx = l->ctx;
    const uw_qp_attr *qa = &l->qp_attr;
    ctx->nlisten++;
    /* The QPs it will create use them: they stay until it is destroyed
     * (uw_pd_dealloc()/uw_cq_destroy() say UW_EBUSY meanwhile). */
    qa->pd->nqp++;
    qa->send_cq->nqp++;
    qa->recv_cq->nqp++;
    l->accepting = true;
}

int uw__tp_listen(uw_ctx *ctx, const uw_qp_attr *qa, const uw_conn_param *p, uw_listener **out)
{
    if (!ctx || !qa || !out)
        return UW_EINVAL;
    int r = listener_new(ctx, qa, p, out);
    if (r == 0)
        listener_open(*out);
    return r;
}

int uw_listen(uw_ctx *ctx, const struct sockaddr *addr, socklen_t len, const uw_qp_attr *qa,
              const uw_conn_param *p, uw_listener **out)
{
    if (!ctx || !addr || !qa || !out)
        return UW_EINVAL;
    uw_listener *l;
    int r = listener_new(ctx, qa, p, &l);
    if (r < 0)
        return r;
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
        bind(fd, addr, len) < 0 || listen(fd, 4096) < 0) {
        r = -errno;
        if (fd >= 0)
            close(fd);
        ctx->alloc.free(ctx->alloc.ud, l);
        return r;
    }
    l->fd = fd;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = l};
    if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        r = -errno;
        close(fd);
        ctx->alloc.free(ctx->alloc.ud, l);
        return r;
    }
    listener_open(l);
    *out = l;
    return 0;
}

int uw_listener_destroy(uw_listener *l)
{
    if (!l)
        return UW_EINVAL;
    uw_ctx *c = l->ctx;
    /* QPs still in the startup exchange belong to the listener. */
    for (uw_qp *q = c->qps, *next; q; q = next) {
        next = q->next;
        if (q->listener == l && q->cm < UW__CM_WAIT_ACCEPT)
            uw_qp_destroy(q);
        else if (q->listener == l)
            q->listener = NULL;
    }
    struct uw__evnode **pp = &c->ev_head;
    c->ev_tail = NULL;
    while (*pp) {
        if ((*pp)->ev.listener == l && !(*pp)->ev.qp) {
            struct uw__evnode *dead = *pp;
            *pp = dead->next;
            c->alloc.free(c->alloc.ud, dead);
        } else {
            if ((*pp)->ev.listener == l)
                (*pp)->ev.listener = NULL;
            c->ev_tail = *pp;
            pp = &(*pp)->next;
        }
    }
    if (l->fd >= 0)
        close(l->fd);
    c->nlisten--;
    l->qp_attr.pd->nqp--;
    l->qp_attr.send_cq->nqp--;
    l->qp_attr.recv_cq->nqp--;
    c->alloc.free(c->alloc.ud, l);
    return 0;
}

int uw_listener_addr(const uw_listener *l, struct sockaddr_storage *ss, socklen_t *len)
{
    if (!l || !ss || !len)
        return UW_EINVAL;
    *len = sizeof(*ss);
    return getsockname(l->fd, (struct sockaddr *)ss, len) < 0 ? -errno : 0;
}

/* Startup exchanges the application has not seen yet are bounded: at the
 * cap the listener stops accepting and new connections wait in the kernel's
 * backlog (a flood costs queue slots, not memory), resuming as exchanges
 * finish. */
void uw__listener_update(uw_listener *l)
{
    bool want = l->npending < UW__MAX_PENDING;
    if (want == l->accepting)
        return;
    if (l->fd < 0) {
        l->accepting = want; /* uw__tp_accept() refuses meanwhile */
        return;
    }
    struct epoll_event ev = {.events = want ? EPOLLIN : 0, .data.ptr = l};
    if (epoll_ctl(l->ctx->epfd, EPOLL_CTL_MOD, l->fd, &ev) == 0)
        l->accepting = want;
}

/* A connection arrived on l: its QP, waiting for the Request, or NULL. */
static uw_qp *accepted(uw_listener *l, int fd, const struct sockaddr_storage *ss, socklen_t sl)
{
    uw_ctx *c = l->ctx;
    uw_qp *qp;
    /* Bounded: a flood of half-open MPA exchanges costs at most this many QPs. */
    if (uw__qp_alloc(c, &l->qp_attr, &qp) < 0) {
        uw__log(c, UW_LOG_WARN, "listener: connection dropped (too many pending)");
        return NULL;
    }
    qp->fd = fd;
    qp->listener = l;
    l->npending++;
    memcpy(&qp->peer, ss, sl);
    qp->param = l->param;
    qp->param.private_data = qp->param_pd;
    memcpy(qp->param_pd, l->param_pd, l->param.private_data_len);
    memcpy(qp->param_cc, l->param_cc, sizeof(qp->param_cc));
    if (qp->param.tcp_congestion)
        qp->param.tcp_congestion = qp->param_cc;
    policy_from(&qp->pol, &l->param);
    if (l->param.crc == UW_CRC_REQUIRE)
        qp->pol.crc = true;
    uw_mpa_frame_parser_init(&qp->parser, UW_MPA_REQUEST, UW_MPA_MAX_PD);
    uw__cm_to(qp, UW__CM_WAIT_REQUEST, 0, "accepted by a listener");
    return qp;
}

void uw__cm_accept_fd(uw_listener *l)
{
    uw_ctx *c = l->ctx;
    for (int i = 0; i < 16 && l->npending < UW__MAX_PENDING; i++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        /* Blocking socket, nonblocking calls (MSG_DONTWAIT): lets the engine
         * wait in recvmsg itself when one connection is all there is. */
        int fd = accept4(l->fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        uw_qp *qp = accepted(l, fd, &ss, sl);
        if (!qp) {
            close(fd);
            continue;
        }
        sock_setup(fd, &qp->param);
        uw__qp_update_io(qp);
    }
    uw__listener_update(l);
    uw__ctx_arm_timer(c);
}

int uw__tp_accept(uw_listener *l, const struct uw__tp_ops *tp, void *ep)
{
    if (!l || !tp || !ep)
        return UW_EINVAL;
    if (!l->accepting)
        return UW_EBUSY; /* as the kernel's backlog would hold it */
    struct sockaddr_storage none;
    memset(&none, 0, sizeof(none));
    uw_qp *qp = accepted(l, UW__FD_TP, &none, sizeof(none));
    if (!qp)
        return UW_ENOMEM;
    qp->tp = tp;
    qp->tp_ep = ep;
    tp->watch(ep, tp_wake, qp);
    uw__kick(qp); /* the Request may be there already */
    uw__listener_update(l);
    uw__ctx_arm_timer(l->ctx);
    return 0;
}

static void fill_event(uw_qp *qp, uw_cm_event *ev, int type, const uw_mpa_frame *peer)
{
    memset(ev, 0, sizeof(*ev));
    ev->type = type;
    ev->qp = qp;
    ev->mpa = qp->rd.mpa;
    ev->peer = qp->peer;
    if (peer) {
        ev->private_data_len = peer->ulp_pd_len;
        memcpy(ev->private_data, peer->ulp_pd, peer->ulp_pd_len);
    }
}

static uint32_t mulpdu_for(const uw_qp *qp, int mss, bool markers)
{
    uint32_t m = uw_mpa_mulpdu((uint32_t)mss, markers);
    if (qp->param.max_fpdu && qp->param.max_fpdu < m)
        m = qp->param.max_fpdu < UW_MPA_MULPDU_MIN ? UW_MPA_MULPDU_MIN : qp->param.max_fpdu;
    return m;
}

uint32_t uw__cm_mulpdu(uw_qp *qp, bool markers)
{
    int mss = 0;
    socklen_t l = sizeof(mss);
    if (qp->tp)
        mss = (int)qp->tp->mss(qp->tp_ep);
    else if (getsockopt(qp->fd, IPPROTO_TCP, TCP_MAXSEG, &mss, &l) < 0)
        mss = 0;
    if (mss <= 0)
        mss = 1460;
    return mulpdu_for(qp, mss, markers);
}

/* Enters RTS. The EMSS can grow up to the path MTU's MSS (Linux starts a
 * loopback connection at half of it), and with markers the transmit slots
 * must be sized for the largest MULPDU at the start: that MTU less the IP
 * and TCP headers (no options: the largest the MSS can be). */
static void start(uw_qp *qp, const uw_mpa_params *mpa, bool initiator)
{
    bool mk = mpa->markers_tx;
    uint32_t m = uw__cm_mulpdu(qp, mk), max = m;
    int mtu = 0;
    socklen_t l = sizeof(mtu);
    bool v6 = qp->peer.ss_family == AF_INET6;
    if (mk && !qp->tp &&
        getsockopt(qp->fd, v6 ? IPPROTO_IPV6 : IPPROTO_IP, v6 ? IPV6_MTU : IP_MTU, &mtu, &l) == 0 &&
        mtu > 100) {
        uint32_t big = mulpdu_for(qp, mtu - (v6 ? 60 : 40), mk);
        if (big > max)
            max = big;
    }
    uw__qp_start(qp, mpa, initiator, m, max, 0, 0);
}

/* Responder: a complete Request is in qp->req. */
static int got_request(uw_qp *qp)
{
    uw_mpa_frame rep;
    int r = uw_mpa_respond(&qp->pol, &qp->req, false, NULL, 0, &rep, &qp->rd.mpa);
    if (r == UW_EMPA_IRD || r == UW_EMPA_RTR) {
        /* RFC 6581 9: say why in a rejecting Reply, then close. */
        uw_mpa_frame rj;
        if (uw_mpa_respond(&qp->pol, &qp->req, true, NULL, 0, &rj, &qp->rd.mpa) == 0 ||
            r == UW_EMPA_IRD) {
            ssize_t n =
                uw_mpa_frame_encode(r == UW_EMPA_IRD ? &rep : &rj, qp->hs_out, sizeof(qp->hs_out));
            if (n > 0) {
                qp->hs_len = (uint32_t)n;
                qp->hs_off = 0;
                /* Not an error of this pass: the Reply goes out, then
                 * the listener hears of it (engine.c linger()). */
                uw__cm_to(qp, UW__CM_LINGER, r, "refusing Reply");
                return 0;
            }
        }
    }
    if (r < 0)
        return r;
    uw__cm_to(qp, UW__CM_WAIT_ACCEPT, 0, "valid Request");
    return 0;
}

int uw_accept(uw_qp *qp, const uw_conn_param *p)
{
    if (!qp || qp->cm != UW__CM_WAIT_ACCEPT)
        return UW_EINVAL;
    if (p) {
        if (p->private_data_len > UW_MPA_MAX_PD || (p->private_data_len && !p->private_data) ||
            p->crc < 0 || p->crc > UW_CRC_REQUIRE)
            return UW_EINVAL;
        if (p->private_data_len)
            memcpy(qp->param_pd, p->private_data, p->private_data_len);
        qp->param.private_data_len = p->private_data_len;
        /* Per connection: the application may have chosen them from the
         * Request's private data (RFC 5044 7.1.2: the Reply decides). */
        qp->pol.crc = p->crc != UW_CRC_AVOID;
        qp->pol.markers = p->markers;
        if (p->max_fpdu)
            qp->param.max_fpdu = p->max_fpdu;
    }
    uw_mpa_frame rep;
    int r = uw_mpa_respond(&qp->pol, &qp->req, false, qp->param_pd, qp->param.private_data_len,
                           &rep, &qp->rd.mpa);
    if (r < 0)
        return r;
    ssize_t n = uw_mpa_frame_encode(&rep, qp->hs_out, sizeof(qp->hs_out));
    if (n < 0)
        return (int)n;
    qp->hs_len = (uint32_t)n;
    qp->hs_off = 0;
    qp->rep = rep;
    if (qp->listener) {
        qp->listener->npending--;
        uw__listener_update(qp->listener);
        qp->listener = NULL;
    }
    start(qp, &qp->rd.mpa, false);
    uw__cm_to(qp, UW__CM_RTS, 0, "uw_accept");
    uw__qp_update_io(qp);
    return 0;
}

int uw_reject(uw_qp *qp, const void *pd, size_t pd_len)
{
    if (!qp || qp->cm != UW__CM_WAIT_ACCEPT || pd_len > UW_MPA_MAX_PD || (pd_len && !pd))
        return UW_EINVAL;
    uw_mpa_frame rep;
    uw_mpa_params prm;
    int r = uw_mpa_respond(&qp->pol, &qp->req, true, pd, pd_len, &rep, &prm);
    if (r < 0)
        return r;
    ssize_t n = uw_mpa_frame_encode(&rep, qp->hs_out, sizeof(qp->hs_out));
    if (n < 0)
        return (int)n;
    qp->hs_len = (uint32_t)n;
    qp->hs_off = 0;
    if (qp->listener) {
        qp->listener->npending--;
        uw__listener_update(qp->listener);
        qp->listener = NULL;
    }
    uw__cm_to(qp, UW__CM_LINGER, 0, "uw_reject");
    uw__qp_update_io(qp);
    return 0;
}

/* Initiator: a complete Reply is in qp->rep. */
static int got_reply(uw_qp *qp)
{
    int r = uw_mpa_accept_reply(&qp->pol, &qp->req, &qp->rep, &qp->rd.mpa);
    uw_cm_event ev;
    if (r == UW_ECONNREFUSED) {
        fill_event(qp, &ev, UW_CM_REJECTED, &qp->rep);
        ev.err = r;
        uw__event_push(qp->ctx, &ev);
        return r;
    }
    if (r == UW_EMPA_IRD || r == UW_EMPA_RTR) {
        /* RFC 6581 9.2/7.1: the initiator reports these with a Terminate
         * (codes 6 and 7), which needs the negotiated framing. */
        uw_mpa_params prm = qp->rd.mpa;
        prm.ddp_version = 1;
        start(qp, &prm, true);
        qp->rd.rtr_pending_tx = false;
        uw__qp_terminate(qp, r, NULL, NULL);
        qp->setup_failed = true;
        uw__cm_to(qp, UW__CM_RTS, 0, "unusable Reply, Terminate queued");
        return 0;
    }
    if (r < 0)
        return r;
    start(qp, &qp->rd.mpa, true);
    uw__cm_to(qp, UW__CM_RTS, 0, "valid Reply");
    return 0;
}

/* The responder's peer-to-peer RTR has arrived (the core has already made
 * rd.mpa.rtr name it): the connection is up. */
static void rtr_arrived(uw_qp *qp)
{
    uw__set_deadline(qp, 0);
    uw__kick(qp);
    uw_cm_event ev;
    fill_event(qp, &ev, UW_CM_ESTABLISHED, &qp->req);
    uw__event_push(qp->ctx, &ev);
}

static void term_received(uw_qp *qp, const uw__term_msg *t)
{
    uw_cm_event ev;
    fill_event(qp, &ev, UW_CM_TERMINATED, NULL);
    ev.term_received = true;
    ev.term = t->term;
    ev.err = UW_ETERM_RECEIVED;
    uw__log(qp->ctx, UW_LOG_WARN, "QP[%u]: Terminate received: %s%s", qp->id,
            uw_term_describe(t->term), t->quirk ? " (siw control-octet order)" : "");
    if (qp->setup_failed || qp->deadline_ns) {
        ev.type = UW_CM_CONNECT_ERROR;
    }
    /* The end is reported here: the caller fails the connection with
     * UW_ETERM_RECEIVED, which reports nothing more. */
    uw__event_push(qp->ctx, &ev);
}

/* In the order the core found them: a call can bring the RTR and then the
 * peer's Terminate, and the RTR's ESTABLISHED goes first, as it did when the
 * core reported each as it came. */
void uw__qp_news(uw_qp *qp)
{
    struct uw__rdmap *rd = &qp->rd;
    unsigned news = rd->news;
    rd->news = 0;
    if (news & UW__RD_WC) {
        qp->ctx->produced += rd->wc_new;
        rd->wc_new = 0;
    }
    if (news & UW__RD_KICK)
        uw__kick(qp);
    if (news & UW__RD_RTR_ARRIVED)
        rtr_arrived(qp);
    if (news & UW__RD_TERM_QUEUED) {
        qp->close_err = rd->term_err;
        uw__log(qp->ctx, UW_LOG_WARN, "QP[%u]: sending Terminate: %s (%s)", qp->id,
                uw_term_describe(rd->term_out.term), uw_strerror(rd->term_err));
    }
    if (news & UW__RD_TERM_RECEIVED)
        term_received(qp, &rd->term_in);
}

/* Feeds staged octets to the startup-frame parser. Returns 1 when the frame
 * is complete, 0 when more is needed, or an error. */
static int parse_frame(uw_qp *qp, uw_mpa_frame *out)
{
    struct uw__rx *rx = &qp->rd.rx;
    ssize_t n = uw_mpa_frame_parser_feed(&qp->parser, rx->stage + rx->st_head,
                                         rx->st_tail - rx->st_head, out);
    if (n < 0)
        return (int)n;
    rx->st_head += (uint32_t)n;
    return uw_mpa_frame_parser_done(&qp->parser) ? 1 : 0;
}

/* Startup phase I/O. Returns 0, or an error that ends the connection. */
int uw__cm_handshake(uw_qp *qp, unsigned events)
{
    if (qp->cm == UW__CM_CONNECTING) {
        if (qp->tp) {
            /* A transport endpoint is connected when it is made. */
            uw__cm_to(qp, UW__CM_WAIT_REPLY, 0, "transport connected");
            goto connected;
        }
        if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return 0;
        int e = 0;
        socklen_t l = sizeof(e);
        getsockopt(qp->fd, SOL_SOCKET, SO_ERROR, &e, &l);
        if (e)
            return -e;
        /* Connected: back to a blocking socket; every call passes
         * MSG_DONTWAIT except the engine's single-connection wait. */
        int fl = fcntl(qp->fd, F_GETFL);
        if (fl >= 0)
            fcntl(qp->fd, F_SETFL, fl & ~O_NONBLOCK);
        uw__cm_to(qp, UW__CM_WAIT_REPLY, 0, "TCP connected");
    }
connected:
    if (qp->cm == UW__CM_WAIT_REPLY) {
        ssize_t left = uw__cm_hs_move(qp, NULL);
        if (left != 0)
            return left > 0 ? 0 : (int)left;
    }
    if (qp->cm != UW__CM_WAIT_REPLY && qp->cm != UW__CM_WAIT_REQUEST)
        return 0;
    struct uw__rx *rx = &qp->rd.rx;
    for (;;) {
        uw_mpa_frame *f = qp->cm == UW__CM_WAIT_REPLY ? &qp->rep : &qp->req;
        if (rx->st_head < rx->st_tail) {
            int r = parse_frame(qp, f);
            if (r < 0)
                return r;
            if (r == 1)
                return qp->cm == UW__CM_WAIT_REPLY ? got_reply(qp) : got_request(qp);
        }
        if (rx->st_head == rx->st_tail)
            rx->st_head = rx->st_tail = 0;
        struct iovec iov = {rx->stage + rx->st_tail, rx->stage_cap - rx->st_tail};
        ssize_t n = qp->tp ? qp->tp->recv(qp->tp_ep, &iov, 1)
                           : recv(qp->fd, iov.iov_base, iov.iov_len, MSG_DONTWAIT);
        if (n == 0)
            return UW_EMPA_TRUNCATED_FRAME;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        rx->st_tail += (uint32_t)n;
    }
}

ssize_t uw__cm_hs_move(uw_qp *qp, uint8_t *sink)
{
    if (sink) {
        size_t n = qp->hs_off < qp->hs_len ? qp->hs_len - qp->hs_off : 0;
        memcpy(sink, qp->hs_out + qp->hs_off, n);
        qp->hs_off = qp->hs_len;
        return 0;
    }
    while (qp->hs_off < qp->hs_len) {
        struct iovec iov = {qp->hs_out + qp->hs_off, qp->hs_len - qp->hs_off};
        ssize_t w = qp->tp ? qp->tp->send(qp->tp_ep, &iov, 1)
                           : send(qp->fd, iov.iov_base, iov.iov_len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0)
            return errno == EAGAIN ? (ssize_t)(qp->hs_len - qp->hs_off) : -errno;
        qp->hs_off += (uint32_t)w;
    }
    return 0;
}

/* RFC 5040 leaves it open; the orphans' linger (io/linger.c) is the same. */
#define UW__LINGER_NS 2000000000u

static const char *const cm_names[] = {
    [UW__CM_IDLE] = "IDLE",
    [UW__CM_CONNECTING] = "CONNECTING",
    [UW__CM_WAIT_REPLY] = "WAIT_REPLY",
    [UW__CM_WAIT_REQUEST] = "WAIT_REQUEST",
    [UW__CM_WAIT_ACCEPT] = "WAIT_ACCEPT",
    [UW__CM_RTS] = "RTS",
    [UW__CM_PEER_CLOSED] = "PEER_CLOSED",
    [UW__CM_CLOSING] = "CLOSING",
    [UW__CM_LINGER] = "LINGER",
    [UW__CM_DRAIN] = "DRAIN",
    [UW__CM_CLOSED] = "CLOSED",
};

static void close_fd(uw_qp *qp)
{
    if (qp->ctx->detached == qp)
        qp->ctx->detached = NULL;
    if (qp->tp && qp->fd >= 0) {
        qp->tp->close(qp->tp_ep, false);
        qp->tp = NULL;
        qp->fd = -1;
    } else if (qp->fd >= 0) {
        close(qp->fd);
        qp->fd = -1;
        qp->epmask = 0;
        qp->ep_added = false;
    }
}

/* Our FIN. */
static void shut_wr(uw_qp *qp)
{
    if (qp->tp && qp->fd >= 0)
        qp->tp->shutdown_wr(qp->tp_ep);
    else
        shutdown(qp->fd, SHUT_WR);
}

static void clear_deadline(uw_qp *qp)
{
    /* Clearing a clear deadline would only make the next pass rescan. */
    if (qp->deadline_ns)
        uw__set_deadline(qp, 0);
}

/* The side effects belong to entering a state, so that no path into it can
 * forget one: the event the application must see, the deadline, the FIN,
 * the flush. The public state (qp->state) moves with it where it must;
 * uw__qp_start() sets RTS and uw__qp_flush() ERROR themselves. */
void uw__cm_to(uw_qp *qp, int to, int err, const char *why)
{
    int from = qp->cm;
    uw__log(qp->ctx, UW_LOG_DEBUG, "QP[%u]: %s -> %s%s%s%s", qp->id, cm_names[from], cm_names[to],
            why ? " (" : "", why ? why : "", why ? ")" : "");
    qp->cm = to;
    uw_cm_event ev;
    switch (to) {
    case UW__CM_CONNECTING:
        qp->state = UW_QPS_CONNECTING;
        uw__set_deadline(qp, deadline(qp, true));
        break;
    case UW__CM_WAIT_REQUEST:
        qp->state = UW_QPS_CONNECTING;
        uw__set_deadline(qp, deadline(qp, false));
        break;
    case UW__CM_WAIT_ACCEPT:
        fill_event(qp, &ev, UW_CM_CONNECT_REQUEST, &qp->req);
        ev.listener = qp->listener;
        uw__event_push(qp->ctx, &ev);
        break;
    case UW__CM_RTS:
        /* An unusable Reply: up only to carry the Terminate, under the
         * startup deadline still. */
        if (qp->setup_failed)
            break;
        /* Peer-to-peer responder: established once the RTR is in
         * (rtr_arrived()), and the startup deadline starts again. */
        if (from == UW__CM_WAIT_ACCEPT && qp->rd.mpa.p2p) {
            uw__set_deadline(qp, deadline(qp, false));
            break;
        }
        clear_deadline(qp);
        fill_event(qp, &ev, UW_CM_ESTABLISHED, from == UW__CM_WAIT_ACCEPT ? &qp->req : &qp->rep);
        uw__event_push(qp->ctx, &ev);
        break;
    case UW__CM_PEER_CLOSED:
        fill_event(qp, &ev, UW_CM_DISCONNECTED, NULL);
        uw__event_push(qp->ctx, &ev);
        break;
    case UW__CM_CLOSING:
        shut_wr(qp);
        qp->state = UW_QPS_CLOSING;
        break;
    case UW__CM_LINGER:
        if (err)
            qp->close_err = err;
        /* uw_reject(): for the application the QP is done with. */
        if (from == UW__CM_WAIT_ACCEPT)
            qp->state = UW_QPS_CLOSED;
        uw__set_deadline(qp, uw__ctx_now(qp->ctx) + UW__LINGER_NS);
        break;
    case UW__CM_DRAIN:
        if (from == UW__CM_LINGER) {
            /* The reject Reply is out: FIN, under LINGER's deadline. */
            shut_wr(qp);
            if (!qp->deadline_ns)
                uw__set_deadline(qp, uw__ctx_now(qp->ctx) + UW__LINGER_NS);
            break;
        }
        /* Our Terminate is written: it is how the connection ends. Nothing
         * else goes out, and the FIN follows it at once; reading goes on so
         * that closing never resets the Terminate in flight. */
        fill_event(qp, &ev,
                   qp->setup_failed || qp->deadline_ns ? UW_CM_CONNECT_ERROR : UW_CM_TERMINATED,
                   NULL);
        ev.err = qp->close_err;
        ev.term = qp->rd.term_out.term;
        uw__event_push(qp->ctx, &ev);
        shut_wr(qp);
        uw__set_deadline(qp, uw__ctx_now(qp->ctx) + UW__LINGER_NS);
        uw__qp_flush(qp, qp->close_err);
        break;
    case UW__CM_CLOSED:
        if (!err && from == UW__CM_PEER_CLOSED)
            shut_wr(qp); /* our FIN, after the peer's */
        if (!err && from == UW__CM_CLOSING) {
            fill_event(qp, &ev, UW_CM_DISCONNECTED, NULL);
            uw__event_push(qp->ctx, &ev);
        }
        close_fd(qp);
        clear_deadline(qp);
        if (err) {
            uw__qp_flush(qp, err);
        } else if (uw__cm_established(from)) {
            uw__log(qp->ctx, UW_LOG_INFO, "QP[%u]: closed by both sides", qp->id);
            uw__qp_flush(qp, UW_ECANCELED);
            qp->state = UW_QPS_CLOSED;
        }
        /* From LINGER or DRAIN: the end was reported and the queues
         * flushed when the final frame was decided on. */
        break;
    default:
        break;
    }
}
