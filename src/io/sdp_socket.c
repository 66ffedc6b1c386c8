/* SDP socket calls (uwarp/sdp.h) with TCP's behaviour and errno values:
 * state checks, blocking and nonblocking variants, options. Protocol work
 * is in the core (src/sdp/), plumbing and waiting in sdp_stack.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "io/sdp_internal.h"

/* The SDP core takes shutdown's how without the socket headers. */
_Static_assert(SHUT_RD == UW_SDP_SHUT_RD && SHUT_WR == UW_SDP_SHUT_WR &&
                   SHUT_RDWR == UW_SDP_SHUT_RDWR,
               "UW_SDP_SHUT_* must equal SHUT_*");

#define UW__MAX_IOV 1024

/* ---- Small helpers ----------------------------------------------------------- */

static int check_addr(const uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len)
{
    if (!addr)
        return -EFAULT;
    if (len < (socklen_t)sizeof(sa_family_t))
        return -EINVAL;
    if (addr->sa_family != s->domain)
        return -EAFNOSUPPORT;
    socklen_t need =
        s->domain == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    return len < need ? -EINVAL : 0;
}

socklen_t uw__sdp_addr_len(int family)
{
    return family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

void uw__sdp_copy_addr(const struct sockaddr_storage *ss, socklen_t sl, struct sockaddr *addr,
                       socklen_t *len)
{
    if (!addr || !len)
        return;
    socklen_t n = *len < sl ? *len : sl;
    memcpy(addr, ss, n);
    *len = sl; /* the full length, as accept(2) and getsockname(2) report it */
}

static uint64_t timeo_deadline(int ms)
{
    return uw__sdp_deadline_ms(ms);
}

static bool expired(uint64_t deadline_ns)
{
    return deadline_ns && uw__sdp_now_ns() >= deadline_ns;
}

/* Core errors as TCP's errno values: a protocol violation (and a message
 * larger than our buffers) is EPROTO; uwarp-specific codes never leak. */
static ssize_t tcp_err(ssize_t r)
{
    if (r == UW_EMSGSIZE || r < -4000)
        return -EPROTO;
    return r;
}

/* Skips the first n octets of a copied iovec array. */
static void iov_advance(struct iovec *iov, int *idx, int cnt, size_t n)
{
    while (n && *idx < cnt) {
        size_t k = iov[*idx].iov_len < n ? iov[*idx].iov_len : n;
        iov[*idx].iov_base = (char *)iov[*idx].iov_base + k;
        iov[*idx].iov_len -= k;
        n -= k;
        if (!iov[*idx].iov_len)
            (*idx)++;
    }
    while (*idx < cnt && !iov[*idx].iov_len)
        (*idx)++;
}

static bool conn_error(ssize_t r)
{
    return r == -ECONNRESET || r == -ETIMEDOUT || r == -EPROTO || r == -ECONNABORTED ||
           r == -EHOSTUNREACH || r == -ENETUNREACH || r == UW_ENOMEM;
}

ssize_t uw__sdp_app_err(uw_sdp_sock *s, ssize_t r, bool reading)
{
    if (r == -ECONNRESET && s->peer_eof)
        r = -EPIPE;
    if (conn_error(r) || (r == -EPIPE && !reading)) {
        if (s->err_told && conn_error(r))
            return reading ? 0 : -EPIPE;
        s->err_told = true;
    } else if (r == -EPIPE && reading) {
        if (s->err_told)
            return 0;
        s->err_told = true;
    }
    return r;
}

bool uw__sdp_is_tcp(uw_sdp_sock *s)
{
    uw__sdp_lock(s->st);
    bool t = s->state == UW__SS_TCP;
    uw__sdp_unlock(s->st);
    return t;
}

/* ---- Creation, bind, listen ------------------------------------------------- */

int uw_sdp_socket(uw_sdp_stack *st, int domain, int flags, uw_sdp_sock **out)
{
    if (!st || !out)
        return -EINVAL;
    if (domain != AF_INET && domain != AF_INET6)
        return -EAFNOSUPPORT;
    if (flags & ~(UW_SDP_NONBLOCK | UW_SDP_CLOEXEC))
        return -EINVAL;
    uw__sdp_lock(st);
    uw_sdp_sock *s;
    int r = uw__sdp_sock_new(st, domain, &s);
    if (r == 0) {
        r = uw__sdp_ready_init(&s->rd, (flags & UW_SDP_CLOEXEC) != 0);
        if (r < 0)
            uw__sdp_sock_free(s);
    }
    if (r == 0) {
        s->nonblock = (flags & UW_SDP_NONBLOCK) != 0;
        *out = s;
    }
    uw__sdp_unlock(st);
    return r;
}

int uw_sdp_fd(const uw_sdp_sock *s)
{
    return s ? s->rd.a : -EINVAL;
}

int uw_sdp_bind(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len)
{
    if (!s)
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    uw__sdp_lock(st);
    int r = check_addr(s, addr, len);
    if (r == 0 && (s->state != UW__SS_FRESH || s->bind_fd >= 0))
        r = -EINVAL;
    if (r == 0) {
        /* A TCP socket holds the address until listen, so that bind reports
         * EADDRINUSE and getsockname the port chosen for port 0, as on TCP.
         * SO_REUSEADDR lets the listener bind beside it. */
        int fd = socket(s->domain, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        if (fd < 0) {
            r = -errno;
        } else if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
                   (s->reuseport &&
                    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0) ||
                   bind(fd, addr, len) < 0) {
            r = -errno;
            close(fd);
        } else {
            s->bind_fd = fd;
            s->bound_len = sizeof(s->bound);
            getsockname(fd, (struct sockaddr *)&s->bound, &s->bound_len);
        }
    }
    uw__sdp_unlock(st);
    return r;
}

void uw__sdp_wildcard(int domain, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    ss->ss_family = (sa_family_t)domain;
    *len = uw__sdp_addr_len(domain);
}

int uw_sdp_listen(uw_sdp_sock *s, int backlog)
{
    if (!s)
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    int raw = backlog; /* the kernel TCP listener takes it as given (0 allows one) */
    if (backlog < 1)
        backlog = 1;
    if (backlog > 4096)
        backlog = 4096;
    uw__sdp_lock(st);
    int r = 0;
    s->tcp_backlog = raw;
    if (s->state == UW__SS_LISTEN) {
        if (s->tcp_lfd >= 0)
            listen(s->tcp_lfd, raw);
        s->backlog = backlog; /* as TCP: listen again changes the backlog */
        goto out;
    }
    if (s->state != UW__SS_FRESH) {
        r = -EINVAL;
        goto out;
    }
    struct sockaddr_storage ss;
    socklen_t sl;
    if (s->bind_fd >= 0) {
        ss = s->bound;
        sl = s->bound_len;
    } else {
        uw__sdp_wildcard(s->domain, &ss, &sl);
    }
    if (s->pm && s->bind_fd < 0 && s->tcp_fd >= 0) {
        /* The caller's TCP socket (UW_SDP_TCP_FD) is the service socket,
         * bound or not (listen() then picks the port, as TCP does). */
        s->bind_fd = s->tcp_fd;
        s->tcp_fd = -1;
        s->bound_len = sizeof(s->bound);
        if (getsockname(s->bind_fd, (struct sockaddr *)&s->bound, &s->bound_len) < 0) {
            r = -errno;
            goto out;
        }
        ss = s->bound;
        sl = s->bound_len;
    }
    if (s->tcp_fd >= 0) {
        close(s->tcp_fd); /* no use without the port mapper */
        s->tcp_fd = -1;
    }
    if (s->pm) {
        s->backlog = backlog;
        r = uw__sdp_pm_listen(s, (struct sockaddr *)&ss, sl);
        if (r < 0)
            goto out;
    } else {
        r = uw__sdp_mpa_listen(s, (struct sockaddr *)&ss, sl);
        if (r < 0)
            goto out;
        if (s->bind_fd >= 0) {
            close(s->bind_fd);
            s->bind_fd = -1;
        }
    }
    s->backlog = backlog;
    s->state = UW__SS_LISTEN;
    uw__sdp_mark(s);
out:
    uw__sdp_unlock(st);
    return r;
}

/* The MPA listener of an Accepting Peer (notes section 2): peer-to-peer
 * mode accepting every RTR type (Write and Read, and a Send RTR from
 * others), CRC as the socket prefers. */
int uw__sdp_mpa_listen(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len)
{
    uw_sdp_stack *st = s->st;
    uw_qp_attr qa = {.pd = st->pd,
                     .send_cq = st->cq,
                     .recv_cq = st->cq,
                     .max_send_wr = 1024,
                     .max_recv_wr = 1024};
    uw_conn_param p;
    memset(&p, 0, sizeof(p));
    p.p2p = true;
    p.rtr = UW_MPA_RTR_ALL;
    p.crc = s->crc ? UW_CRC_PREFER : UW_CRC_AVOID;
    p.timeout_ms = st->attr.setup_timeout_ms;
    p.ird = p.ord = UW__SDP_IRD_ORD;
    return uw_listen(st->ctx, addr, len, &qa, &p, &s->lst);
}

int uw_sdp_accept(uw_sdp_sock *s, uw_sdp_sock **out, struct sockaddr *addr, socklen_t *len,
                  int flags)
{
    if (!s || !out || (addr && !len))
        return -EINVAL;
    if (flags & ~(UW_SDP_NONBLOCK | UW_SDP_CLOEXEC))
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    uw__sdp_lock(st);
    int r;
    bool tried = false;
    uint64_t dl = timeo_deadline(s->rcvtimeo_ms);
    for (;;) {
        if (s->state != UW__SS_LISTEN) {
            r = -EINVAL;
            break;
        }
        if (s->tcp_lfd >= 0) {
            r = uw__sdp_pm_accept_tcp(s, flags, out, addr, len);
            if (r != 0) {
                r = r > 0 ? 0 : r;
                break;
            }
        }
        uw_sdp_sock *c = s->aq_head;
        if (c) {
            r = uw__sdp_ready_init(&c->rd, (flags & UW_SDP_CLOEXEC) != 0);
            if (r < 0)
                break; /* stays queued: EMFILE as accept(2) */
            s->aq_head = c->aq_next;
            if (!s->aq_head)
                s->aq_tail = NULL;
            s->aq_n--;
            c->parent = NULL;
            c->aq_next = NULL;
            c->state = UW__SS_OPEN;
            c->nonblock = (flags & UW_SDP_NONBLOCK) != 0;
            uw__sdp_mark(c);
            uw__sdp_mark(s);
            uw__sdp_copy_addr(&c->peer, c->peer_len, addr, len);
            *out = c;
            r = 0;
            break;
        }
        if (s->nonblock) {
            if (!tried) {
                tried = true;
                uw__sdp_progress(st);
                continue;
            }
            r = -EAGAIN;
            break;
        }
        if (expired(dl)) {
            r = -EAGAIN;
            break;
        }
        r = uw__sdp_wait(s, POLLIN, dl);
        if (r < 0)
            break;
    }
    uw__sdp_unlock(st);
    return r;
}

/* ---- Connect ------------------------------------------------------------------- */

static int start_connect(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len)
{
    uw_sdp_stack *st = s->st;
    int r = uw__sdp_conn_setup(s, false, UW__SDP_IRD_ORD, UW__SDP_IRD_ORD);
    uint8_t hello[UW_SDP_HELLO_LEN];
    if (r == 0)
        r = uw__sdp_conn_hello(s->conn, hello); /* 8.1.1 step 2, buffers posted (1c) */
    if (r == 0) {
        uw_conn_param p;
        memset(&p, 0, sizeof(p));
        p.private_data = hello;
        p.private_data_len = sizeof(hello);
        p.rev = 2;
        p.p2p = true;
        p.rtr = UW_MPA_RTR_WRITE | UW_MPA_RTR_READ; /* notes 2; Write preferred */
        p.crc = s->crc ? UW_CRC_PREFER : UW_CRC_AVOID;
        p.ird = p.ord = UW__SDP_IRD_ORD;
        p.timeout_ms = st->attr.setup_timeout_ms;
        p.tcp_congestion = s->cc[0] ? s->cc : NULL;
        r = uw_connect(s->qp, addr, len, &p);
    }
    if (r < 0) {
        /* Nothing of this QP can be in the CQ: it never connected. */
        uw__sdp_conn_teardown(s);
        s->llp_acted = s->llp_closed = s->established = false;
        return r == UW_ENOMEM ? -ENOMEM : r;
    }
    memcpy(&s->peer, addr, len);
    s->peer_len = len;
    s->state = UW__SS_CONNECTING;
    uw__sdp_set_deadline(s, uw__sdp_deadline_ms(st->attr.setup_timeout_ms));
    uw__sdp_pump(s);
    return 0;
}

/* connect(2) reports a nonblocking connect's outcome to the first connect()
 * after it, then EISCONN (or the pending error). */
static int connect_result(uw_sdp_sock *s)
{
    if (s->state == UW__SS_OPEN)
        return 0;
    int e = s->so_error;
    s->so_error = 0;
    uw__sdp_mark(s);
    return e ? e : -ECONNABORTED;
}

int uw_sdp_connect(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len)
{
    if (!s)
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    uw__sdp_lock(st);
    int r = check_addr(s, addr, len);
    if (r < 0)
        goto out;
    switch (s->state) {
    case UW__SS_LISTEN:
        r = -EISCONN;
        goto out;
    case UW__SS_OPEN:
        /* Linux: the first connect() after a nonblocking one completed
         * says 0, later ones EISCONN. */
        r = s->nb_connect ? 0 : -EISCONN;
        s->nb_connect = false;
        goto out;
    case UW__SS_FAILED:
        r = s->so_error ? connect_result(s) : -ECONNABORTED;
        goto out;
    case UW__SS_TCP:
        r = connect(s->rd.a, addr, len) < 0 ? -errno : 0;
        goto out;
    case UW__SS_CONNECTING:
        if (s->nonblock) {
            r = -EALREADY;
            goto out;
        }
        break; /* blocking: wait for the one in progress */
    default: {
        if (s->bind_fd >= 0) {
            /* The verbs connection manager picks the LLP's source address
             * itself (docs/sdp.md: differences from TCP). */
            const struct sockaddr_in *b4 = (const struct sockaddr_in *)&s->bound;
            const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)&s->bound;
            bool any = s->domain == AF_INET
                           ? b4->sin_addr.s_addr == htonl(INADDR_ANY) && b4->sin_port == 0
                           : IN6_IS_ADDR_UNSPECIFIED(&b6->sin6_addr) && b6->sin6_port == 0;
            if (!any) {
                r = -EOPNOTSUPP;
                goto out;
            }
            close(s->bind_fd);
            s->bind_fd = -1;
        }
        struct sockaddr_storage to;
        socklen_t tolen = len;
        memcpy(&to, addr, len < sizeof(to) ? len : sizeof(to));
        if (s->pm) {
            r = uw__sdp_pm_connect(s, addr, len, &to, &tolen);
            if (r != 1) /* 1: connect with SDP to `to`; else done (TCP) or failed */
                goto out;
        }
        r = start_connect(s, (struct sockaddr *)&to, tolen);
        if (r < 0)
            goto out;
        if (s->tcp_fd >= 0) {
            close(s->tcp_fd); /* SDP chosen: no fallback from here on */
            s->tcp_fd = -1;
        }
        if (s->pm)
            memcpy(&s->peer, addr, len); /* getpeername names the TCP address */
        if (s->nonblock) {
            s->nb_connect = true;
            r = -EINPROGRESS;
            goto out;
        }
    }
    }
    /* Blocking: SO_SNDTIMEO bounds it (EINPROGRESS on expiry, as TCP). */
    uint64_t dl = timeo_deadline(s->sndtimeo_ms);
    while (s->state == UW__SS_CONNECTING) {
        if (expired(dl)) {
            r = -EINPROGRESS;
            goto out;
        }
        r = uw__sdp_wait(s, POLLOUT, dl);
        if (r < 0)
            goto out;
    }
    s->nb_connect = false;
    r = connect_result(s);
out:
    uw__sdp_unlock(st);
    return r;
}

