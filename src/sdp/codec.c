/* SDP message codec (draft-pinkerton-iwarp-sdp-01 section 6).
 *
 * Bit and byte order follow ../shared/specs/sdp-iwarp-notes.md section 1:
 * the section 6 figures number bits from the least significant end and each
 * 32-bit word travels most significant octet first. That is why the BSDH
 * starts with MID (Figure 2 draws it at the right) and why HH/HAH carry LocORD
 * before LocIRD on the wire (Figures 5 and 6 draw LocIRD at the left).
 *
 * One table entry per MID (Figure 3) gives the extended header's length,
 * whether payload may follow, and the functions that read and write that
 * extended header; decode and encode themselves are MID-agnostic. */
#include "codec.h"

#include "uwarp/error.h"

/* ------------------------------------------------------------------------ */
/* Byte cursors. Callers check the length once per header, so the readers
 * need no end pointer.                                                      */

static uint8_t get_u8(const uint8_t **p)
{
    return *(*p)++;
}

static uint16_t get_be16(const uint8_t **p)
{
    uint16_t v = (uint16_t)((unsigned)(*p)[0] << 8 | (*p)[1]);
    *p += 2;
    return v;
}

static uint32_t get_be32(const uint8_t **p)
{
    uint32_t v =
        (uint32_t)(*p)[0] << 24 | (uint32_t)(*p)[1] << 16 | (uint32_t)(*p)[2] << 8 | (*p)[3];
    *p += 4;
    return v;
}

static void put_u8(uint8_t **p, unsigned v)
{
    *(*p)++ = (uint8_t)v;
}

static void put_be16(uint8_t **p, uint16_t v)
{
    put_u8(p, v >> 8);
    put_u8(p, v & 0xFFu);
}

static void put_be32(uint8_t **p, uint32_t v)
{
    put_be16(p, (uint16_t)(v >> 16));
    put_be16(p, (uint16_t)v);
}

/* ------------------------------------------------------------------------ */
/* Extended headers. A decoder reads exactly its header's octets and returns
 * 0 or UW_EPROTO; an encoder writes exactly its header's octets.           */

/* 6.2.1.1 / 6.2.1.2: MajV in the high nibble, MinV in the low one. */
static void get_version(const uint8_t **p, uint8_t *majv, uint8_t *minv)
{
    uint8_t b = get_u8(p);
    *majv = b >> 4;
    *minv = b & 0x0Fu;
    (void)get_u8(p); /* 6.2.1.8 / 6.2.2.7: Rsvd "MUST NOT be checked" */
}

static void put_version(uint8_t **p, uint8_t majv, uint8_t minv)
{
    put_u8(p, (unsigned)(majv & 0x0Fu) << 4 | (minv & 0x0Fu));
    put_u8(p, 0); /* Rsvd */
}

static int dec_hh(const uint8_t *p, uw_sdp_msg *m)
{
    uw_sdp_hh *h = &m->u.hello;
    get_version(&p, &h->majv, &h->minv);
    h->max_adverts = get_be16(&p);
    h->des_rem_rcv_sz = get_be32(&p);
    h->local_rcv_sz = get_be32(&p);
    /* Figure 5, word 3: LocIRD occupies bits 0-15 (low half), so LocORD's
     * octets come first. */
    h->loc_ord = get_be16(&p);
    h->loc_ird = get_be16(&p);
    /* MajV, MaxAdverts, LocIRD/LocORD ranges (6.2.1.x) are connection-setup
     * decisions of section 8, not wire-format errors: left to the caller. */
    return 0;
}

static void enc_hh(const uw_sdp_msg *m, uint8_t *p)
{
    const uw_sdp_hh *h = &m->u.hello;
    put_version(&p, h->majv, h->minv);
    put_be16(&p, h->max_adverts);
    put_be32(&p, h->des_rem_rcv_sz);
    put_be32(&p, h->local_rcv_sz);
    put_be16(&p, h->loc_ord);
    put_be16(&p, h->loc_ird);
}

