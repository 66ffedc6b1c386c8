/* The real libc functions behind the interposed ones (dlsym(RTLD_NEXT)).
 *
 * They are resolved once, on the first call of any wrapper, under a static
 * mutex. Until then the table holds direct system calls: an allocator or a
 * sanitizer that calls read() or close() while dlsym() runs (dlsym may
 * allocate) gets the kernel, not a recursion. A symbol dlsym cannot find
 * keeps its system call. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload/pl.h"

_Thread_local int pl_inside;

static int sys_socket(int d, int t, int p)
{
    return (int)syscall(SYS_socket, d, t, p);
}
static int sys_bind(int fd, const struct sockaddr *a, socklen_t l)
{
    return (int)syscall(SYS_bind, fd, a, l);
}
static int sys_listen(int fd, int b)
{
    return (int)syscall(SYS_listen, fd, b);
}
static int sys_accept4(int fd, struct sockaddr *a, socklen_t *l, int f)
{
    return (int)syscall(SYS_accept4, fd, a, l, f);
}
static int sys_connect(int fd, const struct sockaddr *a, socklen_t l)
{
    return (int)syscall(SYS_connect, fd, a, l);
}
static ssize_t sys_read(int fd, void *b, size_t n)
{
    return syscall(SYS_read, fd, b, n);
}
static ssize_t sys_write(int fd, const void *b, size_t n)
{
    return syscall(SYS_write, fd, b, n);
}
static ssize_t sys_readv(int fd, const struct iovec *v, int n)
{
    return syscall(SYS_readv, fd, v, n);
}
static ssize_t sys_writev(int fd, const struct iovec *v, int n)
{
    return syscall(SYS_writev, fd, v, n);
}
static ssize_t sys_send(int fd, const void *b, size_t n, int f)
{
    return syscall(SYS_sendto, fd, b, n, f, NULL, 0);
}
static ssize_t sys_recv(int fd, void *b, size_t n, int f)
{
    return syscall(SYS_recvfrom, fd, b, n, f, NULL, NULL);
}
static ssize_t sys_sendto(int fd, const void *b, size_t n, int f, const struct sockaddr *a,
                          socklen_t l)
{
    return syscall(SYS_sendto, fd, b, n, f, a, l);
}
static ssize_t sys_recvfrom(int fd, void *b, size_t n, int f, struct sockaddr *a, socklen_t *l)
{
    return syscall(SYS_recvfrom, fd, b, n, f, a, l);
}
static ssize_t sys_sendmsg(int fd, const struct msghdr *m, int f)
{
    return syscall(SYS_sendmsg, fd, m, f);
}
static ssize_t sys_recvmsg(int fd, struct msghdr *m, int f)
{
    return syscall(SYS_recvmsg, fd, m, f);
}
static int sys_sendmmsg(int fd, struct mmsghdr *m, unsigned n, int f)
{
    return (int)syscall(SYS_sendmmsg, fd, m, n, f);
}
static int sys_recvmmsg(int fd, struct mmsghdr *m, unsigned n, int f, struct timespec *t)
{
    return (int)syscall(SYS_recvmmsg, fd, m, n, f, t);
}
static ssize_t sys_sendfile(int o, int i, off_t *off, size_t n)
{
    return syscall(SYS_sendfile, o, i, off, n);
}
static int sys_shutdown(int fd, int h)
{
    return (int)syscall(SYS_shutdown, fd, h);
}
static int sys_close(int fd)
{
    return (int)syscall(SYS_close, fd);
}
static int sys_close_range(unsigned a, unsigned b, int f)
{
#ifdef SYS_close_range
    return (int)syscall(SYS_close_range, a, b, f);
#else
    (void)a, (void)b, (void)f;
    errno = ENOSYS;
    return -1;
#endif
}
static void sys_closefrom(int lowfd)
{
    sys_close_range((unsigned)lowfd, ~0u, 0);
}
static int sys_getsockname(int fd, struct sockaddr *a, socklen_t *l)
{
    return (int)syscall(SYS_getsockname, fd, a, l);
}
static int sys_getpeername(int fd, struct sockaddr *a, socklen_t *l)
{
    return (int)syscall(SYS_getpeername, fd, a, l);
}
static int sys_getsockopt(int fd, int lv, int n, void *v, socklen_t *l)
{
    return (int)syscall(SYS_getsockopt, fd, lv, n, v, l);
}
static int sys_setsockopt(int fd, int lv, int n, const void *v, socklen_t l)
{
    return (int)syscall(SYS_setsockopt, fd, lv, n, v, l);
}
static int sys_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}
static int sys_ioctl(int fd, unsigned long req, ...)
{
    va_list ap;
    va_start(ap, req);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return (int)syscall(SYS_ioctl, fd, req, arg);
}
static int sys_dup(int fd)
{
    return (int)syscall(SYS_dup, fd);
}
static int sys_dup3(int a, int b, int f)
{
    return (int)syscall(SYS_dup3, a, b, f);
}
static int sys_dup2(int a, int b)
{
    if (a == b)
        return sys_fcntl(a, F_GETFD) < 0 ? -1 : b;
    return sys_dup3(a, b, 0);
}
static int sys_epoll_ctl(int ep, int op, int fd, struct epoll_event *ev)
{
    return (int)syscall(SYS_epoll_ctl, ep, op, fd, ev);
}

/* The kernel's sigset for the *_pwait and pselect calls is 8 octets
 * (_NSIG / 8), not glibc's 128. */