/* ---- Data --------------------------------------------------------------------- */

#define RECV_FLAGS (MSG_OOB | MSG_PEEK | MSG_WAITALL | MSG_DONTWAIT | MSG_NOSIGNAL)
#define SEND_FLAGS (MSG_OOB | MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE)

/* Waits for a connect in progress (blocking calls) or says EAGAIN. Returns
 * 1 when connected, 0 when the caller should report rc, with *rc set. */
static int wait_connected(uw_sdp_sock *s, bool nb, short ev, uint64_t dl, ssize_t *rc)
{
    while (s->state == UW__SS_CONNECTING) {
        if (nb || expired(dl)) {
            *rc = -EAGAIN;
            return 0;
        }
        int r = uw__sdp_wait(s, ev, dl);
        if (r < 0) {
            *rc = r;
            return 0;
        }
    }
    return 1;
}

static ssize_t do_recv(uw_sdp_sock *s, const struct iovec *uiov, int cnt, int flags, int *mflags)
{
    if (flags & ~RECV_FLAGS)
        return -EOPNOTSUPP;
    if (cnt < 0 || cnt > UW__MAX_IOV || (cnt && !uiov))
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    if (uw__sdp_is_tcp(s)) {
        struct msghdr mh = {.msg_iov = (struct iovec *)uiov, .msg_iovlen = (size_t)cnt};
        ssize_t n = recvmsg(s->rd.a, &mh, flags);
        if (mflags)
            *mflags = mh.msg_flags;
        return n < 0 ? -errno : n;
    }
    uw__sdp_lock(st);
    bool nb = s->nonblock || (flags & MSG_DONTWAIT);
    uint64_t dl = timeo_deadline(s->rcvtimeo_ms);
    ssize_t rc = 0;
    size_t done = 0;
    switch (s->state) {
    case UW__SS_FRESH:
    case UW__SS_LISTEN:
        rc = -ENOTCONN;
        goto out;
    case UW__SS_FAILED:
        rc = s->so_error; /* once, then end of stream (Linux after a refused connect) */
        s->so_error = 0;
        uw__sdp_mark(s);
        goto out;
    case UW__SS_CONNECTING:
        if (!wait_connected(s, nb, POLLIN | POLLOUT, dl, &rc))
            goto out;
        if (s->state != UW__SS_OPEN) {
            rc = connect_result(s);
            goto out;
        }
        break;
    default:
        break;
    }
    if (s->err_stash) {
        rc = s->err_stash;
        s->err_stash = 0;
        uw__sdp_mark(s);
        goto out;
    }
    struct iovec iov[UW__MAX_IOV];
    if (cnt)
        memcpy(iov, uiov, (size_t)cnt * sizeof(*iov));
    size_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    unsigned cf =
        (flags & MSG_OOB ? UW_SDP_MSG_OOB : 0u) | (flags & MSG_PEEK ? UW_SDP_MSG_PEEK : 0u);
    /* TCP: a blocking read waits for SO_RCVLOWAT octets, MSG_WAITALL for all. */
    size_t target = 1;
    if (flags & MSG_WAITALL)
        target = total;
    else if (s->rcvlowat > 1)
        target = (size_t)s->rcvlowat < total ? (size_t)s->rcvlowat : total;
    if (flags & (MSG_PEEK | MSG_OOB))
        target = 1;
    if (flags & MSG_OOB)
        nb = true; /* urgent data never blocks */
    int idx = 0;
    bool tried = false;
    if (total == 0 && !(flags & MSG_OOB)) {
        /* Linux waits for one readable octet (or EOF, or an error) and then
         * copies nothing: EAGAIN when nonblocking and nothing is there. */
        for (;;) {
            unsigned b = uw__sdp_conn_poll(s->conn);
            if (b & (POLLIN | POLLRDHUP | POLLHUP | POLLERR))
                break;
            if (nb) {
                if (!tried) {
                    tried = true;
                    uw__sdp_progress(st);
                    continue;
                }
                rc = -EAGAIN;
                uw__sdp_will_wait(st);
                goto out;
            }
            if (expired(dl)) {
                rc = -EAGAIN;
                goto out;
            }
            int w = uw__sdp_wait(s, POLLIN, dl);
            if (w < 0) {
                rc = w;
                goto out;
            }
            if (!s->conn)
                break;
        }
        goto out;
    }
    bool zok = !(flags & (MSG_PEEK | MSG_OOB));
    for (;;) {
        ssize_t r = uw__sdp_conn_recv(s->conn, iov + idx, cnt - idx, cf);
        uw__sdp_pump(s); /* reading frees buffers: credit updates may be due */
        if (r > 0) {
            done += (size_t)r;
            if (flags & (MSG_PEEK | MSG_OOB))
                break;
            iov_advance(iov, &idx, cnt, (size_t)r);
            /* An advertised buffer right behind the data: read it into
             * the rest of this call's buffer (Read Zcopy) before returning. */
            if (done >= target &&
                !(zok && !nb && idx < cnt && s->conn && uw__sdp_zrecv_fits(s, iov[idx].iov_len)))
                break;
            continue;
        }
        if (r == UW_EAGAIN && zok && s->conn && idx < cnt && uw__sdp_conn_zavail(s->conn)) {
            ssize_t z = uw__sdp_zrecv(s, iov[idx].iov_base, iov[idx].iov_len, nb);
            if (z > 0) {
                done += (size_t)z;
                iov_advance(iov, &idx, cnt, (size_t)z);
                if (done >= target)
                    break;
                continue;
            }
            if (z < 0) {
                r = z;
            }
        }
        if (r == 0)
            break;
        if (r != UW_EAGAIN) {
            r = tcp_err(r);
            if (done) {
                if (r != UW_EPIPE)
                    s->err_stash = (int)r; /* reported by the next call, as TCP */
            } else {
                rc = uw__sdp_app_err(s, r, true);
            }
            break;
        }
        if (done >= 1 && !(flags & MSG_WAITALL) && done >= target)
            break;
        if (nb) {
            if (!tried) {
                /* Data may be waiting in the LLP socket: one pass first.
                 * A caller that spins on nonblocking calls drives the
                 * protocol itself; the progress thread stands aside. */
                tried = true;
                st->last_drive_ns = uw__sdp_now_ns();
                uw__sdp_progress(st);
                continue;
            }
            if (!done) {
                rc = -EAGAIN;
                uw__sdp_will_wait(st);
            }
            break;
        }
        if (expired(dl)) {
            if (!done)
                rc = -EAGAIN;
            break;
        }
        if (zok && !(flags & MSG_WAITALL) && !done && idx < cnt && s->conn &&
            uw__sdp_zsink_fits(s, iov[idx].iov_len)) {
            /* Write Zcopy (9.3): the peer writes into this buffer. Not
             * with MSG_WAITALL, which 9.3 forbids. */
            bool adv;
            ssize_t z = uw__sdp_zsink_recv(s, iov[idx].iov_base, iov[idx].iov_len, dl, &adv);
            if (z > 0) {
                done += (size_t)z;
                break;
            }
            if (z < 0) {
                rc = z == -EINTR ? z : uw__sdp_app_err(s, tcp_err(z), true);
                break;
            }
            if (adv)
                continue; /* revoked or crossed by nothing readable: look again */
        }
        if (zok && idx < cnt)
            uw__sdp_zc_reader(s, iov[idx].iov_len);
        s->zc_readers++; /* a SrcAvail arriving now waits for this reader */
        int w = uw__sdp_wait(s, POLLIN, dl);
        s->zc_readers--;
        if (w < 0) {
            if (!done)
                rc = w;
            break;
        }
    }
    if (done)
        rc = (ssize_t)done;
    if (mflags)
        *mflags = (rc > 0 && (flags & MSG_OOB)) ? MSG_OOB : 0;
out:
    uw__sdp_unlock(st);
    return rc;
}

