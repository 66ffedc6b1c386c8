/* pl_calls: shared declarations of the runner (pl_calls.c) and the
 * sequence files (pl_seq_*.c). See pl_calls.c for what the program does. */
#ifndef PL_CALLS_H
#define PL_CALLS_H

#define _GNU_SOURCE
#if defined(__OPTIMIZE__) && !defined(_FORTIFY_SOURCE)
/* The __*_chk variants (read, recv, recvfrom) are intercepted too. */
#define _FORTIFY_SOURCE 2
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <linux/close_range.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>

/* One half waits at most SETTLE_MS for any one thing, at most 2 s in a
 * blocking call that a signal or timeout should end, so the other half's
 * CTL_WAIT_MS at a sync point is never reached unless something hangs. */
#define SEQ_LIMIT_MS 60000 /* watchdog: one sequence */
#define CTL_WAIT_MS 30000  /* a sync point */
#define SETTLE_MS 5000     /* waiting for a state to show */
#define QUIET_MS 200       /* "nothing happens" windows */

/* ---- state of this half (thread-local: in --role both each half is a thread) */
extern _Thread_local int g_role; /* 'S' or 'C' */
#define SRV (g_role == 'S')
#define CLI (g_role == 'C')
extern _Thread_local int g_lport; /* the sequence's listener port, both halves */
extern _Thread_local long g_r;    /* T(): the last result and errno */
extern _Thread_local int g_e;
extern volatile sig_atomic_t g_sigpipe, g_sigalrm;
extern _Thread_local char g_buf[1 << 16]; /* scratch, per half */

/* ---- steps: each records "SEQ SIDE NN DESC = RESULT" and checks it -------- */

/* A call's result against the expectation exp (TCP's): exp "fd" prints any
 * r >= 0 as "fd", ">0" any r > 0 as ">0", else the exact number; r < 0
 * prints "-1 ENAME". Returns r, errno preserved. */
long tr_(const char *desc, long r, int e, const char *exp);
#define T(desc, expr, exp) \
    (errno = 0, g_r = (long)(expr), g_e = errno, tr_((desc), g_r, g_e, (exp)))
/* A formatted value against exp (NULL: not checked). */
void record(const char *desc, const char *got, const char *exp);
#define V(desc, val, exp) record((desc), (val), (exp))
/* T() for calls that make a descriptor, tracked for the sequence's cleanup. */
#define TF(desc, expr) (T((desc), (expr), "fd"), track((int)g_r), (int)g_r)
#define TCLOSE(desc, fd, exp) (untrack(fd), T((desc), close(fd), (exp)))

void track(int fd);
void untrack(int fd);
void xclose(int fd);

/* ---- the other half --------------------------------------------------------- */
void sync_(void);
void put_int(int v);
int get_int(void);
/* A setup step failed: records it and ends the sequence on both halves. */
void seq_abort(const char *what) __attribute__((noreturn));

/* ---- formatting ------------------------------------------------------------- */
__attribute__((format(printf, 1, 2))) void outf(const char *fmt, ...);
const char *ename(int e);
char *sbuf(void);             /* one of 16 rotating 160-octet buffers */
const char *evs(int revents); /* "IN OUT RDHUP", "none", or "-1 ERRNO" for < 0 */
int parse_evs(const char *txt);
int port_of(const struct sockaddr_storage *ss);
const char *port_class(int port);
const char *sa_str(const struct sockaddr_storage *ss, socklen_t len);
const char *sockname(int fd);
const char *peername(int fd);
int local_port(int fd);
int peer_port(int fd);
const char *fdflags(int fd); /* "nb=N ce=N" */
const char *ftype(int fd);   /* "sock" */
int gi(int fd, int level, int name);
int si(int fd, int level, int name, int v);
const char *so_error(int fd);
int tcp_state(int fd);
const char *str_n(const char *p, long n);
void pattern(unsigned char *p, size_t n, unsigned seed);
const char *pattern_ok(const unsigned char *p, size_t n, unsigned seed);
const char *elapsed(long ms, long lo, long hi);