static int dec_hah(const uint8_t *p, uw_sdp_msg *m)
{
    uw_sdp_hah *h = &m->u.helloack;
    get_version(&p, &h->majv, &h->minv);
    h->max_adverts = get_be16(&p);
    h->act_rcv_sz = get_be32(&p);
    h->loc_ord = get_be16(&p); /* Figure 6, as Figure 5 */
    h->loc_ird = get_be16(&p);
    return 0;
}

static void enc_hah(const uw_sdp_msg *m, uint8_t *p)
{
    const uw_sdp_hah *h = &m->u.helloack;
    put_version(&p, h->majv, h->minv);
    put_be16(&p, h->max_adverts);
    put_be32(&p, h->act_rcv_sz);
    put_be16(&p, h->loc_ord);
    put_be16(&p, h->loc_ird);
}

/* RWCH, RRCH, CRBH, CRBAH (Figures 9, 10, 13, 14): one 32-bit field. */
static int dec_value(const uint8_t *p, uw_sdp_msg *m)
{
    m->u.value = get_be32(&p);
    return 0;
}

static void enc_value(const uw_sdp_msg *m, uint8_t *p)
{
    put_be32(&p, m->u.value);
}

/* Figure 11: S is bit 31 and Mode bits 28-30 of the word, so both sit in
 * octet 0; its low nibble and octets 1-3 are Rsvd (6.3.8.3, not checked). */
static int dec_mch(const uint8_t *p, uw_sdp_msg *m)
{
    unsigned mode = (p[0] >> 4) & 0x7u;
    if (mode > UW_SDP_PIPE_MODE) /* Figure 12: 3-7 reserved */
        return UW_EPROTO;
    m->u.mch.mode = (uint8_t)mode;
    m->u.mch.s = (p[0] & 0x80u) != 0;
    return 0;
}

static void enc_mch(const uw_sdp_msg *m, uint8_t *p)
{
    /* The caller's mode is not validated (codec.h lists no such error); it
     * is cut to its 3 bits so it cannot spill into S. */
    put_u8(&p, (m->u.mch.s ? 0x80u : 0u) | (unsigned)(m->u.mch.mode & 0x7u) << 4);
    put_u8(&p, 0);
    put_be16(&p, 0);
}

/* Figures 7, 8: VA(32-63) is the first word (IBTA-compatible), so the
 * 64-bit VA is simply big-endian. 6.3.2.1 / 6.3.3.1: 0 < Len <= 2^31. */
static int dec_srcah(const uint8_t *p, uw_sdp_msg *m)
{
    uw_sdp_avail *a = &m->u.avail;
    a->len = get_be32(&p);
    a->stag = get_be32(&p);
    a->va = (uint64_t)get_be32(&p) << 32;
    a->va |= get_be32(&p);
    a->non_discards = 0;
    return a->len == 0 || a->len > UW_SDP_MAX_ADVERT_LEN ? UW_EPROTO : 0;
}

static void enc_srcah(const uw_sdp_msg *m, uint8_t *p)
{
    put_be32(&p, m->u.avail.len);
    put_be32(&p, m->u.avail.stag);
    put_be32(&p, (uint32_t)(m->u.avail.va >> 32));
    put_be32(&p, (uint32_t)m->u.avail.va);
}

/* SinkAH = SrcAH + NonDiscards (6.3.3.4). */
static int dec_sinkah(const uint8_t *p, uw_sdp_msg *m)
{
    const uint8_t *q = p + UW_SDP_SRCAH_LEN;
    int rc = dec_srcah(p, m);
    m->u.avail.non_discards = get_be32(&q);
    return rc;
}

static void enc_sinkah(const uw_sdp_msg *m, uint8_t *p)
{
    uint8_t *q = p + UW_SDP_SRCAH_LEN;
    enc_srcah(m, p);
    put_be32(&q, m->u.avail.non_discards);
}

/* Figure 15 read LSB-first: Constant1, then Constant2 (bits 0-15 of word 1)
 * before the port, so Constant1:Constant2:Port is the IBTA Service ID
 * 0x0000_0000_0001_PPPP (notes section 1). 6.5.1.2 / 6.5.1.3 fix both
 * constants, and a peer sending other values is not speaking this format. */