static ssize_t send_part(uw_sdp_sock *s, struct iovec *iov, int cnt, size_t total, unsigned cf,
                         bool nb, uint64_t dl, size_t *done)
{
    int idx = 0;
    bool tried = false;
    while (idx < cnt && *done < total) {
        if (!nb && !cf && s->conn && iov[idx].iov_len >= s->zc_min && s->zc_min) {
            /* Read Zcopy (sdp_zcopy.c): the peer reads this buffer. */
            int cut;
            ssize_t z = uw__sdp_zsend(s, iov[idx].iov_base, iov[idx].iov_len, dl, &cut);
            if (z < 0)
                return z;
            if (z > 0) {
                *done += (size_t)z;
                iov_advance(iov, &idx, cnt, (size_t)z);
            }
            if (cut) /* SO_SNDTIMEO or a signal revoked it: TCP's short send */
                return cut;
            if (z > 0)
                continue;
        }
        ssize_t r = uw__sdp_conn_send(s->conn, iov + idx, cnt - idx, cf);
        uw__sdp_pump(s);
        if (r > 0) {
            *done += (size_t)r;
            iov_advance(iov, &idx, cnt, (size_t)r);
            tried = false;
            continue;
        }
        if (r != UW_EAGAIN)
            return tcp_err(r);
        if (nb) {
            if (!tried) {
                tried = true;
                s->st->last_drive_ns = uw__sdp_now_ns();
                uw__sdp_progress(s->st); /* completions may have freed slots */
                continue;
            }
            uw__sdp_will_wait(s->st);
            return UW_EAGAIN;
        }
        if (expired(dl))
            return UW_EAGAIN;
        int w = uw__sdp_wait(s, POLLOUT, dl);
        if (w < 0)
            return w;
    }
    return 0;
}

