/* SDP connection core internals shared by conn.c (setup and the receive
 * side of the protocol), conn_tx.c (send slots, credits, next_tx) and
 * conn_app.c (the application's reads, urgent data, readiness). */
#ifndef UW_SDP_CONN_INTERNAL_H
#define UW_SDP_CONN_INTERNAL_H

#include "sdp/conn.h"
#include "util/alloc.h"
#include "uwarp/error.h"

/* Id space: receive buffers, then data slots, then control slots. */
#define RX_CAP 512u         /* receive buffers at most (SO_RCVBUF growth) */
#define TX_CAP 256u         /* data slots at most (SO_SNDBUF growth) */
#define CTL_CAP 8u          /* control messages in flight */
#define CTL_SIZE 64u        /* every payload-free message fits (BSDH + largest header) */
#define SMALL_PAYLOAD 4096u /* received payloads this small are compacted */
#define HIST 256u           /* our recent messages' Bufs/MSeqAck, to check the peer's credits */

enum rx_state { RX_FREE = 0, RX_POSTED, RX_DATA };
enum tx_state { TX_FREE = 0, TX_FILLING, TX_READY, TX_INFLIGHT };

typedef struct rxbuf {
    uint8_t *mem;
    uint32_t size; /* allocated and advertised size of this buffer */
    uint8_t state;
    uint32_t off, end; /* unread payload [off, end) while RX_DATA */
} rxbuf;

typedef struct txslot {
    uint8_t *mem;  /* UW_SDP_BSDH_LEN header room, then payload */
    uint32_t fill; /* payload octets */
    uint8_t state;
    uint8_t flags; /* BSDH flags to send (OOB_PRES/OOB_PEND) */
} txslot;

typedef struct hist_ent {
    uint16_t bufs;
    uint32_t mseqack;
} hist_ent;

/* A SrcAvail we answered, or will answer, with SendSm (9.5.2.1): its data
 * then arrives by Bcopy. */
typedef struct srcavail {
    uint32_t remaining; /* octets still to come (by Read, or Data after SendSm) */
    uint32_t sendsm_mseq;
    bool sendsm_sent;
    bool reading;     /* an RDMA Read of ours is in flight for it */
    bool started;     /* In-Process (9.5.4): a Read of ours began */
    bool revoked;     /* kept across a SrcAvailCancel: its SendSm ends it */
    uint32_t stag;    /* SrcAH */
    uint64_t next_to; /* Tagged Offset of the next octet a Read takes */
    uint32_t rd_len;  /* length of the Read in flight */
} srcavail;

/* Our zero-copy send (9.2, Data Source side). */
enum zs_state { ZS_NONE = 0, ZS_QUEUED, ZS_SENT, ZS_BCOPY, ZS_DONE };
typedef struct zsrc {
    const uint8_t *addr;
    uint32_t len, stag;
    uint64_t va;
    uint32_t pay;         /* octets carried by the SrcAvail itself */
    uint32_t acked;       /* octets the sink's RdmaRdCompls reported */
    uint32_t copied;      /* after a SendSm: octets of the rest copied into slots */
    uint64_t barrier;     /* data messages sealed before it: they go first */
    uint8_t state;        /* enum zs_state */
    int err;              /* the connection ended before the end (ZS_DONE) */
    bool crossed;         /* ended by a crossing SinkAvail: the rest is not sent */
    bool cancel_due;      /* SrcAvailCancel to send (9.5.4) */
    bool cancel_sent;     /* SrcAvailCancel sent: a SendSm acking it ends it */
    uint32_t cancel_mseq; /* ... its MSeq (9.5.4) */
    bool cancelled;       /* ended by the revocation: the rest is not sent */
} zsrc;
#define ZS_MEM (UW_SDP_BSDH_LEN + UW_SDP_SRCAH_LEN + UW_SDP_SRCAVAIL_PAYLOAD)
#define ZS_ID (RX_CAP + TX_CAP + CTL_CAP) /* the SrcAvail's Send */

/* Write Zcopy (9.3). A SinkAvail of the peer's we hold as Data Source:
 * current by 9.5.1, not yet used. */