static int dec_suspch(const uint8_t *p, uw_sdp_msg *m)
{
    uw_sdp_susp s;
    s.constant1 = get_be32(&p);
    s.constant2 = get_be16(&p);
    s.dst_port = get_be16(&p);
    if (s.constant1 != 0 || s.constant2 != 1)
        return UW_EPROTO;
    m->u.susp = s;
    return 0;
}

static void enc_suspch(const uw_sdp_msg *m, uint8_t *p)
{
    /* The constants are the format's, not the caller's: always 0 and 1. */
    put_be32(&p, 0);
    put_be16(&p, 1);
    put_be16(&p, m->u.susp.dst_port);
}

/* ------------------------------------------------------------------------ */
/* Figure 3.                                                                 */

typedef struct mid_info {
    const char *name;
    uint8_t ext_len;
    bool payload;
    int (*dec)(const uint8_t *p, uw_sdp_msg *m); /* NULL: no extended header */
    void (*enc)(const uw_sdp_msg *m, uint8_t *p);
} mid_info;

static const mid_info control_mids[] = {
    [UW_SDP_HELLO] = {"Hello", UW_SDP_HH_LEN, false, dec_hh, enc_hh},
    [UW_SDP_HELLOACK] = {"HelloAck", UW_SDP_HAH_LEN, false, dec_hah, enc_hah},
    [UW_SDP_DISCONN] = {"DisConn", 0, false, NULL, NULL},
    [UW_SDP_ABORTCONN] = {"AbortConn", 0, false, NULL, NULL},
    [UW_SDP_SENDSM] = {"SendSm", 0, false, NULL, NULL},
    [UW_SDP_RDMAWRCOMPL] = {"RdmaWrCompl", UW_SDP_RWCH_LEN, false, dec_value, enc_value},
    [UW_SDP_RDMARDCOMPL] = {"RdmaRdCompl", UW_SDP_RWCH_LEN, false, dec_value, enc_value},
    [UW_SDP_MODECHANGE] = {"ModeChange", UW_SDP_MCH_LEN, false, dec_mch, enc_mch},
    [UW_SDP_SRCAVAILCANCEL] = {"SrcAvailCancel", 0, false, NULL, NULL},
    [UW_SDP_SINKAVAILCANCEL] = {"SinkAvailCancel", 0, false, NULL, NULL},
    [UW_SDP_SINKCANCELACK] = {"SinkCancelAck", 0, false, NULL, NULL},
    [UW_SDP_CHRCVBUF] = {"ChRcvBuf", UW_SDP_RWCH_LEN, false, dec_value, enc_value},
    [UW_SDP_CHRCVBUFACK] = {"ChRcvBufAck", UW_SDP_RWCH_LEN, false, dec_value, enc_value},
    [UW_SDP_SUSPCOMM] = {"SuspComm", UW_SDP_SUSPCH_LEN, false, dec_suspch, enc_suspch},
    [UW_SDP_SUSPCOMMACK] = {"SuspCommAck", 0, false, NULL, NULL},
};

/* 0xFD-0xFF, in MID order. */
static const mid_info data_mids[] = {
    {"SinkAvail", UW_SDP_SINKAH_LEN, true, dec_sinkah, enc_sinkah},
    {"SrcAvail", UW_SDP_SRCAH_LEN, true, dec_srcah, enc_srcah},
    {"Data", 0, true, NULL, NULL},
};

/* Figure 3 gives experimental MIDs no extended header ("n/a") and optional
 * payload; their meaning is private to whoever uses them. */
static const mid_info exp_mid = {"Experimental", 0, true, NULL, NULL};

/* NULL for the reserved ranges 0x0F-0x3F and 0x80-0xFC. */
static const mid_info *mid_lookup(uint8_t mid)
{
    if (mid < sizeof(control_mids) / sizeof(control_mids[0]))
        return &control_mids[mid];
    if (mid >= UW_SDP_EXP_FIRST && mid <= UW_SDP_EXP_LAST)
        return &exp_mid;
    if (mid >= UW_SDP_SINKAVAIL)
        return &data_mids[mid - UW_SDP_SINKAVAIL];
    return NULL;
}

