/* Fuzz target: MPA startup negotiation (RFC 5044 7.1, RFC 6581 9 and 10).
 *
 * Input:  11 octets  responder policy (read_policy)
 *         11 octets  initiator policy
 *         b   bit0 the responder rejects, bit1 struct mode for the raw request
 *         2 x u16    Reply and Request private data lengths (mod 520)
 *         rest       a Request frame, decoded as UW_MPA_REQUEST (or, in struct
 *                    mode, copied field by field into a uw_mpa_frame)
 *
 * Flow A (anything goes): uw_mpa_respond to the decoded raw Request; a Reply
 * it produces must encode and decode back to itself; uw_mpa_accept_reply
 * then runs on it. Nothing may crash; errors must be documented ones.
 *
 * Flow B (both ends honest): the initiator's Request from uw_mpa_request
 * goes through encode/decode to uw_mpa_respond, the Reply back through
 * encode/decode to uw_mpa_accept_reply. Whether uw_mpa_request accepts the
 * policy is predicted independently; when both ends succeed the parameters
 * must agree: CRC, markers crossed over, IRD/ORD compatible (RFC 6581 9.1)
 * unless a side opted out with 0x3FFF, and in peer-to-peer mode one RTR type
 * that the responder offered and the initiator can send (RFC 6581 9.2). */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "uwarp/error.h"
#include "uwarp/mpa.h"

#define NO_NEG UW_MPA_NO_NEGOTIATION

/* 14-bit IRD/ORD values, mostly valid, with the interesting ones common. */
static uint16_t pick14(uint16_t raw)
{
    switch (raw >> 14) {
    case 0:
        return raw & 0x1F;
    case 1:
        return raw & 0x3FFF;
    case 2:
        return (raw & 1) ? NO_NEG : NO_NEG - 1;
    default:
        return (raw & 0x2000) ? raw : (uint16_t)(raw & 3); /* sometimes > 0x3FFF: invalid */
    }
}

static void read_policy(fz_in *in, uw_mpa_policy *p)
{
    uint8_t fl = fz_u8(in), rev = fz_u8(in);
    memset(p, 0, sizeof(*p));
    p->crc = fl & 1;
    p->markers = fl & 2;
    p->enhanced = fl & 4;
    p->p2p = fl & 8;
    p->accept_rev0 = fl & 16;
    static const uint8_t revs[4] = {2, 1, 2, 0};
    p->rev = (fl & 32) ? rev : revs[rev & 3]; /* 0 and > 2 are invalid */
    p->ird = pick14(fz_u16(in));
    p->ord = pick14(fz_u16(in));
    p->ird_max = pick14(fz_u16(in));
    p->ord_min = pick14(fz_u16(in));
    uint8_t rtr = fz_u8(in);
    p->rtr = (fl & 64) ? rtr : (rtr & UW_MPA_RTR_ALL);
    if (fl & 128)
        uw_mpa_policy_default(p);
}

static bool policy_valid(const uw_mpa_policy *p)
{
    return p->rev >= 1 && p->rev <= 2 && p->ird <= NO_NEG && p->ord <= NO_NEG &&
           p->ird_max <= NO_NEG && p->ord_min <= NO_NEG && p->rtr <= UW_MPA_RTR_ALL;
}

static bool frame_equal(const uw_mpa_frame *a, const uw_mpa_frame *b)
{
    return a->type == b->type && a->m == b->m && a->c == b->c && a->r == b->r && a->s == b->s &&
           a->res == b->res && a->rev == b->rev && a->pd_length == b->pd_length &&
           a->enhanced == b->enhanced && a->ird == b->ird && a->ord == b->ord && a->p2p == b->p2p &&
           a->rtr == b->rtr && a->ulp_pd_len == b->ulp_pd_len &&
           memcmp(a->ulp_pd, b->ulp_pd, a->ulp_pd_len) == 0;
}