typedef struct sinkadv {
    uint32_t len, stag;
    uint64_t va;
} sinkadv;
#define SK_CAP 16u /* SinkAvails we take at once (our MaxAdverts caps it lower) */
/* An RdmaWrCompl owed after a Write we had the driver post. */
typedef struct wrcompl {
    uint32_t len, stag;
} wrcompl;

/* Our SinkAvail as Data Sink: queued, then outstanding until an
 * RdmaWrCompl, a payload message (9.5.1 rule 1), a SinkCancelAck, the
 * move to Combined (12.4) or a DisConn ends it. */
enum zk_state { ZK_NONE = 0, ZK_QUEUED, ZK_SENT, ZK_DONE };
typedef struct zsink {
    uint32_t len, stag;
    uint64_t va;
    uint8_t state;    /* enum zk_state */
    bool cancel_due;  /* SinkAvailCancel to send */
    bool cancel_sent; /* ... sent, not yet Processed (9.5.5) */
    uint32_t placed;  /* ZK_DONE: octets the RdmaWrCompl reported */
    uint32_t bcopy;   /* ZK_DONE: octets of the one message that ended it */
} zsink;

enum urg_state { URG_NONE = 0, URG_PENDING, URG_VALID, URG_READ };

struct uw_sdp_conn {
    uw_sdp_conn_cfg cfg;
    uw_allocator a;
    int state;
    int err;   /* pending SO_ERROR */
    int fatal; /* the error every later call reports */
    const char *why;
    int llp; /* enum uw_sdp_llp_action */
    bool llp_gone;

    /* Negotiated (section 8.1.1). */
    uint8_t minv;
    uint16_t remote_max_adverts;
    uint16_t ird, ord;
    uint16_t setup_bufs, remote_setup_bufs;

    /* Receive Private Buffers (section 10). */
    rxbuf rx[RX_CAP];
    uint32_t rcv_size;          /* size new posts get */
    uint32_t target_bufs;       /* how many we keep posted */
    uint32_t posted;            /* posted now: the Bufs we advertise */
    uint32_t post_fifo[RX_CAP]; /* posted ids, in posting (= completion) order */
    uint32_t pf_head, pf_n;
    uint32_t data_fifo[RX_CAP]; /* ids holding unread payload, in stream order */
    uint32_t df_head, df_n;
    uint32_t old_size_left; /* ChRcvBuf growth: old-size buffers still posted */
    uint32_t rx_grow_max;   /* autotuning ceiling of target_bufs (0: fixed) */
    bool rx_starved;        /* the peer ran out of credits since the last growth */

    /* Sequence numbers and credits (sections 6.1.5, 6.1.6, 10.2). */
    uint32_t last_sent; /* MSeq of our last message */
    uint32_t last_rcvd; /* MSeq of the peer's last message */
    bool any_sent;
    uint32_t peer_bufs; /* Bufs and MSeqAck of the peer's last message */
    uint32_t peer_ack;
    uint16_t adv_bufs; /* what our last message told the peer */
    uint32_t adv_ack;
    hist_ent hist[HIST];

    /* Send side. */
    uint8_t *ctl_mem;
    bool ctl_busy[CTL_CAP];
    txslot tx[TX_CAP];
    uint32_t tx_fifo[TX_CAP]; /* FILLING/READY slots in stream order */
    uint32_t tf_head, tf_n;
    uint32_t tx_usable;     /* slots SO_SNDBUF allows */
    uint32_t tx_used;       /* slots not FREE */
    uint32_t tx_grow_max;   /* autotuning ceiling of tx_usable (0: fixed) */
    uint32_t data_inflight; /* data messages handed out, not completed */
    uint32_t ctl_inflight;
    uint32_t remote_rcv_size; /* largest message the peer takes now */
    uint32_t fill_limit;      /* largest message we fill now (10.6 decrease applies at once) */
    uint64_t sealed, sent_msgs_data; /* data messages sealed / handed out, for barriers */
    bool nodelay, cork, more;
    bool shut_wr, disconn_sent, disconn_done;
    bool abort_pending, abortconn_sent;
    uint32_t pnd;  /* PotentialNonDiscards (9.5.1) */
    uint32_t owed; /* buffers freed since our last message by messages other
                      than credit updates: the peer may wait on them */
    bool poke_due; /* a credit update asked by uw__sdp_conn_poke() */