static ssize_t do_send(uw_sdp_sock *s, const struct iovec *uiov, int cnt, int flags)
{
    if (flags & ~SEND_FLAGS)
        return -EOPNOTSUPP;
    if (cnt < 0 || cnt > UW__MAX_IOV || (cnt && !uiov))
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    if (uw__sdp_is_tcp(s)) {
        struct msghdr mh = {.msg_iov = (struct iovec *)uiov, .msg_iovlen = (size_t)cnt};
        ssize_t n = sendmsg(s->rd.a, &mh, flags | MSG_NOSIGNAL);
        return n < 0 ? -errno : n;
    }
    uw__sdp_lock(st);
    bool nb = s->nonblock || (flags & MSG_DONTWAIT);
    uint64_t dl = timeo_deadline(s->sndtimeo_ms);
    ssize_t rc = 0;
    switch (s->state) {
    case UW__SS_FRESH:
    case UW__SS_LISTEN:
        rc = -EPIPE;
        goto out;
    case UW__SS_FAILED:
        rc = s->so_error ? s->so_error : -EPIPE;
        s->so_error = 0;
        uw__sdp_mark(s);
        goto out;
    case UW__SS_CONNECTING:
        if (!wait_connected(s, nb, POLLOUT, dl, &rc))
            goto out;
        if (s->state != UW__SS_OPEN) {
            rc = connect_result(s);
            goto out;
        }
        break;
    default:
        break;
    }
    if (s->err_stash) {
        rc = s->err_stash;
        s->err_stash = 0;
        uw__sdp_mark(s);
        goto out;
    }
    struct iovec iov[UW__MAX_IOV];
    if (cnt)
        memcpy(iov, uiov, (size_t)cnt * sizeof(*iov));
    size_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += iov[i].iov_len;
    if (!total) {
        /* Nothing to send: only the state's error (EPIPE after a reset or
         * shutdown), as TCP's sendmsg of 0 octets. */
        ssize_t r = s->conn ? uw__sdp_conn_send(s->conn, iov, cnt, 0) : 0;
        rc = r < 0 ? uw__sdp_app_err(s, tcp_err(r), false) : 0;
        goto out;
    }
    unsigned cf = flags & MSG_MORE ? UW_SDP_MSG_MORE : 0u;
    size_t done = 0;
    ssize_t r;
    if (flags & MSG_OOB) {
        /* The urgent octet is the last of the call: everything before it
         * goes as normal data, then that octet alone with the mark. */
        struct iovec last;
        int li = cnt - 1;
        while (li >= 0 && !iov[li].iov_len)
            li--;
        last.iov_base = (char *)iov[li].iov_base + iov[li].iov_len - 1;
        last.iov_len = 1;
        iov[li].iov_len--;
        r = send_part(s, iov, li + 1, total - 1, cf, nb, dl, &done);
        if (r == 0)
            r = send_part(s, &last, 1, 1, cf | UW_SDP_MSG_OOB, nb, dl, &done);
    } else {
        r = send_part(s, iov, cnt, total, cf, nb, dl, &done);
    }
    if (done) {
        if (r < 0 && r != UW_EAGAIN && r != -EINTR && r != UW_EPIPE)
            s->err_stash = (int)r;
        rc = (ssize_t)done;
    } else {
        rc = r == UW_EAGAIN || r == -EINTR ? r : uw__sdp_app_err(s, r, false);
    }
out:
    uw__sdp_unlock(st);
    return rc;
}

