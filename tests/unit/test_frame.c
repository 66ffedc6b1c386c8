/* MPA Request/Reply frames: byte-exact vectors (Linux siw probes), round trips,
 * the incremental parser under every segmentation, and every error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "uwarp/mpa.h"

#define KEY_REQ_HEX "4d504120494420526571204672616d65" /* "MPA ID Req Frame" */
#define KEY_REP_HEX "4d504120494420526570204672616d65" /* "MPA ID Rep Frame" */
#define FRAME_MAX (UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD)

/* Builds key + the octets from offset 16 (hex) + filler private data up to
 * PD_Length (the "…" of the siw README tables). Returns the frame length. */
static size_t build(uint8_t *out, int type, const char *from16)
{
    char hex[256];
    strcpy(hex, type == UW_MPA_REQUEST ? KEY_REQ_HEX : KEY_REP_HEX);
    strcat(hex, from16);
    long n = tu_unhex(hex, out, FRAME_MAX);
    assert_true(n >= 20);
    size_t total = 20 + (size_t)(out[18] << 8 | out[19]);
    for (size_t i = (size_t)n; i < total; i++)
        out[i] = (uint8_t)('a' + i % 26);
    return total;
}

static void assert_frame_equal(const uw_mpa_frame *a, const uw_mpa_frame *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->m, b->m);
    assert_int_equal(a->c, b->c);
    assert_int_equal(a->r, b->r);
    assert_int_equal(a->s, b->s);
    assert_int_equal(a->res, b->res);
    assert_int_equal(a->rev, b->rev);
    assert_int_equal(a->enhanced, b->enhanced);
    assert_int_equal(a->ird, b->ird);
    assert_int_equal(a->ord, b->ord);
    assert_int_equal(a->p2p, b->p2p);
    assert_int_equal(a->rtr, b->rtr);
    assert_int_equal(a->ulp_pd_len, b->ulp_pd_len);
    assert_memory_equal(a->ulp_pd, b->ulp_pd, a->ulp_pd_len);
}

/* ------------------------------------------------------------------------ */
/* Byte-exact vectors                                                        */

struct vec {
    const char *name;
    int type;
    const char *from16; /* bytes from offset 16, as in siw-vm README section 7 */
    bool m, c, r, s;
    uint8_t res, rev;
    bool enh;
    uint16_t ird, ord;
    bool p2p;
    uint8_t rtr;
    uint16_t pd_length;
};

