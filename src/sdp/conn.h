/* SDP connection core (draft-pinkerton-iwarp-sdp-01 sections 8-10, 14): one
 * SDP socket's protocol state, sans-I/O.
 *
 * The core owns the memory of its receive Private Buffers and of its send
 * buffers (slots) and says what to do with them; the driver (src/io/) moves
 * them over an iWARP QP:
 *   - uw__sdp_conn_next_post()  a receive Private Buffer to post (uw_post_recv);
 *   - uw__sdp_conn_on_recv()    a posted buffer completed with an SDP message;
 *   - uw__sdp_conn_next_tx()    an SDP message to send (uw_post_send, a Send,
 *                               with Solicited Event when .solicited);
 *   - uw__sdp_conn_tx_done()    that Send completed, its slot is free again;
 *   - uw__sdp_conn_llp_action() whether to close the LLP (graceful or abort);
 *   - uw__sdp_conn_llp_closed() the LLP went away (FIN, reset, Terminate).
 * Buffer ids are stable: the driver may cache one memory registration per id
 * and must re-register when the address or length it is given changes (the
 * core reallocates buffers when they are resized, section 10.6).
 *
 * The application side mirrors socket calls (send/recv/shutdown, options,
 * FIONREAD, SIOCATMARK) with TCP's semantics; uw__sdp_conn_poll() gives the
 * readiness a TCP socket would show. After every call the driver must drain
 * next_post and next_tx and then check llp_action, since any call can make
 * messages due (credit updates, DisConn, ChRcvBufAck, SendSm).
 *
 * No clock: the core has no timers (setup and linger timeouts live in the
 * driver). No threads: one caller at a time.
 */
#ifndef UW_SDP_CONN_H
#define UW_SDP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "sdp/codec.h"
#include "uwarp/common.h"
#include "uwarp/error.h"

typedef struct uw_sdp_conn uw_sdp_conn;

/* Section 10 rule 2 asks for at least 3 receive Private Buffers, and a
 * core may be configured with 3; SO_RCVBUF and the driver never go below 4.
 * With 3, a peer left at two credits by one message (payload needs three,
 * 10.5) waits for an update that 10.5 only requires at one credit, and only
 * a poke (uw__sdp_conn_poke) gets it moving again; with 4 our own "owed"
 * updates keep it moving without one (test_sdp_conn_random, with
 * UW_SDP_RANDOM_MIN_BUFS=3 for the former). See docs/sdp.md. */
#define UW_SDP_SPEC_MIN_BUFS 3
#define UW_SDP_MIN_BUFS 4

typedef struct uw_sdp_conn_cfg {
    bool accepting;        /* Accepting Peer (MPA Responder) or Connecting Peer */
    uint32_t rcv_size;     /* receive Private Buffer size, whole message; >= UW_SDP_MIN_BUF */
    uint16_t rcv_bufs;     /* receive Private Buffers kept posted; >= UW_SDP_SPEC_MIN_BUFS */
    uint32_t rcv_size_min; /* bounds for sizes a peer's ChRcvBuf may ask for (0: */
    uint32_t rcv_size_max; /*   UW_SDP_MIN_BUF and 4 x rcv_size) */
    uint32_t tx_size;      /* largest message we build (send buffer size, DesRemRcvSz) */
    uint16_t tx_slots;     /* send buffers: data queued or in flight (SO_SNDBUF / tx_size) */
    uint16_t rcv_bufs_max; /* autotuning ceilings, as TCP's tcp_rmem/tcp_wmem maxima: */
    uint16_t tx_slots_max; /*   0 or below the start value: no growth */
    uint16_t max_adverts;  /* MaxAdverts we offer; >= 1 */
    uint16_t ird, ord;     /* what the connection supports (the MPA-negotiated IRD/ORD) */
    /* Data Sink: a SrcAvail waits for the driver to take it by Read Zcopy
     * (uw__sdp_conn_zread) or to force Bcopy (uw__sdp_conn_force_bcopy).
     * false: every SrcAvail is answered with SendSm at once (9.5.2.1). */
    bool zcopy_sink;
    const uw_allocator *alloc;
} uw_sdp_conn_cfg;

