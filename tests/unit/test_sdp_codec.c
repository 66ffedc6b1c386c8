/* SDP message codec (draft-pinkerton-iwarp-sdp-01 section 6, wire layout as
 * ../shared/specs/sdp-iwarp-notes.md section 1 reads it): byte-exact header
 * layouts including the notes' Hello example, round trips of every MID,
 * every rejection rule, reserved bits ignored, encoder errors, and the
 * sequence-number arithmetic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "sdp/codec.h"
#include "testutil.h"
#include "uwarp/error.h"

#define BUFSZ 512

static bool valid_mid(unsigned mid)
{
    return mid <= 0x0E || (mid >= 0x40 && mid <= 0x7F) || mid >= 0xFD;
}

static uint32_t hdr_len(uint8_t mid)
{
    int e = uw__sdp_ext_len(mid);
    assert_true(e >= 0);
    return UW_SDP_BSDH_LEN + (uint32_t)e;
}

/* A message of the given MID with every field non-trivial and distinct, and
 * (when the MID takes payload) payload_len octets of payload. */
static uw_sdp_msg sample(uint8_t mid, uint32_t payload_len)
{
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    m.bsdh.mid = mid;
    m.bsdh.flags = UW_SDP_OOB_PEND | UW_SDP_REQ_PIPE;
    if (mid == UW_SDP_DATA && payload_len > 0)
        m.bsdh.flags |= UW_SDP_OOB_PRES;
    m.bsdh.bufs = (uint16_t)(0xA1B2u + mid);
    m.bsdh.mseq = 0xC3D4E5F6u ^ mid;
    m.bsdh.mseqack = 0x01234567u + mid;
    switch (mid) {
    case UW_SDP_HELLO:
        m.u.hello = (uw_sdp_hh){.majv = 0xA,
                                .minv = 0x5,
                                .max_adverts = 0xBEEF,
                                .des_rem_rcv_sz = 0x80000000u,
                                .local_rcv_sz = 0x12345678u,
                                .loc_ird = 0x1122,
                                .loc_ord = 0x3344};
        break;
    case UW_SDP_HELLOACK:
        m.u.helloack = (uw_sdp_hah){.majv = 0xF,
                                    .minv = 0x3,
                                    .max_adverts = 0xFFFF,
                                    .act_rcv_sz = 0xCAFEBABEu,
                                    .loc_ird = 0x5566,
                                    .loc_ord = 0x7788};
        break;
    case UW_SDP_RDMAWRCOMPL:
    case UW_SDP_RDMARDCOMPL:
    case UW_SDP_CHRCVBUF:
    case UW_SDP_CHRCVBUFACK:
        m.u.value = 0xF00DF00Du - mid;
        break;
    case UW_SDP_MODECHANGE:
        m.u.mch.mode = UW_SDP_PIPE_MODE;
        m.u.mch.s = true;
        break;
    case UW_SDP_SUSPCOMM:
        m.u.susp = (uw_sdp_susp){.constant1 = 0, .constant2 = 1, .dst_port = 0xABCD};
        break;
    case UW_SDP_SRCAVAIL:
    case UW_SDP_SINKAVAIL:
        m.u.avail.len = 0x7FFFFFF3u;
        m.u.avail.stag = 0xDEADBEEFu;
        m.u.avail.va = 0x0102030405060708ull;
        m.u.avail.non_discards = mid == UW_SDP_SINKAVAIL ? 0x9ABCDEF0u : 0;
        break;
    default:
        break;
    }
    m.payload_len = uw__sdp_mid_has_payload(mid) ? payload_len : 0;
    m.bsdh.len = hdr_len(mid) + m.payload_len;
    return m;
}

