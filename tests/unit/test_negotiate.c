/* MPA startup negotiation: RFC 5044 Appendix C cell by cell, RFC 6581 9.1
 * IRD/ORD, 9.2 RTR, 10 interoperability, CRC, roles, and end-to-end runs
 * through the wire encoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "testutil.h"
#include "uwarp/mpa.h"

#define KEY_REQ_HEX "4d504120494420526571204672616d65"
#define KEY_REP_HEX "4d504120494420526570204672616d65"
#define NN UW_MPA_NO_NEGOTIATION
#define W UW_MPA_RTR_WRITE
#define R UW_MPA_RTR_READ
#define S UW_MPA_RTR_SEND
#define ALL UW_MPA_RTR_ALL

/* Puts f on the wire and reads it back with a parser expecting its type, in
 * two pieces with trailing octets behind it. */
static void wire(const uw_mpa_frame *f, uw_mpa_frame *out)
{
    uint8_t buf[UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD + 8];
    ssize_t n = uw_mpa_frame_encode(f, buf, sizeof(buf));
    assert_true(n >= 20);
    memset(buf + n, 0xEE, 8);
    uw_mpa_frame_parser p;
    uw_mpa_frame_parser_init(&p, f->type, UW_MPA_MAX_PD);
    size_t half = (size_t)n / 2;
    assert_int_equal(uw_mpa_frame_parser_feed(&p, buf, half, out), half);
    assert_int_equal(uw_mpa_frame_parser_feed(&p, buf + half, (size_t)n - half + 8, out),
                     (size_t)n - half);
    assert_true(uw_mpa_frame_parser_done(&p));
}

/* A hand-made frame, for peers that are not us (RDMAC, siw, broken ones). */
static uw_mpa_frame mk(int type, uint8_t rev, bool enh, bool a, uint8_t rtr, uint16_t ird,
                       uint16_t ord)
{
    uw_mpa_frame f;
    memset(&f, 0, sizeof(f));
    f.type = type;
    f.rev = rev;
    f.c = true;
    f.enhanced = enh;
    f.s = enh;
    f.p2p = a;
    f.rtr = rtr;
    f.ird = ird;
    f.ord = ord;
    return f;
}

/* A frame as captured from a peer. */
static uw_mpa_frame dec(const char *hex, int type)
{
    uint8_t b[UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD];
    uw_mpa_frame f;
    long n = tu_unhex(hex, b, sizeof(b));
    assert_int_equal(uw_mpa_frame_decode(b, (size_t)n, type, UW_MPA_MAX_PD, &f), n);
    return f;
}

static uw_mpa_policy pol_v(uint8_t rev, bool markers, bool permissive)
{
    uw_mpa_policy p;
    uw_mpa_policy_default(&p);
    p.rev = rev;
    p.enhanced = rev >= 2;
    p.markers = markers;
    p.accept_rev0 = permissive;
    return p;
}

/* An enhanced Rev 2 policy with the given depths and RTR types. */
static uw_mpa_policy pol_d(uint16_t ird, uint16_t ord, uint16_t ird_max, uint16_t ord_min,
                           uint8_t rtr)
{
    uw_mpa_policy p = pol_v(2, false, false);
    p.ird = ird;
    p.ord = ord;
    p.ird_max = ird_max;
    p.ord_min = ord_min;
    p.rtr = rtr;
    return p;
}

/* What an RDMAC peer sends, whatever it received (RFC 5044 C.2.1-C.2.5). */
static uw_mpa_frame rdmac(int type)
{
    uw_mpa_frame f = mk(type, 0, false, false, 0, 0, 0);
    f.m = true;
    return f;
}

static void test_policy_default(void **state)
{
    (void)state;
    uw_mpa_policy p;
    memset(&p, 0xA5, sizeof(p));
    uw_mpa_policy_default(&p);
    assert_true(p.crc && !p.markers && p.rev == 2 && p.enhanced && !p.p2p && !p.accept_rev0);
    assert_true(p.ird == 16 && p.ord == 16 && !p.ird_max && !p.ord_min && p.rtr == ALL);
}

/* ------------------------------------------------------------------------ */
/* Request                                                                   */

static void expect_request_bytes(const uw_mpa_policy *p, const void *pd, size_t pd_len,
                                 const char *hex)
{
    uw_mpa_frame f;
    uint8_t want[600], got[600];
    assert_int_equal(uw_mpa_request(p, pd, pd_len, &f), 0);
    long wl = tu_unhex(hex, want, sizeof(want));
    assert_int_equal(uw_mpa_frame_encode(&f, got, sizeof(got)), wl);
    assert_memory_equal(got, want, (size_t)wl);
}

static int req_rc(uint8_t rev, bool enh, uint16_t ird, uint16_t ord, bool p2p, uint8_t rtr)
{
    uw_mpa_policy p = pol_v(2, false, false);
    p.rev = rev;
    p.enhanced = enh;
    p.ird = ird;
    p.ord = ord;
    p.p2p = p2p;
    p.rtr = rtr;
    uw_mpa_frame f;
    return uw_mpa_request(&p, NULL, 0, &f);
}