/* Fills cfg with the defaults (64 KiB buffers, 16 of them, 16 send slots,
 * each growing to 32 as the stream needs, MaxAdverts 8, IRD/ORD 1). */
void uw__sdp_conn_cfg_default(uw_sdp_conn_cfg *cfg, bool accepting);

enum uw_sdp_state {
    UW_SDP_S_IDLE = 0, /* created; Connecting: Hello not built yet */
    UW_SDP_S_HELLO,    /* Connecting: Hello sent, waiting for HelloAck */
    UW_SDP_S_OPEN,     /* data transfer (half-closes tracked separately) */
    UW_SDP_S_CLOSED,   /* both DisConns exchanged, or torn down */
    UW_SDP_S_ERROR,    /* aborted or protocol violation: only destroy remains */
};

/* Errors: UW_EINVAL (cfg out of range), UW_ENOMEM. */
int uw__sdp_conn_create(uw_sdp_conn **out, const uw_sdp_conn_cfg *cfg);
void uw__sdp_conn_destroy(uw_sdp_conn *c);
int uw__sdp_conn_state(const uw_sdp_conn *c);

/* ---- Setup (section 8.1.1) --------------------------------------------- */

/* Connecting Peer, step 2: builds the Hello for the MPA Request's private data.
 * Every initial receive buffer must have been taken with next_post (step 1c)
 * first. Errors: UW_EBUSY (posts pending), UW_EINVAL (wrong role/state). */
int uw__sdp_conn_hello(uw_sdp_conn *c, uint8_t out[UW_SDP_HELLO_LEN]);

/* Accepting Peer, steps 3-6: checks the Hello received in the MPA Request and
 * adopts the peer's parameters; IRD/ORD are reduced per 4d/4e (never above
 * cfg.ird/ord). On success the HelloAck becomes the first message of
 * next_tx (after the initial posts, 4b). Errors: UW_EPROTO (malformed Hello,
 * MajV not 1, MaxAdverts 0, LocIRD or LocORD 0, Bufs < 3, LocalRcvSz below
 * UW_SDP_MIN_BUF): the caller rejects the MPA Request; *why (may be NULL)
 * gets a static sentence naming the rule. */
int uw__sdp_conn_accept_hello(uw_sdp_conn *c, const uint8_t *pd, size_t len, const char **why);

/* The IRD/ORD MPA negotiated for the connection (RFC 6581): cfg.ird/ord are
 * lowered to them, so LocIRD/LocORD never exceed them (notes section 2).
 * Accepting Peer: call before accept_hello. Connecting Peer: the Hello was
 * built from cfg before MPA finished; call when MPA reports the values. */
void uw__sdp_conn_mpa_limits(uw_sdp_conn *c, uint16_t ird, uint16_t ord);

/* Tests only: moves an idle OPEN connection's sequence numbers as if ours
 * had advanced by ours and the peer's by theirs (both multiples of 256, the
 * credit history's length), so that a test crosses the 32-bit wrap (6.1.5)
 * without 2^32 messages. Apply the mirror image to the peer. UW_EINVAL
 * otherwise. */
int uw__sdp_conn_test_shift_seq(uw_sdp_conn *c, uint32_t ours, uint32_t theirs);

/* What the two peers agreed on (valid from OPEN). */
typedef struct uw_sdp_params {
    uint8_t majv, minv;
    uint16_t local_max_adverts, remote_max_adverts;
    uint32_t local_rcv_size, remote_rcv_size; /* current Private Buffer sizes */
    uint16_t ird, ord;                        /* after 4d/4e or 7c/7d */
    uint16_t local_bufs;                      /* receive buffers posted at setup */
    uint16_t remote_bufs;                     /* Bufs of the peer's Hello/HelloAck */
} uw_sdp_params;
int uw__sdp_conn_params(const uw_sdp_conn *c, uw_sdp_params *out);

/* ---- Driver side ---------------------------------------------------------- */

typedef struct uw_sdp_post {
    uint32_t id; /* buffer id, < uw__sdp_conn_max_ids() */
    void *addr;
    uint32_t len;
} uw_sdp_post;

