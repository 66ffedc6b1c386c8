/* MPA Request/Reply frames (RFC 5044 7.1.1, RFC 6581 6 and 9): encoding,
 * one-shot decoding and an incremental parser that stops at the frame's end. */
#include <string.h>

#include "uwarp/mpa.h"

#define KEY_LEN 16u

/* RFC 5044 7.1.1: the two keys differ only in octet 9 ('q' / 'p'). */
static const uint8_t KEY_REQ[KEY_LEN] = {0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                         0x65, 0x71, 0x20, 0x46, 0x72, 0x61, 0x6D, 0x65};
static const uint8_t KEY_REP[KEY_LEN] = {0x4D, 0x50, 0x41, 0x20, 0x49, 0x44, 0x20, 0x52,
                                         0x65, 0x70, 0x20, 0x46, 0x72, 0x61, 0x6D, 0x65};

/* Octet 16 (RFC 5044 7.1.1 and RFC 6581 6). */
#define FLAG_M 0x80u
#define FLAG_C 0x40u
#define FLAG_R 0x20u
#define FLAG_S 0x10u
#define FLAG_RES 0x0Fu

/* RFC 6581 9: A|B in the first 16-bit half, C|D in the second. */
#define WORD_A 0x8000u
#define WORD_B 0x4000u
#define WORD_C 0x8000u
#define WORD_D 0x4000u
#define WORD_VAL 0x3FFFu

/* ------------------------------------------------------------------------ */
/* Byte cursors                                                              */

static int get_u8(const uint8_t **p, const uint8_t *end, uint8_t *out)
{
    if (end - *p < 1)
        return UW_EAGAIN;
    *out = *(*p)++;
    return 0;
}

static int get_be16(const uint8_t **p, const uint8_t *end, uint16_t *out)
{
    if (end - *p < 2)
        return UW_EAGAIN;
    *out = (uint16_t)((*p)[0] << 8 | (*p)[1]);
    *p += 2;
    return 0;
}

static void put_u8(uint8_t **p, uint8_t v)
{
    *(*p)++ = v;
}

static void put_be16(uint8_t **p, uint32_t v)
{
    (*p)[0] = (uint8_t)(v >> 8);
    (*p)[1] = (uint8_t)v;
    *p += 2;
}

static void put_bytes(uint8_t **p, const void *src, size_t n)
{
    if (n)
        memcpy(*p, src, n);
    *p += n;
}

/* ------------------------------------------------------------------------ */
/* Encode                                                                    */

ssize_t uw_mpa_frame_encode(const uw_mpa_frame *f, uint8_t *out, size_t cap)
{
    if (!f || (!out && cap))
        return UW_EINVAL;
    if (f->type != UW_MPA_REQUEST && f->type != UW_MPA_REPLY)
        return UW_EINVAL;
    if (f->res > FLAG_RES)
        return UW_EINVAL;
    if (f->enhanced) {
        /* RFC 6581 6: enhanced establishment needs Rev 2 or higher. */
        if (f->rev < 2 || f->ird > WORD_VAL || f->ord > WORD_VAL || (f->rtr & ~UW_MPA_RTR_ALL))
            return UW_EINVAL;
    }
    size_t pd = (size_t)f->ulp_pd_len + (f->enhanced ? UW_MPA_ENH_WORD_LEN : 0);
    if (pd > UW_MPA_MAX_PD) /* RFC 5044 7.1.1; RFC 6581 9: the word counts */
        return UW_EMPA_PD_LENGTH;
    size_t total = UW_MPA_FRAME_HDR_LEN + pd;
    if (cap < total)
        return UW_ENOBUFS;

    uint8_t *p = out;
    put_bytes(&p, f->type == UW_MPA_REQUEST ? KEY_REQ : KEY_REP, KEY_LEN);
    unsigned flags = f->res;
    if (f->m)
        flags |= FLAG_M;
    if (f->c)
        flags |= FLAG_C;
    if (f->r)
        flags |= FLAG_R;
    if (f->enhanced || f->s)
        flags |= FLAG_S;
    put_u8(&p, (uint8_t)flags);
    put_u8(&p, f->rev);
    put_be16(&p, (uint32_t)pd);
    if (f->enhanced) {
        uint32_t hi = f->ird, lo = f->ord;
        if (f->p2p)
            hi |= WORD_A;
        if (f->rtr & UW_MPA_RTR_SEND)
            hi |= WORD_B;
        if (f->rtr & UW_MPA_RTR_WRITE)
            lo |= WORD_C;
        if (f->rtr & UW_MPA_RTR_READ)
            lo |= WORD_D;
        put_be16(&p, hi);
        put_be16(&p, lo);
    }
    put_bytes(&p, f->ulp_pd, f->ulp_pd_len);
    return (ssize_t)total;
}