static void test_request(void **state)
{
    (void)state;
    /* Linux siw's stock Request: Rev 2, S, C=0, IRD/ORD 1, no P2P. */
    uw_mpa_policy p = pol_v(2, false, false);
    p.crc = false;
    p.ird = p.ord = 1;
    expect_request_bytes(&p, NULL, 0, KEY_REQ_HEX "10 02 0004 0001 0001");
    /* Client-server: B, C, D stay 0 whatever we support (RFC 6581 9.2). */
    p.rtr = ALL;
    expect_request_bytes(&p, NULL, 0, KEY_REQ_HEX "10 02 0004 0001 0001");
    /* siw's p2p build: A with Write and Read RTRs. */
    p.p2p = true;
    p.rtr = W | R;
    expect_request_bytes(&p, NULL, 0, KEY_REQ_HEX "10 02 0004 8001 c001");
    p.rtr = S;
    expect_request_bytes(&p, "x", 1, KEY_REQ_HEX "10 02 0005 c001 0001 78");
    /* siw's v1 build, and a Rev 1 Request with M, C and private data. */
    uw_mpa_policy v1 = pol_v(1, false, false);
    v1.crc = false;
    expect_request_bytes(&v1, NULL, 0, KEY_REQ_HEX "00 01 0000");
    v1.crc = v1.markers = true;
    expect_request_bytes(&v1, "hello", 5, KEY_REQ_HEX "c0 01 0005 68656c6c6f");
    /* Rev 2 without the word (RFC 6581 6 allows it). */
    uw_mpa_policy v2 = pol_v(2, false, false);
    v2.enhanced = false;
    expect_request_bytes(&v2, NULL, 0, KEY_REQ_HEX "40 02 0000");

    /* Private data limits: 512 octets, the word included. */
    uint8_t pd[600] = {0};
    uw_mpa_frame f;
    uw_mpa_policy d = pol_v(2, false, false);
    assert_int_equal(uw_mpa_request(&d, pd, 508, &f), 0);
    assert_int_equal(f.pd_length, 512);
    assert_int_equal(uw_mpa_request(&d, pd, 509, &f), UW_EMPA_PD_LENGTH);
    assert_int_equal(uw_mpa_request(&v1, pd, 512, &f), 0);
    assert_int_equal(uw_mpa_request(&v1, pd, 513, &f), UW_EMPA_PD_LENGTH);
    assert_int_equal(uw_mpa_request(&v1, NULL, 3, &f), UW_EINVAL);

    /* Inconsistent policies: Rev outside 1..2, the word below Rev 2, depths
     * over 14 bits, unknown RTR bits, p2p without the word (A lives there)
     * or without any RTR type to send. 0x3FFF itself is a legal depth. */
    assert_int_equal(req_rc(0, 1, 1, 1, 0, ALL), UW_EINVAL);
    assert_int_equal(req_rc(3, 1, 1, 1, 0, ALL), UW_EINVAL);
    assert_int_equal(req_rc(1, 1, 1, 1, 0, ALL), UW_EINVAL);
    assert_int_equal(req_rc(2, 1, 0x4000, 1, 0, ALL), UW_EINVAL);
    assert_int_equal(req_rc(2, 1, 1, 0x4000, 0, ALL), UW_EINVAL);
    assert_int_equal(req_rc(2, 1, 1, 1, 0, 0x8), UW_EINVAL);
    assert_int_equal(req_rc(2, 0, 1, 1, 1, ALL), UW_EINVAL);
    assert_int_equal(req_rc(2, 1, 1, 1, 1, 0), UW_EINVAL);
    assert_int_equal(req_rc(2, 1, NN, NN, 1, W), 0);
    assert_int_equal(uw_mpa_request(NULL, NULL, 0, &f), UW_EINVAL);
    assert_int_equal(uw_mpa_request(&d, NULL, 0, NULL), UW_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* RFC 5044 Appendix C, Figures 15-17                                        */

enum { RDMAC, NONPERM, PERM };

/* Initiator kind and M, responder kind and M; the result: close, or V and
 * markers_rx of the initiator (x) and of the responder (y). */
struct cell {
    int fig, ik, im, rk, rm, close, v, x, y;
};

/* clang-format off */
static const struct cell CELLS[] = {
    /* Figure 15: RDMAC vs non-permissive IETF. */
    {15, RDMAC, 1, RDMAC, 1, 0, 0, 1, 1},
    {15, RDMAC, 1, NONPERM, 0, 1, 0, 0, 0},
    {15, RDMAC, 1, NONPERM, 1, 1, 0, 0, 0},
    {15, NONPERM, 0, RDMAC, 1, 1, 0, 0, 0},
    {15, NONPERM, 0, NONPERM, 0, 0, 1, 0, 0},
    {15, NONPERM, 0, NONPERM, 1, 0, 1, 0, 1},
    {15, NONPERM, 1, RDMAC, 1, 1, 0, 0, 0},
    {15, NONPERM, 1, NONPERM, 0, 0, 1, 1, 0},
    {15, NONPERM, 1, NONPERM, 1, 0, 1, 1, 1},
    /* Figure 16: RDMAC vs permissive IETF. The RFC marks RDMAC/M=0 "N/A":
     * a permissive responder never replies M=0 to Rev 0, so a responder
     * configured for M=0 still ends up at V=0 M=1/1 (C.2.3). */
    {16, RDMAC, 1, RDMAC, 1, 0, 0, 1, 1},
    {16, RDMAC, 1, PERM, 0, 0, 0, 1, 1},
    {16, RDMAC, 1, PERM, 1, 0, 0, 1, 1},
    {16, PERM, 0, RDMAC, 1, 0, 0, 1, 1},
    {16, PERM, 0, PERM, 0, 0, 1, 0, 0},
    {16, PERM, 0, PERM, 1, 0, 1, 0, 1},
    {16, PERM, 1, RDMAC, 1, 0, 0, 1, 1},
    {16, PERM, 1, PERM, 0, 0, 1, 1, 0},
    {16, PERM, 1, PERM, 1, 0, 1, 1, 1},
    /* Figure 17: non-permissive vs permissive IETF, all V=1. */
    {17, NONPERM, 0, NONPERM, 0, 0, 1, 0, 0},
    {17, NONPERM, 0, NONPERM, 1, 0, 1, 0, 1},
    {17, NONPERM, 0, PERM, 0, 0, 1, 0, 0},
    {17, NONPERM, 0, PERM, 1, 0, 1, 0, 1},
    {17, NONPERM, 1, NONPERM, 0, 0, 1, 1, 0},
    {17, NONPERM, 1, NONPERM, 1, 0, 1, 1, 1},
    {17, NONPERM, 1, PERM, 0, 0, 1, 1, 0},
    {17, NONPERM, 1, PERM, 1, 0, 1, 1, 1},
    {17, PERM, 0, NONPERM, 0, 0, 1, 0, 0},
    {17, PERM, 0, NONPERM, 1, 0, 1, 0, 1},
    {17, PERM, 0, PERM, 0, 0, 1, 0, 0},
    {17, PERM, 0, PERM, 1, 0, 1, 0, 1},
    {17, PERM, 1, NONPERM, 0, 0, 1, 1, 0},
    {17, PERM, 1, NONPERM, 1, 0, 1, 1, 1},
    {17, PERM, 1, PERM, 0, 0, 1, 1, 0},
    {17, PERM, 1, PERM, 1, 0, 1, 1, 1},
};
/* clang-format on */

/* The RDMAC peer as RFC 5044 C.2.1-C.2.5 describes it: Rev 0, M and C set
 * always, DDP version 0, markers both ways. */
static void rdmac_params(uw_mpa_params *pr)
{
    memset(pr, 0, sizeof(*pr));
    pr->ddp_version = 0;
    pr->crc = pr->markers_rx = pr->markers_tx = true;
}

static void run_cell(const struct cell *c, uint8_t rev)
{
    uw_mpa_frame req, req_w, rep, rep_w;
    uw_mpa_params ip, rp;
    uw_mpa_policy ipol = pol_v(rev, c->im, c->ik == PERM);
    uw_mpa_policy rpol = pol_v(rev, c->rm, c->rk == PERM);
    int rc;

    if (c->ik == RDMAC)
        req = rdmac(UW_MPA_REQUEST);
    else
        assert_int_equal(uw_mpa_request(&ipol, NULL, 0, &req), 0);
    wire(&req, &req_w);

    if (c->rk == RDMAC) {
        rep = rdmac(UW_MPA_REPLY);
        rdmac_params(&rp);
    } else {
        rc = uw_mpa_respond(&rpol, &req_w, false, NULL, 0, &rep, &rp);
        if (c->close) {
            /* C.2.1: the non-permissive responder cannot speak Rev 0. */
            assert_int_equal(rc, UW_EMPA_REV);
            assert_int_equal(uw_mpa_error_code(rc), UW_MPA_ERR_BAD_FRAME);
            return;
        }
        assert_int_equal(rc, 0);
    }
    wire(&rep, &rep_w);

    if (c->ik == RDMAC) {
        assert_int_equal(rep_w.rev, 0);
        rdmac_params(&ip);
    } else {
        rc = uw_mpa_accept_reply(&ipol, &req, &rep_w, &ip);
        if (c->close) {
            /* C.2.2: the non-permissive initiator closes on a Rev 0 Reply. */
            assert_int_equal(rc, UW_EMPA_REV);
            return;
        }
        assert_int_equal(rc, 0);
    }
    assert_false(c->close);
    assert_int_equal(ip.ddp_version, c->v);
    assert_int_equal(rp.ddp_version, c->v);
    assert_int_equal(ip.markers_rx, c->x);
    assert_int_equal(rp.markers_rx, c->y);
    assert_int_equal(ip.markers_tx, c->y);
    assert_int_equal(rp.markers_tx, c->x);
    assert_true(ip.crc && rp.crc); /* both policies ask for CRC */
    if (c->v == 0)
        assert_true(rep_w.m && rep_w.c && rep_w.rev == 0);
}

static void test_appendix_c(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(CELLS) / sizeof(CELLS[0]); i++) {
        /* The figures are about Rev 1; an enhanced Rev 2 IETF side must
         * give the same answers. */
        run_cell(&CELLS[i], 1);
        run_cell(&CELLS[i], 2);
    }
}

/* ------------------------------------------------------------------------ */
/* RFC 6581 9.1: IRD and ORD                                                 */

/* Request IRD/ORD; responder policy; result, Reply IRD/ORD, our IRD/ORD. */
struct resp_ird {
    const char *name;
    uint16_t req_ird, req_ord, ird, ord, ird_max, ord_min;
    int rc;
    uint16_t rep_ird, rep_ord, our_ird, our_ord;
};

/* clang-format off */
static const struct resp_ird RESP_IRD[] = {
    {"siw 16/16 mirrored", 16, 16, 16, 16, 0, 0, 0, 16, 16, 16, 16},
    {"siw IRD4/ORD8", 4, 8, 16, 16, 0, 0, 0, 8, 4, 8, 4},
    {"siw 1000 clamped to 128", 1000, 1000, 128, 128, 0, 0, 0, 128, 128, 128, 128},
    {"zero", 0, 0, 16, 16, 0, 0, 0, 0, 0, 0, 0},
    {"IRD up to ird_max", 8, 32, 4, 16, 64, 0, 0, 32, 8, 32, 8},
    {"initiator ORD 0x3FFF", 8, NN, 5, 16, 0, 0, 0, NN, 8, 5, 8},
    {"initiator IRD 0x3FFF", NN, 2, 16, 7, 0, 0, 0, 2, NN, 2, 7},
    {"both 0x3FFF", NN, NN, 5, 7, 0, 0, 0, NN, NN, 5, 7},
    {"ord_min met", 4, 1, 16, 16, 0, 4, 0, 1, 4, 1, 4},
    {"ord_min short: code 6", 3, 1, 16, 16, 0, 4, UW_EMPA_IRD, 1, 4, 1, 3},
    {"ord_min vs 0x3FFF", NN, 1, 16, 16, 0, 100, 0, 1, NN, 1, 16},
};
/* clang-format on */

static void test_ird_ord_responder(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(RESP_IRD) / sizeof(RESP_IRD[0]); i++) {
        const struct resp_ird *t = &RESP_IRD[i];
        uw_mpa_policy p = pol_d(t->ird, t->ord, t->ird_max, t->ord_min, ALL);
        uw_mpa_frame req = mk(UW_MPA_REQUEST, 2, true, false, 0, t->req_ird, t->req_ord), rq;
        wire(&req, &rq);
        uw_mpa_frame rep;
        uw_mpa_params pr;
        int rc = uw_mpa_respond(&p, &rq, false, NULL, 0, &rep, &pr);
        if (rc != t->rc)
            fail_msg("%s: rc %d", t->name, rc);
        assert_true(rep.enhanced);
        assert_int_equal(rep.ird, t->rep_ird);
        assert_int_equal(rep.ord, t->rep_ord);
        assert_int_equal(pr.ird, t->our_ird);
        assert_int_equal(pr.ord, t->our_ord);
        assert_int_equal(pr.peer_ird, t->req_ird);
        assert_int_equal(pr.peer_ord, t->req_ord);
        if (rc == UW_EMPA_IRD) {
            assert_int_equal(uw_mpa_error_code(rc), UW_MPA_ERR_IRD);
            /* The reject names the ORD needed; the initiator sees a refusal
             * and gets the responder's values (RFC 6581 9.1). */
            assert_true(rep.r);
            uw_mpa_frame rw;
            wire(&rep, &rw);
            uw_mpa_policy ip = pol_v(2, false, false);
            ip.ird = t->req_ird;
            ip.ord = t->req_ord;
            uw_mpa_params pi;
            assert_int_equal(uw_mpa_accept_reply(&ip, &req, &rw, &pi), UW_ECONNREFUSED);
            assert_int_equal(pi.peer_ord, t->ord_min);
            assert_int_equal(pi.peer_ird, t->rep_ird);
        } else {
            assert_false(rep.r);
        }
    }
}