#define W UW_MPA_RTR_WRITE
#define R UW_MPA_RTR_READ
#define S UW_MPA_RTR_SEND
/* clang-format off */
static const struct vec VECS[] = {
    /* siw probe table: host Request -> siw responder Reply. */
    {"v1 C=1 req", UW_MPA_REQUEST, "40 01 000d", 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 13},
    {"v1 C=1 rep", UW_MPA_REPLY, "40 01 0000", 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
    {"v1 C=0 req", UW_MPA_REQUEST, "00 01 0013", 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 19},
    {"v1 C=0 rep", UW_MPA_REPLY, "00 01 0000", 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
    {"v1 M C req", UW_MPA_REQUEST, "c0 01 000f", 1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 15},
    {"v1 reject", UW_MPA_REPLY, "60 01 0000", 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0},
    {"v1 gso req", UW_MPA_REQUEST, "48 01 0011", 0, 1, 0, 0, 8, 1, 0, 0, 0, 0, 0, 17},
    {"v1 gso rep", UW_MPA_REPLY, "48 01 0000", 0, 1, 0, 0, 8, 1, 0, 0, 0, 0, 0, 0},
    {"v2 no S req", UW_MPA_REQUEST, "40 02 0011", 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 17},
    {"v2 no S rep", UW_MPA_REPLY, "40 02 0000", 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0},
    {"v2 16/16 req", UW_MPA_REQUEST, "50 02 0011 0010 0010", 0, 1, 0, 1, 0, 2, 1, 16, 16, 0, 0, 17},
    {"v2 16/16 rep", UW_MPA_REPLY, "50 02 0004 0010 0010", 0, 1, 0, 1, 0, 2, 1, 16, 16, 0, 0, 4},
    {"v2 4/8 req", UW_MPA_REQUEST, "10 02 0017 0004 0008", 0, 0, 0, 1, 0, 2, 1, 4, 8, 0, 0, 23},
    {"v2 8/4 rep", UW_MPA_REPLY, "10 02 0004 0008 0004", 0, 0, 0, 1, 0, 2, 1, 8, 4, 0, 0, 4},
    {"v2 0/0 req", UW_MPA_REQUEST, "50 02 0004 0000 0000", 0, 1, 0, 1, 0, 2, 1, 0, 0, 0, 0, 4},
    {"v2 1000 req", UW_MPA_REQUEST, "50 02 0004 03e8 03e8", 0, 1, 0, 1, 0, 2, 1, 1000, 1000, 0, 0, 4},
    {"v2 128 rep", UW_MPA_REPLY, "50 02 0004 0080 0080", 0, 1, 0, 1, 0, 2, 1, 128, 128, 0, 0, 4},
    {"p2p C D req", UW_MPA_REQUEST, "50 02 0007 8008 c004", 0, 1, 0, 1, 0, 2, 1, 8, 4, 1, W | R, 7},
    {"p2p write rep", UW_MPA_REPLY, "50 02 0004 8004 8008", 0, 1, 0, 1, 0, 2, 1, 4, 8, 1, W, 4},
    {"p2p D req", UW_MPA_REQUEST, "50 02 000c 8001 4001", 0, 1, 0, 1, 0, 2, 1, 1, 1, 1, R, 12},
    {"p2p read rep", UW_MPA_REPLY, "50 02 0004 8001 4001", 0, 1, 0, 1, 0, 2, 1, 1, 1, 1, R, 4},
    {"p2p B req", UW_MPA_REQUEST, "50 02 000c c001 0001", 0, 1, 0, 1, 0, 2, 1, 1, 1, 1, S, 12},
    {"p2p no rtr req", UW_MPA_REQUEST, "50 02 0004 8001 0001", 0, 1, 0, 1, 0, 2, 1, 1, 1, 1, 0, 4},
    {"rev 3 req", UW_MPA_REQUEST, "40 03 0004", 0, 1, 0, 0, 0, 3, 0, 0, 0, 0, 0, 4},
    /* siw as initiator. */
    {"siw stock req", UW_MPA_REQUEST, "10 02 0004 0001 0001", 0, 0, 0, 1, 0, 2, 1, 1, 1, 0, 0, 4},
    {"siw crc req", UW_MPA_REQUEST, "50 02 0004 0001 0001", 0, 1, 0, 1, 0, 2, 1, 1, 1, 0, 0, 4},
    {"siw p2p req", UW_MPA_REQUEST, "10 02 0004 8001 c001", 0, 0, 0, 1, 0, 2, 1, 1, 1, 1, W | R, 4},
    {"siw v1 req", UW_MPA_REQUEST, "00 01 0000", 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0},
    /* S on Rev 1 is a reserved bit (RFC 6581 6), no word follows. */
    {"v1 S req", UW_MPA_REQUEST, "50 01 0002 abcd", 0, 1, 0, 1, 0, 1, 0, 0, 0, 0, 0, 2},
    /* B, C, D reported as on the wire even with A=0. */
    {"A=0 with B C D", UW_MPA_REPLY, "50 02 0004 4002 c003", 0, 1, 0, 1, 0, 2, 1, 2, 3, 0, S | W | R, 4},
};
/* clang-format on */

static void test_vectors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(VECS) / sizeof(VECS[0]); i++) {
        const struct vec *v = &VECS[i];
        uint8_t wire[FRAME_MAX], again[FRAME_MAX];
        size_t n = build(wire, v->type, v->from16);
        uw_mpa_frame f;
        ssize_t got = uw_mpa_frame_decode(wire, n, v->type, UW_MPA_MAX_PD, &f);
        if (got != (ssize_t)n)
            fail_msg("%s: decode %zd", v->name, got);
        assert_int_equal(f.type, v->type);
        assert_int_equal(f.m, v->m);
        assert_int_equal(f.c, v->c);
        assert_int_equal(f.r, v->r);
        assert_int_equal(f.s, v->s);
        assert_int_equal(f.res, v->res);
        assert_int_equal(f.rev, v->rev);
        assert_int_equal(f.enhanced, v->enh);
        assert_int_equal(f.ird, v->ird);
        assert_int_equal(f.ord, v->ord);
        assert_int_equal(f.p2p, v->p2p);
        assert_int_equal(f.rtr, v->rtr);
        assert_int_equal(f.pd_length, v->pd_length);
        assert_int_equal(f.ulp_pd_len, v->pd_length - (v->enh ? 4 : 0));
        assert_memory_equal(f.ulp_pd, wire + 20 + (v->enh ? 4 : 0), f.ulp_pd_len);
        /* Re-encoding what was decoded gives the same octets. */
        assert_int_equal(uw_mpa_frame_encode(&f, again, sizeof(again)), n);
        assert_memory_equal(again, wire, n);
        /* The other role's decoder refuses it; ANY takes it. */
        int other = v->type == UW_MPA_REQUEST ? UW_MPA_REPLY : UW_MPA_REQUEST;
        assert_int_equal(uw_mpa_frame_decode(wire, n, other, 512, &f), UW_EMPA_ROLE);
        assert_int_equal(uw_mpa_frame_decode(wire, n, UW_MPA_ANY, 512, &f), n);
    }
}