int uw__sdp_ext_len(uint8_t mid)
{
    const mid_info *mi = mid_lookup(mid);
    return mi ? mi->ext_len : UW_EPROTO;
}

bool uw__sdp_mid_has_payload(uint8_t mid)
{
    const mid_info *mi = mid_lookup(mid);
    return mi && mi->payload;
}

const char *uw__sdp_mid_name(uint8_t mid)
{
    const mid_info *mi = mid_lookup(mid);
    return mi ? mi->name : "Reserved";
}

/* ------------------------------------------------------------------------ */

int uw__sdp_decode(const uint8_t *buf, size_t len, uw_sdp_msg *out)
{
    if (len < UW_SDP_BSDH_LEN)
        return UW_EMSGSIZE;
    const uint8_t *p = buf;
    uw_sdp_msg m = {0};
    m.bsdh.mid = get_u8(&p);
    /* 6.1.1: a reserved MID has no defined layout, so nothing after the BSDH
     * can be read. */
    const mid_info *mi = mid_lookup(m.bsdh.mid);
    if (!mi)
        return UW_EPROTO;
    size_t hdr = UW_SDP_BSDH_LEN + mi->ext_len;
    if (len < hdr)
        return UW_EMSGSIZE;
    /* Figure 4: bits 3-7 are "not checked at receiver"; reported as zero so
     * that callers never act on them. */
    m.bsdh.flags = get_u8(&p) & UW_SDP_FLAGS_KNOWN;
    m.bsdh.bufs = get_be16(&p);
    m.bsdh.len = get_be32(&p);
    m.bsdh.mseq = get_be32(&p);
    m.bsdh.mseqack = get_be32(&p);
    /* 6.1.4: Len is the whole message. The message arrives as one iWARP
     * Send (or MPA private data), so Len must equal what arrived. */
    if (m.bsdh.len != len)
        return UW_EPROTO;
    m.payload_len = (uint32_t)(len - hdr);
    if (m.payload_len != 0 && !mi->payload)
        return UW_EPROTO; /* Figure 3: "none" after the header */
    /* 6.1.2: OOB_PRES marks the last payload octet as OOB data, so it needs
     * a Data message and at least one octet; it "MUST be zero in all other
     * SDP Message types". OOB_PEND "MAY be set ... in any SDP Message", and
     * REQ_PIPE must be ignored outside RdmaRd/WrCompl, so neither is checked. */
    if ((m.bsdh.flags & UW_SDP_OOB_PRES) && (m.bsdh.mid != UW_SDP_DATA || m.payload_len == 0))
        return UW_EPROTO;
    if (mi->dec) {
        int rc = mi->dec(p, &m);
        if (rc < 0)
            return rc;
    }
    m.payload = m.payload_len ? buf + hdr : NULL;
    *out = m;
    return 0;
}

ssize_t uw__sdp_encode_hdr(const uw_sdp_msg *m, uint8_t *out, size_t cap)
{
    if (!m || !out)
        return UW_EINVAL;
    const mid_info *mi = mid_lookup(m->bsdh.mid);
    if (!mi)
        return UW_EINVAL;
    uint32_t hdr = UW_SDP_BSDH_LEN + mi->ext_len;
    if (m->bsdh.len < hdr)
        return UW_EINVAL;
    if (!mi->payload && (m->bsdh.len != hdr || m->payload_len != 0))
        return UW_EINVAL;
    if (cap < hdr)
        return UW_ENOBUFS;
    /* Field values (OOB_PRES placement, Mode, advertised Len) are the
     * sender's protocol logic and are written as given; uw__sdp_decode is
     * where the peer's are checked. */
    uint8_t *p = out;
    put_u8(&p, m->bsdh.mid);
    put_u8(&p, m->bsdh.flags & UW_SDP_FLAGS_KNOWN); /* Figure 4: 3-7 sent as zero */
    put_be16(&p, m->bsdh.bufs);
    put_be32(&p, m->bsdh.len);
    put_be32(&p, m->bsdh.mseq);
    put_be32(&p, m->bsdh.mseqack);
    if (mi->enc)
        mi->enc(m, p);
    return (ssize_t)hdr;
}