typedef struct uw_sdp_tx {
    uint32_t id; /* slot id, < uw__sdp_conn_max_ids(); give back with tx_done */
    const void *addr;
    uint32_t len;
    bool solicited;  /* section 14.2: Send with Solicited Event */
    bool invalidate; /* 9.2 step 3: Send with (SE and) Invalidate of inv_stag */
    uint32_t inv_stag;
} uw_sdp_tx;

/* Upper bound (exclusive) of the ids next_post and next_tx hand out, so the
 * driver can size a registration cache. Receive and send ids share it. */
uint32_t uw__sdp_conn_max_ids(const uw_sdp_conn *c);

/* A receive buffer to post now: 1 with *out filled, 0 if none. The buffer
 * stays the driver's until on_recv() returns it. */
int uw__sdp_conn_next_post(uw_sdp_conn *c, uw_sdp_post *out);

/* Buffer id completed with a message of len octets (the Send's length).
 * Messages must be given in the order they arrived. Returns 0, or a
 * protocol violation (UW_EPROTO; UW_EMSGSIZE for a message larger than the
 * buffer we advertised): the core has then started an abortive close
 * (llp_action says what to do) and records the error for SO_ERROR;
 * uw__sdp_conn_why() names the rule. */
int uw__sdp_conn_on_recv(uw_sdp_conn *c, uint32_t id, uint32_t len);
/* As on_recv, for a Send with Invalidate that invalidated our inv_stag
 * (9.2 step 3: only a RdmaRdCompl may, naming the STag of our SrcAvail). */
int uw__sdp_conn_on_recv_inv(uw_sdp_conn *c, uint32_t id, uint32_t len, uint32_t inv_stag);

/* The next message to send: 1 with *out filled, 0 if none is due (no
 * credit, nothing queued, or Nagle holds a partial message). The slot's
 * memory stays valid and unchanged until tx_done(id). */
int uw__sdp_conn_next_tx(uw_sdp_conn *c, uw_sdp_tx *out);
/* The Send of slot id completed (successfully: a failed Send is an LLP
 * failure, report it with llp_closed). */
void uw__sdp_conn_tx_done(uw_sdp_conn *c, uint32_t id);

enum uw_sdp_llp_action {
    UW_SDP_LLP_NONE = 0,
    UW_SDP_LLP_DISCONNECT = 1, /* graceful LLP teardown (TCP FIN): 8.2.1 */
    UW_SDP_LLP_ABORT = 2,      /* tear the LLP down at once (RST): 8.2.2 */
};
/* What the driver must do with the LLP now. Stays set once set; the driver
 * acts on it once. */
int uw__sdp_conn_llp_action(const uw_sdp_conn *c);

/* The LLP is gone: err 0 for an orderly LLP close, else the cause
 * (UW_ECONNRESET, UW_ETIMEDOUT, UW_ETERM_RECEIVED, UW_EPROTO for a
 * Terminate we sent, ...); the application sees UW_ETIMEDOUT and
 * UW_EPROTO as they are, every other cause as UW_ECONNRESET. Per 8.2.1
 * step 4 and 8.2.2, the close was graceful only if a DisConn arrived
 * without an AbortConn; otherwise pending and future receives report
 * that error. */
void uw__sdp_conn_llp_closed(uw_sdp_conn *c, int err);

/* ---- Application side (TCP semantics) ------------------------------------ */

#define UW_SDP_MSG_OOB 0x1u  /* send: last octet is urgent; recv: read the urgent octet */
#define UW_SDP_MSG_PEEK 0x2u /* recv: leave the data queued */
#define UW_SDP_MSG_MORE 0x4u /* send: more follows, hold a partial message */

/* Queues up to the sum of iov lengths for sending, copying into send slots.
 * Returns the octets taken (> 0), or UW_EAGAIN (no room), UW_EPIPE (our
 * direction is shut down or the connection closed), UW_ECONNRESET (the
 * connection was aborted; reported once, then UW_EPIPE), UW_ENOTCONN (not
 * yet OPEN), UW_EINVAL. With MSG_OOB the last octet taken is urgent, also
 * when not all of iov fit (as Linux TCP marks the last octet queued). */
ssize_t uw__sdp_conn_send(uw_sdp_conn *c, const struct iovec *iov, int iovcnt, unsigned flags);

