/* The context's descriptors and clock: the epoll set the application may
 * wait on (uw_ctx_fd), the eventfd that signals internal work, the timerfd
 * of QP deadlines. verbs/objects.c creates contexts; everything here is a
 * system call, so it lives with the rest of the I/O. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "io/engine.h"

uint64_t uw__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int uw__ctx_fds_open(uw_ctx *c)
{
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    int err = 0;
    if (c->epfd < 0 || c->evfd < 0 || c->tfd < 0) {
        err = -errno;
    } else {
        /* Small integers in data.u64 mark the internal fds; objects are
         * pointers. */
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UW__EP_EVFD};
        struct epoll_event tv = {.events = EPOLLIN, .data.u64 = UW__EP_TIMERFD};
        if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->evfd, &ev) < 0 ||
            epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->tfd, &tv) < 0)
            err = -errno;
    }
    if (err)
        uw__ctx_fds_close(c);
    return err;
}

void uw__ctx_fds_close(uw_ctx *c)
{
    if (c->epfd >= 0)
        close(c->epfd);
    if (c->evfd >= 0)
        close(c->evfd);
    if (c->tfd >= 0)
        close(c->tfd);
    c->epfd = c->evfd = c->tfd = -1;
}

int uw_ctx_fd(uw_ctx *c)
{
    if (!c)
        return UW_EINVAL;
    c->fd_taken = true; /* from now on every socket stays in the epoll set */
    uw__ctx_attach(c);
    if (c->sig_soft) {
        c->sig_soft = false;
        uw__ctx_signal(c);
    }
    return c->epfd;
}

/* Makes the context fd readable: internal work is pending that no socket
 * event will announce. Completions and events do not signal: every waiting
 * function looks at its queue before it sleeps (see uw_ctx_fd()). Until the
 * application holds the fd, only our own passes wait on it, and a flag they
 * read does the same without an eventfd write and read (a server mixing
 * uw_cq_wait() and uw_cm_get_event() paid them once every few messages). */
void uw__ctx_signal(uw_ctx *c)
{
    if (c->ev_armed)
        return;
    if (!c->fd_taken) {
        c->sig_soft = true; /* the next pass will not sleep (engine.c) */
        return;
    }
    uint64_t one = 1;
    if (write(c->evfd, &one, sizeof(one)) == sizeof(one))
        c->ev_armed = true;
}
