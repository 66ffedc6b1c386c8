/* uwarp verbs: RDMA over TCP (RFC 5040 RDMAP, RFC 5041 DDP, RFC 5044/6581 MPA)
 * with an API an rdma-core user recognises: contexts, protection domains,
 * memory regions with STags, completion queues, queue pairs, work requests,
 * and a connection manager with events.
 *
 * Progress model. uwarp has no threads of its own. All protocol work (socket
 * reads and writes, MPA negotiation, placement, timers) happens inside calls
 * on a context: uw_ctx_progress(), uw_cq_poll(), uw_cq_wait(),
 * uw_cm_get_event(), uw_cm_wait_event() and the post calls (a post sends at
 * once when the socket has room). A context owns one file descriptor
 * (uw_ctx_fd()): it becomes readable when the engine has work (socket data
 * or room, an expired timer, internal work). Completions and events already
 * queued do not make it readable, as with verbs completion channels: drain
 * the CQs (uw_cq_poll() until it returns fewer than asked) and the events
 * (uw_cm_get_event() until 0) before waiting on it. The uw_*_wait()
 * functions do all of this themselves. This keeps the latency path on the
 * caller's thread: no cross-thread wakeups.
 *
 * Thread-safety. A context and every object created from it (PDs, MRs, CQs,
 * QPs, listeners) must be used by one thread at a time; the caller serialises
 * if it shares them. Distinct contexts are independent and may be used from
 * different threads concurrently. uw_strerror() and the name functions are
 * pure.
 *
 * Lifetime. Objects are destroyed in reverse dependency order: QPs before
 * their CQs and PD, MRs before their PD, everything before the context.
 * A destroy function on an object still in use returns UW_EBUSY and destroys
 * nothing. Memory passed to uw_mr_reg() must stay valid until uw_mr_dereg().
 * Buffers named by a posted work request's scatter list must stay valid until
 * its completion is polled (or the QP is destroyed).
 *
 * Errors. Every function returns 0 (or a non-negative count) or a negative
 * UW_E* code from uwarp/error.h.
 */
#ifndef UWARP_VERBS_H
#define UWARP_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "uwarp/common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libuwarp.so, which is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

typedef struct uw_ctx uw_ctx;
typedef struct uw_pd uw_pd;
typedef struct uw_mr uw_mr;
typedef struct uw_cq uw_cq;
typedef struct uw_qp uw_qp;
typedef struct uw_listener uw_listener;

/* ------------------------------------------------------------------------ */
/* Context                                                                   */

/* Log levels for the optional log callback; the library is silent without
 * one. Messages carry an object prefix such as "QP[3]: ". */
enum uw_log_level { UW_LOG_ERROR = 0, UW_LOG_WARN = 1, UW_LOG_INFO = 2, UW_LOG_DEBUG = 3 };
typedef void (*uw_log_fn)(void *ud, int level, const char *msg);

typedef struct uw_ctx_attr {
    const uw_allocator *alloc; /* NULL: malloc/free. Used only for object setup. */
    uw_log_fn log;             /* NULL: silent */
    void *log_ud;
    int log_level; /* most verbose level passed to log */
} uw_ctx_attr;

/* Creates a context. attr may be NULL. Errors: UW_EINVAL (out NULL), UW_ENOMEM, or a negative
 * errno from epoll_create1/eventfd/timerfd_create/epoll_ctl (-EMFILE, ...). */
int uw_ctx_create(uw_ctx **out, const uw_ctx_attr *attr);
/* Errors: UW_EINVAL (ctx NULL), UW_EBUSY while any PD, CQ, QP or listener created from it
 * exists. Sockets still closing for destroyed QPs (uw_qp_destroy()) are finished first: this
 * blocks until what they owe the peer has been acknowledged, at most 2 s. */
int uw_ctx_destroy(uw_ctx *ctx);
/* The context's file descriptor (see "Progress model"). Owned by the
 * context: do not close it. Level-triggered: after it polls readable, call a
 * progress function before waiting again.
 * Taking it tells the engine the application may sleep on it, so every
 * socket then stays registered with it. Until then, a context with a single
 * connection drives that socket with direct calls and keeps it out of the
 * epoll set while busy-polling or blocking in uw_cq_wait(): the kernel then
 * skips an epoll wakeup callback on every segment it receives, which costs
 * about a microsecond per round trip on loopback. Errors: UW_EINVAL (ctx NULL). */
