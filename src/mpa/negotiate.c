/* MPA startup negotiation (RFC 5044 7.1 and Appendix C, RFC 6581 9 and 10):
 * pure functions from a policy and the peer's frame to our frame and the
 * connection parameters. */
#include <string.h>

#include "uwarp/mpa.h"

#define NO_NEG UW_MPA_NO_NEGOTIATION

void uw_mpa_policy_default(uw_mpa_policy *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->crc = true; /* RFC 5044 4.4: CRCs are on unless both sides turn them off */
    p->markers = false;
    p->rev = 2;
    p->enhanced = true;
    p->ird = 16;
    p->ord = 16;
    p->rtr = UW_MPA_RTR_ALL;
}

static int check_policy(const uw_mpa_policy *pol)
{
    if (!pol || pol->rev < 1 || pol->rev > 2)
        return UW_EINVAL;
    if (pol->ird > NO_NEG || pol->ord > NO_NEG || pol->ird_max > NO_NEG || pol->ord_min > NO_NEG)
        return UW_EINVAL;
    if (pol->rtr & ~UW_MPA_RTR_ALL)
        return UW_EINVAL;
    return 0;
}

static uint16_t ird_max_of(const uw_mpa_policy *pol)
{
    return pol->ird_max ? pol->ird_max : pol->ird;
}

static uint16_t min16(uint16_t a, uint16_t b)
{
    return a < b ? a : b;
}

/* Copies the ULP private data behind the RFC 6581 word (if any): RFC 6581 9
 * takes the word's 4 octets out of RFC 5044's 512. */
static int put_pd(uw_mpa_frame *f, const void *pd, size_t pd_len)
{
    size_t room = UW_MPA_MAX_PD - (f->enhanced ? UW_MPA_ENH_WORD_LEN : 0);
    if (pd_len && !pd)
        return UW_EINVAL;
    if (pd_len > room)
        return UW_EMPA_PD_LENGTH;
    f->ulp_pd_len = (uint16_t)pd_len;
    if (pd_len)
        memcpy(f->ulp_pd, pd, pd_len);
    f->pd_length = (uint16_t)(pd_len + (f->enhanced ? UW_MPA_ENH_WORD_LEN : 0));
    return 0;
}

/* The one RTR type the initiator sends (RFC 6581 9.2 "MUST generate one of
 * the negotiated RTR indications"). A zero-length Write is preferred: it needs
 * no IRD slot at the responder and Linux siw as responder picks it too; a Read
 * comes next, a Send last because it consumes a receive buffer. */
static uint8_t pick_rtr(uint8_t set)
{
    if (set & UW_MPA_RTR_WRITE)
        return UW_MPA_RTR_WRITE;
    if (set & UW_MPA_RTR_READ)
        return UW_MPA_RTR_READ;
    if (set & UW_MPA_RTR_SEND)
        return UW_MPA_RTR_SEND;
    return 0;
}

/* RFC 6581 9.2: the responder SHOULD set each requested type it supports; if
 * it supports none of them it MUST set at least one it does support (we set
 * them all, so the initiator has the widest choice). */
static uint8_t rtr_offer(uint8_t asked, uint8_t can)
{
    uint8_t common = asked & can;
    return common ? common : can;
}

/* ------------------------------------------------------------------------ */
/* Initiator: Request                                                        */

int uw_mpa_request(const uw_mpa_policy *pol, const void *pd, size_t pd_len, uw_mpa_frame *req)
{
    if (check_policy(pol) || !req)
        return UW_EINVAL;
    /* RFC 6581 6: the enhanced format needs Rev 2. */
    if (pol->enhanced && pol->rev < 2)
        return UW_EINVAL;
    /* The peer-to-peer model is only expressible in the RFC 6581 word, and an
     * initiator that can send no RTR could never finish it (RFC 6581 9.2). */
    if (pol->p2p && (!pol->enhanced || !pol->rtr))
        return UW_EINVAL;

    memset(req, 0, offsetof(uw_mpa_frame, ulp_pd));
    req->type = UW_MPA_REQUEST;
    req->rev = pol->rev;
    req->m = pol->markers;
    req->c = pol->crc;
    /* RFC 5044 7.1.1: R is zero in a Request; Res is sent as zero. */
    req->enhanced = pol->enhanced;
    req->s = pol->enhanced;
    if (pol->enhanced) {
        req->ird = pol->ird;
        req->ord = pol->ord;
        req->p2p = pol->p2p;
        /* RFC 6581 9.2: B, C, D are 0 in the client-server model. */
        req->rtr = pol->p2p ? pol->rtr : 0;
    }
    return put_pd(req, pd, pd_len);
}

/* ------------------------------------------------------------------------ */
/* Responder: Reply                                                          */

/* RFC 5044 C.2.4: a permissive responder answers an RDMAC (Rev 0) Request
 * with Rev 0, M and C set, and switches to DDP/RDMAP version 0 with markers
 * both ways and CRCs. */
