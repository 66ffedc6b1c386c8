/* The interposed data calls: read, write, readv, writev, send, recv, sendto,
 * recvfrom, sendmsg, recvmsg, sendmmsg, recvmmsg, sendfile and the
 * _FORTIFY_SOURCE variants. The hot path is one table lookup (two loads and
 * a reference count) and the uw_sdp call; descriptors that are not SDP
 * sockets go straight to libc. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/time.h>
#include <unistd.h>

#include "preload/pl.h"

/* A blocking uw_sdp call returns -EINTR when a signal handler ran in this
 * thread (its poll() was interrupted), and the kernel does not tell which
 * signal it was. TCP's recv/send/accept/connect restart when that handler
 * has SA_RESTART. The rule here: restart when every signal that has a
 * handler has SA_RESTART (fault signals aside); if any caught signal lacks it, return EINTR (a
 * program that installs such a handler handles EINTR). Only the rare EINTR
 * path pays the sigaction() calls. */
static bool restart_after_eintr(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        /* Fault signals come from the faulting instruction, not to a
         * thread asleep in poll() (sanitizers catch them without
         * SA_RESTART). */
        if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
            sig == SIGILL || sig == SIGTRAP || sig == SIGSYS)
            continue;
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) < 0)
            continue;
        bool caught = (sa.sa_flags & SA_SIGINFO)
                          ? sa.sa_sigaction != NULL
                          : (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
        if (caught && !(sa.sa_flags & SA_RESTART))
            return false;
    }
    return true;
}

bool pl_restart(uw_sdp_sock *s, int timeo_opt)
{
    struct timeval tv = {0, 0};
    socklen_t l = sizeof(tv);
    PL_ENTER();
    int r = uw_sdp_getsockopt(s, SOL_SOCKET, timeo_opt, &tv, &l);
    PL_LEAVE();
    if (r == 0 && (tv.tv_sec || tv.tv_usec))
        return false; /* signal(7): a socket timeout makes the call not restartable */
    return restart_after_eintr();
}

/* The SDP socket behind fd with a reference taken, NULL for a kernel
 * descriptor; an orphan (fork) gives NULL and *err -EOPNOTSUPP. */
static inline struct pl_sock *sdp_get(int fd, int *err)
{
    *err = 0;
    if (pl_inside)
        return NULL;
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return NULL;
    int k = atomic_load_explicit(&p->kind, memory_order_acquire);
    if (k == PL_SDP || k == PL_LISTEN)
        return p;
    if (k == PL_ORPHAN) {
        *err = -EOPNOTSUPP;
        if (pl_once(PL_ONCE_FORK))
            pl_log(PL_LOG_WARN, fd,
                   "SDP socket inherited across fork(): not usable in the child "
                   "(docs/preload.md)");
    }
    pl_put(p);
    return NULL;
}

/* Flags TCP accepts that mean nothing here. */
#define IGNORED_FLAGS (MSG_CMSG_CLOEXEC)

static ssize_t sdp_recvmsg(struct pl_sock *p, struct msghdr *m, int flags)
{
    struct msghdr mh = *m;
    mh.msg_name = NULL; /* TCP reports no source address */
    mh.msg_namelen = 0;
    ssize_t r;
    do {
        PL_ENTER();
        r = uw_sdp_recvmsg(p->s, &mh, flags & ~IGNORED_FLAGS);
        PL_LEAVE();
    } while (r == -EINTR && pl_restart(p->s, SO_RCVTIMEO));
    if (r >= 0) {
        m->msg_flags = mh.msg_flags;
        m->msg_controllen = 0;
        m->msg_namelen = 0;
    }
    return r;
}

static ssize_t sdp_recv(struct pl_sock *p, void *buf, size_t len, int flags)
{
    ssize_t r;
    do {
        PL_ENTER();
        r = uw_sdp_recv(p->s, buf, len, flags & ~IGNORED_FLAGS);
        PL_LEAVE();
    } while (r == -EINTR && pl_restart(p->s, SO_RCVTIMEO));
    return r;
}