/* Encodes f and decodes it as expect; the result must be f itself. */
static void wire_roundtrip(const uw_mpa_frame *f, int expect, uw_mpa_frame *out)
{
    uint8_t buf[UW_MPA_FRAME_HDR_LEN + UW_MPA_MAX_PD];
    ssize_t w = uw_mpa_frame_encode(f, buf, sizeof(buf));
    FZ_CHECK(w >= (ssize_t)UW_MPA_FRAME_HDR_LEN);
    FZ_CHECK(uw_mpa_frame_decode(buf, (size_t)w, expect, UW_MPA_MAX_PD, out) == w);
    FZ_CHECK(frame_equal(f, out));
}

static bool respond_error_ok(int rc)
{
    return rc == UW_EMPA_REV || rc == UW_EMPA_IRD || rc == UW_EMPA_RTR || rc == UW_EINVAL ||
           rc == UW_EMPA_PD_LENGTH;
}

static bool accept_error_ok(int rc)
{
    return rc == UW_ECONNREFUSED || rc == UW_EMPA_REV || rc == UW_EMPA_NOT_ENHANCED ||
           rc == UW_EMPA_ENH_UNEXPECTED || rc == UW_EMPA_IRD || rc == UW_EMPA_RTR ||
           rc == UW_EINVAL;
}

static const uint8_t PD[UW_MPA_MAX_PD + 8];

/* Responder side shared by both flows: respond, and when a Reply was made,
 * check it survives the wire. Returns respond's result. */
static int respond(const uw_mpa_policy *pr, const uw_mpa_frame *req, bool reject, size_t pd_len,
                   uw_mpa_frame *rep, uw_mpa_frame *rep_wire, uw_mpa_params *pp)
{
    int rc = uw_mpa_respond(pr, req, reject, PD, pd_len, rep, pp);
    FZ_CHECK(rc == 0 || respond_error_ok(rc));
    if (!policy_valid(pr))
        FZ_CHECK(rc == UW_EINVAL);
    if (rc == 0 || rc == UW_EMPA_IRD) {
        FZ_CHECK(rep->type == UW_MPA_REPLY);
        FZ_CHECK(rep->ulp_pd_len == pd_len);
        wire_roundtrip(rep, UW_MPA_REPLY, rep_wire);
    }
    if (rc == UW_EMPA_IRD)
        FZ_CHECK(rep->r && rep->enhanced && rep->ord == pr->ord_min);
    if (rc == 0) {
        FZ_CHECK(rep->r == reject);
        FZ_CHECK(pp->rev == req->rev && rep->rev == req->rev);
        FZ_CHECK(pp->crc == (req->c || pr->crc) || req->rev == 0);
        FZ_CHECK(pp->ird <= NO_NEG && pp->ord <= NO_NEG);
        if (pp->enhanced) {
            FZ_CHECK(req->enhanced && rep->enhanced);
            FZ_CHECK(pp->peer_ird == req->ird && pp->peer_ord == req->ord);
            /* RFC 6581 9.1: our ORD at most the initiator's IRD. */
            FZ_CHECK(req->ird == NO_NEG || pp->ord <= req->ird);
            FZ_CHECK(req->ird == NO_NEG || pp->ord >= pr->ord_min || pp->ord == pr->ord);
            if (pp->p2p && !reject) {
                /* (A Reject goes out even without an RTR type in common.) */
                FZ_CHECK(pp->rtr != 0 && pp->rtr <= UW_MPA_RTR_ALL && rep->rtr == pp->rtr);
                FZ_CHECK((pp->rtr & ~pr->rtr) == 0);
                /* A Read RTR needs an inbound Read slot. */
                FZ_CHECK(!(pp->rtr & UW_MPA_RTR_READ) || pp->ird >= 1);
            }
        }
    }
    return rc;
}