/* Initiator policy; Reply IRD/ORD; result, our IRD/ORD. */
struct init_ird {
    const char *name;
    uint16_t ird, ord, ird_max, rep_ird, rep_ord;
    int rc;
    uint16_t our_ird, our_ord;
};

/* clang-format off */
static const struct init_ird INIT_IRD[] = {
    {"mirrored", 16, 16, 0, 16, 16, 0, 16, 16},
    {"IRD raised to responder ORD", 4, 16, 16, 16, 8, 0, 8, 16},
    {"IRD raised up to ird_max", 4, 16, 8, 16, 8, 0, 8, 16},
    {"IRD kept when larger", 4, 16, 0, 16, 2, 0, 4, 16},
    {"ORD cut to responder IRD", 16, 16, 0, 2, 16, 0, 16, 2},
    {"ORD kept when smaller", 16, 3, 0, 8, 16, 0, 16, 3},
    {"responder ORD 0x3FFF", 4, 16, 0, 16, NN, 0, 4, 16},
    {"responder IRD 0x3FFF", 16, 9, 0, NN, 16, 0, 16, 9},
    {"both 0x3FFF", 4, 9, 0, NN, NN, 0, 4, 9},
    {"responder ORD over ird: code 6", 4, 16, 0, 16, 5, UW_EMPA_IRD, 0, 0},
    {"siw: reply ORD 200 over 128", 128, 128, 0, 128, 200, UW_EMPA_IRD, 0, 0},
    {"responder ORD over ird_max", 4, 16, 8, 16, 9, UW_EMPA_IRD, 0, 0},
};
/* clang-format on */