int uw_ctx_fd(uw_ctx *ctx);
/* Does all work that is possible now without blocking. Returns the number of
 * new completions plus new events (>= 0). Errors: UW_EINVAL (ctx NULL) only: socket and
 * protocol failures arrive as completions and events. */
int uw_ctx_progress(uw_ctx *ctx);
/* Waits up to timeout_ms (-1: forever, 0: no wait) for the context fd, then
 * progresses. Returns the number of new completions plus new events (> 0),
 * UW_ETIMEDOUT when timeout_ms passed with none (as uw_cq_wait() and
 * uw_cm_wait_event() report it), 0 when the wait ended early with none (a
 * socket moved data that completed nothing yet, or a signal interrupted it), or UW_EINVAL
 * (ctx NULL). */
int uw_ctx_wait(uw_ctx *ctx, int timeout_ms);

/* ------------------------------------------------------------------------ */
/* Protection domains and memory regions                                     */

/* Errors: UW_EINVAL (ctx or out NULL), UW_ENOMEM. */
int uw_pd_alloc(uw_ctx *ctx, uw_pd **out);
/* Errors: UW_EINVAL (pd NULL), UW_EBUSY while MRs, QPs or listeners (their qp_attr) use it. */
int uw_pd_dealloc(uw_pd *pd);

enum uw_access {
    UW_ACCESS_LOCAL_WRITE = 1u << 0,  /* receive buffers and Read sinks */
    UW_ACCESS_REMOTE_WRITE = 1u << 1, /* target of the peer's RDMA Write */
    UW_ACCESS_REMOTE_READ = 1u << 2,  /* source of the peer's RDMA Read */
    UW_ACCESS_REMOTE_INVALIDATE = 1u
                                  << 3, /* the peer may invalidate it with Send with Invalidate */
};

/* Registers [addr, addr+len) for access. The region's Tagged Offsets are
 * virtual addresses (TO = (uint64_t)addr + offset), as Linux siw and rdma-core
 * applications expect. Remote access requires LOCAL_WRITE with REMOTE_WRITE
 * (as in verbs). Errors: UW_EINVAL (pd or out NULL, addr NULL with len > 0, unknown access
 * bits, REMOTE_WRITE without LOCAL_WRITE, addr + len wraps), UW_ENOMEM, UW_ENOBUFS (STag space
 * full: 2^24 - 1 regions per context). */
int uw_mr_reg(uw_pd *pd, void *addr, size_t len, unsigned access, uw_mr **out);
/* Errors: UW_EINVAL (mr NULL). */
int uw_mr_dereg(uw_mr *mr);
/* The STag the peer uses (rkey) and the local key (lkey); identical in uwarp.
 * The low 8 bits are a key that changes on every registration that reuses an
 * index, so stale STags are rejected. 0 (never a valid STag) for a NULL mr. */
uint32_t uw_mr_stag(const uw_mr *mr);
/* Valid until invalidated (remotely, or by a UW_WR_LOCAL_INV work request). false for a NULL
 * mr. */
bool uw_mr_valid(const uw_mr *mr);
/* Makes an invalidated MR valid again with a new key (a fresh STag). Errors: UW_EINVAL (mr
 * NULL). */
int uw_mr_rereg(uw_mr *mr);

/* ------------------------------------------------------------------------ */
/* Completion queues                                                         */

enum uw_wc_opcode {
    UW_WC_SEND = 0,
    UW_WC_RDMA_WRITE = 1,
    UW_WC_RDMA_READ = 2,
    UW_WC_LOCAL_INV = 3,
    UW_WC_RECV = 128,
};

enum uw_wc_status {
    UW_WC_SUCCESS = 0,
    UW_WC_LOC_LEN_ERR = 1,     /* a received message was longer than the posted buffer */
    UW_WC_LOC_PROT_ERR = 2,    /* a scatter/gather entry names a bad or foreign lkey or range */
    UW_WC_WR_FLUSH_ERR = 5,    /* the QP left RTS before this request ran or finished */
    UW_WC_REM_ACCESS_ERR = 10, /* the peer refused: Terminate with a protection error */
    UW_WC_REM_OP_ERR = 11,     /* the peer reported another error in a Terminate */
    UW_WC_FATAL_ERR = 12,      /* local protocol or transport failure */
    UW_WC_TIMEOUT_ERR = 13,
};

