/* uwarp SDP sockets: TCP byte-stream semantics over iWARP
 * (draft-pinkerton-iwarp-sdp-01), with one function per socket call so a
 * preload library can map each libc call onto one of these.
 *
 * Stack. A uw_sdp_stack owns what its sockets share: a uwarp verbs context,
 * the progress thread, the port-mapper resolver and the lock that
 * serialises protocol work. Most programs make one.
 *
 * Descriptors. Every socket has one kernel file descriptor (uw_sdp_fd())
 * whose readiness mirrors the socket as a TCP socket's would: readable when
 * recv would not block (data, end of stream, error) or, on a listener, when
 * accept would not block; writable when send would not block; POLLERR and
 * POLLHUP as TCP sets them; POLLPRI while urgent data is pending. poll,
 * select and epoll (edge-triggered included) work on it directly. It is one
 * end of an AF_UNIX socket pair that the stack keeps in the state to show
 * (docs/sdp.md: "Readiness"); never read, write or close it yourself. A
 * socket that fell back to TCP (port mapper said so) has the TCP socket
 * itself under that descriptor number (register it with epoll after
 * connect). Edge-triggered epoll gets an edge when the socket becomes
 * readable or writable: read or write until -EAGAIN. docs/sdp.md "API
 * notes" lists every difference from a TCP socket's readiness.
 *
 * Progress. Credit updates, DisConn, handshakes and keepalives advance
 * without calls from the application: a thread per stack does it when no
 * application thread is blocked in a call of the stack (a blocking call
 * drives the protocol itself, so a request/response loop needs no wakeup
 * from another thread). See docs/sdp.md "Progress model".
 *
 * Thread-safety. Every function may be called from any thread; calls on one
 * stack are serialised by its lock (a call blocked waiting releases it).
 * uw_sdp_close() must not race with other calls on the same socket, as with
 * close(2); uw_sdp_stack_destroy() with nothing on the stack. The log
 * callback runs under the lock and must not call into the stack. With
 * no_progress_thread, protocol work (and so any change of a descriptor's
 * readiness) happens only inside calls on the stack.
 *
 * Errors. Functions return 0 or a non-negative count, or a negative errno
 * value as TCP would set errno in the same situation (-ECONNREFUSED,
 * -ECONNRESET, -EPIPE, -ETIMEDOUT, -EAGAIN, -ENOTCONN, -EINPROGRESS, ...;
 * these equal the UW_E* codes of uwarp/error.h where both exist).
 * Send never raises SIGPIPE: callers that want it raise it themselves when
 * -EPIPE comes back without MSG_NOSIGNAL.
 */
#ifndef UWARP_SDP_H
#define UWARP_SDP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "uwarp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libuwarp.so, which is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

typedef struct uw_sdp_stack uw_sdp_stack;
/* The type is uw_sdp_sock: a typedef named uw_sdp_socket would collide with
 * the function uw_sdp_socket() (one namespace for both in C). */
typedef struct uw_sdp_socket uw_sdp_sock;

typedef void (*uw_sdp_log_fn)(void *ud, int level, const char *msg); /* levels: uwarp/verbs.h */

typedef struct uw_sdp_stack_attr {
    uw_sdp_log_fn log; /* NULL: silent */
    void *log_ud;
    int log_level;
    bool no_progress_thread; /* progress only inside calls (tests, single-threaded tools) */
    const char *pmd_control; /* uwarp-pmd control socket (NULL: $UWARP_PMD_CONTROL or
                                /run/uwarp/pmd.sock) */
    const struct sockaddr *pm_server; /* where to ask (NULL: the destination host, UDP 3935,
                                         or $UWARP_PM_SERVER) */
    socklen_t pm_server_len;
    int pm_timeout_ms;          /* port-mapper query budget (0: 1000) */
    int setup_timeout_ms;       /* MPA + Hello/HelloAck (0: 10000) */
    uint16_t pm_port;           /* with no pm_server (and no $UWARP_PM_SERVER): the UDP port of
                                   the destination host's port mapper (0: 3935) */
    void (*thread_start)(void); /* NULL, or called first in every thread the stack
                                   creates (the preload library marks its threads) */
    /* NULL, or called when a lazy socket's readiness gains a bit (see
     * uw_sdp_set_lazy), after the stack's lock is released, in whatever
     * thread made the change; it must not call into the stack. */
    void (*ready_rose)(void *ud);
    void *ready_ud;
} uw_sdp_stack_attr;

