/* Internal object layouts shared by the verbs layer (objects, MR table, CQ),
 * the QP protocol core (qp_tx.c, qp_rx.c: no sockets) and the I/O engine
 * (io/engine.c, io/cm.c: sockets, epoll, timers). */
#ifndef UW_VERBS_INTERNAL_H
#define UW_VERBS_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "mpa/fpdu_walk.h"
#include "rdmap/wire.h"
#include "util/cq_ring.h"
#include "util/mr_table.h"
#include "uwarp/verbs.h"

#define UW__MAX_IRD 128u
#define UW__TX_FRAMES 32u /* FPDUs built ahead of the socket */
#define UW__TX_FLAT 512u  /* largest FPDU copied flat (qp->txflat) */
#define UW__TX_IOV 1024u  /* IOV_MAX */
#define UW__RX_STAGE (16u * 1024u)
/* With markers payload is not read straight to its place (a read would
 * scatter some 260 pieces per 64 KiB): a large stage is read in one call,
 * its CRC taken in one pass and the payload copied out while cached. */
#define UW__RX_STAGE_MARKERS (128u * 1024u)
#define UW__CC_MAX 16u      /* TCP_CA_NAME_MAX */
#define UW__MAX_PENDING 64u /* startup exchanges per listener before accepting pauses */
/* Receive: FPDUs of at least UW__RX_BIG octets are read header first and
 * payload straight to its place; UW__RX_LOOKAHEAD covers a tagged header and
 * the trailer before it. Smaller ones are read several per call into the
 * stage and copied out: below about half the stage a copy in cache costs
 * less than the system call per FPDU a direct read needs. */
#define UW__RX_BIG 8192u
#define UW__RX_LOOKAHEAD 32u
/* A direct read ends with this much staging room: the trailer, a small FPDU
 * that often follows (the last piece of a message a little longer than a
 * multiple of MULPDU: a 64 KiB Write on loopback is 64,754 + 782 octets)
 * and the next header all come with the same system call; at most this much
 * of the next payload is then copied. */
#define UW__RX_TAIL 1024u
/* RFC 5044 4.5: the MULPDU follows the EMSS. Linux bounds a new connection's
 * MSS by half the peer's first window (32 KiB on loopback against 64 KiB
 * later), so the transmitter reads TCP_MAXSEG again after this many octets,
 * then after twice as many each time, up to every UW__EMSS_LAST. */
#define UW__EMSS_FIRST (64u * 1024)
#define UW__EMSS_LAST (16u * 1024 * 1024)
#define UW__RX_PLAN 272   /* iovecs of one direct read: a 64 KiB payload with markers */
#define UW__RX_MSLOTS 132 /* markers one direct read can carry */
/* iovecs one FPDU needs: header, scatter list, trailer; each marker can split
 * a run in two and adds itself. */
/* iovecs per frame: length, headers, scatter list, trailer (a frame with
 * markers is one copied slot). */
#define UW__TXF_IOV_PLAIN (UW_MAX_SGE + 8u)

struct uw__evnode {
    struct uw__evnode *next;
    uw_cm_event ev;
};