static void test_encode_exact(void **state)
{
    (void)state;
    uint8_t want[FRAME_MAX], got[FRAME_MAX];
    /* Linux siw's stock Request: Rev 2, S=1, C=0, IRD 1, ORD 1. */
    uw_mpa_frame f = {.type = UW_MPA_REQUEST, .rev = 2, .enhanced = true, .ird = 1, .ord = 1};
    long wl = tu_unhex(KEY_REQ_HEX "10 02 0004 0001 0001", want, sizeof(want));
    assert_int_equal(uw_mpa_frame_encode(&f, got, sizeof(got)), wl);
    assert_memory_equal(got, want, (size_t)wl);

    /* A Rev 1 Request with private data, C=1 M=1. */
    uw_mpa_frame g = {.type = UW_MPA_REQUEST, .rev = 1, .m = true, .c = true, .ulp_pd_len = 5};
    memcpy(g.ulp_pd, "hello", 5);
    wl = tu_unhex(KEY_REQ_HEX "c0 01 0005 68656c6c6f", want, sizeof(want));
    assert_int_equal(uw_mpa_frame_encode(&g, got, sizeof(got)), wl);
    assert_memory_equal(got, want, (size_t)wl);

    /* Enhanced Reply with every flag of the word, private data after it;
     * pd_length in the struct is ignored. */
    uw_mpa_frame h = {.type = UW_MPA_REPLY,
                      .rev = 2,
                      .c = true,
                      .r = true,
                      .enhanced = true,
                      .ird = 0x3FFF,
                      .ord = 0x1234,
                      .p2p = true,
                      .rtr = UW_MPA_RTR_ALL,
                      .ulp_pd_len = 2,
                      .pd_length = 999};
    h.ulp_pd[0] = 0xAB;
    h.ulp_pd[1] = 0xCD;
    wl = tu_unhex(KEY_REP_HEX "70 02 0006 ffff d234 abcd", want, sizeof(want));
    assert_int_equal(uw_mpa_frame_encode(&h, got, sizeof(got)), wl);
    assert_memory_equal(got, want, (size_t)wl);
    /* Exactly the size is enough. */
    assert_int_equal(uw_mpa_frame_encode(&h, got, (size_t)wl), wl);
}

/* ------------------------------------------------------------------------ */
/* Round trips                                                               */

