/* libuwarp-preload.so internals (docs/preload.md): the real libc functions,
 * the descriptor table, logging, and the process-wide state (environment,
 * rules, the lazily created SDP stack).
 *
 * Every name here is hidden (the library is built with -fvisibility=hidden
 * and a version script exporting only the interposed libc symbols). */
#ifndef UW_PRELOAD_PL_H
#define UW_PRELOAD_PL_H

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "preload/conf.h"
#include "uwarp/sdp.h"

#define PL_EXPORT __attribute__((visibility("default")))

/* ---- The real functions (real.c) ---------------------------------------------- */

struct pl_real {
    int (*socket)(int, int, int);
    int (*bind)(int, const struct sockaddr *, socklen_t);
    int (*listen)(int, int);
    int (*accept4)(int, struct sockaddr *, socklen_t *, int);
    int (*connect)(int, const struct sockaddr *, socklen_t);
    ssize_t (*read)(int, void *, size_t);
    ssize_t (*write)(int, const void *, size_t);
    ssize_t (*readv)(int, const struct iovec *, int);
    ssize_t (*writev)(int, const struct iovec *, int);
    ssize_t (*send)(int, const void *, size_t, int);
    ssize_t (*recv)(int, void *, size_t, int);
    ssize_t (*sendto)(int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    ssize_t (*recvfrom)(int, void *, size_t, int, struct sockaddr *, socklen_t *);
    ssize_t (*sendmsg)(int, const struct msghdr *, int);
    ssize_t (*recvmsg)(int, struct msghdr *, int);
    int (*sendmmsg)(int, struct mmsghdr *, unsigned, int);
    int (*recvmmsg)(int, struct mmsghdr *, unsigned, int, struct timespec *);
    ssize_t (*sendfile)(int, int, off_t *, size_t);
    int (*shutdown)(int, int);
    int (*close)(int);
    int (*close_range)(unsigned, unsigned, int);
    void (*closefrom)(int);
    int (*getsockname)(int, struct sockaddr *, socklen_t *);
    int (*getpeername)(int, struct sockaddr *, socklen_t *);
    int (*getsockopt)(int, int, int, void *, socklen_t *);
    int (*setsockopt)(int, int, int, const void *, socklen_t);
    int (*fcntl)(int, int, ...);
    int (*ioctl)(int, unsigned long, ...);
    int (*dup)(int);
    int (*dup2)(int, int);
    int (*dup3)(int, int, int);
    int (*epoll_ctl)(int, int, int, struct epoll_event *);
    int (*poll)(struct pollfd *, nfds_t, int);
    int (*ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
    int (*select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    int (*pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
    int (*epoll_wait)(int, struct epoll_event *, int, int);
    int (*epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
    int (*epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
};

extern struct pl_real pl_real;
/* Resolves every pointer of pl_real once (thread-safe, idempotent); until
 * then, and for any symbol dlsym cannot find, the pointers call the system
 * call directly, so nothing here needs malloc. */
void pl_real_init(void);
extern _Atomic int pl_real_ready;
static inline void pl_real_ensure(void)
{
    if (!atomic_load_explicit(&pl_real_ready, memory_order_acquire))
        pl_real_init();
}
/* A real function, resolved first if need be. */
#define REAL(f) (pl_real_ensure(), pl_real.f)

/* The "inside uwarp" flag: set around every uw_sdp_* call and in the
 * stack's own threads, so that the library's own socket calls go straight
 * to libc. */
extern _Thread_local int pl_inside;

/* ---- Descriptor table (fdtab.c) --------------------------------------------- */

enum pl_kind {
    PL_PENDING = 1, /* a candidate TCP socket: the kernel socket, no decision yet */
    PL_SDP = 2,     /* an SDP connection (connecting or connected) */
    PL_LISTEN = 3,  /* an SDP listener with the port mapper (accepts TCP too) */
    PL_ORPHAN = 4,  /* an SDP socket inherited across fork(): unusable here */
};

#define PL_MAX_EPOLL 16

struct pl_sock {
    _Atomic int refs; /* descriptors mapped to it + calls in flight; 0: free */
    _Atomic int kind; /* enum pl_kind */
    _Atomic int busy; /* connect/listen deciding */
    uw_sdp_sock *s;   /* PL_SDP, PL_LISTEN, PL_ORPHAN */
    int domain;
    int rcvbuf, sndbuf; /* set by the application while pending (0: not) */
    bool sdp_only;      /* a "use sdp" rule: no TCP (listener: TCP clients refused) */
    int nep;            /* epoll registrations of the pending socket */
    _Atomic int kregs;  /* whole kernel epoll registrations known (uep.c) */
    struct {
        int epfd;
        struct epoll_event ev;
    } ep[PL_MAX_EPOLL];
    struct pl_sock *free_next;
};

/* A new object with refs 1, or NULL (no memory). */
struct pl_sock *pl_sock_new(int kind, int domain);
/* The object fd refers to with a reference taken for the call, or NULL.
 * Lock-free. */
struct pl_sock *pl_get(int fd);
/* Drops a reference; the last one closes the SDP socket and frees p. */
void pl_put(struct pl_sock *p);
/* Maps fd to p (taking a reference for the mapping); an object fd referred
 * to before loses that reference. */
void pl_map(int fd, struct pl_sock *p);
/* Unmaps fd, dropping the mapping's reference. */
void pl_unmap(int fd);
/* Up to max descriptors mapped to p (a scan of the table: for decisions,
 * not hot paths). */
int pl_tab_fds_of(const struct pl_sock *p, int *out, int max);
/* Unmaps every descriptor in [first, last] (close_range, closefrom). */
void pl_unmap_range(unsigned first, unsigned last);
/* Whether fd is mapped (no reference taken). */
bool pl_mapped(int fd);
/* For fork: every mapped SDP socket becomes an orphan. */
void pl_tab_orphan_all(void);
/* For exit: unmaps every SDP descriptor (closing sockets no call uses). */
void pl_tab_close_all(void);
/* Objects holding an SDP socket (kind SDP or LISTEN): incremented when one
 * gets its socket, decremented when it is closed. */
extern _Atomic int pl_live;
void pl_tab_lock(void);
void pl_tab_unlock(void);

/* ---- Logging (log.c) ---------------------------------------------------------- */

enum { PL_LOG_ERROR = 0, PL_LOG_WARN = 1, PL_LOG_INFO = 2, PL_LOG_DEBUG = 3 };
extern int pl_log_level;
void pl_log_open(void);
/* "uwarp-preload[PID] fd N: msg" (fd < 0: "uwarp-preload[PID]: msg"). */
void pl_log(int level, int fd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define PL_LOG(level, fd, ...)                  \
    do {                                        \
        if ((level) <= pl_log_level)            \
            pl_log((level), (fd), __VA_ARGS__); \
    } while (0)
/* "1.2.3.4:80" or "[::1]:80". */
const char *pl_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t n);

/* ---- Process state (init.c) ------------------------------------------------- */

struct pl_state {
    bool enabled;     /* candidates are looked at (not TCP_ONLY, not setuid, conf fine) */
    uw_pl_conf *conf; /* NULL: every candidate tries SDP */
    const char *prog; /* program short name, for the rules */
    char pmd_control[108];
    unsigned short pm_port;
    bool child; /* a fork() child: SDP sockets of the parent are orphans */
};
extern struct pl_state pl_st;

/* Reads the environment and the rules once (thread-safe). */
void pl_init(void);
/* The SDP stack, created on first need; NULL (and logged once) if it cannot be. */
uw_sdp_stack *pl_stack(void);
/* The SDP stack if there is one (never creates it). */
uw_sdp_stack *pl_stack_peek(void);
/* Intercepted waits driving the stack now (wait.c): exit leaves the stack
 * alone while one does. */
extern _Atomic int pl_waits;
/* Whether a warning was logged already for key (one bit each). */
bool pl_once(unsigned key);
enum {
    PL_ONCE_NO_PMD = 1u,
    PL_ONCE_FORK = 2u,
    PL_ONCE_STACK = 4u,
    PL_ONCE_EXEC = 8u,
    PL_ONCE_UEP = 16u
};

/* Around uw_sdp_* calls: the library's own socket calls go to libc. */
#define PL_ENTER() (pl_inside++)
#define PL_LEAVE() (pl_inside--)

/* Sets errno from a negative result and returns -1, or returns r. */
static inline ssize_t pl_ret(ssize_t r)
{
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* Restart or EINTR after a blocking uw_sdp call on s was interrupted
 * (io.c); timeo_opt is the option (SO_RCVTIMEO or SO_SNDTIMEO) that bounds
 * the call: with one set, TCP never restarts. */
bool pl_restart(uw_sdp_sock *s, int timeo_opt);

#endif