    /* ChRcvBuf (10.6), both roles. */
    bool chr_pending;     /* ours, queued */
    bool chr_outstanding; /* ours, sent and not acknowledged */
    uint32_t chr_size, chr_prev;
    uint64_t chr_barrier;
    bool chr_no_grow, chr_no_shrink;
    bool chr_resend;    /* 10.6.1: re-send after answering theirs */
    bool chra_due;      /* our ChRcvBufAck waits to go out */
    bool chra_wait_old; /* ... once the old-size buffers are consumed */
    uint32_t chra_size;

    /* Flow-control modes (section 11), per half-connection. */
    uint8_t tx_mode, rx_mode;
    srcavail sa[64];
    uint32_t sa_head, sa_n;
    bool sendsm_due;
    uint32_t sendsm_extra; /* SendSm owed for a SrcAvailCancel (9.5.4) */
    bool sinkcancelack_due;

    /* Read Zcopy (9.2). */
    zsrc zs;
    uint8_t *zs_mem;  /* the SrcAvail message (header and payload) */
    bool zs_mem_busy; /* its Send has not completed */
    bool zr_busy;     /* Data Sink: a Read in flight or its result uncollected */
    bool zr_doneflag;
    int64_t zr_ret;
    uint32_t rrc_len; /* RdmaRdCompl due: octets read since the last one */
    bool rrc_due, rrc_inv;
    uint32_t rrc_stag;
    bool rx_inv; /* the message being received came with Invalidate */
    uint32_t rx_inv_stag;

    /* Write Zcopy (9.3), Data Source side. */
    sinkadv sk[SK_CAP]; /* the peer's current SinkAvails, oldest first */
    uint32_t sk_head, sk_n;
    wrcompl wrc[SK_CAP]; /* RdmaWrCompls owed, in Write order */
    uint32_t wrc_head, wrc_n;
    uint32_t zw_inflight; /* our Writes the driver has not seen complete */
    /* Write Zcopy, Data Sink side. */
    zsink zk;
    uint32_t nd;       /* NonDiscards (6.3.3.4) */
    bool zk_stray_ack; /* a SinkCancelAck may still come for a cancel
                          Processed otherwise (9.5.5) */

    /* Mode changes we master (section 12, Figure 27). */
    uint8_t mc_want; /* the mode our send half should move to (0xff none) */
    bool mc_rx_comb; /* Buffered receive half: ask the source for Combined */
    /* Checks of the peer's ModeChanges for our receive half (12.1, 12.4). */
    bool proc_valid;      /* we Processed a SrcAvail of the peer's ... */
    uint32_t proc_mseq;   /* ... last by our message of this MSeq */
    bool rx_pc_pending;   /* the peer moved it from Pipelined to Combined ... */
    uint32_t rx_pc_ack;   /* ... and learns we saw it from our message of this MSeq */
    bool mc_wait_ack;     /* 12.4: Pipelined to Combined not yet acknowledged */
    uint32_t mc_pnd;      /* ... PotentialNonDiscards when that ModeChange went */
    uint32_t mc_mseq;     /* ... MSeq of that ModeChange */
    bool want_rx_pipe;    /* REQ_PIPE we put in our RdmaRd/WrCompls */
    bool peer_wants_pipe; /* REQ_PIPE of the peer's last RdmaRd/WrCompl */

    /* Receive stream (TCP view). */
    uint64_t rcv_nxt, copied;
    bool rcv_eof; /* DisConn received */
    bool shut_rd;
    bool abort_rcvd;
    bool oobinline;
    uint32_t rcvlowat;
    uint8_t urg; /* enum urg_state */
    uint64_t urg_off;
    uint8_t urg_byte;

    uw_sdp_stats st;
};

/* conn.c */
void uw__sdp_fail(uw_sdp_conn *c, int err, const char *why);
void uw__sdp_rx_release(uw_sdp_conn *c, uint32_t id);