static void random_frame(tu_rng *r, uw_mpa_frame *f)
{
    memset(f, 0, sizeof(*f));
    f->type = tu_rng_below(r, 2) ? UW_MPA_REQUEST : UW_MPA_REPLY;
    f->m = tu_rng_below(r, 2);
    f->c = tu_rng_below(r, 2);
    f->r = tu_rng_below(r, 2);
    f->res = (uint8_t)tu_rng_below(r, 16);
    /* Mostly the revisions that matter, sometimes any octet. */
    f->rev = (uint8_t)(tu_rng_below(r, 4) ? tu_rng_below(r, 4) : tu_rng_below(r, 256));
    f->enhanced = f->rev >= 2 && tu_rng_below(r, 4) != 0;
    /* S without the word only round-trips below Rev 2 (a reserved bit). */
    f->s = f->enhanced || (f->rev < 2 && tu_rng_below(r, 2));
    if (f->enhanced) {
        f->ird = (uint16_t)tu_rng_below(r, 0x4000);
        f->ord = (uint16_t)tu_rng_below(r, 0x4000);
        if (tu_rng_below(r, 8) == 0)
            f->ird = 0x3FFF;
        f->p2p = tu_rng_below(r, 2);
        f->rtr = (uint8_t)tu_rng_below(r, 8);
    }
    size_t room = UW_MPA_MAX_PD - (f->enhanced ? 4 : 0);
    switch (tu_rng_below(r, 4)) {
    case 0:
        f->ulp_pd_len = 0;
        break;
    case 1:
        f->ulp_pd_len = (uint16_t)room;
        break;
    default:
        f->ulp_pd_len = (uint16_t)tu_rng_below(r, room + 1);
    }
    tu_rng_fill(r, f->ulp_pd, f->ulp_pd_len);
}

static void test_roundtrip_random(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(5044));
    for (int it = 0; it < 3000; it++) {
        uw_mpa_frame f, g;
        random_frame(&r, &f);
        uint8_t wire[FRAME_MAX + 64];
        ssize_t n = uw_mpa_frame_encode(&f, wire, sizeof(wire));
        size_t pdl = f.ulp_pd_len + (f.enhanced ? 4u : 0u);
        assert_int_equal(n, 20 + pdl);
        assert_int_equal(wire[18] << 8 | wire[19], pdl);
        assert_int_equal(wire[17], f.rev);
        /* Trailing octets (the first FPDU) are not part of the frame. */
        tu_rng_fill(&r, wire + n, 64);
        int expect = tu_rng_below(&r, 2) ? f.type : UW_MPA_ANY;
        assert_int_equal(
            uw_mpa_frame_decode(wire, (size_t)n + tu_rng_below(&r, 65), expect, UW_MPA_MAX_PD, &g),
            n);
        assert_int_equal(g.pd_length, pdl);
        assert_frame_equal(&f, &g);
        /* One octet short is never a frame. */
        assert_int_equal(uw_mpa_frame_decode(wire, (size_t)n - 1, expect, 512, &g), UW_EAGAIN);
        /* pd_max exactly PD_Length is enough; one less is not. */
        assert_int_equal(uw_mpa_frame_decode(wire, (size_t)n, expect, pdl, &g), n);
        if (pdl > 0)
            assert_int_equal(uw_mpa_frame_decode(wire, (size_t)n, expect, pdl - 1, &g),
                             UW_EMPA_PD_BUFFER);
    }
}

/* ------------------------------------------------------------------------ */
/* Incremental parser                                                        */

/* Feeds wire[0..len) in chunks from sizes(); checks that exactly the frame
 * is consumed, and returns the frame. */
static void parse_chunked(tu_rng *r, const uint8_t *wire, size_t len, size_t frame_len, int expect,
                          bool one_by_one, uw_mpa_frame *out)
{
    uw_mpa_frame_parser p;
    uw_mpa_frame_parser_init(&p, expect, UW_MPA_MAX_PD);
    size_t off = 0;
    while (off < len && !uw_mpa_frame_parser_done(&p)) {
        size_t chunk = one_by_one ? 1 : 1 + tu_rng_below(r, tu_rng_below(r, 4) ? 24 : 600);
        if (chunk > len - off)
            chunk = len - off;
        ssize_t used = uw_mpa_frame_parser_feed(&p, wire + off, chunk, out);
        assert_true(used >= 0);
        assert_true((size_t)used <= chunk);
        /* Short of completion everything offered is taken. */
        if (!uw_mpa_frame_parser_done(&p))
            assert_int_equal(used, chunk);
        off += (size_t)used;
    }
    assert_true(uw_mpa_frame_parser_done(&p));
    assert_int_equal(off, frame_len);
    /* Done: later feeds consume nothing and keep the state. */
    uw_mpa_frame spare;
    assert_int_equal(uw_mpa_frame_parser_feed(&p, wire + off, len - off, &spare), 0);
    assert_true(uw_mpa_frame_parser_done(&p));
}

