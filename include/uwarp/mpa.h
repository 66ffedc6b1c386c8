/* MPA: Marker PDU Aligned framing for TCP (RFC 5044) with the enhanced
 * connection setup of RFC 6581. Sans-I/O: nothing here touches a socket, a
 * clock or a global; bytes go in, bytes and events come out.
 *
 * Stream positions. A "position" is the offset of an octet in the TCP byte
 * stream counted from the start of Full Operation, modulo 2^32. When markers
 * are on, a 4-octet marker sits at every position that is a multiple of 512
 * (RFC 5044 4.3; the first one at position 0). Because 2^32 is a multiple of
 * 512, marker placement is unaffected by wrap-around.
 *
 * FPDU start. An FPDU's position is that of its first octet. When a marker
 * falls exactly between two FPDUs it belongs to the following one (RFC 5044
 * 4.3, FPDUPTR 0), so such an FPDU starts with that marker: RFC 5044 Figure 5
 * starts at position 0 and its ULPDU_Length field is at 4.
 *
 * CRC coverage. The CRC covers every octet from the FPDU's first octet
 * (including a leading marker) up to, not including, the first octet of the
 * CRC field: ULPDU_Length, ULPDU, pad and every marker in between, including
 * a marker that starts right after the pad (RFC 5044 4.4).
 *
 * Thread-safety: the functions are reentrant; an object (uw_mpa_rx,
 * uw_mpa_ooo, uw_mpa_frame_parser) may be used by one thread at a time.
 */
#ifndef UWARP_MPA_H
#define UWARP_MPA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "uwarp/common.h"
#include "uwarp/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Exported from libuwarp.so, which is built with -fvisibility=hidden. */
#pragma GCC visibility push(default)

#define UW_MPA_MARKER_INTERVAL 512u
#define UW_MPA_MARKER_LEN 4u
#define UW_MPA_MAX_PD 512u       /* RFC 5044 7.1.1: private data limit, RFC 6581 word included */
#define UW_MPA_FRAME_HDR_LEN 20u /* key, flags, rev, PD_Length */
#define UW_MPA_ENH_WORD_LEN 4u   /* RFC 6581 9: A|B|IRD C|D|ORD */
#define UW_MPA_NO_NEGOTIATION 0x3FFFu /* RFC 6581 9.1: IRD/ORD left to the ULP */
#define UW_MPA_MULPDU_MIN 128u        /* RFC 5044 4.5 */
/* Largest MULPDU we hand out: keeps every marker's FPDUPTR of a marked FPDU
 * within 16 bits (64768 + 6 + 3 + 127 markers * 4 < 65536). */
#define UW_MPA_MULPDU_MAX 64768u

/* RFC 5044 section 8 and RFC 6581 section 8 error codes (Terminate layer 2,
 * type 0). */
enum uw_mpa_errcode {
    UW_MPA_ERR_TCP_LOST = 1,
    UW_MPA_ERR_CRC = 2,
    UW_MPA_ERR_MARKER = 3,
    UW_MPA_ERR_BAD_FRAME = 4,
    UW_MPA_ERR_LOCAL_CATASTROPHIC = 5,
    UW_MPA_ERR_IRD = 6,
    UW_MPA_ERR_RTR = 7,
};

/* Maps a UW_E* code to the MPA error code above (the one a Terminate would
 * carry), or 0 when err is not an MPA-layer error. This is the only place that
 * mapping is made. */
int uw_mpa_error_code(int err);

/* Lowercase name of an MPA error for tools and JSON ("crc_mismatch", ...),
 * "error" when err is not an MPA error. */
const char *uw_mpa_error_name(int err);

/* MULPDU from the effective MSS (RFC 5044 4.5), clamped to
 * [UW_MPA_MULPDU_MIN, UW_MPA_MULPDU_MAX]. */
uint32_t uw_mpa_mulpdu(uint32_t emss, bool markers);

/* ------------------------------------------------------------------------ */
/* FPDU transmit                                                             */

#define UW_MPA_MARKERS 0x1u /* markers are inserted / expected */
#define UW_MPA_CRC 0x2u     /* the CRC is generated / checked */

/* Scratch that one built FPDU's iovecs point into. Fields are private to the
 * library except the three documented results. It must stay at the same
 * address, unmodified, until the iovecs have been sent. */
