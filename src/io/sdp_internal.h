/* SDP socket driver internals shared by sdp_stack.c (the stack, its lock,
 * the progress thread and the verbs plumbing), sdp_socket.c (the socket
 * calls), sdp_opts.c (options, addresses, ioctl) and sdp_pm.c (the port
 * mapper). docs/sdp.md describes the design. */
#ifndef UW_IO_SDP_INTERNAL_H
#define UW_IO_SDP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "io/sdp_ready.h"
#include "sdp/conn.h"
#include "uwarp/sdp.h"
#include "uwarp/verbs.h"

/* Socket states (the driver's view; the core has its own once it exists). */
enum uw__sdp_sstate {
    UW__SS_FRESH = 0,  /* created (maybe bound): no connection */
    UW__SS_LISTEN,     /* listening */
    UW__SS_EMBRYO,     /* accepting side: MPA/Hello exchange running, not yet queued */
    UW__SS_QUEUED,     /* accepting side: set up, waiting in the listener's accept queue */
    UW__SS_CONNECTING, /* connecting side: MPA + Hello/HelloAck running */
    UW__SS_OPEN,       /* the core is OPEN or later (half-closes, CLOSED, ERROR) */
    UW__SS_FAILED,     /* connect failed: so_error says why; only close remains */
    UW__SS_TCP,        /* fell back to plain TCP: the fd is the kernel socket */
};

#define UW__SDP_IRD_ORD 4              /* RDMA Reads we offer and ask for (14.1: Reads enabled) */
#define UW__SDP_CLOSE_TIMEOUT_MS 60000 /* background graceful close, at most */

struct uw_sdp_socket {
    uw_sdp_stack *st;
    uw_sdp_sock *next, *prev; /* every socket of the stack, closing ones too */
    uw_sdp_sock *dnext;       /* dirty list: readiness to refresh */
    bool dirty;
    uint64_t serial; /* unique in the stack: a freed socket's address and
                        descriptor numbers come back, this does not */
    int domain;
    int state; /* enum uw__sdp_sstate */
    bool nonblock;
    bool nb_connect; /* a nonblocking connect whose outcome no connect() has seen */
    bool closing;    /* the application closed it: the stack finishes it */
    bool dead;       /* to be freed at the end of the pass */
    uw__sdp_ready rd;
    /* Lazy readiness (uw_sdp_set_lazy): the mirror is left alone and the
     * bits are published here instead (atomics: read without the lock). */
    bool lazy, lazy_never;
    unsigned pub_bits, pub_gen;
    uint64_t pub_rcv; /* octets received when last published */

    /* The connection. */
    uw_qp *qp;
    uw_sdp_conn *conn;
    bool llp_acted;   /* llp_action carried out */
    bool llp_closed;  /* llp_closed reported to the core */
    bool established; /* MPA ESTABLISHED seen */
    bool accepted;    /* Accepting Peer */
    uw_mr **mr;       /* one registration per buffer id */
    uint32_t nmr;
    int so_error;         /* pending error while there is no core (connect) */
    int err_stash;        /* an error a call could not return with data */
    uint64_t deadline_ns; /* setup or background-close deadline (0: none) */
    uint64_t flow_ns;     /* open connection: cork/MSG_MORE ceiling (0: none) */

    /* Listener. */
    uw_listener *lst;
    int backlog;
    uw_sdp_sock *parent;            /* embryo/queued: its listener */
    uw_sdp_sock *aq_head, *aq_tail; /* accept queue (QUEUED children) */
    uw_sdp_sock *aq_next;
    unsigned aq_n, nembryo;

    /* Addresses. */
    struct sockaddr_storage local, peer, bound;
    socklen_t local_len, peer_len, bound_len;
    int bind_fd; /* a TCP socket holding the bound port until listen (-1) */

    /* Options. */
    int rcvtimeo_ms, sndtimeo_ms; /* 0: none */
    bool linger_on;
    int linger_s;
    bool keepalive;
    int keepidle, keepintvl, keepcnt; /* 0: system default */
    char cc[16];                      /* TCP_CONGESTION of the LLP ("": system default) */
    bool reuseaddr, reuseport;
    bool nodelay, cork, oobinline;
    int rcvlowat;
    int rcvbuf, sndbuf; /* 0: the core's default */
    uint32_t rcv_size;  /* UW_SDP_RCVBUF_SIZE (0: default) */
    int bufs;           /* UW_SDP_BUFS (0: default) */
    bool crc;
    /* TCP's error reporting after a reset: the error once, then end of
     * stream for reads and EPIPE for writes. */
    bool err_told;   /* a connection error was returned to the application */
    bool peer_eof;   /* the peer's DisConn arrived while the connection was up */
    bool shut_wr;    /* the application shut its sending direction */
    int tcp_backlog; /* listen()'s backlog as given, for the kernel TCP listener */
    bool pm, pm_optional;
    int pm_fd;      /* uwarp-pmd registration (-1) */
    int tcp_lfd;    /* PM listener: the plain TCP listening socket (-1) */
    bool tcp_ready; /* ... has a connection waiting (the progress thread saw it) */
    int tcp_fd;     /* UW_SDP_TCP_FD: the caller's TCP socket, adopted (-1) */
    const char *transport_why;