static void assert_msg_equal(const uw_sdp_msg *a, const uw_sdp_msg *b)
{
    assert_int_equal(a->bsdh.mid, b->bsdh.mid);
    assert_int_equal(a->bsdh.flags, b->bsdh.flags);
    assert_int_equal(a->bsdh.bufs, b->bsdh.bufs);
    assert_int_equal(a->bsdh.len, b->bsdh.len);
    assert_int_equal(a->bsdh.mseq, b->bsdh.mseq);
    assert_int_equal(a->bsdh.mseqack, b->bsdh.mseqack);
    assert_int_equal(a->payload_len, b->payload_len);
    switch (a->bsdh.mid) {
    case UW_SDP_HELLO:
        assert_memory_equal(&a->u.hello, &b->u.hello, sizeof(a->u.hello));
        break;
    case UW_SDP_HELLOACK:
        assert_memory_equal(&a->u.helloack, &b->u.helloack, sizeof(a->u.helloack));
        break;
    case UW_SDP_RDMAWRCOMPL:
    case UW_SDP_RDMARDCOMPL:
    case UW_SDP_CHRCVBUF:
    case UW_SDP_CHRCVBUFACK:
        assert_int_equal(a->u.value, b->u.value);
        break;
    case UW_SDP_MODECHANGE:
        assert_int_equal(a->u.mch.mode, b->u.mch.mode);
        assert_int_equal(a->u.mch.s, b->u.mch.s);
        break;
    case UW_SDP_SUSPCOMM:
        assert_int_equal(a->u.susp.constant1, b->u.susp.constant1);
        assert_int_equal(a->u.susp.constant2, b->u.susp.constant2);
        assert_int_equal(a->u.susp.dst_port, b->u.susp.dst_port);
        break;
    case UW_SDP_SRCAVAIL:
    case UW_SDP_SINKAVAIL:
        assert_int_equal(a->u.avail.len, b->u.avail.len);
        assert_int_equal(a->u.avail.stag, b->u.avail.stag);
        assert_true(a->u.avail.va == b->u.avail.va);
        assert_int_equal(a->u.avail.non_discards, b->u.avail.non_discards);
        break;
    default:
        break;
    }
}

/* Encodes m's headers into buf and appends payload_len octets of pattern;
 * returns the message length. */
static size_t build(const uw_sdp_msg *m, uint8_t *buf)
{
    ssize_t h = uw__sdp_encode_hdr(m, buf, BUFSZ);
    assert_int_equal(h, hdr_len(m->bsdh.mid));
    assert_true((size_t)h + m->payload_len <= BUFSZ);
    for (uint32_t i = 0; i < m->payload_len; i++)
        buf[h + i] = (uint8_t)(0x30 + i * 7);
    return (size_t)h + m->payload_len;
}

static void set_len(uint8_t *buf, uint32_t len)
{
    buf[4] = (uint8_t)(len >> 24);
    buf[5] = (uint8_t)(len >> 16);
    buf[6] = (uint8_t)(len >> 8);
    buf[7] = (uint8_t)len;
}

/* Decodes and expects err, with *out untouched (codec.h). */
static void expect_reject(const uint8_t *buf, size_t len, int err)
{
    uw_sdp_msg d, before;
    memset(&d, 0xA5, sizeof(d));
    before = d;
    assert_int_equal(uw__sdp_decode(buf, len, &d), err);
    assert_memory_equal(&d, &before, sizeof(d));
}

static void expect_accept(const uint8_t *buf, size_t len, uw_sdp_msg *out)
{
    assert_int_equal(uw__sdp_decode(buf, len, out), 0);
}

/* ------------------------------------------------------------------------ */

/* Notes section 1: the worked Hello example, both directions. */
static void test_hello_example(void **state)
{
    (void)state;
    uint8_t want[UW_SDP_HELLO_LEN], got[UW_SDP_HELLO_LEN];
    assert_int_equal(tu_unhex("00 00 00 04  00 00 00 20  00 00 00 00  00 00 00 00"
                              "11 00 00 08  00 01 00 00  00 01 00 00  00 02 00 04",
                              want, sizeof(want)),
                     UW_SDP_HELLO_LEN);
    uw_sdp_msg m;
    memset(&m, 0, sizeof(m));
    m.bsdh.mid = UW_SDP_HELLO;
    m.bsdh.bufs = 4;
    m.bsdh.len = UW_SDP_HELLO_LEN;
    m.u.hello = (uw_sdp_hh){.majv = 1,
                            .minv = 1,
                            .max_adverts = 8,
                            .des_rem_rcv_sz = 65536,
                            .local_rcv_sz = 65536,
                            .loc_ird = 4,
                            .loc_ord = 2};
    assert_int_equal(uw__sdp_encode_hdr(&m, got, sizeof(got)), UW_SDP_HELLO_LEN);
    assert_memory_equal(got, want, UW_SDP_HELLO_LEN);
    uw_sdp_msg d;
    expect_accept(want, sizeof(want), &d);
    assert_msg_equal(&d, &m);
    assert_int_equal(d.u.hello.loc_ird, 4);
    assert_int_equal(d.u.hello.loc_ord, 2);
    assert_null(d.payload);
}

