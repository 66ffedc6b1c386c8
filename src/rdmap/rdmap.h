/* The DDP/RDMAP protocol state of one QP (RFC 5040, RFC 5041): send,
 * receive and inbound-Read queues, MSNs, the FPDUs built and the one being
 * received, and the negotiated MPA parameters. The core (qp_tx.c, qp_rx.c,
 * rdmap.c) works on this object alone. It owns no descriptor and calls
 * nothing above it: what the engine must act on is left in `news` (and the
 * fields each bit names), which the engine reads and clears after every call
 * (the verbs layer wraps each call so). The engine's QP embeds it. */
#ifndef UW_RDMAP_RDMAP_H
#define UW_RDMAP_RDMAP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "mpa/fpdu_walk.h"
#include "rdmap/sgc.h"
#include "rdmap/wire.h"
#include "util/cq_ring.h"
#include "util/mr_table.h"
#include "uwarp/verbs.h"

#define UW__MAX_IRD 128u
/* FPDUs built ahead of the socket: a power of two (the ring is masked).
 * A connection starts with UW__TX_FRAMES and doubles up to
 * UW__TX_FRAMES_MAX while it streams FPDUs of at most UW__TX_GROW_MULPDU:
 * at an Ethernet MTU 32 frames are 45 KiB, a system call per 45 KiB where
 * TCP takes a whole message per call; with 64 KiB FPDUs 32 frames are
 * 2 MiB already. Idle and request/response connections keep the small
 * ring (memory per idle connection). */
#define UW__TX_FRAMES 32u
#define UW__TX_FRAMES_MAX 256u
#define UW__TX_GROW_MULPDU 16384u
#define UW__TX_FLAT 512u /* largest FPDU copied flat (txflat) */
#define UW__TX_IOV 1024u /* IOV_MAX */
#define UW__RX_STAGE (16u * 1024u)
/* The stage of a connection that keeps filling it with small FPDUs (an
 * Ethernet MTU's) grows to this, so that one read takes some ninety FPDUs
 * instead of eleven; UW__RX_GROW_READS full reads in a row show it. */
#define UW__RX_STAGE_MAX (128u * 1024u)
#define UW__RX_GROW_READS 4u
/* With markers payload is not read straight to its place (a read would
 * scatter some 260 pieces per 64 KiB): a large stage is read in one call,
 * its CRC taken in one pass and the payload copied out while cached. */
#define UW__RX_STAGE_MARKERS (128u * 1024u)
/* Receive: FPDUs of at least UW__RX_BIG octets are read header first and
 * payload straight to its place; UW__RX_LOOKAHEAD covers a tagged header and
 * the trailer before it. Smaller ones are read several per call into the
 * stage and copied out: below about half the stage a copy in cache costs
 * less than the system call per FPDU a direct read needs. At MTU 9000
 * (8,948-octet FPDUs) a direct read per FPDU held the receiver to 6 GB/s
 * at 0.16 ns/B where the stage moved 8.2-9.3 GB/s at 0.085 ns/B (Write
 * 1 MiB, cubic, AMD EPYC), so only loopback-sized FPDUs read direct. */
#define UW__RX_BIG 16384u
#define UW__RX_LOOKAHEAD 32u
/* A direct read ends with this much staging room: the trailer, a small FPDU
 * that often follows (the last piece of a message a little longer than a
 * multiple of MULPDU: a 64 KiB Write on loopback is 64,754 + 782 octets)
 * and the next header all come with the same system call; at most this much
 * of the next payload is then copied. */
#define UW__RX_TAIL 1024u
#define UW__RX_PLAN 272   /* iovecs of one direct read: a 64 KiB payload with markers */
#define UW__RX_MSLOTS 132 /* markers one direct read can carry */
/* iovecs per frame: length, headers, scatter list, trailer (a frame with
 * markers is one copied slot). */
#define UW__TXF_IOV_PLAIN (UW_MAX_SGE + 8u)

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

/* Octets a frame keeps in rd->txb: ULPDU_Length, headers, pad and CRC. */
#define UW__TXB_FRAME (2u + UW__DDP_UNTAGGED_HLEN + UW__TERM_MAX_LEN + 3u + 4u)
/* Frames are placed one after another and wrap early; with two frames of
 * slack a new one never reaches the oldest still queued (qp_tx.c). */
