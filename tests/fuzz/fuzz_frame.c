/* Fuzz target: MPA Request/Reply frames (RFC 5044 7.1.1, RFC 6581 6 and 9).
 *
 * Input:  b0  bits0-1 expect (REQUEST, REPLY, ANY, or an invalid value),
 *             bit2 struct mode
 *         b1  pd_max: bit7 clear: 0..127; set: 393..520 (around 512)
 *         b2..b5 chunk seed
 *         rest    the frame octets (and whatever follows them)
 *
 * Octet mode: uw_mpa_frame_decode on the whole input and on every prefix
 * (the result never changes once it is not "need more"), and
 * uw_mpa_frame_parser fed in chunks: same result, same error, and the parser
 * consumes exactly the frame, never an octet after it. A decoded frame is
 * encoded again: the octets are the input's and decoding gives the same
 * fields.
 *
 * Struct mode: the rest fills a uw_mpa_frame field by field; encode must
 * accept it exactly when the documented rules say so, and decoding the result
 * gives the fields back. */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"

static bool frame_equal(const uw_mpa_frame *a, const uw_mpa_frame *b)
{
    return a->type == b->type && a->m == b->m && a->c == b->c && a->r == b->r && a->s == b->s &&
           a->res == b->res && a->rev == b->rev && a->pd_length == b->pd_length &&
           a->enhanced == b->enhanced && a->ird == b->ird && a->ord == b->ord && a->p2p == b->p2p &&
           a->rtr == b->rtr && a->ulp_pd_len == b->ulp_pd_len && a->ulp_pd_len <= UW_MPA_MAX_PD &&
           memcmp(a->ulp_pd, b->ulp_pd, a->ulp_pd_len) == 0;
}

static bool is_decode_error(ssize_t rc)
{
    return rc == UW_EMPA_KEY || rc == UW_EMPA_ROLE || rc == UW_EMPA_PD_LENGTH ||
           rc == UW_EMPA_PD_BUFFER || rc == UW_EMPA_ENH_WORD;
}

static void check_decoded(const uw_mpa_frame *f, const uint8_t *buf, size_t n, int expect,
                          size_t pd_max)
{
    FZ_CHECK(f->type == UW_MPA_REQUEST || f->type == UW_MPA_REPLY);
    FZ_CHECK(expect == UW_MPA_ANY || f->type == expect);
    FZ_CHECK(n == UW_MPA_FRAME_HDR_LEN + (size_t)f->pd_length);
    FZ_CHECK(f->pd_length <= pd_max && f->pd_length <= UW_MPA_MAX_PD);
    FZ_CHECK(f->rev == buf[17] && f->res == (buf[16] & 0x0F));
    FZ_CHECK(f->enhanced == (f->rev >= 2 && f->s));
    FZ_CHECK(f->ulp_pd_len == f->pd_length - (f->enhanced ? UW_MPA_ENH_WORD_LEN : 0u));
    FZ_CHECK(f->ird <= 0x3FFF && f->ord <= 0x3FFF && f->rtr <= UW_MPA_RTR_ALL);
    if (!f->enhanced)
        FZ_CHECK(f->ird == 0 && f->ord == 0 && !f->p2p && f->rtr == 0);

    /* Re-encode: the very same octets, and the same fields again. */
    uint8_t out[UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD];
    ssize_t w = uw_mpa_frame_encode(f, out, sizeof(out));
    FZ_CHECK(w == (ssize_t)n);
    FZ_CHECK(memcmp(out, buf, n) == 0);
    FZ_CHECK(uw_mpa_frame_encode(f, out, n - 1) == UW_ENOBUFS);
    uw_mpa_frame g;
    FZ_CHECK(uw_mpa_frame_decode(out, n, UW_MPA_ANY, UW_MPA_MAX_PD, &g) == (ssize_t)n);
    FZ_CHECK(frame_equal(f, &g));
}

