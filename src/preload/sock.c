/* The interposed control calls: socket, connect, listen, accept, close, the
 * dup family, fcntl, ioctl, options, addresses, shutdown, epoll_ctl
 * (docs/preload.md).
 *
 * A candidate socket (AF_INET/AF_INET6, SOCK_STREAM, protocol 0 or TCP) is
 * a plain kernel TCP socket until connect() or listen() decides: everything
 * before (bind, options, fcntl) is the kernel's, with TCP's exact results.
 * The decision either drops the table entry (plain TCP from then on, no
 * cost) or puts the SDP socket's readiness mirror under the application's
 * descriptor number with dup3(). The stack keeps its own descriptor of the
 * mirror, so the application's close() of one of its descriptors never
 * pulls the mirror from under the stack. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "io/pm_resolve.h"
#include "preload/pl.h"
#include "preload/uep.h"

/* ---- Helpers ------------------------------------------------------------------ */

static bool is_candidate(int domain, int type, int protocol)
{
    return (domain == AF_INET || domain == AF_INET6) &&
           (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM &&
           (protocol == 0 || protocol == IPPROTO_TCP);
}

static bool ip_addr_ok(int domain, const struct sockaddr *a, socklen_t len)
{
    if (!a || len < (socklen_t)sizeof(sa_family_t) || a->sa_family != domain)
        return false;
    return len >= (domain == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
}

/* The stack's socket calls, with the inside flag. */
static int sdp_setopt_int(uw_sdp_sock *s, int level, int name, int v)
{
    PL_ENTER();
    int r = uw_sdp_setsockopt(s, level, name, &v, sizeof(v));
    PL_LEAVE();
    return r;
}

static int sdp_info(uw_sdp_sock *s, uw_sdp_info *in)
{
    socklen_t l = sizeof(*in);
    PL_ENTER();
    int r = uw_sdp_getsockopt(s, SOL_UWARP, UW_SDP_INFO, in, &l);
    PL_LEAVE();
    if (r < 0)
        memset(in, 0, sizeof(*in));
    return r;
}

static void sdp_close(uw_sdp_sock *s)
{
    PL_ENTER();
    uw_sdp_close(s);
    PL_LEAVE();
}

/* The application's options on the kernel socket, onto the SDP socket. */
static void copy_opts(int fd, const struct pl_sock *p, uw_sdp_sock *s)
{
    static const struct {
        int level, name;
    } ints[] = {
        {SOL_SOCKET, SO_KEEPALIVE}, {SOL_SOCKET, SO_OOBINLINE},  {SOL_SOCKET, SO_RCVLOWAT},
        {SOL_SOCKET, SO_REUSEADDR}, {SOL_SOCKET, SO_REUSEPORT},  {IPPROTO_TCP, TCP_NODELAY},
        {IPPROTO_TCP, TCP_CORK},    {IPPROTO_TCP, TCP_KEEPIDLE}, {IPPROTO_TCP, TCP_KEEPINTVL},
        {IPPROTO_TCP, TCP_KEEPCNT},
    };
    PL_ENTER();
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        int v = 0;
        socklen_t l = sizeof(v);
        if (pl_real.getsockopt(fd, ints[i].level, ints[i].name, &v, &l) == 0)
            uw_sdp_setsockopt(s, ints[i].level, ints[i].name, &v, sizeof(v));
    }
    struct linger lg;
    socklen_t l = sizeof(lg);
    if (pl_real.getsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &l) == 0 && lg.l_onoff)
        uw_sdp_setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    static const int tvs[] = {SO_RCVTIMEO, SO_SNDTIMEO};
    for (int i = 0; i < 2; i++) {
        struct timeval tv;
        l = sizeof(tv);
        if (pl_real.getsockopt(fd, SOL_SOCKET, tvs[i], &tv, &l) == 0 && (tv.tv_sec || tv.tv_usec))
            uw_sdp_setsockopt(s, SOL_SOCKET, tvs[i], &tv, sizeof(tv));
    }
    char cc[16];
    l = sizeof(cc) - 1;
    if (pl_real.getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &l) == 0) {
        cc[l] = '\0';
        uw_sdp_setsockopt(s, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc));
    }
    if (p->rcvbuf)
        uw_sdp_setsockopt(s, SOL_SOCKET, SO_RCVBUF, &p->rcvbuf, sizeof(int));
    if (p->sndbuf)
        uw_sdp_setsockopt(s, SOL_SOCKET, SO_SNDBUF, &p->sndbuf, sizeof(int));
    PL_LEAVE();
}

/* Puts the SDP socket's mirror under fd (the kernel socket there goes; the
 * stack holds its own duplicate of whatever it still needs), moving the
 * epoll registrations the application made on the pending socket. */