static void flow_a(const uw_mpa_policy *pr, const uw_mpa_policy *pi, const uw_mpa_frame *req,
                   bool reject, size_t pd_len)
{
    uw_mpa_frame *rep = malloc(sizeof(*rep)), *rep_wire = malloc(sizeof(*rep_wire));
    FZ_CHECK(rep && rep_wire);
    uw_mpa_params pp, pi_params;
    int rc = respond(pr, req, reject, pd_len, rep, rep_wire, &pp);
    if (rc == 0 || rc == UW_EMPA_IRD) {
        int ra = uw_mpa_accept_reply(pi, req, rep_wire, &pi_params);
        FZ_CHECK(ra == 0 || accept_error_ok(ra));
        if (rep_wire->r && policy_valid(pi) && ra != UW_EINVAL)
            FZ_CHECK(ra != 0);
    }
    free(rep);
    free(rep_wire);
}

static void flow_b(const uw_mpa_policy *pr, const uw_mpa_policy *pi, bool reject, size_t rep_pd_len,
                   size_t req_pd_len)
{
    uw_mpa_frame *req = malloc(sizeof(*req)), *req_wire = malloc(sizeof(*req_wire));
    uw_mpa_frame *rep = malloc(sizeof(*rep)), *rep_wire = malloc(sizeof(*rep_wire));
    FZ_CHECK(req && req_wire && rep && rep_wire);

    int rq = uw_mpa_request(pi, PD, req_pd_len, req);
    bool ok = policy_valid(pi) && !(pi->enhanced && pi->rev < 2) &&
              !(pi->p2p && (!pi->enhanced || pi->rtr == 0));
    size_t room = UW_MPA_MAX_PD - (pi->enhanced ? UW_MPA_ENH_WORD_LEN : 0u);
    if (!ok)
        FZ_CHECK(rq == UW_EINVAL);
    else if (req_pd_len > room)
        FZ_CHECK(rq == UW_EMPA_PD_LENGTH);
    else
        FZ_CHECK(rq == 0);
    if (rq != 0)
        goto out;
    FZ_CHECK(req->type == UW_MPA_REQUEST && !req->r && req->rev == pi->rev);
    FZ_CHECK(req->c == pi->crc && req->m == pi->markers && req->enhanced == pi->enhanced);
    wire_roundtrip(req, UW_MPA_REQUEST, req_wire);

    uw_mpa_params pp, ip;
    int rc = respond(pr, req_wire, reject, rep_pd_len, rep, rep_wire, &pp);
    if (rc == UW_EMPA_REV)
        FZ_CHECK(pr->rev < pi->rev);
    if (rc == UW_EMPA_IRD)
        FZ_CHECK(pi->enhanced && pi->ird != NO_NEG && pr->ord_min > pi->ird);
    if (rc == UW_EMPA_RTR)
        FZ_CHECK(pi->p2p);
    if (rc != 0 && rc != UW_EMPA_IRD)
        goto out;

    int ra = uw_mpa_accept_reply(pi, req, rep_wire, &ip);
    FZ_CHECK(ra == 0 || accept_error_ok(ra));
    if (rep_wire->r) {
        FZ_CHECK(ra == UW_ECONNREFUSED);
        if (rep_wire->enhanced)
            FZ_CHECK(ip.peer_ird == rep_wire->ird && ip.peer_ord == rep_wire->ord);
        goto out;
    }
    FZ_CHECK(rc == 0);
    /* Honest peers: the only ways left to fail are a responder ORD beyond
     * what we can hold and no RTR type in common. */
    uint16_t ird_max = pi->ird_max ? pi->ird_max : pi->ird;
    if (ra == UW_EMPA_IRD)
        FZ_CHECK(pp.enhanced && rep_wire->ord != NO_NEG && rep_wire->ord > ird_max);
    else if (ra == UW_EMPA_RTR)
        FZ_CHECK(pp.p2p && (pp.rtr & pi->rtr) == 0);
    else
        FZ_CHECK(ra == 0);
    if (ra != 0)
        goto out;

    /* Both ends agree. */
    FZ_CHECK(ip.rev == pp.rev && ip.ddp_version == pp.ddp_version);
    FZ_CHECK(ip.crc == pp.crc && ip.crc == (pi->crc || pr->crc));
    FZ_CHECK(ip.markers_rx == pp.markers_tx && ip.markers_tx == pp.markers_rx);
    FZ_CHECK(ip.markers_rx == pi->markers && pp.markers_rx == pr->markers);
    FZ_CHECK(ip.enhanced == pp.enhanced && ip.enhanced == pi->enhanced);
    FZ_CHECK(ip.p2p == pp.p2p && ip.p2p == (pi->enhanced && pi->p2p));
    if (ip.enhanced) {
        FZ_CHECK(ip.ord <= pp.ird || ip.ord == NO_NEG || pp.ird == NO_NEG || pi->ord == NO_NEG);
        FZ_CHECK(pp.ord <= ip.ird || pp.ord == NO_NEG || ip.ird == NO_NEG || pi->ird == NO_NEG);
        FZ_CHECK(ip.peer_ird == rep_wire->ird && ip.peer_ord == rep_wire->ord);
        FZ_CHECK(pp.peer_ird == pi->ird && pp.peer_ord == pi->ord);
        FZ_CHECK(ip.ird <= NO_NEG && ip.ord <= NO_NEG);
    }
    if (ip.p2p) {
        /* Exactly one RTR type, offered by the responder, sendable by us. */
        FZ_CHECK(ip.rtr == UW_MPA_RTR_SEND || ip.rtr == UW_MPA_RTR_WRITE ||
                 ip.rtr == UW_MPA_RTR_READ);
        FZ_CHECK((ip.rtr & pp.rtr) != 0 && (ip.rtr & pi->rtr) != 0);
        FZ_CHECK(ip.rtr != UW_MPA_RTR_READ || pp.ird >= 1);
    } else {
        FZ_CHECK(ip.rtr == 0);
    }
out:
    free(req);
    free(req_wire);
    free(rep);
    free(rep_wire);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    uw_mpa_policy pr, pi;
    read_policy(&in, &pr);
    read_policy(&in, &pi);
    uint8_t mode = fz_u8(&in);
    size_t rep_pd = fz_u16(&in) % 520u, req_pd = fz_u16(&in) % 520u;
    bool reject = mode & 1;

    flow_b(&pr, &pi, reject, rep_pd, req_pd);

    uw_mpa_frame *req = malloc(sizeof(*req));
    FZ_CHECK(req != NULL);
    size_t n = fz_left(&in);
    ssize_t d = uw_mpa_frame_decode(data + in.off, n, UW_MPA_REQUEST, UW_MPA_MAX_PD, req);
    if (d > 0) {
        flow_a(&pr, &pi, req, reject, rep_pd);
    } else if (mode & 2) {
        /* Frames no decoder would produce: the functions must cope. */
        memset(req, 0, sizeof(*req));
        uint8_t fl = fz_u8(&in);
        req->type = (fl & 1) ? UW_MPA_REQUEST : (fl >> 6);
        req->m = fl & 2;
        req->c = fl & 4;
        req->r = fl & 8;
        req->s = fl & 16;
        req->enhanced = fl & 32;
        req->rev = fz_u8(&in);
        req->res = fz_u8(&in);
        req->ird = fz_u16(&in);
        req->ord = fz_u16(&in);
        req->p2p = fz_u8(&in) & 1;
        req->rtr = fz_u8(&in);
        req->pd_length = fz_u16(&in);
        req->ulp_pd_len = fz_u16(&in) % (UW_MPA_MAX_PD + 1);
        uw_mpa_frame *rep = malloc(sizeof(*rep));
        FZ_CHECK(rep != NULL);
        uw_mpa_params pp, ip;
        int rc = uw_mpa_respond(&pr, req, reject, PD, rep_pd, rep, &pp);
        FZ_CHECK(rc == 0 || respond_error_ok(rc));
        if (rc == 0) {
            int ra = uw_mpa_accept_reply(&pi, req, rep, &ip);
            FZ_CHECK(ra == 0 || accept_error_ok(ra));
        }
        free(rep);
    }
    free(req);
    return 0;
}