static void octet_mode(int expect, size_t pd_max, uint32_t seed, const uint8_t *buf, size_t n)
{
    uw_mpa_frame *f = malloc(sizeof(*f));
    FZ_CHECK(f != NULL);
    ssize_t rc = uw_mpa_frame_decode(buf, n, expect, pd_max, f);
    bool valid_expect = expect == UW_MPA_REQUEST || expect == UW_MPA_REPLY || expect == UW_MPA_ANY;
    if (!valid_expect)
        FZ_CHECK(rc == UW_EINVAL);
    else
        FZ_CHECK(rc == UW_EAGAIN || rc > 0 || is_decode_error(rc));
    if (rc > 0) {
        FZ_CHECK((size_t)rc <= n);
        check_decoded(f, buf, (size_t)rc, expect, pd_max > 512 ? 512 : pd_max);
    }

    /* Prefixes: "need more" until the shortest prefix that decides, then the
     * same answer for every longer one. */
    if (valid_expect) {
        size_t lim = n < 600 ? n : 600;
        ssize_t first = UW_EAGAIN;
        size_t first_at = 0;
        uw_mpa_frame *g = malloc(sizeof(*g));
        FZ_CHECK(g != NULL);
        for (size_t k = 0; k <= lim; k++) {
            ssize_t p = uw_mpa_frame_decode(buf, k, expect, pd_max, g);
            if (first == UW_EAGAIN) {
                first = p;
                first_at = k;
            } else {
                FZ_CHECK(p == first);
            }
        }
        if (first > 0) {
            FZ_CHECK((size_t)first == first_at);
            FZ_CHECK(frame_equal(f, g));
        }
        if (n <= 600)
            FZ_CHECK(first == rc);
        free(g);
    }

    /* The parser, in chunks. */
    uw_mpa_frame_parser p;
    uw_mpa_frame_parser_init(&p, expect, pd_max);
    uw_mpa_frame *pf = malloc(sizeof(*pf));
    FZ_CHECK(pf != NULL);
    fz_rng r;
    fz_rng_init(&r, seed);
    size_t off = 0;
    ssize_t perr = 0;
    for (;;) {
        size_t len = off < n ? fz_chunk(&r, n - off) : 0;
        if (fz_rng_below(&r, 8) == 0)
            len = 0; /* empty feeds are harmless */
        ssize_t got = uw_mpa_frame_parser_feed(&p, buf + off, len, pf);
        if (got < 0) {
            perr = got;
            break;
        }
        FZ_CHECK((size_t)got <= len);
        off += (size_t)got;
        if (uw_mpa_frame_parser_done(&p))
            break;
        FZ_CHECK((size_t)got == len);
        if (off == n && len == 0)
            break;
    }
    if (rc > 0) {
        FZ_CHECK(perr == 0 && uw_mpa_frame_parser_done(&p));
        FZ_CHECK(off == (size_t)rc);
        FZ_CHECK(frame_equal(f, pf));
        /* Done: later feeds consume nothing. */
        if (off < n)
            FZ_CHECK(uw_mpa_frame_parser_feed(&p, buf + off, n - off, pf) == 0);
        FZ_CHECK(uw_mpa_frame_parser_done(&p));
    } else if (rc == UW_EAGAIN) {
        FZ_CHECK(perr == 0 && !uw_mpa_frame_parser_done(&p) && off == n);
    } else {
        FZ_CHECK(perr == rc && !uw_mpa_frame_parser_done(&p));
        FZ_CHECK(uw_mpa_frame_parser_feed(&p, buf, n, pf) == rc); /* sticky */
        FZ_CHECK(off <= n);
    }
    free(pf);
    free(f);
}