#define UW_MPA_FPDU_MAX_MARKERS 132u

typedef struct uw_mpa_fpdu {
    uint8_t lead_[4];
    uint8_t markers_[UW_MPA_FPDU_MAX_MARKERS][4];
    uint8_t len_[2];
    uint8_t trailer_[7];
    size_t wire_len;   /* result: octets on the wire, markers included */
    uint32_t next_pos; /* result: stream position right after this FPDU */
    uint32_t crc;      /* result: CRC value placed in the CRC field (0 when off) */
} uw_mpa_fpdu;

/* How many iovecs uw_mpa_fpdu_build() may need for a ULPDU of ulpdu_len
 * octets given as ulpdu_iovcnt pieces. */
size_t uw_mpa_fpdu_iov_max(size_t ulpdu_iovcnt, size_t ulpdu_len);

/* Octets on the wire for a ULPDU of ulpdu_len octets whose FPDU starts at
 * stream position pos. */
size_t uw_mpa_fpdu_wire_len(size_t ulpdu_len, uint32_t pos, unsigned flags);

/* Frames the ULPDU (the concatenation of ulpdu[0..ulpdu_iovcnt)) as one FPDU
 * starting at stream position pos, without copying the payload: iov[] gets
 * pieces of the payload interleaved with pieces of f's scratch (length, markers,
 * pad, CRC). Returns the number of iovecs used.
 * Errors: UW_EMSGSIZE if the ULPDU exceeds 65535 octets or, with markers, a
 * marker would sit more than 65535 octets after the ULPDU_Length field
 * (FPDUPTR is 16 bits); UW_ENOBUFS if iov_cap is too small (see
 * uw_mpa_fpdu_iov_max); UW_EINVAL for NULL arguments.
 * The payload memory is only read; it must stay valid while iov[] is used. */
ssize_t uw_mpa_fpdu_build(uw_mpa_fpdu *f, struct iovec *iov, size_t iov_cap,
                          const struct iovec *ulpdu, size_t ulpdu_iovcnt, uint32_t pos,
                          unsigned flags);

/* Like uw_mpa_fpdu_build(), but copies the whole wire image (markers, CRC)
 * into out[0..cap) and returns its length (f->wire_len). Only f's results
 * are set. Errors: those of uw_mpa_fpdu_build(), UW_ENOBUFS if cap is too
 * small (uw_mpa_fpdu_wire_len() tells the size). */
ssize_t uw_mpa_fpdu_copy(uw_mpa_fpdu *f, uint8_t *out, size_t cap, const struct iovec *ulpdu,
                         size_t ulpdu_iovcnt, uint32_t pos, unsigned flags);

/* Convenience: frames one flat ULPDU into out (a copy). Returns the octets
 * written, UW_ENOBUFS if cap is too small, or the errors of
 * uw_mpa_fpdu_build(). */
ssize_t uw_mpa_fpdu_encode(uint8_t *out, size_t cap, const void *ulpdu, size_t ulpdu_len,
                           uint32_t pos, unsigned flags);

/* ------------------------------------------------------------------------ */
/* FPDU receive: streaming decoder for an in-order byte stream               */

typedef struct uw_mpa_rx uw_mpa_rx;

typedef struct uw_mpa_rx_opts {
    unsigned flags;            /* UW_MPA_MARKERS, UW_MPA_CRC */
    uint32_t pos;              /* stream position of the first octet fed */
    uint32_t max_ulpdu;        /* largest ULPDU_Length accepted; 0 means 65535 */
    const uw_allocator *alloc; /* NULL for malloc/free */
} uw_mpa_rx_opts;

/* One received ULPDU. iov[] holds the payload with markers removed; it points
 * into the caller's input when the FPDU was contiguous in one feed call, or
 * into the decoder's reassembly buffer otherwise. Valid only during the
 * callback. */
typedef struct uw_mpa_ulpdu {
    const struct iovec *iov;
    size_t iovcnt;
    size_t len;   /* ULPDU_Length */
    uint32_t pos; /* stream position of the FPDU's first octet */
    uint32_t crc; /* value of the received CRC field */
} uw_mpa_ulpdu;