static void respond_rev0(const uw_mpa_policy *pol, uw_mpa_frame *rep, uw_mpa_params *params)
{
    rep->rev = 0;
    rep->m = true;
    rep->c = true;
    params->rev = 0;
    params->ddp_version = 0;
    params->crc = true;
    params->markers_rx = true;
    params->markers_tx = true;
    params->ird = pol->ird;
    params->ord = pol->ord;
    params->peer_ird = NO_NEG;
    params->peer_ord = NO_NEG;
}

int uw_mpa_respond(const uw_mpa_policy *pol, const uw_mpa_frame *req, bool reject, const void *pd,
                   size_t pd_len, uw_mpa_frame *rep, uw_mpa_params *params)
{
    if (check_policy(pol) || !req || !rep || !params || req->type != UW_MPA_REQUEST)
        return UW_EINVAL;
    if (req->enhanced && req->rev < 2)
        return UW_EINVAL; /* not a frame uw_mpa_frame_decode() could produce */

    /* RFC 5044 7.1.1 (Rev): a revision we cannot interoperate with closes the
     * connection without a Reply. Rev 0 is the RDMAC protocol (Appendix C.2):
     * only a permissive responder speaks it. Above our own revision: RFC 6581
     * 10 has a Rev-1-only responder treat a Rev 2 (enhanced) Request as
     * improperly formatted, and an unknown future revision is no better. */
    if (req->rev == 0 && !pol->accept_rev0)
        return UW_EMPA_REV;
    if (req->rev > pol->rev)
        return UW_EMPA_REV;

    memset(rep, 0, offsetof(uw_mpa_frame, ulp_pd));
    memset(params, 0, sizeof(*params));
    rep->type = UW_MPA_REPLY;
    rep->r = reject;

    if (req->rev == 0) {
        respond_rev0(pol, rep, params);
        return put_pd(rep, pd, pd_len);
    }

    /* RFC 6581 10: an enhanced Request gets an enhanced Reply and an
     * unenhanced one an unenhanced Reply; the Reply echoes the Request's Rev
     * (which we speak, see above). */
    bool enh = req->enhanced;
    rep->rev = req->rev;
    rep->enhanced = enh;
    rep->s = enh;
    rep->c = pol->crc;
    rep->m = pol->markers;

    params->rev = req->rev;
    params->ddp_version = 1;
    /* RFC 5044 7.1.1 (C): C in either frame turns CRCs on both ways. (M): our
     * M asks the initiator to mark what we receive, its M what we send. */
    params->crc = req->c || pol->crc;
    params->markers_rx = pol->markers;
    params->markers_tx = req->m;
    params->enhanced = enh;

    int rc = put_pd(rep, pd, pd_len);
    if (rc)
        return rc;

    if (!enh) {
        /* No word: IRD/ORD are the ULP's business, as with 0x3FFF. */
        params->ird = pol->ird;
        params->ord = pol->ord;
        params->peer_ird = NO_NEG;
        params->peer_ord = NO_NEG;
        return 0;
    }

    /* RFC 6581 9.1: the peer's values are passed on whatever the outcome. */
    params->peer_ird = req->ird;
    params->peer_ord = req->ord;
    uint16_t ird_max = ird_max_of(pol);

    /* RFC 6581 9.1, responder IRD: at least the initiator ORD when we can
     * hold that many; an initiator ORD of 0x3FFF leaves our IRD unchanged and
     * is answered with 0x3FFF. */
    bool ird_fixed = req->ord == NO_NEG;
    uint16_t ird = ird_fixed ? pol->ird : min16(req->ord, ird_max);
    /* RFC 6581 9.1, responder ORD: at most the initiator IRD; 0x3FFF leaves
     * our ORD unchanged and is answered with 0x3FFF. Below the ULP's minimum
     * we may reject and name the ORD we need (Terminate code 6). */
    bool ord_fixed = req->ird == NO_NEG;
    bool ird_short = !ord_fixed && pol->ord_min > req->ird;
    uint16_t ord = ord_fixed ? pol->ord : min16(pol->ord, req->ird);

    /* RFC 6581 9.2: A is echoed; B, C, D of a client-server Request are
     * ignored and our Reply clears them. */
    bool rtr_fail = false;
    uint8_t offer = 0;
    if (req->p2p) {
        uint8_t can = pol->rtr;
        offer = rtr_offer(req->rtr, can);
        if (offer & UW_MPA_RTR_READ && ird == 0) {
            /* A Read RTR needs an IRD slot. 9.1 allows raising the IRD to 1
             * for it, but not when the initiator said 0x3FFF ("leave it
             * unchanged"). Without the slot we cannot support Read at all,
             * so the offer is recomputed from what is left. */
            if (!ird_fixed && ird_max >= 1) {
                ird = 1;
            } else {
                can &= (uint8_t)~UW_MPA_RTR_READ;
                offer = rtr_offer(req->rtr, can);
            }
        }
        /* 9.2: a responder supporting no RTR type cannot do peer-to-peer. */
        rtr_fail = offer == 0;
    }

    rep->ird = ird_fixed ? NO_NEG : ird;
    rep->ord = ord_fixed ? NO_NEG : ord;
    rep->p2p = req->p2p;
    rep->rtr = offer;
    params->ird = ird;
    params->ord = ord;
    params->p2p = req->p2p;
    params->rtr = offer;

    if (ird_short) {
        /* RFC 6581 9.1: a Reject whose ORD names what the ULP needs. */
        rep->r = true;
        rep->ord = pol->ord_min;
        return UW_EMPA_IRD;
    }
    /* A Reject needs no agreed RTR: it goes out as asked (RFC 5044 7.1.2). */
    if (rtr_fail && !reject)
        return UW_EMPA_RTR;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Initiator: Reply                                                          */

int uw_mpa_accept_reply(const uw_mpa_policy *pol, const uw_mpa_frame *req, const uw_mpa_frame *rep,
                        uw_mpa_params *params)
{
    if (check_policy(pol) || !req || !rep || !params)
        return UW_EINVAL;
    if (req->type != UW_MPA_REQUEST || rep->type != UW_MPA_REPLY)
        return UW_EINVAL;
    if ((req->enhanced && req->rev < 2) || (rep->enhanced && rep->rev < 2))
        return UW_EINVAL;

    memset(params, 0, sizeof(*params));
    params->rev = rep->rev;
    params->peer_ird = NO_NEG;
    params->peer_ord = NO_NEG;
    params->ird = pol->ird;
    params->ord = pol->ord;

    if (rep->rev == 0) {
        /* RFC 5044 C.2.5: a Rev 0 Reply comes from an RDMAC peer; a
         * permissive initiator follows it to DDP/RDMAP version 0 with markers
         * and CRCs, a non-permissive one closes (C.2.2). */
        if (!pol->accept_rev0)
            return UW_EMPA_REV;
        params->ddp_version = 0;
        params->crc = true;
        params->markers_rx = true;
        params->markers_tx = true;
    } else {
        /* RFC 5044 7.1.1 (Rev): the responder may answer with a lower
         * revision, never a higher one than we sent. */
        if (rep->rev > req->rev)
            return UW_EMPA_REV;
        /* RFC 6581 10: an enhanced Request MUST get an enhanced Reply, and
         * an unenhanced one an unenhanced Reply. */
        if (req->enhanced && !rep->enhanced)
            return UW_EMPA_NOT_ENHANCED;
        if (!req->enhanced && rep->enhanced)
            return UW_EMPA_ENH_UNEXPECTED;
        params->ddp_version = 1;
        /* RFC 5044 7.1.1: C from either side; each M governs the other
         * side's transmissions. */
        params->crc = req->c || rep->c;
        params->markers_rx = req->m;
        params->markers_tx = rep->m;
    }
    params->enhanced = rep->enhanced;
    if (rep->enhanced) {
        /* RFC 6581 9.1: passed to the ULP for Accept and Reject alike. */
        params->peer_ird = rep->ird;
        params->peer_ord = rep->ord;
    }
    /* RFC 5044 7.1.2 rule 3: a Reject exits MPA, leaving TCP to the ULP. */
    if (rep->r)
        return UW_ECONNREFUSED;

    if (rep->enhanced) {
        /* RFC 6581 9.1: our IRD at least the responder ORD, or Terminate
         * code 6 when we cannot hold that many; 0x3FFF leaves it alone. */
        uint16_t ird = pol->ird;
        if (rep->ord != NO_NEG) {
            if (rep->ord > ird_max_of(pol))
                return UW_EMPA_IRD;
            if (rep->ord > ird)
                ird = rep->ord;
        }
        /* Our ORD at most the responder IRD; 0x3FFF leaves it alone. */
        uint16_t ord = rep->ird == NO_NEG ? pol->ord : min16(pol->ord, rep->ird);
        params->ird = ird;
        params->ord = ord;
    }

    /* RFC 6581 9.2: the Reply's A must match ours (a Rev 0 or unenhanced
     * Reply cannot carry A, so it fails a p2p Request). A mismatch is a
     * failure to agree on the connection model: Terminate code 7. */
    bool want_p2p = req->enhanced && req->p2p;
    bool got_p2p = rep->enhanced && rep->p2p;
    if (want_p2p != got_p2p)
        return UW_EMPA_RTR;
    if (want_p2p) {
        /* The responder MAY offer types we did not ask for (9.2); any type
         * we can generate will do. A Read RTR needs a responder IRD slot. */
        uint8_t cand = rep->rtr & pol->rtr;
        if (rep->ird == 0)
            cand &= (uint8_t)~UW_MPA_RTR_READ;
        uint8_t one = pick_rtr(cand);
        if (!one)
            return UW_EMPA_RTR;
        params->p2p = true;
        params->rtr = one;
    }
    return 0;
}