/* ---- waits ------------------------------------------------------------------ */
#define ALLEV (POLLIN | POLLPRI | POLLOUT | POLLRDHUP)
long now_ms(void);
void sleep_ms(int ms);
int poll1(int fd, int events, int ms); /* revents, 0 on timeout, -1 */
/* Polls until revents equals exp (at most SETTLE_MS) and records it. */
void settle(const char *desc, int fd, const char *exp);
void wait_bytes(int fd, int n);      /* until FIONREAD >= n (at most SETTLE_MS) */
const char *ep_wait(int ep, int ms); /* "N EVENTS" of the first, or "0" */
int ep_add(int ep, int fd, unsigned events);
int ep_mod(int ep, int fd, unsigned events);

/* ---- setup ------------------------------------------------------------------ */
socklen_t loop_addr(int family, int port, struct sockaddr_storage *ss);
int mk_listener(int family, int backlog); /* sets g_lport */
int accept_to(int l, int flags);
int connect_to(int family, int port);
int pair_open(int family); /* S: accepted socket, C: connected socket */
void send_all(int fd, const void *p, size_t n);
/* Nonblocking sends of 64 KiB, then 1 KiB, then 1 octet, each until EAGAIN:
 * the count sent, or -1 with errno when a send failed otherwise. */
long fill(int fd);
void set_rcvtimeo(int fd, int ms);
void set_alrm(bool restart); /* SIGALRM handler counting in g_sigalrm */
void alarm_ms(int ms);       /* one-shot ITIMER_REAL (0: cancel) */

/* ---- the table -------------------------------------------------------------- */
#define SEQ_LIST(X)              \
    X(socket)                    \
    X(bind_listen)               \
    X(accept)                    \
    X(accept_fifo)               \
    X(connect_block)             \
    X(connect_nb)                \
    X(connect_ealready)          \
    X(connect_refused)           \
    X(epoll_before_connect)      \
    X(opts_before_connect)       \
    X(dup_before_connect)        \
    X(dual_stack)                \
    X(listener_close_pending)    \
    X(reuseport)                 \
    X(relisten)                  \
    X(names_v4)                  \
    X(names_v6)                  \
    X(names_mapped)              \
    X(names_wildcard)            \
    X(rw)                        \
    X(rw_big)                    \
    X(many_iovecs)               \
    X(send_recv)                 \
    X(waitall)                   \
    X(msg)                       \
    X(fortify)                   \
    X(mmsg)                      \
    X(sendfile)                  \
    X(threads_duplex)            \
    X(oob)                       \
    X(oobinline)                 \
    X(shutdown_wr)               \
    X(shutdown_rd)               \
    X(close_dup)                 \
    X(dup2_replace)              \
    X(close_range)               \
    X(sockopts)                  \
    X(sockopt_inherit)           \
    X(tcp_info)                  \
    X(rcvtimeo)                  \
    X(sndtimeo)                  \
    X(fcntl_ioctl)               \
    X(poll_select)               \
    X(epoll_lt)                  \
    X(epoll_et)                  \
    X(epoll_oneshot)             \
    X(epoll_nested)              \
    X(epoll_dup)                 \
    X(epoll_many_before_connect) \
    X(epoll_listener)            \
    X(epoll_ctl_errors)          \
    X(epoll_lt_fair)             \
    X(epoll_mod_data)            \
    X(epoll_et_arrivals)         \
    X(epoll_oneshot_rearm)       \
    X(epoll_close_last)          \
    X(epoll_close_dup)           \
    X(epoll_hup_rdhup)           \
    X(epoll_err)                 \
    X(epoll_thread_wake)         \
    X(epoll_nested_wake)         \
    X(epoll_poll_agree)          \
    X(nonblock_full)             \
    X(wait_timeouts)             \
    X(wait_wakes)                \
    X(wait_errors)               \
    X(wait_eintr)                \
    X(reset_epipe)               \
    X(reset_unread)              \
    X(write_after_close)         \
    X(recv_wakeup_eof)           \
    X(eintr_recv)                \
    X(restart_recv)              \
    X(eintr_rcvtimeo)            \
    X(eintr_accept)              \
    X(eintr_send)                \
    X(close_pending)             \
    X(passthrough)               \
    X(msg_null_iov)
#define SEQ_DECL(n) void seq_##n(void);
SEQ_LIST(SEQ_DECL)

#endif
