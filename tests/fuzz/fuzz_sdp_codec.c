/* Fuzz target: SDP message codec (draft-pinkerton-iwarp-sdp-01 section 6,
 * src/sdp/codec.h).
 *
 * Octet mode: the whole input is one SDP message (one iWARP Send's payload).
 * A reference classifier written here from Figure 3 and the section 6 field
 * rules, without the library's MID table, predicts the result of
 * uw__sdp_decode exactly; on error the output must be untouched. On success
 * the decoded fields must agree with the input (payload inside it and
 * payload_len = Len - headers), and re-encoding the header must give the
 * input's header octets back except for the reserved bits the encoder writes
 * as zero (Flags 3-7, HH/HAH Rsvd, MCH Rsvd).
 *
 * Struct mode: the same input also fills a uw_sdp_msg field by field, plus a
 * buffer capacity; uw__sdp_encode_hdr must fail exactly as codec.h says, and
 * what it writes must decode back to the same fields whenever those fields
 * are ones the decoder accepts. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "sdp/codec.h"
#include "uwarp/error.h"

/* Figure 3, extended header length per MID; -1 for reserved. */
static int ref_ext_len(unsigned mid)
{
    switch (mid) {
    case 0x00:
        return 16; /* HH */
    case 0x01:
        return 12; /* HAH */
    case 0x05:     /* RWCH */
    case 0x06:     /* RRCH */
    case 0x07:     /* MCH */
    case 0x0B:     /* CRBH */
    case 0x0C:     /* CRBAH */
        return 4;
    case 0x0D:
        return 8; /* SuspCH */
    case 0xFD:
        return 20; /* SinkAH */
    case 0xFE:
        return 16; /* SrcAH */
    default:
        break;
    }
    if (mid <= 0x0E || (mid >= 0x40 && mid <= 0x7F) || mid == 0xFF)
        return 0;
    return -1;
}