/* attr may be NULL. Errors: -ENOMEM, or the errno of a failed system call. */
int uw_sdp_stack_create(uw_sdp_stack **out, const uw_sdp_stack_attr *attr);
/* Aborts every socket still open and frees the stack. */
int uw_sdp_stack_destroy(uw_sdp_stack *st);
/* Waits up to timeout_ms for the graceful closes still under way (sockets
 * closed with data or a DisConn still to deliver) to finish, driving the
 * protocol meanwhile. Returns how many are still under way (0: all done),
 * or -EINVAL. A program about to exit calls it so that what it wrote
 * arrives, as the kernel delivers a TCP socket's data after exit. Any
 * thread; not concurrent with uw_sdp_stack_destroy(). */
int uw_sdp_stack_flush(uw_sdp_stack *st, int timeout_ms);
/* fork() support, from pthread_atfork handlers: PREPARE takes the stack's
 * lock, PARENT releases it; CHILD closes, in the child, every descriptor the
 * stack holds (connections, listening sockets, mirrors, its own), so the
 * child keeps none of the parent's connections or ports open. The stack
 * cannot be used in the child afterwards (its memory is left as it is). */
enum { UW_SDP_FORK_PREPARE = 0, UW_SDP_FORK_PARENT = 1, UW_SDP_FORK_CHILD = 2 };
void uw_sdp_stack_atfork(uw_sdp_stack *st, int phase);

/* Driving the stack from the application's own waits. An event loop asleep
 * in poll(), select() or epoll_wait() on mirrors (uw_sdp_fd) leaves the
 * protocol to the progress thread, and every message then costs a thread
 * hand-off. A library that intercepts those waits (the preload library)
 * calls uw_sdp_stack_wait_begin() before sleeping: 0 and *fd, a descriptor
 * to add to the wait (POLLIN), and *timeout_ms, the longest the wait may
 * last (-1: no limit of the stack's), mean this thread drives until the
 * matching uw_sdp_stack_wait_end() and the progress thread stands aside;
 * -EBUSY (another thread drives) or -ENOENT (no SDP socket) mean wait as
 * usual, the mirrors show everything. wait_end(fired) after the wait,
 * always, in the same thread: fired says whether *fd was readable; the
 * protocol then runs, and the mirrors show what it brought. A thread that
 * drives once tells the stack that the application's waits drive it: a
 * nonblocking call's EAGAIN then no longer calls the progress thread back
 * at once (it takes over within 5 ms of the last drive). */
int uw_sdp_stack_wait_begin(uw_sdp_stack *st, int *fd, int *timeout_ms);
void uw_sdp_stack_wait_end(uw_sdp_stack *st, bool fired);

/* Readiness without the mirror, for a library that answers epoll for SDP
 * sockets itself (the preload library). uw_sdp_set_lazy(s, true) stops
 * keeping the mirror up to date (a readiness change then costs no system
 * call) and publishes the bits instead; false brings the mirror up to date
 * at once and keeps it so. Only a connected socket can be lazy (-EINVAL
 * otherwise); one that a blocking call had to wait on stops being lazy for
 * good (its waiters sleep on the mirror), and true then fails with
 * -EBUSY. uw_sdp_ready() returns the bits the mirror would show (poll.h
 * values, the mirror's rules) and in *gen a counter that grows whenever a
 * bit rises or data arrives while the socket is readable: the edges of
 * edge-triggered waits, one per arrival as TCP gives them. Lock-free, it
 * reads what the stack published when it last released its lock. The
 * ready_rose callback runs on the same occasions for a lazy socket. */
int uw_sdp_set_lazy(uw_sdp_sock *s, bool lazy);
unsigned uw_sdp_ready(const uw_sdp_sock *s, unsigned *gen);
/* Set in uw_sdp_ready()'s result when the socket is not lazy. */
#define UW_SDP_READY_EXACT 0x80000000u

/* Flags for uw_sdp_socket() and uw_sdp_accept(). */
#define UW_SDP_NONBLOCK 0x1
#define UW_SDP_CLOEXEC 0x2

/* domain: AF_INET or AF_INET6. Errors: -EAFNOSUPPORT, -ENOMEM, -EMFILE. */
int uw_sdp_socket(uw_sdp_stack *st, int domain, int flags, uw_sdp_sock **out);
int uw_sdp_fd(const uw_sdp_sock *s);

int uw_sdp_bind(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len);
/* With UW_SDP_PM set the port bound is the TCP service port: the socket also
 * accepts plain TCP there, listens for SDP on an ephemeral port and registers
 * the mapping with uwarp-pmd (the registration fails the call with -EPERM
 * or -EADDRINUSE as the daemon answers; no daemon: -ENOENT... unless
 * UW_SDP_PM_OPTIONAL). Without it the port is an SDP port (Accepting Peer). */