static void test_parser_segmentation(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(6581));
    for (int it = 0; it < 1500; it++) {
        uw_mpa_frame f, g;
        random_frame(&r, &f);
        uint8_t wire[FRAME_MAX + 100];
        ssize_t n = uw_mpa_frame_encode(&f, wire, sizeof(wire));
        assert_true(n > 0);
        /* The first FPDU right behind the frame, as in one read(). */
        size_t extra = tu_rng_below(&r, 100);
        tu_rng_fill(&r, wire + n, extra);
        parse_chunked(&r, wire, (size_t)n + extra, (size_t)n, f.type, it % 3 == 0, &g);
        assert_frame_equal(&f, &g);
    }

    /* The siw stock Request followed by siw's first FPDU, fed whole: the
     * FPDU's octets stay with the caller. */
    uint8_t buf[128];
    size_t n = build(buf, UW_MPA_REQUEST, "10 02 0004 0001 0001");
    long m = tu_unhex("0022 4143 00000000 00000000 00000001 00000000", buf + n, 64);
    uw_mpa_frame_parser p;
    uw_mpa_frame f;
    uw_mpa_frame_parser_init(&p, UW_MPA_REQUEST, 256);
    assert_false(uw_mpa_frame_parser_done(&p));
    assert_int_equal(uw_mpa_frame_parser_feed(&p, buf, n + (size_t)m, &f), n);
    assert_true(uw_mpa_frame_parser_done(&p));
    assert_true(f.enhanced);
    assert_int_equal(f.ird, 1);
    assert_int_equal(buf[n], 0x00);
    assert_int_equal(buf[n + 1], 0x22);

    /* A zero-length feed before anything arrived. */
    uw_mpa_frame_parser_init(&p, UW_MPA_ANY, 512);
    assert_int_equal(uw_mpa_frame_parser_feed(&p, NULL, 0, &f), 0);
    assert_false(uw_mpa_frame_parser_done(&p));
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */

/* Feeds wire one octet at a time; returns the error and stores in *at the
 * number of octets that had been fed when it appeared. */
static ssize_t parse_until_error(const uint8_t *wire, size_t len, int expect, size_t pd_max,
                                 size_t *at)
{
    uw_mpa_frame_parser p;
    uw_mpa_frame f;
    uw_mpa_frame_parser_init(&p, expect, pd_max);
    for (size_t i = 0; i < len; i++) {
        ssize_t rc = uw_mpa_frame_parser_feed(&p, wire + i, 1, &f);
        if (rc < 0) {
            *at = i + 1;
            /* Sticky: the same error again, nothing consumed. */
            assert_int_equal(uw_mpa_frame_parser_feed(&p, wire, len, &f), rc);
            assert_false(uw_mpa_frame_parser_done(&p));
            return rc;
        }
        assert_int_equal(rc, 1);
    }
    *at = len;
    return 0;
}

static void expect_error(const uint8_t *wire, size_t len, int expect, size_t pd_max, ssize_t err,
                         size_t at)
{
    uw_mpa_frame f;
    size_t got_at = 0;
    assert_int_equal(uw_mpa_frame_decode(wire, len, expect, pd_max, &f), err);
    assert_int_equal(parse_until_error(wire, len, expect, pd_max, &got_at), err);
    assert_int_equal(got_at, at);
    /* Whole buffer in one feed: same error. */
    uw_mpa_frame_parser p;
    uw_mpa_frame_parser_init(&p, expect, pd_max);
    assert_int_equal(uw_mpa_frame_parser_feed(&p, wire, len, &f), err);
    assert_int_equal(uw_mpa_error_code((int)err), UW_MPA_ERR_BAD_FRAME);
}