    /* Read Zcopy (sdp_zcopy.c). */
    uint32_t zc_min;     /* UW_SDP_ZCOPY_THRESHOLD: 0 never */
    uw_mr *zmr_src;      /* our SrcAvail's buffer: granted per send */
    uw_mr *zmr_dst;      /* the reader's buffer under our RDMA Read */
    uw_mr *zmr_sink;     /* the reader's buffer under our SinkAvail (9.3) */
    bool mode_fixed;     /* UW_SDP_MODE was set: no mode policy of ours */
    unsigned zc_refused; /* our advertisements the peer refused in a row */
    uw_mr *zmr_wsrc;     /* the sender's buffer under our RDMA Write (9.3) */
    unsigned zc_readers; /* threads blocked in recv() on this socket */
    uint64_t zc_ns;      /* a SrcAvail nobody reads: SendSm at this time (0: none) */
};

struct uw_sdp_stack {
    pthread_mutex_t mu;
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *cq;
    int ctx_fd;
    int wake_fd; /* eventfd: wakes the progress thread */
    pthread_t thr;
    bool thr_running, stopping;
    unsigned driving;       /* application threads polling the context fd */
    uint64_t last_drive_ns; /* when the last one stopped */
    bool thr_aside;         /* the progress thread waits without the context fd */
    bool in_cq;             /* completions are being handled (run_wcs) */
    bool app_drives;        /* uw_sdp_stack_wait_begin() was used: waits drive */
    bool thr_in_poll;       /* atomic: the progress thread is inside poll() */
    unsigned thr_polls;     /* atomic: poll() calls it has returned from */
    uw_sdp_stack_attr attr;
    uw_log_fn log;
    uw_sdp_sock *socks;
    uint64_t sock_serial;
    uw_sdp_sock *dirty;
    uint64_t next_deadline_ns;  /* earliest socket deadline (0: none) */
    uint64_t thr_wake_ns;       /* when the sleeping progress thread looks again */
    bool deadline_scan;         /* recompute next_deadline_ns */
    struct uw__pm_resolver *pm; /* created on first use */
    char pmd_control[108];
    char pm_server[64]; /* attr.pm_server as "ADDR:PORT" for the resolver */
    uint32_t zc_min;    /* default UW_SDP_ZCOPY_THRESHOLD ($UWARP_SDP_ZCOPY_MIN) */
    /* Counters for docs/sdp.md measurements (under the lock). */
    unsigned long passes, thread_wakeups, app_waits, loop_waits;
};

/* sdp_zcopy.c (called with the lock held). zsend/zrecv return the octets
 * moved, 0 when zero copy does not apply now (use Bcopy), or an error. */
#define UW__SDP_WRID_ZREAD UINT64_MAX
#define UW__SDP_WRID_ZWRITE (UINT64_MAX - 1)
/* zsend: a deadline (0: none) or a signal revokes the advertisement
 * (SrcAvailCancel); *cut then says UW_EAGAIN or -EINTR and the return
 * value counts the octets the peer took before. */
ssize_t uw__sdp_zsend(uw_sdp_sock *s, const void *buf, size_t len, uint64_t deadline_ns, int *cut);
ssize_t uw__sdp_zrecv(uw_sdp_sock *s, void *buf, size_t room, bool nb);
/* Write Zcopy's receive: the octets placed or copied into buf, 0 when
 * none were (*advertised says whether a SinkAvail went: if not, read as
 * usual), or an error. */
ssize_t uw__sdp_zsink_recv(uw_sdp_sock *s, void *buf, size_t room, uint64_t deadline_ns,
                           bool *advertised);
bool uw__sdp_zsink_fits(const uw_sdp_sock *s, size_t room);
bool uw__sdp_zrecv_fits(const uw_sdp_sock *s, size_t room);
/* A blocking reader with room for zero copy is about to wait: in Buffered
 * Mode (the peer gave up advertising to us) it asks for Combined again. */
void uw__sdp_zc_reader(uw_sdp_sock *s, size_t room);
void uw__sdp_zc_arrived(uw_sdp_sock *s);
void uw__sdp_zc_fire(uw_sdp_sock *s, uint64_t now);
void uw__sdp_zc_free(uw_sdp_sock *s);
uint32_t uw__sdp_zc_default(void);