/* The rest of the notes' table, octet by octet, one header at a time. */
static void test_header_layouts(void **state)
{
    (void)state;
    static const struct {
        uint8_t mid;
        const char *hex;
    } vec[] = {
        /* BSDH: MID, Flags, Bufs, Len, MSeq, MSeqAck. HAH: version, Rsvd,
         * MaxAdverts, ActRcvSz, LocORD, LocIRD. */
        {UW_SDP_HELLOACK, "01 06 a1b3 0000001c c3d4e5f7 01234568"
                          "f3 00 ffff cafebabe 7788 5566"},
        {UW_SDP_RDMAWRCOMPL, "05 06 a1b7 00000014 c3d4e5f3 0123456c f00df008"},
        {UW_SDP_RDMARDCOMPL, "06 06 a1b8 00000014 c3d4e5f0 0123456d f00df007"},
        {UW_SDP_CHRCVBUF, "0b 06 a1bd 00000014 c3d4e5fd 01234572 f00df002"},
        {UW_SDP_CHRCVBUFACK, "0c 06 a1be 00000014 c3d4e5fa 01234573 f00df001"},
        /* MCH: S<<7 | Mode<<4, PIPE_MODE with S. */
        {UW_SDP_MODECHANGE, "07 06 a1b9 00000014 c3d4e5f1 0123456e a0 000000"},
        /* SuspCH: Constant1 0, Constant2 1, port. */
        {UW_SDP_SUSPCOMM, "0d 06 a1bf 00000018 c3d4e5fb 01234574 00000000 0001 abcd"},
        /* SrcAH: Len, STag, VA high word first; 3 payload octets follow. */
        {UW_SDP_SRCAVAIL, "fe 06 a2b0 00000023 c3d4e508 01234665"
                          "7ffffff3 deadbeef 01020304 05060708 30373e"},
        /* SinkAH adds NonDiscards. */
        {UW_SDP_SINKAVAIL, "fd 06 a2af 00000027 c3d4e50b 01234664"
                           "7ffffff3 deadbeef 01020304 05060708 9abcdef0 30373e"},
        {UW_SDP_DATA, "ff 07 a2b1 00000013 c3d4e509 01234666 30373e"},
        {0x55, "55 06 a207 00000013 c3d4e5a3 012345bc 30373e"},
        {UW_SDP_DISCONN, "02 06 a1b4 00000010 c3d4e5f4 01234569"},
    };
    for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
        uint8_t want[64], got[BUFSZ];
        long n = tu_unhex(vec[i].hex, want, sizeof(want));
        assert_true(n > 0);
        uw_sdp_msg m = sample(vec[i].mid, 3);
        assert_int_equal(build(&m, got), (size_t)n);
        assert_memory_equal(got, want, (size_t)n);
        uw_sdp_msg d;
        expect_accept(want, (size_t)n, &d);
        assert_msg_equal(&d, &m);
    }
}

/* Every MID of Figure 3 through encode and decode, with and without
 * payload where the MID allows it. */
static void test_roundtrip_every_mid(void **state)
{
    (void)state;
    unsigned seen = 0;
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid))
            continue;
        seen++;
        static const uint32_t plens[] = {0, 1, 200};
        for (size_t k = 0; k < 3; k++) {
            uw_sdp_msg m = sample((uint8_t)mid, plens[k]), d;
            uint8_t buf[BUFSZ];
            size_t n = build(&m, buf);
            expect_accept(buf, n, &d);
            assert_msg_equal(&d, &m);
            assert_int_equal(d.payload_len, n - hdr_len((uint8_t)mid));
            if (d.payload_len) {
                assert_ptr_equal(d.payload, buf + hdr_len((uint8_t)mid));
            } else {
                assert_null(d.payload);
            }
        }
    }
    assert_int_equal(seen, 15 + 64 + 3);
}

