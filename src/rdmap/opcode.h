/* What each RDMAP opcode (RFC 5040 4.3, RFC 7306 9) is on the wire and what
 * the receiver does with it: one const table indexed by the 4-bit opcode,
 * read by both directions. The transmitter takes the buffer model, header
 * length and queue from it; the receiver judges a header against it and then
 * calls the opcode's handlers, once when the header is complete and once
 * when the FPDU has been verified. Payload placement is not dispatched per
 * opcode: it follows the destination the header handler chose. */
#ifndef UW_RDMAP_OPCODE_H
#define UW_RDMAP_OPCODE_H

#include <stdbool.h>
#include <stdint.h>

#include "rdmap/wire.h"

struct uw__rdmap;

enum {
    UW__OPF_SE = 1u << 0,  /* Solicited Event */
    UW__OPF_INV = 1u << 1, /* carries an STag to invalidate */
};

struct uw__opinfo {
    bool valid;    /* uwarp takes it; the others are an unexpected opcode */
    bool tagged;   /* DDP buffer model */
    uint8_t hlen;  /* DDP header octets */
    uint8_t qn;    /* untagged: the only queue it may arrive on */
    uint8_t fixed; /* RDMAP octets after the header the opcode fixes (Read Request) */
    uint8_t flags; /* UW__OPF_* */
    /* The header (already judged against this row, MSN and MO included) is
     * complete and the segment carries len payload octets: check what only
     * this opcode knows and choose rd->rx.dest. Returns a fault, reported
     * once the CRC is good, or 0. */
    int (*rx_hdr)(struct uw__rdmap *rd, uint32_t len);
    /* The segment is verified: act on it. Returns a fault for which the
     * caller sends a Terminate, or UW_ETERM_RECEIVED (dead: nothing is
     * sent). */
    int (*rx_end)(struct uw__rdmap *rd);
};

extern const struct uw__opinfo uw__optab[16];

/* The Send opcode with these properties (RFC 5040 4.3: 3 to 6). */
static inline uint8_t uw__send_opcode(bool se, bool inv)
{
    static const uint8_t op[2][2] = {{UW__OP_SEND, UW__OP_SEND_INV},
                                     {UW__OP_SEND_SE, UW__OP_SEND_SE_INV}};
    return op[se][inv];
}

#endif