static void test_ird_ord_initiator(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(INIT_IRD) / sizeof(INIT_IRD[0]); i++) {
        const struct init_ird *t = &INIT_IRD[i];
        uw_mpa_policy p = pol_d(t->ird, t->ord, t->ird_max, 0, ALL);
        uw_mpa_frame req, rep = mk(UW_MPA_REPLY, 2, true, false, 0, t->rep_ird, t->rep_ord), rw;
        assert_int_equal(uw_mpa_request(&p, NULL, 0, &req), 0);
        wire(&rep, &rw);
        uw_mpa_params pi;
        int rc = uw_mpa_accept_reply(&p, &req, &rw, &pi);
        if (rc != t->rc)
            fail_msg("%s: rc %d", t->name, rc);
        /* RFC 6581 9.1: the responder's values reach the ULP either way. */
        assert_int_equal(pi.peer_ird, t->rep_ird);
        assert_int_equal(pi.peer_ord, t->rep_ord);
        if (rc == 0) {
            assert_true(pi.enhanced);
            assert_int_equal(pi.ird, t->our_ird);
            assert_int_equal(pi.ord, t->our_ord);
        } else {
            assert_int_equal(uw_mpa_error_code(rc), UW_MPA_ERR_IRD);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* RFC 6581 9.2: peer-to-peer and RTR                                        */

/* Request A, RTR bits, ORD; responder RTR types, IRD, ird_max; result,
 * offered RTR types, Reply IRD, our IRD. */
struct resp_rtr {
    const char *name;
    int a, req_rtr, req_ord, rtr, ird, ird_max, rc, offer, rep_ird, our_ird;
};

/* clang-format off */
static const struct resp_rtr RESP_RTR[] = {
    {"intersection", 1, W | R, 4, ALL, 16, 0, 0, W | R, 4, 4},
    {"intersection of one", 1, S | R, 4, W | R, 16, 0, 0, R, 4, 4},
    {"none in common: offer ours", 1, S, 4, W | R, 16, 0, 0, W | R, 4, 4},
    {"no RTR asked (siw probe)", 1, 0, 1, W, 16, 0, 0, W, 1, 1},
    {"we support none: code 7", 1, W, 4, 0, 16, 0, UW_EMPA_RTR, 0, 4, 4},
    {"read RTR raises IRD 0 to 1", 1, R, 0, R, 16, 0, 0, R, 1, 1},
    {"read RTR, no IRD: offer write", 1, R, 0, W | R, 0, 0, 0, W, 0, 0},
    {"read RTR only, no IRD: code 7", 1, R, 0, R, 0, 0, UW_EMPA_RTR, 0, 0, 0},
    {"read RTR, ORD 0x3FFF, our IRD 0", 1, W | R, NN, ALL, 0, 8, 0, W, NN, 0},
    {"read RTR, ORD 0x3FFF, our IRD 2", 1, R, NN, ALL, 2, 0, 0, R, NN, 2},
    {"client-server ignores B C D", 0, ALL, 4, ALL, 16, 0, 0, 0, 4, 4},
    {"client-server, we support none", 0, 0, 4, 0, 16, 0, 0, 0, 4, 4},
};
/* clang-format on */

static void test_rtr_responder(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(RESP_RTR) / sizeof(RESP_RTR[0]); i++) {
        const struct resp_rtr *t = &RESP_RTR[i];
        uw_mpa_policy p = pol_d((uint16_t)t->ird, 16, (uint16_t)t->ird_max, 0, (uint8_t)t->rtr);
        uw_mpa_frame req =
            mk(UW_MPA_REQUEST, 2, true, t->a, (uint8_t)t->req_rtr, 8, (uint16_t)t->req_ord);
        uw_mpa_frame rq;
        wire(&req, &rq);
        uw_mpa_frame rep;
        uw_mpa_params pr;
        int rc = uw_mpa_respond(&p, &rq, false, NULL, 0, &rep, &pr);
        if (rc != t->rc)
            fail_msg("%s: rc %d", t->name, rc);
        if (rc) {
            assert_int_equal(uw_mpa_error_code(rc), UW_MPA_ERR_RTR);
            continue;
        }
        assert_int_equal(rep.p2p, t->a);
        assert_int_equal(rep.rtr, t->offer);
        assert_int_equal(pr.p2p, t->a);
        assert_int_equal(pr.rtr, t->offer);
        assert_int_equal(rep.ird, t->rep_ird);
        assert_int_equal(pr.ird, t->our_ird);
        /* Client-server: the Reply's word has A=B=C=D=0 on the wire. */
        uint8_t buf[64];
        assert_int_equal(uw_mpa_frame_encode(&rep, buf, sizeof(buf)), 24);
        if (!t->a) {
            assert_int_equal(buf[20] & 0xC0, 0);
            assert_int_equal(buf[22] & 0xC0, 0);
        }
    }
    /* Rejecting anyway: no RTR in common is no reason to withhold the Reject. */
    uw_mpa_policy none = pol_d(16, 16, 0, 0, 0);
    uw_mpa_frame req = mk(UW_MPA_REQUEST, 2, true, true, W, 8, 8), rep;
    uw_mpa_params pr;
    assert_int_equal(uw_mpa_respond(&none, &req, true, NULL, 0, &rep, &pr), 0);
    assert_true(rep.r && rep.p2p && rep.rtr == 0);
}

/* Request A and RTR bits; initiator RTR types; Reply enhanced, A, RTR bits,
 * IRD; result and the RTR type picked. */
struct init_rtr {
    const char *name;
    int req_a, req_rtr, rtr, rep_enh, rep_a, rep_rtr, rep_ird, rc, pick;
};

/* clang-format off */
static const struct init_rtr INIT_RTR[] = {
    {"write preferred", 1, ALL, ALL, 1, 1, ALL, 4, 0, W},
    {"read over send", 1, ALL, ALL, 1, 1, R | S, 4, 0, R},
    {"send only", 1, ALL, ALL, 1, 1, S, 4, 0, S},
    {"read needs responder IRD", 1, ALL, ALL, 1, 1, R | S, 0, 0, S},
    {"read only, responder IRD 0", 1, ALL, ALL, 1, 1, R, 0, UW_EMPA_RTR, 0},
    {"read with responder IRD 0x3FFF", 1, R, R, 1, 1, R, NN, 0, R},
    {"not asked but supported", 1, S, S | W, 1, 1, W, 1, 0, W},
    {"not asked, not supported", 1, S, S, 1, 1, W, 1, UW_EMPA_RTR, 0},
    {"siw: reply without RTR bits", 1, W | R, W | R, 1, 1, 0, 1, UW_EMPA_RTR, 0},
    {"mismatch: p2p asked, A=0", 1, W, W, 1, 0, 0, 1, UW_EMPA_RTR, 0},
    {"mismatch: client-server asked, A=1", 0, 0, ALL, 1, 1, W, 1, UW_EMPA_RTR, 0},
    {"client-server: B C D ignored", 0, 0, ALL, 1, 0, ALL, 1, 0, 0},
};
/* clang-format on */

static void test_rtr_initiator(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(INIT_RTR) / sizeof(INIT_RTR[0]); i++) {
        const struct init_rtr *t = &INIT_RTR[i];
        uw_mpa_policy p = pol_d(16, 16, 0, 0, (uint8_t)t->rtr);
        uw_mpa_frame req = mk(UW_MPA_REQUEST, 2, true, t->req_a, (uint8_t)t->req_rtr, 1, 1), rw;
        uw_mpa_frame rep =
            mk(UW_MPA_REPLY, 2, t->rep_enh, t->rep_a, (uint8_t)t->rep_rtr, (uint16_t)t->rep_ird, 1);
        wire(&rep, &rw);
        uw_mpa_params pi;
        int rc = uw_mpa_accept_reply(&p, &req, &rw, &pi);
        if (rc != t->rc)
            fail_msg("%s: rc %d", t->name, rc);
        if (rc) {
            assert_int_equal(uw_mpa_error_code(rc), UW_MPA_ERR_RTR);
            continue;
        }
        assert_int_equal(pi.p2p, t->req_a);
        assert_int_equal(pi.rtr, t->pick);
    }

    /* Linux siw probes, byte for byte: Request A C D (IRD 8, ORD 4), siw's
     * Reply picks the Write RTR and mirrors IRD/ORD. */
    uw_mpa_frame req = dec(KEY_REQ_HEX "50 02 0004 8008 c004", UW_MPA_REQUEST);
    uw_mpa_frame rep = dec(KEY_REP_HEX "50 02 0004 8004 8008", UW_MPA_REPLY);
    uw_mpa_params pi;
    uw_mpa_policy p = pol_d(8, 4, 0, 0, W | R);
    p.p2p = true;
    assert_int_equal(uw_mpa_accept_reply(&p, &req, &rep, &pi), 0);
    assert_int_equal(pi.rtr, W);
    assert_int_equal(pi.ird, 8);
    assert_int_equal(pi.ord, 4);
    /* Request A B (Send only); siw answers with the Write RTR instead. */
    req = dec(KEY_REQ_HEX "50 02 0004 c001 0001", UW_MPA_REQUEST);
    rep = dec(KEY_REP_HEX "50 02 0004 8001 8001", UW_MPA_REPLY);
    p.rtr = S;
    assert_int_equal(uw_mpa_accept_reply(&p, &req, &rep, &pi), UW_EMPA_RTR);
    p.rtr = S | W;
    assert_int_equal(uw_mpa_accept_reply(&p, &req, &rep, &pi), 0);
    assert_int_equal(pi.rtr, W);

    /* A p2p Request answered by an RDMAC peer (Rev 0, no word). */
    p = pol_v(2, false, true);
    p.p2p = true;
    assert_int_equal(uw_mpa_request(&p, NULL, 0, &req), 0);
    rep = rdmac(UW_MPA_REPLY);
    assert_int_equal(uw_mpa_accept_reply(&p, &req, &rep, &pi), UW_EMPA_RTR);
}