/* Random field values through the round trip (fields that must stay in
 * range are forced into it). */
static void test_roundtrip_random(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(0x5D9));
    for (int it = 0; it < 20000; it++) {
        uint8_t mid;
        do
            mid = (uint8_t)tu_rng_next(&r);
        while (!valid_mid(mid));
        uw_sdp_msg m;
        tu_rng_fill(&r, &m, sizeof(m));
        m.payload = NULL;
        m.bsdh.mid = mid;
        m.bsdh.flags &= UW_SDP_FLAGS_KNOWN;
        m.payload_len = uw__sdp_mid_has_payload(mid) ? (uint32_t)tu_rng_below(&r, 64) : 0;
        if (mid != UW_SDP_DATA || m.payload_len == 0)
            m.bsdh.flags &= (uint8_t)~UW_SDP_OOB_PRES;
        m.bsdh.len = hdr_len(mid) + m.payload_len;
        if (mid == UW_SDP_HELLO) {
            m.u.hello.majv &= 15;
            m.u.hello.minv &= 15;
        } else if (mid == UW_SDP_HELLOACK) {
            m.u.helloack.majv &= 15;
            m.u.helloack.minv &= 15;
        } else if (mid == UW_SDP_MODECHANGE) {
            m.u.mch.mode = (uint8_t)tu_rng_below(&r, 3);
            m.u.mch.s = tu_rng_below(&r, 2);
        } else if (mid == UW_SDP_SUSPCOMM) {
            m.u.susp.constant1 = 0;
            m.u.susp.constant2 = 1;
        } else if (mid == UW_SDP_SRCAVAIL || mid == UW_SDP_SINKAVAIL) {
            m.u.avail.len = 1 + (uint32_t)tu_rng_below(&r, UW_SDP_MAX_ADVERT_LEN);
            if (mid == UW_SDP_SRCAVAIL)
                m.u.avail.non_discards = 0;
        }
        uint8_t buf[BUFSZ];
        size_t n = build(&m, buf);
        uw_sdp_msg d;
        expect_accept(buf, n, &d);
        assert_msg_equal(&d, &m);
    }
}

/* Too short for the BSDH, or for the MID's extended header: UW_EMSGSIZE at
 * every length below the headers, whatever Len says. */
static void test_too_short(void **state)
{
    (void)state;
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid))
            continue;
        uw_sdp_msg m = sample((uint8_t)mid, 0);
        uint8_t buf[BUFSZ];
        size_t n = build(&m, buf);
        for (size_t cut = 0; cut < n; cut++) {
            expect_reject(buf, cut, UW_EMSGSIZE);
            uint8_t b2[BUFSZ];
            memcpy(b2, buf, n);
            set_len(b2, (uint32_t)cut); /* Len agreeing with the short length */
            expect_reject(b2, cut, UW_EMSGSIZE);
        }
    }
    /* A reserved MID shorter than a BSDH is still "too short". */
    uint8_t z[UW_SDP_BSDH_LEN] = {0x20};
    expect_reject(z, UW_SDP_BSDH_LEN - 1, UW_EMSGSIZE);
}

/* 6.1.4: Len must equal the message's length, both ways. */
static void test_len_mismatch(void **state)
{
    (void)state;
    static const uint32_t plens[] = {0, 5};
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid))
            continue;
        for (size_t k = 0; k < 2; k++) {
            uw_sdp_msg m = sample((uint8_t)mid, plens[k]);
            uint8_t buf[BUFSZ];
            size_t n = build(&m, buf);
            uint32_t bad[] = {(uint32_t)n + 1, (uint32_t)n - 1, 0, UINT32_MAX,
                              (uint32_t)n + 0x10000u};
            for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
                set_len(buf, bad[j]);
                expect_reject(buf, n, UW_EPROTO);
            }
            /* The buffer holding more than Len says is a mismatch too. */
            set_len(buf, (uint32_t)n);
            buf[n] = 0;
            expect_reject(buf, n + 1, UW_EPROTO);
        }
    }
}