#define UW_WC_WITH_INV 0x1u  /* RECV: the Send invalidated invalidated_stag */
#define UW_WC_SOLICITED 0x2u /* RECV: the Send carried the Solicited Event flag */

typedef struct uw_wc {
    uint64_t wr_id;
    int status;        /* enum uw_wc_status */
    int opcode;        /* enum uw_wc_opcode */
    uint32_t byte_len; /* RECV: octets received; RDMA_READ: octets read */
    uint32_t flags;    /* UW_WC_* */
    uint32_t invalidated_stag;
    uw_qp *qp;
    int err; /* status != SUCCESS: the UW_E* cause, for logs */
} uw_wc;

/* A CQ holds up to depth completions; when full, further completions of its
 * QPs wait inside the QP (the QP stops reading), so none is lost. Errors: UW_EINVAL (ctx or
 * out NULL, depth 0 or above 2^20), UW_ENOMEM. */
int uw_cq_create(uw_ctx *ctx, unsigned depth, uw_cq **out);
/* Errors: UW_EINVAL (cq NULL), UW_EBUSY while a QP or a listener (its qp_attr) uses it. */
int uw_cq_destroy(uw_cq *cq);
/* Progresses the context, then moves up to n completions into wc. Returns
 * their count (0..n). Errors: UW_EINVAL (cq NULL, n < 0, or wc NULL with n > 0). */
int uw_cq_poll(uw_cq *cq, uw_wc *wc, int n);
/* Like uw_cq_poll(), but waits up to timeout_ms (-1 forever) for at least one
 * completion. Returns the count, or UW_ETIMEDOUT. Errors: UW_EINVAL (cq or wc NULL, n <= 0). */
int uw_cq_wait(uw_cq *cq, uw_wc *wc, int n, int timeout_ms);
/* The fd to wait on: the context's fd (see uw_ctx_fd()). UW_EINVAL for a NULL cq. */
int uw_cq_fd(const uw_cq *cq);

/* ------------------------------------------------------------------------ */
/* Queue pairs and work requests                                             */

typedef struct uw_sge {
    uint64_t addr; /* virtual address inside the MR named by lkey */
    uint32_t length;
    uint32_t lkey;
} uw_sge;

enum uw_wr_opcode {
    UW_WR_SEND = 0,
    UW_WR_SEND_WITH_INV = 1,
    UW_WR_RDMA_WRITE = 2,
    UW_WR_RDMA_READ = 3,
    UW_WR_LOCAL_INV = 4,
};

#define UW_SEND_SIGNALED 0x1u  /* produce a completion (always on errors) */
#define UW_SEND_SOLICITED 0x2u /* Send with Solicited Event */
#define UW_SEND_FENCE 0x4u     /* wait for earlier RDMA Reads to complete first */

#define UW_MAX_SGE 8

typedef struct uw_send_wr {
    uint64_t wr_id;
    int opcode;     /* enum uw_wr_opcode */
    unsigned flags; /* UW_SEND_* */
    const uw_sge *sg_list;
    int num_sge;              /* 0..UW_MAX_SGE */
    uint64_t remote_addr;     /* WRITE/READ: the peer's Tagged Offset */
    uint32_t rkey;            /* WRITE/READ: the peer's STag */
    uint32_t invalidate_stag; /* SEND_WITH_INV: the peer's STag to invalidate; LOCAL_INV: ours */
} uw_send_wr;

typedef struct uw_recv_wr {
    uint64_t wr_id;
    const uw_sge *sg_list;
    int num_sge;
} uw_recv_wr;

typedef struct uw_qp_attr {
    uw_pd *pd;
    uw_cq *send_cq;
    uw_cq *recv_cq;
    unsigned max_send_wr; /* send queue depth (default 128 when 0) */
    unsigned max_recv_wr; /* receive queue depth (default 128 when 0) */
    bool sq_sig_all;      /* every send request is signaled */
} uw_qp_attr;

enum uw_qp_state {
    UW_QPS_IDLE = 0, /* created, not connected */
    UW_QPS_CONNECTING = 1,
    UW_QPS_RTS = 2, /* connected: work requests run */
    UW_QPS_CLOSING = 3,
    UW_QPS_ERROR = 4, /* Terminate sent or received, or transport failure: only destroy remains */
    UW_QPS_CLOSED = 5,
};