struct uw_ctx {
    uw_allocator alloc;
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

/* A posted send-queue request. */
enum { UW__WQE_QUEUED = 0, UW__WQE_SENDING = 1, UW__WQE_WAIT_RESP = 2, UW__WQE_DONE = 3 };

struct uw__swqe {
    uw_send_wr wr;
    uw_sge sge[UW_MAX_SGE];
    uint32_t len; /* payload octets */
    uint32_t off; /* octets already segmented */
    uint32_t msn; /* untagged: message number */
    int state;
    int status;
    int err;
    bool signaled;
};

struct uw__rwqe {
    uw_recv_wr wr;
    uw_sge sge[UW_MAX_SGE];
    uint32_t len;
};

/* An inbound RDMA Read being answered (the IRD queue). */
struct uw__irq_ent {
    uw__read_req rr;
    uint8_t *src; /* validated source memory */
    uint32_t off;
};

/* Octets a frame keeps in qp->txb: ULPDU_Length, headers, pad and CRC. */
#define UW__TXB_FRAME (2u + UW__DDP_UNTAGGED_HLEN + UW__TERM_MAX_LEN + 3u + 4u)
/* Frames are placed one after another and wrap early; with two frames of
 * slack a new one never reaches the oldest still queued (qp_tx.c). */
#define UW__TXB_CAP ((UW__TX_FRAMES + 2u) * UW__TXB_FRAME)

/* One FPDU built for transmission. */
struct uw__txf {
    /* In qp->txb: the length, then the headers (hdr), then pad and CRC.
     * The next frame's octets start where these end, so in the gather a
     * frame's trailer and the next frame's length and headers are one
     * iovec: 2 per FPDU plus one, where 4 per FPDU made the kernel
     * allocate an iovec array (more than 8) for every 64 KiB message. */
    uint8_t *b;
    uint8_t *hdr;
    struct iovec *iov; /* UW__TXF_IOV_PLAIN entries in qp->txiov */
    uint16_t iovcnt;
    bool slot; /* its octets are in a transmit slot (qp->txs) */
    uint32_t wire_len;
    int kind;     /* what finishing it completes: enum below */
    uint32_t ref; /* SQ index or IRQ index */
};
enum {
    UW__TXK_NONE = 0,
    UW__TXK_SQ_LAST = 1,
    UW__TXK_IRQ_LAST = 2,
    UW__TXK_TERM = 3,
    UW__TXK_READREQ = 4
};

enum uw__cm_state {
    UW__CM_IDLE = 0,
    UW__CM_CONNECTING,   /* TCP connect in progress */
    UW__CM_WAIT_REPLY,   /* initiator: Request sent */
    UW__CM_WAIT_REQUEST, /* responder: reading the Request */
    UW__CM_WAIT_ACCEPT,  /* responder: CONNECT_REQUEST raised */
    UW__CM_RTS,
    UW__CM_LINGER, /* writing out a final frame (reject, Terminate) before closing */
    UW__CM_CLOSED,
};

/* Receive state of the FPDU in progress (qp_rx.c). */
struct uw__rx {
    uint32_t pos; /* stream position of the next octet */
    bool in_fpdu;
    uw__walk w;
    uw__run run;
    uint32_t run_off;
    bool have_run, len_known;
    uint32_t n; /* ULPDU_Length */
    uint32_t crc;
    uint8_t hdr[2 + UW__DDP_UNTAGGED_HLEN];
    uint32_t hlen; /* DDP header length once known */
    uw__ddp_hdr h;
    bool hdr_done;
    int pending_err; /* a DDP/RDMAP fault, reported once the CRC is good */
    bool marker_bad;
    uint8_t mark[4], crcf[4];
    /* Where payload goes: kind and cursor. */
    int dest;              /* enum below */
    uint8_t *dptr;         /* DEST_MEM: next octet */
    uint8_t *dstart;       /* DEST_MEM: first octet placed by this FPDU (scrub on CRC error) */
    struct uw__rwqe *rwqe; /* DEST_RECV */
    uint32_t rmo;          /* DEST_RECV: message offset of the next octet */
    uint32_t rstart;       /* DEST_RECV: MO of the first octet placed by this FPDU */
    uint8_t small[UW__TERM_MAX_LEN + 64]; /* DEST_SMALL: Read Request, Terminate */
    uint32_t small_len;
    /* Staged octets not yet consumed. */
    uint8_t *stage;
    uint32_t st_head, st_tail;
    uint32_t stage_cap; /* UW__RX_STAGE, or UW__RX_STAGE_MARKERS with markers */
    bool big;           /* the last FPDU was large: read headers without payload */
    /* The last direct read's plan: plan_n destination/marker iovecs, then
     * (up to plan_total) the staging tail. */
    struct iovec plan[UW__RX_PLAN];
    int plan_n, plan_total;
    uint8_t mslot[UW__RX_MSLOTS][4];
};
enum { UW__D_DISCARD = 0, UW__D_MEM = 1, UW__D_RECV = 2, UW__D_SMALL = 3 };

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
    uint64_t deadline_ns; /* startup timeout; 0 = none */
    uw_mpa_params mpa;
    bool rtr_pending_rx;   /* responder in p2p: nothing is sent until the RTR arrives */
    bool rtr_pending_tx;   /* initiator in p2p: the RTR goes first */
    bool first_rx_pending; /* responder without RTR: silent until a first FPDU */
    bool eof_seen;         /* recv() returned 0 */
    bool peer_fin, fin_sent, disconnect_req, disc_reported;
    int close_err;
    bool setup_failed; /* the initiator Terminates a Reply it cannot use */
    bool term_reported, linger_silent, closed_reported;
    bool release_fin; /* destroy closes with FIN, not RST: the ULP's data is all sent */
    struct sockaddr_storage peer;