/* Figure 3: 0x0F-0x3F and 0x80-0xFC are reserved; their neighbours are not. */
static void test_reserved_mids(void **state)
{
    (void)state;
    uint8_t buf[BUFSZ];
    memset(buf, 0, sizeof(buf));
    set_len(buf, UW_SDP_BSDH_LEN);
    static const uint8_t edges[] = {0x0F, 0x3F, 0x80, 0xFC};
    for (size_t i = 0; i < sizeof(edges); i++) {
        buf[0] = edges[i];
        expect_reject(buf, UW_SDP_BSDH_LEN, UW_EPROTO);
        expect_reject(buf, UW_SDP_MAX_HDR + 8, UW_EPROTO);
    }
    for (unsigned mid = 0; mid < 256; mid++) {
        bool reserved = (mid >= 0x0F && mid <= 0x3F) || (mid >= 0x80 && mid <= 0xFC);
        assert_int_equal(reserved, !valid_mid(mid));
        assert_int_equal(uw__sdp_ext_len((uint8_t)mid) == UW_EPROTO, reserved);
        if (reserved) {
            buf[0] = (uint8_t)mid;
            expect_reject(buf, UW_SDP_BSDH_LEN, UW_EPROTO);
            assert_false(uw__sdp_mid_has_payload((uint8_t)mid));
            assert_string_equal(uw__sdp_mid_name((uint8_t)mid), "Reserved");
            uw_sdp_msg m = sample(UW_SDP_DISCONN, 0);
            m.bsdh.mid = (uint8_t)mid;
            assert_int_equal(uw__sdp_encode_hdr(&m, buf, sizeof(buf)), UW_EINVAL);
        }
    }
    /* The neighbours 0x0E, 0x40, 0x7F, 0xFD decode. */
    static const uint8_t ok[] = {0x0E, 0x40, 0x7F, 0xFD};
    for (size_t i = 0; i < sizeof(ok); i++) {
        uw_sdp_msg m = sample(ok[i], 0), d;
        size_t n = build(&m, buf);
        expect_accept(buf, n, &d);
        assert_int_equal(d.bsdh.mid, ok[i]);
    }
}

static void test_mid_table(void **state)
{
    (void)state;
    static const struct {
        uint8_t mid;
        int ext;
        bool payload;
        const char *name;
    } t[] = {
        {0x00, 16, false, "Hello"},         {0x01, 12, false, "HelloAck"},
        {0x02, 0, false, "DisConn"},        {0x03, 0, false, "AbortConn"},
        {0x04, 0, false, "SendSm"},         {0x05, 4, false, "RdmaWrCompl"},
        {0x06, 4, false, "RdmaRdCompl"},    {0x07, 4, false, "ModeChange"},
        {0x08, 0, false, "SrcAvailCancel"}, {0x09, 0, false, "SinkAvailCancel"},
        {0x0A, 0, false, "SinkCancelAck"},  {0x0B, 4, false, "ChRcvBuf"},
        {0x0C, 4, false, "ChRcvBufAck"},    {0x0D, 8, false, "SuspComm"},
        {0x0E, 0, false, "SuspCommAck"},    {0x40, 0, true, "Experimental"},
        {0x7F, 0, true, "Experimental"},    {0xFD, 20, true, "SinkAvail"},
        {0xFE, 16, true, "SrcAvail"},       {0xFF, 0, true, "Data"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        assert_int_equal(uw__sdp_ext_len(t[i].mid), t[i].ext);
        assert_int_equal(uw__sdp_mid_has_payload(t[i].mid), t[i].payload);
        assert_string_equal(uw__sdp_mid_name(t[i].mid), t[i].name);
    }
}

/* Figure 3 "none": payload after a header-only MID is rejected on decode
 * and refused on encode. */
static void test_payload_on_no_payload_mid(void **state)
{
    (void)state;
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid) || uw__sdp_mid_has_payload((uint8_t)mid))
            continue;
        uw_sdp_msg m = sample((uint8_t)mid, 0);
        uint8_t buf[BUFSZ];
        size_t n = build(&m, buf);
        memset(buf + n, 0x77, 100);
        for (size_t extra = 1; extra <= 100; extra += 99) {
            set_len(buf, (uint32_t)(n + extra));
            expect_reject(buf, n + extra, UW_EPROTO);
        }
        uw_sdp_msg e = m;
        e.bsdh.len++;
        assert_int_equal(uw__sdp_encode_hdr(&e, buf, sizeof(buf)), UW_EINVAL);
        e = m;
        e.payload_len = 1;
        assert_int_equal(uw__sdp_encode_hdr(&e, buf, sizeof(buf)), UW_EINVAL);
    }
}

