/* Internal object layouts shared by the verbs layer (objects, CQs, QP
 * queues) and the I/O engine (io/engine.c, io/cm.c: sockets, epoll,
 * timers). The QP's protocol state is the RDMAP core's (rdmap/rdmap.h),
 * embedded here. */
#ifndef UW_VERBS_INTERNAL_H
#define UW_VERBS_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "rdmap/rdmap.h"
#include "uwarp/verbs.h"

#define UW__CC_MAX 16u      /* TCP_CA_NAME_MAX */
#define UW__MAX_PENDING 64u /* startup exchanges per listener before accepting pauses */
/* RFC 5044 4.5: the MULPDU follows the EMSS. Linux bounds a new connection's
 * MSS by half the peer's first window (32 KiB on loopback against 64 KiB
 * later), so the transmitter reads TCP_MAXSEG again after this many octets,
 * then after twice as many each time, up to every UW__EMSS_LAST. */
#define UW__EMSS_FIRST (64u * 1024)
#define UW__EMSS_LAST (16u * 1024 * 1024)

struct uw__tp_ops; /* io/transport.h */

struct uw__evnode {
    struct uw__evnode *next;
    uw_cm_event ev;
};

struct uw_ctx {
    uw_allocator alloc;
    /* Where every deadline and wait reads the time (uw__ctx_now()): NULL is
     * CLOCK_MONOTONIC; tests inject a virtual clock (uw__ctx_create_with()),
     * and then no timerfd is armed: their driver advances the clock and the
     * next pass fires what expired. */
    uint64_t (*clock)(void *ud);
    void *clock_ud;
    uw_log_fn log;
    void *log_ud;
    int log_level;
    int epfd, evfd, tfd;
    bool ev_armed; /* evfd currently readable */
    /* A signal nobody can see yet: until the application takes the fd, only
     * our own waits sleep on it, so "do not sleep on the next pass" is a
     * flag instead of an eventfd write and read (objects.c, engine.c). */
    bool sig_soft;
    unsigned npd, ncq, nqp, nlisten;
    unsigned next_id;
    uint64_t produced;     /* completions + events queued, for progress counts */
    uint64_t produced_ev;  /* events queued */
    uint64_t timer_ns;     /* deadline the timerfd is armed for (0: disarmed) */
    unsigned direct_spins; /* non-blocking passes that skipped epoll (engine.c) */
    /* The lone connection, while it is driven with direct socket calls and
     * kept out of the epoll set (engine.c); never while fd_taken. */
    uw_qp *detached;
    bool fd_taken; /* the application holds uw_ctx_fd(): it may wait on it */
    struct uw__evnode *ev_head, *ev_tail;
    uw_qp *qps;                     /* every QP */
    uw_qp *ready_head, *ready_tail; /* kicked QPs waiting for a progress pass */
    bool deadline_dirty;            /* a QP's deadline changed since the timerfd was armed */
    /* Sockets of destroyed QPs still closing in order (io/linger.c). */
    struct uw__orphan *orphans;
    bool orphan_kick;   /* an orphan on a non-socket transport has work */
    struct uw__mrt mrt; /* the STag table */
};

struct uw_pd {
    uw_ctx *ctx;
    unsigned nmr, nqp;
    unsigned id;
};

/* struct uw_mr is plain data: util/mr_table.h. */

struct uw_cq {
    uw_ctx *ctx;
    struct uw__cqr ring;
    unsigned nqp;
};

/* The connection's phase (docs/design.md has the diagram). Every change
 * goes through uw__cm_to() (io/cm.c), which does what entering a state
 * implies. The order matters: startup states sort below WAIT_ACCEPT and
 * the established ones sit together. */
