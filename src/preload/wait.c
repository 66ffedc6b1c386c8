/* The application's waits drive the stack (docs/preload.md "Progress").
 *
 * An event loop sleeps in poll, select or epoll_wait on mirrors; left to
 * itself, the stack's progress thread receives every message and then
 * wakes the application through the mirror: two thread wake-ups per
 * message, and on a machine with few CPUs four busy threads where TCP has
 * two (redis-benchmark over SDP ran at 0.5x TCP so). Here a wait that may
 * involve SDP also watches the stack's context descriptor and runs the
 * protocol in the application's thread when it fires, then looks at the
 * application's descriptors again: the mirrors show what that brought.
 *
 * The caller's view is unchanged: the same descriptors, events, counts,
 * errors and signal masks; the remaining time of select() is written back
 * as Linux does. With no SDP socket in the process the real call is made
 * directly (one load and a branch). */
#define _GNU_SOURCE
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>

#include "preload/pl.h"
#include "preload/uep.h"

_Atomic int pl_waits;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The stack to drive, or NULL: not from the library's own code, not
 * without SDP sockets. Counted in pl_waits while it is used (pl_fini does
 * not destroy a stack a wait holds). */
static uw_sdp_stack *drive_start(void)
{
    if (pl_inside || atomic_load_explicit(&pl_live, memory_order_relaxed) <= 0)
        return NULL;
    atomic_fetch_add(&pl_waits, 1);
    uw_sdp_stack *st = pl_stack_peek();
    if (!st)
        atomic_fetch_sub(&pl_waits, 1);
    return st;
}

static void drive_stop(void)
{
    atomic_fetch_sub(&pl_waits, 1);
}