/* 6.1.2: OOB_PRES only in a Data message, and only with payload to mark. */
static void test_oob_pres(void **state)
{
    (void)state;
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid) || mid == UW_SDP_DATA)
            continue;
        uw_sdp_msg m = sample((uint8_t)mid, 4);
        uint8_t buf[BUFSZ];
        size_t n = build(&m, buf);
        buf[1] |= UW_SDP_OOB_PRES;
        expect_reject(buf, n, UW_EPROTO);
        buf[1] = UW_SDP_OOB_PRES; /* alone, too */
        expect_reject(buf, n, UW_EPROTO);
    }
    uw_sdp_msg m = sample(UW_SDP_DATA, 0), d;
    uint8_t buf[BUFSZ];
    size_t n = build(&m, buf);
    assert_int_equal(n, UW_SDP_BSDH_LEN);
    buf[1] = UW_SDP_OOB_PRES;
    expect_reject(buf, n, UW_EPROTO);
    /* One octet of payload: that octet is the OOB octet. */
    m = sample(UW_SDP_DATA, 1);
    n = build(&m, buf);
    buf[1] = UW_SDP_OOB_PRES;
    expect_accept(buf, n, &d);
    assert_int_equal(d.bsdh.flags, UW_SDP_OOB_PRES);
    assert_int_equal(d.payload_len, 1);
    /* OOB_PEND and REQ_PIPE are allowed in any message (6.1.2). */
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid))
            continue;
        m = sample((uint8_t)mid, 0);
        n = build(&m, buf);
        buf[1] = UW_SDP_OOB_PEND | UW_SDP_REQ_PIPE;
        expect_accept(buf, n, &d);
    }
}

/* Figure 12: modes 3-7 are reserved. */
static void test_modechange_modes(void **state)
{
    (void)state;
    for (unsigned s = 0; s < 2; s++) {
        for (unsigned mode = 0; mode < 8; mode++) {
            uw_sdp_msg m = sample(UW_SDP_MODECHANGE, 0), d;
            uint8_t buf[BUFSZ];
            size_t n = build(&m, buf);
            buf[UW_SDP_BSDH_LEN] = (uint8_t)(s << 7 | mode << 4);
            if (mode <= UW_SDP_PIPE_MODE) {
                expect_accept(buf, n, &d);
                assert_int_equal(d.u.mch.mode, mode);
                assert_int_equal(d.u.mch.s, s);
            } else {
                expect_reject(buf, n, UW_EPROTO);
            }
        }
    }
    /* The two the brief names, spelled out. */
    uint8_t b3[20], b7[20];
    assert_int_equal(tu_unhex("07000000 00000014 00000000 00000000 30000000", b3, 20), 20);
    assert_int_equal(tu_unhex("07000000 00000014 00000000 00000000 f0000000", b7, 20), 20);
    expect_reject(b3, 20, UW_EPROTO);
    expect_reject(b7, 20, UW_EPROTO);
}

/* 6.3.2.1 / 6.3.3.1: 0 < Len <= 2^31. */
static void test_avail_len(void **state)
{
    (void)state;
    static const struct {
        uint32_t len;
        int rc;
    } t[] = {
        {0, UW_EPROTO},           {1, 0},
        {0x7FFFFFFFu, 0},         {0x80000000u, 0},
        {0x80000001u, UW_EPROTO}, {0xFFFFFFFFu, UW_EPROTO},
    };
    static const uint8_t mids[] = {UW_SDP_SRCAVAIL, UW_SDP_SINKAVAIL};
    for (size_t k = 0; k < 2; k++) {
        for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
            uw_sdp_msg m = sample(mids[k], 2), d;
            m.u.avail.len = t[i].len; /* the encoder writes it as given */
            uint8_t buf[BUFSZ];
            size_t n = build(&m, buf);
            if (t[i].rc) {
                expect_reject(buf, n, t[i].rc);
            } else {
                expect_accept(buf, n, &d);
                assert_int_equal(d.u.avail.len, t[i].len);
            }
        }
    }
}