/* SIGPIPE as the kernel sends it: to the calling thread, unless
 * MSG_NOSIGNAL. */
static ssize_t pipe_sig(ssize_t r, int flags)
{
    if (r == -EPIPE && !(flags & MSG_NOSIGNAL))
        raise(SIGPIPE);
    return r;
}

static ssize_t sdp_send(struct pl_sock *p, const void *buf, size_t len, int flags)
{
    ssize_t r;
    do {
        PL_ENTER();
        r = uw_sdp_send(p->s, buf, len, flags | MSG_NOSIGNAL);
        PL_LEAVE();
    } while (r == -EINTR && pl_restart(p->s, SO_SNDTIMEO));
    return pipe_sig(r, flags);
}

static ssize_t sdp_sendmsg(struct pl_sock *p, const struct msghdr *m, int flags)
{
    struct msghdr mh = *m;
    mh.msg_name = NULL; /* ignored on a connected stream socket, as TCP */
    mh.msg_namelen = 0;
    ssize_t r;
    do {
        PL_ENTER();
        r = uw_sdp_sendmsg(p->s, &mh, flags | MSG_NOSIGNAL);
        PL_LEAVE();
    } while (r == -EINTR && pl_restart(p->s, SO_SNDTIMEO));
    return pipe_sig(r, flags);
}

/* ---- read/write family ---------------------------------------------------------- */

PL_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(read)(fd, buf, n);
    ssize_t r = sdp_recv(p, buf, n, 0);
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(write)(fd, buf, n);
    ssize_t r = sdp_send(p, buf, n, 0);
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(readv)(fd, iov, cnt);
    ssize_t r;
    if (cnt < 0 || cnt > IOV_MAX) {
        r = -EINVAL;
    } else {
        struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
        r = sdp_recvmsg(p, &m, 0);
    }
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(writev)(fd, iov, cnt);
    ssize_t r;
    if (cnt < 0 || cnt > IOV_MAX) {
        r = -EINVAL;
    } else {
        struct msghdr m = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)cnt};
        r = sdp_sendmsg(p, &m, 0);
    }
    pl_put(p);
    return pl_ret(r);
}

/* ---- send/recv family ----------------------------------------------------------- */

PL_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(send)(fd, buf, n, flags);
    ssize_t r = sdp_send(p, buf, n, flags);
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(recv)(fd, buf, n, flags);
    ssize_t r = sdp_recv(p, buf, n, flags);
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
                         socklen_t al)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(sendto)(fd, buf, n, flags, a, al);
    ssize_t r = sdp_send(p, buf, n, flags); /* the address is ignored, as TCP does */
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a,
                           socklen_t *al)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(recvfrom)(fd, buf, n, flags, a, al);
    ssize_t r = sdp_recv(p, buf, n, flags);
    if (r >= 0 && a && al)
        *al = 0; /* TCP fills in no source address */
    pl_put(p);
    return pl_ret(r);
}

/* sendmsg/recvmsg: more than UIO_MAXIOV iovecs is EMSGSIZE (readv and
 * writev say EINVAL). */
static ssize_t msg_check(const struct msghdr *m)
{
    if (!m)
        return -EFAULT;
    return m->msg_iovlen > IOV_MAX ? -EMSGSIZE : 0;
}

PL_EXPORT ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(sendmsg)(fd, m, flags);
    ssize_t r = msg_check(m);
    if (r == 0)
        r = sdp_sendmsg(p, m, flags);
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(recvmsg)(fd, m, flags);
    ssize_t r = msg_check(m);
    if (r == 0)
        r = sdp_recvmsg(p, m, flags);
    pl_put(p);
    return pl_ret(r);
}

#define MMSG_MAX 1024 /* UIO_MAXIOV, the kernel's cap on vlen */