/* conn_zcopy.c */
int uw__sdp_on_srcavail(uw_sdp_conn *c, uint32_t id, const uw_sdp_msg *m);
int uw__sdp_on_rdmardcompl(uw_sdp_conn *c, const uw_sdp_msg *m);
int uw__sdp_on_sendsm(uw_sdp_conn *c, const uw_sdp_msg *m);
int uw__sdp_zs_next(uw_sdp_conn *c, int32_t credit, uw_sdp_tx *out);
bool uw__sdp_zs_holds_data(const uw_sdp_conn *c);
int uw__sdp_zs_cancel_next(uw_sdp_conn *c, uw_sdp_tx *out);
void uw__sdp_zs_fill(uw_sdp_conn *c);
void uw__sdp_zs_abort(uw_sdp_conn *c);
/* 11.3 rule 1: a current SinkAvail discards our SrcAvail. */
void uw__sdp_zs_crossed(uw_sdp_conn *c);
void uw__sdp_queue_payload(uw_sdp_conn *c, uint32_t id, const uw_sdp_msg *m);
int uw__sdp_violate(uw_sdp_conn *c, const char *why);
size_t uw__sdp_fill_from(uw_sdp_conn *c, const uint8_t *src, size_t len, uint32_t maxp);
int uw__sdp_send_ctl(uw_sdp_conn *c, uint8_t mid, uint32_t value, bool solicited, uw_sdp_tx *out);
void uw__sdp_stamp(uw_sdp_conn *c, uw_sdp_msg *m, uint8_t *out);

/* conn_wzcopy.c */
int uw__sdp_on_sinkavail(uw_sdp_conn *c, uint32_t id, const uw_sdp_msg *m);
int uw__sdp_on_rdmawrcompl(uw_sdp_conn *c, const uw_sdp_msg *m);
int uw__sdp_on_sinkcancelack(uw_sdp_conn *c);
void uw__sdp_on_sinkavailcancel(uw_sdp_conn *c);
/* A payload-carrying message arrived (9.5.1 rule 1 and NonDiscards). */
void uw__sdp_wz_payload_in(uw_sdp_conn *c, uint32_t payload_len);
/* We send one (9.5.1 step 3, and the held SinkAvail it consumes). */
void uw__sdp_wz_payload_out(uw_sdp_conn *c);
/* Our SinkAvail is over without data (mode change, DisConn, close). */
void uw__sdp_zk_drop(uw_sdp_conn *c);
/* Control messages of Write Zcopy and of the mode changes we master. */
int uw__sdp_wz_next(uw_sdp_conn *c, uw_sdp_tx *out);
int uw__sdp_send_msg(uw_sdp_conn *c, uw_sdp_msg *m, bool solicited, uw_sdp_tx *out);
/* Data may not go while an RdmaWrCompl is owed: it would end the
 * SinkAvail at the sink before the Write's report (9.5.1 rule 1); nor
 * while a SinkCancelAck is: the sink would end the canceled SinkAvail with
 * it, which we no longer count as held (PotentialNonDiscards one ahead). */
/* 6.2.1.3: the peer's advertisements outstanding at us, SrcAvails not yet
 * Processed (a SendSm Processes one whose rest still comes by Bcopy) and
 * SinkAvails held, against our MaxAdverts. */
static inline uint32_t uw__sdp_adverts_held(const uw_sdp_conn *c)
{
    uint32_t n = c->sk_n;
    for (uint32_t i = 0; i < c->sa_n; i++)
        n += !c->sa[(c->sa_head + i) % 64].sendsm_sent;
    return n;
}

static inline bool uw__sdp_wz_blocks_data(const uw_sdp_conn *c)
{
    return c->wrc_n > 0 || c->sinkcancelack_due;
}

/* conn_app.c */
void uw__sdp_skip_urgent(uw_sdp_conn *c);

/* conn_tx.c */
int uw__sdp_tx_init(uw_sdp_conn *c);
void uw__sdp_tx_free(uw_sdp_conn *c);
int32_t uw__sdp_send_credit(const uw_sdp_conn *c);
/* What send() reports in this state (ENOTCONN, the pending error once,
 * EPIPE), or 0 when sending is possible. */
int uw__sdp_send_state_error(uw_sdp_conn *c);
int32_t uw__sdp_peer_credit_est(const uw_sdp_conn *c);
void uw__sdp_seal(uw_sdp_conn *c);
uint32_t uw__sdp_max_payload(const uw_sdp_conn *c);

static inline uint32_t uw__sdp_min32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

#endif