/* 6.5.1.2 / 6.5.1.3: Constant1 = 0, Constant2 = 1. */
static void test_suspcomm_constants(void **state)
{
    (void)state;
    uw_sdp_msg m = sample(UW_SDP_SUSPCOMM, 0), d;
    m.u.susp.constant1 = 77; /* the encoder writes the fixed constants */
    m.u.susp.constant2 = 9;
    uint8_t good[BUFSZ], buf[BUFSZ];
    size_t n = build(&m, good);
    expect_accept(good, n, &d);
    assert_int_equal(d.u.susp.constant1, 0);
    assert_int_equal(d.u.susp.constant2, 1);
    assert_int_equal(d.u.susp.dst_port, 0xABCD);
    for (size_t i = 0; i < 4; i++) { /* any bit of Constant1 */
        memcpy(buf, good, n);
        buf[UW_SDP_BSDH_LEN + i] = (uint8_t)(1u << i);
        expect_reject(buf, n, UW_EPROTO);
    }
    static const uint16_t c2[] = {0, 2, 0x0100, 0x0101, 0xFFFF};
    for (size_t i = 0; i < sizeof(c2) / sizeof(c2[0]); i++) {
        memcpy(buf, good, n);
        buf[UW_SDP_BSDH_LEN + 4] = (uint8_t)(c2[i] >> 8);
        buf[UW_SDP_BSDH_LEN + 5] = (uint8_t)c2[i];
        expect_reject(buf, n, UW_EPROTO);
    }
    /* The port is free, including 0 and 65535. */
    for (unsigned port = 0; port <= 0xFFFF; port += 0xFFFF) {
        memcpy(buf, good, n);
        buf[UW_SDP_BSDH_LEN + 6] = (uint8_t)(port >> 8);
        buf[UW_SDP_BSDH_LEN + 7] = (uint8_t)port;
        expect_accept(buf, n, &d);
        assert_int_equal(d.u.susp.dst_port, port);
    }
}

/* Figure 4 bits 3-7, HH/HAH Rsvd (6.2.1.8, 6.2.2.7) and MCH Rsvd (6.3.8.3):
 * "not checked" on receive, zero on send. */
static void test_reserved_bits_ignored(void **state)
{
    (void)state;
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid))
            continue;
        uw_sdp_msg m = sample((uint8_t)mid, 3), d;
        uint8_t clean[BUFSZ], buf[BUFSZ], again[BUFSZ];
        size_t n = build(&m, clean);
        memcpy(buf, clean, n);
        buf[1] |= 0xF8;
        if (mid == UW_SDP_HELLO || mid == UW_SDP_HELLOACK)
            buf[UW_SDP_BSDH_LEN + 1] = 0xFF;
        if (mid == UW_SDP_MODECHANGE) {
            buf[UW_SDP_BSDH_LEN] |= 0x0F;
            memset(buf + UW_SDP_BSDH_LEN + 1, 0xFF, 3);
        }
        expect_accept(buf, n, &d);
        assert_msg_equal(&d, &m); /* reserved bits read back as zero */
        /* Re-encoding gives the clean octets back, also when the caller's
         * flags have reserved bits set. */
        assert_int_equal(build(&d, again), n);
        assert_memory_equal(again, clean, n);
        d.bsdh.flags |= 0xF8;
        assert_int_equal(build(&d, again), n);
        assert_memory_equal(again, clean, n);
    }
}