/* Copies received data into iov. Returns the octets copied (> 0), 0 at end
 * of stream (the peer's DisConn, after all data), or UW_EAGAIN, UW_ECONNRESET,
 * UW_ENOTCONN, UW_EINVAL. Like TCP, a read stops just before the urgent
 * mark, and without OOB inline the urgent octet is skipped. With MSG_OOB:
 * the urgent octet (1), UW_EINVAL (none, already read, or OOB inline),
 * UW_EAGAIN (announced by OOB_PEND but not arrived). */
ssize_t uw__sdp_conn_recv(uw_sdp_conn *c, const struct iovec *iov, int iovcnt, unsigned flags);

/* how: UW_SDP_SHUT_RD, _WR, _RDWR (the values of SHUT_RD, SHUT_WR and
 * SHUT_RDWR; the core sees no socket headers). SHUT_WR queues a DisConn
 * after the data already queued (8.2.1 steps 1-2). Errors: UW_ENOTCONN,
 * UW_EINVAL. */
#define UW_SDP_SHUT_RD 0
#define UW_SDP_SHUT_WR 1
#define UW_SDP_SHUT_RDWR 2
int uw__sdp_conn_shutdown(uw_sdp_conn *c, int how);

/* Abortive close by the application (SO_LINGER 0, or close with unread
 * data): unsent data is discarded; AbortConn goes out if a DisConn was
 * sent, otherwise the LLP is torn down at once (8.2.2). */
void uw__sdp_conn_abort(uw_sdp_conn *c);

/* Octets received on the stream so far (grows with every data message;
 * readiness users take a change as a new arrival, an edge). */
uint64_t uw__sdp_conn_rcv_total(const uw_sdp_conn *c);

/* Readiness as poll() bits (POLLIN, POLLOUT, POLLPRI, POLLERR, POLLHUP,
 * POLLRDHUP), as a TCP socket in the same state would show them. */
unsigned uw__sdp_conn_poll(const uw_sdp_conn *c);

/* SO_ERROR: the pending error (negative UW_E*), cleared by reading. */
int uw__sdp_conn_take_error(uw_sdp_conn *c);
/* A static sentence naming the section a protocol violation broke, or NULL. */
const char *uw__sdp_conn_why(const uw_sdp_conn *c);

/* FIONREAD: octets readable now (up to the urgent mark as TCP counts them).
 * SIOCATMARK: 1 when the read position is at the urgent mark. */
size_t uw__sdp_conn_inq(const uw_sdp_conn *c);
int uw__sdp_conn_atmark(const uw_sdp_conn *c);
/* Octets queued for sending and not yet handed to the driver (SIOCOUTQ-like),
 * and whether everything including a DisConn has completed (linger). */
size_t uw__sdp_conn_outq(const uw_sdp_conn *c);
bool uw__sdp_conn_tx_idle(const uw_sdp_conn *c);

/* A peer that posts the minimum of 3 buffers and updates our credit only
 * at one credit or less (all 10.5 requires) leaves us at two credits with
 * data queued: payload needs three, and it owes us nothing. stalled() says
 * we are in that state; poke() then queues one credit update (payload-free,
 * allowed at two), which drops us to one credit and so obliges the peer to
 * answer with its current Bufs. Only the driver knows time: it pokes after
 * a backoff, since a peer whose application has not read yet answers with
 * two again. poke() is UW_EAGAIN when not stalled. */
bool uw__sdp_conn_stalled(const uw_sdp_conn *c);
int uw__sdp_conn_poke(uw_sdp_conn *c);

/* TCP_CORK and MSG_MORE hold a partial message back; Linux sends it anyway
 * once it has waited 200 ms (tcp(7)). held() says a partial message waits
 * for nothing but cork or MSG_MORE; release_held() lets it go (when credit
 * allows). The driver times the 200 ms. */
bool uw__sdp_conn_held(const uw_sdp_conn *c);
void uw__sdp_conn_release_held(uw_sdp_conn *c);
/* Nagle (no TCP_NODELAY) holds a partial message until the data Sends
 * before it complete: the driver must take those completions promptly. */
bool uw__sdp_conn_nagle_held(const uw_sdp_conn *c);