/* Return 0 to go on; anything else pauses the decoder right after this FPDU
 * (uw_mpa_rx_feed then returns the octets consumed so far). */
typedef int (*uw_mpa_ulpdu_cb)(void *ud, const uw_mpa_ulpdu *u);

/* Errors: UW_EINVAL (bad options), UW_ENOMEM. */
int uw_mpa_rx_create(uw_mpa_rx **out, const uw_mpa_rx_opts *opts);
void uw_mpa_rx_destroy(uw_mpa_rx *rx);

/* Feeds len octets (any split, down to one octet). Calls cb once per complete,
 * validated ULPDU, in stream order. Returns the octets consumed (len unless
 * the callback paused) or, on a protocol error, the error: UW_EMPA_CRC,
 * UW_EMPA_MARKER, UW_EMPA_ULPDU_TOO_LONG. The first error is sticky: after it
 * nothing more is delivered and every call returns it (RFC 5044 8). */
ssize_t uw_mpa_rx_feed(uw_mpa_rx *rx, const void *data, size_t len, uw_mpa_ulpdu_cb cb, void *ud);

/* The stream has ended (FIN). Returns 0 at an FPDU boundary, else
 * UW_EMPA_TRUNCATED (which becomes the sticky error), or the earlier error. */
int uw_mpa_rx_finish(uw_mpa_rx *rx);

/* Sticky error (0 if none) and the position of the FPDU it was found in. */
int uw_mpa_rx_error(const uw_mpa_rx *rx);
uint32_t uw_mpa_rx_error_pos(const uw_mpa_rx *rx);

/* Stream position of the next octet the decoder expects. */
uint32_t uw_mpa_rx_pos(const uw_mpa_rx *rx);

/* ------------------------------------------------------------------------ */
/* Optimized receiver (RFC 5044 Appendix A.3-A.4): TCP segments in any order */

typedef struct uw_mpa_ooo uw_mpa_ooo;

typedef struct uw_mpa_ooo_opts {
    unsigned flags;            /* UW_MPA_MARKERS lets FPDUs be found out of order */
    uint32_t seq0;             /* TCP sequence number of stream position 0 */
    uint32_t pos;              /* stream position where reception starts (an FPDU start) */
    uint32_t max_ulpdu;        /* 0 means 65535 */
    size_t cap;                /* most stream octets held at once; 0 means 256 KiB.
                                  Must hold the largest FPDU (about 66 KiB). */
    const uw_allocator *alloc; /* NULL for malloc/free */
} uw_mpa_ooo_opts;

enum uw_mpa_ooo_event_type {
    UW_MPA_OOO_PLACED = 1,    /* a complete, validated ULPDU: DDP may place it */
    UW_MPA_OOO_DELIVERED = 2, /* everything up to and including this FPDU is in order */
};

typedef struct uw_mpa_ooo_event {
    int type;
    uint32_t pos;         /* stream position of the FPDU's first octet */
    uint32_t seq;         /* its TCP sequence number */
    const uint8_t *ulpdu; /* PLACED only: the ULPDU, markers removed; valid during the callback */
    size_t len;           /* ULPDU_Length */
} uw_mpa_ooo_event;

typedef void (*uw_mpa_ooo_cb)(void *ud, const uw_mpa_ooo_event *ev);

/* Errors: UW_EINVAL (cap too small for the largest FPDU of max_ulpdu, cap
 * over 1 GiB, max_ulpdu over 65535), UW_ENOMEM. Memory: about 1.4 * cap plus
 * max_ulpdu octets, all allocated here and never later. */
int uw_mpa_ooo_create(uw_mpa_ooo **out, const uw_mpa_ooo_opts *opts);
void uw_mpa_ooo_destroy(uw_mpa_ooo *r);

/* Takes one TCP segment. Octets already received are kept as they were: a
 * duplicate never overwrites data, so never a validated FPDU. Every FPDU is
 * reported PLACED exactly once as soon as it is complete (found through the
 * in-order chain of ULPDU_Length fields or through a marker) and DELIVERED
 * exactly once, in order, as gaps close.
 * Returns 0; UW_ENOBUFS if the segment reaches past the memory cap (the
 * segment is dropped, nothing else changes; TCP will resend it later); or a
 * sticky protocol error (UW_EMPA_CRC, UW_EMPA_MARKER, UW_EMPA_ULPDU_TOO_LONG)
 * after which nothing more is reported. */