/* A deadline in ns from a timespec (NULL: none, UINT64_MAX). */
static uint64_t deadline_of(const struct timespec *ts)
{
    if (!ts)
        return UINT64_MAX;
    if (ts->tv_sec < 0 || ts->tv_nsec < 0)
        return 0;
    return now_ns() + (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* The time left before dl, capped by the stack's own limit (ms, -1 none);
 * NULL when neither bounds the wait. */
static struct timespec *left(uint64_t dl, int stack_ms, struct timespec *buf)
{
    uint64_t l = UINT64_MAX;
    if (dl != UINT64_MAX) {
        uint64_t n = now_ns();
        l = dl > n ? dl - n : 0;
    }
    if (stack_ms >= 0 && (uint64_t)stack_ms * 1000000u < l)
        l = (uint64_t)stack_ms * 1000000u;
    if (l == UINT64_MAX)
        return NULL;
    buf->tv_sec = (time_t)(l / 1000000000u);
    buf->tv_nsec = (long)(l % 1000000000u);
    return buf;
}

/* The stack's own calls (recv, send, poll...) must reach libc, not the
 * wrappers: inside it, as around every uw_sdp_* call. */
static int begin(uw_sdp_stack *st, int *cfd, int *sms)
{
    PL_ENTER();
    int r = uw_sdp_stack_wait_begin(st, cfd, sms);
    PL_LEAVE();
    return r;
}

static void end(uw_sdp_stack *st, bool fired)
{
    int e = errno;
    PL_ENTER();
    uw_sdp_stack_wait_end(st, fired);
    PL_LEAVE();
    errno = e;
}

static bool expired(uint64_t dl)
{
    return dl != UINT64_MAX && now_ns() >= dl;
}

/* ---- poll, ppoll ------------------------------------------------------------ */

static int drive_poll(uw_sdp_stack *st, struct pollfd *fds, nfds_t n, uint64_t dl,
                      const sigset_t *mask)
{
    struct pollfd local[33];
    struct pollfd *p = n < 33 ? local : malloc((n + 1) * sizeof(*p));
    if (!p) {
        struct timespec tb;
        return REAL(ppoll)(fds, n, left(dl, -1, &tb), mask);
    }
    int r;
    for (;;) {
        int cfd, sms;
        struct timespec tb;
        if (begin(st, &cfd, &sms) < 0) {
            r = REAL(ppoll)(fds, n, left(dl, -1, &tb), mask);
            break;
        }
        if (n)
            memcpy(p, fds, n * sizeof(*p));
        p[n] = (struct pollfd){.fd = cfd, .events = POLLIN};
        r = REAL(ppoll)(p, n + 1, left(dl, sms, &tb), mask);
        int e = errno;
        bool fired = r > 0 && p[n].revents;
        end(st, fired);
        if (r < 0) {
            errno = e;
            break;
        }
        if (r > (int)fired) {
            for (nfds_t i = 0; i < n; i++)
                fds[i].revents = p[i].revents;
            r -= fired;
            break;
        }
        /* What the protocol just did may have made a mirror ready. */
        if (fired || expired(dl)) {
            r = REAL(poll)(fds, n, 0);
            if (r != 0 || expired(dl))
                break;
        }
    }
    if (p != local)
        free(p);
    return r;
}

/* poll and select read mirrors: none of theirs may be lazy (uep.c). */
static void polled(const struct pollfd *fds, nfds_t n)
{
    if (atomic_load_explicit(&uep_live, memory_order_relaxed) && !pl_inside)
        for (nfds_t i = 0; i < n; i++)
            uep_polled(fds[i].fd);
}

static void selected(int nfds, const fd_set *rd, const fd_set *wr, const fd_set *ex)
{
    if (!atomic_load_explicit(&uep_live, memory_order_relaxed) || pl_inside || nfds > FD_SETSIZE)
        return;
    for (int fd = 0; fd < nfds; fd++)
        if ((rd && FD_ISSET(fd, rd)) || (wr && FD_ISSET(fd, wr)) || (ex && FD_ISSET(fd, ex)))
            uep_polled(fd);
}

PL_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    polled(fds, n);
    uw_sdp_stack *st = drive_start();
    if (!st)
        return REAL(poll)(fds, n, timeout);
    struct timespec ts = {timeout / 1000, (long)(timeout % 1000) * 1000000L};
    int r = drive_poll(st, fds, n, deadline_of(timeout < 0 ? NULL : &ts), NULL);
    drive_stop();
    return r;
}

PL_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
    polled(fds, n);
    uw_sdp_stack *st = drive_start();
    if (!st)
        return REAL(ppoll)(fds, n, ts, mask);
    if (ts && (ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L || ts->tv_sec < 0)) {
        drive_stop();
        return REAL(ppoll)(fds, n, ts, mask); /* EINVAL, from the kernel */
    }
    int r = drive_poll(st, fds, n, deadline_of(ts), mask);
    drive_stop();
    return r;
}

/* _FORTIFY_SOURCE: the array must hold n entries. */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask,
                size_t fdslen);
PL_EXPORT int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen)
{
    if (fdslen / sizeof(*fds) < n)
        abort(); /* what glibc's __chk_fail does, without its message */
    return poll(fds, n, timeout);
}

PL_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
                          const sigset_t *mask, size_t fdslen)
{
    if (fdslen / sizeof(*fds) < n)
        abort();
    return ppoll(fds, n, ts, mask);
}

/* ---- select, pselect ------------------------------------------------------------ */