#define UW__TXB_BYTES(frames) (((frames) + 2u) * UW__TXB_FRAME)

/* One FPDU built for transmission. */
struct uw__txf {
    /* In rd->txb: the length, then the headers (hdr), then pad and CRC.
     * The next frame's octets start where these end, so in the gather a
     * frame's trailer and the next frame's length and headers are one
     * iovec: 2 per FPDU plus one, where 4 per FPDU made the kernel
     * allocate an iovec array (more than 8) for every 64 KiB message. */
    uint8_t *b;
    uint8_t *hdr;
    struct iovec *iov; /* UW__TXF_IOV_PLAIN entries in rd->txiov */
    uint16_t iovcnt;
    bool slot; /* its octets are in a transmit slot (rd->txs) */
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
    uw__sgc rc;            /* DEST_RECV: at the next octet; rc.pos is its message offset */
    uint32_t rstart;       /* DEST_RECV: MO of the first octet placed by this FPDU */
    uint8_t small[UW__TERM_MAX_LEN + 64]; /* DEST_SMALL: Read Request, Terminate */
    uint32_t small_len;
    /* Staged octets not yet consumed. */
    uint8_t *stage;
    uint32_t st_head, st_tail;
    uint32_t stage_cap;  /* UW__RX_STAGE, or UW__RX_STAGE_MARKERS with markers */
    uint32_t asked;      /* octets the last stage read asked for (0: a direct read) */
    uint32_t full_reads; /* stage reads in a row that came back full */
    bool big;            /* the last FPDU was large: read headers without payload */
    /* The last direct read's plan: plan_n destination/marker iovecs, then
     * (up to plan_total) the staging tail. */
    struct iovec plan[UW__RX_PLAN];
    int plan_n, plan_total;
    uint8_t mslot[UW__RX_MSLOTS][4];
};
enum { UW__D_DISCARD = 0, UW__D_MEM = 1, UW__D_RECV = 2, UW__D_SMALL = 3 };

/* News for the engine: bits of uw__rdmap.news. */
enum {
    UW__RD_KICK = 1u << 0,          /* work to do without socket readiness */
    UW__RD_WC = 1u << 1,            /* wc_new completions were pushed */
    UW__RD_RTR_ARRIVED = 1u << 2,   /* the peer's RTR: mpa.rtr names its type */
    UW__RD_TERM_QUEUED = 1u << 3,   /* we Terminate for term_err (term_out) */
    UW__RD_TERM_RECEIVED = 1u << 4, /* the peer's Terminate is in term_in */
};

struct uw__rdmap {
    unsigned news;   /* UW__RD_* */
    uint32_t wc_new; /* completions pushed since the engine last looked */
    /* What the core uses but does not own. qp and pd are opaque here: qp is
     * what completions name, pd what a region must belong to. */
    uw_qp *qp;
    uw_pd *pd;
    struct uw__cqr *scq, *rcq;
    struct uw__mrt *mrt;
    uw_allocator alloc;

    uw_mpa_params mpa;
    bool started;          /* uw__rd_start() succeeded */
    bool dead;             /* Terminate sent or received: process nothing more */
    bool rtr_pending_rx;   /* responder in p2p: nothing is sent until the RTR arrives */
    bool rtr_pending_tx;   /* initiator in p2p: the RTR goes first */
    bool first_rx_pending; /* responder without RTR: silent until a first FPDU */
    int term_err;          /* the fault our Terminate reports */
    uw__term_msg term_in;  /* the peer's Terminate */

    /* Transmit (qp_tx.c). */
    unsigned flags_tx; /* UW_MPA_CRC | UW_MPA_MARKERS */
    uint32_t mulpdu;
    uint32_t tx_origin;  /* where the kernel's current segment grid began (qp_tx.c) */
    bool tx_seg;         /* the last message built took more than one FPDU */
    uint32_t mulpdu_max; /* with markers, what the transmit slots hold */
    uint32_t tx_pos;     /* stream position of the next FPDU built */
    uint32_t msn_tx[3];  /* next MSN per queue */
    struct uw__swqe *sq;
    uint32_t sq_cap, sq_head, sq_count, sq_next; /* sq_next: next to segment (index offset) */
    uint32_t ord_out; /* Read Requests on the wire awaiting their Response */
    struct uw__txf *txf;
    struct iovec *txiov;
    uint32_t txf_cap; /* frames in the ring: a power of two */
    bool tx_grow;     /* the ring was full mid-stream: double it once empty */
    uint8_t *txb;     /* UW__TXB_BYTES(txf_cap): the frames' own octets */
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
};