enum uw__cm_state {
    UW__CM_IDLE = 0,
    UW__CM_CONNECTING,   /* TCP connect in progress */
    UW__CM_WAIT_REPLY,   /* initiator: Request sent */
    UW__CM_WAIT_REQUEST, /* responder: reading the Request */
    UW__CM_WAIT_ACCEPT,  /* responder: CONNECT_REQUEST raised */
    UW__CM_RTS,          /* both directions open */
    UW__CM_PEER_CLOSED,  /* the peer's FIN is in; we may still send */
    UW__CM_CLOSING,      /* our FIN is out; waiting for the peer's */
    UW__CM_LINGER,       /* writing a final frame (a reject Reply) before our FIN */
    UW__CM_DRAIN,        /* final frame and FIN out: reading until the peer's FIN */
    UW__CM_CLOSED,
};

static inline bool uw__cm_established(int cm)
{
    return cm >= UW__CM_RTS && cm <= UW__CM_CLOSING;
}

struct uw_qp {
    int tag; /* UW__EP_QP: first, as the epoll data names it */
    uw_ctx *ctx;
    uw_pd *pd;
    uw_cq *scq, *rcq;
    uw_qp *next; /* ctx->qps list */
    unsigned id;
    void *user;
    int state; /* enum uw_qp_state */
    bool sq_sig_all;
    int fd;
    /* A transport other than the socket fd (io/transport.h): NULL for a
     * socket, the case the fast paths test first. */
    const struct uw__tp_ops *tp;
    void *tp_ep;
    unsigned epmask; /* events registered with epoll */
    bool ep_added;
    bool kick;   /* work to do without socket readiness: set with uw__kick() */
    bool queued; /* on ctx->ready */
    uw_qp *rnext;
    unsigned last_events; /* epoll events not yet serviced */
    int rcvtimeo_ms;      /* SO_RCVTIMEO last set (0: none) */

    /* Connection management (io/cm.c). */
    int cm;
    uw_listener *listener;
    uw_conn_param param;
    uint8_t param_pd[UW_MPA_MAX_PD];
    char param_cc[UW__CC_MAX];
    uw_mpa_policy pol;
    uw_mpa_frame req, rep;
    uw_mpa_frame_parser parser;
    uint8_t hs_out[UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD];
    uint32_t hs_len, hs_off;
    uint64_t deadline_ns; /* startup or linger timeout; 0 = none */
    /* recv() returned 0. A fact about the socket, not a phase: the octets
     * staged before the FIN may still wait for room in a full CQ, or our
     * Terminate for the wire, and PEER_CLOSED comes only after them. */
    bool eof_seen;
    /* uw_disconnect() was called: our FIN follows the work already queued.
     * A request, not a phase: the phase changes (CLOSING, or CLOSED after
     * PEER_CLOSED) when the FIN goes, and it can wait in RTS or
     * PEER_CLOSED alike. */
    bool disconnect_req;
    int close_err;
    /* The initiator Terminates a Reply it cannot use. It enters RTS only to
     * carry that Terminate, so this says how the end is reported
     * (CONNECT_ERROR, not TERMINATED), not where the connection is. */
    bool setup_failed;
    bool release_fin; /* destroy closes with FIN, not RST: the ULP's data is all sent */
    struct sockaddr_storage peer;
    uint32_t emss_left; /* octets to send before the EMSS is read again */
    uint32_t emss_every;

    /* The protocol state (rdmap/rdmap.h): embedded, not pointed to, so the
     * per-FPDU paths reach it at a fixed offset. */
    struct uw__rdmap rd;
};

struct uw_listener {
    int tag; /* UW__EP_LISTENER */
    uw_ctx *ctx;
    int fd;
    uw_qp_attr qp_attr;
    uw_conn_param param;
    uint8_t param_pd[UW_MPA_MAX_PD];
    char param_cc[UW__CC_MAX];
    unsigned npending; /* QPs in the startup exchange, not yet shown to the application */
    bool accepting;    /* EPOLLIN armed */
};

/* Objects of the engine's epoll set start with one of these tags; the
 * context's own fds are marked by these small data.u64 values instead. */
enum { UW__EP_QP = 1, UW__EP_LISTENER = 2, UW__EP_ORPHAN = 3 };

