/* DDP/RDMAP header, Read Request and Terminate codecs (RFC 5041 4, RFC 5040 4). */
#include <string.h>

#include "rdmap/wire.h"

size_t uw__ddp_hdr_encode(const uw__ddp_hdr *h, uint8_t *out)
{
    /* RFC 5041 4.2: T | L | reserved(4) | DV(2); RFC 5040 4.2: RV(2) | rsvd(2) | opcode(4). */
    out[0] = (uint8_t)((h->tagged ? 0x80u : 0) | (h->last ? 0x40u : 0) | (h->dv & 3u));
    out[1] = (uint8_t)((h->rv & 3u) << 6 | (h->opcode & 0xFu));
    uw__put32(out + 2, h->stag);
    if (h->tagged) {
        uw__put64(out + 6, h->to);
        return UW__DDP_TAGGED_HLEN;
    }
    uw__put32(out + 6, h->qn);
    uw__put32(out + 10, h->msn);
    uw__put32(out + 14, h->mo);
    return UW__DDP_UNTAGGED_HLEN;
}

int uw__ddp_hdr_decode(const uint8_t *p, size_t len, uw__ddp_hdr *h)
{
    if (len < 2 || len < uw__ddp_hlen(p[0]))
        return UW_EAGAIN;
    memset(h, 0, sizeof(*h));
    h->tagged = (p[0] & 0x80u) != 0;
    h->last = (p[0] & 0x40u) != 0;
    h->dv = p[0] & 3u;
    h->rsvd = (uint8_t)((p[0] >> 2) & 0xFu);
    h->rv = p[1] >> 6;
    h->opcode = p[1] & 0xFu;
    h->stag = uw__get32(p + 2);
    if (h->tagged) {
        h->to = uw__get64(p + 6);
        return (int)UW__DDP_TAGGED_HLEN;
    }
    h->qn = uw__get32(p + 6);
    h->msn = uw__get32(p + 10);
    h->mo = uw__get32(p + 14);
    return (int)UW__DDP_UNTAGGED_HLEN;
}

void uw__read_req_encode(const uw__read_req *r, uint8_t out[UW__READ_REQ_LEN])
{
    uw__put32(out, r->sink_stag);
    uw__put64(out + 4, r->sink_to);
    uw__put32(out + 12, r->size);
    uw__put32(out + 16, r->src_stag);
    uw__put64(out + 20, r->src_to);
}

void uw__read_req_decode(const uint8_t in[UW__READ_REQ_LEN], uw__read_req *r)
{
    r->sink_stag = uw__get32(in);
    r->sink_to = uw__get64(in + 4);
    r->size = uw__get32(in + 12);
    r->src_stag = uw__get32(in + 16);
    r->src_to = uw__get64(in + 20);
}

size_t uw__term_encode(const uw__term_msg *t, uint8_t *out)
{
    out[0] = (uint8_t)((t->term.layer & 0xFu) << 4 | (t->term.etype & 0xFu));
    out[1] = t->term.ecode;
    out[2] = (uint8_t)((t->m ? 0x80u : 0) | (t->d ? 0x40u : 0) | (t->r ? 0x20u : 0));
    out[3] = 0;
    size_t n = UW__TERM_CTRL_LEN;
    if (t->d) {
        /* RFC 5040 4.8: the segment length field precedes the header when D is set. */
        uw__put16(out + n, t->m ? t->seg_len : 0);
        n += 2;
        memcpy(out + n, t->ddp_hdr, t->ddp_hdr_len);
        n += t->ddp_hdr_len;
    }
    if (t->r) {
        memcpy(out + n, t->rdmap_hdr, UW__READ_REQ_LEN);
        n += UW__READ_REQ_LEN;
    }
    return n;
}

int uw__term_decode(const uint8_t *p, size_t len, uw__term_msg *t)
{
    memset(t, 0, sizeof(*t));
    if (len < UW__TERM_CTRL_LEN)
        return UW_EPROTO;
    uw_term rfc = {(uint8_t)(p[0] >> 4), (uint8_t)(p[0] & 0xFu), p[1]};
    uw_term swapped = {(uint8_t)(p[0] & 0xFu), (uint8_t)(p[0] >> 4), p[1]};
    t->m = (p[2] & 0x80u) != 0;
    t->d = (p[2] & 0x40u) != 0;
    t->r = (p[2] & 0x20u) != 0;
    /* Linux siw declares the control field with little-endian bitfields and
     * so writes Layer in the low nibble: its LLP/MPA Terminates start 0x02
     * where RFC 5040 order gives 0x20. Take the RFC reading unless only the
     * swapped one is defined, or both are and the swapped one is an LLP
     * error without headers (RDMAP remote-operation errors, the RFC reading of
     * such an octet, come with the offending headers). */
    bool rv = uw__term_valid(rfc), sv = uw__term_valid(swapped);
    if ((!rv && sv) || (rv && sv && swapped.layer == UW_TERM_LLP && !t->d && !t->r &&
                        rfc.layer != swapped.layer)) {
        t->term = swapped;
        t->quirk = true;
    } else {
        t->term = rfc;
    }
    size_t n = UW__TERM_CTRL_LEN;
    if (t->d) {
        if (len < n + 2 + 1)
            return UW_EPROTO;
        t->seg_len = (uint16_t)uw__get16(p + n);
        n += 2;
        size_t hl = uw__ddp_hlen(p[n]);
        if (len < n + hl)
            return UW_EPROTO;
        memcpy(t->ddp_hdr, p + n, hl);
        t->ddp_hdr_len = (uint8_t)hl;
        n += hl;
    }
    if (t->r) {
        if (len < n + UW__READ_REQ_LEN)
            return UW_EPROTO;
        memcpy(t->rdmap_hdr, p + n, UW__READ_REQ_LEN);
    }
    return 0;
}