/* Errors: UW_EINVAL (ctx, attr, out, pd or a CQ NULL; pd or a CQ from another context; a queue
 * depth above 65536), UW_ENOMEM. */
int uw_qp_create(uw_ctx *ctx, const uw_qp_attr *attr, uw_qp **out);
/* Frees the QP. A live connection is aborted (RST) and outstanding requests
 * are dropped without completions. A QP that is CLOSED (both directions shut
 * gracefully) is closed without RST. A connection that still owes the peer
 * an orderly end is not reset: after uw_reject() (the rest of the Reply),
 * after a Terminate (sent or still queued) and after uw_disconnect() (what
 * was queued), the context keeps the socket after this returns, writes
 * those octets, shuts down our direction and discards what arrives until
 * the peer's FIN or 2 s, then closes it. The application's buffers are
 * free at once: queued octets are copied. Errors: UW_EINVAL (qp NULL) only: a QP is never
 * busy. */
int uw_qp_destroy(uw_qp *qp);
/* The enum uw_qp_state, or UW_EINVAL for a NULL qp. */
int uw_qp_state(const uw_qp *qp);
/* Posts an array of n requests; the requests and their scatter lists are
 * copied, so the arrays may be reused at once (the buffers they name may
 * not). Responder rule (RFC 5044 7.1.2): without peer-to-peer mode, a
 * responder transmits nothing before the initiator's first FPDU has arrived,
 * so the initiator of a client-server protocol must send first (or both
 * sides use peer-to-peer mode, where the RTR does it).
 * Returns 0, or an error for the first request that could not be posted (*bad set to its
 * index if bad is not NULL; the requests before it are posted): UW_EPERM (QP in ERROR or
 * CLOSED, or uw_disconnect() called; a Read sink MR without LOCAL_WRITE), UW_ENOBUFS (send
 * queue full), UW_EINVAL (num_sge outside 0..UW_MAX_SGE, sg_list NULL, unknown opcode, a Read
 * with more than one SGE, an SGE outside a valid MR of the QP's PD), UW_EMSGSIZE (SGE lengths
 * sum above 2^32 - 1). qp NULL, n < 0 or wr NULL with n > 0: UW_EINVAL, *bad untouched.
 * Requests can be posted before the connection is established; they run once it is. */
int uw_post_send(uw_qp *qp, const uw_send_wr *wr, int n, int *bad);
/* As uw_post_send(), also before the connection and after uw_disconnect(). Errors: UW_EPERM
 * (QP in ERROR or CLOSED; an MR without LOCAL_WRITE), UW_ENOBUFS (receive queue full),
 * UW_EINVAL (as for uw_post_send()), UW_EMSGSIZE. */
int uw_post_recv(uw_qp *qp, const uw_recv_wr *wr, int n, int *bad);
/* Optional: arbitrary pointer for the application. A NULL qp is ignored (set) or gives NULL
 * (get). */
void uw_qp_set_context(uw_qp *qp, void *p);
void *uw_qp_get_context(const uw_qp *qp);

/* ------------------------------------------------------------------------ */
/* Terminate information (RFC 5040 7.1 layer / error type / error code)      */

enum uw_term_layer { UW_TERM_RDMAP = 0, UW_TERM_DDP = 1, UW_TERM_LLP = 2 };

typedef struct uw_term {
    uint8_t layer; /* enum uw_term_layer */
    uint8_t etype;
    uint8_t ecode;
} uw_term;

/* "RDMAP remote protection: invalid STag" and similar; static string. "undefined Terminate
 * code" for a layer/type/code that RFC 5040 does not define. */
const char *uw_term_describe(uw_term t);

/* ------------------------------------------------------------------------ */
/* Connection manager                                                        */

enum uw_crc_policy { UW_CRC_PREFER = 0, UW_CRC_AVOID = 1, UW_CRC_REQUIRE = 2 };

/* uw_conn_param.ird/.ord: zero means "the default", so this asks for 0. */
#define UW_CONN_ZERO 0xFFFFu