static int install(int fd, struct pl_sock *p, uw_sdp_sock *s, int kind, int fl)
{
    /* Descriptors dup()ed from the candidate before the decision name the
     * same socket: they get the mirror too (all of them, as a TCP socket's
     * duplicates would all see the connection). */
    int fds[64];
    int nfd = 1;
    fds[0] = fd;
    if (atomic_load_explicit(&p->refs, memory_order_relaxed) > 2) {
        int more[64];
        int n = pl_tab_fds_of(p, more, 64);
        for (int i = 0; i < n && nfd < 64; i++)
            if (more[i] != fd)
                fds[nfd++] = more[i];
    }
    PL_ENTER();
    for (int i = 0; i < p->nep; i++)
        pl_real.epoll_ctl(p->ep[i].epfd, EPOLL_CTL_DEL, fd, NULL);
    int r = 0;
    for (int k = 0; k < nfd; k++) {
        int fdfl = pl_real.fcntl(fds[k], F_GETFD);
        int x =
            pl_real.dup3(uw_sdp_fd(s), fds[k], fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
        if (k == 0)
            r = x;
    }
    if (r >= 0 && (fl & O_NONBLOCK))
        pl_real.fcntl(fd, F_SETFL, O_NONBLOCK);
    for (int i = 0; i < p->nep; i++)
        pl_real.epoll_ctl(p->ep[i].epfd, EPOLL_CTL_ADD, fd, &p->ep[i].ev);
    PL_LEAVE();
    if (r < 0)
        return -errno;
    atomic_store(&p->kregs, p->nep);
    p->nep = 0;
    p->s = s;
    atomic_fetch_add(&pl_live, 1);
    atomic_store_explicit(&p->kind, kind, memory_order_release);
    return 0;
}

/* ---- socket ------------------------------------------------------------------- */

PL_EXPORT int socket(int domain, int type, int protocol)
{
    int fd = REAL(socket)(domain, type, protocol);
    if (fd < 0 || pl_inside)
        return fd;
    if (is_candidate(domain, type, protocol)) {
        pl_init();
        if (pl_st.enabled) {
            struct pl_sock *p = pl_sock_new(PL_PENDING, domain);
            if (p) {
                pl_map(fd, p);
                pl_put(p);
                return fd;
            }
        }
    }
    if (pl_mapped(fd))
        pl_unmap(fd); /* closed behind our back (close_range, fclose...) */
    return fd;
}

/* ---- connect ------------------------------------------------------------------ */

static const char *pm_where(const struct sockaddr *dst, socklen_t len, char *buf, size_t n)
{
    const char *srv = getenv("UWARP_PM_SERVER");
    if (srv && *srv)
        return srv;
    char a[64];
    pl_addr_str(dst, len, a, sizeof(a));
    char *colon = strrchr(a, ':');
    if (colon)
        *colon = 0;
    snprintf(buf, n, "%s:%u", a, pl_st.pm_port ? pl_st.pm_port : 3935u);
    return buf;
}

static unsigned port_of(const struct sockaddr_storage *ss)
{
    return ntohs(ss->ss_family == AF_INET6 ? ((const struct sockaddr_in6 *)ss)->sin6_port
                                           : ((const struct sockaddr_in *)ss)->sin_port);
}

static bool bound_specific(int fd)
{
    struct sockaddr_storage ss;
    socklen_t l = sizeof(ss);
    if (pl_real.getsockname(fd, (struct sockaddr *)&ss, &l) < 0)
        return false;
    if (port_of(&ss))
        return true;
    if (ss.ss_family == AF_INET)
        return ((struct sockaddr_in *)&ss)->sin_addr.s_addr != htonl(INADDR_ANY);
    return !IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&ss)->sin6_addr);
}

static int plain_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    pl_unmap(fd);
    return pl_real.connect(fd, addr, len);
}

/* The port mapper resolver: one for the process, created on the first
 * connect that asks, and published so that the SDP stack (created only
 * once a port mapper said yes) finds the PMAccept in its cache instead of
 * asking again. Its settings are the ones pl_stack() gives the stack. It
 * lives as long as the process (fork: init.c). No lock: a thread that
 * loses the race to install its resolver destroys it, so a fork() at any
 * moment leaves nothing locked. */
static _Atomic(uw__pm_resolver *) pmr;
static _Atomic int pmr_err; /* creation failed: the UW_E* code */