/* ------------------------------------------------------------------------ */
/* RFC 6581 10 and revisions                                                 */

static void test_revisions(void **state)
{
    (void)state;
    uw_mpa_frame req, rep, rw;
    uw_mpa_params pr, pi;
    uw_mpa_policy enh = pol_v(2, false, false);
    uw_mpa_policy v1 = pol_v(1, false, false);
    uint8_t b[64], want[64];

    /* Enhanced initiator vs a Rev-1-only responder: improperly formatted,
     * close (RFC 6581 10). */
    assert_int_equal(uw_mpa_request(&enh, NULL, 0, &req), 0);
    wire(&req, &rw);
    assert_int_equal(uw_mpa_respond(&v1, &rw, false, NULL, 0, &rep, &pr), UW_EMPA_REV);
    assert_int_equal(uw_mpa_error_code(UW_EMPA_REV), 4);
    /* An unenhanced Rev 2 Request is still above Rev 1. */
    uw_mpa_policy plain2 = enh;
    plain2.enhanced = false;
    assert_int_equal(uw_mpa_request(&plain2, NULL, 0, &req), 0);
    assert_int_equal(uw_mpa_respond(&v1, &req, false, NULL, 0, &rep, &pr), UW_EMPA_REV);

    /* Unenhanced Rev 2 Request to an enhanced responder: unenhanced Reply,
     * same as siw's "v2 without S" probe (40 02 0000). */
    assert_int_equal(uw_mpa_respond(&enh, &req, false, NULL, 0, &rep, &pr), 0);
    assert_true(!rep.enhanced && !rep.s && !pr.enhanced);
    long n = tu_unhex(KEY_REP_HEX "40 02 0000", want, sizeof(want));
    assert_int_equal(uw_mpa_frame_encode(&rep, b, sizeof(b)), n);
    assert_memory_equal(b, want, (size_t)n);
    /* No word: IRD/ORD are left to the ULP, as with 0x3FFF. */
    assert_true(pr.peer_ird == NN && pr.peer_ord == NN && pr.ird == 16 && pr.ord == 16);
    wire(&rep, &rw);
    assert_int_equal(uw_mpa_accept_reply(&plain2, &req, &rw, &pi), 0);
    assert_false(pi.enhanced);
    assert_int_equal(pi.rev, 2);

    /* A Rev 2 host MUST accept Rev 1 Requests (RFC 6581 6) and answers Rev 1. */
    assert_int_equal(uw_mpa_request(&v1, NULL, 0, &req), 0);
    assert_int_equal(uw_mpa_respond(&enh, &req, false, NULL, 0, &rep, &pr), 0);
    assert_true(rep.rev == 1 && pr.rev == 1 && pr.ddp_version == 1);

    /* Unknown Rev 3: refused by everyone, permissive or not. */
    uw_mpa_frame r3 = mk(UW_MPA_REQUEST, 3, false, false, 0, 0, 0);
    assert_int_equal(uw_mpa_respond(&enh, &r3, false, NULL, 0, &rep, &pr), UW_EMPA_REV);
    uw_mpa_policy perm = pol_v(2, false, true);
    assert_int_equal(uw_mpa_respond(&perm, &r3, false, NULL, 0, &rep, &pr), UW_EMPA_REV);

    /* Initiator side: a Reply may have a lower Rev (RFC 5044 C.1), never a
     * higher one; enhanced must answer enhanced and unenhanced unenhanced
     * (RFC 6581 10; siw closes on a Rev 1 or S=0 Reply too), and that is
     * checked before R since such a Reply is improperly formatted. */
    static const struct {
        uint8_t req_rev, req_enh, rep_rev, rep_enh, rep_r;
        int rc;
    } rows[] = {
        {2, 1, 3, 1, 0, UW_EMPA_REV},
        {1, 0, 2, 0, 0, UW_EMPA_REV},
        {2, 1, 1, 0, 0, UW_EMPA_NOT_ENHANCED},
        {2, 1, 2, 0, 0, UW_EMPA_NOT_ENHANCED},
        {2, 1, 2, 0, 1, UW_EMPA_NOT_ENHANCED},
        {2, 0, 2, 1, 0, UW_EMPA_ENH_UNEXPECTED},
        {2, 0, 1, 0, 0, 0},
        {2, 0, 2, 0, 0, 0},
        {1, 0, 1, 0, 0, 0},
        {2, 1, 2, 1, 0, 0},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        uw_mpa_policy ip = pol_v(rows[i].req_rev, false, false);
        ip.enhanced = rows[i].req_enh;
        assert_int_equal(uw_mpa_request(&ip, NULL, 0, &req), 0);
        rep = mk(UW_MPA_REPLY, rows[i].rep_rev, rows[i].rep_enh, false, 0, 1, 1);
        rep.r = rows[i].rep_r;
        int rc = uw_mpa_accept_reply(&ip, &req, &rep, &pi);
        assert_int_equal(rc, rows[i].rc);
        if (rc) {
            assert_int_equal(uw_mpa_error_code(rc), UW_MPA_ERR_BAD_FRAME);
        } else {
            assert_int_equal(pi.rev, rows[i].rep_rev);
            assert_int_equal(pi.ddp_version, 1);
        }
    }
}