int uw_sdp_listen(uw_sdp_sock *s, int backlog);
/* flags: UW_SDP_NONBLOCK, UW_SDP_CLOEXEC for the new socket. addr may be NULL.
 * The backlog (1..4096) counts connections in setup and those waiting here;
 * beyond it a connection is refused (the other end gets -ECONNREFUSED). */
int uw_sdp_accept(uw_sdp_sock *s, uw_sdp_sock **out, struct sockaddr *addr, socklen_t *len,
                  int flags);
/* Blocking: returns when the SDP connection is open (Hello/HelloAck done) or
 * failed (SO_SNDTIMEO bounds the wait: -EINPROGRESS, as TCP; the stack's
 * setup_timeout_ms bounds the setup: -ETIMEDOUT). Nonblocking: -EINPROGRESS,
 * then writability and SO_ERROR tell the outcome (-EALREADY while it runs;
 * the first connect() after it completed says 0, later ones -EISCONN). A
 * failed socket cannot connect again (-ECONNABORTED): make a new one. bind()
 * before connect() is accepted only for the wildcard address and port 0
 * (else -EOPNOTSUPP): the LLP's source address is the kernel's choice.
 * With UW_SDP_PM the destination port is a TCP service port and the
 * port mapper is asked first (this part blocks for at most the stack's
 * pm_timeout_ms even on a nonblocking socket); a deny, timeout or ICMP
 * unreachable makes the socket a plain TCP socket to the port as named. */
int uw_sdp_connect(uw_sdp_sock *s, const struct sockaddr *addr, socklen_t len);

/* flags: MSG_OOB, MSG_PEEK (recv), MSG_WAITALL (recv), MSG_DONTWAIT,
 * MSG_NOSIGNAL, MSG_MORE (send). Others: -EOPNOTSUPP. */
ssize_t uw_sdp_send(uw_sdp_sock *s, const void *buf, size_t len, int flags);
ssize_t uw_sdp_recv(uw_sdp_sock *s, void *buf, size_t len, int flags);
ssize_t uw_sdp_sendmsg(uw_sdp_sock *s, const struct msghdr *msg, int flags);
ssize_t uw_sdp_recvmsg(uw_sdp_sock *s, struct msghdr *msg, int flags);
int uw_sdp_shutdown(uw_sdp_sock *s, int how);
/* Hands over the kernel descriptor of a socket whose transport is plain TCP
 * (a connect that fell back, or a connection accepted on a UW_SDP_PM
 * listener's service port) and frees s without closing it: the caller owns
 * the descriptor, which behaves exactly as any TCP socket. Returns it, or
 * -EINVAL (NULL, or s is an SDP socket). Not concurrent with other calls on
 * s. */
int uw_sdp_detach(uw_sdp_sock *s);
/* Closes and frees s. Graceful by default (queued data and a DisConn go out
 * in the background); SO_LINGER with l_linger 0 aborts; with a timeout,
 * close waits up to it for the data to be sent. Unread received data makes
 * the close abortive, as on TCP. */
int uw_sdp_close(uw_sdp_sock *s);

/* SOL_SOCKET: SO_ERROR, SO_TYPE, SO_DOMAIN, SO_PROTOCOL, SO_ACCEPTCONN,
 * SO_RCVBUF, SO_SNDBUF, SO_LINGER, SO_KEEPALIVE, SO_OOBINLINE, SO_RCVLOWAT,
 * SO_RCVTIMEO, SO_SNDTIMEO, SO_REUSEADDR, SO_REUSEPORT.
 * IPPROTO_TCP: TCP_NODELAY, TCP_CORK, TCP_KEEPIDLE, TCP_KEEPINTVL,
 * TCP_KEEPCNT, TCP_CONGESTION (the LLP's algorithm; checked when set,
 * inherited by accepted sockets); getsockopt of other IPPROTO_TCP options (TCP_INFO, TCP_MAXSEG,
 * ...) reads the LLP's TCP socket (TCP_INFO without one: a record with only tcpi_state set).
 * SOL_UWARP: the options below. Others: -ENOPROTOOPT. */
int uw_sdp_setsockopt(uw_sdp_sock *s, int level, int name, const void *val, socklen_t len);
int uw_sdp_getsockopt(uw_sdp_sock *s, int level, int name, void *val, socklen_t *len);
int uw_sdp_getsockname(uw_sdp_sock *s, struct sockaddr *addr, socklen_t *len);
int uw_sdp_getpeername(uw_sdp_sock *s, struct sockaddr *addr, socklen_t *len);
/* FIONREAD, SIOCATMARK (int *arg out), FIONBIO (int *arg in). */
int uw_sdp_ioctl(uw_sdp_sock *s, unsigned long req, int *arg);