static void test_errors_key_and_role(void **state)
{
    (void)state;
    uint8_t w[FRAME_MAX];
    /* An HTTP client on the port: wrong from the first octet. */
    memcpy(w, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", 27);
    expect_error(w, 27, UW_MPA_REQUEST, 512, UW_EMPA_KEY, 1);
    expect_error(w, 27, UW_MPA_ANY, 512, UW_EMPA_KEY, 1);
    /* Last key octet wrong: known only at 16. */
    size_t n = build(w, UW_MPA_REQUEST, "40 01 0000");
    w[15] ^= 0x01;
    expect_error(w, n, UW_MPA_REQUEST, 512, UW_EMPA_KEY, 16);
    /* "MPA ID Rep" prefix then garbage: not the other key, a bad key. */
    n = build(w, UW_MPA_REPLY, "40 01 0000");
    w[12] = 'X';
    expect_error(w, n, UW_MPA_REQUEST, 512, UW_EMPA_KEY, 13);
    expect_error(w, n, UW_MPA_REPLY, 512, UW_EMPA_KEY, 13);
    /* Lower case key. */
    n = build(w, UW_MPA_REQUEST, "40 01 0000");
    w[0] = 'm';
    expect_error(w, n, UW_MPA_ANY, 512, UW_EMPA_KEY, 1);

    /* Initiator/Initiator: a Request where the Reply was due (RFC 5044 7.1.2
     * rule 8). Responder/Responder: a Reply where a Request was due. */
    n = build(w, UW_MPA_REQUEST, "10 02 0004 0001 0001");
    expect_error(w, n, UW_MPA_REPLY, 512, UW_EMPA_ROLE, 16);
    n = build(w, UW_MPA_REPLY, "50 02 0004 0010 0010");
    expect_error(w, n, UW_MPA_REQUEST, 512, UW_EMPA_ROLE, 16);
    /* Even with a bad PD_Length behind it, the role error comes first. */
    tu_unhex(KEY_REP_HEX "50 02 ffff", w, sizeof(w));
    expect_error(w, 20, UW_MPA_REQUEST, 512, UW_EMPA_ROLE, 16);
}

static void test_errors_pd(void **state)
{
    (void)state;
    uint8_t w[FRAME_MAX + 8];
    /* PD_Length 513: reported from the header alone. */
    tu_unhex(KEY_REQ_HEX "40 01 0201", w, sizeof(w));
    expect_error(w, 20, UW_MPA_REQUEST, 512, UW_EMPA_PD_LENGTH, 20);
    expect_error(w, 20, UW_MPA_REQUEST, 4096, UW_EMPA_PD_LENGTH, 20);
    tu_unhex(KEY_REP_HEX "50 02 ffff", w, sizeof(w));
    expect_error(w, 20, UW_MPA_REPLY, 512, UW_EMPA_PD_LENGTH, 20);
    /* 512 is the limit, word included (RFC 6581 9). */
    size_t n = build(w, UW_MPA_REQUEST, "50 02 0200 0001 0001");
    uw_mpa_frame f;
    assert_int_equal(uw_mpa_frame_decode(w, n, UW_MPA_REQUEST, 512, &f), 532);
    assert_int_equal(f.ulp_pd_len, 508);
    /* A pd_max above 512 is 512. */
    assert_int_equal(uw_mpa_frame_decode(w, n, UW_MPA_REQUEST, 100000, &f), 532);

    /* Over the caller's buffer (siw: 256). */
    n = build(w, UW_MPA_REQUEST, "40 01 0101");
    expect_error(w, n, UW_MPA_REQUEST, 256, UW_EMPA_PD_BUFFER, 20);
    n = build(w, UW_MPA_REQUEST, "40 01 0100");
    assert_int_equal(uw_mpa_frame_decode(w, n, UW_MPA_REQUEST, 256, &f), n);
    n = build(w, UW_MPA_REQUEST, "40 01 0001");
    expect_error(w, n, UW_MPA_REQUEST, 0, UW_EMPA_PD_BUFFER, 20);

    /* S with Rev >= 2 but no room for the word. */
    for (unsigned len = 0; len < 4; len++) {
        char hdr[32];
        snprintf(hdr, sizeof(hdr), "50 02 000%u", len);
        n = build(w, UW_MPA_REQUEST, hdr);
        expect_error(w, n, UW_MPA_REQUEST, 512, UW_EMPA_ENH_WORD, 20);
        snprintf(hdr, sizeof(hdr), "10 07 000%u", len); /* any Rev >= 2 */
        n = build(w, UW_MPA_REPLY, hdr);
        expect_error(w, n, UW_MPA_ANY, 512, UW_EMPA_ENH_WORD, 20);
        /* The same with Rev 1: S is a reserved bit, the frame is fine. */
        snprintf(hdr, sizeof(hdr), "10 01 000%u", len);
        n = build(w, UW_MPA_REQUEST, hdr);
        assert_int_equal(uw_mpa_frame_decode(w, n, UW_MPA_REQUEST, 512, &f), n);
        assert_true(f.s);
        assert_false(f.enhanced);
        assert_int_equal(f.ulp_pd_len, len);
    }
}

static void test_errors_truncated(void **state)
{
    (void)state;
    uint8_t w[FRAME_MAX];
    const char *hdrs[] = {"50 02 0011 0010 0010", "40 01 0000", "c0 01 0200",
                          "10 02 0004 8001 c001"};
    for (size_t h = 0; h < 4; h++) {
        size_t n = build(w, UW_MPA_REQUEST, hdrs[h]);
        uw_mpa_frame f;
        for (size_t k = 0; k < n; k++)
            assert_int_equal(uw_mpa_frame_decode(w, k, UW_MPA_REQUEST, 512, &f), UW_EAGAIN);
        assert_int_equal(uw_mpa_frame_decode(w, n, UW_MPA_REQUEST, 512, &f), n);
        /* The parser needs no more than the frame and waits for all of it. */
        uw_mpa_frame_parser p;
        uw_mpa_frame_parser_init(&p, UW_MPA_REQUEST, 512);
        assert_int_equal(uw_mpa_frame_parser_feed(&p, w, n - 1, &f), n - 1);
        assert_false(uw_mpa_frame_parser_done(&p));
        assert_int_equal(uw_mpa_frame_parser_feed(&p, w + n - 1, 1, &f), 1);
        assert_true(uw_mpa_frame_parser_done(&p));
    }
}

static void test_encode_errors(void **state)
{
    (void)state;
    uint8_t out[FRAME_MAX];
    uw_mpa_frame f = {.type = UW_MPA_REQUEST, .rev = 2, .enhanced = true};
    assert_int_equal(uw_mpa_frame_encode(&f, out, sizeof(out)), 24);

    uw_mpa_frame g = f;
    g.type = UW_MPA_ANY;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EINVAL);
    g = f;
    g.rev = 1; /* RFC 6581 6: the word needs Rev 2 */
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EINVAL);
    g = f;
    g.ird = 0x4000;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EINVAL);
    g = f;
    g.ord = 0xFFFF;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EINVAL);
    g = f;
    g.rtr = 0x8;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EINVAL);
    g = f;
    g.res = 0x10;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EINVAL);
    assert_int_equal(uw_mpa_frame_encode(NULL, out, sizeof(out)), UW_EINVAL);

    g = f;
    g.ulp_pd_len = 508;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), 532);
    g.ulp_pd_len = 509; /* 509 + the word > 512 */
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EMPA_PD_LENGTH);
    g.enhanced = false;
    g.ulp_pd_len = 512;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), 532);
    g.ulp_pd_len = 513;
    assert_int_equal(uw_mpa_frame_encode(&g, out, sizeof(out)), UW_EMPA_PD_LENGTH);

    assert_int_equal(uw_mpa_frame_encode(&f, out, 23), UW_ENOBUFS);
    assert_int_equal(uw_mpa_frame_encode(&f, NULL, 0), UW_ENOBUFS);

    /* A frame with S but no word can be built on purpose (for tests of
     * peers); it decodes as a missing word. */
    g = f;
    g.enhanced = false;
    g.s = true;
    ssize_t n = uw_mpa_frame_encode(&g, out, sizeof(out));
    assert_int_equal(n, 20);
    assert_int_equal(out[16], 0x10);
    uw_mpa_frame h;
    assert_int_equal(uw_mpa_frame_decode(out, (size_t)n, UW_MPA_ANY, 512, &h), UW_EMPA_ENH_WORD);
}