    /* Transmit (qp_tx.c). */
    unsigned flags_tx; /* UW_MPA_CRC | UW_MPA_MARKERS */
    uint32_t mulpdu;
    uint32_t mulpdu_max; /* with markers, what the transmit slots hold */
    uint32_t emss_left;  /* octets to send before the EMSS is read again */
    uint32_t emss_every;
    uint32_t tx_pos;    /* stream position of the next FPDU built */
    uint32_t msn_tx[3]; /* next MSN per queue */
    struct uw__swqe *sq;
    uint32_t sq_cap, sq_head, sq_count, sq_next; /* sq_next: next to segment (index offset) */
    uint32_t ord_out; /* Read Requests on the wire awaiting their Response */
    struct uw__txf *txf;
    struct iovec *txiov;
    uint8_t *txb;     /* UW__TXB_CAP: the frames' own octets */
    uint32_t txb_pos; /* where the next frame's octets go */
    uint32_t txf_iov; /* iovecs per frame */
    /* With markers, frames are copied whole into fixed slots (qp_tx.c):
     * txs_n slots of txs_size octets, used and freed in frame order. */
    uint8_t *txs;
    uint32_t txs_n, txs_size, txs_head, txs_used;
    /* A small FPDU built while no other frame is queued is copied whole
     * here: one send() of one buffer and one CRC pass, where its pieces
     * would cost a pass each and a gather. Free whenever txf_count is 0. */
    uint8_t txflat[UW__TX_FLAT];
    int tx_cur;                             /* message being segmented: 0 none, 1 SQ, 2 IRQ */
    uint32_t irq_tx;                        /* IRQ entries (from irq_head) fully built */
    uint32_t txf_head, txf_count, txf_off;  /* txf_off: octets of the head frame written */
    bool term_queued, term_sent, term_done; /* queued, built, written */
    bool rtr_read_out;                      /* our Read RTR awaits its zero-length Response */
    uw__term_msg term_out;

