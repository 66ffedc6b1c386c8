/* Fuzz target: the Terminate codec (rdmap/wire.c) and its names.
 *
 * Input:  b0  bit0 also run the round trip on a message built from the input
 *         rest    decoded as a received Terminate payload (the octets after
 *                 the untagged DDP header); for the round trip, the same
 *                 octets give layer/type/code, flags, segment length, the DDP
 *                 header and the Read Request header
 *
 * Checked for arbitrary octets: uw__term_decode() returns 0 or UW_EPROTO and
 * reads exactly what its flags promise (the shortest accepted prefix is
 * 4 + [2 + 14 or 18 when D] + [28 when R] octets, one less fails, and every
 * longer input decodes the same); the code it reports is the RFC 5040 nibble
 * order or Linux siw's swapped order, following the documented rule;
 * uw_term_describe() names exactly the codes uw__term_valid() accepts.
 * Round trip: decode(encode(t)) gives t back (flags, segment length when
 * both M and D, headers), except that a code only the swapped reading
 * explains, or an ambiguous header-less one whose swapped reading is an LLP
 * error, is read in siw's order, as documented.
 * Once per process: every code for every internal fault the QP can report
 * (uw__term_for_error) is defined, and with the header policy of
 * uw__qp_terminate (headers for DDP/RDMAP errors) survives the round trip. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rdmap/wire.h"
#include "uwarp/error.h"
#include "uwarp/verbs.h"

static bool term_eq(uw_term a, uw_term b)
{
    return a.layer == b.layer && a.etype == b.etype && a.ecode == b.ecode;
}

/* The reading the decoder documents for a control octet c0 and code c1. */
static uw_term expected_reading(uint8_t c0, uint8_t c1, bool d, bool r, bool *quirk)
{
    uw_term rfc = {(uint8_t)(c0 >> 4), (uint8_t)(c0 & 15), c1};
    uw_term sw = {(uint8_t)(c0 & 15), (uint8_t)(c0 >> 4), c1};
    bool rv = uw__term_valid(rfc), sv = uw__term_valid(sw);
    *quirk = (!rv && sv) ||
             (rv && sv && sw.layer == UW_TERM_LLP && rfc.layer != UW_TERM_LLP && !d && !r);
    return *quirk ? sw : rfc;
}

static void check_describe(uw_term t)
{
    const char *s = uw_term_describe(t);
    FZ_CHECK(s != NULL && s[0] != '\0');
    bool undefined = strcmp(s, "undefined Terminate code") == 0;
    FZ_CHECK(undefined == !uw__term_valid(t));
}

static void once(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    /* Names for all 16 x 16 x 256 combinations. */
    for (unsigned l = 0; l < 16; l++)
        for (unsigned e = 0; e < 16; e++)
            for (unsigned c = 0; c < 256; c++)
                check_describe((uw_term){(uint8_t)l, (uint8_t)e, (uint8_t)c});
    /* Every internal fault in the protocol ranges. */
    for (int err = -4200; err <= -4000; err++) {
        for (int tagged = 0; tagged < 2; tagged++) {
            uw_term t = uw__term_for_error(err, tagged);
            FZ_CHECK(uw__term_valid(t));
            uw__term_msg m;
            memset(&m, 0, sizeof(m));
            m.term = t;
            if (t.layer != UW_TERM_LLP) {
                m.m = m.d = true;
                m.seg_len = 30;
                m.ddp_hdr_len = tagged ? 14 : 18;
                m.ddp_hdr[0] = tagged ? 0xC1 : 0x41;
            }
            uint8_t buf[UW__TERM_MAX_LEN];
            size_t n = uw__term_encode(&m, buf);
            uw__term_msg back;
            FZ_CHECK(uw__term_decode(buf, n, &back) == 0);
            if (!term_eq(back.term, t)) {
                FZ_DEBUG("fault %d: sent %u/%u/%u, read back %u/%u/%u\n", err, t.layer, t.etype,
                         t.ecode, back.term.layer, back.term.etype, back.term.ecode);
                FZ_CHECK(!"a Terminate we send is misread by our own decoder");
            }
        }
    }
}

static size_t needed(const uint8_t *p, size_t len)
{
    size_t n = 4;
    if (p[2] & 0x40) {
        if (len < 7)
            return 7;
        n += 2 + ((p[6] & 0x80) ? 14 : 18);
    }
    if (p[2] & 0x20)
        n += 28;
    return n;
}