/* sdp_stack.c: the lock. Unlocking first refreshes every dirty mirror. */
void uw__sdp_lock(uw_sdp_stack *st);
void uw__sdp_unlock(uw_sdp_stack *st);
/* One progress pass: engine, completions, events, timers, reaping. */
void uw__sdp_progress(uw_sdp_stack *st);
/* Blocks the calling application thread (lock held on entry and exit)
 * until the socket's fd shows one of events, the context has work, or
 * deadline_ns (0: none) passes, then runs a progress pass. Returns 0, or
 * -EAGAIN (deadline passed), -EINTR (a signal). */
int uw__sdp_wait(uw_sdp_sock *s, short events, uint64_t deadline_ns);
/* After a core call: posts, sends, the LLP action; marks the mirror dirty. */
void uw__sdp_pump(uw_sdp_sock *s);
void uw__sdp_mark(uw_sdp_sock *s);
/* Readiness of s as a TCP socket would show it. */
unsigned uw__sdp_bits(const uw_sdp_sock *s);
/* Creates the QP and the core for s (accepting: with the listener's
 * options) and posts the initial receive buffers. */
int uw__sdp_conn_setup(uw_sdp_sock *s, bool accepting, uint16_t ird, uint16_t ord);
/* Tears the connection down now (RST if still up) and frees its resources;
 * the socket object stays. */
void uw__sdp_conn_teardown(uw_sdp_sock *s);
/* Marks a socket to be freed at the end of the current pass. */
void uw__sdp_kill(uw_sdp_sock *s);
/* A nonblocking call is about to say EAGAIN: the application will sleep on
 * the mirror (poll, epoll), so the progress thread must not stand aside
 * for the spinning caller any longer. */
void uw__sdp_will_wait(uw_sdp_stack *st);
/* Closes a port-mapper listener's TCP socket so that its port is free on
 * return (a poll() of the progress thread pins it otherwise). */
void uw__sdp_release_tcp_listener(uw_sdp_sock *s);
/* Makes the progress thread look at its watch list and deadlines again. */
void uw__sdp_wake_thread(uw_sdp_stack *st);
/* Deadline bookkeeping. */
void uw__sdp_set_deadline(uw_sdp_sock *s, uint64_t ns);
void uw__sdp_arm(uw_sdp_stack *st, uint64_t ns); /* a timer of a socket's own */
uint64_t uw__sdp_now_ns(void);
uint64_t uw__sdp_deadline_ms(int ms); /* now + ms (ms <= 0: 0 = none) */
/* The LLP TCP socket of s, or -1. */
int uw__sdp_llp_fd(const uw_sdp_sock *s);
/* Applies keepalive options to the LLP socket (14.3). */
void uw__sdp_apply_keepalive(uw_sdp_sock *s);
/* Allocation and list membership. */
int uw__sdp_sock_new(uw_sdp_stack *st, int domain, uw_sdp_sock **out);
void uw__sdp_sock_free(uw_sdp_sock *s);
void uw__sdp_log(uw_sdp_stack *st, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Applies the stored options to a freshly created core. */
void uw__sdp_apply_opts(uw_sdp_sock *s);
/* A connecting socket finished (0) or failed (err). */
void uw__sdp_connect_done(uw_sdp_sock *s, int err);
/* An error a call is about to return, as TCP would report it: ECONNRESET
 * after the peer's DisConn is EPIPE (Linux tcp_reset() in CLOSE_WAIT), and
 * a connection error is reported once: afterwards reads (reading) see end
 * of stream (0) and writes EPIPE. */
ssize_t uw__sdp_app_err(uw_sdp_sock *s, ssize_t r, bool reading);
/* Whether s fell back to TCP (read under the lock: connect changes it). */
bool uw__sdp_is_tcp(uw_sdp_sock *s);
/* Addresses (sdp_socket.c). */
socklen_t uw__sdp_addr_len(int family);
void uw__sdp_copy_addr(const struct sockaddr_storage *ss, socklen_t sl, struct sockaddr *addr,
                       socklen_t *len);
void uw__sdp_wildcard(int domain, struct sockaddr_storage *ss, socklen_t *len);
/* Port mapper (sdp_pm.c). */
int uw__sdp_pm_setopt(uw_sdp_sock *s, int name, int v);
int uw__sdp_pm_listen(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len);
/* Opens the socket's SDP (MPA) listener on addr (sdp_socket.c). */
int uw__sdp_mpa_listen(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len);
/* accept() on the PM listener's TCP port: 1 with *out, 0 none waiting, or -errno. */
int uw__sdp_pm_accept_tcp(uw_sdp_sock *l, int flags, uw_sdp_sock **out, struct sockaddr *addr,
                          socklen_t *len);
/* Returns 1: connect with SDP to *to; 0: done over TCP (the socket fell
 * back); or a negative errno. */
int uw__sdp_pm_connect(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len,
                       struct sockaddr_storage *to, socklen_t *tolen);
void uw__sdp_pm_destroy(uw_sdp_stack *st);
/* The SDP Address the resolver gave refused the connection (7.5.1). */
void uw__sdp_pm_sdp_reset(uw_sdp_sock *s);

#endif