static void struct_mode(fz_in *in)
{
    uw_mpa_frame *f = malloc(sizeof(*f));
    FZ_CHECK(f != NULL);
    memset(f, 0, sizeof(*f));
    uint8_t t = fz_u8(in), fl = fz_u8(in);
    f->type = t % 4; /* 0 and 3 are invalid */
    f->m = fl & 1;
    f->c = fl & 2;
    f->r = fl & 4;
    f->s = fl & 8;
    f->enhanced = fl & 16;
    f->p2p = fl & 32;
    f->res = fz_u8(in);
    if (!(fl & 64))
        f->res &= 0x0F;
    f->rev = fz_u8(in);
    f->ird = fz_u16(in);
    f->ord = fz_u16(in);
    if (!(fl & 128)) {
        f->ird &= 0x3FFF;
        f->ord &= 0x3FFF;
    }
    f->rtr = fz_u8(in);
    if (!(t & 4))
        f->rtr &= UW_MPA_RTR_ALL;
    f->pd_length = fz_u16(in); /* ignored by encode */
    f->ulp_pd_len = fz_u16(in) % 530u;
    size_t cap = fz_u16(in) % 600u;
    if (t & 8)
        cap = 600;
    size_t have = f->ulp_pd_len < UW_MPA_MAX_PD ? f->ulp_pd_len : UW_MPA_MAX_PD;
    const uint8_t *pd = fz_take(in, &have);
    memcpy(f->ulp_pd, pd, have);

    uint8_t *out = malloc(cap ? cap : 1);
    FZ_CHECK(out != NULL);
    ssize_t rc = uw_mpa_frame_encode(f, out, cap);
    size_t pd_total = f->ulp_pd_len + (f->enhanced ? UW_MPA_ENH_WORD_LEN : 0u);
    bool inval = (f->type != UW_MPA_REQUEST && f->type != UW_MPA_REPLY) || f->res > 0x0F ||
                 (f->enhanced &&
                  (f->rev < 2 || f->ird > 0x3FFF || f->ord > 0x3FFF || f->rtr > UW_MPA_RTR_ALL));
    if (inval)
        FZ_CHECK(rc == UW_EINVAL);
    else if (pd_total > UW_MPA_MAX_PD)
        FZ_CHECK(rc == UW_EMPA_PD_LENGTH);
    else if (cap < UW_MPA_FRAME_HDR_LEN + pd_total)
        FZ_CHECK(rc == UW_ENOBUFS);
    else
        FZ_CHECK(rc == (ssize_t)(UW_MPA_FRAME_HDR_LEN + pd_total));

    if (rc > 0) {
        uw_mpa_frame *g = malloc(sizeof(*g));
        FZ_CHECK(g != NULL);
        ssize_t d = uw_mpa_frame_decode(out, (size_t)rc, UW_MPA_ANY, UW_MPA_MAX_PD, g);
        if (!f->enhanced && f->s && f->rev >= 2) {
            /* S is written as given; from Rev 2 on a receiver then reads the
             * first 4 octets of private data as the RFC 6581 word. */
            FZ_CHECK(f->ulp_pd_len < 4 ? d == UW_EMPA_ENH_WORD : d == rc);
            if (d > 0)
                FZ_CHECK(g->enhanced && g->ulp_pd_len == f->ulp_pd_len - 4);
        } else {
            FZ_CHECK(d == rc);
            uw_mpa_frame want = *f;
            want.s = f->s || f->enhanced;
            want.pd_length = (uint16_t)pd_total;
            if (!f->enhanced) {
                want.ird = want.ord = 0;
                want.p2p = false;
                want.rtr = 0;
            }
            FZ_CHECK(frame_equal(&want, g));
            check_decoded(g, out, (size_t)rc, UW_MPA_ANY, UW_MPA_MAX_PD);
        }
        free(g);
    }
    free(out);
    free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    uint8_t b0 = fz_u8(&in), b1 = fz_u8(&in);
    uint32_t seed = fz_u32(&in);
    static const int expects[4] = {UW_MPA_REQUEST, UW_MPA_REPLY, UW_MPA_ANY, 0};
    int expect = expects[b0 & 3];
    if ((b0 & 3) == 3 && (b0 & 8))
        expect = 7;
    size_t pd_max = (b1 & 0x80) ? 393u + (b1 & 0x7Fu) : b1;
    if (b0 & 4) {
        struct_mode(&in);
        return 0;
    }
    size_t n = fz_left(&in);
    uint8_t *buf = malloc(n ? n : 1);
    FZ_CHECK(buf != NULL);
    memcpy(buf, data + in.off, n);
    octet_mode(expect, pd_max, seed, buf, n);
    free(buf);
    return 0;
}