static int drive_select(uw_sdp_stack *st, int nfds, fd_set *rd, fd_set *wr, fd_set *ex, uint64_t dl,
                        const sigset_t *mask)
{
    fd_set r0, w0, e0, rl;
    if (rd)
        r0 = *rd;
    if (wr)
        w0 = *wr;
    if (ex)
        e0 = *ex;
    int r;
    for (;;) {
        int cfd, sms;
        struct timespec tb;
        if (begin(st, &cfd, &sms) < 0) {
            r = REAL(pselect)(nfds, rd, wr, ex, left(dl, -1, &tb), mask);
            break;
        }
        if (cfd >= FD_SETSIZE) { /* select cannot watch it: the progress thread does */
            end(st, false);
            r = REAL(pselect)(nfds, rd, wr, ex, left(dl, -1, &tb), mask);
            break;
        }
        fd_set *rs = rd ? rd : &rl;
        if (!rd)
            FD_ZERO(&rl);
        FD_SET(cfd, rs);
        r = REAL(pselect)(nfds > cfd ? nfds : cfd + 1, rs, wr, ex, left(dl, sms, &tb), mask);
        int e = errno;
        bool fired = r > 0 && FD_ISSET(cfd, rs);
        end(st, fired);
        if (r < 0) {
            /* The sets are left as they were given, as Linux leaves them. */
            if (rd)
                *rd = r0;
            errno = e;
            break;
        }
        FD_CLR(cfd, rs);
        r -= fired;
        if (r > 0)
            break;
        if (fired || expired(dl)) {
            if (rd)
                *rd = r0;
            if (wr)
                *wr = w0;
            if (ex)
                *ex = e0;
            struct timespec zero = {0, 0};
            r = REAL(pselect)(nfds, rd, wr, ex, &zero, NULL);
            if (r != 0 || expired(dl))
                break;
        }
        if (rd)
            *rd = r0;
        if (wr)
            *wr = w0;
        if (ex)
            *ex = e0;
    }
    return r;
}

PL_EXPORT int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
    selected(nfds, rd, wr, ex);
    uw_sdp_stack *st = drive_start();
    if (!st)
        return REAL(select)(nfds, rd, wr, ex, tv);
    if (nfds < 0 || nfds > FD_SETSIZE || (tv && (tv->tv_sec < 0 || tv->tv_usec < 0))) {
        drive_stop();
        return REAL(select)(nfds, rd, wr, ex, tv); /* EINVAL, from the kernel */
    }
    struct timespec ts;
    if (tv) {
        /* Linux normalizes tv_usec >= 1000000 rather than refusing it. */
        ts.tv_sec = tv->tv_sec + tv->tv_usec / 1000000;
        ts.tv_nsec = (long)(tv->tv_usec % 1000000) * 1000L;
    }
    uint64_t dl = deadline_of(tv ? &ts : NULL);
    int r = drive_select(st, nfds, rd, wr, ex, dl, NULL);
    int e = errno;
    drive_stop();
    if (tv) {
        /* Linux writes back the time left (select(2)). */
        uint64_t n = now_ns(), l = dl > n ? dl - n : 0;
        tv->tv_sec = (time_t)(l / 1000000000u);
        tv->tv_usec = (suseconds_t)(l % 1000000000u / 1000u);
    }
    errno = e;
    return r;
}

PL_EXPORT int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
                      const sigset_t *mask)
{
    selected(nfds, rd, wr, ex);
    uw_sdp_stack *st = drive_start();
    if (!st)
        return REAL(pselect)(nfds, rd, wr, ex, ts, mask);
    if (nfds < 0 || nfds > FD_SETSIZE ||
        (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L))) {
        drive_stop();
        return REAL(pselect)(nfds, rd, wr, ex, ts, mask);
    }
    int r = drive_select(st, nfds, rd, wr, ex, deadline_of(ts), mask);
    drive_stop();
    return r;
}

/* ---- epoll_wait, epoll_pwait, epoll_pwait2 ------------------------------------------ */

/* A kernel epoll wait up to dl. */
static int kernel_wait(int epfd, struct epoll_event *ev, int max, uint64_t dl, const sigset_t *mask)
{
    struct timespec tb;
    int r = REAL(epoll_pwait2)(epfd, ev, max, left(dl, -1, &tb), mask);
    if (r < 0 && errno == ENOSYS) {
        struct timespec *t = left(dl, -1, &tb);
        long ms = t ? (long)t->tv_sec * 1000 + (t->tv_nsec + 999999) / 1000000 : -1;
        r = REAL(epoll_pwait)(epfd, ev, max, (int)ms, mask);
    }
    return r;
}

/* What is ready now: the registrations kept in user space (uep.c) first,
 * then, if room is left and it is the kernel's turn, the kernel's. */