static uw__pm_resolver *pl_resolver(int *err)
{
    uw__pm_resolver *r = atomic_load_explicit(&pmr, memory_order_acquire);
    *err = atomic_load_explicit(&pmr_err, memory_order_relaxed);
    if (r || *err)
        return r;
    uw__pm_resolver_opts o;
    memset(&o, 0, sizeof(o));
    o.server_port = pl_st.pm_port;
    PL_ENTER();
    int e = uw__pm_resolver_create(&r, &o);
    PL_LEAVE();
    if (e < 0) {
        int z = 0;
        if (atomic_compare_exchange_strong(&pmr_err, &z, e))
            pl_log(PL_LOG_WARN, -1, "port mapper resolver: %s%s: clients use TCP", uw_strerror(e),
                   e == UW_EINVAL ? " (" UW__PM_SERVER_ENV " is not a numeric ADDR[:PORT])" : "");
        *err = e;
        return NULL;
    }
    uw__pm_resolver *none = NULL;
    if (atomic_compare_exchange_strong(&pmr, &none, r)) {
        uw__pm_resolver_publish(r);
        return r;
    }
    uw__pm_resolver_destroy(r); /* another thread's won */
    return none;
}

static int connect_pending(int fd, struct pl_sock *p, const struct sockaddr *addr, socklen_t len)
{
    char as[80], why[200];
    if (!ip_addr_ok(p->domain, addr, len))
        return pl_real.connect(fd, addr, len); /* AF_UNSPEC, bad lengths: the kernel's answer */
    pl_addr_str(addr, len, as, sizeof(as));
    unsigned line = 0;
    uw_pl_use use = uw_pl_conf_match(pl_st.conf, UW_PL_ROLE_CLIENT, pl_st.prog, addr, len, &line);
    if (use == UW_PL_USE_TCP) {
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (rule line %u)", as, line);
        return plain_connect(fd, addr, len);
    }
    if (bound_specific(fd)) {
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (bound to a local address first)", as);
        return plain_connect(fd, addr, len);
    }
    bool sdp_only = use == UW_PL_USE_SDP;
    /* The destination's port mapper first, with nothing of SDP created: a
     * PMDeny, no port mapper or a remembered one of those (the usual
     * answer for a program that never meets SDP) costs one UDP exchange,
     * or nothing, and no stack. On a PMAccept the stack is created and its
     * connect finds the answer in the shared resolver's cache. */
    bool retried = false;
again:;
    bool cached = false;
    int perr = 0;
    uw__pm_resolver *pr = pl_resolver(&perr);
    if (!pr) {
        snprintf(why, sizeof(why), "port mapper resolver: %s", uw_strerror(perr));
    } else {
        uw__pm_resolution res;
        PL_ENTER();
        int q = uw__pm_resolve(pr, addr, len, NULL, 0, &res);
        PL_LEAVE();
        why[0] = 0;
        if (q == 0) {
            cached = res.reason == UW__PM_RES_CACHED;
            PL_LOG(PL_LOG_DEBUG, fd, "connect %s: port mapper: %s", as, res.why);
            if (!res.use_sdp)
                snprintf(why, sizeof(why), "%s", uw__pm_res_short_why(&res));
        }
    }
    if (why[0] && sdp_only) {
        pl_unmap(fd);
        PL_LOG(PL_LOG_INFO, fd, "connect %s: refused (rule line %u: sdp only; %s)", as, line, why);
        return (int)pl_ret(-ECONNREFUSED);
    }
    if (why[0]) {
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (%s)", as, why);
        return plain_connect(fd, addr, len);
    }
    uw_sdp_stack *st = pl_stack();
    if (!st) {
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (no SDP stack)", as);
        return plain_connect(fd, addr, len);
    }
    int fl = pl_real.fcntl(fd, F_GETFL);
    bool nb = fl >= 0 && (fl & O_NONBLOCK);
    uw_sdp_sock *s;
    PL_ENTER();
    int r = uw_sdp_socket(st, p->domain, UW_SDP_CLOEXEC | (nb ? UW_SDP_NONBLOCK : 0), &s);
    PL_LEAVE();
    if (r < 0) {
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (SDP socket: %s)", as, strerror(-r));
        return plain_connect(fd, addr, len);
    }
    copy_opts(fd, p, s);
    sdp_setopt_int(s, SOL_UWARP, UW_SDP_PM, 1);
    /* The kernel socket goes to the stack for a fallback: connected there,
     * it is this very descriptor's socket, epoll registrations and all.
     * "use sdp" allows no fallback: the stack's own socket would connect,
     * and is dropped. */
    int kfd = sdp_only ? -2 : pl_real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (kfd == -1 || (kfd >= 0 && sdp_setopt_int(s, SOL_UWARP, UW_SDP_TCP_FD, kfd) < 0)) {
        if (kfd >= 0)
            pl_real.close(kfd);
        sdp_close(s);
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (%s)", as, strerror(errno));
        return plain_connect(fd, addr, len);
    }
    PL_ENTER();
    r = uw_sdp_connect(s, addr, len);
    PL_LEAVE();
    while (r == -EINTR && pl_restart(s, SO_SNDTIMEO)) {
        PL_ENTER();
        r = uw_sdp_connect(s, addr, len);
        PL_LEAVE();
    }
    if (r == -ECONNREFUSED && !nb && cached && !retried) {
        /* A PMAccept from the cache met a reset: the service most likely
         * restarted on its port within PmTime. 7.5.1's "reset means PMDeny"
         * is for a fresh answer, so ask the port mapper once more. */
        sdp_close(s);
        uw__pm_resolver_forget(pr, addr, len, NULL);
        PL_LOG(PL_LOG_DEBUG, fd, "connect %s: cached SDP Address refused; asking again", as);
        retried = true;
        goto again;
    }
    uw_sdp_info in;
    sdp_info(s, &in);
    if (in.transport == 2 && sdp_only) {
        PL_ENTER();
        int k = uw_sdp_detach(s);
        if (k >= 0)
            pl_real.close(k); /* the stack's own TCP socket: never used */
        PL_LEAVE();
        pl_unmap(fd);
        PL_LOG(PL_LOG_INFO, fd, "connect %s: refused (rule line %u: sdp only; %s)", as, line,
               in.transport_why ? in.transport_why : "no SDP");
        return (int)pl_ret(-ECONNREFUSED);
    }
    if (in.transport == 2) {
        /* Fell back: the kernel socket under fd was connected by the stack. */
        PL_ENTER();
        int k = uw_sdp_detach(s);
        if (k >= 0)
            pl_real.close(k);
        PL_LEAVE();
        pl_unmap(fd);
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (%s)", as,
               in.transport_why ? in.transport_why : "fallback");
        return (int)pl_ret(r);
    }
    if (r == -ECONNREFUSED && !nb && !sdp_only) {
        /* The SDP port refused: 7.5.1 makes that a PMDeny (the resolver
         * remembers it); this connect goes to TCP now, not only the next. */
        sdp_close(s);
        PL_LOG(PL_LOG_INFO, fd, "connect %s: tcp (SDP connection refused)", as);
        return plain_connect(fd, addr, len);
    }
    int e = install(fd, p, s, PL_SDP, fl);
    if (e < 0) {
        sdp_close(s);
        PL_LOG(PL_LOG_WARN, fd, "connect %s: cannot install the SDP descriptor: %s", as,
               strerror(-e));
        return (int)pl_ret(e);
    }
    char pa[80];
    if (r == 0 || r == -EINPROGRESS || r == -EINTR) {
        if (in.llp_peer_len)
            snprintf(why, sizeof(why), "port mapper %s -> %u", pm_where(addr, len, pa, sizeof(pa)),
                     port_of(&in.llp_peer));
        else
            snprintf(why, sizeof(why), "%s", in.transport_why ? in.transport_why : "port mapper");
        PL_LOG(PL_LOG_INFO, fd, "connect %s: sdp (%s)%s", as, why,
               r == -EINPROGRESS ? " in progress" : "");
    } else {
        PL_LOG(PL_LOG_INFO, fd, "connect %s: sdp failed: %s", as, strerror(-r));
    }
    return (int)pl_ret(r);
}

