/* FPDU transmit (RFC 5044 4.1-4.5): frame a ULPDU without copying it. */
#include <string.h>

#include "mpa/fpdu_walk.h"
#include "uwarp/crc32c.h"
#include "uwarp/mpa.h"

uint32_t uw_mpa_mulpdu(uint32_t emss, bool markers)
{
    /* RFC 5044 4.5; the subtraction is done in 64 bits so tiny EMSS values
     * cannot wrap before the clamp to 128. */
    int64_t e = emss;
    int64_t m = markers ? e - (6 + 4 * ((e + 511) / 512) + e % 4) : e - (6 + e % 4);
    if (m < UW_MPA_MULPDU_MIN)
        return UW_MPA_MULPDU_MIN;
    if (m > UW_MPA_MULPDU_MAX)
        return UW_MPA_MULPDU_MAX;
    return (uint32_t)m;
}

size_t uw_mpa_fpdu_iov_max(size_t ulpdu_iovcnt, size_t ulpdu_len)
{
    /* Each marker adds its own iovec and may split one data iovec in two. */
    size_t markers = (ulpdu_len + 9) / (UW_MPA_MARKER_INTERVAL - UW_MPA_MARKER_LEN) + 2;
    if (markers > UW__MAX_MARKERS)
        markers = UW__MAX_MARKERS;
    return ulpdu_iovcnt + 4 + 2 * markers;
}

size_t uw_mpa_fpdu_wire_len(size_t ulpdu_len, uint32_t pos, unsigned flags)
{
    if (ulpdu_len > UINT16_MAX)
        return 0;
    return uw__fpdu_wire_len(pos, (uint32_t)ulpdu_len, flags & UW_MPA_MARKERS);
}