/* ------------------------------------------------------------------------ */
/* CRC, reject, roles, argument checks                                       */

static void test_crc_matrix(void **state)
{
    (void)state;
    for (int k = 0; k < 8; k++) {
        bool ic = k & 1, rc = k & 2;
        uw_mpa_policy ip = pol_v(k & 4 ? 2 : 1, false, false);
        uw_mpa_policy rp = pol_v(k & 4 ? 2 : 1, false, false);
        ip.crc = ic;
        rp.crc = rc;
        uw_mpa_frame req, rq, rep, rw;
        uw_mpa_params pi, pr;
        assert_int_equal(uw_mpa_request(&ip, NULL, 0, &req), 0);
        assert_int_equal(req.c, ic);
        wire(&req, &rq);
        assert_int_equal(uw_mpa_respond(&rp, &rq, false, NULL, 0, &rep, &pr), 0);
        assert_int_equal(rep.c, rc);
        wire(&rep, &rw);
        assert_int_equal(uw_mpa_accept_reply(&ip, &req, &rw, &pi), 0);
        /* RFC 5044 7.1.1: C=1 in either frame means CRCs both ways. */
        assert_int_equal(pi.crc, ic || rc);
        assert_int_equal(pr.crc, ic || rc);
    }
}

static void test_reject(void **state)
{
    (void)state;
    const char pd[] = "go away";
    for (int rev = 0; rev <= 2; rev++) {
        uw_mpa_policy ip = pol_v(rev ? (uint8_t)rev : 1, false, true);
        uw_mpa_policy rp = pol_v(2, true, true);
        uw_mpa_frame req, rq, rep, rw;
        uw_mpa_params pi, pr;
        if (rev == 0)
            req = rdmac(UW_MPA_REQUEST);
        else
            assert_int_equal(uw_mpa_request(&ip, NULL, 0, &req), 0);
        wire(&req, &rq);
        assert_int_equal(uw_mpa_respond(&rp, &rq, true, pd, sizeof(pd), &rep, &pr), 0);
        assert_true(rep.r);
        assert_int_equal(rep.rev, rev);
        wire(&rep, &rw);
        assert_true(rw.r);
        assert_int_equal(rw.ulp_pd_len, sizeof(pd));
        assert_memory_equal(rw.ulp_pd, pd, sizeof(pd));
        if (rev == 0)
            continue; /* the RDMAC initiator is not us */
        assert_int_equal(uw_mpa_accept_reply(&ip, &req, &rw, &pi), UW_ECONNREFUSED);
        assert_int_equal(pi.peer_ird, rev == 2 ? rp.ird : NN);
        assert_int_equal(pi.peer_ord, rev == 2 ? rp.ord : NN);
    }
}