    /* Receive (qp_rx.c). */
    unsigned flags_rx;
    struct uw__rwqe *rq;
    uint32_t rq_cap, rq_head, rq_count;
    uint32_t msn_rx[3];  /* next expected MSN per queue */
    uint32_t rq_msg_off; /* octets of the current Send placed so far */
    struct uw__irq_ent irq[UW__MAX_IRD];
    uint32_t irq_head, irq_count;
    uint32_t read_resp_off; /* octets of the current Read Response received */
    struct uw__rx rx;
    bool dead; /* Terminate sent or received: process nothing more */
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
int uw__cq_push(uw_cq *cq, const uw_wc *wc);
bool uw__cq_full(const uw_cq *cq);
/* Takes what the CQ holds without an engine pass (uw_cq_poll makes one). */
int uw__cq_take(uw_cq *cq, uw_wc *wc, int n);
int uw__event_push(uw_ctx *ctx, const uw_cm_event *ev);
uw_mr *uw__mr_lookup(uw_ctx *ctx, uint32_t stag);

/* io/ctx_fds.c: the context's descriptors and the clock. */
int uw__ctx_fds_open(uw_ctx *ctx); /* 0 or a negative errno; nothing left open */
void uw__ctx_fds_close(uw_ctx *ctx);
void uw__ctx_signal(uw_ctx *ctx);
uint64_t uw__now_ns(void);

/* verbs/qp_core.c: connection-independent QP setup used by the engine. */
int uw__qp_alloc(uw_ctx *ctx, const uw_qp_attr *attr, uw_qp **out);
/* UW_EINVAL unless attr could create a QP on ctx (uw_qp_create's checks). */
int uw__qp_attr_check(const uw_ctx *ctx, const uw_qp_attr *attr);
/* Enters RTS with the negotiated parameters and the transmit MULPDU. With
 * markers, mulpdu_max (>= mulpdu) is the largest the MULPDU may grow to as
 * the EMSS does: it sizes the transmit slots. */
void uw__qp_start(uw_qp *qp, const uw_mpa_params *mpa, bool initiator, uint32_t mulpdu,
                  uint32_t mulpdu_max, uint32_t tx_pos, uint32_t rx_pos);
/* Moves the QP to ERROR: flushes both queues (completions with
 * UW_WC_WR_FLUSH_ERR). */
void uw__qp_flush(uw_qp *qp, int err);

/* rdmap/qp_tx.c */
/* Builds FPDUs from the queues and gathers up to cap iovecs of unsent octets.
 * Returns the count (0: nothing to send). */
int uw__qp_tx_iov(uw_qp *qp, struct iovec *iov, int cap);
/* n octets of what uw__qp_tx_iov() offered were written. */
void uw__qp_tx_advance(uw_qp *qp, size_t n);
bool uw__qp_tx_pending(uw_qp *qp);
/* Queues a Terminate for fault err (found in the segment with header h, or
 * NULL) ahead of everything not yet built; the QP is dead afterwards. */
void uw__qp_terminate(uw_qp *qp, int err, const uw__ddp_hdr *h, const uint8_t *rdmap_hdr);
/* Retires finished send-queue requests in order into the send CQ. */
void uw__qp_sq_retire(uw_qp *qp);

/* rdmap/qp_rx.c */
/* Where the next received octets should go; 0 = do not read now. */
int uw__qp_rx_iov(uw_qp *qp, struct iovec *iov, int cap);
/* n octets arrived into the iovecs last returned. Returns 0 or a fatal error
 * (a Terminate has been queued or received; the QP is in ERROR). */
int uw__qp_rx_advance(uw_qp *qp, size_t n);
/* Copy-based entry point with the same state machine, for tests and fuzzing:
 * consumes all of data (any split) unless an error stops it. */
int uw__qp_rx_feed(uw_qp *qp, const void *data, size_t len);
/* The stream ended (FIN): 0 at an FPDU boundary, else UW_EMPA_TRUNCATED. */
int uw__qp_rx_eof(uw_qp *qp);

/* For a QP destroyed while octets are still owed to the wire: copies every
 * unsent octet (frames built, then what is queued) into one buffer from the
 * context's allocator and marks it sent. Frames taken this way complete no
 * request. Returns the count (*out NULL when 0) or UW_ENOMEM. */
ssize_t uw__qp_tx_take(uw_qp *qp, uint8_t **out);

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
/* The responder's peer-to-peer RTR has arrived: the connection is up. */
void uw__cm_rtr_arrived(uw_qp *qp, uint8_t rtr_type);
void uw__cm_term_received(uw_qp *qp, const uw__term_msg *t);

#endif