/* rdmap.c */
/* Queues of sqd and rqd entries and the receive stage, from a; 0 or
 * UW_ENOMEM (nothing left allocated). The caller fills qp, pd, scq, rcq
 * and mrt. */
int uw__rd_init(struct uw__rdmap *rd, const uw_allocator *a, uint32_t sqd, uint32_t rqd);
void uw__rd_fini(struct uw__rdmap *rd);
/* Enters RTS with the negotiated parameters and the transmit MULPDU. With
 * markers, mulpdu_max (>= mulpdu) is the largest the MULPDU may grow to as
 * the EMSS does: it sizes the transmit slots. UW_ENOMEM leaves it dead. */
int uw__rd_start(struct uw__rdmap *rd, const uw_mpa_params *mpa, bool initiator, uint32_t mulpdu,
                 uint32_t mulpdu_max, uint32_t tx_pos, uint32_t rx_pos);
/* Dead from now on: both queues complete with UW_WC_WR_FLUSH_ERR (as far as
 * the CQs have room). */
void uw__rd_flush(struct uw__rdmap *rd, int err);
/* Retires finished send-queue requests in order into the send CQ. */
void uw__rd_sq_retire(struct uw__rdmap *rd);
/* Doubles the transmit frame ring (tx_grow asked for it) once no frame is
 * built, and the receive stage (full_reads said so) keeping what it holds.
 * Out of memory, each keeps the size it has. */
void uw__rd_tx_grow(struct uw__rdmap *rd);
void uw__rd_rx_grow(struct uw__rdmap *rd);

/* qp_tx.c */
/* Builds FPDUs from the queues and gathers up to cap iovecs of unsent octets.
 * Returns the count (0: nothing to send). */
int uw__rd_tx_iov(struct uw__rdmap *rd, struct iovec *iov, int cap);
/* n octets of what uw__rd_tx_iov() offered were written. */
void uw__rd_tx_advance(struct uw__rdmap *rd, size_t n);
bool uw__rd_tx_pending(struct uw__rdmap *rd);
/* FPDU alignment (qp_tx.c): whether nothing is built and the next FPDU
 * would start off the segment grid, and, when the I/O layer has found the
 * kernel's send queue empty of unsent octets, that its next write starts
 * a new grid. */
bool uw__rd_tx_offgrid(const struct uw__rdmap *rd);
void uw__rd_tx_regrid(struct uw__rdmap *rd);
/* Queues a Terminate for fault err (found in the segment with header h, or
 * NULL) ahead of everything not yet built; dead afterwards. */
void uw__rd_terminate(struct uw__rdmap *rd, int err, const uw__ddp_hdr *h,
                      const uint8_t *rdmap_hdr);
/* For a QP destroyed while octets are still owed to the wire: copies every
 * unsent octet (frames built, then what is queued) into one buffer from the
 * allocator and marks it sent. Frames taken this way complete no request.
 * Returns the count (*out NULL when 0) or UW_ENOMEM. */
ssize_t uw__rd_tx_take(struct uw__rdmap *rd, uint8_t **out);

/* qp_rx.c */
/* Where the next received octets should go; 0 = do not read now. */
int uw__rd_rx_iov(struct uw__rdmap *rd, struct iovec *iov, int cap);
/* n octets arrived into the iovecs last returned. Returns 0 or a fatal error
 * (a Terminate has been queued or received; dead). */
int uw__rd_rx_advance(struct uw__rdmap *rd, size_t n);
/* Copy-based entry point with the same state machine, for tests and fuzzing:
 * consumes all of data (any split) unless an error stops it. */
int uw__rd_rx_feed(struct uw__rdmap *rd, const void *data, size_t len);
/* The stream ended (FIN): 0 at an FPDU boundary, else UW_EMPA_TRUNCATED. */
int uw__rd_rx_eof(const struct uw__rdmap *rd);

/* A completion for the engine to count (ctx->produced). */
static inline void uw__rd_complete(struct uw__rdmap *rd, struct uw__cqr *cq, const uw_wc *wc)
{
    if (uw__cqr_push(cq, wc) == 0) {
        rd->wc_new++;
        rd->news |= UW__RD_WC;
    }
}

#endif