static void put_be16(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* The CRC goes least-significant octet first, as iSCSI digests do. */
static void put_crc(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* A marker whose FPDUPTR is ptr (RFC 5044 4.2: 16 bits, reserved half 0). */
static int put_marker(uint8_t *p, uint32_t ptr)
{
    if (ptr > UINT16_MAX)
        return UW_EMSGSIZE;
    put_be16(p, 0);
    put_be16(p + 2, ptr);
    return 0;
}

/* The ULPDU's length, or UW_EMSGSIZE past the 16-bit ULPDU_Length. */
static ssize_t ulpdu_len(const struct iovec *ulpdu, size_t cnt)
{
    size_t n = 0;
    for (size_t i = 0; i < cnt; i++)
        n += ulpdu[i].iov_len;
    return n > UINT16_MAX ? UW_EMSGSIZE : (ssize_t)n;
}

/* The next piece, at most left octets, of the payload given as ulpdu[]
 * from the cursor (*src, *off), which it advances past the piece. */
static size_t ul_next(const struct iovec *ulpdu, size_t *src, size_t *off, size_t left,
                      const uint8_t **q)
{
    while (ulpdu[*src].iov_len == *off) {
        (*src)++;
        *off = 0;
    }
    size_t take = ulpdu[*src].iov_len - *off;
    if (take > left)
        take = left;
    *q = (const uint8_t *)ulpdu[*src].iov_base + *off;
    *off += take;
    return take;
}

/* Appends [base, base+len) to iov, merging with the previous entry when the
 * memory is contiguous (pad and CRC usually are). */
static int emit(struct iovec *iov, size_t cap, size_t *cnt, const uint8_t *base, size_t len)
{
    if (len == 0)
        return 0;
    if (*cnt > 0) {
        struct iovec *prev = &iov[*cnt - 1];
        if ((const uint8_t *)prev->iov_base + prev->iov_len == base) {
            prev->iov_len += len;
            return 0;
        }
    }
    if (*cnt >= cap)
        return UW_ENOBUFS;
    iov[*cnt].iov_base = (void *)base;
    iov[(*cnt)++].iov_len = len;
    return 0;
}

/* No marker can split anything: length, payload pieces, trailer. The length
 * field (len2) and the trailer (trailer7: pad and CRC) live in the caller's
 * storage, which iov[] points into; adjacent, they merge into one iovec. */
ssize_t uw__fpdu_build_plain(uint8_t *len2, uint8_t *trailer7, struct iovec *iov, size_t iov_cap,
                             const struct iovec *ulpdu, size_t ulpdu_iovcnt, unsigned flags,
                             uint32_t *crc_out, size_t *wire_len)
{
    ssize_t total = ulpdu_len(ulpdu, ulpdu_iovcnt);
    if (total < 0)
        return total;
    size_t n = (size_t)total;
    uint32_t pad = uw__mpa_pad((uint32_t)n);
    memset(trailer7, 0, 7); /* pad MUST be zero (RFC 5044 4.1) */
    put_be16(len2, (uint32_t)n);
    size_t cnt = 0;
    uint32_t crc = uw_crc32c_init();
    bool want = flags & UW_MPA_CRC;
    if (want)
        crc = uw_crc32c_update(crc, len2, 2);
    int rc = emit(iov, iov_cap, &cnt, len2, 2);
    for (size_t i = 0; rc == 0 && i < ulpdu_iovcnt; i++) {
        if (want)
            crc = uw_crc32c_update(crc, ulpdu[i].iov_base, ulpdu[i].iov_len);
        rc = emit(iov, iov_cap, &cnt, ulpdu[i].iov_base, ulpdu[i].iov_len);
    }
    if (rc == 0)
        rc = emit(iov, iov_cap, &cnt, trailer7, pad + 4);
    if (rc)
        return rc;
    *crc_out = 0;
    if (want) {
        uint32_t v = uw_crc32c_final(uw_crc32c_update(crc, trailer7, pad));
        put_crc(trailer7 + pad, v);
        *crc_out = v;
    }
    *wire_len = 2 + n + pad + 4;
    return (ssize_t)cnt;
}

ssize_t uw_mpa_fpdu_build(uw_mpa_fpdu *f, struct iovec *iov, size_t iov_cap,
                          const struct iovec *ulpdu, size_t ulpdu_iovcnt, uint32_t pos,
                          unsigned flags)
{
    if (!f || !iov || (ulpdu_iovcnt && !ulpdu))
        return UW_EINVAL;
    ssize_t total = ulpdu_len(ulpdu, ulpdu_iovcnt);
    if (total < 0)
        return total;
    size_t n = (size_t)total;

    bool markers = flags & UW_MPA_MARKERS;
    uint32_t pad = uw__mpa_pad((uint32_t)n);
    memset(f->lead_, 0, sizeof(f->lead_));
    memset(f->trailer_, 0, sizeof(f->trailer_)); /* pad MUST be zero (RFC 5044 4.1) */
    put_be16(f->len_, (uint32_t)n);
    uint8_t *crc_field = f->trailer_ + pad;

    if (!markers) {
        size_t wire;
        ssize_t k = uw__fpdu_build_plain(f->len_, f->trailer_, iov, iov_cap, ulpdu, ulpdu_iovcnt,
                                         flags, &f->crc, &wire);
        if (k >= 0) {
            f->wire_len = wire;
            f->next_pos = pos + (uint32_t)wire;
        }
        return k;
    }

    uw__walk w;
    uw__run r;
    uw__walk_init(&w, pos, (uint32_t)n, markers);
    uint32_t crc = uw_crc32c_init();
    size_t cnt = 0, nmark = 0;
    size_t src = 0, src_off = 0; /* cursor in ulpdu[] */
    int rc = 0;

    while (rc == 0 && uw__walk_next(&w, &r)) {
        const uint8_t *p = NULL;
        switch (r.field) {
        case UW__F_MARKER:
            if (r.wire == 0) {
                p = f->lead_;
            } else {
                if (nmark >= UW__MAX_MARKERS)
                    return UW_EMSGSIZE;
                uint8_t *m = f->markers_[nmark++];
                if (put_marker(m, r.fpduptr) < 0)
                    return UW_EMSGSIZE;
                p = m;
            }
            break;
        case UW__F_LEN:
            p = f->len_ + r.logical;
            break;
        case UW__F_PAD:
            p = f->trailer_ + (r.logical - w.bound[1]);
            break;
        case UW__F_CRC:
            p = crc_field + (r.logical - w.bound[2]);
            break;
        case UW__F_PAYLOAD: {
            /* A run may span several caller iovecs. */
            uint32_t left = r.len;
            while (left) {
                const uint8_t *q;
                size_t take = ul_next(ulpdu, &src, &src_off, left, &q);
                if (flags & UW_MPA_CRC)
                    crc = uw_crc32c_update(crc, q, take);
                rc = emit(iov, iov_cap, &cnt, q, take);
                if (rc)
                    return rc;
                left -= (uint32_t)take;
            }
            continue;
        }
        }
        if ((flags & UW_MPA_CRC) && r.in_crc)
            crc = uw_crc32c_update(crc, p, r.len);
        rc = emit(iov, iov_cap, &cnt, p, r.len);
    }
    if (rc)
        return rc;

    f->crc = 0;
    if (flags & UW_MPA_CRC) {
        /* Sent least-significant octet first, as iSCSI digests are. */
        f->crc = uw_crc32c_final(crc);
        crc_field[0] = (uint8_t)f->crc;
        crc_field[1] = (uint8_t)(f->crc >> 8);
        crc_field[2] = (uint8_t)(f->crc >> 16);
        crc_field[3] = (uint8_t)(f->crc >> 24);
    }
    f->wire_len = w.wire;
    f->next_pos = pos + w.wire;
    return (ssize_t)cnt;
}

/* Small FPDUs without markers: one contiguous image, one CRC pass. */
ssize_t uw__fpdu_build_flat(uint8_t *out, size_t cap, const struct iovec *ulpdu,
                            size_t ulpdu_iovcnt, unsigned flags, uint32_t *crc_out)
{
    ssize_t total = ulpdu_len(ulpdu, ulpdu_iovcnt);
    if (total < 0)
        return total;
    size_t n = (size_t)total;
    uint32_t pad = uw__mpa_pad((uint32_t)n);
    size_t body = 2 + n + pad;
    if (body + 4 > cap)
        return UW_ENOBUFS;
    put_be16(out, (uint32_t)n);
    uint8_t *d = out + 2;
    for (size_t i = 0; i < ulpdu_iovcnt; i++) {
        if (ulpdu[i].iov_len)
            memcpy(d, ulpdu[i].iov_base, ulpdu[i].iov_len);
        d += ulpdu[i].iov_len;
    }
    memset(d, 0, pad + 4); /* pad MUST be zero (RFC 5044 4.1) */
    uint32_t v = 0;
    if (flags & UW_MPA_CRC) {
        /* One pass over contiguous octets: cheaper than one per piece. */
        v = uw_crc32c_final(uw_crc32c_update(uw_crc32c_init(), out, body));
        put_crc(out + body, v);
    }
    *crc_out = v;
    return (ssize_t)(body + 4);
}

/* One pass copies the wire image; the CRC then runs over it as one
 * contiguous region while it is still in cache. With markers this beats
 * both a CRC call per 508-octet run and a kernel copy of some 260 iovecs. */
ssize_t uw_mpa_fpdu_copy(uw_mpa_fpdu *f, uint8_t *out, size_t cap, const struct iovec *ulpdu,
                         size_t ulpdu_iovcnt, uint32_t pos, unsigned flags)
{
    if (!f || !out || (ulpdu_iovcnt && !ulpdu))
        return UW_EINVAL;
    bool markers = flags & UW_MPA_MARKERS;
    if (!markers) {
        ssize_t k = uw__fpdu_build_flat(out, cap, ulpdu, ulpdu_iovcnt, flags, &f->crc);
        if (k > 0) {
            f->wire_len = (size_t)k;
            f->next_pos = pos + (uint32_t)k;
        }
        return k;
    }
    ssize_t total = ulpdu_len(ulpdu, ulpdu_iovcnt);
    if (total < 0)
        return total;
    uint32_t n = (uint32_t)total, pad = uw__mpa_pad(n);
    /* The logical FPDU (length, payload, pad, CRC) is copied in pieces that
     * stop at each marker position: one memcpy per 508 octets of payload in
     * the common case, where a run-by-run walk (uw__walk_next) cost about
     * as much again as the copy itself. The octets equal the walk's, which
     * test_copy_matches_build checks. */
    const uint32_t lend = 2, pend = 2 + n, padend = pend + pad, L = padend + 4;
    const uint32_t hdr = pos % UW_MPA_MARKER_INTERVAL == 0 ? UW_MPA_MARKER_LEN : 0;
    uint32_t next_mk = (UW_MPA_MARKER_INTERVAL - pos % UW_MPA_MARKER_INTERVAL) %
                       UW_MPA_MARKER_INTERVAL; /* wire offset of the next marker */
    uint32_t wire = 0, lg = 0, crc_at = 0;
    size_t src = 0, src_off = 0;
    uint8_t len_be[2];
    put_be16(len_be, n);
    while (lg < L) {
        if (wire == next_mk) {
            if (wire + UW_MPA_MARKER_LEN > cap)
                return UW_ENOBUFS;
            if (put_marker(out + wire, wire == 0 ? 0 : wire - hdr) < 0)
                return UW_EMSGSIZE;
            wire += UW_MPA_MARKER_LEN;
            next_mk += UW_MPA_MARKER_INTERVAL;
            continue;
        }
        uint32_t step = next_mk - wire;
        if (lg >= lend && step < pend - lg && wire + step + UW_MPA_MARKER_LEN <= cap &&
            ulpdu[src].iov_len - src_off >= step) {
            /* Steady state: a whole interval of payload from one piece, then
             * the marker after it; nothing else to decide. */
            const uint8_t *q = (const uint8_t *)ulpdu[src].iov_base + src_off;
            memcpy(out + wire, q, step);
            src_off += step;
            lg += step;
            wire += step;
            if (put_marker(out + wire, wire - hdr) < 0)
                return UW_EMSGSIZE;
            wire += UW_MPA_MARKER_LEN;
            next_mk += UW_MPA_MARKER_INTERVAL;
            continue;
        }
        if (step > L - lg)
            step = L - lg;
        if (wire + step > cap)
            return UW_ENOBUFS;
        uint8_t *d = out + wire;
        wire += step;
        while (step) {
            uint32_t take;
            if (lg < lend) {
                take = lend - lg < step ? lend - lg : step;
                memcpy(d, len_be + lg, take);
            } else if (lg < pend) {
                const uint8_t *q;
                take = (uint32_t)ul_next(ulpdu, &src, &src_off, pend - lg < step ? pend - lg : step,
                                         &q);
                memcpy(d, q, take);
            } else {
                if (lg >= padend && !crc_at)
                    crc_at = (uint32_t)(d - out); /* the CRC field starts here */
                uint32_t fend = lg < padend ? padend : L;
                take = fend - lg < step ? fend - lg : step;
                memset(d, 0, take); /* pad MUST be zero (RFC 5044 4.1); CRC below */
            }
            d += take;
            lg += take;
            step -= take;
        }
    }
    /* Every octet before the CRC field is covered, markers included
     * (RFC 5044 4.4); markers inside or after it are not. */
    uint32_t v = 0;
    if (flags & UW_MPA_CRC)
        v = uw_crc32c_final(uw_crc32c_update(uw_crc32c_init(), out, crc_at));
    uint8_t le[4];
    put_crc(le, v);
    /* A marker can split the CRC field once: write it around the marker. */
    for (uint32_t k = 0, at = crc_at; k < 4; at++) {
        if ((pos + at) % UW_MPA_MARKER_INTERVAL == 0 && at != crc_at) {
            at += UW_MPA_MARKER_LEN - 1;
            continue;
        }
        out[at] = le[k++];
    }
    f->crc = v;
    f->wire_len = wire;
    f->next_pos = pos + wire;
    return (ssize_t)wire;
}

ssize_t uw_mpa_fpdu_encode(uint8_t *out, size_t cap, const void *ulpdu, size_t ulpdu_len,
                           uint32_t pos, unsigned flags)
{
    uw_mpa_fpdu f;
    struct iovec in = {(void *)ulpdu, ulpdu_len};
    return uw_mpa_fpdu_copy(&f, out, cap, &in, 1, pos, flags);
}