ssize_t uw_sdp_send(uw_sdp_sock *s, const void *buf, size_t len, int flags)
{
    if (!s || (!buf && len))
        return -EINVAL;
    struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
    return do_send(s, &v, 1, flags);
}

ssize_t uw_sdp_recv(uw_sdp_sock *s, void *buf, size_t len, int flags)
{
    if (!s || (!buf && len))
        return -EINVAL;
    struct iovec v = {.iov_base = buf, .iov_len = len};
    return do_recv(s, &v, 1, flags, NULL);
}

ssize_t uw_sdp_sendmsg(uw_sdp_sock *s, const struct msghdr *msg, int flags)
{
    if (!s || !msg || msg->msg_iovlen > INT_MAX)
        return -EINVAL;
    if (msg->msg_controllen)
        return -EOPNOTSUPP;
    return do_send(s, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

ssize_t uw_sdp_recvmsg(uw_sdp_sock *s, struct msghdr *msg, int flags)
{
    if (!s || !msg || msg->msg_iovlen > INT_MAX)
        return -EINVAL;
    int mf = 0;
    ssize_t n = do_recv(s, msg->msg_iov, (int)msg->msg_iovlen, flags, &mf);
    if (n >= 0) {
        msg->msg_flags = mf;
        msg->msg_controllen = 0;
        if (msg->msg_name && s->state != UW__SS_TCP) {
            uw__sdp_lock(s->st);
            uw__sdp_copy_addr(&s->peer, s->peer_len, msg->msg_name, &msg->msg_namelen);
            uw__sdp_unlock(s->st);
        }
    }
    return n;
}

/* ---- Shutdown and close -------------------------------------------------------- */

static void drop_listener(uw_sdp_sock *s)
{
    if (s->lst) {
        uw_listener_destroy(s->lst);
        s->lst = NULL;
    }
    /* Queued and half-set-up connections are reset, as TCP does. */
    for (uw_sdp_sock *c = s->st->socks; c; c = c->next) {
        if (c->parent == s) {
            c->parent = NULL;
            uw__sdp_kill(c);
        }
    }
    s->aq_head = s->aq_tail = NULL;
    s->aq_n = s->nembryo = 0;
    if (s->pm_fd >= 0) {
        close(s->pm_fd); /* drops the port mapping */
        s->pm_fd = -1;
    }
    if (s->tcp_lfd >= 0)
        uw__sdp_release_tcp_listener(s);
}

int uw_sdp_shutdown(uw_sdp_sock *s, int how)
{
    if (!s)
        return -EINVAL;
    if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
        return -EINVAL;
    if (uw__sdp_is_tcp(s))
        return shutdown(s->rd.a, how) < 0 ? -errno : 0;
    uw_sdp_stack *st = s->st;
    uw__sdp_lock(st);
    int r = 0;
    if (s->state == UW__SS_LISTEN) {
        /* Linux: shutting a listener down stops it; accept then fails. */
        drop_listener(s);
        s->state = UW__SS_FRESH;
        uw__sdp_mark(s);
    } else if (s->state != UW__SS_OPEN || !s->conn ||
               uw__sdp_conn_state(s->conn) == UW_SDP_S_ERROR ||
               uw__sdp_conn_state(s->conn) == UW_SDP_S_CLOSED) {
        r = -ENOTCONN; /* reset or closed both ways: TCP is CLOSE/TIME_WAIT */
    } else {
        if (how != SHUT_RD)
            s->shut_wr = true;
        r = uw__sdp_conn_shutdown(s->conn, how);
        if (r == UW_ENOTCONN)
            r = -ENOTCONN;
        else if (r < 0)
            r = 0; /* already closed: nothing more to do */
        uw__sdp_pump(s);
    }
    uw__sdp_unlock(st);
    return r;
}

/* SO_LINGER's wait: TCP returns once the peer acknowledged everything; here
 * every SDP message, the DisConn included, must be with TCP and TCP's send
 * queue empty (SIOCOUTQ). */
static bool llp_drained(uw_sdp_sock *s)
{
    if (!uw__sdp_conn_tx_idle(s->conn))
        return false;
    int fd = uw__sdp_llp_fd(s), outq = 0;
    return fd < 0 || ioctl(fd, SIOCOUTQ, &outq) < 0 || outq == 0;
}

int uw_sdp_detach(uw_sdp_sock *s)
{
    if (!s)
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    uw__sdp_lock(st);
    int fd = -EINVAL;
    if (s->state == UW__SS_TCP && s->rd.a >= 0) {
        fd = s->rd.a;
        s->rd.a = -1; /* sock_free closes what is left (rd.b is gone already) */
        uw__sdp_sock_free(s);
    }
    uw__sdp_unlock(st);
    return fd;
}

int uw_sdp_close(uw_sdp_sock *s)
{
    if (!s)
        return -EINVAL;
    uw_sdp_stack *st = s->st;
    uw__sdp_lock(st);
    if (s->state == UW__SS_LISTEN)
        drop_listener(s);
    if (s->state == UW__SS_OPEN && s->conn) {
        int cs = uw__sdp_conn_state(s->conn);
        bool unread = uw__sdp_conn_inq(s->conn) > 0;
        if ((s->linger_on && s->linger_s == 0) || unread) {
            /* TCP sends RST for SO_LINGER 0 and for unread data. */
            uw__sdp_conn_abort(s->conn);
            uw__sdp_pump(s);
        } else if (cs == UW_SDP_S_OPEN) {
            uw__sdp_conn_shutdown(s->conn, SHUT_RDWR);
            uw__sdp_pump(s);
            if (s->linger_on && s->linger_s > 0) {
                /* SO_LINGER: wait for the data and the DisConn to complete. */
                uint64_t dl = uw__sdp_deadline_ms(s->linger_s * 1000);
                uw__sdp_ready_fini(&s->rd); /* the fd is closed at once, as close(2) */
                while (s->conn && !expired(dl) && !llp_drained(s) &&
                       uw__sdp_conn_state(s->conn) == UW_SDP_S_OPEN) {
                    if (uw__sdp_wait(s, 0, dl) < 0)
                        break;
                }
            }
        }
        uw__sdp_ready_fini(&s->rd);
        s->closing = true;
        uw__sdp_set_deadline(s, uw__sdp_deadline_ms(UW__SDP_CLOSE_TIMEOUT_MS));
        uw__sdp_progress(st); /* may finish (and free) it at once */
    } else {
        uw__sdp_ready_fini(&s->rd);
        s->closing = true;
        uw__sdp_kill(s);
        uw__sdp_progress(st);
    }
    uw__sdp_unlock(st);
    return 0;
}
