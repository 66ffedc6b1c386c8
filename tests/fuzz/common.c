/* Helpers shared by the fuzz targets; see common.h. The reference decoder is
 * written from RFC 5044 and the position rules in uwarp/mpa.h, deliberately
 * without the library's run walker (fpdu_walk.h): it looks at one octet at a
 * time and asks only "is this stream position a marker?". */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "uwarp/error.h"
#include "uwarp/mpa.h"

void fz_fail(const char *file, int line, const char *what)
{
    fprintf(stderr, "%s:%d: fuzz check failed: %s\n", file, line, what);
    abort();
}

bool fz_debug(void)
{
    static int on = -1;
    if (on < 0)
        on = getenv("UW_FUZZ_DEBUG") != NULL;
    return on;
}

/* ------------------------------------------------------------------------ */

void fz_in_init(fz_in *in, const uint8_t *p, size_t n)
{
    in->p = p;
    in->n = n;
    in->off = 0;
}

uint8_t fz_u8(fz_in *in)
{
    return in->off < in->n ? in->p[in->off++] : 0;
}

uint16_t fz_u16(fz_in *in)
{
    uint16_t hi = fz_u8(in);
    return (uint16_t)(hi << 8 | fz_u8(in));
}

uint32_t fz_u32(fz_in *in)
{
    uint32_t hi = fz_u16(in);
    return hi << 16 | fz_u16(in);
}

size_t fz_left(const fz_in *in)
{
    return in->n - in->off;
}

const uint8_t *fz_take(fz_in *in, size_t *n)
{
    if (*n > fz_left(in))
        *n = fz_left(in);
    const uint8_t *p = in->p + in->off;
    in->off += *n;
    return p;
}

/* ------------------------------------------------------------------------ */

void fz_rng_init(fz_rng *r, uint64_t seed)
{
    r->s = seed;
}

uint64_t fz_rng_next(fz_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t fz_rng_below(fz_rng *r, uint64_t n)
{
    return fz_rng_next(r) % n;
}

void fz_rng_fill(fz_rng *r, uint8_t *buf, size_t len)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = fz_rng_next(r);
        for (size_t k = 0; k < 8 && i + k < len; k++)
            buf[i + k] = (uint8_t)(v >> (8 * k));
    }
}

size_t fz_chunk(fz_rng *r, size_t left)
{
    size_t max;
    switch (fz_rng_below(r, 4)) {
    case 0:
        max = 1;
        break;
    case 1:
        max = 8;
        break;
    case 2:
        max = 600;
        break;
    default:
        max = 70000;
        break;
    }
    size_t c = 1 + (size_t)fz_rng_below(r, max);
    return c < left ? c : left;
}

uint32_t fz_pick_pos(unsigned mode, uint32_t raw)
{
    switch (mode % FZ_POS_MODES) {
    case 0:
        return 0;
    case 1:
        return raw;
    case 2:
        return 0u - 1u - raw % 2048u;
    case 3: {
        /* within 8 octets either side of a marker position */
        uint32_t o = raw & 15u;
        o = o < 8 ? o : UW_MPA_MARKER_INTERVAL - 16u + o;
        return (raw & ~511u) | o;
    }
    case 4:
        return 0x1ec;
    case 5:
        return raw & ~3u;
    case 6:
        return raw % 1024u;
    default:
        return 0u - raw % 70000u;
    }
}

/* ------------------------------------------------------------------------ */

/* Byte-at-a-time table CRC32c (reflected polynomial 0x82F63B78), the table
 * built bit by bit on first use. */
static uint32_t crc_table[256];

uint32_t fz_crc32c(uint32_t state, const uint8_t *p, size_t n)
{
    if (crc_table[1] == 0) {
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t c = b;
            for (int k = 0; k < 8; k++)
                c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
            crc_table[b] = c;
        }
    }
    for (size_t i = 0; i < n; i++)
        state = (state >> 8) ^ crc_table[(state ^ p[i]) & 0xFF];
    return state;
}

static bool is_marker(bool markers, uint32_t pos)
{
    return markers && pos % UW_MPA_MARKER_INTERVAL == 0;
}

static uint32_t pad_of(uint32_t n)
{
    uint32_t pad = 0;
    while ((2u + n + pad) % 4u)
        pad++;
    return pad;
}