PL_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    if (pl_inside)
        return REAL(connect)(fd, addr, len);
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return REAL(connect)(fd, addr, len);
    int r;
    int k = atomic_load_explicit(&p->kind, memory_order_acquire);
    if (k == PL_PENDING) {
        int z = 0;
        if (!atomic_compare_exchange_strong(&p->busy, &z, 1)) {
            r = (int)pl_ret(-EALREADY); /* another thread is connecting it */
        } else {
            r = connect_pending(fd, p, addr, len);
            int e = errno;
            atomic_store(&p->busy, 0);
            errno = e;
        }
    } else if (k == PL_ORPHAN) {
        r = (int)pl_ret(-EOPNOTSUPP);
    } else {
        PL_ENTER();
        int x = uw_sdp_connect(p->s, addr, len);
        PL_LEAVE();
        while (x == -EINTR && pl_restart(p->s, SO_SNDTIMEO)) {
            PL_ENTER();
            x = uw_sdp_connect(p->s, addr, len);
            PL_LEAVE();
        }
        r = (int)pl_ret(x);
    }
    pl_put(p);
    return r;
}

/* ---- listen and accept ----------------------------------------------------------- */

static int listen_pending(int fd, struct pl_sock *p, int backlog)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char as[80];
    if (pl_real.getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        sl = 0;
    pl_addr_str((struct sockaddr *)&ss, sl, as, sizeof(as));
    unsigned line = 0;
    uw_pl_use use = sl ? uw_pl_conf_match(pl_st.conf, UW_PL_ROLE_SERVER, pl_st.prog,
                                          (struct sockaddr *)&ss, sl, &line)
                       : UW_PL_USE_BOTH;
    const char *why = NULL;
    char wbuf[160];
    uw_sdp_stack *st = NULL;
    if (use == UW_PL_USE_TCP) {
        snprintf(wbuf, sizeof(wbuf), "rule line %u", line);
        why = wbuf;
    } else if (!(st = pl_stack())) {
        why = "no SDP stack";
    }
    if (why) {
        PL_LOG(PL_LOG_INFO, fd, "listen %s: tcp (%s)", as, why);
        pl_unmap(fd);
        return pl_real.listen(fd, backlog);
    }
    int fl = pl_real.fcntl(fd, F_GETFL);
    bool nb = fl >= 0 && (fl & O_NONBLOCK);
    uw_sdp_sock *s;
    PL_ENTER();
    int r = uw_sdp_socket(st, p->domain, UW_SDP_CLOEXEC | (nb ? UW_SDP_NONBLOCK : 0), &s);
    PL_LEAVE();
    if (r < 0) {
        PL_LOG(PL_LOG_INFO, fd, "listen %s: tcp (SDP socket: %s)", as, strerror(-r));
        pl_unmap(fd);
        return pl_real.listen(fd, backlog);
    }
    copy_opts(fd, p, s);
    sdp_setopt_int(s, SOL_UWARP, UW_SDP_PM, 1);
    sdp_setopt_int(s, SOL_UWARP, UW_SDP_PM_OPTIONAL, 1);
    int kfd = pl_real.fcntl(fd, F_DUPFD_CLOEXEC, 0);
    r = kfd < 0 ? -errno : sdp_setopt_int(s, SOL_UWARP, UW_SDP_TCP_FD, kfd);
    if (r == 0) {
        PL_ENTER();
        r = uw_sdp_listen(s, backlog);
        PL_LEAVE();
    } else if (kfd >= 0) {
        pl_real.close(kfd);
    }
    uw_sdp_info in;
    sdp_info(s, &in);
    bool no_pmd = r == 0 && in.transport_why && !strcmp(in.transport_why, "no port mapper daemon");
    if (r < 0 || no_pmd) {
        sdp_close(s);
        if (fl >= 0)
            pl_real.fcntl(fd, F_SETFL, fl); /* the stack made it nonblocking */
        if (no_pmd) {
            if (pl_once(PL_ONCE_NO_PMD))
                pl_log(PL_LOG_WARN, -1, "no uwarp-pmd at %s: listeners accept TCP only",
                       pl_st.pmd_control[0]          ? pl_st.pmd_control
                       : getenv("UWARP_PMD_CONTROL") ? getenv("UWARP_PMD_CONTROL")
                                                     : "/run/uwarp/pmd.sock");
            PL_LOG(PL_LOG_INFO, fd, "listen %s: tcp (no port mapper daemon)", as);
        } else {
            PL_LOG(PL_LOG_INFO, fd, "listen %s: tcp (port mapper registration: %s)", as,
                   strerror(-r));
        }
        pl_unmap(fd);
        return pl_real.listen(fd, backlog);
    }
    p->sdp_only = use == UW_PL_USE_SDP;
    int e = install(fd, p, s, PL_LISTEN, fl);
    if (e < 0) {
        sdp_close(s);
        if (fl >= 0)
            pl_real.fcntl(fd, F_SETFL, fl);
        pl_unmap(fd);
        PL_LOG(PL_LOG_WARN, fd, "listen %s: tcp (cannot install the SDP descriptor: %s)", as,
               strerror(-e));
        return pl_real.listen(fd, backlog);
    }
    sl = sizeof(ss);
    PL_ENTER();
    if (uw_sdp_getsockname(s, (struct sockaddr *)&ss, &sl) == 0)
        pl_addr_str((struct sockaddr *)&ss, sl, as, sizeof(as));
    PL_LEAVE();
    PL_LOG(PL_LOG_INFO, fd, "listen %s: sdp+tcp (%s)", as,
           in.transport_why ? in.transport_why : "port mapper");
    return 0;
}