enum uw_sdp_opt {
    UW_SDP_OPT_NODELAY = 1, /* bool: send partial messages at once */
    UW_SDP_OPT_CORK,        /* bool: hold partial messages until uncorked */
    UW_SDP_OPT_OOBINLINE,   /* bool */
    UW_SDP_OPT_RCVLOWAT,    /* octets for POLLIN (>= 1) */
    UW_SDP_OPT_RCVBUF,      /* octets: receive buffers = value / buffer size (>= 3) */
    UW_SDP_OPT_SNDBUF,      /* octets: usable send slots = value / slot size (>= 2) */
};
int uw__sdp_conn_setopt(uw_sdp_conn *c, int opt, int value);
int uw__sdp_conn_getopt(const uw_sdp_conn *c, int opt);

/* Section 10.6: ask the peer to resize its receive Private Buffers to size.
 * Errors: UW_EBUSY (a ChRcvBuf is unacknowledged), UW_EPERM (the peer
 * refused this direction of change before), UW_EINVAL (size below
 * UW_SDP_MIN_BUF, or not OPEN). */
int uw__sdp_conn_chrcvbuf(uw_sdp_conn *c, uint32_t size);

/* ---- Read Zcopy (9.2) ------------------------------------------------------ *
 *
 * Data Source: the driver registers the application's buffer for remote
 * Read (and remote invalidation) and hands it over with zsend; the core
 * sends the SrcAvail (in Combined Mode with the buffer's first octets as
 * payload, 11.2) after the data queued before it, and holds every later
 * payload until the sink Processed the advertisement: RdmaRdCompls for all
 * of it, or a SendSm, after which the core copies the rest into send slots
 * (Bcopy). The buffer is the core's until zsend_poll reports the end; the
 * driver then revokes the STag. send() is refused (UW_EAGAIN) meanwhile.
 *
 * Data Sink (cfg.zcopy_sink): a SrcAvail at the head of the stream makes
 * zavail() nonzero; the driver either Reads part or all of it into the
 * application's buffer (zread, then zread_done when the RDMA Read
 * completed: the core queues the RdmaRdCompl, with Invalidate for the
 * last one) or forces Bcopy (force_bcopy: SendSm). */

typedef struct uw_sdp_zsrc {
    const void *addr; /* the application's buffer; unchanged until the end */
    uint32_t len;     /* 1 .. 2^31 */
    uint32_t stag;    /* its registration: remote Read, remote invalidate */
    uint64_t va;      /* the Tagged Offset of addr */
} uw_sdp_zsrc;

/* Octets of a SrcAvail's payload in Combined Mode (at most; never more
 * than the peer's Private Buffer takes). */
#define UW_SDP_SRCAVAIL_PAYLOAD 1024u

/* Errors: as uw__sdp_conn_send (ENOTCONN, EPIPE, ECONNRESET), UW_EBUSY (a
 * zero-copy send is in process), UW_EPERM (our send half is in Buffered
 * Mode, or MSG_OOB/urgent state: use send), UW_EINVAL (len 0 or above
 * 2^31, or shorter than one payload: Bcopy is the better choice). */
int uw__sdp_conn_zsend(uw_sdp_conn *c, const uw_sdp_zsrc *z);
/* 1: the zero-copy send ended and every octet was taken (*sent = len);
 * 0: still in process (*sent = octets Processed so far); or the error
 * that ended the connection (*sent = octets the peer is known to have:
 * the payload plus what its RdmaRdCompls reported). After 1 or an error
 * the core no longer refers to the buffer. UW_EINVAL when none was started. */
int uw__sdp_conn_zsend_poll(uw_sdp_conn *c, uint64_t *sent);
/* Revokes the zero-copy send (9.5.4: a send() timeout or signal). Not yet
 * advertised: it ends at once. Advertised: a SrcAvailCancel goes out, and
 * the send ends (zsend_poll 1, *sent short of len) once the sink Processed
 * the advertisement: RdmaRdCompls for all of it (then nothing was cut), a
 * SendSm (its answer to the cancel, or a refusal sent before it saw the
 * cancel, which it then ignores), or a crossing SinkAvail. After a SendSm,
 * the copying stops where it is. UW_EALREADY when it already ended,
 * UW_EINVAL when none was started. */