/* MPA parameters for connect/listen. Zeroed fields take the defaults. */
typedef struct uw_conn_param {
    const void *private_data; /* ULP private data; the RFC 6581 word is added by uwarp */
    size_t private_data_len;  /* at most 512 - 4 (rev 2) or 512 (rev 1) */
    uint8_t rev;              /* highest MPA revision: 1 or 2 (0: 2) */
    int crc;                  /* enum uw_crc_policy */
    bool markers;             /* require markers on what we receive */
    uint16_t ird, ord; /* 0: 16 each; UW_CONN_ZERO asks for 0; UW_MPA_NO_NEGOTIATION allowed */
    bool p2p;          /* peer-to-peer model with an RTR (RFC 6581 7) */
    uint8_t rtr;       /* UW_MPA_RTR_* offered (initiator) or accepted (responder) */
    bool accept_rev0;  /* responder: accept RDMAC Rev 0 */
    int timeout_ms;    /* every startup wait; 0: 10000 initiator, 5000 responder */
    const char *tcp_congestion; /* TCP congestion control ("cubic", ...); NULL: system default */
    uint32_t max_fpdu;          /* largest ULPDU (DDP header + payload) we send; 0: the MULPDU
                                   of the TCP EMSS (RFC 5044 4.5). Lower values (at least 128)
                                   give one FPDU per segment of a smaller path MTU. */
} uw_conn_param;

enum uw_cm_event_type {
    UW_CM_CONNECT_REQUEST = 1, /* listener: a Request arrived; accept or reject ev.qp */
    UW_CM_ESTABLISHED = 2,     /* qp is in RTS */
    UW_CM_REJECTED = 3,        /* the peer's Reply had R set; private data holds its reason */
    UW_CM_CONNECT_ERROR = 4,   /* setup failed: err says why (timeout, protocol, refused);
                                  on a listener (qp NULL) an incoming Request that was invalid */
    UW_CM_DISCONNECTED = 5,    /* the peer closed its direction gracefully (FIN between FPDUs) */
    UW_CM_TERMINATED = 6,      /* a Terminate was received (term) or sent (err); QP in ERROR */
    UW_CM_CONN_ERROR = 7,      /* transport failure after setup (reset, timeout) */
};

typedef struct uw_cm_event {
    int type;
    uw_qp *qp;             /* the QP concerned (CONNECT_REQUEST: a new QP to accept/reject) */
    uw_listener *listener; /* CONNECT_REQUEST only */
    int err;               /* UW_E* cause for errors */
    bool term_received;    /* TERMINATED: the peer sent it (else we did) */
    uw_term term;          /* TERMINATED: the Terminate's layer/type/code */
    uw_mpa_params mpa;     /* negotiated (ESTABLISHED, CONNECT_REQUEST: proposed). On a
                              peer-to-peer responder's ESTABLISHED, rtr is the RTR type
                              that arrived. */
    uint16_t private_data_len;
    uint8_t private_data[UW_MPA_MAX_PD]; /* the peer's ULP private data (word stripped) */
    struct sockaddr_storage peer;
} uw_cm_event;

/* Connects qp (IDLE) to addr as MPA initiator. Completes with ESTABLISHED,
 * REJECTED or CONNECT_ERROR on the context's event queue (a refused or unreachable peer
 * usually shows there, not here). Errors: UW_EINVAL (qp or addr NULL, len above
 * sizeof(struct sockaddr_storage); in p: private_data_len above 512, private_data NULL with a
 * length, rev above 2, crc or rtr out of range, timeout_ms < 0, a tcp_congestion name of 16
 * characters or more, ird/ord above UW_MPA_NO_NEGOTIATION other than UW_CONN_ZERO, p2p with rev 1),
 * UW_EMPA_PD_LENGTH (private data above 508 octets with rev 2), UW_EALREADY (qp not IDLE), or
 * a negative errno from socket()/connect() or from setting tcp_congestion (-ENOENT: unknown,
 * -EPERM: not allowed). */
int uw_connect(uw_qp *qp, const struct sockaddr *addr, socklen_t len, const uw_conn_param *p);

/* Listens on addr (port 0: ephemeral; see uw_listener_addr()). Each incoming
 * connection whose Request is valid yields CONNECT_REQUEST with a new QP
 * created from qp_attr; the application then calls uw_accept() or
 * uw_reject(). An invalid Request, or a peer that times out before its
 * Request is complete, is answered per RFC 5044/6581 and closed by uwarp,
 * and reported as CONNECT_ERROR with qp NULL and listener set (for logs;
 * nothing is left to clean up). qp_attr's PD and CQs stay in use until uw_listener_destroy().
 * Errors: UW_EINVAL (ctx, addr, qp_attr or out NULL; qp_attr as uw_qp_create() refuses it; in p:
 * private_data_len above 512, private_data NULL with a length, rev above 2, crc or rtr out of
 * range, timeout_ms < 0, a tcp_congestion name of 16 characters or more), UW_ENOMEM, or a negative
 * errno from socket/setsockopt/bind/listen/epoll_ctl (UW_EADDRINUSE, -EACCES, ...). */