PL_EXPORT int listen(int fd, int backlog)
{
    if (pl_inside)
        return REAL(listen)(fd, backlog);
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return REAL(listen)(fd, backlog);
    int r;
    int k = atomic_load_explicit(&p->kind, memory_order_acquire);
    if (k == PL_PENDING) {
        int z = 0;
        if (!atomic_compare_exchange_strong(&p->busy, &z, 1)) {
            r = (int)pl_ret(-EINVAL);
        } else {
            r = listen_pending(fd, p, backlog);
            int e = errno;
            atomic_store(&p->busy, 0);
            errno = e;
        }
    } else if (k == PL_ORPHAN) {
        r = (int)pl_ret(-EOPNOTSUPP);
    } else {
        PL_ENTER();
        r = (int)pl_ret(uw_sdp_listen(p->s, backlog));
        PL_LEAVE();
    }
    pl_put(p);
    return r;
}

static int accept_sdp(int lfd, struct pl_sock *p, struct sockaddr *addr, socklen_t *len, int flags)
{
    if (flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
        return (int)pl_ret(-EINVAL);
    int uf = UW_SDP_CLOEXEC | (flags & SOCK_NONBLOCK ? UW_SDP_NONBLOCK : 0);
    uw_sdp_sock *c;
    struct sockaddr_storage peer;
    socklen_t pl;
    int r;
again:
    pl = sizeof(peer);
    do {
        PL_ENTER();
        r = uw_sdp_accept(p->s, &c, (struct sockaddr *)&peer, &pl, uf);
        PL_LEAVE();
    } while (r == -EINTR && pl_restart(p->s, SO_RCVTIMEO));
    if (r < 0)
        return (int)pl_ret(r);
    char pa[80];
    pl_addr_str((struct sockaddr *)&peer, pl, pa, sizeof(pa));
    uw_sdp_info in;
    sdp_info(c, &in);
    int fd;
    if (in.transport == 2 && p->sdp_only) {
        /* "use sdp": TCP clients are refused (closed at once; the next
         * connection, if any, is the caller's). */
        PL_ENTER();
        fd = uw_sdp_detach(c);
        if (fd >= 0) {
            struct linger lg = {1, 0};
            pl_real.setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            pl_real.close(fd); /* a reset, as a refused connection */
        }
        PL_LEAVE();
        PL_LOG(PL_LOG_INFO, lfd, "accept from %s: refused (sdp only: TCP client)", pa);
        goto again; /* as if it had never come: the next one, or EAGAIN */
    }
    if (in.transport == 2) {
        /* A plain TCP client on the service port: an ordinary kernel
         * socket from here on, no wrapper left. */
        PL_ENTER();
        fd = uw_sdp_detach(c);
        if (fd >= 0 && !(flags & SOCK_CLOEXEC))
            pl_real.fcntl(fd, F_SETFD, 0);
        PL_LEAVE();
        if (fd < 0)
            return (int)pl_ret(fd);
        if (pl_mapped(fd))
            pl_unmap(fd);
        PL_LOG(PL_LOG_INFO, fd, "accept from %s on fd %d: tcp (%s)", pa, lfd,
               in.transport_why ? in.transport_why : "TCP client");
    } else {
        PL_ENTER();
        fd = pl_real.fcntl(uw_sdp_fd(c), flags & SOCK_CLOEXEC ? F_DUPFD_CLOEXEC : F_DUPFD, 0);
        int e = errno;
        if (fd >= 0 && (flags & SOCK_NONBLOCK))
            pl_real.fcntl(fd, F_SETFL, O_NONBLOCK); /* F_GETFL shows it, as on TCP */
        PL_LEAVE();
        struct pl_sock *n = fd >= 0 ? pl_sock_new(PL_SDP, p->domain) : NULL;
        if (!n) {
            if (fd >= 0)
                pl_real.close(fd);
            sdp_close(c);
            return (int)pl_ret(fd < 0 ? -e : -ENOMEM); /* EMFILE, as accept(2) */
        }
        n->s = c;
        atomic_fetch_add(&pl_live, 1);
        pl_map(fd, n);
        pl_put(n);
        PL_LOG(PL_LOG_INFO, fd, "accept from %s on fd %d: sdp (%s)", pa, lfd,
               in.transport_why ? in.transport_why : "port mapper listener");
    }
    if (addr && len) {
        socklen_t n = *len < pl ? *len : pl;
        memcpy(addr, &peer, n);
        *len = pl;
    }
    return fd;
}

PL_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    if (pl_inside)
        return REAL(accept4)(fd, addr, len, flags);
    struct pl_sock *p = pl_get(fd);
    if (!p) {
        int r = REAL(accept4)(fd, addr, len, flags);
        if (r >= 0 && pl_mapped(r))
            pl_unmap(r);
        return r;
    }
    int r;
    int k = atomic_load_explicit(&p->kind, memory_order_acquire);
    if (k == PL_PENDING)
        r = pl_real.accept4(fd, addr, len, flags); /* not listening: EINVAL */
    else if (k == PL_ORPHAN)
        r = (int)pl_ret(-EOPNOTSUPP);
    else
        r = accept_sdp(fd, p, addr, len, flags);
    pl_put(p);
    return r;
}

