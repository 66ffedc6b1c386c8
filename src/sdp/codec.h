/* SDP message codec (draft-pinkerton-iwarp-sdp-01 section 6).
 *
 * Wire layout as ../shared/specs/sdp-iwarp-notes.md section 1 reads the
 * figures: each header word's bit 0 is its least significant bit and words go
 * on the wire most significant octet first, so the BSDH starts with MID and
 * the Hello header with MajV in the high nibble (octet-compatible with
 * InfiniBand SDP).
 *
 * Pure functions: no allocation, no state; safe from any thread.
 */
#ifndef UW_SDP_CODEC_H
#define UW_SDP_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define UW_SDP_BSDH_LEN 16u
#define UW_SDP_HH_LEN 16u
#define UW_SDP_HAH_LEN 12u
#define UW_SDP_SRCAH_LEN 16u
#define UW_SDP_SINKAH_LEN 20u
#define UW_SDP_RWCH_LEN 4u /* also RRCH, CRBH, CRBAH */
#define UW_SDP_MCH_LEN 4u
#define UW_SDP_SUSPCH_LEN 8u
#define UW_SDP_HELLO_LEN (UW_SDP_BSDH_LEN + UW_SDP_HH_LEN)     /* 32 */
#define UW_SDP_HELLOACK_LEN (UW_SDP_BSDH_LEN + UW_SDP_HAH_LEN) /* 28 */
/* Section 10 rule 4: every Private Buffer holds at least a BSDH, the largest
 * extended header (SinkAH) and one octet. */
#define UW_SDP_MIN_BUF (UW_SDP_BSDH_LEN + UW_SDP_SINKAH_LEN + 1u) /* 37 */
/* Largest header a message can have (BSDH + SinkAH). */
#define UW_SDP_MAX_HDR (UW_SDP_BSDH_LEN + UW_SDP_SINKAH_LEN)
#define UW_SDP_MAX_ADVERT_LEN 0x80000000u /* 6.3.2.1 / 6.3.3.1: Len <= 2^31 */

/* Figure 3. */
enum uw_sdp_mid {
    UW_SDP_HELLO = 0x00,
    UW_SDP_HELLOACK = 0x01,
    UW_SDP_DISCONN = 0x02,
    UW_SDP_ABORTCONN = 0x03,
    UW_SDP_SENDSM = 0x04,
    UW_SDP_RDMAWRCOMPL = 0x05,
    UW_SDP_RDMARDCOMPL = 0x06,
    UW_SDP_MODECHANGE = 0x07,
    UW_SDP_SRCAVAILCANCEL = 0x08,
    UW_SDP_SINKAVAILCANCEL = 0x09,
    UW_SDP_SINKCANCELACK = 0x0A,
    UW_SDP_CHRCVBUF = 0x0B,
    UW_SDP_CHRCVBUFACK = 0x0C,
    UW_SDP_SUSPCOMM = 0x0D,
    UW_SDP_SUSPCOMMACK = 0x0E,
    UW_SDP_EXP_FIRST = 0x40, /* 0x40-0x7F: experimental, optional payload */
    UW_SDP_EXP_LAST = 0x7F,
    UW_SDP_SINKAVAIL = 0xFD,
    UW_SDP_SRCAVAIL = 0xFE,
    UW_SDP_DATA = 0xFF,
};

/* Figure 4 (BSDH Flags); bits 3-7 are sent as zero and not checked. */
#define UW_SDP_OOB_PRES 0x01u
#define UW_SDP_OOB_PEND 0x02u
#define UW_SDP_REQ_PIPE 0x04u
#define UW_SDP_FLAGS_KNOWN 0x07u

/* Figure 12. */
enum uw_sdp_mode { UW_SDP_BUFF_MODE = 0, UW_SDP_COMB_MODE = 1, UW_SDP_PIPE_MODE = 2 };

