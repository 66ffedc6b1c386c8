/* Streaming FPDU decoder for an in-order byte stream (RFC 5044 4, 6, 8).
 *
 * Two paths share one geometry (fpdu_walk.h). When a whole FPDU sits in the
 * caller's buffer it is validated in place and handed out as iovecs into that
 * buffer, markers skipped, no copy. Otherwise the FPDU is collected run by run
 * into a reassembly buffer, which copes with any split down to one octet.
 */
#include <stdlib.h>
#include <string.h>

#include "mpa/fpdu_walk.h"
#include "uwarp/crc32c.h"
#include "uwarp/mpa.h"
#include "util/alloc.h"

struct uw_mpa_rx {
    uw_allocator alloc;
    unsigned flags;
    uint32_t max_ulpdu;
    uint32_t pos; /* stream position of the next octet */
    int err;
    uint32_t err_pos;

    /* FPDU in progress on the slow path. */
    bool active;
    bool have_run;
    bool marker_bad;
    uint32_t fpdu_pos;
    uint32_t run_off;
    uint32_t crc;
    uw__walk w;
    uw__run run;
    uint8_t lenf[2];
    uint8_t mark[4];
    uint8_t crcf[4];
    uint8_t *buf; /* max_ulpdu octets */

    struct iovec iov[UW__MAX_MARKERS + 2];
};

int uw_mpa_rx_create(uw_mpa_rx **out, const uw_mpa_rx_opts *o)
{
    if (!out || !o || o->max_ulpdu > UINT16_MAX)
        return UW_EINVAL;
    uw_allocator a = uw__allocator(o->alloc);
    uw_mpa_rx *rx = a.alloc(a.ud, sizeof(*rx));
    if (!rx)
        return UW_ENOMEM;
    memset(rx, 0, sizeof(*rx));
    rx->alloc = a;
    rx->flags = o->flags & (UW_MPA_MARKERS | UW_MPA_CRC);
    rx->max_ulpdu = o->max_ulpdu ? o->max_ulpdu : UINT16_MAX;
    rx->pos = o->pos;
    rx->buf = a.alloc(a.ud, rx->max_ulpdu ? rx->max_ulpdu : 1);
    if (!rx->buf) {
        a.free(a.ud, rx);
        return UW_ENOMEM;
    }
    *out = rx;
    return 0;
}

void uw_mpa_rx_destroy(uw_mpa_rx *rx)
{
    if (!rx)
        return;
    rx->alloc.free(rx->alloc.ud, rx->buf);
    rx->alloc.free(rx->alloc.ud, rx);
}