PL_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    return accept4(fd, addr, len, 0);
}

/* ---- close and the dup family ---------------------------------------------------- */

PL_EXPORT int close(int fd)
{
    if (!pl_inside && pl_mapped(fd))
        pl_unmap(fd); /* the last descriptor of an SDP socket closes it */
    if (!pl_inside)
        uep_closing(fd);
    return REAL(close)(fd);
}

PL_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    if (!pl_inside && !(flags & CLOSE_RANGE_CLOEXEC) && first <= last) {
        pl_unmap_range(first, last);
        uep_closing_range(first, last);
    }
    return REAL(close_range)(first, last, flags);
}

PL_EXPORT void closefrom(int lowfd)
{
    if (!pl_inside && lowfd >= 0) {
        pl_unmap_range((unsigned)lowfd, ~0u);
        uep_closing_range((unsigned)lowfd, ~0u);
    }
    REAL(closefrom)(lowfd);
}

/* newfd now names what oldfd does. */
static void dup_map(int oldfd, int newfd)
{
    struct pl_sock *p = pl_get(oldfd);
    if (p) {
        pl_map(newfd, p);
        pl_put(p);
    } else if (pl_mapped(newfd)) {
        pl_unmap(newfd);
    }
}

PL_EXPORT int dup(int fd)
{
    if (!pl_inside)
        uep_to_kernel(fd); /* a set known by one number only */
    int r = REAL(dup)(fd);
    if (r >= 0 && !pl_inside)
        dup_map(fd, r);
    return r;
}