int uw_listen(uw_ctx *ctx, const struct sockaddr *addr, socklen_t len, const uw_qp_attr *qp_attr,
              const uw_conn_param *p, uw_listener **out);
/* Connections still in the startup exchange are closed; CONNECT_REQUEST QPs stay the
 * application's. Errors: UW_EINVAL (l NULL). */
int uw_listener_destroy(uw_listener *l);
/* The bound address. Errors: UW_EINVAL (an argument NULL), or a negative errno from
 * getsockname(). */
int uw_listener_addr(const uw_listener *l, struct sockaddr_storage *ss, socklen_t *len);
/* Accepts a CONNECT_REQUEST qp. With p NULL the listener's parameters
 * apply; otherwise p's private data, CRC policy and markers replace the
 * listener's for this connection (so a server can decide them from the
 * Request's private data), and the other fields come from the listener.
 * ESTABLISHED follows when the connection is ready (in peer-to-peer mode:
 * when the RTR has arrived). Errors: UW_EINVAL (qp NULL or not a CONNECT_REQUEST QP still
 * awaiting uw_accept()/uw_reject(); in p: private_data_len above 512, private_data NULL with a
 * length, crc out of range), UW_EMPA_PD_LENGTH (private data above 508 octets on an enhanced
 * connection). */
int uw_accept(uw_qp *qp, const uw_conn_param *p);
/* Rejects with private data; the QP goes to CLOSED and must be destroyed. Errors: UW_EINVAL
 * (qp NULL or not awaiting uw_accept()/uw_reject(), pd_len above 512, pd NULL with
 * pd_len > 0), UW_EMPA_PD_LENGTH (pd_len above 508 on an enhanced connection). */
int uw_reject(uw_qp *qp, const void *pd, size_t pd_len);

/* Graceful close of our direction: queued sends finish, then TCP FIN.
 * Receiving goes on; DISCONNECTED reports the peer's FIN (whenever it comes),
 * and the QP is CLOSED once both directions are. Posting sends fails with
 * UW_EPERM from the call on. Errors: UW_EINVAL (qp NULL), UW_ENOTCONN (not connected yet, or
 * closing after uw_reject() or a Terminate). 0 without effect once the connection has ended
 * (closed, failed or aborted). */
int uw_disconnect(uw_qp *qp);
/* Abortive close (RST); outstanding requests are flushed. Works in any state; the QP is then in
 * ERROR (or stays CLOSED). Errors: UW_EINVAL (qp NULL) only. */
int uw_abort(uw_qp *qp);

/* Takes the next event without blocking: 1 if *ev was filled, 0 if none. Ordering: every
 * completion a connection produced before its DISCONNECTED, TERMINATED or CONN_ERROR event is
 * in its CQ when the event is queued, so a consumer that polls the CQ empty before acting on
 * such an event sees the connection's last data first. Errors: UW_EINVAL (ctx or ev NULL). */
int uw_cm_get_event(uw_ctx *ctx, uw_cm_event *ev);
/* Waits up to timeout_ms (-1 forever) for an event: 1, or UW_ETIMEDOUT. Errors: UW_EINVAL (ctx
 * or ev NULL). */
int uw_cm_wait_event(uw_ctx *ctx, uw_cm_event *ev, int timeout_ms);
/* "ESTABLISHED" and so on; "UNKNOWN" for any other type. Static string. */
const char *uw_cm_event_name(int type);

/* The negotiated MPA parameters of a connected QP. Errors: UW_EINVAL (qp or out NULL),
 * UW_ENOTCONN (MPA exchange not complete, or the connection has ended). */
int uw_qp_mpa_params(const uw_qp *qp, uw_mpa_params *out);
/* The MULPDU used for transmission now (RFC 5044 4.5, from TCP_MAXSEG, or
 * uw_conn_param.max_fpdu when that is smaller). It follows the EMSS during
 * the connection; with markers it never grows past the MULPDU of the path
 * MTU's MSS, which sizes the transmit slots at the start. 0 for a NULL qp or before the MPA
 * exchange has completed. */
uint32_t uw_qp_mulpdu(const uw_qp *qp);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