static uint32_t be16(const uint8_t *p)
{
    return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static ssize_t fail(uw_mpa_rx *rx, int err, uint32_t fpdu_pos)
{
    rx->err = err;
    rx->err_pos = fpdu_pos;
    rx->active = false;
    return err;
}

/* CRC before markers: RFC 5044 8 reports code 3 only "in the event that the
 * CRC is valid". */
static int verify(const uw_mpa_rx *rx, uint32_t crc, const uint8_t *crcf, bool marker_bad)
{
    if ((rx->flags & UW_MPA_CRC) && uw_crc32c_final(crc) != le32(crcf))
        return UW_EMPA_CRC;
    if (marker_bad)
        return UW_EMPA_MARKER;
    return 0;
}

/* Validates a whole FPDU lying in p[0..avail) without copying. Returns the
 * octets used (0 when the FPDU is not all there, or its length field is split
 * by a marker), or an error. */
static ssize_t fast(uw_mpa_rx *rx, const uint8_t *p, size_t avail, uw_mpa_ulpdu_cb cb, void *ud,
                    bool *paused)
{
    bool mk = rx->flags & UW_MPA_MARKERS;
    uint32_t hdr = (mk && rx->pos % UW_MPA_MARKER_INTERVAL == 0) ? UW_MPA_MARKER_LEN : 0;
    if (avail < hdr + 2u || (mk && (rx->pos + hdr) % UW_MPA_MARKER_INTERVAL == 511))
        return 0;
    uint32_t n = be16(p + hdr);
    if (n > rx->max_ulpdu)
        return fail(rx, UW_EMPA_ULPDU_TOO_LONG, rx->pos);
    uw__walk w;
    uw__run r;
    uw__walk_init(&w, rx->pos, n, mk);
    if (avail < (mk ? uw__fpdu_wire_len(rx->pos, n, true) : w.bound[3]))
        return 0;

    uint32_t crc = uw_crc32c_init();
    bool want_crc = rx->flags & UW_MPA_CRC, marker_bad = false;
    size_t cnt = 0;
    const uint8_t *crcf = NULL;
    while (uw__walk_next(&w, &r)) {
        const uint8_t *q = p + r.wire;
        if (want_crc && r.in_crc)
            crc = uw_crc32c_update(crc, q, r.len);
        if (r.field == UW__F_MARKER) {
            marker_bad |= !uw__marker_ok(q, r.fpduptr);
        } else if (r.field == UW__F_PAYLOAD) {
            rx->iov[cnt].iov_base = (void *)q;
            rx->iov[cnt++].iov_len = r.len;
        } else if (r.field == UW__F_CRC && r.logical == w.bound[2]) {
            /* Only a misaligned stream can split the CRC field; then take
             * the slow path, which reassembles it. */
            if (r.len != 4)
                return 0;
            crcf = q;
        }
    }
    int err = verify(rx, crc, crcf, marker_bad);
    if (err)
        return fail(rx, err, rx->pos);
    uw_mpa_ulpdu u = {rx->iov, cnt, n, rx->pos, le32(crcf)};
    rx->pos += w.wire;
    *paused = cb && cb(ud, &u) != 0;
    return w.wire;
}

static void slow_start(uw_mpa_rx *rx)
{
    rx->active = true;
    rx->have_run = false;
    rx->marker_bad = false;
    rx->fpdu_pos = rx->pos;
    rx->crc = uw_crc32c_init();
    /* The length is not known yet; the runs before it do not depend on it. */
    uw__walk_init(&rx->w, rx->pos, 0, rx->flags & UW_MPA_MARKERS);
}

/* Takes octets of the FPDU in progress, run by run. Returns octets used (it
 * stops after the FPDU completes) or an error. */
static ssize_t slow(uw_mpa_rx *rx, const uint8_t *p, size_t avail, uw_mpa_ulpdu_cb cb, void *ud,
                    bool *paused)
{
    size_t used = 0;
    while (used < avail) {
        if (!rx->have_run) {
            if (!uw__walk_next(&rx->w, &rx->run))
                return fail(rx, UW_EPROTO, rx->fpdu_pos); /* unreachable: completion ends it */
            rx->have_run = true;
            rx->run_off = 0;
        }
        uw__run *r = &rx->run;
        size_t take = r->len - rx->run_off;
        if (take > avail - used)
            take = avail - used;
        const uint8_t *q = p + used;
        uint32_t at = r->logical + rx->run_off;
        if ((rx->flags & UW_MPA_CRC) && r->in_crc)
            rx->crc = uw_crc32c_update(rx->crc, q, take);
        switch (r->field) {
        case UW__F_MARKER:
            memcpy(rx->mark + rx->run_off, q, take);
            break;
        case UW__F_LEN:
            memcpy(rx->lenf + at, q, take);
            break;
        case UW__F_PAYLOAD:
            memcpy(rx->buf + (at - 2), q, take);
            break;
        case UW__F_CRC:
            memcpy(rx->crcf + (at - rx->w.bound[2]), q, take);
            break;
        default: /* pad: covered by the CRC, otherwise ignored (RFC 5044 4.1) */
            break;
        }
        rx->run_off += (uint32_t)take;
        rx->pos += (uint32_t)take;
        used += take;
        if (rx->run_off < r->len)
            break;
        rx->have_run = false;
        if (r->field == UW__F_MARKER) {
            rx->marker_bad |= !uw__marker_ok(rx->mark, r->fpduptr);
        } else if (r->field == UW__F_LEN && r->logical + r->len == 2) {
            uint32_t n = be16(rx->lenf);
            if (n > rx->max_ulpdu)
                return fail(rx, UW_EMPA_ULPDU_TOO_LONG, rx->fpdu_pos);
            uw__walk_set_len(&rx->w, n);
        } else if (r->field == UW__F_CRC && r->logical + r->len == rx->w.bound[3]) {
            int err = verify(rx, rx->crc, rx->crcf, rx->marker_bad);
            if (err)
                return fail(rx, err, rx->fpdu_pos);
            uint32_t n = rx->w.bound[1] - 2;
            rx->iov[0].iov_base = rx->buf;
            rx->iov[0].iov_len = n;
            uw_mpa_ulpdu u = {rx->iov, n ? 1u : 0u, n, rx->fpdu_pos, le32(rx->crcf)};
            rx->active = false;
            *paused = cb && cb(ud, &u) != 0;
            return (ssize_t)used;
        }
    }
    return (ssize_t)used;
}

ssize_t uw_mpa_rx_feed(uw_mpa_rx *rx, const void *data, size_t len, uw_mpa_ulpdu_cb cb, void *ud)
{
    if (!rx || (len && !data))
        return UW_EINVAL;
    if (rx->err)
        return rx->err;
    const uint8_t *p = data;
    size_t off = 0;
    bool paused = false;
    while (off < len && !paused) {
        ssize_t used = 0;
        if (!rx->active)
            used = fast(rx, p + off, len - off, cb, ud, &paused);
        if (used == 0) {
            if (!rx->active)
                slow_start(rx);
            used = slow(rx, p + off, len - off, cb, ud, &paused);
        }
        if (used < 0)
            return used;
        off += (size_t)used;
    }
    return (ssize_t)off;
}

int uw_mpa_rx_finish(uw_mpa_rx *rx)
{
    if (!rx)
        return UW_EINVAL;
    if (rx->err)
        return rx->err;
    if (rx->active)
        return (int)fail(rx, UW_EMPA_TRUNCATED, rx->fpdu_pos);
    return 0;
}

int uw_mpa_rx_error(const uw_mpa_rx *rx)
{
    return rx->err;
}

uint32_t uw_mpa_rx_error_pos(const uw_mpa_rx *rx)
{
    return rx->err_pos;
}

uint32_t uw_mpa_rx_pos(const uw_mpa_rx *rx)
{
    return rx->pos;
}