int uw_mpa_ooo_segment(uw_mpa_ooo *r, uint32_t seq, const void *data, size_t len, uw_mpa_ooo_cb cb,
                       void *ud);

/* Stream position up to which everything has been delivered. */
uint32_t uw_mpa_ooo_delivered_pos(const uw_mpa_ooo *r);
/* Octets currently buffered beyond the delivered position. */
size_t uw_mpa_ooo_buffered(const uw_mpa_ooo *r);

/* ------------------------------------------------------------------------ */
/* Startup frames (RFC 5044 7.1.1, RFC 6581 6 and 9)                         */

enum uw_mpa_frame_type {
    UW_MPA_REQUEST = 1, /* key "MPA ID Req Frame" */
    UW_MPA_REPLY = 2,   /* key "MPA ID Rep Frame" */
    UW_MPA_ANY = 3,     /* parser: accept either */
};

/* RTR indication types (RFC 6581 9.2 flags B, C, D). */
#define UW_MPA_RTR_SEND 0x1u
#define UW_MPA_RTR_WRITE 0x2u
#define UW_MPA_RTR_READ 0x4u
#define UW_MPA_RTR_ALL 0x7u

/* A startup frame, decoded. Bits are reported exactly as on the wire (a
 * debugging tool wants to see them); the negotiation functions apply the
 * rules for ignoring them. */
typedef struct uw_mpa_frame {
    int type; /* UW_MPA_REQUEST or UW_MPA_REPLY */
    bool m, c, r, s;
    uint8_t res; /* the 4 reserved bits (low nibble of octet 16) */
    uint8_t rev;
    uint16_t pd_length;  /* PD_Length: all private data, RFC 6581 word included */
    bool enhanced;       /* the RFC 6581 word is present: rev >= 2 and S set */
    uint16_t ird, ord;   /* 14-bit values from the word (when enhanced) */
    bool p2p;            /* flag A */
    uint8_t rtr;         /* UW_MPA_RTR_* from flags B, C, D */
    uint16_t ulp_pd_len; /* private data for the ULP (after the word) */
    uint8_t ulp_pd[UW_MPA_MAX_PD];
} uw_mpa_frame;

/* Encodes f into out. The RFC 6581 word is written and S set when
 * f->enhanced; otherwise S is f->s. PD_Length is computed (f->pd_length is
 * ignored). Returns the frame size. Errors: UW_EINVAL (bad type, rev < 2 with
 * enhanced, IRD/ORD above 0x3FFF, RTR bits beyond 3), UW_EMPA_PD_LENGTH
 * (private data over 512 octets), UW_ENOBUFS (cap too small). */
ssize_t uw_mpa_frame_encode(const uw_mpa_frame *f, uint8_t *out, size_t cap);

/* Decodes one frame from buf. expect is UW_MPA_REQUEST, UW_MPA_REPLY or
 * UW_MPA_ANY; pd_max is the largest PD_Length the caller accepts (at most
 * 512). Returns the frame's size (octets after it are not part of it), or
 * UW_EAGAIN if more octets are needed, or: UW_EMPA_KEY (not an MPA key),
 * UW_EMPA_ROLE (the other key: Initiator/Initiator or Responder/Responder),
 * UW_EMPA_PD_LENGTH (over 512), UW_EMPA_PD_BUFFER (over pd_max),
 * UW_EMPA_ENH_WORD (S with rev >= 2 but PD_Length < 4). */
ssize_t uw_mpa_frame_decode(const void *buf, size_t len, int expect, size_t pd_max,
                            uw_mpa_frame *out);

/* Incremental parser: feed arbitrary chunks; it never consumes octets past
 * the end of the frame. Fields are private. No allocation. */
typedef struct uw_mpa_frame_parser {
    uint8_t buf_[UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD];
    size_t have_;
    size_t need_;
    size_t pd_max_;
    int expect_;
    int state_; /* 0 collecting, 1 done, <0 error */
} uw_mpa_frame_parser;

void uw_mpa_frame_parser_init(uw_mpa_frame_parser *p, int expect, size_t pd_max);