static bool ref_takes_payload(unsigned mid)
{
    return mid >= 0xFD || (mid >= 0x40 && mid <= 0x7F);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int ref_decode_rc(const uint8_t *d, size_t n)
{
    if (n < 16)
        return UW_EMSGSIZE;
    int ext = ref_ext_len(d[0]);
    if (ext < 0)
        return UW_EPROTO;
    size_t hdr = 16 + (size_t)ext;
    if (n < hdr)
        return UW_EMSGSIZE;
    if (be32(d + 4) != n)
        return UW_EPROTO;
    size_t pl = n - hdr;
    if (pl && !ref_takes_payload(d[0]))
        return UW_EPROTO;
    if ((d[1] & 1) && (d[0] != 0xFF || pl == 0))
        return UW_EPROTO;
    const uint8_t *x = d + 16;
    switch (d[0]) {
    case 0x07:
        return ((x[0] >> 4) & 7) > 2 ? UW_EPROTO : 0;
    case 0xFD:
    case 0xFE:
        return be32(x) == 0 || be32(x) > 0x80000000u ? UW_EPROTO : 0;
    case 0x0D:
        return be32(x) != 0 || x[4] != 0 || x[5] != 1 ? UW_EPROTO : 0;
    default:
        return 0;
    }
}

static void octet_mode(const uint8_t *data, size_t size)
{
    uw_sdp_msg m, before;
    memset(&m, 0x5A, sizeof(m));
    before = m;
    int rc = uw__sdp_decode(data, size, &m);
    int want_rc = ref_decode_rc(data, size);
    FZ_DEBUG("octet: size %zu mid 0x%02x rc %d want %d\n", size, size ? data[0] : 0, rc, want_rc);
    FZ_CHECK(rc == want_rc);
    if (size > 0) {
        int ext = ref_ext_len(data[0]);
        FZ_CHECK(uw__sdp_ext_len(data[0]) == (ext < 0 ? UW_EPROTO : ext));
        FZ_CHECK(uw__sdp_mid_has_payload(data[0]) == (ext >= 0 && ref_takes_payload(data[0])));
        FZ_CHECK((strcmp(uw__sdp_mid_name(data[0]), "Reserved") == 0) == (ext < 0));
    }
    if (rc != 0) {
        FZ_CHECK(memcmp(&m, &before, sizeof(m)) == 0);
        return;
    }
    size_t hdr = 16 + (size_t)ref_ext_len(data[0]);
    FZ_CHECK(m.bsdh.mid == data[0] && m.bsdh.flags == (data[1] & 7));
    FZ_CHECK(m.bsdh.len == size);
    FZ_CHECK(m.payload_len == size - hdr);
    if (m.payload_len == 0) {
        FZ_CHECK(m.payload == NULL);
    } else {
        FZ_CHECK(m.payload == data + hdr);
        FZ_CHECK(m.payload + m.payload_len == data + size);
    }
    uint8_t out[UW_SDP_MAX_HDR], want[UW_SDP_MAX_HDR];
    FZ_CHECK(uw__sdp_encode_hdr(&m, out, sizeof(out)) == (ssize_t)hdr);
    memcpy(want, data, hdr);
    want[1] &= 7; /* Figure 4: Flags bits 3-7 */
    if (data[0] == UW_SDP_HELLO || data[0] == UW_SDP_HELLOACK)
        want[17] = 0; /* 6.2.1.8 / 6.2.2.7: Rsvd */
    if (data[0] == UW_SDP_MODECHANGE) {
        want[16] &= 0xF0; /* 6.3.8.3: Rsvd */
        memset(want + 17, 0, 3);
    }
    FZ_CHECK(memcmp(out, want, hdr) == 0);
}

static void struct_mode(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    uint8_t sel = fz_u8(&in);
    m.bsdh.mid = fz_u8(&in);
    m.bsdh.flags = fz_u8(&in);
    m.bsdh.bufs = fz_u16(&in);
    m.bsdh.mseq = fz_u32(&in);
    m.bsdh.mseqack = fz_u32(&in);
    uint32_t raw_len = fz_u32(&in);
    uint8_t plen = fz_u8(&in);
    size_t cap = fz_u8(&in) % (UW_SDP_MAX_HDR + 4);
    uint8_t ext[20];
    for (size_t i = 0; i < sizeof(ext); i++)
        ext[i] = fz_u8(&in);
    int e = ref_ext_len(m.bsdh.mid);
    uint32_t hdr = 16 + (uint32_t)(e < 0 ? 0 : e);
    /* Mostly consistent lengths, so that the success paths are reached. */
    m.payload_len = (sel & 1) ? plen : 0;
    m.bsdh.len = (sel & 2) ? raw_len : hdr + m.payload_len;
    if (m.bsdh.mid == UW_SDP_HELLO) {
        m.u.hello.majv = ext[0] >> 4;
        m.u.hello.minv = ext[0] & 15;
        m.u.hello.max_adverts = (uint16_t)(ext[1] << 8 | ext[2]);
        m.u.hello.des_rem_rcv_sz = be32(ext + 3);
        m.u.hello.local_rcv_sz = be32(ext + 7);
        m.u.hello.loc_ird = (uint16_t)(ext[11] << 8 | ext[12]);
        m.u.hello.loc_ord = (uint16_t)(ext[13] << 8 | ext[14]);
    } else if (m.bsdh.mid == UW_SDP_HELLOACK) {
        m.u.helloack.majv = ext[0] >> 4;
        m.u.helloack.minv = ext[0] & 15;
        m.u.helloack.max_adverts = (uint16_t)(ext[1] << 8 | ext[2]);
        m.u.helloack.act_rcv_sz = be32(ext + 3);
        m.u.helloack.loc_ird = (uint16_t)(ext[7] << 8 | ext[8]);
        m.u.helloack.loc_ord = (uint16_t)(ext[9] << 8 | ext[10]);
    } else if (m.bsdh.mid == UW_SDP_MODECHANGE) {
        m.u.mch.mode = ext[0] & 7;
        m.u.mch.s = ext[0] & 0x80;
    } else if (m.bsdh.mid == UW_SDP_SUSPCOMM) {
        m.u.susp.constant1 = be32(ext); /* ignored: the encoder writes 0, 1 */
        m.u.susp.constant2 = (uint16_t)(ext[4] << 8 | ext[5]);
        m.u.susp.dst_port = (uint16_t)(ext[6] << 8 | ext[7]);
    } else if (m.bsdh.mid == UW_SDP_SRCAVAIL || m.bsdh.mid == UW_SDP_SINKAVAIL) {
        m.u.avail.len = be32(ext);
        m.u.avail.stag = be32(ext + 4);
        m.u.avail.va = (uint64_t)be32(ext + 8) << 32 | be32(ext + 12);
        m.u.avail.non_discards = m.bsdh.mid == UW_SDP_SINKAVAIL ? be32(ext + 16) : 0;
    } else {
        m.u.value = be32(ext);
    }

    uint8_t out[UW_SDP_MAX_HDR + 256];
    memset(out, 0xEE, sizeof(out));
    ssize_t rc = uw__sdp_encode_hdr(&m, out, cap);
    bool takes = ref_takes_payload(m.bsdh.mid);
    ssize_t want_rc;
    if (e < 0 || m.bsdh.len < hdr || (!takes && (m.bsdh.len != hdr || m.payload_len != 0)))
        want_rc = UW_EINVAL;
    else if (cap < hdr)
        want_rc = UW_ENOBUFS;
    else
        want_rc = (ssize_t)hdr;
    FZ_DEBUG("struct: mid 0x%02x len %u cap %zu rc %zd want %zd\n", m.bsdh.mid, m.bsdh.len, cap, rc,
             want_rc);
    FZ_CHECK(rc == want_rc);
    /* Nothing is written on error, nor past the header on success. */
    for (size_t i = rc > 0 ? (size_t)rc : 0; i < sizeof(out); i++)
        FZ_CHECK(out[i] == 0xEE);
    if (rc < 0)
        return;
    /* BSDH as given, Flags 3-7 zeroed (Figure 4). */
    FZ_CHECK(out[0] == m.bsdh.mid && out[1] == (m.bsdh.flags & 7) && be32(out + 4) == m.bsdh.len);
    if (m.bsdh.len - hdr > sizeof(out) - hdr)
        return;
    size_t n = m.bsdh.len;
    memset(out + hdr, 0x3C, n - hdr);
    uw_sdp_msg d;
    int drc = uw__sdp_decode(out, n, &d);
    FZ_CHECK(drc == ref_decode_rc(out, n));
    if (drc != 0)
        return;
    FZ_CHECK(d.bsdh.mid == m.bsdh.mid && d.bsdh.flags == (m.bsdh.flags & 7) &&
             d.bsdh.bufs == m.bsdh.bufs && d.bsdh.len == m.bsdh.len && d.bsdh.mseq == m.bsdh.mseq &&
             d.bsdh.mseqack == m.bsdh.mseqack && d.payload_len == n - hdr);
    switch (m.bsdh.mid) {
    case UW_SDP_HELLO:
        FZ_CHECK(memcmp(&d.u.hello, &m.u.hello, sizeof(m.u.hello)) == 0);
        break;
    case UW_SDP_HELLOACK:
        FZ_CHECK(memcmp(&d.u.helloack, &m.u.helloack, sizeof(m.u.helloack)) == 0);
        break;
    case UW_SDP_MODECHANGE:
        FZ_CHECK(d.u.mch.mode == m.u.mch.mode && d.u.mch.s == m.u.mch.s);
        break;
    case UW_SDP_SUSPCOMM:
        FZ_CHECK(d.u.susp.constant1 == 0 && d.u.susp.constant2 == 1 &&
                 d.u.susp.dst_port == m.u.susp.dst_port);
        break;
    case UW_SDP_SRCAVAIL:
    case UW_SDP_SINKAVAIL:
        FZ_CHECK(d.u.avail.len == m.u.avail.len && d.u.avail.stag == m.u.avail.stag &&
                 d.u.avail.va == m.u.avail.va && d.u.avail.non_discards == m.u.avail.non_discards);
        break;
    case UW_SDP_RDMAWRCOMPL:
    case UW_SDP_RDMARDCOMPL:
    case UW_SDP_CHRCVBUF:
    case UW_SDP_CHRCVBUFACK:
        FZ_CHECK(d.u.value == m.u.value);
        break;
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    octet_mode(data, size);
    struct_mode(data, size);
    return 0;
}
