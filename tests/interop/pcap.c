/* Classic pcap → reassembled TCP byte streams (see pcap.h for the scope).
 *
 * Parsing runs in two passes. The first walks the records and, for every TCP
 * segment with payload, remembers (sequence number, pointer into the input,
 * length) per direction; nothing is copied yet, so a duplicate costs nothing.
 * The second pass sorts each direction's segments by offset and stitches
 * them, which makes the result independent of the capture order (retransmits,
 * reordering) and lets gaps and inconsistent retransmissions be detected
 * instead of silently producing a wrong stream. */
#include "pcap.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEF_MAX_FILE ((size_t)256 << 20)
#define DEF_MAX_PACKET ((size_t)262144)
#define DEF_MAX_STREAM ((size_t)64 << 20)
#define DEF_MAX_CONNS ((size_t)4096)
#define DEF_MAX_SEGMENTS ((size_t)1 << 20)

#define PCAP_HDR_LEN 24u
#define REC_HDR_LEN 16u

#define TH_FIN 0x01u
#define TH_SYN 0x02u
#define TH_RST 0x04u
#define TH_ACK 0x10u

struct seg {
    uint32_t seq; /* sequence number of p[0] */
    uint32_t len;
    uint32_t rel;     /* offset from the stream base, set when stitching */
    size_t order;     /* capture order: keeps sorting stable for equal offsets */
    const uint8_t *p; /* into the caller's buffer */
};

struct dirb {
    tp_endpoint src, dst;
    bool syn, fin, rst;
    uint32_t isn;
    uint32_t fin_seq; /* sequence number the FIN occupies */
    struct seg *segs;
    size_t nseg, capseg;
};

struct connb {
    struct dirb d[2];
    bool handshake;
};

struct parser {
    tp_limits lim;
    const uint8_t *buf;
    size_t len;
    bool swapped;
    uint32_t linktype;
    size_t pkt_no; /* 1-based record number for messages */
    struct connb *conns;
    size_t nconns, capconns;
    size_t nsegs_total;
    char *err;
    size_t errlen;
};

/* printf-checked, so every message's arguments are verified at compile time. */
__attribute__((format(printf, 2, 3))) static int fail(struct parser *ps, const char *fmt, ...);