int uw__sdp_conn_zsend_cancel(uw_sdp_conn *c);

typedef struct uw_sdp_zread {
    uint32_t stag; /* the peer's STag (SrcAH) */
    uint64_t to;   /* its Tagged Offset for the first octet to read */
    uint32_t len;
} uw_sdp_zread;

/* Octets at the read position that only an RDMA Read can take now (0 if
 * none, a Read is in flight, or data comes first). */
uint32_t uw__sdp_conn_zavail(const uw_sdp_conn *c);
/* A SrcAvail waits for the driver's decision (zread or force_bcopy), maybe
 * behind unread data: the driver times how long it may wait for a reader. */
bool uw__sdp_conn_zwaiting(const uw_sdp_conn *c);
/* Takes len (1 .. zavail) of them: *rd says what to Read. One at a time.
 * Errors: UW_EAGAIN (nothing to read), UW_EINVAL (len out of range). */
int uw__sdp_conn_zread(uw_sdp_conn *c, uint32_t len, uw_sdp_zread *rd);
/* The Read completed with n octets placed (n = rd.len), or failed (n < 0,
 * the UW_E* cause). Success counts the octets as read by the application
 * and queues the RdmaRdCompl. */
void uw__sdp_conn_zread_done(uw_sdp_conn *c, int64_t n);
/* The outcome of the last zread once zread_done came: the octets (> 0) or
 * the error; UW_EAGAIN while the Read is in flight, 0 when none pending. */
ssize_t uw__sdp_conn_zread_collect(uw_sdp_conn *c);
/* 9.5.2.1: answer the SrcAvail at the read position with SendSm (its rest
 * then comes by Bcopy). UW_EAGAIN when there is none to answer. */
int uw__sdp_conn_force_bcopy(uw_sdp_conn *c);

/* ---- Write Zcopy (9.3) and the flow-control modes (11, 12) ---------------- *
 *
 * Modes. Our send half starts Combined; set_mode() asks to move it (we are
 * its Mode Master in Combined and Pipelined, Figure 27): the ModeChange
 * goes out as soon as section 12 allows (12.1: no SrcAvail of ours
 * outstanding; 12.4: no RdmaWrCompl owed, and the previous move out of
 * Pipelined acknowledged) and the mode changes when it is sent. In
 * Buffered our receive half is ours to master: rx_combined() asks the
 * source back to Combined (12.2). mode_hint() is the peer's last REQ_PIPE
 * (6.1.2) for our send half; want_pipe() sets ours for our receive half.
 *
 * Data Sink: with our receive half Pipelined, zsink() advertises the
 * application's receive buffer (registered for remote Write and remote
 * invalidate) with SinkAvail. It ends in zsink_poll() as: placed > 0
 * octets written there by the peer (an RdmaWrCompl); bcopy > 0 octets of
 * one Data message that crossed it, which the driver copies into the same
 * buffer with recv() (9.5.1 rule 1); or neither (revoked by zsink_cancel,
 * by the peer's move to Combined, or by its DisConn): read as usual.
 *
 * Data Source: with our send half Pipelined, the peer's current SinkAvails
 * are held (9.5.1 step 4). zwrite_avail() is the oldest one's size when
 * the next octets may go into it; zwrite() takes it: the driver posts the
 * RDMA Write *before* the next next_tx(), which then carries the
 * RdmaWrCompl (Send with SE and Invalidate of the sink's STag), and calls
 * zwrite_done() when the Write completed. */

int uw__sdp_conn_set_mode(uw_sdp_conn *c, uint8_t mode);
int uw__sdp_conn_rx_combined(uw_sdp_conn *c);
bool uw__sdp_conn_mode_hint(const uw_sdp_conn *c);
void uw__sdp_conn_want_pipe(uw_sdp_conn *c, bool on);