size_t fz_ref_wire_len(uint32_t pos, uint32_t n, bool markers, uint32_t *max_marker_off)
{
    uint32_t logical_len = 2u + n + pad_of(n) + 4u;
    uint32_t p = pos, logical = 0, hdr = pos, maxoff = 0;
    size_t wire = 0;
    while (logical < logical_len) {
        if (is_marker(markers, p)) {
            if (wire > 0 && p - hdr > maxoff)
                maxoff = p - hdr;
            p += 4;
            wire += 4;
            continue;
        }
        if (logical == 0)
            hdr = p;
        /* Up to the next marker position or the end, whichever is first. */
        uint32_t step = logical_len - logical;
        if (markers && UW_MPA_MARKER_INTERVAL - p % UW_MPA_MARKER_INTERVAL < step)
            step = UW_MPA_MARKER_INTERVAL - p % UW_MPA_MARKER_INTERVAL;
        logical += step;
        p += step;
        wire += step;
    }
    if (max_marker_off)
        *max_marker_off = maxoff;
    return wire;
}

/* ------------------------------------------------------------------------ */

void fz_log_init(fz_log *l)
{
    memset(l, 0, sizeof(*l));
}

void fz_log_free(fz_log *l)
{
    free(l->rec);
    free(l->data);
    fz_log_init(l);
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        abort();
    return q;
}

static void log_rec(fz_log *l, uint32_t pos, uint32_t len, uint32_t crc)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->rec = xrealloc(l->rec, l->cap * sizeof(*l->rec));
    }
    if (l->dlen + len > l->dcap || !l->data) {
        while (l->dlen + len > l->dcap)
            l->dcap = l->dcap ? 2 * l->dcap : 4096;
        l->data = xrealloc(l->data, l->dcap);
    }
    l->rec[l->n] = (fz_rec){pos, len, crc, l->dlen};
    l->n++;
}

void fz_log_add(fz_log *l, uint32_t pos, uint32_t len, uint32_t crc, const struct iovec *iov,
                size_t iovcnt)
{
    log_rec(l, pos, len, crc);
    size_t got = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        FZ_CHECK(got + iov[i].iov_len <= len);
        if (iov[i].iov_len)
            memcpy(l->data + l->dlen + got, iov[i].iov_base, iov[i].iov_len);
        got += iov[i].iov_len;
    }
    FZ_CHECK(got == len);
    l->dlen += len;
}

void fz_log_add_flat(fz_log *l, uint32_t pos, uint32_t len, uint32_t crc, const uint8_t *p)
{
    log_rec(l, pos, len, crc);
    if (len)
        memcpy(l->data + l->dlen, p, len);
    l->dlen += len;
}

bool fz_rec_equal(const fz_log *a, size_t i, const fz_log *b, size_t j, bool with_crc)
{
    const fz_rec *x = &a->rec[i], *y = &b->rec[j];
    if (x->pos != y->pos || x->len != y->len || (with_crc && x->crc != y->crc))
        return false;
    return x->len == 0 || memcmp(a->data + x->off, b->data + y->off, x->len) == 0;
}

bool fz_log_equal(const fz_log *a, const fz_log *b, bool with_crc)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (!fz_rec_equal(a, i, b, i, with_crc))
            return false;
    return true;
}

/* ------------------------------------------------------------------------ */

static uint32_t rd_be16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