/* The socket of a destroyed QP that still owes the peer an orderly end
 * (a Terminate, a reject Reply, a graceful close): it writes what is left,
 * sends FIN and reads (discarding) until the peer's FIN or its deadline,
 * then closes. Closing with unread data would make the kernel answer with
 * a reset, and a reset destroys whatever of ours is still in flight. */
struct uw__orphan {
    int tag; /* UW__EP_ORPHAN: first, as the epoll data names it */
    uw_ctx *ctx;
    struct uw__orphan *next;
    int fd;
    const struct uw__tp_ops *tp; /* as the QP's: NULL for a socket */
    void *tp_ep;
    bool kick;    /* tp: work for the next pass (no epoll for it) */
    uint8_t *out; /* octets still owed before our FIN (ctx allocator) */
    size_t out_len, out_off;
    bool fin_sent;
    unsigned epmask;
    uint64_t deadline_ns;
};
enum { UW__EP_EVFD = 1, UW__EP_TIMERFD = 2 };

/* Marks qp as having work and queues it for the next progress pass, so that
 * a pass touches only QPs with something to do, however many exist. */
static inline void uw__kick(uw_qp *qp)
{
    qp->kick = true;
    if (qp->queued)
        return;
    qp->queued = true;
    qp->rnext = NULL;
    if (qp->ctx->ready_tail)
        qp->ctx->ready_tail->rnext = qp;
    else
        qp->ctx->ready_head = qp;
    qp->ctx->ready_tail = qp;
}

static inline void uw__set_deadline(uw_qp *qp, uint64_t ns)
{
    qp->deadline_ns = ns;
    qp->ctx->deadline_dirty = true;
}