static int fail(struct parser *ps, const char *fmt, ...)
{
    if (ps->err && ps->errlen) {
        int n = 0;
        if (ps->pkt_no)
            n = snprintf(ps->err, ps->errlen, "packet %zu: ", ps->pkt_no);
        if (n < 0)
            n = 0;
        if ((size_t)n < ps->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return TP_ERR;
}

static uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* pcap header fields are in the writer's byte order, told by the magic. */
static uint32_t hdr32(const struct parser *ps, const uint8_t *p)
{
    if (ps->swapped)
        return be32(p);
    return (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

static bool ep_equal(const tp_endpoint *a, const tp_endpoint *b)
{
    return a->family == b->family && a->port == b->port && memcmp(a->addr, b->addr, 16) == 0;
}

/* ------------------------------------------------------------------------ */
/* Connection table                                                          */

static struct connb *new_conn(struct parser *ps, const tp_endpoint *src, const tp_endpoint *dst)
{
    if (ps->nconns >= ps->lim.max_conns) {
        fail(ps, "more than %zu TCP connections", ps->lim.max_conns);
        return NULL;
    }
    if (ps->nconns == ps->capconns) {
        size_t nc = ps->capconns ? ps->capconns * 2 : 8;
        struct connb *n = realloc(ps->conns, nc * sizeof(*n));
        if (!n) {
            fail(ps, "out of memory");
            return NULL;
        }
        ps->conns = n;
        ps->capconns = nc;
    }
    struct connb *c = &ps->conns[ps->nconns++];
    memset(c, 0, sizeof(*c));
    c->d[0].src = *src;
    c->d[0].dst = *dst;
    c->d[1].src = *dst;
    c->d[1].dst = *src;
    return c;
}

/* The newest connection with this 4-tuple wins, so a reused port pair maps to
 * the connection its new SYN opened. */
static struct connb *find_conn(struct parser *ps, const tp_endpoint *src, const tp_endpoint *dst,
                               int *dir)
{
    for (size_t i = ps->nconns; i-- > 0;) {
        struct connb *c = &ps->conns[i];
        if (ep_equal(&c->d[0].src, src) && ep_equal(&c->d[0].dst, dst)) {
            *dir = 0;
            return c;
        }
        if (ep_equal(&c->d[1].src, src) && ep_equal(&c->d[1].dst, dst)) {
            *dir = 1;
            return c;
        }
    }
    return NULL;
}

static int add_seg(struct parser *ps, struct dirb *d, uint32_t seq, const uint8_t *p, size_t len)
{
    if (ps->nsegs_total >= ps->lim.max_segments)
        return fail(ps, "more than %zu TCP segments with payload", ps->lim.max_segments);
    if (d->nseg == d->capseg) {
        size_t nc = d->capseg ? d->capseg * 2 : 16;
        struct seg *n = realloc(d->segs, nc * sizeof(*n));
        if (!n)
            return fail(ps, "out of memory");
        d->segs = n;
        d->capseg = nc;
    }
    d->segs[d->nseg++] =
        (struct seg){.seq = seq, .len = (uint32_t)len, .order = ps->nsegs_total, .p = p};
    ps->nsegs_total++;
    return TP_OK;
}

/* ------------------------------------------------------------------------ */
/* Per-packet decoding: link → IP → TCP                                     */

static int on_tcp(struct parser *ps, const tp_endpoint *src0, const tp_endpoint *dst0,
                  const uint8_t *tcp, size_t tlen, tp_capture *cap)
{
    if (tlen < 20)
        return fail(ps, "TCP header truncated (%zu octets)", tlen);
    size_t doff = (size_t)(tcp[12] >> 4) * 4;
    if (doff < 20 || doff > tlen)
        return fail(ps, "bad TCP data offset %zu (segment %zu octets)", doff, tlen);
    tp_endpoint src = *src0, dst = *dst0;
    src.port = be16(tcp);
    dst.port = be16(tcp + 2);
    uint32_t seq = be32(tcp + 4);
    unsigned flags = tcp[13];
    const uint8_t *pl = tcp + doff;
    size_t plen = tlen - doff;
    cap->tcp_packets++;

    int dir = 0;
    struct connb *c = find_conn(ps, &src, &dst, &dir);
    bool pure_syn = (flags & TH_SYN) && !(flags & TH_ACK);
    /* A new client SYN on a known 4-tuple with another ISN opens a new
     * connection (port reuse); a repeated SYN with the same ISN is a
     * retransmission of the old one. */
    if (c && pure_syn && dir == 0 && c->d[0].syn && c->d[0].isn != seq)
        c = NULL;
    if (c && pure_syn && dir == 1)
        c = NULL; /* the old server side now opens: treat as a new connection */
    if (!c) {
        c = new_conn(ps, &src, &dst);
        if (!c)
            return TP_ERR;
        dir = 0;
        c->handshake = pure_syn;
    }
    struct dirb *d = &c->d[dir];

    if (flags & TH_SYN) {
        if (!d->syn) {
            if (d->nseg)
                return fail(ps, "SYN after data in the same direction");
            d->syn = true;
            d->isn = seq;
        } else if (d->isn != seq) {
            return fail(ps, "conflicting SYN (ISN %u, then %u)", d->isn, seq);
        }
        /* The SYN occupies one sequence number; any data follows it. */
        seq++;
    }
    if (flags & TH_RST) {
        /* RFC 9293 3.5.3: data in a RST is diagnostic, not stream data. */
        d->rst = true;
        return TP_OK;
    }
    if (flags & TH_FIN) {
        uint32_t fs = seq + (uint32_t)plen;
        if (d->fin && d->fin_seq != fs)
            return fail(ps, "conflicting FIN positions");
        d->fin = true;
        d->fin_seq = fs;
    }
    if (plen == 0)
        return TP_OK;
    if (plen > UINT32_MAX / 2)
        return fail(ps, "TCP payload too large");
    return add_seg(ps, d, seq, pl, plen);
}

static int on_ipv4(struct parser *ps, const uint8_t *ip, size_t len, tp_capture *cap)
{
    if (len < 20)
        return fail(ps, "IPv4 header truncated (%zu octets)", len);
    if (ip[0] >> 4 != 4)
        return fail(ps, "IP version %u where IPv4 was announced", ip[0] >> 4);
    size_t ihl = (size_t)(ip[0] & 0xf) * 4;
    if (ihl < 20 || ihl > len)
        return fail(ps, "bad IPv4 header length %zu", ihl);
    if (ip[9] != 6)
        return TP_OK; /* not TCP */
    /* The total length, not the captured length, bounds the segment: short
     * Ethernet frames are padded to 60 octets. */
    size_t tot = be16(ip + 2);
    if (tot == 0)
        return fail(ps, "IPv4 total length 0 (segmentation offload capture?)");
    if (tot < ihl)
        return fail(ps, "IPv4 total length %zu below header length %zu", tot, ihl);
    if (tot > len)
        return fail(ps, "IPv4 packet truncated (%zu of %zu octets captured)", len, tot);
    if (be16(ip + 6) & 0x3fff)
        return fail(ps, "IPv4 fragment (not supported)");
    tp_endpoint s = {.family = 4}, d = {.family = 4};
    memcpy(s.addr, ip + 12, 4);
    memcpy(d.addr, ip + 16, 4);
    return on_tcp(ps, &s, &d, ip + ihl, tot - ihl, cap);
}

static int on_ipv6(struct parser *ps, const uint8_t *ip, size_t len, tp_capture *cap)
{
    if (len < 40)
        return fail(ps, "IPv6 header truncated (%zu octets)", len);
    if (ip[0] >> 4 != 6)
        return fail(ps, "IP version %u where IPv6 was announced", ip[0] >> 4);
    size_t plen = be16(ip + 4);
    unsigned nh = ip[6];
    if (plen == 0)
        return fail(ps, "IPv6 payload length 0 (jumbogram or offload capture)");
    if (40 + plen > len)
        return fail(ps, "IPv6 packet truncated (%zu of %zu octets captured)", len, 40 + plen);
    tp_endpoint s = {.family = 6}, d = {.family = 6};
    memcpy(s.addr, ip + 8, 16);
    memcpy(d.addr, ip + 24, 16);
    const uint8_t *p = ip + 40;
    size_t left = plen;
    /* Every extension header consumes at least 8 octets, so this ends. */
    for (;;) {
        switch (nh) {
        case 6:
            return on_tcp(ps, &s, &d, p, left, cap);
        case 0:  /* hop-by-hop */
        case 43: /* routing */
        case 60: /* destination options */
        case 51: /* authentication: length in 4-octet units, minus 2 */ {
            if (left < 8)
                return fail(ps, "IPv6 extension header truncated");
            size_t hl = nh == 51 ? ((size_t)p[1] + 2) * 4 : ((size_t)p[1] + 1) * 8;
            if (hl > left)
                return fail(ps, "IPv6 extension header overruns the packet");
            nh = p[0];
            p += hl;
            left -= hl;
            break;
        }
        case 44:
            return fail(ps, "IPv6 fragment (not supported)");
        default:
            return TP_OK; /* no next header, ESP, or not TCP */
        }
    }
}

static int on_ethertype(struct parser *ps, unsigned type, const uint8_t *p, size_t len,
                        tp_capture *cap)
{
    if (type == 0x0800)
        return on_ipv4(ps, p, len, cap);
    if (type == 0x86dd)
        return on_ipv6(ps, p, len, cap);
    return TP_OK;
}

static int on_packet(struct parser *ps, const uint8_t *p, size_t len, tp_capture *cap)
{
    switch (ps->linktype) {
    case 1: { /* Ethernet: dst, src, then 802.1Q/802.1ad tags, then the type */
        if (len < 14)
            return fail(ps, "Ethernet header truncated");
        size_t off = 12;
        unsigned type = be16(p + off);
        while (type == 0x8100 || type == 0x88a8 || type == 0x9100) {
            off += 4;
            if (off + 2 > len)
                return fail(ps, "VLAN tag truncated");
            type = be16(p + off);
        }
        off += 2;
        return on_ethertype(ps, type, p + off, len - off, cap);
    }
    case 113: /* Linux cooked v1: 16 octets, protocol last */
        if (len < 16)
            return fail(ps, "Linux cooked header truncated");
        return on_ethertype(ps, be16(p + 14), p + 16, len - 16, cap);
    case 276: /* Linux cooked v2: 20 octets, protocol first */
        if (len < 20)
            return fail(ps, "Linux cooked v2 header truncated");
        return on_ethertype(ps, be16(p), p + 20, len - 20, cap);
    case 101: /* raw IP: the version nibble tells */
        if (len < 1)
            return fail(ps, "empty raw IP packet");
        if (p[0] >> 4 == 4)
            return on_ipv4(ps, p, len, cap);
        if (p[0] >> 4 == 6)
            return on_ipv6(ps, p, len, cap);
        return fail(ps, "raw IP packet with version %u", p[0] >> 4);
    case 228:
        return on_ipv4(ps, p, len, cap);
    case 229:
        return on_ipv6(ps, p, len, cap);
    default:
        return fail(ps, "unsupported link type %u", ps->linktype);
    }
}

/* ------------------------------------------------------------------------ */
/* Stitching                                                                 */

static int seg_cmp(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;
    if (x->rel != y->rel)
        return x->rel < y->rel ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static int stitch(struct parser *ps, struct dirb *d, tp_stream *out)
{
    char name[192]; /* room for two bracketed IPv6 endpoints */
    out->src = d->src;
    out->dst = d->dst;
    out->syn = d->syn;
    out->fin = d->fin;
    out->rst = d->rst;
    out->isn = d->isn;
    tp_stream_name(out, name, sizeof(name));

    uint32_t base;
    if (d->syn) {
        base = d->isn + 1;
    } else if (d->nseg) {
        /* No handshake: the stream starts at the lowest sequence number seen,
         * measured as a signed distance from the first one (wrap-safe). */
        base = d->segs[0].seq;
        for (size_t i = 1; i < d->nseg; i++)
            if ((int32_t)(d->segs[i].seq - base) < 0)
                base = d->segs[i].seq;
    } else {
        base = d->fin ? d->fin_seq : 0;
    }

    size_t total = 0;
    for (size_t i = 0; i < d->nseg; i++) {
        struct seg *s = &d->segs[i];
        uint32_t rel = s->seq - base;
        if (rel >= 0x80000000u)
            return fail(ps, "%s: segment at sequence %u precedes the stream start %u", name, s->seq,
                        base);
        if ((size_t)rel + s->len > ps->lim.max_stream)
            return fail(ps, "%s: stream longer than the %zu-octet limit", name, ps->lim.max_stream);
        s->rel = rel;
        if ((size_t)rel + s->len > total)
            total = (size_t)rel + s->len;
    }
    if (d->fin) {
        /* Everything up to the FIN must be there: a lost tail would otherwise
         * pass unnoticed. */
        uint32_t fin_rel = d->fin_seq - base;
        if (fin_rel >= 0x80000000u || fin_rel < total)
            return fail(ps, "%s: data after the FIN", name);
        if (fin_rel > total)
            return fail(ps, "%s: %u octets before the FIN were not captured", name,
                        (unsigned)(fin_rel - total));
    }
    if (total == 0)
        return TP_OK;

    qsort(d->segs, d->nseg, sizeof(d->segs[0]), seg_cmp);
    uint8_t *buf = malloc(total);
    if (!buf)
        return fail(ps, "out of memory");
    size_t cur = 0;
    for (size_t i = 0; i < d->nseg; i++) {
        const struct seg *s = &d->segs[i];
        if (s->rel > cur) {
            free(buf);
            return fail(ps, "%s: %zu octets missing at stream offset %zu", name,
                        (size_t)s->rel - cur, cur);
        }
        size_t overlap = cur - s->rel;
        if (overlap > s->len)
            overlap = s->len;
        /* A retransmission must repeat the same octets; if it does not, the
         * capture is inconsistent and no single stream is right. */
        if (memcmp(buf + s->rel, s->p, overlap) != 0) {
            free(buf);
            return fail(ps, "%s: retransmission at offset %u differs from the original", name,
                        s->rel);
        }
        memcpy(buf + cur, s->p + overlap, s->len - overlap);
        cur += s->len - overlap;
    }
    out->data = buf;
    out->len = total;
    return TP_OK;
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */

static void free_builders(struct parser *ps)
{
    for (size_t i = 0; i < ps->nconns; i++) {
        free(ps->conns[i].d[0].segs);
        free(ps->conns[i].d[1].segs);
    }
    free(ps->conns);
    ps->conns = NULL;
    ps->nconns = ps->capconns = 0;
}

void tp_capture_free(tp_capture *cap)
{
    if (!cap)
        return;
    for (size_t i = 0; i < cap->nconns; i++) {
        free(cap->conns[i].dir[0].data);
        free(cap->conns[i].dir[1].data);
    }
    free(cap->conns);
    memset(cap, 0, sizeof(*cap));
}

static void apply_defaults(tp_limits *l, const tp_limits *in)
{
    if (in)
        *l = *in;
    else
        memset(l, 0, sizeof(*l));
    if (!l->max_file)
        l->max_file = DEF_MAX_FILE;
    if (!l->max_packet)
        l->max_packet = DEF_MAX_PACKET;
    if (!l->max_stream)
        l->max_stream = DEF_MAX_STREAM;
    if (!l->max_conns)
        l->max_conns = DEF_MAX_CONNS;
    if (!l->max_segments)
        l->max_segments = DEF_MAX_SEGMENTS;
}

static int parse_records(struct parser *ps, tp_capture *cap)
{
    const uint8_t *b = ps->buf;
    if (ps->len < PCAP_HDR_LEN)
        return fail(ps, "file shorter than the pcap header (%zu octets)", ps->len);
    uint32_t magic_le = (uint32_t)b[3] << 24 | (uint32_t)b[2] << 16 | (uint32_t)b[1] << 8 | b[0];
    uint32_t magic_be = be32(b);
    if (magic_le == 0xa1b2c3d4u || magic_le == 0xa1b23c4du) {
        ps->swapped = false;
        cap->nanosec = magic_le == 0xa1b23c4du;
    } else if (magic_be == 0xa1b2c3d4u || magic_be == 0xa1b23c4du) {
        ps->swapped = true;
        cap->nanosec = magic_be == 0xa1b23c4du;
    } else if (magic_be == 0x0a0d0d0au) {
        return fail(ps, "pcapng is not supported (convert with editcap -F pcap)");
    } else {
        return fail(ps, "not a pcap file (magic %08x)", magic_be);
    }
    cap->swapped = ps->swapped;
    unsigned major = ps->swapped ? be16(b + 4) : (unsigned)(b[5] << 8 | b[4]);
    if (major != 2)
        return fail(ps, "unsupported pcap version %u", major);
    /* The low 16 bits are the link type; the high bits may carry FCS length
     * information, which needs no handling since IP lengths bound everything. */
    ps->linktype = hdr32(ps, b + 20) & 0xffffu;
    cap->linktype = ps->linktype;

    size_t off = PCAP_HDR_LEN;
    while (off < ps->len) {
        ps->pkt_no++;
        if (ps->len - off < REC_HDR_LEN)
            return fail(ps, "record header truncated at file offset %zu", off);
        uint32_t incl = hdr32(ps, b + off + 8);
        uint32_t orig = hdr32(ps, b + off + 12);
        off += REC_HDR_LEN;
        if (incl > ps->lim.max_packet)
            return fail(ps, "captured length %u over the %zu limit", incl, ps->lim.max_packet);
        if (incl > ps->len - off)
            return fail(ps, "record truncated (%u octets announced, %zu left)", incl,
                        ps->len - off);
        if (orig < incl)
            return fail(ps, "captured length %u exceeds the original length %u", incl, orig);
        cap->packets++;
        if (on_packet(ps, b + off, incl, cap) != TP_OK)
            return TP_ERR;
        off += incl;
    }
    ps->pkt_no = 0;
    return TP_OK;
}

int tp_pcap_parse(const uint8_t *buf, size_t len, const tp_limits *lim, tp_capture *cap, char *err,
                  size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!cap)
        return TP_ERR;
    memset(cap, 0, sizeof(*cap));
    struct parser ps = {.buf = buf, .len = len, .err = err, .errlen = errlen};
    apply_defaults(&ps.lim, lim);
    if (!buf && len)
        return fail(&ps, "NULL buffer");
    if (len > ps.lim.max_file)
        return fail(&ps, "capture of %zu octets over the %zu limit", len, ps.lim.max_file);

    int rc = parse_records(&ps, cap);
    if (rc == TP_OK && ps.nconns) {
        cap->conns = calloc(ps.nconns, sizeof(*cap->conns));
        if (!cap->conns)
            rc = fail(&ps, "out of memory");
        for (size_t i = 0; rc == TP_OK && i < ps.nconns; i++) {
            cap->nconns = i + 1; /* so tp_capture_free sees what was built */
            cap->conns[i].handshake = ps.conns[i].handshake;
            rc = stitch(&ps, &ps.conns[i].d[0], &cap->conns[i].dir[0]);
            if (rc == TP_OK)
                rc = stitch(&ps, &ps.conns[i].d[1], &cap->conns[i].dir[1]);
        }
    }
    free_builders(&ps);
    if (rc != TP_OK)
        tp_capture_free(cap);
    return rc;
}

int tp_pcap_load(const char *path, const tp_limits *lim, tp_capture *cap, char *err, size_t errlen)
{
    tp_limits l;
    apply_defaults(&l, lim);
    if (cap)
        memset(cap, 0, sizeof(*cap));
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (err && errlen)
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return TP_ERR;
    }
    /* Read in chunks rather than trusting a size from fseek: the path may be
     * a pipe, and the limit must hold either way. */
    size_t cap_b = 65536, n = 0;
    uint8_t *buf = malloc(cap_b);
    int rc = TP_OK;
    while (buf) {
        if (n == cap_b) {
            if (cap_b > l.max_file) {
                rc = TP_ERR;
                if (err && errlen)
                    snprintf(err, errlen, "%s: larger than the %zu-octet limit", path, l.max_file);
                break;
            }
            uint8_t *nb = realloc(buf, cap_b * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap_b *= 2;
        }
        size_t got = fread(buf + n, 1, cap_b - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                rc = TP_ERR;
                if (err && errlen)
                    snprintf(err, errlen, "%s: read error", path);
            }
            break;
        }
    }
    fclose(f);
    if (!buf) {
        if (err && errlen)
            snprintf(err, errlen, "%s: out of memory", path);
        return TP_ERR;
    }
    if (rc == TP_OK)
        rc = tp_pcap_parse(buf, n, &l, cap, err, errlen);
    /* Streams are copies, so the file image can go now. */
    free(buf);
    return rc;
}

char *tp_endpoint_str(const tp_endpoint *e, char *out, size_t cap)
{
    if (!out || !cap)
        return out;
    if (e->family == 4) {
        snprintf(out, cap, "%u.%u.%u.%u:%u", e->addr[0], e->addr[1], e->addr[2], e->addr[3],
                 e->port);
        return out;
    }
    /* Plain eight-group form without "::" compression: unambiguous, and only
     * used in messages. */
    snprintf(out, cap, "[%x:%x:%x:%x:%x:%x:%x:%x]:%u", be16(e->addr), be16(e->addr + 2),
             be16(e->addr + 4), be16(e->addr + 6), be16(e->addr + 8), be16(e->addr + 10),
             be16(e->addr + 12), be16(e->addr + 14), e->port);
    return out;
}

char *tp_stream_name(const tp_stream *s, char *out, size_t cap)
{
    char a[64], b[64];
    tp_endpoint_str(&s->src, a, sizeof(a));
    tp_endpoint_str(&s->dst, b, sizeof(b));
    if (out && cap)
        snprintf(out, cap, "%s > %s", a, b);
    return out;
}
