/* SDP sockets and the port mapper (draft-pinkerton-iwarp-sdp-01 section 7):
 * registration for listeners (src/io/pm_reg.h), resolution and the TCP
 * fallback for connecting sockets (src/io/pm_resolve.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "io/pm_reg.h"
#include "io/pm_resolve.h"
#include "io/sdp_internal.h"

/* ---- Port mapper ---------------------------------------------------------------- */

int uw__sdp_pm_setopt(uw_sdp_sock *s, int name, int v)
{
    if (name == UW_SDP_PM)
        s->pm = v != 0;
    else
        s->pm_optional = v != 0;
    return 0;
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
    return ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_port
                                           : ((const struct sockaddr_in *)ss)->sin_port);
}

/* Accepting Peer with the port mapper: the bound port is the TCP service
 * port, which keeps a plain TCP listener; SDP listens on an ephemeral port
 * of the same address and uwarp-pmd maps the one to the other for as long
 * as the registration descriptor stays open (src/io/pm_reg.h). */
int uw__sdp_pm_listen(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len)
{
    uw_sdp_stack *st = s->st;
    int fd = s->bind_fd;
    int r = 0;
    if (fd < 0) {
        int one = 1;
        fd = socket(s->domain, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -errno;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
            bind(fd, addr, len) < 0) {
            r = -errno;
            close(fd);
            return r;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (listen(fd, s->tcp_backlog) < 0 || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        r = -errno;
        goto fail;
    }
    struct sockaddr_storage svc, sdp;
    socklen_t sl = sizeof(svc);
    if (getsockname(fd, (struct sockaddr *)&svc, &sl) < 0) {
        r = -errno;
        goto fail;
    }
    sdp = svc;
    if (sdp.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&sdp)->sin6_port = 0;
    else
        ((struct sockaddr_in *)&sdp)->sin_port = 0;
    r = uw__sdp_mpa_listen(s, (struct sockaddr *)&sdp, sl);
    if (r < 0)
        goto fail;
    socklen_t dl = sizeof(sdp);
    uw_listener_addr(s->lst, &sdp, &dl);
    r = uw__pm_register(st->attr.pmd_control, port_of(&svc), port_of(&sdp), st->attr.pm_timeout_ms,
                        &s->pm_fd);
    if (r == UW_ENOENT && s->pm_optional) {
        s->transport_why = "no port mapper daemon";
        r = 0;
    } else if (r < 0) {
        uw_listener_destroy(s->lst);
        s->lst = NULL;
        goto fail;
    } else {
        s->transport_why = "port mapper registered";
    }
    s->tcp_lfd = fd;
    s->bind_fd = -1;
    uw__sdp_wake_thread(st); /* watch the new TCP listener */
    return 0;
fail:
    close(fd);
    s->bind_fd = -1;
    return r;
}

/* A connection the TCP service port accepted: a socket of state TCP whose
 * descriptor is the kernel socket itself. */
int uw__sdp_pm_accept_tcp(uw_sdp_sock *l, int flags, uw_sdp_sock **out, struct sockaddr *addr,
                          socklen_t *len)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = accept4(l->tcp_lfd, (struct sockaddr *)&ss, &sl,
                     (flags & UW_SDP_NONBLOCK ? SOCK_NONBLOCK : 0) |
                         (flags & UW_SDP_CLOEXEC ? SOCK_CLOEXEC : 0));
    if (fd < 0) {
        if (l->tcp_ready) {
            /* The progress thread watches it again: it must rebuild its
             * poll set now, or a client arriving meanwhile waits for
             * whatever wakes the thread next. */
            l->tcp_ready = false;
            uw__sdp_wake_thread(l->st);
        }
        uw__sdp_mark(l);
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    }
    /* The listener stays readable only while another connection waits, as
     * TCP's would: a blocking accept() after select() said readable must
     * not wait for the next client. */
    struct pollfd pf = {.fd = l->tcp_lfd, .events = POLLIN};
    if (l->tcp_ready && poll(&pf, 1, 0) == 0) {
        l->tcp_ready = false;
        uw__sdp_wake_thread(l->st);
    }
    uw__sdp_mark(l);
    uw_sdp_sock *c;
    int r = uw__sdp_sock_new(l->st, l->domain, &c);
    if (r < 0) {
        close(fd);
        return r;
    }
    c->state = UW__SS_TCP;
    c->rd.a = fd;
    c->nonblock = (flags & UW_SDP_NONBLOCK) != 0;
    c->accepted = true;
    c->transport_why = "TCP client on the service port";
    uw__sdp_copy_addr(&ss, sl, addr, len);
    *out = c;
    return 1;
}

/* The TCP options the application set, onto the kernel socket. */
static void tcp_opts(const uw_sdp_sock *s, int fd)
{
    int one = 1;
    if (s->nodelay)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (s->cork)
        setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof(one));
    if (s->oobinline)
        setsockopt(fd, SOL_SOCKET, SO_OOBINLINE, &one, sizeof(one));
    if (s->keepalive)
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    if (s->rcvlowat > 1)
        setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &s->rcvlowat, sizeof(int));
    if (s->linger_on) {
        struct linger lg = {.l_onoff = 1, .l_linger = s->linger_s};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    }
    struct timeval tv;
    if (s->rcvtimeo_ms) {
        tv = (struct timeval){.tv_sec = s->rcvtimeo_ms / 1000,
                              .tv_usec = (s->rcvtimeo_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    if (s->sndtimeo_ms) {
        tv = (struct timeval){.tv_sec = s->sndtimeo_ms / 1000,
                              .tv_usec = (s->sndtimeo_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    }
}

/* Connecting Peer with the port mapper (section 7). Called with the lock
 * held; the query itself runs without it. */
int uw__sdp_pm_connect(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len,
                       struct sockaddr_storage *to, socklen_t *tolen)
{
    uw_sdp_stack *st = s->st;
    if (!st->pm) {
        uw__pm_resolver_opts o;
        memset(&o, 0, sizeof(o));
        o.timeout_ms = st->attr.pm_timeout_ms;
        o.server = st->pm_server[0] ? st->pm_server : NULL;
        o.server_port = st->attr.pm_port;
        /* The process's published resolver (the preload's, which may have
         * asked this very question before the stack existed), when it has
         * these settings; else one of the stack's own. */
        uw__pm_resolver *res = uw__pm_resolver_published(&o);
        if (!res) {
            int r = uw__pm_resolver_create(&res, &o);
            if (r < 0)
                return r;
        }
        st->pm = res;
    }
    /* Another connect() on this socket meanwhile sees a connect in progress. */
    s->state = UW__SS_CONNECTING;
    uw__pm_resolution res;
    uw__sdp_unlock(st);
    int r = uw__pm_resolve(st->pm, addr, len, NULL, st->attr.pm_timeout_ms, &res);
    uw__sdp_lock(st);
    s->state = UW__SS_FRESH;
    if (r < 0)
        return r;
    uw__sdp_log(st, UW_LOG_INFO, "SDP: port mapper: %s", res.why);
    s->transport_why = uw__pm_res_short_why(&res);
    if (res.use_sdp) {
        memcpy(to, &res.addr, res.addrlen);
        *tolen = res.addrlen;
        return 1;
    }
    /* Plain TCP to the port as named: the kernel socket takes the place of
     * the mirror under the application's descriptor number. A socket the
     * caller handed over (UW_SDP_TCP_FD) has its options already. */
    int fd = s->tcp_fd;
    s->tcp_fd = -1;
    if (fd < 0) {
        fd = socket(s->domain, SOCK_STREAM | (s->nonblock ? SOCK_NONBLOCK : 0), 0);
        if (fd < 0)
            return -errno;
        tcp_opts(s, fd);
    }
    int cloexec = fcntl(s->rd.a, F_GETFD) & FD_CLOEXEC;
    if (dup3(fd, s->rd.a, cloexec ? O_CLOEXEC : 0) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    close(fd);
    close(s->rd.b);
    s->rd.b = -1;
    s->state = UW__SS_TCP;
    int a = s->rd.a;
    uw__sdp_unlock(st);
    r = connect(a, addr, len) < 0 ? -errno : 0;
    uw__sdp_lock(st);
    return r;
}

void uw__sdp_pm_destroy(uw_sdp_stack *st)
{
    if (st->pm && !uw__pm_resolver_is_published(st->pm))
        uw__pm_resolver_destroy(st->pm);
    st->pm = NULL;
}

void uw__sdp_pm_sdp_reset(uw_sdp_sock *s)
{
    if (s->st->pm && s->peer_len)
        uw__pm_resolver_sdp_reset(s->st->pm, (struct sockaddr *)&s->peer, s->peer_len, NULL);
}