typedef struct uw_sdp_zsink {
    void *addr;    /* the application's receive buffer */
    uint32_t len;  /* larger than our receive Private Buffers (9.5.1), <= 2^31 */
    uint32_t stag; /* remote Write and remote invalidate */
    uint64_t va;
} uw_sdp_zsink;
/* Errors: UW_EPERM (receive half not Pipelined), UW_EINVAL (len too
 * small or too large), UW_EAGAIN (data or a SrcAvail is there to read, the
 * stream ended, or a SinkAvail of ours is still outstanding), and the
 * receive-side errors of uw__sdp_conn_recv. */
int uw__sdp_conn_zsink(uw_sdp_conn *c, const uw_sdp_zsink *z);
typedef struct uw_sdp_zsink_res {
    uint32_t placed; /* octets in the buffer already, counted as read */
    uint32_t bcopy;  /* octets the driver reads into it with recv() */
} uw_sdp_zsink_res;
/* 1: over (*r says how; the core no longer refers to the buffer), 0: still
 * outstanding, or the connection's error (the buffer is released too). */
int uw__sdp_conn_zsink_poll(uw_sdp_conn *c, uw_sdp_zsink_res *r);
/* 9.5.5: revoke it (SinkAvailCancel); zsink_poll says when the peer can no
 * longer write into the buffer. 0, or UW_EAGAIN when there is none. */
int uw__sdp_conn_zsink_cancel(uw_sdp_conn *c);

typedef struct uw_sdp_zwrite {
    uint32_t stag; /* the sink's STag (SinkAH) */
    uint64_t to;   /* its Tagged Offset for our first octet */
    uint32_t len;
} uw_sdp_zwrite;
uint32_t uw__sdp_conn_zwrite_avail(const uw_sdp_conn *c);
/* len 1 .. zwrite_avail(); the octets count as sent. UW_EAGAIN when none
 * is usable, UW_EINVAL for len out of range. */
int uw__sdp_conn_zwrite(uw_sdp_conn *c, uint32_t len, uw_sdp_zwrite *wr);
/* The Write ended: ok, or failed (the connection then fails too). */
void uw__sdp_conn_zwrite_done(uw_sdp_conn *c, bool ok);
/* Writes posted and not yet completed. */
uint32_t uw__sdp_conn_zwrite_inflight(const uw_sdp_conn *c);

typedef struct uw_sdp_stats {
    uint64_t sent, received;                     /* ULP octets */
    uint64_t data_msgs_sent, data_msgs_received; /* Data messages with payload */
    uint64_t msgs_sent, msgs_received;           /* every SDP message after the Hello */
    uint64_t credit_updates_sent;                /* Data messages without payload */
    uint64_t pokes_sent;                         /* of which uw__sdp_conn_poke()'s */
    uint64_t sendsm_sent, srcavail_received, sinkavail_received;
    uint64_t srcavail_sent, sinkavail_sent, sendsm_received;
    uint64_t rdmardcompl_sent, rdmardcompl_received, rdmawrcompl_sent, rdmawrcompl_received;
    uint64_t cancels_sent, cancels_received, mode_changes;
    uint64_t sinkavail_stale;  /* Data Source: SinkAvails discarded by 9.5.1 */
    uint64_t sinkavail_bcopy;  /* Data Sink: ours completed by one Data message */
    uint64_t rdma_read_bytes;  /* Data Sink: octets we took by RDMA Read */
    uint64_t rdma_write_bytes; /* Data Source: octets we placed by RDMA Write */
    uint64_t zcopy_sent;       /* Data Source: octets the peer took from our buffers */
    uint64_t bcopy_sent;       /* ULP octets sent in messages (Data, SrcAvail payload) */
    uint64_t oob_sent, oob_received;
    uint64_t chrcvbuf_sent, chrcvbuf_received, chrcvbufack_sent, chrcvbufack_received;
    uint32_t rx_grown, tx_grown; /* autotuning doublings of each window */
    uint32_t send_credit;        /* our credit now */
    uint32_t peer_credit;        /* the peer's credit as we last told it */
    uint32_t bufs_posted;        /* Bufs we would advertise now */
    uint8_t tx_mode, rx_mode;    /* enum uw_sdp_mode of each half-connection */
    bool graceful;               /* closed with DisConns both ways and no AbortConn */
} uw_sdp_stats;
void uw__sdp_conn_stats(const uw_sdp_conn *c, uw_sdp_stats *out);

#endif