static void test_arguments(void **state)
{
    (void)state;
    uw_mpa_policy p = pol_v(2, false, false), b;
    uw_mpa_frame req, rep;
    uw_mpa_params pr;
    uint8_t pd[600] = {0};
    assert_int_equal(uw_mpa_request(&p, NULL, 0, &req), 0);
    /* Frames of the wrong type. */
    assert_int_equal(uw_mpa_respond(&p, &req, false, NULL, 0, &rep, &pr), 0);
    assert_int_equal(uw_mpa_respond(&p, &rep, false, NULL, 0, &rep, &pr), UW_EINVAL);
    assert_int_equal(uw_mpa_accept_reply(&p, &req, &req, &pr), UW_EINVAL);
    assert_int_equal(uw_mpa_accept_reply(&p, &rep, &rep, &pr), UW_EINVAL);
    /* Reply private data: 512 minus the word when the Reply is enhanced. */
    assert_int_equal(uw_mpa_respond(&p, &req, false, pd, 508, &rep, &pr), 0);
    assert_int_equal(rep.pd_length, 512);
    assert_int_equal(uw_mpa_respond(&p, &req, false, pd, 509, &rep, &pr), UW_EMPA_PD_LENGTH);
    uw_mpa_frame r1 = mk(UW_MPA_REQUEST, 1, false, false, 0, 0, 0);
    assert_int_equal(uw_mpa_respond(&p, &r1, false, pd, 512, &rep, &pr), 0);
    assert_int_equal(uw_mpa_respond(&p, &r1, false, pd, 513, &rep, &pr), UW_EMPA_PD_LENGTH);
    assert_int_equal(uw_mpa_respond(&p, &r1, false, NULL, 1, &rep, &pr), UW_EINVAL);

    b = p;
    b.rev = 3;
    assert_int_equal(uw_mpa_respond(&b, &req, false, NULL, 0, &rep, &pr), UW_EINVAL);
    b = p;
    b.ord_min = 0x4000;
    assert_int_equal(uw_mpa_respond(&b, &req, false, NULL, 0, &rep, &pr), UW_EINVAL);
    b = p;
    b.ird_max = 0x4000;
    assert_int_equal(uw_mpa_accept_reply(&b, &req, &rep, &pr), UW_EINVAL);
    assert_int_equal(uw_mpa_respond(&p, NULL, false, NULL, 0, &rep, &pr), UW_EINVAL);
    assert_int_equal(uw_mpa_respond(&p, &req, false, NULL, 0, NULL, &pr), UW_EINVAL);
    assert_int_equal(uw_mpa_respond(&p, &req, false, NULL, 0, &rep, NULL), UW_EINVAL);
    assert_int_equal(uw_mpa_accept_reply(&p, &req, NULL, &pr), UW_EINVAL);
    assert_int_equal(uw_mpa_accept_reply(&p, &req, &rep, NULL), UW_EINVAL);
    /* A Rev 1 frame claiming the word cannot come from the decoder. */
    uw_mpa_frame odd = mk(UW_MPA_REQUEST, 1, true, false, 0, 1, 1);
    assert_int_equal(uw_mpa_respond(&p, &odd, false, NULL, 0, &rep, &pr), UW_EINVAL);
}