static void check_decode(const uint8_t *p, size_t len)
{
    uw__term_msg t;
    int rc = uw__term_decode(p, len, &t);
    FZ_CHECK(rc == 0 || rc == UW_EPROTO);
    if (len < 4) {
        FZ_CHECK(rc == UW_EPROTO);
        return;
    }
    size_t need = needed(p, len);
    FZ_CHECK((rc == 0) == (len >= need));
    if (rc != 0)
        return;
    FZ_CHECK(t.m == ((p[2] & 0x80) != 0));
    FZ_CHECK(t.d == ((p[2] & 0x40) != 0));
    FZ_CHECK(t.r == ((p[2] & 0x20) != 0));
    bool quirk;
    uw_term want = expected_reading(p[0], p[1], t.d, t.r, &quirk);
    FZ_CHECK(term_eq(t.term, want));
    FZ_CHECK(t.quirk == quirk);
    check_describe(t.term);
    if (t.d) {
        FZ_CHECK(t.ddp_hdr_len == ((p[6] & 0x80) ? 14 : 18));
        FZ_CHECK(t.seg_len == (uint16_t)(p[4] << 8 | p[5]));
        FZ_CHECK(memcmp(t.ddp_hdr, p + 6, t.ddp_hdr_len) == 0);
    } else {
        FZ_CHECK(t.ddp_hdr_len == 0);
    }
    if (t.r)
        FZ_CHECK(memcmp(t.rdmap_hdr, p + need - 28, 28) == 0);
    /* Exactly need octets are read: one less fails, more changes nothing. */
    uw__term_msg s;
    uint8_t *cut = malloc(need);
    FZ_CHECK(cut != NULL);
    memcpy(cut, p, need);
    FZ_CHECK(uw__term_decode(cut, need, &s) == 0);
    FZ_CHECK(memcmp(&s, &t, sizeof(s)) == 0);
    FZ_CHECK(uw__term_decode(cut, need - 1, &s) == UW_EPROTO);
    free(cut);
}

static void check_roundtrip(const uint8_t *p, size_t len)
{
    fz_in in;
    fz_in_init(&in, p, len);
    uw__term_msg t;
    memset(&t, 0, sizeof(t));
    t.term.layer = fz_u8(&in) & 15;
    t.term.etype = fz_u8(&in) & 15;
    t.term.ecode = fz_u8(&in);
    uint8_t fl = fz_u8(&in);
    t.m = fl & 1;
    t.d = fl & 2;
    t.r = fl & 4;
    t.seg_len = fz_u16(&in);
    t.ddp_hdr_len = (fl & 8) ? 14 : 18;
    for (int i = 0; i < t.ddp_hdr_len; i++)
        t.ddp_hdr[i] = fz_u8(&in);
    /* The header's own T bit decides its length on the wire. */
    t.ddp_hdr[0] = (uint8_t)((t.ddp_hdr[0] & 0x7F) | ((fl & 8) ? 0x80 : 0));
    for (unsigned i = 0; i < UW__READ_REQ_LEN; i++)
        t.rdmap_hdr[i] = fz_u8(&in);
    if (!t.d)
        t.ddp_hdr_len = 0;
    uint8_t buf[UW__TERM_MAX_LEN];
    size_t n = uw__term_encode(&t, buf);
    FZ_CHECK(n == 4 + (t.d ? 2u + t.ddp_hdr_len : 0) + (t.r ? 28u : 0));
    uw__term_msg b;
    FZ_CHECK(uw__term_decode(buf, n, &b) == 0);
    FZ_CHECK(b.m == t.m && b.d == t.d && b.r == t.r);
    bool quirk;
    uw_term want = expected_reading(buf[0], buf[1], t.d, t.r, &quirk);
    FZ_CHECK(term_eq(b.term, want));
    if (!quirk)
        FZ_CHECK(term_eq(b.term, t.term));
    if (t.d) {
        FZ_CHECK(b.seg_len == (t.m ? t.seg_len : 0));
        FZ_CHECK(b.ddp_hdr_len == t.ddp_hdr_len);
        FZ_CHECK(memcmp(b.ddp_hdr, t.ddp_hdr, t.ddp_hdr_len) == 0);
    }
    if (t.r)
        FZ_CHECK(memcmp(b.rdmap_hdr, t.rdmap_hdr, UW__READ_REQ_LEN) == 0);
    /* Encoding what was decoded gives the same octets, but for the control
     * octet when it was read in siw's order. */
    uint8_t again[UW__TERM_MAX_LEN];
    size_t n2 = uw__term_encode(&b, again);
    FZ_CHECK(n2 == n);
    FZ_CHECK(memcmp(again + 1, buf + 1, n - 1) == 0);
    FZ_CHECK(quirk || again[0] == buf[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    once();
    if (size < 1)
        return 0;
    check_decode(data + 1, size - 1);
    if (data[0] & 1)
        check_roundtrip(data + 1, size - 1);
    return 0;
}