/* verbs/objects.c */
void uw__log(uw_ctx *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Takes what the CQ holds without an engine pass (uw_cq_poll makes one). */
int uw__cq_take(uw_cq *cq, uw_wc *wc, int n);
int uw__event_push(uw_ctx *ctx, const uw_cm_event *ev);

/* io/ctx_fds.c: the context's descriptors and the clock. */
int uw__ctx_fds_open(uw_ctx *ctx); /* 0 or a negative errno; nothing left open */
void uw__ctx_fds_close(uw_ctx *ctx);
void uw__ctx_signal(uw_ctx *ctx);
uint64_t uw__now_ns(void);

/* Test hooks for a context (uw__ctx_create_with()): what a deterministic
 * test replaces. The public uw_ctx_create() is this with none. */
struct uw__ctx_hooks {
    uint64_t (*clock)(void *ud); /* nanoseconds, never decreasing */
    void *clock_ud;
};
int uw__ctx_create_with(uw_ctx **out, const uw_ctx_attr *attr, const struct uw__ctx_hooks *h);

static inline uint64_t uw__ctx_now(const uw_ctx *c)
{
    return c->clock ? c->clock(c->clock_ud) : uw__now_ns();
}

/* verbs/qp_core.c: connection-independent QP setup used by the engine. */
int uw__qp_alloc(uw_ctx *ctx, const uw_qp_attr *attr, uw_qp **out);
/* UW_EINVAL unless attr could create a QP on ctx (uw_qp_create's checks). */
int uw__qp_attr_check(const uw_ctx *ctx, const uw_qp_attr *attr);
/* Enters RTS (uw__rd_start()); ERROR with close_err UW_ENOMEM if it cannot. */
void uw__qp_start(uw_qp *qp, const uw_mpa_params *mpa, bool initiator, uint32_t mulpdu,
                  uint32_t mulpdu_max, uint32_t tx_pos, uint32_t rx_pos);
/* Moves the QP to ERROR: flushes both queues (completions with
 * UW_WC_WR_FLUSH_ERR). */
void uw__qp_flush(uw_qp *qp, int err);

/* io/cm.c: acts on what the RDMAP core reported (rd.news) and clears it. */
void uw__qp_news(uw_qp *qp);
/* The one place qp->cm changes: logs "QP[n]: FROM -> TO (why)" and does
 * what entering `to` implies (deadline, event, flush, FIN, closing the
 * socket). err: the error a failed connection ends with (CLOSED; 0 for
 * an orderly end) or why a LINGER closes (close_err). */
void uw__cm_to(uw_qp *qp, int to, int err, const char *why);
/* Our startup frame (Request or Reply) goes out whole before anything
 * else we send: FPDUs, our FIN, an orphan's octets. Without sink, writes
 * what is left of it to the socket; with sink, copies it there for an
 * orphan to write. Either way what moved counts as sent. Returns the
 * octets still left (0: all out) or a negative errno. */
ssize_t uw__cm_hs_move(uw_qp *qp, uint8_t *sink);

/* Every call into the RDMAP core from above goes through one of these, so
 * that no news is left unread. Inline: one test of a word per call, none
 * per FPDU. */
static inline void uw__qp_after(uw_qp *qp)
{
    if (qp->rd.news)
        uw__qp_news(qp);
}

static inline int uw__qp_tx_iov(uw_qp *qp, struct iovec *iov, int cap)
{
    int n = uw__rd_tx_iov(&qp->rd, iov, cap);
    uw__qp_after(qp);
    return n;
}

static inline void uw__qp_tx_advance(uw_qp *qp, size_t n)
{
    uw__rd_tx_advance(&qp->rd, n);
    uw__qp_after(qp);
}

static inline bool uw__qp_tx_pending(uw_qp *qp)
{
    bool p = uw__rd_tx_pending(&qp->rd);
    uw__qp_after(qp);
    return p;
}

static inline void uw__qp_terminate(uw_qp *qp, int err, const uw__ddp_hdr *h,
                                    const uint8_t *rdmap_hdr)
{
    uw__rd_terminate(&qp->rd, err, h, rdmap_hdr);
    uw__qp_after(qp);
}

static inline ssize_t uw__qp_tx_take(uw_qp *qp, uint8_t **out)
{
    ssize_t n = uw__rd_tx_take(&qp->rd, out);
    uw__qp_after(qp);
    return n;
}

static inline int uw__qp_rx_iov(uw_qp *qp, struct iovec *iov, int cap)
{
    int n = uw__rd_rx_iov(&qp->rd, iov, cap);
    uw__qp_after(qp);
    return n;
}

static inline int uw__qp_rx_advance(uw_qp *qp, size_t n)
{
    int r = uw__rd_rx_advance(&qp->rd, n);
    uw__qp_after(qp);
    return r;
}

static inline int uw__qp_rx_feed(uw_qp *qp, const void *data, size_t len)
{
    int r = uw__rd_rx_feed(&qp->rd, data, len);
    uw__qp_after(qp);
    return r;
}

static inline int uw__qp_rx_eof(uw_qp *qp)
{
    return uw__rd_rx_eof(&qp->rd);
}

/* io/linger.c */
/* Closes qp's socket for uw_qp_destroy(): abortively (RST) for a live
 * connection, as the API promises, else by handing it to an orphan. */
void uw__qp_close_socket(uw_qp *qp);
void uw__orphan_service(struct uw__orphan *o);
/* Closes orphans whose deadline has passed; returns the earliest deadline
 * left (0: none). */
uint64_t uw__orphans_timers(uw_ctx *c, uint64_t now);
/* Context destroy: drives every orphan to its end, blocking at most until
 * the latest deadline. */
void uw__orphans_finish(uw_ctx *c);

/* io/engine.c, io/cm.c */
void uw__qp_update_io(uw_qp *qp);
/* Puts a detached socket back in the epoll set (engine.c). */
void uw__ctx_attach(uw_ctx *c);
void uw__listener_update(uw_listener *l);
/* A doorbell: transmit what was just posted, now, on the caller's thread. */
void uw__qp_doorbell(uw_qp *qp);

#endif