/* ------------------------------------------------------------------------ */
/* End to end                                                                */

static uint16_t rand_depth(tu_rng *r)
{
    switch (tu_rng_below(r, 6)) {
    case 0:
        return 0;
    case 1:
        return NN;
    case 2:
        return (uint16_t)tu_rng_below(r, 0x3FFF);
    default:
        return (uint16_t)tu_rng_below(r, 130);
    }
}

static void rand_policy(tu_rng *r, uw_mpa_policy *p, bool initiator)
{
    uw_mpa_policy_default(p);
    p->crc = tu_rng_below(r, 2);
    p->markers = tu_rng_below(r, 2);
    p->rev = (uint8_t)(1 + tu_rng_below(r, 2));
    p->enhanced = p->rev == 2 && tu_rng_below(r, 4);
    p->ird = rand_depth(r);
    p->ord = rand_depth(r);
    if (tu_rng_below(r, 3) == 0)
        p->ird_max = (uint16_t)(p->ird + tu_rng_below(r, (uint64_t)(0x3FFF - p->ird) + 1));
    p->rtr = (uint8_t)tu_rng_below(r, 8);
    p->p2p = initiator && p->enhanced && p->rtr && tu_rng_below(r, 2);
    if (!initiator && tu_rng_below(r, 4) == 0)
        p->ord_min = (uint16_t)tu_rng_below(r, 20);
    p->accept_rev0 = tu_rng_below(r, 2);
}

static void test_end_to_end(void **state)
{
    (void)state;
    tu_rng r;
    tu_rng_init(&r, tu_seed(2011));
    unsigned ok = 0, refused_ird = 0, no_rtr = 0, rev = 0;
    for (int it = 0; it < 4000; it++) {
        uw_mpa_policy ip, rp;
        rand_policy(&r, &ip, true);
        rand_policy(&r, &rp, false);
        uint8_t pd[512];
        size_t pdl = tu_rng_below(&r, ip.enhanced ? 509 : 513);
        tu_rng_fill(&r, pd, pdl);
        uw_mpa_frame req, rq, rep, rw;
        uw_mpa_params pi, pr;
        assert_int_equal(uw_mpa_request(&ip, pd, pdl, &req), 0);
        wire(&req, &rq);
        assert_memory_equal(rq.ulp_pd, pd, pdl);
        int rc = uw_mpa_respond(&rp, &rq, false, "ok", 2, &rep, &pr);
        if (rc == UW_EMPA_REV) {
            assert_true(req.rev > rp.rev);
            rev++;
            continue;
        }
        if (rc == UW_EMPA_IRD) {
            /* Only below ord_min, and the initiator is told with a Reject. */
            assert_true(rq.ird != NN && rq.ird < rp.ord_min);
            wire(&rep, &rw);
            assert_int_equal(uw_mpa_accept_reply(&ip, &req, &rw, &pi), UW_ECONNREFUSED);
            assert_int_equal(pi.peer_ord, rp.ord_min);
            refused_ird++;
            continue;
        }
        if (rc == UW_EMPA_RTR) {
            assert_true(rq.p2p);
            no_rtr++;
            continue;
        }
        assert_int_equal(rc, 0);
        wire(&rep, &rw);
        rc = uw_mpa_accept_reply(&ip, &req, &rw, &pi);
        if (rc == UW_EMPA_RTR) {
            /* Nothing the responder offered is something we can send. */
            uint8_t cand = rw.rtr & ip.rtr;
            if (rw.ird == 0)
                cand &= (uint8_t)~R;
            assert_int_equal(cand, 0);
            no_rtr++;
            continue;
        }
        assert_int_equal(rc, 0);
        ok++;
        assert_int_equal(pi.crc, pr.crc);
        assert_int_equal(pi.crc, ip.crc || rp.crc);
        assert_int_equal(pi.markers_rx, pr.markers_tx);
        assert_int_equal(pr.markers_rx, pi.markers_tx);
        assert_int_equal(pi.ddp_version, pr.ddp_version);
        assert_int_equal(pi.enhanced, pr.enhanced);
        assert_int_equal(pi.p2p, pr.p2p);
        assert_int_equal(pi.rev, pr.rev);
        assert_memory_equal(rw.ulp_pd, "ok", 2);
        if (pi.enhanced) {
            assert_int_equal(pi.peer_ird, rw.ird);
            assert_int_equal(pi.peer_ord, rw.ord);
            assert_int_equal(pr.peer_ird, req.ird);
            assert_int_equal(pr.peer_ord, req.ord);
            /* RFC 6581 9.1 after a successful negotiation. */
            if (req.ord != NN && rw.ird != NN)
                assert_true(pi.ord <= pr.ird);
            if (req.ird != NN && rw.ord != NN)
                assert_true(pr.ord <= pi.ird);
        }
        if (pi.p2p) {
            /* Exactly one RTR type, one the responder offered and accepts. */
            assert_true((pi.rtr == W || pi.rtr == R || pi.rtr == S) && (pi.rtr & pr.rtr & rp.rtr));
            if (pi.rtr == R)
                assert_true(pr.ird >= 1);
        } else {
            assert_int_equal(pi.rtr, 0);
            assert_int_equal(pr.rtr, 0);
        }
    }
    /* Every outcome was reached. */
    assert_true(ok > 1000);
    assert_true(refused_ird > 0 && no_rtr > 0 && rev > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_default),    cmocka_unit_test(test_request),
        cmocka_unit_test(test_appendix_c),        cmocka_unit_test(test_ird_ord_responder),
        cmocka_unit_test(test_ird_ord_initiator), cmocka_unit_test(test_rtr_responder),
        cmocka_unit_test(test_rtr_initiator),     cmocka_unit_test(test_revisions),
        cmocka_unit_test(test_crc_matrix),        cmocka_unit_test(test_reject),
        cmocka_unit_test(test_arguments),         cmocka_unit_test(test_end_to_end),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