#define KSIGSET 8
static int sys_ppoll(struct pollfd *f, nfds_t n, const struct timespec *t, const sigset_t *m)
{
    return (int)syscall(SYS_ppoll, f, n, t, m, KSIGSET);
}
static int sys_poll(struct pollfd *f, nfds_t n, int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    return sys_ppoll(f, n, ms < 0 ? NULL : &t, NULL);
}
static int sys_pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
                       const sigset_t *m)
{
    /* pselect6 writes the time left back: a copy keeps the caller's const. */
    struct timespec c, *tp = NULL;
    if (t) {
        c = *t;
        tp = &c;
    }
    struct {
        const sigset_t *ss;
        size_t len;
    } sm = {m, KSIGSET};
    return (int)syscall(SYS_pselect6, n, r, w, e, tp, m ? &sm : NULL);
}
static int sys_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    return (int)syscall(SYS_select, n, r, w, e, tv);
}
static int sys_epoll_pwait(int ep, struct epoll_event *ev, int max, int ms, const sigset_t *m)
{
    return (int)syscall(SYS_epoll_pwait, ep, ev, max, ms, m, KSIGSET);
}
static int sys_epoll_wait(int ep, struct epoll_event *ev, int max, int ms)
{
    return sys_epoll_pwait(ep, ev, max, ms, NULL);
}
static int sys_epoll_pwait2(int ep, struct epoll_event *ev, int max, const struct timespec *t,
                            const sigset_t *m)
{
#ifdef SYS_epoll_pwait2
    return (int)syscall(SYS_epoll_pwait2, ep, ev, max, t, m, KSIGSET);
#else
    (void)ep, (void)ev, (void)max, (void)t, (void)m;
    errno = ENOSYS;
    return -1;
#endif
}

struct pl_real pl_real = {
    .socket = sys_socket,
    .bind = sys_bind,
    .listen = sys_listen,
    .accept4 = sys_accept4,
    .connect = sys_connect,
    .read = sys_read,
    .write = sys_write,
    .readv = sys_readv,
    .writev = sys_writev,
    .send = sys_send,
    .recv = sys_recv,
    .sendto = sys_sendto,
    .recvfrom = sys_recvfrom,
    .sendmsg = sys_sendmsg,
    .recvmsg = sys_recvmsg,
    .sendmmsg = sys_sendmmsg,
    .recvmmsg = sys_recvmmsg,
    .sendfile = sys_sendfile,
    .shutdown = sys_shutdown,
    .close = sys_close,
    .close_range = sys_close_range,
    .closefrom = sys_closefrom,
    .getsockname = sys_getsockname,
    .getpeername = sys_getpeername,
    .getsockopt = sys_getsockopt,
    .setsockopt = sys_setsockopt,
    .fcntl = sys_fcntl,
    .ioctl = sys_ioctl,
    .dup = sys_dup,
    .dup2 = sys_dup2,
    .dup3 = sys_dup3,
    .epoll_ctl = sys_epoll_ctl,
    .poll = sys_poll,
    .ppoll = sys_ppoll,
    .select = sys_select,
    .pselect = sys_pselect,
    .epoll_wait = sys_epoll_wait,
    .epoll_pwait = sys_epoll_pwait,
    .epoll_pwait2 = sys_epoll_pwait2,
};

_Atomic int pl_real_ready;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int resolving;

/* dlsym returns void *; a function pointer of the field's type from it. */
#define RESOLVE(field, name)                   \
    do {                                       \
        void *p_ = dlsym(RTLD_NEXT, name);     \
        if (p_)                                \
            memcpy(&t.field, &p_, sizeof(p_)); \
    } while (0)

void pl_real_init(void)
{
    if (atomic_load_explicit(&pl_real_ready, memory_order_acquire) || resolving)
        return;
    resolving = 1;
    pthread_mutex_lock(&mu);
    if (!atomic_load_explicit(&pl_real_ready, memory_order_relaxed)) {
        struct pl_real t = pl_real;
        RESOLVE(socket, "socket");
        RESOLVE(bind, "bind");
        RESOLVE(listen, "listen");
        RESOLVE(accept4, "accept4");
        RESOLVE(connect, "connect");
        RESOLVE(read, "read");
        RESOLVE(write, "write");
        RESOLVE(readv, "readv");
        RESOLVE(writev, "writev");
        RESOLVE(send, "send");
        RESOLVE(recv, "recv");
        RESOLVE(sendto, "sendto");
        RESOLVE(recvfrom, "recvfrom");
        RESOLVE(sendmsg, "sendmsg");
        RESOLVE(recvmsg, "recvmsg");
        RESOLVE(sendmmsg, "sendmmsg");
        RESOLVE(recvmmsg, "recvmmsg");
        RESOLVE(sendfile, "sendfile");
        RESOLVE(shutdown, "shutdown");
        RESOLVE(close, "close");
        RESOLVE(close_range, "close_range");
        RESOLVE(closefrom, "closefrom");
        RESOLVE(getsockname, "getsockname");
        RESOLVE(getpeername, "getpeername");
        RESOLVE(getsockopt, "getsockopt");
        RESOLVE(setsockopt, "setsockopt");
        RESOLVE(fcntl, "fcntl");
        RESOLVE(ioctl, "ioctl");
        RESOLVE(dup, "dup");
        RESOLVE(dup2, "dup2");
        RESOLVE(dup3, "dup3");
        RESOLVE(epoll_ctl, "epoll_ctl");
        RESOLVE(poll, "poll");
        RESOLVE(ppoll, "ppoll");
        RESOLVE(select, "select");
        RESOLVE(pselect, "pselect");
        RESOLVE(epoll_wait, "epoll_wait");
        RESOLVE(epoll_pwait, "epoll_pwait");
        RESOLVE(epoll_pwait2, "epoll_pwait2");
        pl_real = t;
        atomic_store_explicit(&pl_real_ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&mu);
    resolving = 0;
}