PL_EXPORT int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? (int)pl_ret(e) : REAL(sendmmsg)(fd, v, n, flags);
    if (n > MMSG_MAX)
        n = MMSG_MAX;
    ssize_t r = 0;
    unsigned i;
    for (i = 0; i < n; i++) {
        r = msg_check(&v[i].msg_hdr);
        if (r == 0)
            r = sdp_sendmsg(p, &v[i].msg_hdr, flags);
        if (r < 0)
            break;
        v[i].msg_len = (unsigned)r;
    }
    pl_put(p);
    if (i > 0)
        return (int)i; /* the error, if any, is the next call's (as the kernel) */
    return (int)pl_ret(r);
}

PL_EXPORT int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *t)
{
    int e;
    struct pl_sock *p = sdp_get(fd, &e);
    if (!p)
        return e ? (int)pl_ret(e) : REAL(recvmmsg)(fd, v, n, flags, t);
    if (n > MMSG_MAX)
        n = MMSG_MAX;
    ssize_t r = 0;
    unsigned i;
    int f = flags & ~MSG_WAITFORONE;
    for (i = 0; i < n; i++) {
        r = msg_check(&v[i].msg_hdr);
        if (r == 0)
            r = sdp_recvmsg(p, &v[i].msg_hdr, f);
        if (r == 0) {
            v[i++].msg_len = 0; /* end of stream: one empty message */
            break;
        }
        if (r < 0)
            break;
        v[i].msg_len = (unsigned)r;
        if (flags & MSG_WAITFORONE)
            f |= MSG_DONTWAIT;
    }
    pl_put(p);
    if (i > 0)
        return (int)i;
    return (int)pl_ret(r);
}

/* ---- sendfile ------------------------------------------------------------------- */

#define SENDFILE_CHUNK 65536

static ssize_t sdp_sendfile(struct pl_sock *p, int in, off_t *off, size_t count)
{
    char *buf = malloc(SENDFILE_CHUNK);
    if (!buf)
        return -ENOMEM;
    size_t done = 0;
    ssize_t err = 0;
    off_t pos = off ? *off : 0;
    while (done < count) {
        size_t want = count - done < SENDFILE_CHUNK ? count - done : SENDFILE_CHUNK;
        ssize_t n = off ? pread(in, buf, want, pos + (off_t)done) : REAL(read)(in, buf, want);
        if (n < 0) {
            err = -errno;
            break;
        }
        if (n == 0)
            break;
        ssize_t w = sdp_send(p, buf, (size_t)n, 0);
        if (w < 0) {
            if (!off)
                lseek(in, -n, SEEK_CUR);
            err = w;
            break;
        }
        done += (size_t)w;
        if (w < n) {
            if (!off)
                lseek(in, -(n - w), SEEK_CUR);
            break;
        }
    }
    free(buf);
    if (off)
        *off = pos + (off_t)done;
    return done ? (ssize_t)done : err;
}

PL_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
    int e;
    struct pl_sock *p = sdp_get(out, &e);
    if (!p)
        return e ? pl_ret(e) : REAL(sendfile)(out, in, off, count);
    ssize_t r = sdp_sendfile(p, in, off, count);
    pl_put(p);
    return pl_ret(r);
}

PL_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
    return sendfile(out, in, off, count);
}

/* ---- _FORTIFY_SOURCE ------------------------------------------------------------ */

extern void __chk_fail(void) __attribute__((noreturn));
/* glibc declares these only under _FORTIFY_SOURCE. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags, struct sockaddr *a,
                       socklen_t *al);

PL_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    if (n > buflen)
        __chk_fail();
    return read(fd, buf, n);
}

PL_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags)
{
    if (n > buflen)
        __chk_fail();
    return recv(fd, buf, n, flags);
}

PL_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
                                 struct sockaddr *a, socklen_t *al)
{
    if (n > buflen)
        __chk_fail();
    return recvfrom(fd, buf, n, flags, a, al);
}