PL_EXPORT int dup2(int fd, int fd2)
{
    if (!pl_inside && fd != fd2) {
        uep_to_kernel(fd);
        uep_closing(fd2);
    }
    int r = REAL(dup2)(fd, fd2);
    if (r >= 0 && !pl_inside && fd != fd2)
        dup_map(fd, r);
    return r;
}

PL_EXPORT int dup3(int fd, int fd2, int flags)
{
    if (!pl_inside && fd != fd2) {
        uep_to_kernel(fd);
        uep_closing(fd2);
    }
    int r = REAL(dup3)(fd, fd2, flags);
    if (r >= 0 && !pl_inside)
        dup_map(fd, r);
    return r;
}

/* ---- fcntl and ioctl ------------------------------------------------------------- */

static int do_fcntl(int fd, int cmd, void *arg)
{
    if (pl_inside)
        return REAL(fcntl)(fd, cmd, arg);
    switch (cmd) {
    case F_DUPFD:
    case F_DUPFD_CLOEXEC: {
        uep_to_kernel(fd);
        int r = REAL(fcntl)(fd, cmd, arg);
        if (r >= 0)
            dup_map(fd, r);
        return r;
    }
    case F_SETFL: {
        int r = REAL(fcntl)(fd, cmd, arg);
        struct pl_sock *p = r < 0 ? NULL : pl_get(fd);
        if (p) {
            int k = atomic_load_explicit(&p->kind, memory_order_acquire);
            if (k == PL_SDP || k == PL_LISTEN) {
                int nb = ((int)(intptr_t)arg & O_NONBLOCK) != 0;
                PL_ENTER();
                uw_sdp_ioctl(p->s, FIONBIO, &nb);
                PL_LEAVE();
            }
            pl_put(p);
        }
        return r;
    }
    default:
        return REAL(fcntl)(fd, cmd, arg);
    }
}

PL_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return do_fcntl(fd, cmd, arg);
}

PL_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return do_fcntl(fd, cmd, arg);
}

PL_EXPORT int ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (pl_inside)
        return REAL(ioctl)(fd, req, arg);
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return REAL(ioctl)(fd, req, arg);
    int r;
    int k = atomic_load_explicit(&p->kind, memory_order_acquire);
    if (k == PL_PENDING || req == FIOCLEX || req == FIONCLEX) {
        r = pl_real.ioctl(fd, req, arg);
    } else if (k == PL_ORPHAN) {
        r = (int)pl_ret(-EOPNOTSUPP);
    } else if (req == FIONBIO) {
        r = pl_real.ioctl(fd, req, arg); /* the mirror's O_NONBLOCK, for F_GETFL */
        if (r == 0) {
            PL_ENTER();
            r = (int)pl_ret(uw_sdp_ioctl(p->s, req, arg));
            PL_LEAVE();
        }
    } else {
        PL_ENTER();
        r = (int)pl_ret(uw_sdp_ioctl(p->s, req, arg));
        PL_LEAVE();
    }
    pl_put(p);
    return r;
}

/* ---- Options, addresses, bind, shutdown ----------------------------------------- */

/* The SDP socket of fd with a reference, or NULL when fd is the kernel's;
 * *orphan when it is an SDP socket this process cannot use. */
static struct pl_sock *sdp_of(int fd, bool *orphan)
{
    *orphan = false;
    if (pl_inside)
        return NULL;
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return NULL;
    int k = atomic_load_explicit(&p->kind, memory_order_acquire);
    if (k == PL_SDP || k == PL_LISTEN)
        return p;
    *orphan = k == PL_ORPHAN;
    pl_put(p);
    return NULL;
}

