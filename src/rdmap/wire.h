/* DDP (RFC 5041) and RDMAP (RFC 5040) wire formats: headers, the RDMA Read
 * Request payload and the Terminate message. Pure byte-cursor codecs, no
 * state; every layout is big-endian and written octet by octet. */
#ifndef UW_RDMAP_WIRE_H
#define UW_RDMAP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/term_table.h"
#include "uwarp/verbs.h"

enum uw__opcode {
    UW__OP_WRITE = 0,
    UW__OP_READ_REQ = 1,
    UW__OP_READ_RESP = 2,
    UW__OP_SEND = 3,
    UW__OP_SEND_INV = 4,
    UW__OP_SEND_SE = 5,
    UW__OP_SEND_SE_INV = 6,
    UW__OP_TERMINATE = 7,
};

#define UW__DDP_TAGGED_HLEN 14u
#define UW__DDP_UNTAGGED_HLEN 18u
#define UW__READ_REQ_LEN 28u
#define UW__TERM_CTRL_LEN 4u
/* Control word, segment length, the longest DDP header and a Read Request. */
#define UW__TERM_MAX_LEN (UW__TERM_CTRL_LEN + 2u + UW__DDP_UNTAGGED_HLEN + UW__READ_REQ_LEN)

enum { UW__QN_SEND = 0, UW__QN_READ = 1, UW__QN_TERM = 2 };

typedef struct uw__ddp_hdr {
    bool tagged, last;
    uint8_t dv;           /* DDP version */
    uint8_t rv;           /* RDMAP version */
    uint8_t opcode;       /* enum uw__opcode */
    uint8_t rsvd;         /* the reserved control bits, as received */
    uint32_t stag;        /* tagged: STag; untagged: Invalidate STag (RDMAP field) */
    uint64_t to;          /* tagged */
    uint32_t qn, msn, mo; /* untagged */
} uw__ddp_hdr;

typedef struct uw__read_req {
    uint32_t sink_stag;
    uint64_t sink_to;
    uint32_t size;
    uint32_t src_stag;
    uint64_t src_to;
} uw__read_req;

typedef struct uw__term_msg {
    uw_term term;
    bool m, d, r;     /* segment length / DDP header / RDMAP header included */
    bool quirk;       /* the control octet was read in Linux siw's order */
    uint16_t seg_len; /* when m */
    uint8_t ddp_hdr[UW__DDP_UNTAGGED_HLEN];
    uint8_t ddp_hdr_len; /* when d: 14 or 18 */
    uint8_t rdmap_hdr[UW__READ_REQ_LEN];
} uw__term_msg;

/* Header length implied by the first control octet (14 tagged, 18 untagged). */
static inline size_t uw__ddp_hlen(uint8_t ctrl0)
{
    return (ctrl0 & 0x80u) ? UW__DDP_TAGGED_HLEN : UW__DDP_UNTAGGED_HLEN;
}

/* Writes h's header (14 or 18 octets) to out; returns the length. */
size_t uw__ddp_hdr_encode(const uw__ddp_hdr *h, uint8_t *out);
/* Decodes a header from p (len octets available). Returns its length, or
 * UW_EAGAIN when len is short. Field values are not judged here. */
int uw__ddp_hdr_decode(const uint8_t *p, size_t len, uw__ddp_hdr *h);

void uw__read_req_encode(const uw__read_req *r, uint8_t out[UW__READ_REQ_LEN]);
void uw__read_req_decode(const uint8_t in[UW__READ_REQ_LEN], uw__read_req *r);

/* Encodes a Terminate payload (control word and the included headers).
 * Returns its length. */
size_t uw__term_encode(const uw__term_msg *t, uint8_t *out);
/* Decodes a Terminate payload of len octets. Lenient about the control
 * octet's nibble order (Linux siw writes Layer and Error Type swapped); see
 * wire.c. Errors: UW_EPROTO (shorter than its flags promise). */
int uw__term_decode(const uint8_t *p, size_t len, uw__term_msg *t);

/* uw__term_valid() and uw__term_for_error(): util/term_table.h. */

static inline void uw__put16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void uw__put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void uw__put64(uint8_t *p, uint64_t v)
{
    uw__put32(p, (uint32_t)(v >> 32));
    uw__put32(p + 4, (uint32_t)v);
}
static inline uint32_t uw__get16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}
static inline uint32_t uw__get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t uw__get64(const uint8_t *p)
{
    return (uint64_t)uw__get32(p) << 32 | uw__get32(p + 4);
}

#endif