/* Returns the octets consumed from data (0..len) or an error of
 * uw_mpa_frame_decode() (sticky). When the frame completes, *out is filled and
 * uw_mpa_frame_parser_done() turns true; later calls consume nothing. */
ssize_t uw_mpa_frame_parser_feed(uw_mpa_frame_parser *p, const void *data, size_t len,
                                 uw_mpa_frame *out);
bool uw_mpa_frame_parser_done(const uw_mpa_frame_parser *p);

/* ------------------------------------------------------------------------ */
/* Negotiation (pure functions)                                              */

typedef struct uw_mpa_policy {
    bool crc;         /* ask for CRCs (C); RFC 5044 4.4: the default is on */
    bool markers;     /* require markers on what we receive (M) */
    uint8_t rev;      /* highest MPA revision spoken: 1 or 2 */
    bool enhanced;    /* initiator: send the RFC 6581 word (needs rev 2) */
    uint16_t ird;     /* inbound RDMA Read depth to advertise / keep */
    uint16_t ord;     /* outbound RDMA Read depth wanted */
    uint16_t ird_max; /* most inbound Reads we can hold; 0 means ird */
    uint16_t ord_min; /* responder: least ORD the ULP needs (reject with code 6 below it) */
    bool p2p;         /* initiator: ask for the peer-to-peer model (A) */
    uint8_t rtr;      /* RTR types we can send (initiator) or accept (responder) */
    bool accept_rev0; /* permissive: accept RDMAC Rev 0 peers (RFC 5044 App. C) */
} uw_mpa_policy;

/* crc on, markers off, rev 2, enhanced, IRD/ORD 16, all RTR types, no p2p. */
void uw_mpa_policy_default(uw_mpa_policy *p);

typedef struct uw_mpa_params {
    uint8_t rev;                 /* MPA revision in the peer's frame */
    uint8_t ddp_version;         /* DDP/RDMAP version: 1 (IETF) or 0 (RDMAC) */
    bool crc;                    /* CRCs generated and checked */
    bool markers_rx;             /* the peer inserts markers in what we receive */
    bool markers_tx;             /* we insert markers in what we send */
    bool enhanced;               /* both sides used the RFC 6581 word */
    uint16_t ird, ord;           /* our endpoint's values after negotiation */
    uint16_t peer_ird, peer_ord; /* the peer's values as sent (0x3FFF if it sent none) */
    bool p2p;                    /* peer-to-peer model with an RTR */
    uint8_t rtr;                 /* initiator: the one RTR type to send; responder: those offered */
} uw_mpa_params;

/* Initiator: builds the MPA Request for pol with ULP private data pd.
 * Errors: UW_EINVAL (inconsistent policy), UW_EMPA_PD_LENGTH. */
int uw_mpa_request(const uw_mpa_policy *pol, const void *pd, size_t pd_len, uw_mpa_frame *req);

/* Responder: decides the Reply to req. With reject, the Reply has R set and
 * the function still returns 0. pd is the ULP private data for the Reply.
 * Errors (params undefined unless noted): UW_EMPA_REV (revision we cannot
 * speak; close without a Reply, code 4), UW_EMPA_IRD (the initiator's IRD is
 * below pol->ord_min; *rep is a reject frame naming the ORD needed, code 6),
 * UW_EMPA_RTR (p2p asked but we accept no RTR type, code 7), UW_EINVAL,
 * UW_EMPA_PD_LENGTH. */
int uw_mpa_respond(const uw_mpa_policy *pol, const uw_mpa_frame *req, bool reject, const void *pd,
                   size_t pd_len, uw_mpa_frame *rep, uw_mpa_params *params);

/* Initiator: checks the Reply rep to our Request req and gives the connection
 * parameters. Errors: UW_ECONNREFUSED (R set; params hold the peer's IRD/ORD),
 * UW_EMPA_REV / UW_EMPA_NOT_ENHANCED / UW_EMPA_ENH_UNEXPECTED (code 4),
 * UW_EMPA_IRD (the responder's ORD exceeds our ird_max, code 6), UW_EMPA_RTR
 * (no RTR type in common or the connection model differs, code 7), UW_EINVAL. */
int uw_mpa_accept_reply(const uw_mpa_policy *pol, const uw_mpa_frame *req, const uw_mpa_frame *rep,
                        uw_mpa_params *params);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