void fz_ref_decode(uint8_t *s, size_t n, uint32_t pos, unsigned flags, uint32_t max_ulpdu,
                   fz_rng *repair, fz_log *log, fz_ref_result *res)
{
    bool markers = flags & UW_MPA_MARKERS, crc_on = flags & UW_MPA_CRC;
    uint32_t max = max_ulpdu ? max_ulpdu : 65535u;
    uint8_t *payload = xrealloc(NULL, 65536);
    size_t i = 0;
    uint32_t p = pos;
    memset(res, 0, sizeof(*res));
    while (i < n) {
        uint32_t fpdu_pos = p;
        bool fix = repair && fz_rng_below(repair, 4) != 0;
        uint32_t crc = 0xFFFFFFFFu, hdr = p, ulen = 0, logical = 0, logical_len = 0, crc_at = 0;
        uint8_t lenf[2] = {0, 0}, crcf[4] = {0, 0, 0, 0};
        bool marker_bad = false;
        for (;;) {
            /* A marker right after the CRC field belongs to the next FPDU. */
            if (logical_len && logical == logical_len)
                break;
            if (i >= n)
                goto truncated;
            if (is_marker(markers, p)) {
                /* FPDUPTR: 0 for a marker that starts the FPDU, else the
                 * distance back to the ULPDU_Length field (RFC 5044 4.3). */
                uint32_t want = logical == 0 ? 0 : p - hdr;
                if (n - i < 4)
                    goto truncated;
                if (fix) {
                    s[i] = s[i + 1] = 0;
                    s[i + 2] = (uint8_t)(want >> 8);
                    s[i + 3] = (uint8_t)want;
                }
                if ((rd_be16(s + i + 2) & ~3u) != (want & ~3u))
                    marker_bad = true;
                /* Covered by the CRC when before the CRC field (RFC 5044 4.4). */
                if (crc_on && (!logical_len || logical <= crc_at))
                    crc = fz_crc32c(crc, s + i, 4);
                i += 4;
                p += 4;
                continue;
            }
            if (logical == 0)
                hdr = p;
            if (logical < 2) {
                lenf[logical] = s[i];
            } else if (logical < 2 + ulen) {
                payload[logical - 2] = s[i];
            } else if (logical >= crc_at) {
                uint32_t k = logical - crc_at;
                if (fix && crc_on) {
                    uint32_t v = crc ^ 0xFFFFFFFFu;
                    s[i] = (uint8_t)(v >> (8 * k)); /* least significant octet first */
                }
                crcf[k] = s[i];
            }
            if (crc_on && (!logical_len || logical < crc_at))
                crc = fz_crc32c(crc, s + i, 1);
            i++;
            p++;
            logical++;
            if (logical == 2) {
                ulen = rd_be16(lenf);
                if (ulen > max) {
                    res->err = UW_EMPA_ULPDU_TOO_LONG;
                    res->err_pos = fpdu_pos;
                    goto out;
                }
                crc_at = 2 + ulen + pad_of(ulen);
                logical_len = crc_at + 4;
            }
        }
        uint32_t got = (uint32_t)crcf[0] | (uint32_t)crcf[1] << 8 | (uint32_t)crcf[2] << 16 |
                       (uint32_t)crcf[3] << 24;
        /* RFC 5044 8: CRC first; a marker error only "in the event that the
         * CRC is valid". */
        if (crc_on && (crc ^ 0xFFFFFFFFu) != got) {
            res->err = UW_EMPA_CRC;
            res->err_pos = fpdu_pos;
            goto out;
        }
        if (marker_bad) {
            res->err = UW_EMPA_MARKER;
            res->err_pos = fpdu_pos;
            goto out;
        }
        fz_log_add_flat(log, fpdu_pos, ulen, got, payload);
        res->good_end = i;
        continue;
    truncated:
        res->err = UW_EMPA_TRUNCATED;
        res->err_pos = fpdu_pos;
        goto out;
    }
out:
    free(payload);
}

/* ------------------------------------------------------------------------ */

static void *fail_alloc(void *ud, size_t size)
{
    fz_failalloc *f = ud;
    if (++f->count == f->fail_at)
        return NULL;
    return malloc(size);
}

static void fail_free(void *ud, void *ptr)
{
    (void)ud;
    free(ptr);
}

void fz_failalloc_init(fz_failalloc *f, unsigned long fail_at)
{
    f->a.alloc = fail_alloc;
    f->a.free = fail_free;
    f->a.ud = f;
    f->count = 0;
    f->fail_at = fail_at;
}

/* ------------------------------------------------------------------------ */

void fz_ulpdus_read(fz_ulpdus *u, fz_in *in, fz_rng *r, size_t max_count, size_t max_total)
{
    memset(u, 0, sizeof(*u));
    u->len = xrealloc(NULL, max_count * sizeof(*u->len));
    u->off = xrealloc(NULL, max_count * sizeof(*u->off));
    size_t cap = 4096;
    u->data = xrealloc(NULL, cap);
    while (fz_left(in) && u->count < max_count) {
        uint8_t b = fz_u8(in);
        size_t len;
        const uint8_t *src = NULL;
        if (b < 0xF0) {
            len = b;
            src = fz_take(in, &len);
        } else {
            len = fz_u16(in);
        }
        if (u->total + len > max_total)
            break;
        if (u->total + len > cap) {
            while (u->total + len > cap)
                cap = cap ? 2 * cap : 65536;
            u->data = xrealloc(u->data, cap);
        }
        uint8_t *dst = u->data + u->total;
        if (src)
            memcpy(dst, src, len);
        else if (b == 0xF0)
            memset(dst, 0, len);
        else
            fz_rng_fill(r, dst, len);
        u->len[u->count] = (uint32_t)len;
        u->off[u->count] = u->total;
        u->count++;
        u->total += len;
    }
}

void fz_ulpdus_free(fz_ulpdus *u)
{
    free(u->len);
    free(u->off);
    free(u->data);
    memset(u, 0, sizeof(*u));
}