/* ------------------------------------------------------------------------ */
/* Decode                                                                    */

static bool valid_expect(int expect)
{
    return expect == UW_MPA_REQUEST || expect == UW_MPA_REPLY || expect == UW_MPA_ANY;
}

/* Checks the key from as many of its octets as are present. A prefix that
 * matches neither key is already hopeless, so it is reported before all 16
 * octets are in; telling "the other key" from garbage needs all 16 (a
 * "MPA ID Rep" prefix may still end in something that is no key at all). */
static int check_key(const uint8_t *b, size_t have, int expect, int *type)
{
    size_t n = have < KEY_LEN ? have : KEY_LEN;
    bool req = memcmp(b, KEY_REQ, n) == 0;
    bool rep = memcmp(b, KEY_REP, n) == 0;
    if (!req && !rep)
        return UW_EMPA_KEY;
    if (n < KEY_LEN)
        return UW_EAGAIN;
    *type = req ? UW_MPA_REQUEST : UW_MPA_REPLY;
    /* RFC 5044 7.1.2 rule 8: the key difference exposes Initiator/Initiator
     * (a Request where a Reply was due) and Responder/Responder startups. */
    if (expect != UW_MPA_ANY && *type != expect)
        return UW_EMPA_ROLE;
    return 0;
}

/* Validates what is present of buf and, once the whole frame is there, fills
 * *out (if not NULL). Returns the frame size, UW_EAGAIN or an error; errors are
 * found from the shortest prefix that proves them. */
static ssize_t decode(const uint8_t *buf, size_t len, int expect, size_t pd_max, uw_mpa_frame *out)
{
    int type = 0;
    int rc = check_key(buf, len, expect, &type);
    if (rc)
        return rc;

    const uint8_t *p = buf + KEY_LEN, *end = buf + len;
    uint8_t flags, rev;
    uint16_t pd_len;
    if (get_u8(&p, end, &flags) || get_u8(&p, end, &rev) || get_be16(&p, end, &pd_len))
        return UW_EAGAIN;
    /* RFC 5044 7.1.1 (PD_Length) and 7.1.2 rule 9: over 512 octets or over
     * the receiving buffer, the frame is improperly formatted. */
    if (pd_len > UW_MPA_MAX_PD)
        return UW_EMPA_PD_LENGTH;
    if (pd_len > pd_max)
        return UW_EMPA_PD_BUFFER;
    /* RFC 6581 6: S is only meaningful from Rev 2 on; below that it is one of
     * RFC 5044's reserved bits, which are not checked on reception. */
    bool enhanced = rev >= 2 && (flags & FLAG_S);
    if (enhanced && pd_len < UW_MPA_ENH_WORD_LEN)
        return UW_EMPA_ENH_WORD;
    if ((size_t)(end - p) < pd_len)
        return UW_EAGAIN;
    if (!out)
        return (ssize_t)(UW_MPA_FRAME_HDR_LEN + pd_len);

    memset(out, 0, offsetof(uw_mpa_frame, ulp_pd));
    out->type = type;
    out->m = flags & FLAG_M;
    out->c = flags & FLAG_C;
    out->r = flags & FLAG_R;
    out->s = flags & FLAG_S;
    out->res = flags & FLAG_RES;
    out->rev = rev;
    out->pd_length = pd_len;
    out->enhanced = enhanced;
    size_t ulp = pd_len;
    if (enhanced) {
        uint16_t hi = 0, lo = 0;
        (void)get_be16(&p, end, &hi);
        (void)get_be16(&p, end, &lo);
        out->ird = hi & WORD_VAL;
        out->ord = lo & WORD_VAL;
        out->p2p = hi & WORD_A;
        /* Flags B, C, D are reported even when A is 0; RFC 6581 9.2 has the
         * receiver ignore them then, which is negotiation's business. */
        out->rtr =
            (uint8_t)((hi & WORD_B ? UW_MPA_RTR_SEND : 0) | (lo & WORD_C ? UW_MPA_RTR_WRITE : 0) |
                      (lo & WORD_D ? UW_MPA_RTR_READ : 0));
        ulp -= UW_MPA_ENH_WORD_LEN;
    }
    out->ulp_pd_len = (uint16_t)ulp;
    if (ulp)
        memcpy(out->ulp_pd, p, ulp);
    return (ssize_t)(UW_MPA_FRAME_HDR_LEN + pd_len);
}