PL_EXPORT int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    bool orphan;
    struct pl_sock *p = sdp_of(fd, &orphan);
    if (orphan)
        return (int)pl_ret(-EOPNOTSUPP);
    if (!p) {
        int r = REAL(setsockopt)(fd, level, name, val, len);
        if (r == 0 && !pl_inside && level == SOL_SOCKET &&
            (name == SO_RCVBUF || name == SO_SNDBUF) && val && len >= (socklen_t)sizeof(int)) {
            struct pl_sock *q = pl_get(fd);
            if (q) {
                /* Pending: remembered for the SDP socket (its meaning there
                 * is a number of buffers: sdp.h). */
                int v;
                memcpy(&v, val, sizeof(v));
                if (name == SO_RCVBUF)
                    q->rcvbuf = v;
                else
                    q->sndbuf = v;
                pl_put(q);
            }
        }
        return r;
    }
    PL_ENTER();
    int r = uw_sdp_setsockopt(p->s, level, name, val, len);
    PL_LEAVE();
    if (r == -ENOPROTOOPT && (level == SOL_SOCKET || level == IPPROTO_IP || level == IPPROTO_IPV6 ||
                              level == IPPROTO_TCP)) {
        /* An IP or TCP tuning option SDP has no use for (IP_TOS,
         * TCP_DEFER_ACCEPT, TCP_FASTOPEN...): accepted, no effect. */
        PL_LOG(PL_LOG_DEBUG, fd, "setsockopt(%d, %d) ignored on an SDP socket", level, name);
        r = 0;
    }
    pl_put(p);
    return (int)pl_ret(r);
}

PL_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
    bool orphan;
    struct pl_sock *p = sdp_of(fd, &orphan);
    if (orphan)
        return (int)pl_ret(-EOPNOTSUPP);
    if (!p)
        return REAL(getsockopt)(fd, level, name, val, len);
    PL_ENTER();
    int r = uw_sdp_getsockopt(p->s, level, name, val, len);
    PL_LEAVE();
    pl_put(p);
    return (int)pl_ret(r);
}

/* getsockname and getpeername: the SDP socket's answer, or the kernel's. */
static int name_call(int fd, struct sockaddr *addr, socklen_t *len,
                     int (*real)(int, struct sockaddr *, socklen_t *),
                     int (*sdp)(uw_sdp_sock *, struct sockaddr *, socklen_t *))
{
    bool orphan;
    struct pl_sock *p = sdp_of(fd, &orphan);
    if (orphan)
        return (int)pl_ret(-EOPNOTSUPP);
    if (!p)
        return real(fd, addr, len);
    PL_ENTER();
    int r = sdp(p->s, addr, len);
    PL_LEAVE();
    pl_put(p);
    return (int)pl_ret(r);
}

PL_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
    return name_call(fd, addr, len, REAL(getsockname), uw_sdp_getsockname);
}

PL_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
    return name_call(fd, addr, len, REAL(getpeername), uw_sdp_getpeername);
}

PL_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    bool orphan;
    struct pl_sock *p = sdp_of(fd, &orphan);
    if (orphan)
        return (int)pl_ret(-EOPNOTSUPP);
    if (!p)
        return REAL(bind)(fd, addr, len);
    PL_ENTER();
    int r = uw_sdp_bind(p->s, addr, len); /* connected or listening: EINVAL, as TCP */
    PL_LEAVE();
    pl_put(p);
    return (int)pl_ret(r);
}

PL_EXPORT int shutdown(int fd, int how)
{
    bool orphan;
    struct pl_sock *p = sdp_of(fd, &orphan);
    if (orphan)
        return (int)pl_ret(-EOPNOTSUPP);
    if (!p)
        return REAL(shutdown)(fd, how);
    PL_ENTER();
    int r = uw_sdp_shutdown(p->s, how);
    PL_LEAVE();
    pl_put(p);
    return (int)pl_ret(r);
}

/* ---- epoll_ctl: registrations of pending sockets ---------------------------------- */

PL_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    int r;
    if (uep_ctl(epfd, op, fd, ev, &r))
        return r;
    r = REAL(epoll_ctl)(epfd, op, fd, ev);
    if (r < 0 || pl_inside)
        return r;
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return r;
    if (atomic_load_explicit(&p->kind, memory_order_acquire) == PL_PENDING) {
        /* Remembered so that connect()/listen() can move them onto the
         * SDP descriptor (epoll keys on the file, not the number). */
        int i;
        for (i = 0; i < p->nep && p->ep[i].epfd != epfd; i++) {
        }
        if (op == EPOLL_CTL_DEL) {
            if (i < p->nep)
                p->ep[i] = p->ep[--p->nep];
        } else if (ev && (i < p->nep || p->nep < PL_MAX_EPOLL)) {
            if (i == p->nep)
                p->nep++;
            p->ep[i].epfd = epfd;
            p->ep[i].ev = *ev;
        }
    }
    pl_put(p);
    return r;
}