/* codec.h: encode refuses a too small buffer before writing anything. */
static void test_encode_enobufs(void **state)
{
    (void)state;
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid))
            continue;
        uw_sdp_msg m = sample((uint8_t)mid, 9);
        uint32_t h = hdr_len((uint8_t)mid);
        uint8_t buf[BUFSZ];
        for (size_t cap = 0; cap < h; cap++) {
            memset(buf, 0xEE, sizeof(buf));
            assert_int_equal(uw__sdp_encode_hdr(&m, buf, cap), UW_ENOBUFS);
            for (size_t i = 0; i < sizeof(buf); i++)
                assert_int_equal(buf[i], 0xEE);
        }
        /* Exactly the header suffices (the payload is not copied), and
         * nothing past it is written. */
        memset(buf, 0xEE, sizeof(buf));
        assert_int_equal(uw__sdp_encode_hdr(&m, buf, h), (ssize_t)h);
        for (size_t i = h; i < sizeof(buf); i++)
            assert_int_equal(buf[i], 0xEE);
    }
}

static void test_encode_einval(void **state)
{
    (void)state;
    uint8_t buf[BUFSZ];
    for (unsigned mid = 0; mid < 256; mid++) {
        if (!valid_mid(mid))
            continue;
        uw_sdp_msg m = sample((uint8_t)mid, 0);
        uint32_t h = hdr_len((uint8_t)mid);
        for (uint32_t len = 0; len < h; len++) {
            m.bsdh.len = len;
            assert_int_equal(uw__sdp_encode_hdr(&m, buf, sizeof(buf)), UW_EINVAL);
        }
        /* EINVAL wins over ENOBUFS: the message is wrong whatever the room. */
        m.bsdh.len = h - 1;
        assert_int_equal(uw__sdp_encode_hdr(&m, buf, 0), UW_EINVAL);
    }
    uw_sdp_msg m = sample(UW_SDP_DATA, 0);
    assert_int_equal(uw__sdp_encode_hdr(NULL, buf, sizeof(buf)), UW_EINVAL);
    assert_int_equal(uw__sdp_encode_hdr(&m, NULL, sizeof(buf)), UW_EINVAL);
    /* Largest legal Len for a payload MID. */
    m.bsdh.len = UINT32_MAX;
    assert_int_equal(uw__sdp_encode_hdr(&m, buf, sizeof(buf)), UW_SDP_BSDH_LEN);
}

/* Section 5 WrapSubtract: a signed distance across the 2^32 wrap. */
static void test_seq_diff(void **state)
{
    (void)state;
    assert_int_equal(uw__sdp_seq_diff(5, 5), 0);
    assert_int_equal(uw__sdp_seq_diff(6, 5), 1);
    assert_int_equal(uw__sdp_seq_diff(5, 6), -1);
    assert_int_equal(uw__sdp_seq_diff(0, 0xFFFFFFFFu), 1);
    assert_int_equal(uw__sdp_seq_diff(0xFFFFFFFFu, 0), -1);
    assert_int_equal(uw__sdp_seq_diff(1, 0xFFFFFFFEu), 3);
    assert_int_equal(uw__sdp_seq_diff(0xFFFFFFFEu, 1), -3);
    assert_int_equal(uw__sdp_seq_diff(0x7FFFFFFFu, 0), INT32_MAX);
    assert_int_equal(uw__sdp_seq_diff(0, 0x7FFFFFFFu), -INT32_MAX);
    assert_true(uw__sdp_seq_diff(0x80000000u, 0) == INT32_MIN);
    assert_true(uw__sdp_seq_diff(0, 0x80000000u) == INT32_MIN);
    assert_int_equal(uw__sdp_seq_diff(0x80000005u, 6), INT32_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hello_example),
        cmocka_unit_test(test_header_layouts),
        cmocka_unit_test(test_roundtrip_every_mid),
        cmocka_unit_test(test_roundtrip_random),
        cmocka_unit_test(test_too_short),
        cmocka_unit_test(test_len_mismatch),
        cmocka_unit_test(test_reserved_mids),
        cmocka_unit_test(test_mid_table),
        cmocka_unit_test(test_payload_on_no_payload_mid),
        cmocka_unit_test(test_oob_pres),
        cmocka_unit_test(test_modechange_modes),
        cmocka_unit_test(test_avail_len),
        cmocka_unit_test(test_suspcomm_constants),
        cmocka_unit_test(test_reserved_bits_ignored),
        cmocka_unit_test(test_encode_enobufs),
        cmocka_unit_test(test_encode_einval),
        cmocka_unit_test(test_seq_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