static int ready_now(struct uep *u, int epfd, struct epoll_event *ev, int max, bool ask)
{
    int n = u ? uep_collect(u, ev, max) : 0;
    if (n < max && (n == 0 || (ask && uep_ask_kernel(u)))) {
        int k = REAL(epoll_wait)(epfd, ev + n, max - n, 0);
        if (k < 0)
            return n ? n : k;
        n += u ? uep_filter(u, ev + n, k) : k;
    }
    return n;
}

/* The epoll descriptor and the context descriptor are polled together; the
 * events themselves are then taken from the epoll descriptor without
 * waiting, so edge-triggered and one-shot registrations keep their meaning
 * (only epoll_wait consumes them). A set with registrations kept in user
 * space is looked at first, counted as asleep while it is (a socket that
 * becomes ready in another thread then wakes the kernel wait). */
static int drive_epoll(uw_sdp_stack *st, struct uep *u, int epfd, struct epoll_event *ev, int max,
                       uint64_t dl, const sigset_t *mask)
{
    int r;
    for (;;) {
        if (u) {
            uep_sleep(u, 1);
            int n = uep_collect(u, ev, max);
            if (n > 0) {
                uep_sleep(u, -1);
                if (n < max && uep_ask_kernel(u)) {
                    int k = REAL(epoll_wait)(epfd, ev + n, max - n, 0);
                    if (k > 0)
                        n += uep_filter(u, ev + n, k);
                }
                return n;
            }
        }
        int cfd, sms;
        if (!st || begin(st, &cfd, &sms) < 0) {
            r = kernel_wait(epfd, ev, max, dl, mask);
            int e = errno;
            uep_sleep(u, -1);
            if (r > 0 && u)
                r = uep_filter(u, ev, r);
            errno = e;
            /* Only the wake eventfd: look at the user-space side again. */
            if (r != 0 || !u || expired(dl))
                break;
            continue;
        }
        struct timespec tb;
        struct pollfd p[2] = {{.fd = epfd, .events = POLLIN}, {.fd = cfd, .events = POLLIN}};
        r = REAL(ppoll)(p, 2, left(dl, sms, &tb), mask);
        int e = errno;
        uep_sleep(u, -1);
        bool fired = r > 0 && p[1].revents;
        end(st, fired);
        if (r < 0) {
            errno = e;
            break;
        }
        /* Not an epoll descriptor, or a bad one: epoll_wait says which error. */
        if (r > (int)fired || fired || expired(dl) || (p[0].revents & POLLNVAL)) {
            r = ready_now(u, epfd, ev, max, false);
            if (r != 0 || expired(dl))
                break;
        }
    }
    return r;
}

static int epoll_common(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
                        const sigset_t *mask, int ms, bool use_ms)
{
    uw_sdp_stack *st = drive_start();
    struct uep *u = uep_get(epfd);
    if (!st && !u) {
        if (use_ms)
            return mask ? REAL(epoll_pwait)(epfd, ev, max, ms, mask)
                        : REAL(epoll_wait)(epfd, ev, max, ms);
        return REAL(epoll_pwait2)(epfd, ev, max, ts, mask);
    }
    int r;
    if (max <= 0 || !ev) {
        r = REAL(epoll_wait)(epfd, ev, max, 0); /* EINVAL or EFAULT, from the kernel */
    } else {
        struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
        uint64_t dl = use_ms ? deadline_of(ms < 0 ? NULL : &t) : deadline_of(ts);
        r = drive_epoll(st, u, epfd, ev, max, dl, mask);
    }
    int e = errno;
    uep_put(u);
    if (st)
        drive_stop();
    errno = e;
    return r;
}

PL_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
    return epoll_common(epfd, ev, max, NULL, NULL, timeout, true);
}

PL_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout,
                          const sigset_t *mask)
{
    return epoll_common(epfd, ev, max, NULL, mask, timeout, true);
}

PL_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts,
                           const sigset_t *mask)
{
    if (ts && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L))
        return REAL(epoll_pwait2)(epfd, ev, max, ts, mask);
    return epoll_common(epfd, ev, max, ts, mask, 0, false);
}