ssize_t uw_mpa_frame_decode(const void *buf, size_t len, int expect, size_t pd_max,
                            uw_mpa_frame *out)
{
    if ((!buf && len) || !out || !valid_expect(expect))
        return UW_EINVAL;
    if (pd_max > UW_MPA_MAX_PD)
        pd_max = UW_MPA_MAX_PD;
    if (len == 0)
        return UW_EAGAIN;
    return decode(buf, len, expect, pd_max, out);
}

/* ------------------------------------------------------------------------ */
/* Incremental parser                                                        */

#define P_COLLECTING 0
#define P_DONE 1

void uw_mpa_frame_parser_init(uw_mpa_frame_parser *p, int expect, size_t pd_max)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->expect_ = expect;
    p->pd_max_ = pd_max > UW_MPA_MAX_PD ? UW_MPA_MAX_PD : pd_max;
    p->need_ = UW_MPA_FRAME_HDR_LEN;
    p->state_ = valid_expect(expect) ? P_COLLECTING : UW_EINVAL;
}

ssize_t uw_mpa_frame_parser_feed(uw_mpa_frame_parser *p, const void *data, size_t len,
                                 uw_mpa_frame *out)
{
    if (!p || (!data && len) || !out)
        return UW_EINVAL;
    if (p->state_ < 0)
        return p->state_;
    if (p->state_ == P_DONE)
        return 0;

    const uint8_t *in = data;
    size_t used = 0;
    for (;;) {
        /* Take no more than the frame still needs: the octets after it
         * (typically the first FPDU) belong to the caller. need_ grows from
         * the header to the whole frame once PD_Length is known. */
        size_t take = p->need_ - p->have_;
        if (take > len - used)
            take = len - used;
        if (take)
            memcpy(p->buf_ + p->have_, in + used, take);
        p->have_ += take;
        used += take;

        ssize_t rc = decode(p->buf_, p->have_, p->expect_, p->pd_max_, NULL);
        if (rc == UW_EAGAIN) {
            if (p->have_ == UW_MPA_FRAME_HDR_LEN && p->need_ == UW_MPA_FRAME_HDR_LEN) {
                /* Header complete and valid: now the private data is due. */
                p->need_ = UW_MPA_FRAME_HDR_LEN +
                           (size_t)(p->buf_[KEY_LEN + 2] << 8 | p->buf_[KEY_LEN + 3]);
                continue;
            }
            return (ssize_t)used;
        }
        if (rc < 0) {
            p->state_ = (int)rc;
            return rc;
        }
        (void)decode(p->buf_, p->have_, p->expect_, p->pd_max_, out);
        p->state_ = P_DONE;
        return (ssize_t)used;
    }
}

bool uw_mpa_frame_parser_done(const uw_mpa_frame_parser *p)
{
    return p && p->state_ == P_DONE;
}