/* Initiator/Initiator and Responder/Responder startups (RFC 5044 7.1.2 rule
 * 8) with frames made by the negotiation functions: both ends send Requests
 * and each parser, waiting for a Reply, sees a Request key as soon as the 16
 * key octets are in; a Reply reaching a parser that waits for a Request. */
static void test_role_detection(void **state)
{
    (void)state;
    uw_mpa_policy p;
    uw_mpa_policy_default(&p);
    uw_mpa_frame a, f, rep;
    uw_mpa_params pr;
    uint8_t buf[600];
    assert_int_equal(uw_mpa_request(&p, "pd", 2, &a), 0);
    ssize_t n = uw_mpa_frame_encode(&a, buf, sizeof(buf));
    uw_mpa_frame_parser ps;
    uw_mpa_frame_parser_init(&ps, UW_MPA_REPLY, 512);
    for (ssize_t i = 0; i < 15; i++)
        assert_int_equal(uw_mpa_frame_parser_feed(&ps, buf + i, 1, &f), 1);
    assert_int_equal(uw_mpa_frame_parser_feed(&ps, buf + 15, (size_t)n - 15, &f), UW_EMPA_ROLE);

    assert_int_equal(uw_mpa_respond(&p, &a, false, NULL, 0, &rep, &pr), 0);
    n = uw_mpa_frame_encode(&rep, buf, sizeof(buf));
    uw_mpa_frame_parser_init(&ps, UW_MPA_REQUEST, 512);
    assert_int_equal(uw_mpa_frame_parser_feed(&ps, buf, (size_t)n, &f), UW_EMPA_ROLE);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    uint8_t w[FRAME_MAX];
    size_t n = build(w, UW_MPA_REQUEST, "40 01 0000");
    uw_mpa_frame f;
    assert_int_equal(uw_mpa_frame_decode(w, n, 0, 512, &f), UW_EINVAL);
    assert_int_equal(uw_mpa_frame_decode(w, n, UW_MPA_REQUEST, 512, NULL), UW_EINVAL);
    assert_int_equal(uw_mpa_frame_decode(NULL, 4, UW_MPA_REQUEST, 512, &f), UW_EINVAL);
    assert_int_equal(uw_mpa_frame_decode(NULL, 0, UW_MPA_REQUEST, 512, &f), UW_EAGAIN);

    uw_mpa_frame_parser p;
    uw_mpa_frame_parser_init(&p, 42, 512);
    assert_int_equal(uw_mpa_frame_parser_feed(&p, w, n, &f), UW_EINVAL);
    assert_false(uw_mpa_frame_parser_done(&p));
    uw_mpa_frame_parser_init(&p, UW_MPA_REQUEST, 512);
    assert_int_equal(uw_mpa_frame_parser_feed(&p, w, n, NULL), UW_EINVAL);
    assert_int_equal(uw_mpa_frame_parser_feed(NULL, w, n, &f), UW_EINVAL);
    assert_false(uw_mpa_frame_parser_done(NULL));
    /* The bad calls left the parser usable. */
    assert_int_equal(uw_mpa_frame_parser_feed(&p, w, n, &f), n);
    assert_true(uw_mpa_frame_parser_done(&p));

    assert_int_equal(uw_mpa_error_code(UW_EMPA_KEY), 4);
    assert_int_equal(uw_mpa_error_code(UW_EMPA_ROLE), 4);
    assert_int_equal(uw_mpa_error_code(UW_EAGAIN), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vectors),
        cmocka_unit_test(test_encode_exact),
        cmocka_unit_test(test_roundtrip_random),
        cmocka_unit_test(test_parser_segmentation),
        cmocka_unit_test(test_errors_key_and_role),
        cmocka_unit_test(test_errors_pd),
        cmocka_unit_test(test_errors_truncated),
        cmocka_unit_test(test_encode_errors),
        cmocka_unit_test(test_role_detection),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
