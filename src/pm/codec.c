/* Port mapper messages (draft-pinkerton-iwarp-sdp-01 7.3, Figure 17): one
 * fixed 48-octet layout for all four message types. */
#include <string.h>

#include "uwarp/pm.h"

/* Octet 0: Ver (2 bits) | MT (2 bits) | IPV (4 bits). */
#define VER_SHIFT 6
#define MT_SHIFT 4
#define MT_MASK 0x3u
#define IPV_MASK 0xFu

/* ------------------------------------------------------------------------ */
/* Byte cursors                                                              */

static uint8_t get_u8(const uint8_t **p)
{
    return *(*p)++;
}

static uint16_t get_be16(const uint8_t **p)
{
    uint16_t v = (uint16_t)((*p)[0] << 8 | (*p)[1]);
    *p += 2;
    return v;
}

static uint64_t get_be64(const uint8_t **p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | (*p)[i];
    *p += 8;
    return v;
}

/* An address field: all 16 octets for IPv6; for IPv4 the first 4, the rest
 * skipped unread (7.3.1.3: "ignored on receipt") and reported as zero. */
static void get_ip(const uint8_t **p, uint8_t ipv, uint8_t out[16])
{
    size_t n = ipv == 4 ? 4 : 16;
    memset(out, 0, 16);
    memcpy(out, *p, n);
    *p += 16;
}

static void put_u8(uint8_t **p, uint8_t v)
{
    *(*p)++ = v;
}

static void put_be16(uint8_t **p, uint16_t v)
{
    (*p)[0] = (uint8_t)(v >> 8);
    (*p)[1] = (uint8_t)v;
    *p += 2;
}

static void put_be64(uint8_t **p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        (*p)[i] = (uint8_t)v;
        v >>= 8;
    }
    *p += 8;
}

static void put_ip(uint8_t **p, uint8_t ipv, const uint8_t ip[16])
{
    size_t n = ipv == 4 ? 4 : 16;
    memcpy(*p, ip, n);
    memset(*p + n, 0, 16 - n); /* 7.3.1.3: transmitted as zeroes */
    *p += 16;
}

/* ------------------------------------------------------------------------ */

ssize_t uw_pm_encode(const uw_pm_msg *m, uint8_t *out, size_t cap)
{
    if (!m || !out)
        return UW_EINVAL;
    if (m->type > UW_PM_DENY || (m->ipv != 4 && m->ipv != 6))
        return UW_EINVAL;
    if (cap < UW_PM_MSG_LEN)
        return UW_ENOBUFS;
    uint8_t *p = out;
    /* 7.3.1.1: Ver is 0 in this version. */
    put_u8(&p, (uint8_t)(0u << VER_SHIFT | (unsigned)m->type << MT_SHIFT | m->ipv));
    /* 7.4: PmTime is zero in PMReq, PMAck and PMDeny; only a PMAccept says
     * how long its answer may be cached. */
    put_u8(&p, m->type == UW_PM_ACCEPT ? m->pmtime : 0);
    put_be16(&p, 0); /* 7.3.1.5: Reserved transmitted as zero */
    put_be16(&p, m->ap_port);
    put_be16(&p, m->cp_port);
    put_be64(&p, m->assoc);
    put_ip(&p, m->ipv, m->cp_ip);
    put_ip(&p, m->ipv, m->ap_ip);
    return (ssize_t)(p - out);
}

int uw_pm_decode(const void *buf, size_t len, uw_pm_msg *out)
{
    if (!buf || !out)
        return UW_EINVAL;
    /* UDP keeps message boundaries, so a datagram is one message and must
     * have exactly the Figure 17 length: a short one lacks fields, a long one
     * is something else. */
    if (len != UW_PM_MSG_LEN)
        return UW_EMSGSIZE;
    const uint8_t *p = buf;
    uint8_t b0 = get_u8(&p);
    unsigned ver = b0 >> VER_SHIFT, mt = (b0 >> MT_SHIFT) & MT_MASK, ipv = b0 & IPV_MASK;
    /* 7.3.1.1: only version 0 is defined; a later version may lay the fields
     * out differently, so it is not read as this one. 7.3.1.3: IPV values
     * other than 4 and 6 are reserved. */
    if (ver != 0 || (ipv != 4 && ipv != 6))
        return UW_EPROTO;
    uw_pm_msg m;
    m.type = (uint8_t)mt; /* all four 2-bit values are defined (7.3.1.2) */
    m.ipv = (uint8_t)ipv;
    m.pmtime = get_u8(&p);
    p += 2; /* 7.3.1.5: Reserved is never checked */
    m.ap_port = get_be16(&p);
    m.cp_port = get_be16(&p);
    m.assoc = get_be64(&p);
    get_ip(&p, m.ipv, m.cp_ip);
    get_ip(&p, m.ipv, m.ap_ip);
    *out = m;
    return 0;
}

uint64_t uw_pm_pmtime_ns(uint8_t pmtime)
{
    /* 7.3.1.4 */
    if (pmtime == 0)
        return 0;
    if (pmtime <= 127)
        return (uint64_t)pmtime * 250u * UW_PM_NS_PER_MS;
    if (pmtime <= 254)
        return (uint64_t)pmtime * 1000u * UW_PM_NS_PER_MS;
    return UW_PM_FOREVER;
}

const char *uw_pm_type_name(int type)
{
    switch (type) {
    case UW_PM_REQ:
        return "req";
    case UW_PM_ACCEPT:
        return "accept";
    case UW_PM_ACK:
        return "ack";
    case UW_PM_DENY:
        return "deny";
    default:
        return "?";
    }
}