typedef struct uw_sdp_bsdh {
    uint8_t mid;
    uint8_t flags;
    uint16_t bufs;
    uint32_t len; /* whole message: BSDH + extended header + payload */
    uint32_t mseq;
    uint32_t mseqack;
} uw_sdp_bsdh;

typedef struct uw_sdp_hh { /* Hello (Figure 5) */
    uint8_t majv, minv;    /* 4 bits each */
    uint16_t max_adverts;
    uint32_t des_rem_rcv_sz;
    uint32_t local_rcv_sz;
    uint16_t loc_ird, loc_ord;
} uw_sdp_hh;

typedef struct uw_sdp_hah { /* HelloAck (Figure 6) */
    uint8_t majv, minv;
    uint16_t max_adverts;
    uint32_t act_rcv_sz;
    uint16_t loc_ird, loc_ord;
} uw_sdp_hah;

typedef struct uw_sdp_avail { /* SrcAH (Figure 7) and SinkAH (Figure 8) */
    uint32_t len;
    uint32_t stag;
    uint64_t va;
    uint32_t non_discards; /* SinkAH only */
} uw_sdp_avail;

typedef struct uw_sdp_susp { /* SuspCH (Figure 15) */
    uint32_t constant1;      /* 0 */
    uint16_t constant2;      /* 1 */
    uint16_t dst_port;
} uw_sdp_susp;

/* One decoded message. The extended header in use depends on bsdh.mid. */
typedef struct uw_sdp_msg {
    uw_sdp_bsdh bsdh;
    union {
        uw_sdp_hh hello;
        uw_sdp_hah helloack;
        uw_sdp_avail avail; /* SRCAVAIL, SINKAVAIL */
        uint32_t value;     /* RWCH Len, RRCH Len, CRBH DesSz, CRBAH ActSz */
        struct {
            uint8_t mode; /* enum uw_sdp_mode (reserved values rejected) */
            bool s;       /* 1: change the send half-connection */
        } mch;
        uw_sdp_susp susp;
    } u;
    const uint8_t *payload; /* points into the decoded buffer; NULL when none */
    uint32_t payload_len;
} uw_sdp_msg;

/* Length of the extended header for mid (0 for none), or a negative
 * UW_EPROTO for a reserved MID. */
int uw__sdp_ext_len(uint8_t mid);
/* Whether a message with this MID may carry ULP payload (Data, SrcAvail,
 * SinkAvail, experimental). */
bool uw__sdp_mid_has_payload(uint8_t mid);
/* "Data", "HelloAck", ..., "Experimental", "Reserved". Static string. */
const char *uw__sdp_mid_name(uint8_t mid);

/* Decodes one SDP message of exactly len octets (an iWARP Send's payload, or
 * the Hello in MPA private data). Errors, *out untouched except on success:
 *   UW_EMSGSIZE  len shorter than the BSDH plus the MID's extended header;
 *   UW_EPROTO    reserved MID, BSDH Len != len, payload on a MID that takes
 *                none, OOB_PRES outside a Data message or on a Data message
 *                without payload, reserved Mode in a ModeChange, SrcAvail or
 *                SinkAvail Len of 0 or above 2^31, SuspComm constants wrong.
 * Reserved bits (Flags 3-7, Rsvd fields) are not checked. */
int uw__sdp_decode(const uint8_t *buf, size_t len, uw_sdp_msg *out);

/* Encodes the BSDH and extended header of m (m->bsdh.len must already count
 * the payload) into out; the payload itself is not copied. Returns the header
 * length written, or UW_EINVAL (reserved MID, Len smaller than the headers,
 * payload length inconsistent with a MID that takes none), UW_ENOBUFS (cap
 * too small). Reserved fields are written as zero. */
ssize_t uw__sdp_encode_hdr(const uw_sdp_msg *m, uint8_t *out, size_t cap);

/* 32-bit sequence arithmetic (section 5 WrapSubtract, RFC 1982 style):
 * a - b as a signed distance. */
static inline int32_t uw__sdp_seq_diff(uint32_t a, uint32_t b)
{
    return (int32_t)(a - b);
}

#endif