#define SOL_UWARP 0x5557
enum {
    UW_SDP_PM = 1,              /* int: connect/listen through the port mapper */
    UW_SDP_PM_OPTIONAL = 2,     /* int: listen: no daemon is not an error */
    UW_SDP_RCVBUF_SIZE = 3,     /* int: receive Private Buffer size (before connect/listen) */
    UW_SDP_BUFS = 4,            /* int: receive Private Buffers (before connect/listen) */
    UW_SDP_PEER_RCVBUF = 5,     /* int, set: send a ChRcvBuf for this size (10.6); named so
                                   as not to collide with the ChRcvBuf MID of src/sdp/codec.h */
    UW_SDP_INFO = 6,            /* struct uw_sdp_info, get */
    UW_SDP_CRC = 7,             /* int: 0 CRC off, 1 on (default), before connect/listen */
    UW_SDP_TCP_FD = 8,          /* int, set before connect/listen: a kernel TCP socket of the
                                   socket's domain (configured, maybe bound) that s adopts and
                                   closes: a UW_SDP_PM listen() listens for TCP on it (bound
                                   or not: its address is the service address, bind() must
                                   not have been called on s); a UW_SDP_PM connect() that falls
                                   back to TCP connects it, dup3()ed under uw_sdp_fd(),
                                   instead of a new socket. Closed once SDP was chosen. */
    UW_SDP_ZCOPY_THRESHOLD = 9, /* int >= 0: a blocking send() of at least this many octets
                                   (without SO_SNDTIMEO, MSG_MORE or MSG_OOB) lends its
                                   buffer to the peer to RDMA-Read (Read Zcopy, 9.2), and a
                                   blocking recv() Reads advertised data into its buffer; 0:
                                   never. Default $UWARP_SDP_ZCOPY_MIN, else 0 (docs/sdp.md,
                                   "Zero copy", says why). With our receive half in
                                   Pipelined Mode, a blocking recv() of more than a receive
                                   Private Buffer and at least this many octets (without
                                   MSG_WAITALL) is advertised with SinkAvail, and a send()
                                   of at least this many RDMA-Writes into an advertised
                                   buffer (Write Zcopy, 9.3). */
    UW_SDP_MODE = 10,           /* int 0 Buffered, 1 Combined, 2 Pipelined: set asks the
                                   peer to move our send half to this flow-control mode
                                   (we master Combined and Pipelined, section 12); get
                                   says the mode now. Unless set, a zero-copy threshold
                                   lets a peer's REQ_PIPE move it to Pipelined. */
};

typedef struct uw_sdp_info {
    int transport;             /* 1 sdp, 2 tcp (fallback) */
    const char *transport_why; /* static: "direct", "port mapper accept", "pm deny", ... */
    int accepting;             /* 1 Accepting Peer, 0 Connecting Peer */
    uint8_t majv, minv;
    uint16_t local_max_adverts, remote_max_adverts;
    uint32_t local_rcv_size, remote_rcv_size;
    uint16_t ird, ord;
    uint16_t bufs; /* our receive Private Buffers at setup */
    uint64_t sent, received, data_msgs_sent, data_msgs_received, credit_updates_sent, sendsm_sent,
        oob_sent, oob_received, chrcvbuf_sent, chrcvbufack_received;
    uint32_t send_credit, peer_credit;
    int graceful;                     /* 1 when closed by DisConns both ways */
    const char *why;                  /* the rule a protocol error broke, or NULL */
    struct sockaddr_storage llp_peer; /* SDP: the LLP's peer (with the port mapper the
                                         mapped SDP port); llp_peer_len 0 if none */
    socklen_t llp_peer_len;
    /* Zero copy (9.2-9.5) and flow-control modes (11, 12). */
    uint64_t srcavail_sent, srcavail_received, sinkavail_sent, sinkavail_received;
    uint64_t rdmardcompl_sent, rdmardcompl_received, rdmawrcompl_sent, rdmawrcompl_received;
    uint64_t sendsm_received, cancels, mode_changes;
    uint64_t rdma_read_bytes;  /* octets we took from the peer's buffers by RDMA Read */
    uint64_t rdma_write_bytes; /* octets we placed in the peer's buffers by RDMA Write */
    uint64_t bcopy_bytes;      /* octets we sent in SDP messages (copied) */
    uint64_t zcopy_bytes;      /* octets of ours the peer took from our buffers */
    int tx_mode, rx_mode;      /* 0 Buffered, 1 Combined, 2 Pipelined */
    uint32_t zcopy_threshold;  /* UW_SDP_ZCOPY_THRESHOLD now */
} uw_sdp_info;

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
